//go:build mpi && cgo

package mpi

/*
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>

// Every MPI call the package makes goes through one of these small functions.
// They take and return handles and results by value, so Go passes no pointer
// to its own memory except the message buffers themselves (which the caller
// pins while MPI holds them). Handles are opaque to Go: pointers in Open MPI,
// ints in MPICH.

static MPI_Request gm_request_null(void) { return MPI_REQUEST_NULL; }
static MPI_Comm gm_comm_null(void) { return MPI_COMM_NULL; }

static int gm_level(int i) {
	switch (i) {
	case 0: return MPI_THREAD_SINGLE;
	case 1: return MPI_THREAD_FUNNELED;
	case 2: return MPI_THREAD_SERIALIZED;
	default: return MPI_THREAD_MULTIPLE;
	}
}

static int gm_level_index(int level) {
	if (level == MPI_THREAD_SINGLE) return 0;
	if (level == MPI_THREAD_FUNNELED) return 1;
	if (level == MPI_THREAD_SERIALIZED) return 2;
	return 3;
}

typedef struct {
	int code;
	int provided;  // index 0..3: single, funneled, serialized, multiple
	int here;      // 1 when this call initialized MPI
	int finalized; // MPI was finalized already: it cannot start again
} gm_init_ret;

static gm_init_ret gm_init(int required) {
	gm_init_ret r = {0, 0, 0, 0};
	int flag = 0, provided = MPI_THREAD_SINGLE;
	MPI_Finalized(&flag);
	if (flag) {
		r.finalized = 1;
		return r;
	}
	MPI_Initialized(&flag);
	if (flag) {
		r.code = MPI_Query_thread(&provided);
	} else {
		r.code = MPI_Init_thread(NULL, NULL, gm_level(required), &provided);
		r.here = 1;
	}
	r.provided = gm_level_index(provided);
	return r;
}

static int gm_finalize(void) { return MPI_Finalize(); }

typedef struct {
	int code;
	const char *call;
	MPI_Comm comm;
	MPI_Comm diag;
	int rank;
	int size;
	int tag_ub;
	int local; // processes on this node (MPI_COMM_TYPE_SHARED), 0 if unknown
} gm_world_ret;

// gm_world makes errors on MPI_COMM_WORLD return instead of aborting, then
// duplicates it twice: one communicator for the caller's traffic, one for the
// package's arrival notices, so neither can match the other's messages.
static gm_world_ret gm_world(void) {
	gm_world_ret r;
	memset(&r, 0, sizeof r);
	r.comm = MPI_COMM_NULL;
	r.diag = MPI_COMM_NULL;
	r.call = "MPI_Comm_set_errhandler";
	if ((r.code = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)) != MPI_SUCCESS) return r;
	r.call = "MPI_Comm_dup";
	if ((r.code = MPI_Comm_dup(MPI_COMM_WORLD, &r.comm)) != MPI_SUCCESS) return r;
	if ((r.code = MPI_Comm_dup(MPI_COMM_WORLD, &r.diag)) != MPI_SUCCESS) return r;
	r.call = "MPI_Comm_set_errhandler";
	if ((r.code = MPI_Comm_set_errhandler(r.comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS) return r;
	if ((r.code = MPI_Comm_set_errhandler(r.diag, MPI_ERRORS_RETURN)) != MPI_SUCCESS) return r;
	r.call = "MPI_Comm_rank";
	if ((r.code = MPI_Comm_rank(r.comm, &r.rank)) != MPI_SUCCESS) return r;
	r.call = "MPI_Comm_size";
	if ((r.code = MPI_Comm_size(r.comm, &r.size)) != MPI_SUCCESS) return r;
	r.call = "MPI_Comm_get_attr";
	int *ub = NULL, flag = 0;
	if ((r.code = MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag)) != MPI_SUCCESS) return r;
	r.tag_ub = (flag && ub) ? *ub : 32767; // 32767 is the least MPI allows
	// Best effort: the number of processes that share this node, for the
	// progress thread's choice between spinning and backing off.
	MPI_Comm node = MPI_COMM_NULL;
	if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
	    node != MPI_COMM_NULL) {
		if (MPI_Comm_size(node, &r.local) != MPI_SUCCESS) r.local = 0;
		MPI_Comm_free(&node);
	}
	r.call = NULL;
	return r;
}

static int gm_comm_free(MPI_Comm c) { return MPI_Comm_free(&c); }

// gm_comms allocates n communicator handles, MPI_COMM_NULL each, for
// MPI_Comm_idup to fill: the handle must stay in place until its request
// completes, as MPI may write it only then.
static MPI_Comm *gm_comms(int n) {
	MPI_Comm *p = malloc(n * sizeof *p);
	for (int i = 0; p && i < n; i++) p[i] = MPI_COMM_NULL;
	return p;
}

static MPI_Comm gm_comm_at(MPI_Comm *p, int i) { return p[i]; }

typedef struct {
	int code;
	MPI_Request req;
} gm_req_ret;

static gm_req_ret gm_isend(void *buf, int count, int peer, int tag, MPI_Comm comm) {
	gm_req_ret r;
	r.req = MPI_REQUEST_NULL;
	r.code = MPI_Isend(buf, count, MPI_BYTE, peer, tag, comm, &r.req);
	return r;
}

static gm_req_ret gm_irecv(void *buf, int count, int peer, int tag, MPI_Comm comm) {
	gm_req_ret r;
	r.req = MPI_REQUEST_NULL;
	r.code = MPI_Irecv(buf, count, MPI_BYTE, peer, tag, comm, &r.req);
	return r;
}

typedef struct {
	int code;
	int flag;
	int count;
	int cancelled;
	MPI_Request req;
} gm_test_ret;

// gm_test is MPI_Test plus what the status says: the bytes received and
// whether the request was cancelled.
static gm_test_ret gm_test(MPI_Request req) {
	gm_test_ret r = {0, 0, 0, 0, req};
	MPI_Status st;
	memset(&st, 0, sizeof st);
	// A failed request reports its error as MPI_Test's result (the status's
	// MPI_ERROR field is only defined for the multiple-completion calls).
	r.code = MPI_Test(&r.req, &r.flag, &st);
	if (r.code == MPI_SUCCESS && r.flag) {
		MPI_Test_cancelled(&st, &r.cancelled);
		if (!r.cancelled) MPI_Get_count(&st, MPI_BYTE, &r.count);
	}
	return r;
}

typedef struct {
	int index; // into the requests given to gm_testsome
	int code;  // the request's error (MPI_ERR_IN_STATUS), MPI_SUCCESS otherwise
	int count; // bytes received
	int cancelled;
} gm_done;

static long gm_since(const struct timespec *t0) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

typedef struct {
	int k;    // requests completed, -1 when MPI_Testsome failed as a whole
	int code; // then its error
} gm_testsome_ret;

// gm_testsome calls MPI_Testsome on the n requests, again and again for up
// to spin_ns nanoseconds while none completes, and describes the completed
// ones in out (room for n). It returns how many completed, or -1 when
// MPI_Testsome failed as a whole (the caller then tests the requests one by
// one). Completed requests become MPI_REQUEST_NULL in reqs, except a failed
// one that MPI did not free. It stops spinning early once *news is set (a
// request to add to the set was posted).
static gm_testsome_ret gm_testsome(MPI_Request *reqs, int n, gm_done *out, long spin_ns, const int *news) {
	gm_testsome_ret r = {0, MPI_SUCCESS};
	enum { small = 64 };
	int idx_small[small];
	MPI_Status st_small[small];
	int *idx = idx_small;
	MPI_Status *st = st_small;
	if (n > small) {
		idx = malloc(n * sizeof *idx);
		st = malloc(n * sizeof *st);
		if (!idx || !st) {
			free(idx);
			free(st);
			r.k = -1;
			r.code = MPI_ERR_NO_MEM;
			return r;
		}
	}
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int outcount = 0;
		int rc = MPI_Testsome(n, reqs, &outcount, idx, st);
		if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
			r.k = -1;
			r.code = rc;
			break;
		}
		if (outcount == MPI_UNDEFINED) break; // every request was null
		if (outcount > 0) {
			for (int i = 0; i < outcount; i++) {
				gm_done *d = &out[i];
				d->index = idx[i];
				d->code = rc == MPI_ERR_IN_STATUS ? st[i].MPI_ERROR : MPI_SUCCESS;
				d->count = 0;
				d->cancelled = 0;
				if (d->code == MPI_SUCCESS) {
					MPI_Test_cancelled(&st[i], &d->cancelled);
					if (!d->cancelled) MPI_Get_count(&st[i], MPI_BYTE, &d->count);
				}
			}
			r.k = outcount;
			break;
		}
		if (gm_since(&t0) >= spin_ns || __atomic_load_n(news, __ATOMIC_RELAXED)) break;
	}
	if (idx != idx_small) {
		free(idx);
		free(st);
	}
	return r;
}

static int gm_cancel(MPI_Request req) { return MPI_Cancel(&req); }
static int gm_request_free(MPI_Request req) { return MPI_Request_free(&req); }

static gm_req_ret gm_iallgather(const void *mine, int count, void *all, MPI_Comm comm) {
	gm_req_ret r;
	r.req = MPI_REQUEST_NULL;
	r.code = MPI_Iallgather(mine, count, MPI_BYTE, all, count, MPI_BYTE, comm, &r.req);
	return r;
}

// gm_type is the MPI datatype of backend.DType dt, MPI_DATATYPE_NULL for
// the types MPI lacks (the 16- and 8-bit floats).
static MPI_Datatype gm_type(int dt) {
	switch (dt) {
	case 0: return MPI_FLOAT;
	case 1: return MPI_DOUBLE;
	case 2: return MPI_INT32_T;
	case 3: return MPI_UINT32_T;
	case 4: return MPI_INT64_T;
	case 5: return MPI_UINT64_T;
	case 6: return MPI_INT8_T;
	case 7: return MPI_UINT8_T;
	case 10: return MPI_INT16_T;
	case 11: return MPI_UINT16_T;
	}
	return MPI_DATATYPE_NULL;
}

// gm_op is the MPI operator of backend.Op op (sum, prod, max, min, band,
// bor, bxor, land, lor, lxor).
static MPI_Op gm_op(int op) {
	switch (op) {
	case 0: return MPI_SUM;
	case 1: return MPI_PROD;
	case 2: return MPI_MAX;
	case 3: return MPI_MIN;
	case 4: return MPI_BAND;
	case 5: return MPI_BOR;
	case 6: return MPI_BXOR;
	case 7: return MPI_LAND;
	case 8: return MPI_LOR;
	case 9: return MPI_LXOR;
	}
	return MPI_OP_NULL;
}

static int gm_has_type(int dt) { return gm_type(dt) != MPI_DATATYPE_NULL; }

// gm_iallreduce is MPI_Iallreduce of count elements of backend.DType
// dtype with backend.Op op; send NULL means in place.
static gm_req_ret gm_iallreduce(const void *send, void *recv, int count, int dtype, int op, MPI_Comm comm) {
	gm_req_ret r;
	r.req = MPI_REQUEST_NULL;
	r.code = MPI_Iallreduce(send ? send : MPI_IN_PLACE, recv, count, gm_type(dtype), gm_op(op), comm, &r.req);
	return r;
}

// gm_iallreduce_loop runs k calls of MPI_Iallreduce, each tested with
// MPI_Test in a spinning loop until done (a C program's loop:
// mpi/bench.sh's column E), and returns the seconds they took, or the
// code of the call that failed.
typedef struct {
	double secs;
	int code;
} gm_loop_ret;

static gm_loop_ret gm_iallreduce_loop(const void *send, void *recv, int count, int dtype, int op, MPI_Comm comm, int k) {
	gm_loop_ret r = {0, MPI_SUCCESS};
	double t0 = MPI_Wtime();
	for (int i = 0; i < k && r.code == MPI_SUCCESS; i++) {
		MPI_Request req = MPI_REQUEST_NULL;
		r.code = MPI_Iallreduce(send, recv, count, gm_type(dtype), gm_op(op), comm, &req);
		for (int done = 0; r.code == MPI_SUCCESS && !done;) r.code = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
	}
	r.secs = MPI_Wtime() - t0;
	return r;
}

// gm_ireduce is MPI_Ireduce to root; in_place (the root's only) sends
// MPI_IN_PLACE.
static gm_req_ret gm_ireduce(const void *send, void *recv, int count, int dtype, int op, int root, int in_place, MPI_Comm comm) {
	gm_req_ret r;
	r.req = MPI_REQUEST_NULL;
	r.code = MPI_Ireduce(in_place ? MPI_IN_PLACE : send, recv, count, gm_type(dtype), gm_op(op), root, comm, &r.req);
	return r;
}

// gm_ireduce_scatter_block is MPI_Ireduce_scatter_block of count elements
// per process.
static gm_req_ret gm_ireduce_scatter_block(const void *send, void *recv, int count, int dtype, int op, MPI_Comm comm) {
	gm_req_ret r;
	r.req = MPI_REQUEST_NULL;
	r.code = MPI_Ireduce_scatter_block(send, recv, count, gm_type(dtype), gm_op(op), comm, &r.req);
	return r;
}

// gm_ibcast is MPI_Ibcast of count bytes from root.
static gm_req_ret gm_ibcast(void *buf, int count, int root, MPI_Comm comm) {
	gm_req_ret r;
	r.req = MPI_REQUEST_NULL;
	r.code = MPI_Ibcast(buf, count, MPI_BYTE, root, comm, &r.req);
	return r;
}

// gm_ialltoall is MPI_Ialltoall of count bytes per process.
static gm_req_ret gm_ialltoall(const void *send, void *recv, int count, MPI_Comm comm) {
	gm_req_ret r;
	r.req = MPI_REQUEST_NULL;
	r.code = MPI_Ialltoall(send, count, MPI_BYTE, recv, count, MPI_BYTE, comm, &r.req);
	return r;
}

// gm_ialltoallv is MPI_Ialltoallv of MPI_BYTE: counts and offsets are the
// four arrays of size ints at ints (send counts, send offsets, receive
// counts, receive offsets), which MPI reads until the request completes.
// An empty buffer is given as a valid address (MPI checks it even where
// every count is 0), a different one for each: Open MPI's nonblocking
// collectives take send == recv for MPI_IN_PLACE, whose exchange does not
// match the other processes'.
static gm_req_ret gm_ialltoallv(const void *send, void *recv, const int *ints, int size, MPI_Comm comm) {
	static char none[2];
	gm_req_ret r;
	r.req = MPI_REQUEST_NULL;
	if (send == NULL) send = &none[0];
	if (recv == NULL) recv = &none[1];
	r.code = MPI_Ialltoallv(send, ints, ints + size, MPI_BYTE, recv, ints + 2 * size, ints + 3 * size, MPI_BYTE, comm, &r.req);
	return r;
}

// gm_comm_idup starts MPI_Comm_idup of comm into out[i] (from gm_comms).
static gm_req_ret gm_comm_idup(MPI_Comm comm, MPI_Comm *out, int i) {
	gm_req_ret r;
	r.req = MPI_REQUEST_NULL;
	r.code = MPI_Comm_idup(comm, &out[i], &r.req);
	return r;
}

typedef struct {
	int code;
	const char *call;
	MPI_Comm comm;
	MPI_Comm diag;
	int rank;
	int size;
} gm_split_ret;

static void gm_comm_release(MPI_Comm *c) {
	if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

// gm_comm_split splits comm and diag alike (MPI_Comm_split: blocking, and
// collective over every process of comm). The second split runs even when
// the first failed, so every process makes the same calls. A negative color
// is MPI_UNDEFINED: the process gets MPI_COMM_NULL for both. The new
// communicators return errors (MPI_ERRORS_RETURN); on any failure both are
// freed.
static gm_split_ret gm_comm_split(MPI_Comm comm, MPI_Comm diag, int color, int key) {
	gm_split_ret r;
	memset(&r, 0, sizeof r);
	r.comm = MPI_COMM_NULL;
	r.diag = MPI_COMM_NULL;
	int c = color < 0 ? MPI_UNDEFINED : color;
	int code = MPI_Comm_split(comm, c, key, &r.comm);
	int code2 = MPI_Comm_split(diag, c, key, &r.diag);
	r.call = "MPI_Comm_split";
	r.code = code != MPI_SUCCESS ? code : code2;
	if (r.code == MPI_SUCCESS && (r.comm == MPI_COMM_NULL) != (r.diag == MPI_COMM_NULL)) r.code = MPI_ERR_INTERN;
	if (r.code == MPI_SUCCESS && r.comm != MPI_COMM_NULL) {
		r.call = "MPI_Comm_set_errhandler";
		r.code = MPI_Comm_set_errhandler(r.comm, MPI_ERRORS_RETURN);
		if (r.code == MPI_SUCCESS) r.code = MPI_Comm_set_errhandler(r.diag, MPI_ERRORS_RETURN);
		if (r.code == MPI_SUCCESS) {
			r.call = "MPI_Comm_rank";
			r.code = MPI_Comm_rank(r.comm, &r.rank);
		}
		if (r.code == MPI_SUCCESS) {
			r.call = "MPI_Comm_size";
			r.code = MPI_Comm_size(r.comm, &r.size);
		}
	}
	if (r.code != MPI_SUCCESS) {
		gm_comm_release(&r.comm);
		gm_comm_release(&r.diag);
		return r;
	}
	r.call = NULL;
	return r;
}

static gm_req_ret gm_ibarrier(MPI_Comm comm) {
	gm_req_ret r;
	r.req = MPI_REQUEST_NULL;
	r.code = MPI_Ibarrier(comm, &r.req);
	return r;
}

typedef struct {
	int code;
	MPI_Request req;
	long long *buf;
} gm_notice_ret;

// gm_notice_send sends seq to dest from a buffer it allocates; the caller
// frees it (gm_free) once the request completes.
static gm_notice_ret gm_notice_send(MPI_Comm comm, int dest, int tag, long long seq) {
	gm_notice_ret r;
	r.req = MPI_REQUEST_NULL;
	r.buf = malloc(sizeof *r.buf);
	if (!r.buf) {
		r.code = MPI_ERR_NO_MEM;
		return r;
	}
	*r.buf = seq;
	r.code = MPI_Isend(r.buf, 1, MPI_LONG_LONG, dest, tag, comm, &r.req);
	if (r.code != MPI_SUCCESS) {
		free(r.buf);
		r.buf = NULL;
	}
	return r;
}

typedef struct {
	int code;
	int flag;
	int source;
	long long seq;
} gm_notice_recv_ret;

// gm_notice_recv receives one waiting notice, if any. The matched probe
// (MPI_Improbe + MPI_Mrecv) cannot lose the message to another thread.
static gm_notice_recv_ret gm_notice_recv(MPI_Comm comm, int tag) {
	gm_notice_recv_ret r = {0, 0, -1, 0};
	MPI_Message msg;
	MPI_Status st;
	r.code = MPI_Improbe(MPI_ANY_SOURCE, tag, comm, &r.flag, &msg, &st);
	if (r.code != MPI_SUCCESS || !r.flag) return r;
	r.source = st.MPI_SOURCE;
	r.code = MPI_Mrecv(&r.seq, 1, MPI_LONG_LONG, &msg, MPI_STATUS_IGNORE);
	return r;
}

typedef struct {
	char *msg; // malloc'd; Go frees it
	int cls;
} gm_error_ret;

static gm_error_ret gm_error_string(int code) {
	gm_error_ret r = {NULL, 0};
	int len = 0;
	if (MPI_Error_class(code, &r.cls) != MPI_SUCCESS) r.cls = MPI_ERR_UNKNOWN;
	r.msg = calloc(MPI_MAX_ERROR_STRING + 1, 1);
	if (r.msg && MPI_Error_string(code, r.msg, &len) != MPI_SUCCESS) r.msg[0] = 0;
	return r;
}

static char *gm_library_version(void) {
	int len = 0;
	char *s = calloc(MPI_MAX_LIBRARY_VERSION_STRING + 1, 1);
	if (s && MPI_Get_library_version(s, &len) != MPI_SUCCESS) s[0] = 0;
	return s;
}

// gm_nap sleeps ns nanoseconds in the kernel (nanosleep): Go's time.Sleep
// rounds waits under a millisecond up to about one when the process is idle.
static void gm_nap(long ns) {
	struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
	nanosleep(&ts, NULL);
}

// gm_yield gives the processor to another runnable thread, if any
// (sched_yield), and returns at once otherwise.
static void gm_yield(void) { sched_yield(); }

// gm_cores is the number of processors online on this node, whatever the
// process's affinity (a process bound to one core by mpirun still shares the
// node's cores with the other processes).
static int gm_cores(void) {
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 && n < 1 << 30 ? (int)n : 0;
}


typedef struct {
	int code;
	const char *call;
	MPI_Comm comm;
	int rank;
	int size;
} gm_hb_comm_ret;

// gm_hb_comm duplicates MPI_COMM_WORLD for the heartbeat (collective: every
// process calls it once, when it starts MPI), with MPI_ERRORS_RETURN.
static gm_hb_comm_ret gm_hb_comm(void) {
	gm_hb_comm_ret r;
	memset(&r, 0, sizeof r);
	r.comm = MPI_COMM_NULL;
	r.call = "MPI_Comm_dup";
	if ((r.code = MPI_Comm_dup(MPI_COMM_WORLD, &r.comm)) != MPI_SUCCESS) return r;
	r.call = "MPI_Comm_set_errhandler";
	if ((r.code = MPI_Comm_set_errhandler(r.comm, MPI_ERRORS_RETURN)) == MPI_SUCCESS) {
		r.call = "MPI_Comm_rank";
		if ((r.code = MPI_Comm_rank(r.comm, &r.rank)) == MPI_SUCCESS) {
			r.call = "MPI_Comm_size";
			r.code = MPI_Comm_size(r.comm, &r.size);
		}
	}
	if (r.code != MPI_SUCCESS) {
		MPI_Comm_free(&r.comm);
		r.comm = MPI_COMM_NULL;
		return r;
	}
	r.call = NULL;
	return r;
}

typedef struct {
	int code;
	int n;
	MPI_Request req;
} gm_hb_drain_ret;

// gm_hb_drain completes the posted heartbeat receive (MPI_ANY_SOURCE, one
// long long into *buf) as many times as heartbeats have arrived, up to max,
// posting it again before each test: src[i] and val[i] are heartbeat i's
// sender and content. req is the receive posted by the last call, or
// MPI_REQUEST_NULL; the one posted now is returned.
static gm_hb_drain_ret gm_hb_drain(MPI_Comm comm, int tag, MPI_Request req, long long *buf, int *src, long long *val, int max) {
	gm_hb_drain_ret r = {0, 0, req};
	while (r.n < max) {
		if (r.req == MPI_REQUEST_NULL) {
			r.code = MPI_Irecv(buf, 1, MPI_LONG_LONG, MPI_ANY_SOURCE, tag, comm, &r.req);
			if (r.code != MPI_SUCCESS) return r;
		}
		int flag = 0;
		MPI_Status st;
		r.code = MPI_Test(&r.req, &flag, &st);
		if (r.code != MPI_SUCCESS || !flag) return r;
		src[r.n] = st.MPI_SOURCE;
		val[r.n] = *buf;
		r.n++;
	}
	return r;
}

// gm_world_ranks writes the rank in MPI_COMM_WORLD of each of comm's n
// processes into out (MPI_Group_translate_ranks).
static int gm_world_ranks(MPI_Comm comm, int *out, int n) {
	MPI_Group g = MPI_GROUP_NULL, wg = MPI_GROUP_NULL;
	int code = MPI_Comm_group(comm, &g);
	if (code == MPI_SUCCESS) code = MPI_Comm_group(MPI_COMM_WORLD, &wg);
	int *in = malloc((n > 0 ? n : 1) * sizeof *in);
	if (!in && code == MPI_SUCCESS) code = MPI_ERR_NO_MEM;
	for (int i = 0; in && i < n; i++) in[i] = i;
	if (code == MPI_SUCCESS) code = MPI_Group_translate_ranks(g, n, in, wg, out);
	free(in);
	if (g != MPI_GROUP_NULL) MPI_Group_free(&g);
	if (wg != MPI_GROUP_NULL) MPI_Group_free(&wg);
	return code;
}

static void *gm_malloc(size_t n) { return malloc(n ? n : 1); }
static void gm_free(void *p) { free(p); }

enum {
	gm_err_buffer = MPI_ERR_BUFFER,
	gm_err_count = MPI_ERR_COUNT,
	gm_err_type = MPI_ERR_TYPE,
	gm_err_tag = MPI_ERR_TAG,
	gm_err_comm = MPI_ERR_COMM,
	gm_err_rank = MPI_ERR_RANK,
	gm_err_root = MPI_ERR_ROOT,
	gm_err_op = MPI_ERR_OP,
	gm_err_arg = MPI_ERR_ARG,
	gm_err_truncate = MPI_ERR_TRUNCATE,
	gm_err_no_mem = MPI_ERR_NO_MEM,
	gm_max_int = 2147483647,
};
*/
import "C"

import (
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// Handles as Go sees them: opaque values it stores and compares, never reads.
type (
	cRequest = C.MPI_Request
	cComm    = C.MPI_Comm
)

var (
	requestNull = C.gm_request_null()
	commNull    = C.gm_comm_null()
)

// MPI error classes the package maps to sentinels (MPI_Error_class).
const (
	classBuffer   = int(C.gm_err_buffer)
	classCount    = int(C.gm_err_count)
	classType     = int(C.gm_err_type)
	classTag      = int(C.gm_err_tag)
	classComm     = int(C.gm_err_comm)
	classRank     = int(C.gm_err_rank)
	classRoot     = int(C.gm_err_root)
	classOp       = int(C.gm_err_op)
	classArg      = int(C.gm_err_arg)
	classTruncate = int(C.gm_err_truncate)
	classNoMem    = int(C.gm_err_no_mem)
)

// maxInt is the largest count one MPI call takes (its count is a C int).
const maxInt = int(C.gm_max_int)

// cInit calls MPI_Init_thread (or MPI_Query_thread when MPI was initialized
// by someone else) requiring level.
func cInit(required ThreadLevel) (provided ThreadLevel, here, finalized bool, code int) {
	r := C.gm_init(C.int(required))
	return ThreadLevel(r.provided), r.here != 0, r.finalized != 0, int(r.code)
}

func cFinalize() int { return int(C.gm_finalize()) }

type worldInfo struct {
	comm, diag        cComm
	rank, size, tagUB int
	local             int // processes on this node, 0 if unknown
	call              string
	code              int
}

// cWorld sets MPI_ERRORS_RETURN and duplicates MPI_COMM_WORLD twice.
func cWorld() worldInfo {
	r := C.gm_world()
	info := worldInfo{comm: r.comm, diag: r.diag, rank: int(r.rank), size: int(r.size), tagUB: int(r.tag_ub),
		local: int(r.local), code: int(r.code)}
	if r.call != nil {
		info.call = C.GoString(r.call)
	}
	return info
}

func cCommFree(c cComm) int { return int(C.gm_comm_free(c)) }

// cComms allocates n communicator handles in C memory, MPI_COMM_NULL each
// (nil when out of memory); cFree frees them.
func cComms(n int) unsafe.Pointer { return unsafe.Pointer(C.gm_comms(C.int(n))) }

// cCommAt reads handle i of cComms' memory.
func cCommAt(p unsafe.Pointer, i int) cComm { return C.gm_comm_at((*C.MPI_Comm)(p), C.int(i)) }

// cCommIdup is MPI_Comm_idup of c into handle i of cComms' memory p.
func cCommIdup(c cComm, p unsafe.Pointer, i int) (cRequest, int) {
	r := C.gm_comm_idup(c, (*C.MPI_Comm)(p), C.int(i))
	return r.req, int(r.code)
}

func cIsend(p unsafe.Pointer, n, peer, tag int, comm cComm) (cRequest, int) {
	r := C.gm_isend(p, C.int(n), C.int(peer), C.int(tag), comm)
	return r.req, int(r.code)
}

func cIrecv(p unsafe.Pointer, n, peer, tag int, comm cComm) (cRequest, int) {
	r := C.gm_irecv(p, C.int(n), C.int(peer), C.int(tag), comm)
	return r.req, int(r.code)
}

type testResult struct {
	req       cRequest
	done      bool
	cancelled bool
	count     int
	code      int
}

// cTest is MPI_Test with MPI_Get_count and MPI_Test_cancelled on the status.
func cTest(req cRequest) testResult {
	r := C.gm_test(req)
	return testResult{req: r.req, done: r.flag != 0, cancelled: r.cancelled != 0, count: int(r.count), code: int(r.code)}
}

// doneResult describes one request gm_testsome found complete.
type doneResult = C.gm_done

// cTestsome is MPI_Testsome over reqs, repeated for up to spin while none
// completes and the int32 at news (C memory) is zero; out must have room for
// len(reqs). It returns how many completed (described in out[:k]), or -1 and
// the error code of MPI_Testsome.
func cTestsome(reqs []cRequest, out []doneResult, spin time.Duration, news unsafe.Pointer) (k, code int) {
	r := C.gm_testsome(unsafe.SliceData(reqs), C.int(len(reqs)), unsafe.SliceData(out), C.long(spin), (*C.int)(news))
	return int(r.k), int(r.code)
}

// makeDone describes, as gm_testsome does, piece i that MPI_Test found
// complete.
func makeDone(i int, t testResult) doneResult {
	d := doneResult{index: C.int(i), code: C.int(t.code), count: C.int(t.count)}
	if t.cancelled {
		d.cancelled = 1
	}
	return d
}

func cCancel(req cRequest) int      { return int(C.gm_cancel(req)) }
func cRequestFree(req cRequest) int { return int(C.gm_request_free(req)) }

func cIallgather(mine unsafe.Pointer, n int, all unsafe.Pointer, comm cComm) (cRequest, int) {
	r := C.gm_iallgather(mine, C.int(n), all, comm)
	return r.req, int(r.code)
}

// cIallreduce is MPI_Iallreduce; a nil send means MPI_IN_PLACE.
func cIallreduce(send, recv unsafe.Pointer, n int, dt backend.DType, op backend.Op, comm cComm) (cRequest, int) {
	r := C.gm_iallreduce(send, recv, C.int(n), C.int(dt), C.int(op), comm)
	return r.req, int(r.code)
}

// cIallreduceLoop is gm_iallreduce_loop.
func cIallreduceLoop(send, recv unsafe.Pointer, n int, dt backend.DType, op backend.Op, comm cComm, k int) (time.Duration, int) {
	r := C.gm_iallreduce_loop(send, recv, C.int(n), C.int(dt), C.int(op), comm, C.int(k))
	return time.Duration(float64(r.secs) * 1e9), int(r.code)
}

// cHasType reports whether MPI has a datatype for dt.
func cHasType(dt backend.DType) bool { return C.gm_has_type(C.int(dt)) != 0 }

// cIreduce is MPI_Ireduce; inPlace (the root's only) sends MPI_IN_PLACE.
func cIreduce(send, recv unsafe.Pointer, n int, dt backend.DType, op backend.Op, root int, inPlace bool, comm cComm) (cRequest, int) {
	in := C.int(0)
	if inPlace {
		in = 1
	}
	r := C.gm_ireduce(send, recv, C.int(n), C.int(dt), C.int(op), C.int(root), in, comm)
	return r.req, int(r.code)
}

// cIreduceScatterBlock is MPI_Ireduce_scatter_block of n elements per process.
func cIreduceScatterBlock(send, recv unsafe.Pointer, n int, dt backend.DType, op backend.Op, comm cComm) (cRequest, int) {
	r := C.gm_ireduce_scatter_block(send, recv, C.int(n), C.int(dt), C.int(op), comm)
	return r.req, int(r.code)
}

// cIbcast is MPI_Ibcast of n bytes.
func cIbcast(buf unsafe.Pointer, n, root int, comm cComm) (cRequest, int) {
	r := C.gm_ibcast(buf, C.int(n), C.int(root), comm)
	return r.req, int(r.code)
}

// cIalltoall is MPI_Ialltoall of n bytes per process.
func cIalltoall(send, recv unsafe.Pointer, n int, comm cComm) (cRequest, int) {
	r := C.gm_ialltoall(send, recv, C.int(n), comm)
	return r.req, int(r.code)
}

// cIalltoallv is MPI_Ialltoallv of MPI_BYTE with the counts and offsets
// (C ints) at ints (gm_ialltoallv's layout).
func cIalltoallv(send, recv, ints unsafe.Pointer, size int, comm cComm) (cRequest, int) {
	r := C.gm_ialltoallv(send, recv, (*C.int)(ints), C.int(size), comm)
	return r.req, int(r.code)
}

// splitResult is what cCommSplit made: two communicators (MPI_COMM_NULL
// for a process outside every part), this process's rank among size, or the
// failing call and its code. closed: the World closed first, nothing ran.
type splitResult struct {
	comm, diag cComm
	rank, size int
	procs      []int // each process's rank in MPI_COMM_WORLD (cWorldRanks)
	call       string
	code       int
	closed     bool
}

// cCommSplit is MPI_Comm_split of comm and of diag with color (negative:
// MPI_UNDEFINED) and key; it blocks until every process of comm called it.
func cCommSplit(comm, diag cComm, color, key int) splitResult {
	r := C.gm_comm_split(comm, diag, C.int(color), C.int(key))
	res := splitResult{comm: r.comm, diag: r.diag, rank: int(r.rank), size: int(r.size), code: int(r.code)}
	if r.call != nil {
		res.call = C.GoString(r.call)
	}
	return res
}

func cIbarrier(comm cComm) (cRequest, int) {
	r := C.gm_ibarrier(comm)
	return r.req, int(r.code)
}

func cNoticeSend(comm cComm, dest, tag int, seq uint64) (cRequest, unsafe.Pointer, int) {
	r := C.gm_notice_send(comm, C.int(dest), C.int(tag), C.longlong(seq))
	return r.req, unsafe.Pointer(r.buf), int(r.code)
}

func cNoticeRecv(comm cComm, tag int) (ok bool, source int, seq uint64, code int) {
	r := C.gm_notice_recv(comm, C.int(tag))
	return r.flag != 0, int(r.source), uint64(r.seq), int(r.code)
}

// cErrorString is MPI_Error_string and MPI_Error_class of code.
func cErrorString(code int) (msg string, class int) {
	r := C.gm_error_string(C.int(code))
	if r.msg != nil {
		msg = C.GoString(r.msg)
		C.free(unsafe.Pointer(r.msg))
	}
	return msg, int(r.cls)
}

// cLibraryVersion is MPI_Get_library_version.
func cLibraryVersion() string {
	s := C.gm_library_version()
	if s == nil {
		return ""
	}
	defer C.free(unsafe.Pointer(s))
	return C.GoString(s)
}

// cNap sleeps ns nanoseconds in the kernel (nanosleep), without the rounding
// of Go's timers.
// cCores is the number of processors online on the node (sysconf), 0 if
// unknown.
func cCores() int { return int(C.gm_cores()) }

func cNap(ns int64) { C.gm_nap(C.long(ns)) }

// cYield is sched_yield: another runnable thread on this processor runs
// first, else it returns at once.
func cYield() { C.gm_yield() }

func cMalloc(n int) unsafe.Pointer { return C.gm_malloc(C.size_t(n)) }
func cFree(p unsafe.Pointer)       { C.gm_free(p) }

// cHeartbeatComm is gm_hb_comm: a duplicate of MPI_COMM_WORLD for the
// heartbeat, this process's rank in it and its size.
func cHeartbeatComm() (comm cComm, rank, size int, call string, code int) {
	r := C.gm_hb_comm()
	if r.call != nil {
		call = C.GoString(r.call)
	}
	return r.comm, int(r.rank), int(r.size), call, int(r.code)
}

// cHeartbeatDrain is gm_hb_drain into src and val (of equal lengths): the
// heartbeats received, by sender and content.
func cHeartbeatDrain(comm cComm, tag int, req cRequest, buf unsafe.Pointer, src []int32, val []int64) (cRequest, int, int) {
	r := C.gm_hb_drain(comm, C.int(tag), req, (*C.longlong)(buf), (*C.int)(unsafe.Pointer(unsafe.SliceData(src))),
		(*C.longlong)(unsafe.Pointer(unsafe.SliceData(val))), C.int(min(len(src), len(val))))
	return r.req, int(r.n), int(r.code)
}

// cWorldRanks is the rank in MPI_COMM_WORLD of each of comm's size
// processes, nil when MPI could not say.
func cWorldRanks(comm cComm, size int) []int {
	out := make([]int32, max(size, 1))
	if C.gm_world_ranks(comm, (*C.int)(unsafe.Pointer(unsafe.SliceData(out))), C.int(size)) != 0 {
		return nil
	}
	ranks := make([]int, size)
	for i := range ranks {
		ranks[i] = int(out[i])
	}
	return ranks
}
