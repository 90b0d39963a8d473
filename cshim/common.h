/* The code the shims share (vulkan.c and metal.m include it once, after
 * shim.h and the C library headers): error messages, the process's message
 * list, and small helpers. It behaves the same for every API; what differs
 * per API stays in its shim. */
#ifndef GC_COMMON_H
#define GC_COMMON_H

#define GC_MAX_MESSAGES 4096u

/* ---------------------------------------------------------------- errors */

static char *vformat(const char *fmt, va_list ap) {
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0) {
		return NULL;
	}
	char *s = malloc((size_t)n + 1);
	if (s != NULL) {
		vsnprintf(s, (size_t)n + 1, fmt, ap);
	}
	return s;
}

static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	char *s = vformat(fmt, ap);
	va_end(ap);
	return s;
}

/* fail fills *err (when not NULL) and returns st. */
static gc_status fail(gc_error *err, gc_status st, int32_t native, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static gc_status fail(gc_error *err, gc_status st, int32_t native, const char *fmt, ...) {
	if (err != NULL) {
		va_list ap;
		va_start(ap, fmt);
		err->native = native;
		err->msg = vformat(fmt, ap);
		va_end(ap);
	}
	return st;
}

/* --------------------------------------------------------------- helpers */

/* copy_name copies src (NULL: empty) into a GC_NAME_MAX field. */
static void copy_name(char *dst, const char *src) {
	snprintf(dst, GC_NAME_MAX, "%s", src != NULL ? src : "");
}

static void add_counter(uint64_t *c, uint64_t n) {
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static int env_is_1(const char *name) {
	const char *v = getenv(name);
	return v != NULL && strcmp(v, "1") == 0;
}

/* -------------------------------------------------------------- messages */

/* The messages the API reports (Vulkan's validation layer, Metal's
 * compiler warnings), recorded from any thread; at most GC_MAX_MESSAGES are
 * kept, the others counted as dropped. */
static struct {
	pthread_mutex_t mu;
	char **items;
	size_t n, cap;
	uint64_t count;   /* recorded since init */
	uint64_t dropped; /* not kept because the list was full */
} msgs = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* record_message takes m (malloc'd; NULL is ignored). */
static void record_message(char *m) {
	if (m == NULL) {
		return;
	}
	pthread_mutex_lock(&msgs.mu);
	msgs.count++;
	if (msgs.n == msgs.cap && msgs.cap < GC_MAX_MESSAGES) {
		size_t cap = msgs.cap ? msgs.cap * 2 : 16;
		char **items = realloc(msgs.items, cap * sizeof *items);
		if (items != NULL) {
			msgs.items = items;
			msgs.cap = cap;
		}
	}
	if (msgs.n < msgs.cap) {
		msgs.items[msgs.n++] = m;
	} else {
		msgs.dropped++;
		free(m);
	}
	pthread_mutex_unlock(&msgs.mu);
}

/* message_count is the ABI's message_count. */
static gc_status message_count(uint64_t *count, gc_error *err) {
	if (count == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "message_count: count is NULL");
	}
	pthread_mutex_lock(&msgs.mu);
	*count = msgs.count;
	pthread_mutex_unlock(&msgs.mu);
	return GC_OK;
}

/* take_message is the ABI's take_message; kind names the messages in the
 * note that some were dropped. */
static gc_status take_message(char **msg, const char *kind, gc_error *err) {
	if (msg == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "take_message: msg is NULL");
	}
	*msg = NULL;
	pthread_mutex_lock(&msgs.mu);
	if (msgs.n > 0) {
		*msg = msgs.items[0];
		memmove(msgs.items, msgs.items + 1, (msgs.n - 1) * sizeof *msgs.items);
		msgs.n--;
	} else if (msgs.dropped > 0) {
		*msg = format("(%llu more %s were dropped: the list was full)", (unsigned long long)msgs.dropped, kind);
		msgs.dropped = 0;
	}
	pthread_mutex_unlock(&msgs.mu);
	return GC_OK;
}

#endif
