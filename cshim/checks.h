/* The argument checks the shims share (vulkan.c and metal.m include it
 * after their gc_buffer_s definition, which has dev and size, and a
 * definition of buffer_usable: whether a device may use another device's
 * buffer). */
#ifndef GC_CHECKS_H
#define GC_CHECKS_H

/* check_range checks that [off, +size) lies in b, a buffer d may use. */
static gc_status check_range(gc_device d, gc_buffer b, uint64_t off, uint64_t size, const char *what, gc_error *err) {
	if (b == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "%s: NULL buffer", what);
	}
	if (b->dev != d && !buffer_usable(d, b)) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "%s: buffer belongs to another device", what);
	}
	if (off > b->size || size > b->size - off) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "%s: range [%llu, +%llu) outside buffer of %llu bytes", what,
			    (unsigned long long)off, (unsigned long long)size, (unsigned long long)b->size);
	}
	return GC_OK;
}

/* check_copy checks a copy of size bytes between two ranges that do not
 * overlap. */
static gc_status check_copy(gc_device d, gc_buffer dst, uint64_t dst_off, gc_buffer src, uint64_t src_off, uint64_t size,
			    const char *what, gc_error *err) {
	if (d == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "%s: NULL device", what);
	}
	gc_status st = check_range(d, dst, dst_off, size, what, err);
	if (st == GC_OK) {
		st = check_range(d, src, src_off, size, what, err);
	}
	if (st == GC_OK && dst == src && size > 0 && dst_off < src_off + size && src_off < dst_off + size) {
		st = fail(err, GC_INVALID_ARGUMENT, 0, "%s: source and destination overlap", what);
	}
	return st;
}

#endif
