/*
 * shim.h: gocoll's backend-neutral C ABI for GPU compute.
 *
 * One implementation per compute API (Vulkan: gc_vulkan(); Metal, later:
 * gc_metal()) fills a table of function pointers, so several implementations
 * link into one binary without clashing symbols. Everything else in an
 * implementation file is static.
 *
 * Conventions:
 *   - Handles are opaque pointers.
 *   - Every entry returns a gc_status. On failure (any status but GC_OK) it
 *     fills *err, when err is not NULL: native is the API's own result code
 *     (a VkResult for Vulkan, 0 when none applies) and msg a NUL-terminated
 *     message allocated with malloc that names the failing API call
 *     ("vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY"). The caller frees
 *     msg with free(). On success *err is left untouched. There is no global
 *     last-error state: devices may be shared between threads.
 *   - Thread safety: instance entries (init, device_count, device_info,
 *     message_*) may be called from any thread. On one device, the recording
 *     entries (cmd_*, submit) must not be called concurrently with each other
 *     or with close; wait, wait_idle, copy_now, counters, buffer_* and
 *     kernel_* may be called from any thread at any time before close.
 *   - No pointer passed in is retained after the call returns, except the
 *     host memory given to buffer_import, which must outlive the buffer.
 *   - Drain limit: no wait that the caller did not bound itself (recording
 *     into a busy ring slot, wait_idle, close, copy_now, buffer_destroy of
 *     imported memory) lasts longer than the device's drain limit
 *     (gc_open_options.drain_timeout_ns), and no device lock is held while
 *     it blocks. Work that does not complete within it declares the device
 *     lost: that call and every later one fail with GC_DEVICE_LOST, and
 *     what the GPU may still use is leaked, never freed or unmapped: close
 *     then frees nothing the GPU could touch and returns GC_DEVICE_LOST, and
 *     imported host memory stays imported (its owner must leak it too).
 */
#ifndef GOCOLL_SHIM_H
#define GOCOLL_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GC_ABI_VERSION changes whenever a struct or the table changes. */
#define GC_ABI_VERSION 6

typedef int32_t gc_status;
enum {
	GC_OK = 0,
	GC_INVALID_ARGUMENT = 1, /* a bad argument; nothing was done */
	GC_OUT_OF_MEMORY = 2,    /* host or device memory exhausted */
	GC_DEVICE_LOST = 3,      /* the device is lost; only close works now */
	GC_UNSUPPORTED = 4,      /* the device or driver lacks a feature */
	GC_TIMEOUT = 5,          /* a wait with a timeout > 0 expired */
	GC_BACKEND = 6,          /* any other API failure */
	GC_NOT_READY = 7,        /* a poll (timeout 0) found the work not done */
	GC_UNAVAILABLE = 8       /* the API library could not be loaded or initialised */
};

/* gc_error is filled on failure; msg is malloc'd and freed by the caller. */
typedef struct gc_error {
	int32_t native;
	char *msg;
} gc_error;

typedef struct gc_device_s *gc_device;
typedef struct gc_buffer_s *gc_buffer;
typedef struct gc_kernel_s *gc_kernel;

/* Memory kinds for buffer_create. */
enum {
	GC_MEMORY_DEVICE_LOCAL = 0, /* fastest for kernels, not mapped */
	GC_MEMORY_HOST_VISIBLE = 1  /* host-visible, coherent, persistently mapped */
};

/* Device types (the values of VkPhysicalDeviceType). */
enum {
	GC_DEVICE_OTHER = 0,
	GC_DEVICE_INTEGRATED = 1,
	GC_DEVICE_DISCRETE = 2,
	GC_DEVICE_VIRTUAL = 3,
	GC_DEVICE_CPU = 4
};

#define GC_NAME_MAX 256
#define GC_MAX_HEAPS 16
#define GC_MAX_BINDINGS 16
#define GC_MAX_PUSH_BYTES 128

typedef struct gc_init_options {
	/* library is the path of the API library to load; NULL or "" means
	 * $GOCOLL_VULKAN_LIB when set, else the platform's default
	 * (libvulkan.so.1, libvulkan.1.dylib). */
	const char *library;
	/* validation != 0 enables the validation layer and a debug messenger
	 * that records warnings and errors (see message_count/take_message).
	 * $GOCOLL_VULKAN_VALIDATION=1 enables it too. */
	int32_t validation;
} gc_init_options;

typedef struct gc_instance_info {
	uint32_t api_version;    /* the API version the instance was created with */
	uint32_t loader_version; /* the version the loader reports */
	int32_t validation;      /* validation layer and messenger active */
	char library[GC_NAME_MAX];
} gc_instance_info;

typedef struct gc_heap {
	uint64_t size;
	int32_t device_local;
	int32_t reserved;
} gc_heap;

typedef struct gc_device_info {
	char name[GC_NAME_MAX];
	char driver_name[GC_NAME_MAX]; /* empty without VK_KHR_driver_properties / 1.2 */
	char driver_info[GC_NAME_MAX];
	uint32_t vendor_id;
	uint32_t device_id;
	int32_t type; /* GC_DEVICE_* */
	uint32_t api_version;
	uint32_t driver_version;
	int32_t shader_float64;
	/* Features of the narrow and wide integer and 16-bit kernels, enabled
	 * at open wherever the device has them (0 on Metal: its implementation
	 * reports none): shaderInt64; storageBuffer8BitAccess (Vulkan 1.2 or
	 * VK_KHR_8bit_storage); storageBuffer16BitAccess (Vulkan 1.1). */
	int32_t shader_int64;
	int32_t storage_buffer_8bit;
	int32_t storage_buffer_16bit;
	int32_t push_descriptor;     /* VK_KHR_push_descriptor */
	int32_t external_memory_host; /* VK_EXT_external_memory_host */
	/* Float controls (Vulkan 1.2, or VK_KHR_shader_float_controls, which
	 * open enables where the device needs it): float_controls is whether
	 * the device reports them; denorm_independence its
	 * denormBehaviorIndependence (VkShaderFloatControlsIndependence: 0
	 * 32-bit only, 1 all, 2 none), which widths a kernel may declare a
	 * denormal mode for alone; denorm_preserve_float16/32/64 its
	 * shaderDenormPreserveFloat16/32/64, whether a kernel that declares the
	 * SPIR-V execution mode DenormPreserve for floats of that width may
	 * (and then does) keep their subnormals. All 0 on Metal. */
	int32_t float_controls;
	int32_t denorm_independence;
	int32_t denorm_preserve_float16;
	int32_t denorm_preserve_float32;
	int32_t denorm_preserve_float64;
	int32_t reserved_float_controls;
	int32_t usable;              /* open can succeed; else unusable_reason says why */
	char unusable_reason[GC_NAME_MAX];
	uint64_t max_storage_buffer_range;
	uint64_t max_memory_allocation_size;
	uint64_t min_storage_buffer_offset_alignment;
	uint64_t min_imported_host_pointer_alignment;
	uint32_t subgroup_size;
	float timestamp_period; /* nanoseconds per tick */
	uint32_t timestamp_valid_bits; /* of the compute queue; 0: no timestamps */
	uint32_t compute_queue_family;
	uint32_t max_compute_work_group_count[3];
	uint32_t max_compute_work_group_size[3];
	uint32_t max_compute_work_group_invocations;
	uint32_t max_push_constants_size;
	uint32_t max_push_descriptors;
	uint32_t heap_count;
	gc_heap heaps[GC_MAX_HEAPS];
} gc_device_info;

typedef struct gc_open_options {
	int32_t disable_float64;    /* do not enable shaderFloat64 */
	uint32_t ring_size;         /* submission slots; 0 means 16 */
	uint32_t timestamp_queries; /* timestamp query slots; 0 means none */
	/* share_device != 0 opens the rank on a logical device shared by every
	 * open of the same physical device (and float64 setting) in the process
	 * that asked for sharing: one device (one GPU context) instead of one per
	 * rank. Each open gets the family's next queue (queue index = opens so
	 * far mod the family's queue count, at most 16 queues); where there are
	 * fewer queues than opens, opens share a queue and their submissions are
	 * serialized by a lock of that queue. Command pools, the ring, fences,
	 * buffers and kernels stay per open. The device is destroyed when its
	 * last open closes. Only opens with the same share_key share: a
	 * caller gives each set of ranks (a group) its own key, so a device lost
	 * by one set does not take the others with it. */
	int32_t share_device;
	int32_t reserved;
	/* drain_timeout_ns bounds the device's waits that no caller bounds (see
	 * "Drain limit" above); 0 means GC_DEFAULT_DRAIN_NS. */
	uint64_t drain_timeout_ns;
	uint64_t share_key; /* see share_device */
} gc_open_options;

/* GC_DEFAULT_DRAIN_NS is the default drain limit: 10 s. */
#define GC_DEFAULT_DRAIN_NS 10000000000ull

/* gc_counters are a device's running totals. */
typedef struct gc_counters {
	uint64_t objects_created;   /* API objects created, device included (not a shared one) */
	uint64_t objects_destroyed;
	uint64_t submits;           /* queue submissions (ring and copy_now) */
	uint64_t dispatches;
	uint64_t copies;
	uint64_t blocking_waits;    /* waits that had to block on the driver */
	uint64_t replays;           /* submissions that resubmitted a recorded command buffer as is */
} gc_counters;

/* gc_binding binds [offset, offset+range) of buffer to one kernel binding.
 * offset should be a multiple of min_storage_buffer_offset_alignment and
 * range at most max_storage_buffer_range (the validation layer reports
 * violations; the implementation only checks the buffer's bounds). */
typedef struct gc_binding {
	gc_buffer buffer;
	uint64_t offset;
	uint64_t range;
} gc_binding;

/* gc_dispatch describes one kernel dispatch. Callers keep one per device
 * and refill it, so no memory is allocated per dispatch. */
typedef struct gc_dispatch {
	gc_kernel kernel;
	uint32_t groups[3];
	uint32_t binding_count; /* must equal the kernel's binding count */
	uint32_t push_size;     /* must equal the kernel's push-constant size */
	uint32_t reserved;
	gc_binding bindings[GC_MAX_BINDINGS];
	uint8_t push[GC_MAX_PUSH_BYTES];
} gc_dispatch;

typedef struct gc_kernel_desc {
	const uint32_t *code; /* SPIR-V words */
	size_t code_size;     /* in bytes, a multiple of 4 */
	const char *entry;    /* NULL means "main" */
	uint32_t spec_count;  /* specialization constants, all 32-bit */
	const uint32_t *spec_ids;
	const uint32_t *spec_values;
	uint32_t push_size;     /* push-constant bytes, a multiple of 4 */
	uint32_t binding_count; /* storage buffers at bindings 0..count-1 of set 0 */
} gc_kernel_desc;

typedef struct gc_backend {
	uint32_t abi_version;
	const char *name;

	/* init loads the API library and creates the process's one instance.
	 * The first call decides; later calls return the first call's result
	 * (options ignored). */
	gc_status (*init)(const gc_init_options *opts, gc_error *err);
	gc_status (*instance_info)(gc_instance_info *out, gc_error *err);
	gc_status (*device_count)(uint32_t *count, gc_error *err);
	gc_status (*device_info)(uint32_t index, gc_device_info *out, gc_error *err);

	/* Validation messages: message_count is the number recorded since init;
	 * take_message pops the oldest one (malloc'd; *msg = NULL when none). */
	gc_status (*message_count)(uint64_t *count, gc_error *err);
	gc_status (*take_message)(char **msg, gc_error *err);

	/* open creates a logical device with its own compute queue, or with
	 * share_device takes a queue of a shared logical device. */
	gc_status (*open)(uint32_t index, const gc_open_options *opts, gc_device *out, gc_error *err);
	/* close waits for the device to go idle, and for other opens' work that
	 * uses its buffers (share_device), and destroys everything it owns
	 * (buffers and kernels not yet destroyed included), in reverse order. A
	 * buffer that another open declared lost may still use is leaked: close
	 * frees the rest and returns GC_DEVICE_LOST. */
	gc_status (*close)(gc_device dev, gc_error *err);
	gc_status (*counters)(gc_device dev, gc_counters *out, gc_error *err);

	/* buffer_create allocates size bytes (0 allowed) of the given memory kind;
	 * *mapped receives the persistent mapping of host-visible memory, else NULL. */
	gc_status (*buffer_create)(gc_device dev, uint64_t size, int32_t memory, gc_buffer *out, void **mapped, gc_error *err);
	/* buffer_import wraps host memory (VK_EXT_external_memory_host): host and
	 * size must be multiples of min_imported_host_pointer_alignment, and the
	 * memory must outlive the buffer. GC_UNSUPPORTED without the extension. */
	gc_status (*buffer_import)(gc_device dev, void *host, uint64_t size, gc_buffer *out, gc_error *err);
	/* buffer_destroy frees the buffer once every submission that may use it
	 * has completed (at once when none is pending): its device's, and with
	 * share_device those of every other open that used it in its commands
	 * (each open counts its own tickets). Device memory is freed later, when
	 * that work is known to be done, and the call returns at once. Imported
	 * host memory is released before the call returns, so the caller may
	 * free it then: the call first submits each recording (its device's or
	 * another open's) that uses the buffer, then waits for the last
	 * submission of each that uses it (within that device's drain limit;
	 * past it that device is lost, the buffer stays imported and the call
	 * returns GC_DEVICE_LOST: the memory must then be leaked). A buffer that
	 * an open declared lost may still use is leaked, and the call returns
	 * GC_DEVICE_LOST. */
	gc_status (*buffer_destroy)(gc_buffer buf, gc_error *err);

	gc_status (*kernel_create)(gc_device dev, const gc_kernel_desc *desc, gc_kernel *out, gc_error *err);
	/* kernel_destroy is deferred like buffer_destroy. */
	gc_status (*kernel_destroy)(gc_kernel kernel, gc_error *err);

	/* Recording. Each command is followed by a memory barrier, so later
	 * commands see earlier writes; submit adds host visibility. Recording
	 * into a ring slot whose previous submission still runs waits for it. */
	gc_status (*cmd_copy)(gc_device dev, gc_buffer dst, uint64_t dst_off, gc_buffer src, uint64_t src_off, uint64_t size, gc_error *err);
	gc_status (*cmd_dispatch)(gc_device dev, const gc_dispatch *dispatch, gc_error *err);
	gc_status (*cmd_timestamp)(gc_device dev, uint32_t query, gc_error *err);

	/* submit sends what was recorded, without waiting, and returns its
	 * ticket (tickets count up from 1). With nothing recorded it submits
	 * nothing and returns the last ticket (0 before the first submit). */
	gc_status (*submit)(gc_device dev, uint64_t *ticket, gc_error *err);
	/* wait waits for a ticket: GC_OK when it (and every earlier ticket) is
	 * done, GC_NOT_READY when timeout_ns is 0 and it is not, GC_TIMEOUT when
	 * timeout_ns > 0 expired. UINT64_MAX waits forever. */
	gc_status (*wait)(gc_device dev, uint64_t ticket, uint64_t timeout_ns, gc_error *err);
	/* wait_idle waits for everything submitted, within the drain limit. */
	gc_status (*wait_idle)(gc_device dev, gc_error *err);

	/* copy_now copies at once through the device's own transfer command
	 * buffer and waits for it; it does not touch the recording. */
	gc_status (*copy_now)(gc_device dev, gc_buffer dst, uint64_t dst_off, gc_buffer src, uint64_t src_off, uint64_t size, gc_error *err);
	/* read_timestamps reads count query slots written by cmd_timestamp, in
	 * ticks (see timestamp_period). GC_NOT_READY if one is not yet written. */
	gc_status (*read_timestamps)(gc_device dev, uint32_t first, uint32_t count, uint64_t *out, gc_error *err);
} gc_backend;

/* gc_vulkan returns the Vulkan implementation (vulkan.c). */
const gc_backend *gc_vulkan(void);

/* ---------------------------------------------------------- Vulkan interop
 * Vulkan-specific entry points outside the backend-neutral table, for
 * frameworks that compute on gocoll's buffers or hand it theirs. Handles are
 * the Vulkan handles as integers. */
typedef struct gc_vk_handles {
	uint64_t instance;        /* VkInstance */
	uint64_t physical_device; /* VkPhysicalDevice */
	uint64_t device;          /* VkDevice (the rank's logical device; with share_device, shared) */
	uint64_t queue;           /* VkQueue gocoll submits to (with share_device, maybe shared
	                           * with other ranks: submit to it only through gocoll) */
	uint32_t queue_family;
	uint32_t api_version;     /* the instance's API version */
	uint64_t get_instance_proc_addr; /* PFN_vkGetInstanceProcAddr of the loaded library */
} gc_vk_handles;

/* gc_vk_device_handles fills out with a Vulkan device's handles. */
gc_status gc_vk_device_handles(gc_device d, gc_vk_handles *out);
/* gc_vk_queue_lock and gc_vk_queue_unlock take and release the lock that
 * externally synchronizes the device's VkQueue (vkQueueSubmit,
 * vkQueueWaitIdle): with share_device several opens may use one queue, so
 * a framework submitting to out->queue holds it around its calls. */
gc_status gc_vk_queue_lock(gc_device d);
gc_status gc_vk_queue_unlock(gc_device d);
/* gc_vk_buffer_handles returns a buffer's VkBuffer and VkDeviceMemory (0 for
 * a wrapped buffer). Bindings start at offset 0 of the VkBuffer. */
gc_status gc_vk_buffer_handles(gc_buffer b, uint64_t *buffer, uint64_t *memory);
/* gc_vk_wrap_buffer makes a gc_buffer of a VkBuffer that the caller created
 * on d's VkDevice, bound to memory, with STORAGE_BUFFER and TRANSFER_SRC/DST
 * usage. gocoll never destroys the VkBuffer; it must outlive the gc_buffer. */
gc_status gc_vk_wrap_buffer(gc_device d, uint64_t vkbuffer, uint64_t size, gc_buffer *out, gc_error *err);

/* Test hooks (Vulkan only; tests use them, nothing else should).
 *
 * gc_vk_test_stall makes d's next submission wait for the host (on a
 * timeline semaphore), so its work and fence do not complete, as on a GPU
 * that hangs, until gc_vk_test_release releases every stalled submission of
 * the process (whatever became of their devices: a device declared lost
 * keeps its semaphore). GC_UNSUPPORTED without timeline semaphores (Vulkan
 * 1.2's timelineSemaphore).
 *
 * GOCOLL_VULKAN_TEST_NONCOHERENT_IMPORT=1 in the environment when a device is
 * opened makes it see the memory types that could import host memory as not
 * HOST_COHERENT, so buffer_import finds no coherent type. */
gc_status gc_vk_test_stall(gc_device d, gc_error *err);
void gc_vk_test_release(void);

#ifdef __cplusplus
}
#endif

#endif /* GOCOLL_SHIM_H */
