//go:build darwin && !nometal

/*
 * metal.m: the Metal implementation of gocoll's C ABI (shim.h).
 *
 * It fills the same gc_backend table as vulkan.c, so the Go binding above the
 * ABI (cshim.Impl, Device, Buffer, Kernel) and every algorithm above that are
 * the code that runs, and is tested, on Linux. docs/METAL.md maps each entry
 * to the Metal calls it makes.
 *
 * Rules of this file:
 *   - ARC everywhere (-fobjc-arc, checked below). Objective-C objects held
 *     across calls live in C structs as CFTypeRef, taken with
 *     CFBridgingRetain and dropped with CFRelease; everything else is a strong
 *     local that ARC releases.
 *   - The body of every table entry runs inside @autoreleasepool, so objects
 *     Metal autoreleases (command buffers, encoders, errors, strings) are
 *     freed per call, not when some thread's outer pool drains.
 *   - Failing calls return a gc_status and a malloc'd message naming the Metal
 *     call; no entry returns GC_UNSUPPORTED except kernel_create for f64
 *     kernels (Metal has no double).
 *   - Only gc_metal() is exported; everything else is static, so this file and
 *     vulkan.c link side by side.
 *
 * Model: one MTLCommandQueue per opened device (rank). A recording is one
 * MTLCommandBuffer (split in several by cmd_timestamp); submit commits it and
 * keeps the last command buffer in a ring slot as the submission's ticket.
 * Metal runs a queue's command buffers in commit order, so a ticket is done
 * when its last command buffer is. Command buffers retain every buffer and
 * pipeline encoded into them, so destroying a buffer or kernel only drops
 * our reference: Metal frees it after the last submission that uses it.
 */
#if !__has_feature(objc_arc)
#error "metal.m needs ARC: build it with -fobjc-arc (cshim/metal_darwin.go sets it)"
#endif

#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"
#include "common.h"

/* The Metal implementation (this file). shim.h declares gc_vulkan(); the
 * declaration here keeps -Wmissing-prototypes quiet until it names gc_metal. */
const gc_backend *gc_metal(void);

#define GC_MTL_DEFAULT_RING 16u
#define GC_MTL_MAX_RING 1024u
#define GC_MTL_MAX_SPEC 64u
/* Command buffers one submission may span: cmd_timestamp ends one and starts
 * the next, so the time it records is that command buffer's GPUEndTime. */
#define GC_MTL_MAX_SEGMENTS 64u
/* Metal's buffer argument table has 31 slots: bindings, then push constants. */
#define GC_MTL_BUFFER_SLOTS 31u
/* setBuffer:offset: for device-address-space arguments needs the offset
 * aligned to the argument's type, at most 16 bytes. */
#define GC_MTL_OFFSET_ALIGN 16u
#define GC_MTL_MAX_GROUPS 65535u
#define GC_MTL_MAX_PUSH 4096u /* setBytes:length:atIndex: limit */
#define GC_MTL_MAX_QUERIES (1u << 20)
#define GC_MTL_COPY_CHUNK (1u << 30)
#define GC_MTL_COPY_GROUPS 4096u
/* The MSL the kernels pipeline generates: spirv-cross --msl-version 20100. */
#define GC_MTL_MSL_MAJOR 2u
#define GC_MTL_MSL_MINOR 1u
/* Specialization constant 0 is the kernels' work-group size (local_size_x_id
 * = 0, kernels.SpecWorkGroupSize). Metal takes it at dispatch time
 * (threadsPerThreadgroup), so the shim remembers it per kernel. */
#define GC_MTL_SPEC_WORKGROUP 0u

/* Internal kernels: gc_copy_bytes copies any byte range (blits on macOS want
 * offsets and sizes in multiples of 4); gc_probe checks, once per device at
 * init, that compute kernels run and compute the right thing. */
static const char internal_msl[] =
	"#include <metal_stdlib>\n"
	"using namespace metal;\n"
	"kernel void gc_copy_bytes(device uchar *dst [[buffer(0)]], const device uchar *src [[buffer(1)]],\n"
	"                          constant uint &n [[buffer(2)]], uint i [[thread_position_in_grid]],\n"
	"                          uint stride [[threads_per_grid]]) {\n"
	"    for (uint j = i; j < n; j += stride) {\n"
	"        dst[j] = src[j];\n"
	"    }\n"
	"}\n"
	"kernel void gc_probe(device uint *out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
	"    out[i] = i * 3u + 1u;\n"
	"}\n";

/* ---------------------------------------------------------------- errors */

/* unsupported_f64 is the one place that returns GC_UNSUPPORTED: Metal has no
 * double, so f64 kernels cannot exist; collectives reduce f64 exactly on the
 * host path instead (the device reports shader_float64 = 0). */
static gc_status unsupported_f64(gc_error *err, const char *why) {
	return fail(err, GC_UNSUPPORTED, 0,
		    "kernel_create: Metal has no double type (%s); f64 collectives run on the exact host path", why);
}

/* nsmsg returns an NSError's description (valid in the current pool). */
static const char *nsmsg(NSError *e) {
	if (e == nil) {
		return "unknown error";
	}
	const char *s = e.localizedDescription.UTF8String;
	return s != NULL ? s : "unknown error";
}

/* -------------------------------------------------------- instance state */

/* mdev is one Metal device as init found it, kept for the process. */
typedef struct mdev {
	CFTypeRef device;    /* id<MTLDevice> */
	CFTypeRef copy_pipe; /* id<MTLComputePipelineState> of gc_copy_bytes; NULL if unusable */
	uint32_t copy_threads;
	gc_device_info info;
	/* kmu guards cache: MSL source -> id<MTLLibrary> ("L:" keys) and
	 * pipeline key -> id<MTLComputePipelineState> ("P:" keys), shared by
	 * every logical device opened on this device. */
	pthread_mutex_t kmu;
	CFTypeRef cache; /* NSMutableDictionary */
} mdev;

static struct {
	pthread_mutex_t mu;
	int done;         /* init ran */
	gc_status status; /* its result */
	int32_t native;
	char *msg;
	int validation; /* MTL_DEBUG_LAYER=1 in the environment */
	mdev *devs;
	uint32_t ndev;
	uint64_t objects; /* libraries and pipelines compiled (atomic) */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* compile_options: the MSL version the kernels were generated for, and IEEE
 * math (Metal compiles with fast math by default, which may drop the NaN
 * tests the max/min kernels need). */
static MTLCompileOptions *compile_options(void) {
	MTLCompileOptions *o = [MTLCompileOptions new];
	o.languageVersion = MTLLanguageVersion2_1;
#if defined(__MAC_15_0) && __MAC_OS_X_VERSION_MAX_ALLOWED >= __MAC_15_0
	if (@available(macOS 15.0, *)) {
		o.mathMode = MTLMathModeSafe;
	} else {
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
		o.fastMathEnabled = NO;
#pragma clang diagnostic pop
	}
#else
	o.fastMathEnabled = NO;
#endif
	return o;
}

static uint32_t vendor_of(const char *name) {
	if (strncmp(name, "Apple", 5) == 0) {
		return 0x106b;
	}
	if (strncmp(name, "AMD", 3) == 0) {
		return 0x1002;
	}
	if (strncmp(name, "Intel", 5) == 0) {
		return 0x8086;
	}
	if (strncmp(name, "NVIDIA", 6) == 0) {
		return 0x10de;
	}
	return 0;
}

static const char *location_name(id<MTLDevice> dev) {
	switch (dev.location) {
	case MTLDeviceLocationBuiltIn:
		return "built-in";
	case MTLDeviceLocationSlot:
		return "slot";
	case MTLDeviceLocationExternal:
		return "external";
	default:
		return "unspecified location";
	}
}

static uint32_t clamp32(uint64_t v) {
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* probe compiles the internal kernels, keeps gc_copy_bytes, runs gc_probe and
 * checks its output; on any failure the device is unusable and says why. */
static void probe(mdev *m, id<MTLDevice> dev) {
	gc_device_info *in = &m->info;
	NSError *e = nil;
	id<MTLLibrary> lib = [dev newLibraryWithSource:[NSString stringWithUTF8String:internal_msl]
						  options:compile_options()
						    error:&e];
	if (lib == nil) {
		snprintf(in->unusable_reason, GC_NAME_MAX, "newLibraryWithSource: cannot compile a compute kernel: %s", nsmsg(e));
		return;
	}
	id<MTLFunction> fprobe = [lib newFunctionWithName:@"gc_probe"];
	id<MTLFunction> fcopy = [lib newFunctionWithName:@"gc_copy_bytes"];
	if (fprobe == nil || fcopy == nil) {
		snprintf(in->unusable_reason, GC_NAME_MAX, "newFunctionWithName: the internal kernels are missing");
		return;
	}
	id<MTLComputePipelineState> pprobe = [dev newComputePipelineStateWithFunction:fprobe error:&e];
	id<MTLComputePipelineState> pcopy = pprobe != nil ? [dev newComputePipelineStateWithFunction:fcopy error:&e] : nil;
	if (pprobe == nil || pcopy == nil) {
		snprintf(in->unusable_reason, GC_NAME_MAX, "newComputePipelineStateWithFunction: %s", nsmsg(e));
		return;
	}
	add_counter(&g.objects, 3);
	in->subgroup_size = (uint32_t)pprobe.threadExecutionWidth;
	uint32_t maxt = (uint32_t)pprobe.maxTotalThreadsPerThreadgroup;
	if (maxt < in->max_compute_work_group_invocations) {
		in->max_compute_work_group_invocations = maxt;
	}

	/* Run the probe: 64 threads write i*3+1. A GPU that cannot run compute
	 * kernels (some virtual machines' paravirtual GPUs) fails here, with a
	 * reason, instead of in the middle of a collective. */
	const uint32_t n = 64;
	uint32_t tg = maxt < 32 ? (maxt > 0 ? maxt : 1) : 32;
	uint32_t groups = (n + tg - 1) / tg;
	id<MTLBuffer> out = [dev newBufferWithLength:(NSUInteger)groups * tg * sizeof(uint32_t)
					      options:MTLResourceStorageModeShared];
	id<MTLCommandQueue> q = [dev newCommandQueue];
	id<MTLCommandBuffer> cb = q != nil ? [q commandBuffer] : nil;
	if (out == nil || cb == nil) {
		snprintf(in->unusable_reason, GC_NAME_MAX, "probe: cannot create a buffer or a command buffer");
		return;
	}
	memset(out.contents, 0, (size_t)groups * tg * sizeof(uint32_t));
	id<MTLComputeCommandEncoder> enc = [cb computeCommandEncoder];
	[enc setComputePipelineState:pprobe];
	[enc setBuffer:out offset:0 atIndex:0];
	[enc dispatchThreadgroups:MTLSizeMake(groups, 1, 1) threadsPerThreadgroup:MTLSizeMake(tg, 1, 1)];
	[enc endEncoding];
	[cb commit];
	[cb waitUntilCompleted];
	if (cb.status != MTLCommandBufferStatusCompleted) {
		snprintf(in->unusable_reason, GC_NAME_MAX, "probe kernel failed: %s", nsmsg(cb.error));
		return;
	}
	const uint32_t *got = out.contents;
	for (uint32_t i = 0; i < n; i++) {
		if (got[i] != i * 3u + 1u) {
			snprintf(in->unusable_reason, GC_NAME_MAX,
				 "probe kernel wrote %u at %u, want %u: this GPU does not run compute kernels correctly "
				 "(a virtual machine's paravirtual GPU?)",
				 got[i], i, i * 3u + 1u);
			return;
		}
	}
	m->copy_pipe = CFBridgingRetain(pcopy);
	m->copy_threads = (uint32_t)pcopy.maxTotalThreadsPerThreadgroup < 256u ? (uint32_t)pcopy.maxTotalThreadsPerThreadgroup : 256u;
	if (m->copy_threads == 0) {
		m->copy_threads = 1;
	}
	in->usable = 1;
	in->unusable_reason[0] = 0;
}

/* query_device fills m->info for one device. */
static void query_device(mdev *m, id<MTLDevice> dev) {
	gc_device_info *in = &m->info;
	memset(in, 0, sizeof *in);
	copy_name(in->name, dev.name.UTF8String);
	copy_name(in->driver_name, "Metal");
	NSString *os = [[NSProcessInfo processInfo] operatingSystemVersionString];
	snprintf(in->driver_info, GC_NAME_MAX, "macOS %s, %s", os.UTF8String != NULL ? os.UTF8String : "?", location_name(dev));
	in->vendor_id = vendor_of(in->name);
	in->device_id = (uint32_t)dev.registryID; /* the IORegistry ID's low 32 bits */
	in->type = dev.hasUnifiedMemory ? GC_DEVICE_INTEGRATED : GC_DEVICE_DISCRETE;
	in->api_version = (GC_MTL_MSL_MAJOR << 22) | (GC_MTL_MSL_MINOR << 12); /* the MSL version, packed */
	in->driver_version = 0;
	in->shader_float64 = 0; /* MSL has no double */
	in->push_descriptor = 1; /* bindings are set per dispatch (setBuffer:offset:atIndex:) */
	in->external_memory_host = 1; /* newBufferWithBytesNoCopy:length:options:deallocator: */
	uint64_t maxlen = (uint64_t)dev.maxBufferLength;
	/* The kernels index elements with 32-bit integers. */
	in->max_storage_buffer_range = maxlen < UINT32_MAX ? maxlen : UINT32_MAX;
	in->max_memory_allocation_size = maxlen;
	in->min_storage_buffer_offset_alignment = GC_MTL_OFFSET_ALIGN;
	in->min_imported_host_pointer_alignment = (uint64_t)getpagesize();
	/* Timestamps are command buffers' GPUEndTime, in nanoseconds. */
	in->timestamp_period = 1.0f;
	in->timestamp_valid_bits = 64;
	in->compute_queue_family = 0;
	MTLSize mt = dev.maxThreadsPerThreadgroup;
	in->max_compute_work_group_size[0] = clamp32(mt.width);
	in->max_compute_work_group_size[1] = clamp32(mt.height);
	in->max_compute_work_group_size[2] = clamp32(mt.depth);
	for (int i = 0; i < 3; i++) {
		in->max_compute_work_group_count[i] = GC_MTL_MAX_GROUPS;
	}
	in->max_compute_work_group_invocations = clamp32(mt.width); /* lowered by the probe pipeline's limit */
	in->max_push_constants_size = GC_MTL_MAX_PUSH;
	in->max_push_descriptors = GC_MTL_BUFFER_SLOTS - 1;
	in->heap_count = 1;
	in->heaps[0].size = dev.recommendedMaxWorkingSetSize;
	in->heaps[0].device_local = 1;
	in->usable = 0;
	probe(m, dev);
}

static gc_status do_init(gc_error *err) {
	g.validation = env_is_1("MTL_DEBUG_LAYER");
	NSArray<id<MTLDevice>> *all = MTLCopyAllDevices();
	uint32_t n = all != nil ? (uint32_t)all.count : 0;
	g.devs = calloc(n ? n : 1, sizeof *g.devs);
	if (g.devs == NULL) {
		return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
	}
	for (uint32_t i = 0; i < n; i++) {
		mdev *m = &g.devs[i];
		id<MTLDevice> dev = all[i];
		m->device = CFBridgingRetain(dev);
		m->cache = CFBridgingRetain([NSMutableDictionary new]);
		pthread_mutex_init(&m->kmu, NULL);
		query_device(m, dev);
	}
	g.ndev = n;
	return GC_OK;
}

/* ready returns GC_OK once init succeeded, else init's failure. */
static gc_status ready(gc_error *err) {
	pthread_mutex_lock(&g.mu);
	int done = g.done;
	gc_status st = g.status;
	int32_t native = g.native;
	const char *msg = g.msg;
	pthread_mutex_unlock(&g.mu);
	if (!done) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "gc_metal: init has not been called");
	}
	if (st != GC_OK) {
		return fail(err, st, native, "%s", msg != NULL ? msg : "init failed");
	}
	return GC_OK;
}

/* mtl_init: MTLCopyAllDevices, then per device its properties and a probe
 * kernel. opts->library is ignored (Metal is a system framework) and so is
 * opts->validation: Metal's API validation is switched on for the whole
 * process at launch with MTL_DEBUG_LAYER=1, which instance_info reports. */
static gc_status mtl_init(const gc_init_options *opts, gc_error *err) {
	@autoreleasepool {
		(void)opts;
		pthread_mutex_lock(&g.mu);
		if (!g.done) {
			gc_error e = {0, NULL};
			g.status = do_init(&e);
			g.native = e.native;
			g.msg = e.msg;
			g.done = 1;
		}
		gc_status st = g.status;
		if (st != GC_OK) {
			fail(err, st, g.native, "%s", g.msg != NULL ? g.msg : "init failed");
		}
		pthread_mutex_unlock(&g.mu);
		return st;
	}
}

static gc_status mtl_instance_info(gc_instance_info *out, gc_error *err) {
	@autoreleasepool {
		gc_status st = ready(err);
		if (st != GC_OK) {
			return st;
		}
		if (out == NULL) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "instance_info: out is NULL");
		}
		memset(out, 0, sizeof *out);
		out->api_version = (GC_MTL_MSL_MAJOR << 22) | (GC_MTL_MSL_MINOR << 12);
		NSOperatingSystemVersion v = [[NSProcessInfo processInfo] operatingSystemVersion];
		out->loader_version = ((uint32_t)v.majorVersion << 22) | ((uint32_t)v.minorVersion << 12) | (uint32_t)v.patchVersion;
		out->validation = g.validation;
		copy_name(out->library, "/System/Library/Frameworks/Metal.framework");
		return GC_OK;
	}
}

static gc_status mtl_device_count(uint32_t *count, gc_error *err) {
	@autoreleasepool {
		gc_status st = ready(err);
		if (st != GC_OK) {
			return st;
		}
		if (count == NULL) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "device_count: count is NULL");
		}
		*count = g.ndev;
		return GC_OK;
	}
}

static gc_status mtl_device_info(uint32_t index, gc_device_info *out, gc_error *err) {
	@autoreleasepool {
		gc_status st = ready(err);
		if (st != GC_OK) {
			return st;
		}
		if (out == NULL || index >= g.ndev) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "device_info: no device %u (%u devices)", index, g.ndev);
		}
		*out = g.devs[index].info;
		return GC_OK;
	}
}

static gc_status mtl_message_count(uint64_t *count, gc_error *err) {
	@autoreleasepool {
		return message_count(count, err);
	}
}

static gc_status mtl_take_message(char **msg, gc_error *err) {
	@autoreleasepool {
		return take_message(msg, "messages", err);
	}
}

/* --------------------------------------------------------------- devices */

typedef struct slot {
	CFTypeRef cb;    /* the last id<MTLCommandBuffer> of the submission */
	uint64_t ticket; /* 0: none */
} slot;

typedef struct tstamp {
	CFTypeRef cb;   /* command buffer whose GPUEndTime is the value; NULL once read */
	uint64_t value; /* nanoseconds */
	int valid;
} tstamp;

struct gc_buffer_s {
	gc_device dev;
	CFTypeRef buf; /* id<MTLBuffer> */
	uint64_t size;
	uint64_t last_use; /* the last ticket whose work may use it (recorded: submitted + 1) */
	void *mapped;
	int imported;
	struct gc_buffer_s *prev, *next;
};

struct gc_kernel_s {
	gc_device dev;
	CFTypeRef pipeline; /* id<MTLComputePipelineState>, shared through the device's cache */
	uint32_t push_size;
	uint32_t binding_count;
	uint32_t wg; /* threadsPerThreadgroup.width */
	struct gc_kernel_s *prev, *next;
};

struct gc_device_s {
	mdev *m;
	CFTypeRef queue; /* id<MTLCommandQueue> */

	/* lmu guards the lost state: a failed command buffer loses the device,
	 * as a GPU fault does in Vulkan, and later calls repeat the cause. */
	pthread_mutex_t lmu;
	int lost;  /* atomic */
	int stuck; /* atomic: lost by the drain limit (shim.h); the GPU may still use its memory */
	int32_t lost_native;
	char *lost_msg;
	uint64_t drain_ns; /* the drain limit */

	/* mu guards the ring, the recording, the timestamps and the object
	 * lists. Only close holds it across a blocking wait. */
	pthread_mutex_t mu;
	slot *ring;
	uint32_t ring_size;
	uint64_t submitted; /* last ticket submitted */
	uint64_t completed; /* every ticket <= completed is done */
	CFTypeRef cb;       /* id<MTLCommandBuffer> being recorded, or NULL */
	CFTypeRef enc;      /* its open id<MTLComputeCommandEncoder>, or NULL */
	CFTypeRef bound;    /* pipeline set on enc (borrowed) */
	CFTypeRef segments[GC_MTL_MAX_SEGMENTS]; /* recorded command buffers cut by cmd_timestamp */
	uint32_t nseg;
	tstamp *ts;
	uint32_t nqueries;

	pthread_mutex_t xmu; /* serializes copy_now */

	struct gc_buffer_s *buffers;
	struct gc_kernel_s *kernels;
	int mu_init;

	gc_counters counters; /* atomic fields */
};

static int is_lost(gc_device d) {
	return __atomic_load_n(&d->lost, __ATOMIC_ACQUIRE);
}

static gc_status lost_error(gc_device d, gc_error *err) {
	pthread_mutex_lock(&d->lmu);
	gc_status st = fail(err, GC_DEVICE_LOST, d->lost_native, "device lost earlier: %s",
			    d->lost_msg != NULL ? d->lost_msg : "a command buffer failed");
	pthread_mutex_unlock(&d->lmu);
	return st;
}

/* cb_failed reports a command buffer that ended in MTLCommandBufferStatusError
 * (commandBuffer.error) and marks the device lost. */
static gc_status cb_failed(gc_device d, id<MTLCommandBuffer> cb, const char *call, gc_error *err) {
	NSError *e = cb.error;
	int32_t code = e != nil ? (int32_t)e.code : 0;
	gc_status st = GC_DEVICE_LOST;
	if (e != nil && [e.domain isEqualToString:MTLCommandBufferErrorDomain] && e.code == MTLCommandBufferErrorOutOfMemory) {
		st = GC_OUT_OF_MEMORY;
	}
	char *m = format("%s: MTLCommandBuffer error %d (%s): %s", call, (int)code,
			 e != nil && e.domain.UTF8String != NULL ? e.domain.UTF8String : "no domain", nsmsg(e));
	pthread_mutex_lock(&d->lmu);
	if (!d->lost) {
		d->lost_native = code;
		d->lost_msg = m != NULL ? strdup(m) : NULL;
		__atomic_store_n(&d->lost, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&d->lmu);
	st = fail(err, st, code, "%s", m != NULL ? m : "MTLCommandBuffer error");
	free(m);
	return st;
}

static int is_stuck(gc_device d) {
	return __atomic_load_n(&d->stuck, __ATOMIC_ACQUIRE);
}

/* drain_failed declares d lost because ticket (0: copy_now's own command
 * buffer) did not complete within the drain limit: every later call fails
 * with GC_DEVICE_LOST, and nothing the GPU may still use is released. */
static gc_status drain_failed(gc_device d, const char *call, uint64_t ticket, gc_error *err) {
	char what[40] = "its command buffer";
	if (ticket != 0) {
		snprintf(what, sizeof what, "ticket %llu", (unsigned long long)ticket);
	}
	char *m = format("%s: %s did not complete within the drain limit (%llu ms); what it may use is leaked", call, what,
			 (unsigned long long)(d->drain_ns / 1000000));
	pthread_mutex_lock(&d->lmu);
	if (!d->lost) {
		d->lost_native = 0;
		d->lost_msg = m != NULL ? strdup(m) : NULL;
		__atomic_store_n(&d->stuck, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&d->lost, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&d->lmu);
	gc_status st = fail(err, GC_DEVICE_LOST, 0, "%s", m != NULL ? m : "did not complete within the drain limit");
	free(m);
	return st;
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cb_done(id<MTLCommandBuffer> cb) {
	MTLCommandBufferStatus s = cb.status;
	return s == MTLCommandBufferStatusCompleted || s == MTLCommandBufferStatusError;
}

/* await_cb waits for a committed command buffer: a poll for timeout 0,
 * waitUntilCompleted for UINT64_MAX, else polls of status with a sleep that
 * grows from 2 us to 200 us (Metal has no timed wait). Returns 1 when it
 * finished (completed or failed). */
static int await_cb(id<MTLCommandBuffer> cb, uint64_t timeout_ns) {
	if (cb_done(cb)) {
		return 1;
	}
	if (timeout_ns == 0) {
		return 0;
	}
	if (timeout_ns == UINT64_MAX) {
		[cb waitUntilCompleted];
		return 1;
	}
	uint64_t start = now_ns(), nap = 2000;
	for (;;) {
		if (cb_done(cb)) {
			return 1;
		}
		uint64_t spent = now_ns() - start;
		if (spent >= timeout_ns) {
			return 0;
		}
		uint64_t left = timeout_ns - spent, s = nap < left ? nap : left;
		struct timespec ts = {.tv_sec = (time_t)(s / 1000000000ull), .tv_nsec = (long)(s % 1000000000ull)};
		nanosleep(&ts, NULL);
		if (nap < 200000) {
			nap *= 2;
		}
	}
}

static void mark_completed(gc_device d, uint64_t ticket) {
	if (ticket > d->completed) {
		d->completed = ticket;
	}
}

/* wait_slot waits for a slot's command buffer with d->mu released (a strong
 * local keeps the command buffer alive if the slot is reused meanwhile).
 * d->mu held on entry and on return. */
static gc_status wait_slot(gc_device d, slot *s, uint64_t timeout_ns, gc_error *err) {
	uint64_t t = s->ticket;
	id<MTLCommandBuffer> cb = (__bridge id<MTLCommandBuffer>)s->cb;
	pthread_mutex_unlock(&d->mu);
	int blocking = timeout_ns != 0 && !cb_done(cb);
	int finished = await_cb(cb, timeout_ns);
	if (blocking) {
		add_counter(&d->counters.blocking_waits, 1);
	}
	gc_status st = GC_OK;
	if (finished && cb.status == MTLCommandBufferStatusError) {
		st = cb_failed(d, cb, "MTLCommandBuffer", err);
	}
	pthread_mutex_lock(&d->mu);
	if (!finished) {
		/* Outcomes, not failures: no message, so polling allocates nothing. */
		return timeout_ns == 0 ? GC_NOT_READY : GC_TIMEOUT;
	}
	if (st == GC_OK) {
		mark_completed(d, t);
	}
	return st;
}

static void end_encoder(gc_device d) {
	if (d->enc != NULL) {
		[(__bridge id<MTLComputeCommandEncoder>)d->enc endEncoding];
		CFRelease(d->enc);
		d->enc = NULL;
	}
	d->bound = NULL;
}

/* new_cb starts a command buffer for the recording. d->mu held. */
static gc_status new_cb(gc_device d, gc_error *err) {
	id<MTLCommandBuffer> cb = [(__bridge id<MTLCommandQueue>)d->queue commandBuffer];
	if (cb == nil) {
		return fail(err, GC_OUT_OF_MEMORY, 0, "MTLCommandQueue commandBuffer: returned nil");
	}
	cb.label = @"gocoll";
	d->cb = CFBridgingRetain(cb);
	return GC_OK;
}

/* recording makes sure a command buffer is being recorded, first waiting for
 * the submission that last used the next ring slot (as vulkan.c does), so at
 * most ring_size submissions are in flight. d->mu held. */
static gc_status recording(gc_device d, gc_error *err) {
	if (is_lost(d)) {
		return lost_error(d, err);
	}
	if (d->cb != NULL) {
		return GC_OK;
	}
	slot *s = &d->ring[(d->submitted + 1) % d->ring_size];
	if (s->cb != NULL && s->ticket > d->completed) {
		uint64_t t = s->ticket;
		gc_status st = wait_slot(d, s, d->drain_ns, err);
		if (st == GC_TIMEOUT) {
			return drain_failed(d, "recording into a busy ring slot", t, err);
		}
		if (st != GC_OK) {
			return st;
		}
	}
	return new_cb(d, err);
}

/* compute_encoder returns the recording's compute encoder, opening one if
 * needed. Its dispatches run one after another, each seeing the writes of
 * the earlier ones (MTLDispatchTypeSerial, computeCommandEncoder's default).
 * d->mu held, d->cb set. */
static id<MTLComputeCommandEncoder> compute_encoder(gc_device d) {
	if (d->enc == NULL) {
		id<MTLComputeCommandEncoder> enc = [(__bridge id<MTLCommandBuffer>)d->cb computeCommandEncoder];
		if (enc == nil) {
			return nil;
		}
		d->enc = CFBridgingRetain(enc);
		d->bound = NULL;
	}
	return (__bridge id<MTLComputeCommandEncoder>)d->enc;
}

static void discard_recording(gc_device d) {
	end_encoder(d);
	for (uint32_t i = 0; i < d->nseg; i++) {
		CFRelease(d->segments[i]);
		d->segments[i] = NULL;
	}
	d->nseg = 0;
	if (d->cb != NULL) {
		CFRelease(d->cb); /* never committed: nothing runs it */
		d->cb = NULL;
	}
}

static void destroy_device(gc_device d) {
	uint64_t n = 0;
	while (d->kernels != NULL) {
		struct gc_kernel_s *k = d->kernels;
		d->kernels = k->next;
		CFRelease(k->pipeline);
		free(k);
		n++;
	}
	while (d->buffers != NULL) {
		struct gc_buffer_s *b = d->buffers;
		d->buffers = b->next;
		CFRelease(b->buf);
		free(b);
		n++;
	}
	if (d->ts != NULL) {
		for (uint32_t i = 0; i < d->nqueries; i++) {
			if (d->ts[i].cb != NULL) {
				CFRelease(d->ts[i].cb);
			}
		}
	}
	if (d->ring != NULL) {
		for (uint32_t i = 0; i < d->ring_size; i++) {
			if (d->ring[i].cb != NULL) {
				CFRelease(d->ring[i].cb);
			}
		}
	}
	if (d->queue != NULL) {
		CFRelease(d->queue);
		n++;
	}
	add_counter(&d->counters.objects_destroyed, n);
	free(d->ts);
	free(d->ring);
	free(d->lost_msg);
	if (d->mu_init) {
		pthread_mutex_destroy(&d->mu);
		pthread_mutex_destroy(&d->xmu);
		pthread_mutex_destroy(&d->lmu);
	}
	free(d);
}

/* mtl_open: newCommandQueueWithMaxCommandBufferCount. The bound leaves room
 * for the ring, one recording's segments and copy_now, so creating a command
 * buffer never waits on one that is not committed yet. */
static gc_status mtl_open(uint32_t index, const gc_open_options *opts, gc_device *out, gc_error *err) {
	@autoreleasepool {
		gc_status st = ready(err);
		if (st != GC_OK) {
			return st;
		}
		if (out == NULL) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "open: out is NULL");
		}
		*out = NULL;
		if (index >= g.ndev) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "open: no device %u (%u devices)", index, g.ndev);
		}
		mdev *m = &g.devs[index];
		if (!m->info.usable) {
			return fail(err, GC_BACKEND, 0, "open: %s: %s", m->info.name, m->info.unusable_reason);
		}
		uint32_t ring_size = (opts != NULL && opts->ring_size != 0) ? opts->ring_size : GC_MTL_DEFAULT_RING;
		if (ring_size > GC_MTL_MAX_RING) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "open: ring_size %u > %u", ring_size, GC_MTL_MAX_RING);
		}
		uint32_t nqueries = opts != NULL ? opts->timestamp_queries : 0;
		if (nqueries > GC_MTL_MAX_QUERIES) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "open: %u timestamp queries > %u", nqueries, GC_MTL_MAX_QUERIES);
		}
		/* opts->disable_float64 changes nothing: there is no f64 to disable. */
		gc_device d = calloc(1, sizeof *d);
		if (d == NULL) {
			return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
		}
		d->m = m;
		d->ring_size = ring_size;
		d->nqueries = nqueries;
		d->drain_ns = (opts != NULL && opts->drain_timeout_ns != 0) ? opts->drain_timeout_ns : GC_DEFAULT_DRAIN_NS;
		d->ring = calloc(ring_size, sizeof *d->ring);
		d->ts = calloc(nqueries ? nqueries : 1, sizeof *d->ts);
		pthread_mutex_init(&d->mu, NULL);
		pthread_mutex_init(&d->xmu, NULL);
		pthread_mutex_init(&d->lmu, NULL);
		d->mu_init = 1;
		if (d->ring == NULL || d->ts == NULL) {
			destroy_device(d);
			return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
		}
		id<MTLDevice> dev = (__bridge id<MTLDevice>)m->device;
		id<MTLCommandQueue> q = [dev newCommandQueueWithMaxCommandBufferCount:ring_size + GC_MTL_MAX_SEGMENTS + 2];
		if (q == nil) {
			destroy_device(d);
			return fail(err, GC_OUT_OF_MEMORY, 0, "newCommandQueueWithMaxCommandBufferCount: returned nil");
		}
		q.label = @"gocoll";
		d->queue = CFBridgingRetain(q);
		add_counter(&d->counters.objects_created, 1);
		*out = d;
		return GC_OK;
	}
}

/* mtl_close discards an unsubmitted recording, waits, within the drain
 * limit, for the last submission (the queue runs in order) and releases
 * everything; it frees even on a device lost by a failed command buffer. A
 * device declared lost by the drain limit, now or earlier, is leaked whole:
 * the GPU may still use its memory (imported host memory included). */
static gc_status mtl_close(gc_device d, gc_error *err) {
	@autoreleasepool {
		if (d == NULL) {
			return GC_OK;
		}
		pthread_mutex_lock(&d->mu);
		discard_recording(d);
		if (d->submitted > d->completed && !is_stuck(d)) {
			uint64_t last = d->submitted;
			slot *s = &d->ring[last % d->ring_size];
			if (s->cb != NULL && s->ticket == last && !await_cb((__bridge id<MTLCommandBuffer>)s->cb, d->drain_ns)) {
				gc_error ignored = {0, NULL};
				drain_failed(d, "close", last, &ignored);
				free(ignored.msg);
			} else {
				d->completed = last;
			}
		}
		if (is_stuck(d)) {
			gc_status st = lost_error(d, err);
			pthread_mutex_unlock(&d->mu);
			return st;
		}
		pthread_mutex_unlock(&d->mu);
		destroy_device(d);
		return GC_OK;
	}
}

static gc_status mtl_counters(gc_device d, gc_counters *out, gc_error *err) {
	@autoreleasepool {
		if (d == NULL || out == NULL) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "counters: NULL argument");
		}
		out->objects_created = __atomic_load_n(&d->counters.objects_created, __ATOMIC_RELAXED);
		out->objects_destroyed = __atomic_load_n(&d->counters.objects_destroyed, __ATOMIC_RELAXED);
		out->submits = __atomic_load_n(&d->counters.submits, __ATOMIC_RELAXED);
		out->dispatches = __atomic_load_n(&d->counters.dispatches, __ATOMIC_RELAXED);
		out->copies = __atomic_load_n(&d->counters.copies, __ATOMIC_RELAXED);
		out->blocking_waits = __atomic_load_n(&d->counters.blocking_waits, __ATOMIC_RELAXED);
		return GC_OK;
	}
}

/* --------------------------------------------------------------- buffers */

static void link_buffer(gc_device d, struct gc_buffer_s *b) {
	pthread_mutex_lock(&d->mu);
	b->prev = NULL;
	b->next = d->buffers;
	if (d->buffers != NULL) {
		d->buffers->prev = b;
	}
	d->buffers = b;
	pthread_mutex_unlock(&d->mu);
	add_counter(&d->counters.objects_created, 1);
}

/* mtl_buffer_create: newBufferWithLength:options:. Host-visible memory is
 * MTLStorageModeShared (coherent; contents is the persistent mapping).
 * Device-local memory is MTLStorageModePrivate: VRAM on a discrete GPU, and on
 * Apple silicon the same unified memory but GPU-only, so host access goes
 * through copies, as device-local memory does everywhere. */
static gc_status mtl_buffer_create(gc_device d, uint64_t size, int32_t memory, gc_buffer *out, void **mapped, gc_error *err) {
	@autoreleasepool {
		if (d == NULL || out == NULL) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "buffer_create: NULL argument");
		}
		*out = NULL;
		if (mapped != NULL) {
			*mapped = NULL;
		}
		if (memory != GC_MEMORY_DEVICE_LOCAL && memory != GC_MEMORY_HOST_VISIBLE) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "buffer_create: unknown memory kind %d", (int)memory);
		}
		if (is_lost(d)) {
			return lost_error(d, err);
		}
		/* Metal has no empty buffers; storage comes in 4-byte words. */
		uint64_t sz = size != 0 ? size : 4;
		if (sz > UINT64_MAX - 3) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "buffer_create: size %llu too large", (unsigned long long)size);
		}
		sz = (sz + 3) & ~(uint64_t)3;
		if (sz > d->m->info.max_memory_allocation_size) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "newBufferWithLength: %llu bytes exceed maxBufferLength (%llu)",
				    (unsigned long long)sz, (unsigned long long)d->m->info.max_memory_allocation_size);
		}
		MTLResourceOptions o = MTLResourceHazardTrackingModeTracked |
				       (memory == GC_MEMORY_HOST_VISIBLE ? MTLResourceStorageModeShared : MTLResourceStorageModePrivate);
		id<MTLBuffer> buf = [(__bridge id<MTLDevice>)d->m->device newBufferWithLength:(NSUInteger)sz options:o];
		if (buf == nil) {
			return fail(err, GC_OUT_OF_MEMORY, 0, "newBufferWithLength: %llu bytes of %s memory: returned nil",
				    (unsigned long long)sz, memory == GC_MEMORY_HOST_VISIBLE ? "shared" : "private");
		}
		struct gc_buffer_s *b = calloc(1, sizeof *b);
		if (b == NULL) {
			return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
		}
		b->dev = d;
		b->size = size;
		b->mapped = memory == GC_MEMORY_HOST_VISIBLE ? buf.contents : NULL;
		b->buf = CFBridgingRetain(buf);
		link_buffer(d, b);
		*out = b;
		if (mapped != NULL) {
			*mapped = b->mapped;
		}
		return GC_OK;
	}
}

/* mtl_buffer_import: newBufferWithBytesNoCopy:length:options:deallocator:nil,
 * zero-copy over host memory gocoll allocated itself (page-aligned, whole
 * pages, outliving the buffer). */
static gc_status mtl_buffer_import(gc_device d, void *host, uint64_t size, gc_buffer *out, gc_error *err) {
	@autoreleasepool {
		if (d == NULL || out == NULL) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "buffer_import: NULL argument");
		}
		*out = NULL;
		uint64_t align = d->m->info.min_imported_host_pointer_alignment;
		if (align == 0) {
			align = 1;
		}
		if (host == NULL || size == 0 || (uintptr_t)host % align != 0 || size % align != 0) {
			return fail(err, GC_INVALID_ARGUMENT, 0,
				    "buffer_import: pointer %p and size %llu must be non-zero multiples of the page size (%llu)", host,
				    (unsigned long long)size, (unsigned long long)align);
		}
		if (size > d->m->info.max_memory_allocation_size) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "newBufferWithBytesNoCopy: %llu bytes exceed maxBufferLength (%llu)",
				    (unsigned long long)size, (unsigned long long)d->m->info.max_memory_allocation_size);
		}
		if (is_lost(d)) {
			return lost_error(d, err);
		}
		id<MTLBuffer> buf = [(__bridge id<MTLDevice>)d->m->device
			newBufferWithBytesNoCopy:host
					  length:(NSUInteger)size
					 options:MTLResourceStorageModeShared | MTLResourceHazardTrackingModeTracked
				     deallocator:nil];
		if (buf == nil) {
			return fail(err, GC_OUT_OF_MEMORY, 0, "newBufferWithBytesNoCopy: %llu bytes at %p: returned nil",
				    (unsigned long long)size, host);
		}
		struct gc_buffer_s *b = calloc(1, sizeof *b);
		if (b == NULL) {
			return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
		}
		b->dev = d;
		b->size = size;
		b->imported = 1;
		b->mapped = host;
		b->buf = CFBridgingRetain(buf);
		link_buffer(d, b);
		*out = b;
		return GC_OK;
	}
}

static gc_status submit_locked(gc_device d, uint64_t *ticket, gc_error *err);

/* release_imported waits until no submission uses an imported buffer (its
 * memory stays the caller's, which frees it once this returns): it commits
 * the recording if that uses the buffer, then waits, within the drain limit
 * and with d->mu released, for the last submission that does. Past the limit
 * the device is declared lost and the buffer leaked. d->mu held. */
static gc_status release_imported(gc_device d, struct gc_buffer_s *b, gc_error *err) {
	if (is_stuck(d)) {
		return lost_error(d, err);
	}
	gc_status st = GC_OK;
	uint64_t last = b->last_use;
	if (last > d->submitted && d->cb != NULL && !is_lost(d)) {
		uint64_t t;
		st = submit_locked(d, &t, err);
	}
	if (last > d->submitted) {
		last = d->submitted; /* the recording that used it was discarded */
	}
	if (st == GC_OK && last > d->completed && !is_lost(d)) {
		slot *s = &d->ring[last % d->ring_size];
		if (s->ticket == last && s->cb != NULL) {
			st = wait_slot(d, s, d->drain_ns, err);
			if (st == GC_TIMEOUT) {
				st = drain_failed(d, "buffer_destroy of imported memory", last, err);
			}
		}
		/* else the slot was reused, which waited for last first */
	}
	if (is_stuck(d) || (st != GC_OK && !is_lost(d))) {
		return st != GC_OK ? st : lost_error(d, err); /* the GPU may still use it: leak it */
	}
	return GC_OK;
}

/* mtl_buffer_destroy drops the shim's reference: command buffers retain the
 * buffers encoded into them, so Metal frees device memory after the last
 * submission that uses it (the deferral vulkan.c does by hand) and this
 * returns at once. Imported host memory is not Metal's: its buffer is
 * released only once no submission uses it (release_imported). */
static gc_status mtl_buffer_destroy(gc_buffer b, gc_error *err) {
	@autoreleasepool {
		if (b == NULL) {
			return GC_OK;
		}
		gc_device d = b->dev;
		pthread_mutex_lock(&d->mu);
		if (b->prev != NULL) {
			b->prev->next = b->next;
		} else {
			d->buffers = b->next;
		}
		if (b->next != NULL) {
			b->next->prev = b->prev;
		}
		gc_status st = b->imported ? release_imported(d, b, err) : GC_OK;
		if (st != GC_OK) {
			/* Not released: the device keeps it (and releases it at close,
			 * unless declared lost). */
			b->prev = NULL;
			b->next = d->buffers;
			if (d->buffers != NULL) {
				d->buffers->prev = b;
			}
			d->buffers = b;
		}
		pthread_mutex_unlock(&d->mu);
		if (st != GC_OK) {
			return st;
		}
		CFRelease(b->buf);
		free(b);
		add_counter(&d->counters.objects_destroyed, 1);
		return GC_OK;
	}
}

/* --------------------------------------------------------------- kernels */

/* spirv_float64 reports whether a SPIR-V module declares OpCapability Float64. */
static int spirv_float64(const uint32_t *w, size_t words) {
	for (size_t i = 5; i < words;) {
		uint32_t op = w[i] & 0xffffu, wc = w[i] >> 16;
		if (wc == 0) {
			break;
		}
		if (op == 17 /* OpCapability */ && wc >= 2 && i + 1 < words && w[i + 1] == 10 /* Float64 */) {
			return 1;
		}
		i += wc;
	}
	return 0;
}

static int ident_char(uint8_t c) {
	return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* msl_has_double reports whether MSL source uses the identifier "double". */
static int msl_has_double(const uint8_t *s, size_t n) {
	static const char word[] = "double";
	const size_t wn = sizeof word - 1;
	for (size_t i = 0; i + wn <= n; i++) {
		if (memcmp(s + i, word, wn) == 0 && (i == 0 || !ident_char(s[i - 1])) && (i + wn == n || !ident_char(s[i + wn]))) {
			return 1;
		}
	}
	return 0;
}

/* cached_pipeline returns the compute pipeline of (source, entry, constants) from
 * the device's cache, compiling the library (newLibraryWithSource, once per
 * source and device) and the specialized function
 * (newFunctionWithName:constantValues:error:, MTLFunctionConstantValues with
 * each constant's type read from functionConstantsDictionary) when new.
 * m->kmu held. */
static gc_status cached_pipeline(gc_device d, NSString *src, const char *entry, const gc_kernel_desc *desc,
			  id<MTLComputePipelineState> __autoreleasing *out, gc_error *err) {
	mdev *m = d->m;
	id<MTLDevice> dev = (__bridge id<MTLDevice>)m->device;
	NSMutableDictionary *cache = (__bridge NSMutableDictionary *)m->cache;
	NSString *lkey = [@"L:" stringByAppendingString:src];
	id<MTLLibrary> lib = cache[lkey];
	if (lib == nil) {
		NSError *e = nil;
		lib = [dev newLibraryWithSource:src options:compile_options() error:&e];
		if (lib == nil) {
			return fail(err, GC_BACKEND, e != nil ? (int32_t)e.code : 0, "newLibraryWithSource: %s", nsmsg(e));
		}
		if (e != nil) {
			record_message(format("warning: newLibraryWithSource (%s): %s", m->info.name, nsmsg(e)));
		}
		cache[lkey] = lib;
		add_counter(&g.objects, 1);
	}
	NSMutableString *pkey = [NSMutableString stringWithFormat:@"P:%s:", entry];
	for (uint32_t i = 0; i < desc->spec_count; i++) {
		[pkey appendFormat:@"%u=%u,", desc->spec_ids[i], desc->spec_values[i]];
	}
	[pkey appendString:src];
	id<MTLComputePipelineState> p = cache[pkey];
	if (p != nil) {
		*out = p;
		return GC_OK;
	}
	NSString *name = [NSString stringWithUTF8String:entry];
	id<MTLFunction> base = name != nil ? [lib newFunctionWithName:name] : nil;
	if (base == nil) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "newFunctionWithName: no kernel function %s in the MSL source", entry);
	}
	NSDictionary<NSString *, MTLFunctionConstant *> *decl = base.functionConstantsDictionary;
	MTLFunctionConstantValues *values = [MTLFunctionConstantValues new];
	for (uint32_t i = 0; i < desc->spec_count; i++) {
		uint32_t id_ = desc->spec_ids[i], v = desc->spec_values[i];
		MTLFunctionConstant *c = nil;
		for (MTLFunctionConstant *fc in decl.allValues) {
			if (fc.index == id_) {
				c = fc;
				break;
			}
		}
		if (c == nil) {
			continue; /* not used by this function, as Vulkan ignores unknown constant IDs */
		}
		switch (c.type) {
		case MTLDataTypeBool: {
			bool b = v != 0;
			[values setConstantValue:&b type:MTLDataTypeBool atIndex:id_];
			break;
		}
		case MTLDataTypeUInt:
		case MTLDataTypeInt:
		case MTLDataTypeFloat: /* the 32 bits as given, as a Vulkan float constant */
			[values setConstantValue:&v type:c.type atIndex:id_];
			break;
		default:
			return fail(err, GC_INVALID_ARGUMENT, 0,
				    "setConstantValue: function constant %u (%s) has MTLDataType %d; the ABI passes 32-bit integers, "
				    "floats and bools",
				    id_, c.name.UTF8String != NULL ? c.name.UTF8String : "?", (int)c.type);
		}
	}
	NSError *e = nil;
	id<MTLFunction> fn = [lib newFunctionWithName:name constantValues:values error:&e];
	if (fn == nil) {
		return fail(err, GC_BACKEND, e != nil ? (int32_t)e.code : 0, "newFunctionWithName:constantValues:error: %s", nsmsg(e));
	}
	p = [dev newComputePipelineStateWithFunction:fn error:&e];
	if (p == nil) {
		return fail(err, GC_BACKEND, e != nil ? (int32_t)e.code : 0, "newComputePipelineStateWithFunction: %s", nsmsg(e));
	}
	cache[pkey] = p;
	add_counter(&g.objects, 1);
	*out = p;
	return GC_OK;
}

/* mtl_kernel_create compiles MSL source (desc->code, desc->code_size bytes,
 * trailing NULs ignored; the entry point defaults to spirv-cross's "main0").
 * The storage buffers are the entry's [[buffer(0..binding_count-1)]] and the
 * push constants its [[buffer(binding_count)]] (cshim.MetalKernel rebinds
 * spirv-cross's output so). Specialization constant 0 is the work-group size. */
static gc_status mtl_kernel_create(gc_device d, const gc_kernel_desc *desc, gc_kernel *out, gc_error *err) {
	@autoreleasepool {
		if (d == NULL || desc == NULL || out == NULL) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "kernel_create: NULL argument");
		}
		*out = NULL;
		if (desc->code == NULL || desc->code_size == 0) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "kernel_create: no MSL source");
		}
		if (desc->binding_count == 0 || desc->binding_count > GC_MAX_BINDINGS || desc->binding_count > GC_MTL_BUFFER_SLOTS - 1) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "kernel_create: %u bindings (1..%u)", desc->binding_count,
				    GC_MAX_BINDINGS < GC_MTL_BUFFER_SLOTS - 1 ? GC_MAX_BINDINGS : GC_MTL_BUFFER_SLOTS - 1);
		}
		if (desc->push_size % 4 != 0 || desc->push_size > GC_MAX_PUSH_BYTES) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "kernel_create: push-constant size %u (a multiple of 4, at most %u)",
				    desc->push_size, GC_MAX_PUSH_BYTES);
		}
		if (desc->spec_count > GC_MTL_MAX_SPEC || (desc->spec_count > 0 && (desc->spec_ids == NULL || desc->spec_values == NULL))) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "kernel_create: %u specialization constants (at most %u, with ids and values)",
				    desc->spec_count, GC_MTL_MAX_SPEC);
		}
		const uint8_t *code = (const uint8_t *)desc->code;
		if (desc->code_size >= 20 && desc->code_size % 4 == 0 && desc->code[0] == 0x07230203u) {
			if (spirv_float64(desc->code, desc->code_size / 4)) {
				return unsupported_f64(err, "the SPIR-V module declares the Float64 capability");
			}
			return fail(err, GC_INVALID_ARGUMENT, 0,
				    "kernel_create: Metal compiles MSL source, not SPIR-V (pass kernels.MSL through cshim.MetalKernel)");
		}
		size_t len = desc->code_size;
		while (len > 0 && code[len - 1] == 0) {
			len--;
		}
		if (msl_has_double(code, len)) {
			return unsupported_f64(err, "the MSL source uses double");
		}
		uint32_t wg = 1;
		for (uint32_t i = 0; i < desc->spec_count; i++) {
			if (desc->spec_ids[i] == GC_MTL_SPEC_WORKGROUP) {
				wg = desc->spec_values[i];
			}
		}
		const gc_device_info *in = &d->m->info;
		if (wg == 0 || wg > in->max_compute_work_group_invocations || wg > in->max_compute_work_group_size[0]) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "kernel_create: work-group size %u (specialization constant 0) not in 1..%u", wg,
				    in->max_compute_work_group_invocations);
		}
		if (is_lost(d)) {
			return lost_error(d, err);
		}
		NSString *src = [[NSString alloc] initWithBytes:code length:len encoding:NSUTF8StringEncoding];
		if (src == nil) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "kernel_create: the MSL source is not UTF-8");
		}
		const char *entry = (desc->entry != NULL && desc->entry[0] != 0 && strcmp(desc->entry, "main") != 0) ? desc->entry : "main0";
		id<MTLComputePipelineState> p = nil;
		pthread_mutex_lock(&d->m->kmu);
		gc_status st = cached_pipeline(d, src, entry, desc, &p, err);
		pthread_mutex_unlock(&d->m->kmu);
		if (st != GC_OK) {
			return st;
		}
		if (wg > p.maxTotalThreadsPerThreadgroup) {
			return fail(err, GC_INVALID_ARGUMENT, 0,
				    "kernel_create: work-group size %u exceeds the pipeline's maxTotalThreadsPerThreadgroup (%lu)", wg,
				    (unsigned long)p.maxTotalThreadsPerThreadgroup);
		}
		struct gc_kernel_s *k = calloc(1, sizeof *k);
		if (k == NULL) {
			return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
		}
		k->dev = d;
		k->push_size = desc->push_size;
		k->binding_count = desc->binding_count;
		k->wg = wg;
		k->pipeline = CFBridgingRetain(p);
		pthread_mutex_lock(&d->mu);
		k->next = d->kernels;
		if (d->kernels != NULL) {
			d->kernels->prev = k;
		}
		d->kernels = k;
		pthread_mutex_unlock(&d->mu);
		add_counter(&d->counters.objects_created, 1);
		*out = k;
		return GC_OK;
	}
}

/* mtl_kernel_destroy drops the shim's reference; command buffers that use
 * the pipeline retain it until they complete. */
static gc_status mtl_kernel_destroy(gc_kernel k, gc_error *err) {
	@autoreleasepool {
		(void)err;
		if (k == NULL) {
			return GC_OK;
		}
		gc_device d = k->dev;
		pthread_mutex_lock(&d->mu);
		if (k->prev != NULL) {
			k->prev->next = k->next;
		} else {
			d->kernels = k->next;
		}
		if (k->next != NULL) {
			k->next->prev = k->prev;
		}
		pthread_mutex_unlock(&d->mu);
		CFRelease(k->pipeline);
		free(k);
		add_counter(&d->counters.objects_destroyed, 1);
		return GC_OK;
	}
}

/* ------------------------------------------------------------- recording */

/* buffer_usable: a Metal device uses only its own buffers (checks.h). */
static int buffer_usable(gc_device d, gc_buffer b) {
	(void)d;
	(void)b;
	return 0;
}

#include "checks.h"

static int copy_aligned(uint64_t dst_off, uint64_t src_off, uint64_t size) {
	return ((dst_off | src_off | size) & 3u) == 0;
}

/* blit_copy encodes one copy in its own blit encoder
 * (copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:); Metal
 * orders encoders of a command buffer on the buffers they share. */
static void blit_copy(id<MTLCommandBuffer> cb, gc_buffer dst, uint64_t dst_off, gc_buffer src, uint64_t src_off, uint64_t size) {
	id<MTLBlitCommandEncoder> blit = [cb blitCommandEncoder];
	[blit copyFromBuffer:(__bridge id<MTLBuffer>)src->buf
		sourceOffset:(NSUInteger)src_off
		    toBuffer:(__bridge id<MTLBuffer>)dst->buf
	   destinationOffset:(NSUInteger)dst_off
			size:(NSUInteger)size];
	[blit endEncoding];
}

/* kernel_copy encodes a copy of any alignment with gc_copy_bytes, in chunks
 * of at most 1 GiB (the kernel counts bytes in 32 bits). */
static void kernel_copy(mdev *m, id<MTLComputeCommandEncoder> enc, gc_buffer dst, uint64_t dst_off, gc_buffer src,
			uint64_t src_off, uint64_t size) {
	[enc setComputePipelineState:(__bridge id<MTLComputePipelineState>)m->copy_pipe];
	uint32_t tg = m->copy_threads;
	for (uint64_t done = 0; done < size;) {
		uint32_t n = (uint32_t)(size - done < GC_MTL_COPY_CHUNK ? size - done : GC_MTL_COPY_CHUNK);
		uint64_t groups = ((uint64_t)n + tg - 1) / tg;
		if (groups > GC_MTL_COPY_GROUPS) {
			groups = GC_MTL_COPY_GROUPS;
		}
		[enc setBuffer:(__bridge id<MTLBuffer>)dst->buf offset:(NSUInteger)(dst_off + done) atIndex:0];
		[enc setBuffer:(__bridge id<MTLBuffer>)src->buf offset:(NSUInteger)(src_off + done) atIndex:1];
		[enc setBytes:&n length:sizeof n atIndex:2];
		[enc dispatchThreadgroups:MTLSizeMake((NSUInteger)groups, 1, 1) threadsPerThreadgroup:MTLSizeMake(tg, 1, 1)];
		done += n;
	}
}

static gc_status mtl_cmd_copy(gc_device d, gc_buffer dst, uint64_t dst_off, gc_buffer src, uint64_t src_off, uint64_t size,
			      gc_error *err) {
	@autoreleasepool {
		gc_status st = check_copy(d, dst, dst_off, src, src_off, size, "cmd_copy", err);
		if (st != GC_OK || size == 0) {
			return st;
		}
		pthread_mutex_lock(&d->mu);
		st = recording(d, err);
		if (st == GC_OK) {
			if (copy_aligned(dst_off, src_off, size)) {
				end_encoder(d);
				blit_copy((__bridge id<MTLCommandBuffer>)d->cb, dst, dst_off, src, src_off, size);
			} else {
				id<MTLComputeCommandEncoder> enc = compute_encoder(d);
				if (enc == nil) {
					st = fail(err, GC_OUT_OF_MEMORY, 0, "computeCommandEncoder: returned nil");
				} else {
					kernel_copy(d->m, enc, dst, dst_off, src, src_off, size);
					d->bound = d->m->copy_pipe;
				}
			}
			if (st == GC_OK) {
				add_counter(&d->counters.copies, 1);
				src->last_use = dst->last_use = d->submitted + 1;
			}
		}
		pthread_mutex_unlock(&d->mu);
		return st;
	}
}

/* mtl_cmd_dispatch: setComputePipelineState (when it changes),
 * setBuffer:offset:atIndex: per binding, setBytes:length:atIndex: for the push
 * constants at index binding_count, dispatchThreadgroups:threadsPerThreadgroup:
 * with the kernel's work-group size. The serial compute encoder is the
 * barrier between dispatches. */
static gc_status mtl_cmd_dispatch(gc_device d, const gc_dispatch *x, gc_error *err) {
	@autoreleasepool {
		if (d == NULL || x == NULL || x->kernel == NULL) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "cmd_dispatch: NULL argument");
		}
		const struct gc_kernel_s *k = x->kernel;
		if (k->dev != d) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "cmd_dispatch: kernel belongs to another device");
		}
		if (x->binding_count != k->binding_count || x->push_size != k->push_size) {
			return fail(err, GC_INVALID_ARGUMENT, 0,
				    "cmd_dispatch: %u bindings and %u push-constant bytes given, the kernel has %u and %u",
				    x->binding_count, x->push_size, k->binding_count, k->push_size);
		}
		const uint32_t *maxg = d->m->info.max_compute_work_group_count;
		if (x->groups[0] > maxg[0] || x->groups[1] > maxg[1] || x->groups[2] > maxg[2]) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "dispatchThreadgroups: %u x %u x %u groups exceed %u per dimension",
				    x->groups[0], x->groups[1], x->groups[2], maxg[0]);
		}
		for (uint32_t i = 0; i < x->binding_count; i++) {
			const gc_binding *b = &x->bindings[i];
			gc_status st = check_range(d, b->buffer, b->offset, b->range, "setBuffer:offset:atIndex:", err);
			if (st != GC_OK) {
				return st;
			}
			if (b->range == 0) {
				return fail(err, GC_INVALID_ARGUMENT, 0, "setBuffer:offset:atIndex: binding %u has an empty range", i);
			}
		}
		pthread_mutex_lock(&d->mu);
		gc_status st = recording(d, err);
		if (st == GC_OK) {
			id<MTLComputeCommandEncoder> enc = compute_encoder(d);
			if (enc == nil) {
				st = fail(err, GC_OUT_OF_MEMORY, 0, "computeCommandEncoder: returned nil");
			} else {
				if (d->bound != k->pipeline) {
					[enc setComputePipelineState:(__bridge id<MTLComputePipelineState>)k->pipeline];
					d->bound = k->pipeline;
				}
				for (uint32_t i = 0; i < x->binding_count; i++) {
					const gc_binding *b = &x->bindings[i];
					[enc setBuffer:(__bridge id<MTLBuffer>)b->buffer->buf offset:(NSUInteger)b->offset atIndex:i];
					b->buffer->last_use = d->submitted + 1;
				}
				if (x->push_size > 0) {
					[enc setBytes:x->push length:x->push_size atIndex:x->binding_count];
				}
				if (x->groups[0] > 0 && x->groups[1] > 0 && x->groups[2] > 0) {
					[enc dispatchThreadgroups:MTLSizeMake(x->groups[0], x->groups[1], x->groups[2])
					    threadsPerThreadgroup:MTLSizeMake(k->wg, 1, 1)];
				}
				add_counter(&d->counters.dispatches, 1);
			}
		}
		pthread_mutex_unlock(&d->mu);
		return st;
	}
}

/* mtl_cmd_timestamp ends the command buffer being recorded (it is committed
 * with the rest at submit) and starts the next one: query's value is the
 * ended command buffer's GPUEndTime, after all the work recorded before it. */
static gc_status mtl_cmd_timestamp(gc_device d, uint32_t query, gc_error *err) {
	@autoreleasepool {
		if (d == NULL) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "cmd_timestamp: NULL device");
		}
		if (query >= d->nqueries) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "cmd_timestamp: query %u out of %u (open with timestamp_queries)", query,
				    d->nqueries);
		}
		pthread_mutex_lock(&d->mu);
		gc_status st = recording(d, err);
		if (st == GC_OK && d->nseg == GC_MTL_MAX_SEGMENTS) {
			st = fail(err, GC_INVALID_ARGUMENT, 0, "cmd_timestamp: more than %u timestamps in one submission", GC_MTL_MAX_SEGMENTS);
		}
		if (st == GC_OK) {
			end_encoder(d);
			tstamp *t = &d->ts[query];
			if (t->cb != NULL) {
				CFRelease(t->cb);
			}
			t->cb = CFRetain(d->cb);
			t->valid = 0;
			d->segments[d->nseg++] = d->cb;
			d->cb = NULL;
			st = new_cb(d, err);
		}
		pthread_mutex_unlock(&d->mu);
		return st;
	}
}

/* submit_locked commits the recording's command buffers in order (commit),
 * keeps the last in the ring as the ticket's fence, and sets *ticket to the
 * last ticket submitted. d->mu held. */
static gc_status submit_locked(gc_device d, uint64_t *ticket, gc_error *err) {
	if (is_lost(d)) {
		return lost_error(d, err);
	}
	if (d->cb == NULL) {
		*ticket = d->submitted;
		return GC_OK;
	}
	end_encoder(d);
	for (uint32_t i = 0; i < d->nseg; i++) {
		[(__bridge id<MTLCommandBuffer>)d->segments[i] commit];
		CFRelease(d->segments[i]); /* the queue holds it until it completes */
		d->segments[i] = NULL;
	}
	d->nseg = 0;
	[(__bridge id<MTLCommandBuffer>)d->cb commit];
	slot *s = &d->ring[(d->submitted + 1) % d->ring_size];
	if (s->cb != NULL) {
		CFRelease(s->cb);
	}
	s->cb = d->cb;
	d->cb = NULL;
	s->ticket = ++d->submitted;
	*ticket = s->ticket;
	add_counter(&d->counters.submits, 1);
	return GC_OK;
}

/* mtl_submit commits the recording (submit_locked). */
static gc_status mtl_submit(gc_device d, uint64_t *ticket, gc_error *err) {
	@autoreleasepool {
		if (d == NULL || ticket == NULL) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "submit: NULL argument");
		}
		pthread_mutex_lock(&d->mu);
		gc_status st = submit_locked(d, ticket, err);
		pthread_mutex_unlock(&d->mu);
		return st;
	}
}

/* mtl_wait: status for a poll, waitUntilCompleted for no timeout, else polls
 * of status until the timeout. A failed command buffer's
 * commandBuffer.error comes back as the error (and loses the device). */
static gc_status mtl_wait(gc_device d, uint64_t ticket, uint64_t timeout_ns, gc_error *err) {
	@autoreleasepool {
		if (d == NULL) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "wait: NULL device");
		}
		pthread_mutex_lock(&d->mu);
		gc_status st = GC_OK;
		if (ticket <= d->completed) {
			/* done (ticket 0 included) */
		} else if (is_lost(d)) {
			st = lost_error(d, err);
		} else if (ticket > d->submitted) {
			st = fail(err, GC_INVALID_ARGUMENT, 0, "wait: ticket %llu was not submitted (last is %llu)",
				  (unsigned long long)ticket, (unsigned long long)d->submitted);
		} else {
			slot *s = &d->ring[ticket % d->ring_size];
			if (s->ticket != ticket) {
				/* The slot was reused, which waited for ticket first. */
				mark_completed(d, ticket);
			} else {
				st = wait_slot(d, s, timeout_ns, err);
			}
		}
		pthread_mutex_unlock(&d->mu);
		return st;
	}
}

/* mtl_wait_idle waits for the last submission, within the drain limit and
 * with d->mu released while it blocks. */
static gc_status mtl_wait_idle(gc_device d, gc_error *err) {
	@autoreleasepool {
		if (d == NULL) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "wait_idle: NULL device");
		}
		pthread_mutex_lock(&d->mu);
		gc_status st = GC_OK;
		if (is_lost(d)) {
			st = lost_error(d, err);
		} else if (d->submitted > d->completed) {
			uint64_t last = d->submitted;
			slot *s = &d->ring[last % d->ring_size];
			if (s->ticket == last && s->cb != NULL) {
				st = wait_slot(d, s, d->drain_ns, err);
				if (st == GC_TIMEOUT) {
					st = drain_failed(d, "wait_idle", last, err);
				}
			}
			if (st == GC_OK) {
				mark_completed(d, last);
			}
		}
		pthread_mutex_unlock(&d->mu);
		return st;
	}
}

/* mtl_copy_now copies through a command buffer of its own on the device's
 * queue (after everything committed before it), commits it and waits
 * (waitUntilCompleted); it does not touch the recording. */
static gc_status mtl_copy_now(gc_device d, gc_buffer dst, uint64_t dst_off, gc_buffer src, uint64_t src_off, uint64_t size,
			      gc_error *err) {
	@autoreleasepool {
		gc_status st = check_copy(d, dst, dst_off, src, src_off, size, "copy_now", err);
		if (st != GC_OK || size == 0) {
			return st;
		}
		pthread_mutex_lock(&d->xmu);
		if (is_lost(d)) {
			pthread_mutex_unlock(&d->xmu);
			return lost_error(d, err);
		}
		id<MTLCommandBuffer> cb = [(__bridge id<MTLCommandQueue>)d->queue commandBuffer];
		if (cb == nil) {
			pthread_mutex_unlock(&d->xmu);
			return fail(err, GC_OUT_OF_MEMORY, 0, "MTLCommandQueue commandBuffer: returned nil");
		}
		cb.label = @"gocoll copy_now";
		if (copy_aligned(dst_off, src_off, size)) {
			blit_copy(cb, dst, dst_off, src, src_off, size);
		} else {
			id<MTLComputeCommandEncoder> enc = [cb computeCommandEncoder];
			kernel_copy(d->m, enc, dst, dst_off, src, src_off, size);
			[enc endEncoding];
		}
		[cb commit];
		add_counter(&d->counters.submits, 1);
		add_counter(&d->counters.blocking_waits, 1);
		if (!await_cb(cb, d->drain_ns)) {
			st = drain_failed(d, "copy_now", 0, err);
		} else if (cb.status == MTLCommandBufferStatusError) {
			st = cb_failed(d, cb, "copy_now", err);
		}
		pthread_mutex_unlock(&d->xmu);
		return st;
	}
}

/* mtl_read_timestamps reads GPUEndTime (seconds of host time) of the command
 * buffers cmd_timestamp ended, in nanoseconds; GC_NOT_READY until they
 * completed. */
static gc_status mtl_read_timestamps(gc_device d, uint32_t first, uint32_t count, uint64_t *out, gc_error *err) {
	@autoreleasepool {
		if (d == NULL || (out == NULL && count > 0)) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "read_timestamps: NULL argument");
		}
		if (first > d->nqueries || count > d->nqueries - first) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "read_timestamps: queries [%u, +%u) out of %u", first, count, d->nqueries);
		}
		if (count == 0) {
			return GC_OK;
		}
		if (is_lost(d)) {
			return lost_error(d, err);
		}
		gc_status st = GC_OK;
		pthread_mutex_lock(&d->mu);
		for (uint32_t i = 0; i < count && st == GC_OK; i++) {
			tstamp *t = &d->ts[first + i];
			if (!t->valid) {
				if (t->cb == NULL) {
					st = GC_NOT_READY; /* never written */
					break;
				}
				id<MTLCommandBuffer> cb = (__bridge id<MTLCommandBuffer>)t->cb;
				MTLCommandBufferStatus s = cb.status;
				if (s == MTLCommandBufferStatusError) {
					st = cb_failed(d, cb, "read_timestamps", err);
					break;
				}
				if (s != MTLCommandBufferStatusCompleted) {
					st = GC_NOT_READY;
					break;
				}
				/* An empty command buffer may report no GPU time; the
				 * driver's completion time is the closest then. */
				CFTimeInterval end = cb.GPUEndTime;
				if (end <= 0) {
					end = cb.kernelEndTime;
				}
				t->value = (uint64_t)llround(end * 1e9);
				t->valid = 1;
				CFRelease(t->cb);
				t->cb = NULL;
			}
			out[i] = t->value;
		}
		pthread_mutex_unlock(&d->mu);
		return st;
	}
}

static const gc_backend metal_backend = {
	.abi_version = GC_ABI_VERSION,
	.name = "metal",
	.init = mtl_init,
	.instance_info = mtl_instance_info,
	.device_count = mtl_device_count,
	.device_info = mtl_device_info,
	.message_count = mtl_message_count,
	.take_message = mtl_take_message,
	.open = mtl_open,
	.close = mtl_close,
	.counters = mtl_counters,
	.buffer_create = mtl_buffer_create,
	.buffer_import = mtl_buffer_import,
	.buffer_destroy = mtl_buffer_destroy,
	.kernel_create = mtl_kernel_create,
	.kernel_destroy = mtl_kernel_destroy,
	.cmd_copy = mtl_cmd_copy,
	.cmd_dispatch = mtl_cmd_dispatch,
	.cmd_timestamp = mtl_cmd_timestamp,
	.submit = mtl_submit,
	.wait = mtl_wait,
	.wait_idle = mtl_wait_idle,
	.copy_now = mtl_copy_now,
	.read_timestamps = mtl_read_timestamps,
};

const gc_backend *gc_metal(void) {
	return &metal_backend;
}
