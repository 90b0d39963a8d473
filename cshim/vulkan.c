/*
 * vulkan.c: the Vulkan implementation of gocoll's C ABI (shim.h).
 *
 * libvulkan is opened at run time with dlopen (VK_NO_PROTOTYPES), so a binary
 * that contains this file still starts where Vulkan is missing. Instance-level
 * functions live in one struct loaded through vkGetInstanceProcAddr;
 * device-level ones in a per-device struct loaded through vkGetDeviceProcAddr
 * (a device's own dispatch, not the loader's trampolines).
 *
 * Steady state creates no Vulkan object: pipelines are created once by the
 * caller and cached, command buffers and fences come from a ring of
 * submission slots, and descriptors are pushed (VK_KHR_push_descriptor).
 * Every object created is counted (gc_counters.objects_created).
 *
 * Only gc_vulkan() is exported; everything else is static. Building with
 * -DGOCOLL_NO_VULKAN leaves the whole file out.
 */
#ifndef GOCOLL_NO_VULKAN

#define VK_NO_PROTOTYPES 1
#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "common.h"

#if defined(__APPLE__)
#define GC_VK_DEFAULT_LIB "libvulkan.1.dylib"
#else
#define GC_VK_DEFAULT_LIB "libvulkan.so.1"
#endif

#ifndef VK_API_VERSION_1_3
#define VK_API_VERSION_1_3 VK_MAKE_API_VERSION(0, 1, 3, 0)
#endif

#define GC_VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"
#define GC_PORTABILITY_ENUMERATION "VK_KHR_portability_enumeration"
#define GC_PORTABILITY_SUBSET "VK_KHR_portability_subset"
#define GC_DEFAULT_RING 16u
#define GC_MAX_RING 1024u
#define GC_MAX_SPEC 64u
#define GC_MAX_SHARED_QUEUES 16u

/* ---------------------------------------------------------------- errors */

static const char *result_name(VkResult r) {
	switch (r) {
	case VK_SUCCESS: return "VK_SUCCESS";
	case VK_NOT_READY: return "VK_NOT_READY";
	case VK_TIMEOUT: return "VK_TIMEOUT";
	case VK_EVENT_SET: return "VK_EVENT_SET";
	case VK_EVENT_RESET: return "VK_EVENT_RESET";
	case VK_INCOMPLETE: return "VK_INCOMPLETE";
	case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
	case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
	case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
	case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
	case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
	case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
	case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
	case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
	case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
	case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
	case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
	case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
	case VK_ERROR_UNKNOWN: return "VK_ERROR_UNKNOWN";
	case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
	case VK_ERROR_INVALID_EXTERNAL_HANDLE: return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
	case VK_ERROR_FRAGMENTATION: return "VK_ERROR_FRAGMENTATION";
	case VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS: return "VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS";
	default: return NULL;
	}
}

static gc_status status_of(VkResult r) {
	switch (r) {
	case VK_SUCCESS:
		return GC_OK;
	case VK_NOT_READY:
		return GC_NOT_READY;
	case VK_TIMEOUT:
		return GC_TIMEOUT;
	case VK_ERROR_OUT_OF_HOST_MEMORY:
	case VK_ERROR_OUT_OF_DEVICE_MEMORY:
	case VK_ERROR_TOO_MANY_OBJECTS:
	case VK_ERROR_OUT_OF_POOL_MEMORY:
	case VK_ERROR_FRAGMENTED_POOL:
	case VK_ERROR_FRAGMENTATION:
	case VK_ERROR_MEMORY_MAP_FAILED:
		return GC_OUT_OF_MEMORY;
	case VK_ERROR_DEVICE_LOST:
		return GC_DEVICE_LOST;
	case VK_ERROR_LAYER_NOT_PRESENT:
	case VK_ERROR_EXTENSION_NOT_PRESENT:
	case VK_ERROR_FEATURE_NOT_PRESENT:
	case VK_ERROR_INCOMPATIBLE_DRIVER:
	case VK_ERROR_FORMAT_NOT_SUPPORTED:
		return GC_UNSUPPORTED;
	case VK_ERROR_INVALID_EXTERNAL_HANDLE:
		return GC_INVALID_ARGUMENT;
	default:
		return GC_BACKEND;
	}
}

/* vkfail reports a failed Vulkan call as "vkCall: VK_ERROR_...". */
static gc_status vkfail(gc_error *err, VkResult r, const char *call) {
	const char *name = result_name(r);
	if (name != NULL) {
		return fail(err, status_of(r), (int32_t)r, "%s: %s", call, name);
	}
	return fail(err, status_of(r), (int32_t)r, "%s: VkResult %d", call, (int)r);
}

/* ------------------------------------------------------ function tables */

#define GC_GLOBAL_FNS(X)                       \
	X(vkCreateInstance)                    \
	X(vkEnumerateInstanceExtensionProperties) \
	X(vkEnumerateInstanceLayerProperties)

#define GC_INSTANCE_FNS(X)                        \
	X(vkDestroyInstance)                      \
	X(vkEnumeratePhysicalDevices)             \
	X(vkGetPhysicalDeviceProperties)          \
	X(vkGetPhysicalDeviceProperties2)         \
	X(vkGetPhysicalDeviceFeatures)            \
	X(vkGetPhysicalDeviceFeatures2)           \
	X(vkGetPhysicalDeviceQueueFamilyProperties) \
	X(vkGetPhysicalDeviceMemoryProperties)    \
	X(vkEnumerateDeviceExtensionProperties)   \
	X(vkCreateDevice)                         \
	X(vkGetDeviceProcAddr)

#define GC_DEVICE_FNS(X)                  \
	X(vkDestroyDevice)                \
	X(vkGetDeviceQueue)               \
	X(vkDeviceWaitIdle)               \
	X(vkQueueSubmit)                  \
	X(vkQueueWaitIdle)                \
	X(vkCreateBuffer)                 \
	X(vkDestroyBuffer)                \
	X(vkGetBufferMemoryRequirements)  \
	X(vkAllocateMemory)               \
	X(vkFreeMemory)                   \
	X(vkBindBufferMemory)             \
	X(vkMapMemory)                    \
	X(vkUnmapMemory)                  \
	X(vkCreateShaderModule)           \
	X(vkDestroyShaderModule)          \
	X(vkCreateDescriptorSetLayout)    \
	X(vkDestroyDescriptorSetLayout)   \
	X(vkCreatePipelineLayout)         \
	X(vkDestroyPipelineLayout)        \
	X(vkCreateComputePipelines)       \
	X(vkDestroyPipeline)              \
	X(vkCreateCommandPool)            \
	X(vkDestroyCommandPool)           \
	X(vkAllocateCommandBuffers)       \
	X(vkBeginCommandBuffer)           \
	X(vkEndCommandBuffer)             \
	X(vkResetCommandBuffer)           \
	X(vkCmdBindPipeline)              \
	X(vkCmdPushConstants)             \
	X(vkCmdDispatch)                  \
	X(vkCmdCopyBuffer)                \
	X(vkCmdPipelineBarrier)           \
	X(vkCmdResetQueryPool)            \
	X(vkCmdWriteTimestamp)            \
	X(vkCreateFence)                  \
	X(vkDestroyFence)                 \
	X(vkResetFences)                  \
	X(vkGetFenceStatus)               \
	X(vkWaitForFences)                \
	X(vkCreateQueryPool)              \
	X(vkDestroyQueryPool)             \
	X(vkGetQueryPoolResults)          \
	X(vkCmdPushDescriptorSetKHR)

#define GC_DECLARE_FN(name) PFN_##name name;

typedef struct instance_fns {
	GC_GLOBAL_FNS(GC_DECLARE_FN)
	GC_INSTANCE_FNS(GC_DECLARE_FN)
	PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion;
	PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
	PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
} instance_fns;

typedef struct device_fns {
	GC_DEVICE_FNS(GC_DECLARE_FN)
	PFN_vkGetMemoryHostPointerPropertiesEXT vkGetMemoryHostPointerPropertiesEXT; /* optional */
	/* Timeline semaphores, for the stall test hook only (optional). */
	PFN_vkCreateSemaphore vkCreateSemaphore;
	PFN_vkDestroySemaphore vkDestroySemaphore;
	PFN_vkSignalSemaphore vkSignalSemaphore;
} device_fns;

/* ------------------------------------------------------ instance state */

typedef struct phys {
	VkPhysicalDevice pd;
	gc_device_info info;
	VkPhysicalDeviceMemoryProperties mem;
	int portability_subset;
	int timeline; /* timelineSemaphore (enabled for the stall test hook) */
	int ext_8bit; /* storage_buffer_8bit needs VK_KHR_8bit_storage enabled (before Vulkan 1.2) */
	int ext_float_controls; /* float controls need VK_KHR_shader_float_controls enabled (before Vulkan 1.2) */
} phys;

static struct {
	pthread_mutex_t mu;
	int done;          /* init ran */
	gc_status status;  /* its result */
	int32_t native;
	char *msg;         /* kept to hand out copies */

	void *lib;
	char library[GC_NAME_MAX];
	PFN_vkGetInstanceProcAddr gipa;
	instance_fns fn;
	VkInstance instance;
	uint32_t api_version;
	uint32_t loader_version;
	int validation;
	VkDebugUtilsMessengerEXT messenger;
	phys *phys;
	uint32_t nphys;
	uint64_t objects; /* objects created by the process (atomic) */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* first_message returns a copy of the oldest recorded message, or NULL. */
static char *first_message(void) {
	pthread_mutex_lock(&msgs.mu);
	char *m = msgs.n > 0 ? format("%s", msgs.items[0]) : NULL;
	pthread_mutex_unlock(&msgs.mu);
	return m;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
						     VkDebugUtilsMessageTypeFlagsEXT types,
						     const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
	(void)user;
	const char *sev = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error" : "warning";
	const char *kind = (types & VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT)    ? "validation"
			   : (types & VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT) ? "performance"
										       : "general";
	const char *id = (data != NULL && data->pMessageIdName != NULL) ? data->pMessageIdName : "-";
	const char *text = (data != NULL && data->pMessage != NULL) ? data->pMessage : "";
	record_message(format("%s %s [%s]: %s", sev, kind, id, text));
	return VK_FALSE;
}

static void count_objects(uint64_t *device_counter, uint64_t n) {
	__atomic_fetch_add(&g.objects, n, __ATOMIC_RELAXED);
	if (device_counter != NULL) {
		__atomic_fetch_add(device_counter, n, __ATOMIC_RELAXED);
	}
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
		return fail(err, GC_INVALID_ARGUMENT, 0, "gc_vulkan: init has not been called");
	}
	if (st != GC_OK) {
		return fail(err, st, native, "%s", msg != NULL ? msg : "init failed");
	}
	return GC_OK;
}

static int has_extension(const VkExtensionProperties *exts, uint32_t n, const char *name) {
	for (uint32_t i = 0; i < n; i++) {
		if (strcmp(exts[i].extensionName, name) == 0) {
			return 1;
		}
	}
	return 0;
}

/* query_phys fills p->info for one physical device. */
static void query_phys(phys *p) {
	gc_device_info *in = &p->info;
	VkPhysicalDeviceProperties props;
	g.fn.vkGetPhysicalDeviceProperties(p->pd, &props);
	copy_name(in->name, props.deviceName);
	in->vendor_id = props.vendorID;
	in->device_id = props.deviceID;
	in->type = (int32_t)props.deviceType;
	in->api_version = props.apiVersion;
	in->driver_version = props.driverVersion;
	in->max_storage_buffer_range = props.limits.maxStorageBufferRange;
	in->min_storage_buffer_offset_alignment = props.limits.minStorageBufferOffsetAlignment;
	in->timestamp_period = props.limits.timestampPeriod;
	for (int i = 0; i < 3; i++) {
		in->max_compute_work_group_count[i] = props.limits.maxComputeWorkGroupCount[i];
		in->max_compute_work_group_size[i] = props.limits.maxComputeWorkGroupSize[i];
	}
	in->max_compute_work_group_invocations = props.limits.maxComputeWorkGroupInvocations;
	in->max_push_constants_size = props.limits.maxPushConstantsSize;
	in->max_memory_allocation_size = props.limits.maxStorageBufferRange; /* refined below */

	uint32_t next = 0;
	VkExtensionProperties *exts = NULL;
	if (g.fn.vkEnumerateDeviceExtensionProperties(p->pd, NULL, &next, NULL) == VK_SUCCESS && next > 0) {
		exts = calloc(next, sizeof *exts);
		if (exts == NULL || g.fn.vkEnumerateDeviceExtensionProperties(p->pd, NULL, &next, exts) < 0) {
			next = 0;
		}
	}
	in->push_descriptor = has_extension(exts, next, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
	in->external_memory_host = has_extension(exts, next, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
	int driver_props = props.apiVersion >= VK_API_VERSION_1_2 ||
			   has_extension(exts, next, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
	p->portability_subset = has_extension(exts, next, GC_PORTABILITY_SUBSET);
	/* Vulkan 1.2 features need the instance at 1.2 too. */
	int v12 = props.apiVersion >= VK_API_VERSION_1_2 && g.api_version >= VK_API_VERSION_1_2;
	p->ext_8bit = !v12 && has_extension(exts, next, VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
	p->ext_float_controls = !v12 && has_extension(exts, next, VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME);
	in->float_controls = v12 || p->ext_float_controls;
	free(exts);

	int v11 = props.apiVersion >= VK_API_VERSION_1_1;
	if (v11) {
		VkPhysicalDeviceSubgroupProperties sub = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
		VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
							     .pNext = &sub};
		VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
		VkPhysicalDeviceExternalMemoryHostPropertiesEXT host = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
		VkPhysicalDevicePushDescriptorPropertiesKHR push = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR};
		VkPhysicalDeviceFloatControlsProperties fc = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
		void *chain = &m3;
		if (in->float_controls) {
			fc.pNext = chain;
			chain = &fc;
		}
		if (driver_props) {
			drv.pNext = chain;
			chain = &drv;
		}
		if (in->external_memory_host) {
			host.pNext = chain;
			chain = &host;
		}
		if (in->push_descriptor) {
			push.pNext = chain;
			chain = &push;
		}
		VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = chain};
		g.fn.vkGetPhysicalDeviceProperties2(p->pd, &p2);
		in->subgroup_size = sub.subgroupSize;
		in->max_memory_allocation_size = m3.maxMemoryAllocationSize;
		if (driver_props) {
			copy_name(in->driver_name, drv.driverName);
			copy_name(in->driver_info, drv.driverInfo);
		}
		if (in->external_memory_host) {
			in->min_imported_host_pointer_alignment = host.minImportedHostPointerAlignment;
		}
		if (in->push_descriptor) {
			in->max_push_descriptors = push.maxPushDescriptors;
		}
		if (in->float_controls) {
			in->denorm_independence = (int32_t)fc.denormBehaviorIndependence;
			in->denorm_preserve_float16 = fc.shaderDenormPreserveFloat16 ? 1 : 0;
			in->denorm_preserve_float32 = fc.shaderDenormPreserveFloat32 ? 1 : 0;
			in->denorm_preserve_float64 = fc.shaderDenormPreserveFloat64 ? 1 : 0;
		}
	}

	VkPhysicalDeviceFeatures feats;
	g.fn.vkGetPhysicalDeviceFeatures(p->pd, &feats);
	in->shader_float64 = feats.shaderFloat64 ? 1 : 0;
	in->shader_int64 = feats.shaderInt64 ? 1 : 0;
	if (v11) {
		/* The storage features of the 8- and 16-bit kernels: the 8-bit
		 * structure only where Vulkan 1.2 or its extension defines it. */
		VkPhysicalDevice8BitStorageFeatures s8 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
		VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
		if (v12 || p->ext_8bit) {
			s16.pNext = &s8;
		}
		VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &s16};
		g.fn.vkGetPhysicalDeviceFeatures2(p->pd, &f2);
		in->storage_buffer_16bit = s16.storageBuffer16BitAccess ? 1 : 0;
		in->storage_buffer_8bit = (v12 || p->ext_8bit) && s8.storageBuffer8BitAccess ? 1 : 0;
	}
	if (props.apiVersion >= VK_API_VERSION_1_2 && g.api_version >= VK_API_VERSION_1_2) {
		VkPhysicalDeviceTimelineSemaphoreFeatures tl = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES};
		VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &tl};
		g.fn.vkGetPhysicalDeviceFeatures2(p->pd, &f2);
		p->timeline = tl.timelineSemaphore ? 1 : 0;
	}

	/* A compute queue: a dedicated compute family if there is one (it does
	 * not compete with graphics), else any family with compute. */
	uint32_t nq = 0;
	g.fn.vkGetPhysicalDeviceQueueFamilyProperties(p->pd, &nq, NULL);
	VkQueueFamilyProperties *qf = calloc(nq ? nq : 1, sizeof *qf);
	int family = -1;
	if (qf != NULL) {
		g.fn.vkGetPhysicalDeviceQueueFamilyProperties(p->pd, &nq, qf);
		for (uint32_t i = 0; i < nq && family < 0; i++) {
			if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) {
				family = (int)i;
			}
		}
		for (uint32_t i = 0; i < nq && family < 0; i++) {
			if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
				family = (int)i;
			}
		}
		if (family >= 0) {
			in->compute_queue_family = (uint32_t)family;
			in->timestamp_valid_bits = qf[family].timestampValidBits;
		}
	}
	free(qf);

	g.fn.vkGetPhysicalDeviceMemoryProperties(p->pd, &p->mem);
	in->heap_count = p->mem.memoryHeapCount < GC_MAX_HEAPS ? p->mem.memoryHeapCount : GC_MAX_HEAPS;
	for (uint32_t i = 0; i < in->heap_count; i++) {
		in->heaps[i].size = p->mem.memoryHeaps[i].size;
		in->heaps[i].device_local = (p->mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) ? 1 : 0;
	}

	in->usable = 0;
	if (!v11) {
		snprintf(in->unusable_reason, GC_NAME_MAX, "device supports Vulkan %u.%u; gocoll needs 1.1",
			 VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion));
	} else if (family < 0) {
		snprintf(in->unusable_reason, GC_NAME_MAX, "device has no compute queue");
	} else if (!in->push_descriptor) {
		snprintf(in->unusable_reason, GC_NAME_MAX, "device lacks %s", VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
	} else {
		in->usable = 1;
	}
}

static void teardown_instance(void) {
	free(g.phys);
	g.phys = NULL;
	g.nphys = 0;
	if (g.messenger != VK_NULL_HANDLE && g.fn.vkDestroyDebugUtilsMessengerEXT != NULL) {
		g.fn.vkDestroyDebugUtilsMessengerEXT(g.instance, g.messenger, NULL);
	}
	g.messenger = VK_NULL_HANDLE;
	if (g.instance != VK_NULL_HANDLE && g.fn.vkDestroyInstance != NULL) {
		g.fn.vkDestroyInstance(g.instance, NULL);
	}
	g.instance = VK_NULL_HANDLE;
	if (g.lib != NULL) {
		dlclose(g.lib);
	}
	g.lib = NULL;
	g.validation = 0;
}

static gc_status do_init(const gc_init_options *opts, gc_error *err) {
	const char *path = (opts != NULL && opts->library != NULL && opts->library[0] != 0) ? opts->library : NULL;
	if (path == NULL) {
		path = getenv("GOCOLL_VULKAN_LIB");
	}
	if (path == NULL || path[0] == 0) {
		path = GC_VK_DEFAULT_LIB;
	}
	copy_name(g.library, path);
	int validation = (opts != NULL && opts->validation) || env_is_1("GOCOLL_VULKAN_VALIDATION");

	dlerror();
	g.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (g.lib == NULL) {
		const char *e = dlerror();
		return fail(err, GC_UNAVAILABLE, 0, "dlopen %s: %s", path, e != NULL ? e : "unknown error");
	}
	void *sym = dlsym(g.lib, "vkGetInstanceProcAddr");
	memcpy(&g.gipa, &sym, sizeof g.gipa); /* ISO C has no object-to-function pointer cast */
	if (g.gipa == NULL) {
		const char *e = dlerror();
		gc_status st = fail(err, GC_UNAVAILABLE, 0, "dlsym vkGetInstanceProcAddr in %s: %s", path,
				    e != NULL ? e : "symbol not found");
		teardown_instance();
		return st;
	}
#define GC_LOAD_GLOBAL(name)                                                                                        \
	g.fn.name = (PFN_##name)g.gipa(VK_NULL_HANDLE, #name);                                                     \
	if (g.fn.name == NULL) {                                                                                   \
		gc_status st = fail(err, GC_UNAVAILABLE, 0, "vkGetInstanceProcAddr: %s not found in %s", #name, path); \
		teardown_instance();                                                                               \
		return st;                                                                                         \
	}
	GC_GLOBAL_FNS(GC_LOAD_GLOBAL)
#undef GC_LOAD_GLOBAL

	g.fn.vkEnumerateInstanceVersion = (PFN_vkEnumerateInstanceVersion)g.gipa(VK_NULL_HANDLE, "vkEnumerateInstanceVersion");
	g.loader_version = VK_API_VERSION_1_0;
	if (g.fn.vkEnumerateInstanceVersion != NULL) {
		g.fn.vkEnumerateInstanceVersion(&g.loader_version);
	}
	if (g.loader_version < VK_API_VERSION_1_1) {
		gc_status st = fail(err, GC_UNSUPPORTED, 0, "vkEnumerateInstanceVersion: loader %s supports Vulkan 1.0; gocoll needs 1.1",
				    path);
		teardown_instance();
		return st;
	}
	g.api_version = g.loader_version < VK_API_VERSION_1_3 ? g.loader_version : VK_API_VERSION_1_3;

	const char *layers[1];
	uint32_t nlayers = 0;
	const char *extensions[2];
	uint32_t nextensions = 0;
	VkInstanceCreateFlags flags = 0;

	uint32_t n = 0;
	VkResult r = g.fn.vkEnumerateInstanceExtensionProperties(NULL, &n, NULL);
	VkExtensionProperties *exts = calloc(n ? n : 1, sizeof *exts);
	if (r == VK_SUCCESS && exts != NULL && g.fn.vkEnumerateInstanceExtensionProperties(NULL, &n, exts) >= 0) {
		if (has_extension(exts, n, GC_PORTABILITY_ENUMERATION)) {
			/* MoltenVK lists its devices only with this extension. */
			extensions[nextensions++] = GC_PORTABILITY_ENUMERATION;
			flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
		}
	}
	int have_debug_utils = exts != NULL && has_extension(exts, n, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
	free(exts);

	if (validation) {
		uint32_t nl = 0;
		g.fn.vkEnumerateInstanceLayerProperties(&nl, NULL);
		VkLayerProperties *lp = calloc(nl ? nl : 1, sizeof *lp);
		int found = 0;
		if (lp != NULL && g.fn.vkEnumerateInstanceLayerProperties(&nl, lp) >= 0) {
			for (uint32_t i = 0; i < nl; i++) {
				if (strcmp(lp[i].layerName, GC_VALIDATION_LAYER) == 0) {
					found = 1;
				}
			}
		}
		free(lp);
		if (!found) {
			gc_status st = fail(err, GC_UNSUPPORTED, (int32_t)VK_ERROR_LAYER_NOT_PRESENT,
					    "vkEnumerateInstanceLayerProperties: validation was requested but %s is not installed",
					    GC_VALIDATION_LAYER);
			teardown_instance();
			return st;
		}
		layers[nlayers++] = GC_VALIDATION_LAYER;
		if (!have_debug_utils) {
			/* The validation layer provides it too. */
			uint32_t nv = 0;
			g.fn.vkEnumerateInstanceExtensionProperties(GC_VALIDATION_LAYER, &nv, NULL);
			VkExtensionProperties *ve = calloc(nv ? nv : 1, sizeof *ve);
			if (ve != NULL && g.fn.vkEnumerateInstanceExtensionProperties(GC_VALIDATION_LAYER, &nv, ve) >= 0) {
				have_debug_utils = has_extension(ve, nv, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
			}
			free(ve);
		}
		if (!have_debug_utils) {
			gc_status st = fail(err, GC_UNSUPPORTED, (int32_t)VK_ERROR_EXTENSION_NOT_PRESENT,
					    "vkEnumerateInstanceExtensionProperties: validation needs %s",
					    VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
			teardown_instance();
			return st;
		}
		extensions[nextensions++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
	}

	VkDebugUtilsMessengerCreateInfoEXT mci = {
		.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
		.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
		.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
			       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
		.pfnUserCallback = debug_callback,
	};
	VkApplicationInfo app = {
		.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
		.pApplicationName = "gocoll",
		.pEngineName = "gocoll",
		.apiVersion = g.api_version,
	};
	VkInstanceCreateInfo ici = {
		.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		/* Chained so that instance creation and destruction are reported too. */
		.pNext = validation ? &mci : NULL,
		.flags = flags,
		.pApplicationInfo = &app,
		.enabledLayerCount = nlayers,
		.ppEnabledLayerNames = layers,
		.enabledExtensionCount = nextensions,
		.ppEnabledExtensionNames = extensions,
	};
	r = g.fn.vkCreateInstance(&ici, NULL, &g.instance);
	if (r != VK_SUCCESS) {
		g.instance = VK_NULL_HANDLE;
		/* With validation on, the loader said why through the chained
		 * messenger: its first message is the cause, worth quoting. */
		char *why = first_message();
		gc_status st;
		if (why != NULL) {
			const char *name = result_name(r);
			st = fail(err, status_of(r), (int32_t)r, "vkCreateInstance: %s (%s)", name != NULL ? name : "error", why);
			free(why);
		} else {
			st = vkfail(err, r, "vkCreateInstance");
		}
		if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
			st = GC_UNAVAILABLE; /* no driver: the backend cannot run here */
		}
		teardown_instance();
		return st;
	}
	count_objects(NULL, 1);

#define GC_LOAD_INSTANCE(name)                                                                                  \
	g.fn.name = (PFN_##name)g.gipa(g.instance, #name);                                                     \
	if (g.fn.name == NULL) {                                                                               \
		gc_status st = fail(err, GC_UNAVAILABLE, 0, "vkGetInstanceProcAddr: %s not found", #name); \
		teardown_instance();                                                                           \
		return st;                                                                                     \
	}
	GC_INSTANCE_FNS(GC_LOAD_INSTANCE)
#undef GC_LOAD_INSTANCE

	if (validation) {
		g.fn.vkCreateDebugUtilsMessengerEXT =
			(PFN_vkCreateDebugUtilsMessengerEXT)g.gipa(g.instance, "vkCreateDebugUtilsMessengerEXT");
		g.fn.vkDestroyDebugUtilsMessengerEXT =
			(PFN_vkDestroyDebugUtilsMessengerEXT)g.gipa(g.instance, "vkDestroyDebugUtilsMessengerEXT");
		if (g.fn.vkCreateDebugUtilsMessengerEXT == NULL || g.fn.vkDestroyDebugUtilsMessengerEXT == NULL) {
			gc_status st = fail(err, GC_UNAVAILABLE, 0, "vkGetInstanceProcAddr: vkCreateDebugUtilsMessengerEXT not found");
			teardown_instance();
			return st;
		}
		r = g.fn.vkCreateDebugUtilsMessengerEXT(g.instance, &mci, NULL, &g.messenger);
		if (r != VK_SUCCESS) {
			g.messenger = VK_NULL_HANDLE;
			gc_status st = vkfail(err, r, "vkCreateDebugUtilsMessengerEXT");
			teardown_instance();
			return st;
		}
		count_objects(NULL, 1);
		g.validation = 1;
	}

	uint32_t np = 0;
	r = g.fn.vkEnumeratePhysicalDevices(g.instance, &np, NULL);
	if (r != VK_SUCCESS) {
		gc_status st = vkfail(err, r, "vkEnumeratePhysicalDevices");
		teardown_instance();
		return st;
	}
	VkPhysicalDevice *pds = calloc(np ? np : 1, sizeof *pds);
	g.phys = calloc(np ? np : 1, sizeof *g.phys);
	if (pds == NULL || g.phys == NULL) {
		free(pds);
		teardown_instance();
		return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
	}
	r = g.fn.vkEnumeratePhysicalDevices(g.instance, &np, pds);
	if (r < 0) {
		free(pds);
		gc_status st = vkfail(err, r, "vkEnumeratePhysicalDevices");
		teardown_instance();
		return st;
	}
	for (uint32_t i = 0; i < np; i++) {
		g.phys[i].pd = pds[i];
		query_phys(&g.phys[i]);
	}
	g.nphys = np;
	free(pds);
	return GC_OK;
}

static gc_status vk_init(const gc_init_options *opts, gc_error *err) {
	pthread_mutex_lock(&g.mu);
	if (!g.done) {
		gc_error e = {0, NULL};
		g.status = do_init(opts, &e);
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

static gc_status vk_instance_info(gc_instance_info *out, gc_error *err) {
	gc_status st = ready(err);
	if (st != GC_OK) {
		return st;
	}
	if (out == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "instance_info: out is NULL");
	}
	memset(out, 0, sizeof *out);
	out->api_version = g.api_version;
	out->loader_version = g.loader_version;
	out->validation = g.validation;
	copy_name(out->library, g.library);
	return GC_OK;
}

static gc_status vk_device_count(uint32_t *count, gc_error *err) {
	gc_status st = ready(err);
	if (st != GC_OK) {
		return st;
	}
	if (count == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "device_count: count is NULL");
	}
	*count = g.nphys;
	return GC_OK;
}

static gc_status vk_device_info(uint32_t index, gc_device_info *out, gc_error *err) {
	gc_status st = ready(err);
	if (st != GC_OK) {
		return st;
	}
	if (out == NULL || index >= g.nphys) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "device_info: no device %u (%u devices)", index, g.nphys);
	}
	*out = g.phys[index].info;
	return GC_OK;
}

static gc_status vk_message_count(uint64_t *count, gc_error *err) { return message_count(count, err); }

static gc_status vk_take_message(char **msg, gc_error *err) { return take_message(msg, "validation messages", err); }

/* --------------------------------------------------------------- devices */

typedef struct slot {
	VkCommandBuffer cb;
	VkFence fence;
	uint64_t ticket; /* last ticket submitted from this slot; 0: none */
	int waiters;     /* threads blocked on fence without the device lock */
	int begun;       /* cb reset and begun ahead of use, fence reset; nothing recorded */
} slot;

enum { RETIRE_BUFFER, RETIRE_KERNEL };

typedef struct retired {
	int kind;
	void *obj;
	uint64_t ticket; /* destroy once this ticket completed */
	struct retired *next;
} retired;

/* gc_use is a foreign use of a buffer: its use by another open of its
 * shared logical device (check_range), whose tickets count apart from the
 * owner's. Guarded by the shared device's use_mu. */
typedef struct gc_use {
	uint64_t user;   /* the using open's id (gc_device_s.id) */
	uint64_t ticket; /* the last of the user's tickets whose work may use the buffer; 0: none */
	int copying;     /* the user's copy_now uses it (left set if that did not complete) */
	struct gc_use *next;
} gc_use;

struct gc_buffer_s {
	gc_device dev;
	VkBuffer buf;
	VkDeviceMemory mem;
	uint64_t size;
	uint64_t last_use; /* the last ticket of dev whose work may use it (recorded: submitted + 1) */
	void *mapped;
	int imported;
	int borrowed; /* gc_vk_wrap_buffer: the VkBuffer is the caller's */
	struct gc_buffer_s *prev, *next;
	/* uses: the foreign uses, one per using open; deferred: the next buffer
	 * in the shared device's deferred list. Both guarded by its use_mu. */
	gc_use *uses;
	struct gc_buffer_s *deferred;
};

/* A kernel is only ever used by its own device (cmd_dispatch refuses
 * another's), so its own tickets say when its last use completed. */
struct gc_kernel_s {
	gc_device dev;
	uint64_t last_use; /* as gc_buffer_s's */
	VkDescriptorSetLayout set_layout;
	VkPipelineLayout layout;
	VkPipeline pipeline;
	uint32_t push_size;
	uint32_t binding_count;
	struct gc_kernel_s *prev, *next;
};

/* A logical device shared by the opens (ranks) of one physical device that
 * ask for share_device: one VkDevice, up to GC_MAX_SHARED_QUEUES queues of
 * the compute family, each with the lock that externally synchronizes it
 * (vkQueueSubmit, vkQueueWaitIdle) for every gc_device using that queue. */
typedef struct shared_queue {
	VkQueue queue;
	pthread_mutex_t mu;
} shared_queue;

typedef struct shared_dev {
	struct shared_dev *next;
	uint32_t index; /* physical device */
	int float64;    /* shaderFloat64 enabled */
	uint64_t key;   /* gc_open_options.share_key */
	VkDevice dev;
	device_fns fn;
	uint32_t nqueues;
	shared_queue queues[GC_MAX_SHARED_QUEUES];
	uint32_t users; /* opens not yet closed; guarded by shared_devs.mu */
	uint64_t opens; /* opens so far, to pick the next queue; guarded by shared_devs.mu */

	/* Foreign uses (gc_use). use_mu guards members, deferred, every
	 * member's pins and every buffer's uses and deferred link. It is taken
	 * after a device's mu (never the other way round) and nothing blocks
	 * while it is held but the wait for pins in leave_members. */
	pthread_mutex_t use_mu;
	pthread_cond_t use_cond; /* signalled when a member's pins drop to 0 */
	gc_device members;       /* its opens, by member_next, until their close drained them */
	/* deferred: destroyed buffers whose foreign uses had not all completed
	 * (by gc_buffer_s.deferred), freed by reap_shared once they and the
	 * owner's last use did; ndeferred (atomic) says whether there are any.
	 * leaked: buffers of closed opens that an open declared lost may still
	 * use (settle_owned), never freed, as the shared device is not. */
	struct gc_buffer_s *deferred;
	int ndeferred;
	struct gc_buffer_s *leaked;
} shared_dev;

static struct {
	pthread_mutex_t mu;
	shared_dev *list;
} shared_devs = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* object_gen counts destroyed buffers and kernels (see gc_device_s.rgen). */
static uint64_t object_gen;

/* device_ids numbers the shared opens (gc_device_s.id); never reused. */
static uint64_t device_ids;

struct gc_device_s {
	const phys *phys;
	device_fns fn;
	VkDevice dev;
	VkQueue queue;
	int float64;
	int lost;  /* atomic */
	int stuck; /* atomic: lost by the drain limit; the GPU may still use its memory */
	char stuck_why[200]; /* written once, before stuck and lost are set */
	/* shared is the shared logical device d uses (dev and queue are its),
	 * NULL when d owns dev. id names d in the foreign uses of other opens'
	 * buffers; member: d is in shared->members; pins: threads that use d
	 * through members (guarded by shared->use_mu; d is not freed while
	 * there are any). */
	shared_dev *shared;
	uint64_t id;
	int member;
	int pins;
	gc_device member_next;
	/* qmu externally synchronizes queue (vkQueueSubmit, vkQueueWaitIdle):
	 * &own_qmu, or the shared queue's lock. Taken after mu, never held
	 * across a wait on a fence. */
	pthread_mutex_t *qmu;
	pthread_mutex_t own_qmu;

	/* mu guards the ring, the object lists and the retire list. It is never
	 * held across a blocking wait on a fence. */
	pthread_mutex_t mu;
	pthread_cond_t cond; /* signalled when a slot's waiters drop to 0 */
	int mu_init;
	VkCommandPool pool;
	slot *ring;
	uint32_t ring_size;
	uint64_t submitted; /* last ticket submitted */
	uint64_t completed; /* every ticket <= completed is done (written atomically: read without mu) */
	int recording;      /* ring[(submitted+1) % ring_size] is being recorded */
	VkPipeline bound;   /* pipeline bound in the recording */

	/* Replay. A submission of one dispatch that repeats the one before it
	 * (same kernel, bindings, push constants and groups) is recorded once
	 * more into rcb, outside the ring; later submissions of that same
	 * dispatch resubmit rcb instead of recording it again (the descriptor
	 * writes, barriers and vkEndCommandBuffer are most of a small call's
	 * CPU cost). rpending: the recording so far is exactly rdisp, recorded
	 * nowhere yet (submit replays rcb; any further command first records it
	 * into the ring). rsingle: the ring recording is one dispatch, rcand.
	 * A destroyed buffer or kernel may have its address reused, so every
	 * destroy bumps object_gen and a recording of an older generation is
	 * never replayed. */
	VkCommandBuffer rcb;
	gc_dispatch rdisp, rcand, rprev;
	uint64_t rgen, rcand_gen, rprev_gen;
	uint64_t rticket; /* rcb's last submission; 0: none */
	int rvalid, rpending, rsingle, rprev_set;

	/* The transfer context of copy_now, guarded by xmu. */
	pthread_mutex_t xmu;
	VkCommandPool xpool;
	VkCommandBuffer xcb;
	VkFence xfence;

	VkQueryPool queries;
	uint32_t nqueries;

	uint64_t drain_ns; /* the drain limit (shim.h) */

	/* Test hooks (shim.h): stall is the timeline semaphore the next
	 * submission waits on for value stall_value + 1 when stall_armed;
	 * noncoherent_import hides HOST_COHERENT from buffer_import. */
	VkSemaphore stall;
	uint64_t stall_value;
	int stall_armed;
	int noncoherent_import;

	struct gc_buffer_s *buffers;
	struct gc_kernel_s *kernels;
	retired *retire;

	gc_counters counters; /* atomic fields */
};

/* has_recording reports whether work for ticket submitted + 1 exists: a
 * ring recording or a pending replay. d->mu held. */
static int has_recording(gc_device d) {
	return d->recording || d->rpending;
}

static int is_lost(gc_device d) {
	return __atomic_load_n(&d->lost, __ATOMIC_ACQUIRE);
}

/* is_stuck reports whether d was declared lost by the drain limit: the GPU
 * may still use what it holds, so nothing of it may be freed. */
static int is_stuck(gc_device d) {
	return __atomic_load_n(&d->stuck, __ATOMIC_ACQUIRE) != 0;
}

/* stuck_reason returns why d was declared lost, once the declaring thread
 * finished writing it (stuck goes 0 -> -1 -> 1 around the write). */
static const char *stuck_reason(gc_device d) {
	while (__atomic_load_n(&d->stuck, __ATOMIC_ACQUIRE) != 1) {
		sched_yield();
	}
	return d->stuck_why;
}

static gc_status lost_error(gc_device d, gc_error *err) {
	if (is_stuck(d)) {
		return fail(err, GC_DEVICE_LOST, (int32_t)VK_TIMEOUT, "device declared lost earlier: %s", stuck_reason(d));
	}
	return fail(err, GC_DEVICE_LOST, (int32_t)VK_ERROR_DEVICE_LOST, "device lost earlier: VK_ERROR_DEVICE_LOST");
}

/* drain_failed declares d lost because ticket did not complete within the
 * drain limit (shim.h): from now on every call fails with GC_DEVICE_LOST and
 * nothing the GPU may still use is freed. */
static gc_status drain_failed(gc_device d, gc_error *err, const char *call, uint64_t ticket) {
	int no = 0;
	if (__atomic_compare_exchange_n(&d->stuck, &no, -1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		char t[40] = "its submission";
		if (ticket != 0) {
			snprintf(t, sizeof t, "ticket %llu", (unsigned long long)ticket);
		}
		snprintf(d->stuck_why, sizeof d->stuck_why,
			 "%s: %s did not complete within the drain limit (%llu ms); what it may use is leaked", call, t,
			 (unsigned long long)(d->drain_ns / 1000000));
		__atomic_store_n(&d->stuck, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&d->lost, 1, __ATOMIC_RELEASE);
	}
	return fail(err, GC_DEVICE_LOST, (int32_t)VK_TIMEOUT, "%s", stuck_reason(d));
}

/* devfail reports a failed call on d; a lost device stays lost. */
static gc_status devfail(gc_device d, gc_error *err, VkResult r, const char *call) {
	if (r == VK_ERROR_DEVICE_LOST) {
		__atomic_store_n(&d->lost, 1, __ATOMIC_RELEASE);
	}
	return vkfail(err, r, call);
}

static void destroy_buffer_now(gc_device d, struct gc_buffer_s *b) {
	uint64_t n = 0;
	if (b->mapped != NULL && !b->imported) {
		d->fn.vkUnmapMemory(d->dev, b->mem);
	}
	if (b->buf != VK_NULL_HANDLE && !b->borrowed) {
		d->fn.vkDestroyBuffer(d->dev, b->buf, NULL);
		n++;
	}
	if (b->mem != VK_NULL_HANDLE) {
		d->fn.vkFreeMemory(d->dev, b->mem, NULL);
		n++;
	}
	add_counter(&d->counters.objects_destroyed, n);
	while (b->uses != NULL) {
		gc_use *u = b->uses;
		b->uses = u->next;
		free(u);
	}
	free(b);
}

static void destroy_kernel_now(gc_device d, struct gc_kernel_s *k) {
	uint64_t n = 0;
	if (k->pipeline != VK_NULL_HANDLE) {
		d->fn.vkDestroyPipeline(d->dev, k->pipeline, NULL);
		n++;
	}
	if (k->layout != VK_NULL_HANDLE) {
		d->fn.vkDestroyPipelineLayout(d->dev, k->layout, NULL);
		n++;
	}
	if (k->set_layout != VK_NULL_HANDLE) {
		d->fn.vkDestroyDescriptorSetLayout(d->dev, k->set_layout, NULL);
		n++;
	}
	add_counter(&d->counters.objects_destroyed, n);
	free(k);
}

static void destroy_retired(gc_device d, retired *r) {
	if (r->kind == RETIRE_BUFFER) {
		destroy_buffer_now(d, r->obj);
	} else {
		destroy_kernel_now(d, r->obj);
	}
	free(r);
}

/* reap destroys retired objects whose last possible use completed. d->mu held. */
static void reap(gc_device d) {
	retired **pp = &d->retire;
	while (*pp != NULL) {
		retired *r = *pp;
		if (r->ticket <= d->completed) {
			*pp = r->next;
			destroy_retired(d, r);
		} else {
			pp = &r->next;
		}
	}
}

static void reap_shared(shared_dev *sd);

/* completed returns d->completed without d->mu. */
static uint64_t completed(gc_device d) {
	return __atomic_load_n(&d->completed, __ATOMIC_ACQUIRE);
}

/* mark_completed records that every ticket <= ticket is done and frees what
 * waited for it: d's retired objects, and the shared device's deferred
 * buffers, which may wait for d's work. d->mu held. */
static void mark_completed(gc_device d, uint64_t ticket) {
	if (ticket > d->completed) {
		__atomic_store_n(&d->completed, ticket, __ATOMIC_RELEASE);
		if (d->retire != NULL) {
			reap(d);
		}
		if (d->shared != NULL && __atomic_load_n(&d->shared->ndeferred, __ATOMIC_ACQUIRE)) {
			reap_shared(d->shared);
		}
	}
}

/* own_last returns the last ticket of d whose work may use what d's ticket
 * last was recorded for. d->mu held. */
static uint64_t own_last(gc_device d, uint64_t last) {
	if (last > d->submitted && !has_recording(d)) {
		last = d->submitted; /* the recording that used it was never submitted */
	}
	return last;
}

/* retire destroys obj, whose last use is ticket last, now if no pending
 * submission may use it, else once that one completes. On a device declared
 * lost by the drain limit it leaks obj (the GPU may still use it) and fails.
 * d->mu held. */
static gc_status retire(gc_device d, int kind, void *obj, uint64_t last, gc_error *err) {
	if (is_stuck(d)) {
		return lost_error(d, err);
	}
	last = own_last(d, last);
	if (last <= d->completed || is_lost(d)) {
		if (kind == RETIRE_BUFFER) {
			destroy_buffer_now(d, obj);
		} else {
			destroy_kernel_now(d, obj);
		}
		return GC_OK;
	}
	retired *rp = malloc(sizeof *rp);
	if (rp == NULL) {
		return fail(err, GC_OUT_OF_MEMORY, 0, "malloc: out of memory");
	}
	rp->kind = kind;
	rp->obj = obj;
	rp->ticket = last;
	rp->next = d->retire;
	d->retire = rp;
	return GC_OK;
}

/* make_device creates a logical device on p with nqueues queues of the
 * compute family and loads its functions into *fn. On failure nothing is
 * left (*out is VK_NULL_HANDLE; a device whose vkDestroyDevice cannot be
 * found is leaked rather than crash). */
static gc_status make_device(const phys *p, int float64, uint32_t nqueues, VkDevice *out, device_fns *fn, gc_error *err) {
	*out = VK_NULL_HANDLE;
	memset(fn, 0, sizeof *fn);
	const char *exts[5];
	uint32_t nexts = 0;
	exts[nexts++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
	if (p->info.external_memory_host) {
		exts[nexts++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
	}
	if (p->portability_subset) {
		exts[nexts++] = GC_PORTABILITY_SUBSET; /* required when present */
	}
	if (p->info.storage_buffer_8bit && p->ext_8bit) {
		exts[nexts++] = VK_KHR_8BIT_STORAGE_EXTENSION_NAME;
	}
	if (p->ext_float_controls) {
		/* The kernels' SPIR-V declares DenormPreserve (SPV_KHR_float_controls). */
		exts[nexts++] = VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME;
	}
	VkPhysicalDeviceFeatures feats = {0};
	if (float64) {
		feats.shaderFloat64 = VK_TRUE;
	}
	/* The kernels of int64/uint64, int8/uint8 and the 16-bit floats need
	 * these wherever the device has them (the caller then lists the types
	 * in DeviceInfo.Kernels; without them those types take the host path). */
	feats.shaderInt64 = p->info.shader_int64 ? VK_TRUE : VK_FALSE;
	VkPhysicalDevice8BitStorageFeatures s8 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES,
		.storageBuffer8BitAccess = VK_TRUE,
	};
	VkPhysicalDevice16BitStorageFeatures s16 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
		.storageBuffer16BitAccess = VK_TRUE,
	};
	float priorities[GC_MAX_SHARED_QUEUES];
	for (uint32_t i = 0; i < GC_MAX_SHARED_QUEUES; i++) {
		priorities[i] = 1.0f;
	}
	VkDeviceQueueCreateInfo qci = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = p->info.compute_queue_family,
		.queueCount = nqueues,
		.pQueuePriorities = priorities,
	};
	VkPhysicalDeviceTimelineSemaphoreFeatures tl = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES,
		.timelineSemaphore = VK_TRUE,
	};
	void *chain = p->timeline ? &tl : NULL;
	if (p->info.storage_buffer_8bit) {
		s8.pNext = chain;
		chain = &s8;
	}
	if (p->info.storage_buffer_16bit) {
		s16.pNext = chain;
		chain = &s16;
	}
	VkDeviceCreateInfo dci = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
		.pNext = chain,
		.queueCreateInfoCount = 1,
		.pQueueCreateInfos = &qci,
		.enabledExtensionCount = nexts,
		.ppEnabledExtensionNames = exts,
		.pEnabledFeatures = &feats,
	};
	VkDevice dev = VK_NULL_HANDLE;
	VkResult r = g.fn.vkCreateDevice(p->pd, &dci, NULL, &dev);
	if (r != VK_SUCCESS) {
		return vkfail(err, r, "vkCreateDevice");
	}
	fn->vkDestroyDevice = (PFN_vkDestroyDevice)g.fn.vkGetDeviceProcAddr(dev, "vkDestroyDevice");
	if (fn->vkDestroyDevice == NULL) {
		return fail(err, GC_UNAVAILABLE, 0, "vkGetDeviceProcAddr: vkDestroyDevice not found");
	}
#define GC_LOAD_DEVICE(name)                                                                      \
	fn->name = (PFN_##name)g.fn.vkGetDeviceProcAddr(dev, #name);                             \
	if (fn->name == NULL) {                                                                  \
		gc_status st = fail(err, GC_UNAVAILABLE, 0, "vkGetDeviceProcAddr: %s not found", #name); \
		fn->vkDestroyDevice(dev, NULL);                                                  \
		return st;                                                                       \
	}
	GC_DEVICE_FNS(GC_LOAD_DEVICE)
#undef GC_LOAD_DEVICE
	if (p->info.external_memory_host) {
		fn->vkGetMemoryHostPointerPropertiesEXT =
			(PFN_vkGetMemoryHostPointerPropertiesEXT)g.fn.vkGetDeviceProcAddr(dev, "vkGetMemoryHostPointerPropertiesEXT");
	}
	if (p->timeline) {
		fn->vkCreateSemaphore = (PFN_vkCreateSemaphore)g.fn.vkGetDeviceProcAddr(dev, "vkCreateSemaphore");
		fn->vkDestroySemaphore = (PFN_vkDestroySemaphore)g.fn.vkGetDeviceProcAddr(dev, "vkDestroySemaphore");
		fn->vkSignalSemaphore = (PFN_vkSignalSemaphore)g.fn.vkGetDeviceProcAddr(dev, "vkSignalSemaphore");
	}
	*out = dev;
	return GC_OK;
}

/* acquire_shared returns the shared device of physical device index with
 * float64 as given, creating it on first use, and picks the caller's queue. */
static gc_status acquire_shared(uint32_t index, int float64, uint64_t key, shared_dev **out, uint32_t *queue, gc_error *err) {
	pthread_mutex_lock(&shared_devs.mu);
	shared_dev *sd = shared_devs.list;
	while (sd != NULL && (sd->index != index || sd->float64 != float64 || sd->key != key)) {
		sd = sd->next;
	}
	if (sd == NULL) {
		const phys *p = &g.phys[index];
		uint32_t nq = 0, nqueues = 1;
		g.fn.vkGetPhysicalDeviceQueueFamilyProperties(p->pd, &nq, NULL);
		VkQueueFamilyProperties *qf = calloc(nq ? nq : 1, sizeof *qf);
		if (qf == NULL) {
			pthread_mutex_unlock(&shared_devs.mu);
			return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
		}
		g.fn.vkGetPhysicalDeviceQueueFamilyProperties(p->pd, &nq, qf);
		if (p->info.compute_queue_family < nq && qf[p->info.compute_queue_family].queueCount > 0) {
			nqueues = qf[p->info.compute_queue_family].queueCount;
		}
		free(qf);
		if (nqueues > GC_MAX_SHARED_QUEUES) {
			nqueues = GC_MAX_SHARED_QUEUES;
		}
		sd = calloc(1, sizeof *sd);
		if (sd == NULL) {
			pthread_mutex_unlock(&shared_devs.mu);
			return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
		}
		gc_status st = make_device(p, float64, nqueues, &sd->dev, &sd->fn, err);
		if (st != GC_OK) {
			free(sd);
			pthread_mutex_unlock(&shared_devs.mu);
			return st;
		}
		count_objects(NULL, 1);
		sd->index = index;
		sd->float64 = float64;
		sd->key = key;
		sd->nqueues = nqueues;
		for (uint32_t i = 0; i < nqueues; i++) {
			sd->fn.vkGetDeviceQueue(sd->dev, p->info.compute_queue_family, i, &sd->queues[i].queue);
			pthread_mutex_init(&sd->queues[i].mu, NULL);
		}
		pthread_mutex_init(&sd->use_mu, NULL);
		pthread_cond_init(&sd->use_cond, NULL);
		sd->next = shared_devs.list;
		shared_devs.list = sd;
	}
	sd->users++;
	*queue = (uint32_t)(sd->opens++ % sd->nqueues);
	*out = sd;
	pthread_mutex_unlock(&shared_devs.mu);
	return GC_OK;
}

/* release_shared drops one user of sd and destroys it with the last. Every
 * user waited for its own submissions before, so the device is idle, and
 * freed its deferred buffers. */
static void release_shared(shared_dev *sd) {
	pthread_mutex_lock(&shared_devs.mu);
	if (--sd->users > 0) {
		pthread_mutex_unlock(&shared_devs.mu);
		return;
	}
	shared_dev **pp = &shared_devs.list;
	while (*pp != sd) {
		pp = &(*pp)->next;
	}
	*pp = sd->next;
	pthread_mutex_unlock(&shared_devs.mu);
	/* No user is left to use a queue, so this needs no queue lock. */
	sd->fn.vkDeviceWaitIdle(sd->dev);
	sd->fn.vkDestroyDevice(sd->dev, NULL);
	for (uint32_t i = 0; i < sd->nqueues; i++) {
		pthread_mutex_destroy(&sd->queues[i].mu);
	}
	pthread_mutex_destroy(&sd->use_mu);
	pthread_cond_destroy(&sd->use_cond);
	free(sd);
}

static void forget_stall(gc_device d);

/* join_members makes the shared open d findable by the foreign uses it
 * records (vk_open). */
static void join_members(gc_device d) {
	shared_dev *sd = d->shared;
	d->id = __atomic_add_fetch(&device_ids, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&sd->use_mu);
	d->member_next = sd->members;
	sd->members = d;
	d->member = 1;
	pthread_mutex_unlock(&sd->use_mu);
}

/* leave_members removes d, drained, from its shared device's members, so
 * its foreign uses count as completed, waits until no thread uses d through
 * them, and frees the deferred buffers that waited only for d. */
static void leave_members(gc_device d) {
	shared_dev *sd = d->shared;
	pthread_mutex_lock(&sd->use_mu);
	gc_device *pp = &sd->members;
	while (*pp != d) {
		pp = &(*pp)->member_next;
	}
	*pp = d->member_next;
	d->member = 0;
	while (d->pins > 0) {
		pthread_cond_wait(&sd->use_cond, &sd->use_mu);
	}
	pthread_mutex_unlock(&sd->use_mu);
	reap_shared(sd);
}

static void destroy_device(gc_device d) {
	uint64_t n = 0;
	if (d->member) {
		leave_members(d);
	}
	if (d->dev != VK_NULL_HANDLE) {
		while (d->retire != NULL) {
			retired *r = d->retire;
			d->retire = r->next;
			destroy_retired(d, r);
		}
		while (d->kernels != NULL) {
			struct gc_kernel_s *k = d->kernels;
			d->kernels = k->next;
			destroy_kernel_now(d, k);
		}
		while (d->buffers != NULL) {
			struct gc_buffer_s *b = d->buffers;
			d->buffers = b->next;
			destroy_buffer_now(d, b);
		}
		if (d->queries != VK_NULL_HANDLE) {
			d->fn.vkDestroyQueryPool(d->dev, d->queries, NULL);
			n++;
		}
		if (d->stall != VK_NULL_HANDLE) {
			forget_stall(d);
			d->fn.vkDestroySemaphore(d->dev, d->stall, NULL);
		}
		if (d->xfence != VK_NULL_HANDLE) {
			d->fn.vkDestroyFence(d->dev, d->xfence, NULL);
			n++;
		}
		if (d->xpool != VK_NULL_HANDLE) {
			d->fn.vkDestroyCommandPool(d->dev, d->xpool, NULL); /* frees xcb */
			n += 1 + (d->xcb != VK_NULL_HANDLE);
		}
		if (d->ring != NULL) {
			for (uint32_t i = 0; i < d->ring_size; i++) {
				if (d->ring[i].fence != VK_NULL_HANDLE) {
					d->fn.vkDestroyFence(d->dev, d->ring[i].fence, NULL);
					n++;
				}
				n += d->ring[i].cb != VK_NULL_HANDLE;
			}
		}
		n += d->rcb != VK_NULL_HANDLE;
		if (d->pool != VK_NULL_HANDLE) {
			d->fn.vkDestroyCommandPool(d->dev, d->pool, NULL); /* frees the ring's command buffers */
			n++;
		}
		if (d->shared == NULL) {
			d->fn.vkDestroyDevice(d->dev, NULL);
			n++;
		}
	}
	add_counter(&d->counters.objects_destroyed, n);
	if (d->shared != NULL) {
		release_shared(d->shared);
	}
	free(d->ring);
	if (d->mu_init) {
		pthread_mutex_destroy(&d->mu);
		pthread_mutex_destroy(&d->xmu);
		pthread_mutex_destroy(&d->own_qmu);
		pthread_cond_destroy(&d->cond);
	}
	free(d);
}

static gc_status create_fence(gc_device d, VkFence *out, gc_error *err) {
	VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	VkResult r = d->fn.vkCreateFence(d->dev, &fi, NULL, out);
	if (r != VK_SUCCESS) {
		*out = VK_NULL_HANDLE;
		return devfail(d, err, r, "vkCreateFence");
	}
	count_objects(&d->counters.objects_created, 1);
	return GC_OK;
}

static gc_status create_pool(gc_device d, VkCommandPool *pool, VkCommandBuffer *cbs, uint32_t n, gc_error *err) {
	VkCommandPoolCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
		.queueFamilyIndex = d->phys->info.compute_queue_family,
	};
	VkResult r = d->fn.vkCreateCommandPool(d->dev, &pci, NULL, pool);
	if (r != VK_SUCCESS) {
		*pool = VK_NULL_HANDLE;
		return devfail(d, err, r, "vkCreateCommandPool");
	}
	count_objects(&d->counters.objects_created, 1);
	VkCommandBufferAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.commandPool = *pool,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
		.commandBufferCount = n,
	};
	r = d->fn.vkAllocateCommandBuffers(d->dev, &ai, cbs);
	if (r != VK_SUCCESS) {
		memset(cbs, 0, n * sizeof *cbs);
		return devfail(d, err, r, "vkAllocateCommandBuffers");
	}
	count_objects(&d->counters.objects_created, n);
	return GC_OK;
}

static gc_status vk_open(uint32_t index, const gc_open_options *opts, gc_device *out, gc_error *err) {
	gc_status st = ready(err);
	if (st != GC_OK) {
		return st;
	}
	if (out == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "open: out is NULL");
	}
	*out = NULL;
	if (index >= g.nphys) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "open: no device %u (%u devices)", index, g.nphys);
	}
	const phys *p = &g.phys[index];
	if (!p->info.usable) {
		return fail(err, GC_UNSUPPORTED, 0, "open: %s: %s", p->info.name, p->info.unusable_reason);
	}
	uint32_t ring_size = (opts != NULL && opts->ring_size != 0) ? opts->ring_size : GC_DEFAULT_RING;
	if (ring_size > GC_MAX_RING) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "open: ring_size %u > %u", ring_size, GC_MAX_RING);
	}
	uint32_t nqueries = opts != NULL ? opts->timestamp_queries : 0;
	if (nqueries > 0 && p->info.timestamp_valid_bits == 0) {
		return fail(err, GC_UNSUPPORTED, 0, "open: %s: the compute queue family has no timestamps (timestampValidBits 0)",
			    p->info.name);
	}

	gc_device d = calloc(1, sizeof *d);
	if (d == NULL) {
		return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
	}
	d->phys = p;
	d->ring_size = ring_size;
	d->nqueries = nqueries;
	d->ring = calloc(ring_size, sizeof *d->ring);
	if (d->ring == NULL) {
		free(d);
		return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
	}
	pthread_mutex_init(&d->mu, NULL);
	pthread_mutex_init(&d->xmu, NULL);
	pthread_mutex_init(&d->own_qmu, NULL);
	pthread_cond_init(&d->cond, NULL);
	d->mu_init = 1;
	d->qmu = &d->own_qmu;
	d->float64 = p->info.shader_float64 && !(opts != NULL && opts->disable_float64);
	d->drain_ns = (opts != NULL && opts->drain_timeout_ns != 0) ? opts->drain_timeout_ns : GC_DEFAULT_DRAIN_NS;
	d->noncoherent_import = env_is_1("GOCOLL_VULKAN_TEST_NONCOHERENT_IMPORT");

	if (opts != NULL && opts->share_device) {
		uint32_t qi = 0;
		st = acquire_shared(index, d->float64, opts->share_key, &d->shared, &qi, err);
		if (st != GC_OK) {
			d->shared = NULL;
			destroy_device(d);
			return st;
		}
		d->dev = d->shared->dev;
		d->fn = d->shared->fn;
		d->queue = d->shared->queues[qi].queue;
		d->qmu = &d->shared->queues[qi].mu;
	} else {
		st = make_device(p, d->float64, 1, &d->dev, &d->fn, err);
		if (st != GC_OK) {
			d->dev = VK_NULL_HANDLE;
			destroy_device(d);
			return st;
		}
		count_objects(&d->counters.objects_created, 1);
		d->fn.vkGetDeviceQueue(d->dev, p->info.compute_queue_family, 0, &d->queue);
	}
	VkResult r;
	VkCommandBuffer *cbs = calloc(ring_size + 1, sizeof *cbs);
	if (cbs == NULL) {
		destroy_device(d);
		return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
	}
	st = create_pool(d, &d->pool, cbs, ring_size + 1, err);
	for (uint32_t i = 0; i < ring_size; i++) {
		d->ring[i].cb = cbs[i];
	}
	d->rcb = cbs[ring_size];
	free(cbs);
	for (uint32_t i = 0; i < ring_size && st == GC_OK; i++) {
		st = create_fence(d, &d->ring[i].fence, err);
	}
	if (st == GC_OK) {
		st = create_pool(d, &d->xpool, &d->xcb, 1, err);
	}
	if (st == GC_OK) {
		st = create_fence(d, &d->xfence, err);
	}
	if (st == GC_OK && nqueries > 0) {
		VkQueryPoolCreateInfo qpi = {
			.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
			.queryType = VK_QUERY_TYPE_TIMESTAMP,
			.queryCount = nqueries,
		};
		r = d->fn.vkCreateQueryPool(d->dev, &qpi, NULL, &d->queries);
		if (r != VK_SUCCESS) {
			d->queries = VK_NULL_HANDLE;
			st = devfail(d, err, r, "vkCreateQueryPool");
		} else {
			count_objects(&d->counters.objects_created, 1);
		}
	}
	if (st != GC_OK) {
		destroy_device(d);
		return st;
	}
	if (d->shared != NULL) {
		join_members(d);
	}
	*out = d;
	return GC_OK;
}

static gc_status settle_owned(gc_device d, gc_error *err);

/* vk_close waits, within the drain limit, for the device's own submissions
 * (on their fences: other ranks may share the device and the queue; copy_now
 * waits for its own), and for other opens' work that uses its buffers
 * (settle_owned), then destroys everything. A device lost by the driver is
 * freed too (destroying objects of a lost device is valid). A device
 * declared lost by the drain limit, now or earlier, is leaked whole: the GPU
 * may still use its memory. A buffer that another open declared lost may
 * still use is leaked alone: the rest is freed and close fails with
 * GC_DEVICE_LOST. */
static gc_status vk_close(gc_device d, gc_error *err) {
	if (d == NULL) {
		return GC_OK;
	}
	pthread_mutex_lock(&d->mu);
	if (d->recording) {
		/* Recorded but never submitted: nothing runs it. */
		d->fn.vkEndCommandBuffer(d->ring[(d->submitted + 1) % d->ring_size].cb);
		d->recording = 0;
	}
	d->rpending = 0; /* nothing was recorded for it */
	if (!is_stuck(d)) {
		uint32_t n = 0;
		uint64_t last = 0;
		VkFence fences[GC_MAX_RING];
		for (uint32_t i = 0; i < d->ring_size; i++) {
			if (d->ring[i].ticket > d->completed) {
				fences[n++] = d->ring[i].fence;
				last = d->ring[i].ticket > last ? d->ring[i].ticket : last;
			}
		}
		if (n > 0 && d->fn.vkWaitForFences(d->dev, n, fences, VK_TRUE, d->drain_ns) == VK_TIMEOUT) {
			gc_error ignored = {0, NULL};
			drain_failed(d, &ignored, "vkWaitForFences (close)", last);
			free(ignored.msg);
		}
	}
	if (is_stuck(d)) {
		gc_status st = lost_error(d, err);
		pthread_mutex_unlock(&d->mu);
		return st;
	}
	pthread_mutex_unlock(&d->mu);
	gc_status st = settle_owned(d, err);
	destroy_device(d);
	return st;
}

static gc_status vk_counters(gc_device d, gc_counters *out, gc_error *err) {
	if (d == NULL || out == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "counters: NULL argument");
	}
	out->objects_created = __atomic_load_n(&d->counters.objects_created, __ATOMIC_RELAXED);
	out->objects_destroyed = __atomic_load_n(&d->counters.objects_destroyed, __ATOMIC_RELAXED);
	out->submits = __atomic_load_n(&d->counters.submits, __ATOMIC_RELAXED);
	out->dispatches = __atomic_load_n(&d->counters.dispatches, __ATOMIC_RELAXED);
	out->copies = __atomic_load_n(&d->counters.copies, __ATOMIC_RELAXED);
	out->blocking_waits = __atomic_load_n(&d->counters.blocking_waits, __ATOMIC_RELAXED);
	out->replays = __atomic_load_n(&d->counters.replays, __ATOMIC_RELAXED);
	return GC_OK;
}

/* --------------------------------------------------------------- buffers */

/* pick_memory returns the best memory type in bits for kind, or -1. */
static int pick_memory(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits, int32_t kind) {
	const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
	/* Protected, lazily allocated and AMD device-coherent/uncached types are not for us. */
	const VkMemoryPropertyFlags avoid = VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT | 0x40u | 0x80u;
	int best = -1, best_score = -1;
	for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
		if (!(bits & (1u << i))) {
			continue;
		}
		VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
		if (f & avoid) {
			continue;
		}
		int score;
		if (kind == GC_MEMORY_HOST_VISIBLE) {
			if ((f & hv) != hv) {
				continue;
			}
			/* Cached memory is fast to read back; a device-local BAR is
			 * very slow for host reads. */
			score = ((f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) ? 2 : 0) +
				((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) ? 0 : 1);
		} else {
			score = ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) ? 4 : 0) +
				((f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) ? 0 : 2);
		}
		if (score > best_score) {
			best = (int)i;
			best_score = score;
		}
	}
	return best;
}

/* link_buffer_locked adds b to d's buffers. d->mu held. */
static void link_buffer_locked(gc_device d, struct gc_buffer_s *b) {
	b->prev = NULL;
	b->next = d->buffers;
	if (d->buffers != NULL) {
		d->buffers->prev = b;
	}
	d->buffers = b;
}

static void link_buffer(gc_device d, struct gc_buffer_s *b) {
	pthread_mutex_lock(&d->mu);
	link_buffer_locked(d, b);
	pthread_mutex_unlock(&d->mu);
}

static gc_status vk_buffer_create(gc_device d, uint64_t size, int32_t memory, gc_buffer *out, void **mapped, gc_error *err) {
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
	/* Vulkan has no empty buffers; storage ranges come in 4-byte words. */
	uint64_t sz = size != 0 ? size : 4;
	if (sz > UINT64_MAX - 3) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "buffer_create: size %llu too large", (unsigned long long)size);
	}
	sz = (sz + 3) & ~(uint64_t)3;
	if (sz > d->phys->info.max_memory_allocation_size) {
		return fail(err, GC_UNSUPPORTED, 0, "vkAllocateMemory: %llu bytes exceed maxMemoryAllocationSize (%llu)",
			    (unsigned long long)sz, (unsigned long long)d->phys->info.max_memory_allocation_size);
	}
	struct gc_buffer_s *b = calloc(1, sizeof *b);
	if (b == NULL) {
		return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
	}
	b->dev = d;
	b->size = size;
	VkBufferCreateInfo bci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.size = sz,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VkResult r = d->fn.vkCreateBuffer(d->dev, &bci, NULL, &b->buf);
	if (r != VK_SUCCESS) {
		free(b);
		return devfail(d, err, r, "vkCreateBuffer");
	}
	count_objects(&d->counters.objects_created, 1);
	VkMemoryRequirements req;
	d->fn.vkGetBufferMemoryRequirements(d->dev, b->buf, &req);
	int type = pick_memory(&d->phys->mem, req.memoryTypeBits, memory);
	if (type < 0) {
		destroy_buffer_now(d, b);
		return fail(err, GC_UNSUPPORTED, 0, "vkGetBufferMemoryRequirements: no %s memory type for a storage buffer",
			    memory == GC_MEMORY_HOST_VISIBLE ? "host-visible coherent" : "usable");
	}
	VkMemoryAllocateInfo mai = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.allocationSize = req.size,
		.memoryTypeIndex = (uint32_t)type,
	};
	r = d->fn.vkAllocateMemory(d->dev, &mai, NULL, &b->mem);
	if (r != VK_SUCCESS) {
		b->mem = VK_NULL_HANDLE;
		destroy_buffer_now(d, b);
		return devfail(d, err, r, "vkAllocateMemory");
	}
	count_objects(&d->counters.objects_created, 1);
	r = d->fn.vkBindBufferMemory(d->dev, b->buf, b->mem, 0);
	if (r != VK_SUCCESS) {
		destroy_buffer_now(d, b);
		return devfail(d, err, r, "vkBindBufferMemory");
	}
	if (memory == GC_MEMORY_HOST_VISIBLE) {
		r = d->fn.vkMapMemory(d->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->mapped);
		if (r != VK_SUCCESS) {
			b->mapped = NULL;
			destroy_buffer_now(d, b);
			return devfail(d, err, r, "vkMapMemory");
		}
	}
	link_buffer(d, b);
	*out = b;
	if (mapped != NULL) {
		*mapped = b->mapped;
	}
	return GC_OK;
}

static gc_status vk_buffer_import(gc_device d, void *host, uint64_t size, gc_buffer *out, gc_error *err) {
	if (d == NULL || out == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "buffer_import: NULL argument");
	}
	*out = NULL;
	if (!d->phys->info.external_memory_host || d->fn.vkGetMemoryHostPointerPropertiesEXT == NULL) {
		return fail(err, GC_UNSUPPORTED, (int32_t)VK_ERROR_EXTENSION_NOT_PRESENT,
			    "buffer_import: %s does not support %s", d->phys->info.name, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
	}
	uint64_t align = d->phys->info.min_imported_host_pointer_alignment;
	if (align == 0) {
		align = 1;
	}
	if (host == NULL || size == 0 || (uintptr_t)host % align != 0 || size % align != 0) {
		return fail(err, GC_INVALID_ARGUMENT, 0,
			    "buffer_import: pointer %p and size %llu must be non-zero multiples of minImportedHostPointerAlignment (%llu)",
			    host, (unsigned long long)size, (unsigned long long)align);
	}
	if (is_lost(d)) {
		return lost_error(d, err);
	}
	VkMemoryHostPointerPropertiesEXT hp = {.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
	VkResult r = d->fn.vkGetMemoryHostPointerPropertiesEXT(d->dev, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
								host, &hp);
	if (r != VK_SUCCESS) {
		return devfail(d, err, r, "vkGetMemoryHostPointerPropertiesEXT");
	}
	struct gc_buffer_s *b = calloc(1, sizeof *b);
	if (b == NULL) {
		return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
	}
	b->dev = d;
	b->size = size;
	b->imported = 1;
	VkExternalMemoryBufferCreateInfo ebci = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
		.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
	};
	VkBufferCreateInfo bci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.pNext = &ebci,
		.size = size,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	r = d->fn.vkCreateBuffer(d->dev, &bci, NULL, &b->buf);
	if (r != VK_SUCCESS) {
		free(b);
		return devfail(d, err, r, "vkCreateBuffer");
	}
	count_objects(&d->counters.objects_created, 1);
	VkMemoryRequirements req;
	d->fn.vkGetBufferMemoryRequirements(d->dev, b->buf, &req);
	VkPhysicalDeviceMemoryProperties mp = d->phys->mem;
	if (d->noncoherent_import) {
		for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
			if (hp.memoryTypeBits & (1u << i)) {
				mp.memoryTypes[i].propertyFlags &= ~(VkMemoryPropertyFlags)VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
			}
		}
	}
	/* Only a HOST_VISIBLE | HOST_COHERENT type: Go reads and writes the
	 * memory directly, with no vkFlushMappedMemoryRanges or
	 * vkInvalidateMappedMemoryRanges. */
	int type = pick_memory(&mp, req.memoryTypeBits & hp.memoryTypeBits, GC_MEMORY_HOST_VISIBLE);
	if (type < 0 || req.size > size) {
		destroy_buffer_now(d, b);
		return fail(err, GC_UNSUPPORTED, 0,
			    "vkGetMemoryHostPointerPropertiesEXT: no host-coherent memory type can import this pointer (types %#x)",
			    hp.memoryTypeBits);
	}
	VkImportMemoryHostPointerInfoEXT imp = {
		.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
		.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
		.pHostPointer = host,
	};
	VkMemoryAllocateInfo mai = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.pNext = &imp,
		.allocationSize = size,
		.memoryTypeIndex = (uint32_t)type,
	};
	r = d->fn.vkAllocateMemory(d->dev, &mai, NULL, &b->mem);
	if (r != VK_SUCCESS) {
		b->mem = VK_NULL_HANDLE;
		destroy_buffer_now(d, b);
		return devfail(d, err, r, "vkAllocateMemory");
	}
	count_objects(&d->counters.objects_created, 1);
	r = d->fn.vkBindBufferMemory(d->dev, b->buf, b->mem, 0);
	if (r != VK_SUCCESS) {
		destroy_buffer_now(d, b);
		return devfail(d, err, r, "vkBindBufferMemory");
	}
	b->mapped = host;
	link_buffer(d, b);
	*out = b;
	return GC_OK;
}

static gc_status wait_ticket(gc_device d, uint64_t ticket, uint64_t timeout_ns, gc_error *err);
static gc_status submit_locked(gc_device d, uint64_t *ticket, gc_error *err);
static void begin_next(gc_device d);

/* ---------------------------------------------------------- foreign uses
 *
 * The opens of one shared logical device use each other's buffers
 * (check_range). Each open counts its own tickets, so a buffer's last_use
 * (its owner's ticket) says nothing about another open's work: that use is
 * recorded in the buffer's uses (the open's id and ticket) instead, and the
 * buffer is freed, imported memory released, only once every such use
 * completed too: device memory through the shared device's deferred list,
 * imported memory and the buffers left at the owner's close by waiting
 * (settle_uses). An open that closed drained its work first: it leaves the
 * members and its uses count as over. An open declared lost by the drain
 * limit stays a member: what it may still use is leaked. */

/* member returns sd's open with id, NULL once it closed. use_mu held. */
static gc_device member(shared_dev *sd, uint64_t id) {
	gc_device m = sd->members;
	while (m != NULL && m->id != id) {
		m = m->member_next;
	}
	return m;
}

/* pending_uses drops b's foreign uses that are over and returns how many
 * are left; *stuck is set to the open of one that may never complete (it
 * was declared lost by the drain limit: b must be leaked), else NULL.
 * use_mu held. */
static int pending_uses(shared_dev *sd, struct gc_buffer_s *b, gc_device *stuck) {
	int n = 0;
	*stuck = NULL;
	gc_use **pp = &b->uses;
	while (*pp != NULL) {
		gc_use *u = *pp;
		gc_device m = member(sd, u->user);
		int done = m == NULL || (is_stuck(m) ? !u->copying && u->ticket <= completed(m)
						     : is_lost(m) || u->ticket <= completed(m));
		if (done) {
			*pp = u->next;
			free(u);
			continue;
		}
		if (is_stuck(m)) {
			*stuck = m;
		}
		n++;
		pp = &u->next;
	}
	return n;
}

/* used_by_lost fails for a buffer that stuck, an open declared lost by the
 * drain limit, may still use: it is leaked. */
static gc_status used_by_lost(gc_error *err, gc_device stuck) {
	return fail(err, GC_DEVICE_LOST, (int32_t)VK_TIMEOUT,
		    "buffer in use by another open of the shared device, declared lost (%s): the buffer is leaked",
		    stuck_reason(stuck));
}

/* note_use records that d's work of ticket uses b, or with ticket 0 that
 * d's copy_now is about to: b->last_use for d's own buffer (nothing for
 * copy_now, which waits), else b's foreign use by d. d->mu held for a
 * ticket. */
static gc_status note_use(gc_device d, struct gc_buffer_s *b, uint64_t ticket, gc_error *err) {
	if (b->dev == d) {
		if (ticket != 0) {
			b->last_use = ticket;
		}
		return GC_OK;
	}
	shared_dev *sd = d->shared;
	pthread_mutex_lock(&sd->use_mu);
	gc_use *u = b->uses;
	while (u != NULL && u->user != d->id) {
		u = u->next;
	}
	if (u == NULL) {
		/* d's first use: take over the use of an open that closed, if
		 * any, so a long-lived buffer keeps one use per live open. */
		u = b->uses;
		while (u != NULL && member(sd, u->user) != NULL) {
			u = u->next;
		}
		if (u != NULL) {
			*u = (gc_use){.user = d->id, .next = u->next};
		} else if ((u = calloc(1, sizeof *u)) != NULL) {
			u->user = d->id;
			u->next = b->uses;
			b->uses = u;
		}
	}
	if (u != NULL && ticket != 0) {
		u->ticket = ticket;
	} else if (u != NULL) {
		u->copying = 1;
	}
	pthread_mutex_unlock(&sd->use_mu);
	return u != NULL ? GC_OK : fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
}

/* copied records that d's copy_now using b completed. */
static void copied(gc_device d, struct gc_buffer_s *b) {
	if (b->dev == d) {
		return;
	}
	pthread_mutex_lock(&d->shared->use_mu);
	for (gc_use *u = b->uses; u != NULL; u = u->next) {
		if (u->user == d->id) {
			u->copying = 0;
		}
	}
	pthread_mutex_unlock(&d->shared->use_mu);
}

/* finish_use waits, within the drain limit and with d->mu released while it
 * blocks, for d's work of ticket last, submitting the recording first when
 * last is its ticket (so that nothing uses the memory the caller then
 * frees). GC_OK when that work completed, or d is lost by the driver
 * (nothing runs any more); past the drain limit d is declared lost (call
 * names the wait) and what it uses must be leaked. d->mu held. */
static gc_status finish_use(gc_device d, uint64_t last, const char *call, gc_error *err) {
	if (is_stuck(d)) {
		return lost_error(d, err);
	}
	gc_status st = GC_OK;
	if (last > d->submitted && has_recording(d) && !is_lost(d)) {
		uint64_t t;
		st = submit_locked(d, &t, err);
	}
	if (last > d->submitted) {
		last = d->submitted; /* the recording that used it was never submitted */
	}
	if (st == GC_OK && !is_lost(d)) {
		st = wait_ticket(d, last, d->drain_ns, err);
		if (st == GC_TIMEOUT) {
			st = drain_failed(d, err, call, last);
		}
	}
	if (is_stuck(d)) {
		return st != GC_OK ? st : lost_error(d, err);
	}
	return st != GC_OK && !is_lost(d) ? st : GC_OK;
}

/* settle_uses waits until every foreign use of b completed: each user's
 * work as finish_use waits for it, holding no device's mu but the user's
 * (the caller holds none). GC_OK when they all did; else b must be leaked
 * (a user declared lost: GC_DEVICE_LOST, or failed). Nobody else changes
 * b's uses meanwhile: b is being destroyed and in no deferred list. */
static gc_status settle_uses(shared_dev *sd, struct gc_buffer_s *b, gc_error *err) {
	gc_status st = GC_OK;
	pthread_mutex_lock(&sd->use_mu);
	for (;;) {
		gc_device m;
		if (pending_uses(sd, b, &m) == 0) {
			break;
		}
		if (m != NULL) {
			st = used_by_lost(err, m);
			break;
		}
		gc_use *u = b->uses; /* pending: its user is a member */
		uint64_t ticket = u->ticket;
		m = member(sd, u->user);
		m->pins++; /* m is not freed until it drops */
		pthread_mutex_unlock(&sd->use_mu);
		pthread_mutex_lock(&m->mu);
		st = finish_use(m, ticket, "vkWaitForFences (another open destroying a buffer this one uses)", err);
		pthread_mutex_unlock(&m->mu);
		pthread_mutex_lock(&sd->use_mu);
		if (--m->pins == 0) {
			pthread_cond_broadcast(&sd->use_cond);
		}
		if (st != GC_OK) {
			break;
		}
		u->ticket = 0; /* its work completed */
	}
	pthread_mutex_unlock(&sd->use_mu);
	return st;
}

/* reap_shared frees sd's deferred buffers whose foreign uses and owner's
 * last use completed. Their owners are alive: an owner takes its own out of
 * the list before it is freed (settle_owned). */
static void reap_shared(shared_dev *sd) {
	pthread_mutex_lock(&sd->use_mu);
	struct gc_buffer_s **pp = &sd->deferred;
	while (*pp != NULL) {
		struct gc_buffer_s *b = *pp;
		gc_device o = b->dev, stuck;
		int own = !is_stuck(o) && (is_lost(o) || b->last_use <= completed(o));
		if (pending_uses(sd, b, &stuck) == 0 && own) {
			*pp = b->deferred;
			destroy_buffer_now(o, b);
		} else {
			pp = &b->deferred;
		}
	}
	__atomic_store_n(&sd->ndeferred, sd->deferred != NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&sd->use_mu);
}

/* unlink_buffer takes b out of d's buffers. d->mu held. */
static void unlink_buffer(gc_device d, struct gc_buffer_s *b) {
	if (b->prev != NULL) {
		b->prev->next = b->next;
	} else {
		d->buffers = b->next;
	}
	if (b->next != NULL) {
		b->next->prev = b->prev;
	}
}

/* leak_buffer keeps b, which an open declared lost may still use, in sd's
 * leaked list: never freed or touched again. */
static void leak_buffer(shared_dev *sd, struct gc_buffer_s *b) {
	pthread_mutex_lock(&sd->use_mu);
	b->deferred = sd->leaked;
	sd->leaked = b;
	pthread_mutex_unlock(&sd->use_mu);
}

/* settle_owned, at d's close (d drained, d->mu not held), waits for the
 * foreign uses of d's buffers, the live ones and the deferred ones, which it
 * frees. One that an open declared lost may still use is leaked
 * (leak_buffer) and the close fails with GC_DEVICE_LOST. */
static gc_status settle_owned(gc_device d, gc_error *err) {
	shared_dev *sd = d->shared;
	gc_status st = GC_OK;
	if (sd == NULL) {
		return st;
	}
	for (;;) {
		pthread_mutex_lock(&sd->use_mu);
		struct gc_buffer_s **pp = &sd->deferred;
		while (*pp != NULL && (*pp)->dev != d) {
			pp = &(*pp)->deferred;
		}
		struct gc_buffer_s *b = *pp;
		if (b != NULL) {
			*pp = b->deferred;
		}
		__atomic_store_n(&sd->ndeferred, sd->deferred != NULL, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&sd->use_mu);
		if (b == NULL) {
			break;
		}
		gc_status bs = settle_uses(sd, b, st == GC_OK ? err : NULL);
		if (bs == GC_OK) {
			destroy_buffer_now(d, b);
			continue;
		}
		leak_buffer(sd, b);
		if (st == GC_OK) {
			st = bs;
		}
	}
	for (struct gc_buffer_s *b = d->buffers, *next; b != NULL; b = next) {
		next = b->next;
		pthread_mutex_lock(&sd->use_mu);
		int used = b->uses != NULL;
		pthread_mutex_unlock(&sd->use_mu);
		gc_status bs = used ? settle_uses(sd, b, st == GC_OK ? err : NULL) : GC_OK;
		if (bs != GC_OK) {
			unlink_buffer(d, b);
			leak_buffer(sd, b);
			if (st == GC_OK) {
				st = bs;
			}
		}
	}
	return st;
}

/* release_imported frees an imported buffer before it returns, so that the
 * caller may free the host memory then: it submits the recording if that
 * uses the buffer, and waits (d->mu released, within the drain limit) for
 * the last submission that uses it. Past the drain limit the device is
 * declared lost and the buffer leaked, still importing the memory. d->mu
 * held; b unlinked; its foreign uses completed. */
static gc_status release_imported(gc_device d, struct gc_buffer_s *b, gc_error *err) {
	gc_status st = finish_use(d, b->last_use, "vkWaitForFences (buffer_destroy of imported memory)", err);
	if (st == GC_OK) {
		destroy_buffer_now(d, b); /* done, or lost by the driver */
	}
	return st;
}

/* retire_buffer retires b, d's unlinked device-memory buffer, as retire
 * does; one that another open's pending work uses waits in the shared
 * device's deferred list until that work and d's own use completed. d->mu
 * held. */
static gc_status retire_buffer(gc_device d, struct gc_buffer_s *b, gc_error *err) {
	shared_dev *sd = d->shared;
	if (sd != NULL && !is_stuck(d)) {
		uint64_t last = is_lost(d) ? 0 : own_last(d, b->last_use);
		gc_device stuck;
		pthread_mutex_lock(&sd->use_mu);
		int n = pending_uses(sd, b, &stuck);
		if (n > 0 && stuck == NULL) {
			b->last_use = last;
			b->deferred = sd->deferred;
			sd->deferred = b;
			__atomic_store_n(&sd->ndeferred, 1, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&sd->use_mu);
		if (stuck != NULL) {
			return used_by_lost(err, stuck);
		}
		if (n > 0) {
			return GC_OK;
		}
	}
	return retire(d, RETIRE_BUFFER, b, b->last_use, err);
}

static gc_status vk_buffer_destroy(gc_buffer b, gc_error *err) {
	if (b == NULL) {
		return GC_OK;
	}
	gc_device d = b->dev;
	__atomic_add_fetch(&object_gen, 1, __ATOMIC_RELAXED);
	if (b->imported && d->shared != NULL) {
		/* Other opens' work that uses it first (d->mu not held). */
		gc_status st = settle_uses(d->shared, b, err);
		if (st != GC_OK) {
			return st; /* leaked, still imported: the device keeps it */
		}
	}
	pthread_mutex_lock(&d->mu);
	unlink_buffer(d, b);
	gc_status st = b->imported ? release_imported(d, b, err) : retire_buffer(d, b, err);
	if (st != GC_OK) {
		link_buffer_locked(d, b); /* not freed: the device keeps it (and frees it at close, unless declared lost) */
	}
	pthread_mutex_unlock(&d->mu);
	return st;
}

/* --------------------------------------------------------------- kernels */

/* link_kernel_locked adds k to d's kernels. d->mu held. */
static void link_kernel_locked(gc_device d, struct gc_kernel_s *k) {
	k->prev = NULL;
	k->next = d->kernels;
	if (d->kernels != NULL) {
		d->kernels->prev = k;
	}
	d->kernels = k;
}

static gc_status vk_kernel_create(gc_device d, const gc_kernel_desc *desc, gc_kernel *out, gc_error *err) {
	if (d == NULL || desc == NULL || out == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "kernel_create: NULL argument");
	}
	*out = NULL;
	const gc_device_info *in = &d->phys->info;
	if (desc->code == NULL || desc->code_size == 0 || desc->code_size % 4 != 0) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "kernel_create: SPIR-V of %zu bytes is not a whole number of words",
			    desc->code_size);
	}
	if (desc->binding_count == 0 || desc->binding_count > GC_MAX_BINDINGS || desc->binding_count > in->max_push_descriptors) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "kernel_create: %u bindings (1..%u, maxPushDescriptors %u)",
			    desc->binding_count, GC_MAX_BINDINGS, in->max_push_descriptors);
	}
	if (desc->push_size % 4 != 0 || desc->push_size > GC_MAX_PUSH_BYTES || desc->push_size > in->max_push_constants_size) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "kernel_create: push-constant size %u (a multiple of 4, at most %u)",
			    desc->push_size, in->max_push_constants_size < GC_MAX_PUSH_BYTES ? in->max_push_constants_size : GC_MAX_PUSH_BYTES);
	}
	if (desc->spec_count > GC_MAX_SPEC || (desc->spec_count > 0 && (desc->spec_ids == NULL || desc->spec_values == NULL))) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "kernel_create: %u specialization constants (at most %u, with ids and values)",
			    desc->spec_count, GC_MAX_SPEC);
	}
	if (is_lost(d)) {
		return lost_error(d, err);
	}
	struct gc_kernel_s *k = calloc(1, sizeof *k);
	if (k == NULL) {
		return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
	}
	k->dev = d;
	k->push_size = desc->push_size;
	k->binding_count = desc->binding_count;

	VkShaderModuleCreateInfo smci = {
		.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
		.codeSize = desc->code_size,
		.pCode = desc->code,
	};
	VkShaderModule module;
	VkResult r = d->fn.vkCreateShaderModule(d->dev, &smci, NULL, &module);
	if (r != VK_SUCCESS) {
		free(k);
		return devfail(d, err, r, "vkCreateShaderModule");
	}
	count_objects(&d->counters.objects_created, 1);

	VkDescriptorSetLayoutBinding bindings[GC_MAX_BINDINGS];
	for (uint32_t i = 0; i < desc->binding_count; i++) {
		bindings[i] = (VkDescriptorSetLayoutBinding){
			.binding = i,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.descriptorCount = 1,
			.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
		};
	}
	VkDescriptorSetLayoutCreateInfo dslci = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
		.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
		.bindingCount = desc->binding_count,
		.pBindings = bindings,
	};
	gc_status st = GC_OK;
	r = d->fn.vkCreateDescriptorSetLayout(d->dev, &dslci, NULL, &k->set_layout);
	if (r != VK_SUCCESS) {
		k->set_layout = VK_NULL_HANDLE;
		st = devfail(d, err, r, "vkCreateDescriptorSetLayout");
	} else {
		count_objects(&d->counters.objects_created, 1);
		VkPushConstantRange range = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = desc->push_size};
		VkPipelineLayoutCreateInfo plci = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
			.setLayoutCount = 1,
			.pSetLayouts = &k->set_layout,
			.pushConstantRangeCount = desc->push_size > 0 ? 1 : 0,
			.pPushConstantRanges = &range,
		};
		r = d->fn.vkCreatePipelineLayout(d->dev, &plci, NULL, &k->layout);
		if (r != VK_SUCCESS) {
			k->layout = VK_NULL_HANDLE;
			st = devfail(d, err, r, "vkCreatePipelineLayout");
		} else {
			count_objects(&d->counters.objects_created, 1);
		}
	}
	if (st == GC_OK) {
		VkSpecializationMapEntry entries[GC_MAX_SPEC];
		for (uint32_t i = 0; i < desc->spec_count; i++) {
			entries[i] = (VkSpecializationMapEntry){
				.constantID = desc->spec_ids[i],
				.offset = i * 4,
				.size = 4,
			};
		}
		VkSpecializationInfo si = {
			.mapEntryCount = desc->spec_count,
			.pMapEntries = entries,
			.dataSize = desc->spec_count * 4,
			.pData = desc->spec_values,
		};
		VkComputePipelineCreateInfo cpci = {
			.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
			.stage =
				{
					.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
					.stage = VK_SHADER_STAGE_COMPUTE_BIT,
					.module = module,
					.pName = desc->entry != NULL ? desc->entry : "main",
					.pSpecializationInfo = desc->spec_count > 0 ? &si : NULL,
				},
			.layout = k->layout,
		};
		r = d->fn.vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &cpci, NULL, &k->pipeline);
		if (r != VK_SUCCESS) {
			k->pipeline = VK_NULL_HANDLE;
			st = devfail(d, err, r, "vkCreateComputePipelines");
		} else {
			count_objects(&d->counters.objects_created, 1);
		}
	}
	d->fn.vkDestroyShaderModule(d->dev, module, NULL);
	add_counter(&d->counters.objects_destroyed, 1);
	if (st != GC_OK) {
		destroy_kernel_now(d, k);
		return st;
	}
	pthread_mutex_lock(&d->mu);
	link_kernel_locked(d, k);
	pthread_mutex_unlock(&d->mu);
	*out = k;
	return GC_OK;
}

static gc_status vk_kernel_destroy(gc_kernel k, gc_error *err) {
	if (k == NULL) {
		return GC_OK;
	}
	gc_device d = k->dev;
	__atomic_add_fetch(&object_gen, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&d->mu);
	if (k->prev != NULL) {
		k->prev->next = k->next;
	} else {
		d->kernels = k->next;
	}
	if (k->next != NULL) {
		k->next->prev = k->prev;
	}
	gc_status st = retire(d, RETIRE_KERNEL, k, k->last_use, err);
	if (st != GC_OK) {
		link_kernel_locked(d, k); /* not freed: the device keeps it */
	}
	pthread_mutex_unlock(&d->mu);
	return st;
}

/* ------------------------------------------------------------- recording */

static const VkPipelineStageFlags work_stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;

/* barrier makes the writes of every earlier command visible to later
 * commands, and with host != 0 also to the host once the fence signals. */
static void barrier(gc_device d, VkCommandBuffer cb, int host) {
	VkMemoryBarrier mb = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
				 VK_ACCESS_TRANSFER_WRITE_BIT | (host ? VK_ACCESS_HOST_READ_BIT : 0),
	};
	d->fn.vkCmdPipelineBarrier(cb, work_stages, work_stages | (host ? VK_PIPELINE_STAGE_HOST_BIT : 0), 0, 1, &mb, 0, NULL,
				   0, NULL);
}

/* wait_slot waits for a slot's fence with d->mu released (the slot's waiters
 * count keeps the fence from being reset meanwhile). d->mu held on entry and
 * on return. */
static VkResult wait_slot(gc_device d, slot *s, uint64_t timeout_ns) {
	VkFence f = s->fence;
	s->waiters++;
	pthread_mutex_unlock(&d->mu);
	VkResult r;
	if (timeout_ns == 0) {
		r = d->fn.vkGetFenceStatus(d->dev, f);
	} else {
		r = d->fn.vkWaitForFences(d->dev, 1, &f, VK_TRUE, timeout_ns);
		add_counter(&d->counters.blocking_waits, 1);
	}
	pthread_mutex_lock(&d->mu);
	if (--s->waiters == 0) {
		pthread_cond_broadcast(&d->cond);
	}
	return r;
}

/* free_slot makes slot s ready for a new submission: waits (d->mu released)
 * for its last one and for its waiters, and resets its fence. d->mu held. */
static gc_status free_slot(gc_device d, slot *s, gc_error *err) {
	if (s->ticket > d->completed) {
		uint64_t t = s->ticket;
		VkResult r = wait_slot(d, s, d->drain_ns);
		if (r == VK_TIMEOUT) {
			return drain_failed(d, err, "vkWaitForFences (recording into a busy ring slot)", t);
		}
		if (r != VK_SUCCESS) {
			return devfail(d, err, r, "vkWaitForFences");
		}
		mark_completed(d, t);
	}
	while (s->waiters > 0) {
		pthread_cond_wait(&d->cond, &d->mu);
	}
	VkResult r = d->fn.vkResetFences(d->dev, 1, &s->fence);
	if (r != VK_SUCCESS) {
		return devfail(d, err, r, "vkResetFences");
	}
	return GC_OK;
}

/* dispatch_equal reports whether a and b record the same commands. */
static int dispatch_equal(const gc_dispatch *a, const gc_dispatch *b) {
	if (a->kernel != b->kernel || a->binding_count != b->binding_count || a->push_size != b->push_size ||
	    a->groups[0] != b->groups[0] || a->groups[1] != b->groups[1] || a->groups[2] != b->groups[2]) {
		return 0;
	}
	for (uint32_t i = 0; i < a->binding_count; i++) {
		if (a->bindings[i].buffer != b->bindings[i].buffer || a->bindings[i].offset != b->bindings[i].offset ||
		    a->bindings[i].range != b->bindings[i].range) {
			return 0;
		}
	}
	return memcmp(a->push, b->push, a->push_size) == 0;
}

/* record_dispatch records x (checked) and its barrier into cb; *bound is
 * the pipeline bound in cb so far. */
static void record_dispatch(gc_device d, VkCommandBuffer cb, const gc_dispatch *x, VkPipeline *bound) {
	const struct gc_kernel_s *k = x->kernel;
	VkDescriptorBufferInfo infos[GC_MAX_BINDINGS];
	VkWriteDescriptorSet writes[GC_MAX_BINDINGS];
	for (uint32_t i = 0; i < x->binding_count; i++) {
		const gc_binding *b = &x->bindings[i];
		infos[i] = (VkDescriptorBufferInfo){.buffer = b->buffer->buf, .offset = b->offset, .range = b->range};
		writes[i] = (VkWriteDescriptorSet){
			.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
			.dstBinding = i,
			.descriptorCount = 1,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.pBufferInfo = &infos[i],
		};
	}
	if (*bound != k->pipeline) {
		d->fn.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
		*bound = k->pipeline;
	}
	d->fn.vkCmdPushDescriptorSetKHR(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, x->binding_count, writes);
	if (x->push_size > 0) {
		d->fn.vkCmdPushConstants(cb, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, x->push_size, x->push);
	}
	d->fn.vkCmdDispatch(cb, x->groups[0], x->groups[1], x->groups[2]);
	barrier(d, cb, 0);
}

/* recording returns the command buffer being recorded, starting one in the
 * next ring slot if needed (waiting for that slot's previous submission).
 * A pending replay is recorded into it first: more commands follow. d->mu
 * held. */
static gc_status recording(gc_device d, VkCommandBuffer *cb, gc_error *err) {
	if (is_lost(d)) {
		return lost_error(d, err);
	}
	slot *s = &d->ring[(d->submitted + 1) % d->ring_size];
	if (d->recording) {
		*cb = s->cb;
		return GC_OK;
	}
	if (s->begun) {
		/* Begun by the last submit (begin_next): no wait, no reset. */
		s->begun = 0;
	} else {
		gc_status st = free_slot(d, s, err);
		if (st != GC_OK) {
			return st;
		}
		VkResult r = d->fn.vkResetCommandBuffer(s->cb, 0);
		if (r != VK_SUCCESS) {
			return devfail(d, err, r, "vkResetCommandBuffer");
		}
		VkCommandBufferBeginInfo bi = {
			.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
			.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
		};
		r = d->fn.vkBeginCommandBuffer(s->cb, &bi);
		if (r != VK_SUCCESS) {
			return devfail(d, err, r, "vkBeginCommandBuffer");
		}
	}
	d->recording = 1;
	d->rsingle = 0;
	d->bound = VK_NULL_HANDLE;
	*cb = s->cb;
	if (d->rpending) {
		d->rpending = 0;
		record_dispatch(d, s->cb, &d->rdisp, &d->bound);
	}
	return GC_OK;
}

/* buffer_usable: a buffer of another open of the same shared logical
 * device is usable: it lives in the same VkDevice (checks.h). */
static int buffer_usable(gc_device d, gc_buffer b) { return d->shared != NULL && b->dev->shared == d->shared; }

#include "checks.h"

static gc_status vk_cmd_copy(gc_device d, gc_buffer dst, uint64_t dst_off, gc_buffer src, uint64_t src_off, uint64_t size,
			     gc_error *err) {
	gc_status st = check_copy(d, dst, dst_off, src, src_off, size, "vkCmdCopyBuffer", err);
	if (st != GC_OK || size == 0) {
		return st;
	}
	pthread_mutex_lock(&d->mu);
	VkCommandBuffer cb;
	st = recording(d, &cb, err);
	if (st == GC_OK) {
		st = note_use(d, src, d->submitted + 1, err);
	}
	if (st == GC_OK) {
		st = note_use(d, dst, d->submitted + 1, err);
	}
	if (st == GC_OK) {
		VkBufferCopy region = {.srcOffset = src_off, .dstOffset = dst_off, .size = size};
		d->fn.vkCmdCopyBuffer(cb, src->buf, dst->buf, 1, &region);
		barrier(d, cb, 0);
		d->rsingle = 0;
		add_counter(&d->counters.copies, 1);
	}
	pthread_mutex_unlock(&d->mu);
	return st;
}

static gc_status vk_cmd_dispatch(gc_device d, const gc_dispatch *x, gc_error *err) {
	if (d == NULL || x == NULL || x->kernel == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "vkCmdDispatch: NULL argument");
	}
	const struct gc_kernel_s *k = x->kernel;
	if (k->dev != d) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "vkCmdDispatch: kernel belongs to another device");
	}
	if (x->binding_count != k->binding_count || x->push_size != k->push_size) {
		return fail(err, GC_INVALID_ARGUMENT, 0,
			    "vkCmdDispatch: %u bindings and %u push-constant bytes given, the kernel has %u and %u",
			    x->binding_count, x->push_size, k->binding_count, k->push_size);
	}
	const uint32_t *maxg = d->phys->info.max_compute_work_group_count;
	if (x->groups[0] > maxg[0] || x->groups[1] > maxg[1] || x->groups[2] > maxg[2]) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "vkCmdDispatch: %u x %u x %u groups exceed maxComputeWorkGroupCount",
			    x->groups[0], x->groups[1], x->groups[2]);
	}
	for (uint32_t i = 0; i < x->binding_count; i++) {
		const gc_binding *b = &x->bindings[i];
		gc_status st = check_range(d, b->buffer, b->offset, b->range, "vkCmdPushDescriptorSetKHR", err);
		if (st != GC_OK) {
			return st;
		}
		if (b->range == 0) {
			return fail(err, GC_INVALID_ARGUMENT, 0, "vkCmdPushDescriptorSetKHR: binding %u has an empty range", i);
		}
	}
	uint64_t gen = __atomic_load_n(&object_gen, __ATOMIC_RELAXED);
	pthread_mutex_lock(&d->mu);
	gc_status st = GC_OK;
	int fresh = !has_recording(d);
	int replay = fresh && d->rvalid && d->rgen == gen && d->rticket <= d->completed && !is_lost(d) &&
		     dispatch_equal(x, &d->rdisp);
	VkCommandBuffer cb = VK_NULL_HANDLE;
	if (replay) {
		d->rpending = 1; /* submit replays rcb */
	} else {
		st = recording(d, &cb, err);
	}
	for (uint32_t i = 0; i < x->binding_count && st == GC_OK; i++) {
		st = note_use(d, x->bindings[i].buffer, d->submitted + 1, err);
	}
	if (st != GC_OK && replay) {
		d->rpending = 0; /* nothing recorded */
	}
	if (st == GC_OK && !replay) {
		record_dispatch(d, cb, x, &d->bound);
		d->rsingle = fresh;
		if (fresh) {
			d->rcand = *x;
			d->rcand_gen = gen;
		}
	}
	if (st == GC_OK) {
		add_counter(&d->counters.dispatches, 1);
		x->kernel->last_use = d->submitted + 1;
	}
	pthread_mutex_unlock(&d->mu);
	return st;
}

static gc_status vk_cmd_timestamp(gc_device d, uint32_t query, gc_error *err) {
	if (d == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "vkCmdWriteTimestamp: NULL device");
	}
	if (query >= d->nqueries) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "vkCmdWriteTimestamp: query %u out of %u (open with timestamp_queries)",
			    query, d->nqueries);
	}
	pthread_mutex_lock(&d->mu);
	VkCommandBuffer cb;
	gc_status st = recording(d, &cb, err);
	if (st == GC_OK) {
		d->fn.vkCmdResetQueryPool(cb, d->queries, query, 1);
		d->fn.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d->queries, query);
		d->rsingle = 0;
	}
	pthread_mutex_unlock(&d->mu);
	return st;
}

/* queue_submit submits cb with fence on d's queue, waiting first on the
 * stall test hook's semaphore when armed. d->mu held. */
static VkResult queue_submit(gc_device d, VkCommandBuffer cb, VkFence fence) {
	VkSubmitInfo si = {
		.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
		.commandBufferCount = 1,
		.pCommandBuffers = &cb,
	};
	/* The stall test hook: wait for the host to signal the semaphore. */
	uint64_t stall_at = __atomic_load_n(&d->stall_value, __ATOMIC_ACQUIRE) + 1;
	VkPipelineStageFlags stall_stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
	VkTimelineSemaphoreSubmitInfo tsi = {
		.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
		.waitSemaphoreValueCount = 1,
		.pWaitSemaphoreValues = &stall_at,
	};
	if (d->stall_armed) {
		d->stall_armed = 0;
		si.pNext = &tsi;
		si.waitSemaphoreCount = 1;
		si.pWaitSemaphores = &d->stall;
		si.pWaitDstStageMask = &stall_stage;
	}
	pthread_mutex_lock(d->qmu);
	VkResult r = d->fn.vkQueueSubmit(d->queue, 1, &si, fence);
	pthread_mutex_unlock(d->qmu);
	return r;
}

/* learn is called after a submission of one dispatch, d->rcand: when it
 * repeats the one before, it is recorded into rcb (if rcb is idle) for
 * later submissions to replay. A failure only leaves rcb unused. d->mu
 * held. */
static void learn(gc_device d) {
	d->rsingle = 0;
	uint64_t gen = __atomic_load_n(&object_gen, __ATOMIC_RELAXED);
	int repeat = d->rprev_set && d->rprev_gen == d->rcand_gen && d->rcand_gen == gen &&
		     dispatch_equal(&d->rcand, &d->rprev);
	if (!repeat) {
		d->rprev = d->rcand;
		d->rprev_gen = d->rcand_gen;
		d->rprev_set = 1;
		return;
	}
	if (d->rticket > d->completed || (d->rvalid && d->rgen == gen && dispatch_equal(&d->rcand, &d->rdisp))) {
		return; /* busy, or holds it already */
	}
	d->rvalid = 0;
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
	if (d->fn.vkResetCommandBuffer(d->rcb, 0) != VK_SUCCESS || d->fn.vkBeginCommandBuffer(d->rcb, &bi) != VK_SUCCESS) {
		return;
	}
	VkPipeline bound = VK_NULL_HANDLE;
	record_dispatch(d, d->rcb, &d->rcand, &bound);
	barrier(d, d->rcb, 1);
	if (d->fn.vkEndCommandBuffer(d->rcb) != VK_SUCCESS) {
		return;
	}
	d->rdisp = d->rcand;
	d->rgen = d->rcand_gen;
	d->rvalid = 1;
}

/* replay_locked submits rcb in place of a recording (d->rpending). d->mu
 * held. */
static gc_status replay_locked(gc_device d, uint64_t *ticket, gc_error *err) {
	slot *s = &d->ring[(d->submitted + 1) % d->ring_size];
	d->rpending = 0;
	if (s->begun) {
		/* Its fence is reset; its command buffer, begun and empty, is reset
		 * again by whoever records into the slot next. */
		s->begun = 0;
	} else {
		gc_status st = free_slot(d, s, err);
		if (st != GC_OK) {
			return st;
		}
	}
	VkResult r = queue_submit(d, d->rcb, s->fence);
	if (r != VK_SUCCESS) {
		return devfail(d, err, r, "vkQueueSubmit");
	}
	s->ticket = ++d->submitted;
	d->rticket = s->ticket;
	*ticket = s->ticket;
	add_counter(&d->counters.submits, 1);
	add_counter(&d->counters.replays, 1);
	begin_next(d);
	return GC_OK;
}

/* submit_locked submits the recording, if any, and sets *ticket to the last
 * ticket submitted. d->mu held. */
static gc_status submit_locked(gc_device d, uint64_t *ticket, gc_error *err) {
	if (is_lost(d)) {
		return lost_error(d, err);
	}
	if (d->rpending) {
		return replay_locked(d, ticket, err);
	}
	if (!d->recording) {
		*ticket = d->submitted;
		return GC_OK;
	}
	slot *s = &d->ring[(d->submitted + 1) % d->ring_size];
	d->recording = 0;
	barrier(d, s->cb, 1);
	VkResult r = d->fn.vkEndCommandBuffer(s->cb);
	if (r != VK_SUCCESS) {
		return devfail(d, err, r, "vkEndCommandBuffer");
	}
	r = queue_submit(d, s->cb, s->fence);
	if (r != VK_SUCCESS) {
		return devfail(d, err, r, "vkQueueSubmit");
	}
	s->ticket = ++d->submitted;
	*ticket = s->ticket;
	add_counter(&d->counters.submits, 1);
	begin_next(d);
	if (d->rsingle) {
		learn(d);
	}
	return GC_OK;
}

/* begin_next resets and begins the next slot's command buffer right after a
 * submit, while the caller would otherwise only wait for the GPU, so the
 * next recording starts without vkResetFences, vkResetCommandBuffer and
 * vkBeginCommandBuffer on its critical path. Only a slot whose last
 * submission is known complete and that nobody waits on is touched (the
 * conditions recording() establishes); anything else, or a failure, leaves
 * the slot to recording(). d->mu held. */
static void begin_next(gc_device d) {
	slot *n = &d->ring[(d->submitted + 1) % d->ring_size];
	if (n->begun || n->ticket > d->completed || n->waiters > 0) {
		return;
	}
	if (d->fn.vkResetFences(d->dev, 1, &n->fence) != VK_SUCCESS ||
	    d->fn.vkResetCommandBuffer(n->cb, 0) != VK_SUCCESS) {
		return;
	}
	VkCommandBufferBeginInfo bi = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
	};
	if (d->fn.vkBeginCommandBuffer(n->cb, &bi) == VK_SUCCESS) {
		n->begun = 1;
	}
}

static gc_status vk_submit(gc_device d, uint64_t *ticket, gc_error *err) {
	if (d == NULL || ticket == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "vkQueueSubmit: NULL argument");
	}
	pthread_mutex_lock(&d->mu);
	gc_status st = submit_locked(d, ticket, err);
	pthread_mutex_unlock(&d->mu);
	return st;
}

/* wait_ticket is wait with d->mu held (released while blocked). */
static gc_status wait_ticket(gc_device d, uint64_t ticket, uint64_t timeout_ns, gc_error *err) {
	gc_status st = GC_OK;
	if (ticket <= d->completed) {
		/* done (ticket 0 included) */
	} else if (is_lost(d)) {
		st = lost_error(d, err);
	} else if (ticket > d->submitted) {
		st = fail(err, GC_INVALID_ARGUMENT, 0, "vkWaitForFences: ticket %llu was not submitted (last is %llu)",
			  (unsigned long long)ticket, (unsigned long long)d->submitted);
	} else {
		slot *s = &d->ring[ticket % d->ring_size];
		if (s->ticket != ticket) {
			/* The slot was reused, which waited for ticket first. */
			mark_completed(d, ticket);
		} else {
			VkResult r = wait_slot(d, s, timeout_ns);
			if (r == VK_SUCCESS) {
				mark_completed(d, ticket);
			} else if (r == VK_NOT_READY || r == VK_TIMEOUT) {
				/* Outcomes, not failures: no message, so polling allocates nothing. */
				st = r == VK_NOT_READY ? GC_NOT_READY : GC_TIMEOUT;
				if (err != NULL) {
					err->native = (int32_t)r;
				}
			} else {
				st = devfail(d, err, r, timeout_ns == 0 ? "vkGetFenceStatus" : "vkWaitForFences");
			}
		}
	}
	return st;
}

static gc_status vk_wait(gc_device d, uint64_t ticket, uint64_t timeout_ns, gc_error *err) {
	if (d == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "vkWaitForFences: NULL device");
	}
	pthread_mutex_lock(&d->mu);
	gc_status st = wait_ticket(d, ticket, timeout_ns, err);
	pthread_mutex_unlock(&d->mu);
	return st;
}

/* drain_locked waits, within the drain limit and with d->mu released while
 * it blocks, for the last submission (and so every earlier one: a fence
 * covers all earlier work of its queue). Past the limit the device is
 * declared lost. d->mu held. */
static gc_status drain_locked(gc_device d, const char *call, gc_error *err) {
	if (is_lost(d)) {
		return lost_error(d, err);
	}
	uint64_t last = d->submitted;
	gc_status st = wait_ticket(d, last, d->drain_ns, err);
	if (st == GC_TIMEOUT) {
		st = drain_failed(d, err, call, last);
	}
	return st;
}

/* vk_wait_idle waits on the fence of the last submission, not with
 * vkQueueWaitIdle: that cannot be bounded, and must hold the queue's lock
 * (and so keep other ranks sharing the queue out) while it blocks. */
static gc_status vk_wait_idle(gc_device d, gc_error *err) {
	if (d == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "vkWaitForFences: NULL device");
	}
	pthread_mutex_lock(&d->mu);
	gc_status st = drain_locked(d, "vkWaitForFences (wait_idle)", err);
	pthread_mutex_unlock(&d->mu);
	return st;
}

static gc_status vk_copy_now(gc_device d, gc_buffer dst, uint64_t dst_off, gc_buffer src, uint64_t src_off, uint64_t size,
			     gc_error *err) {
	gc_status st = check_copy(d, dst, dst_off, src, src_off, size, "copy_now", err);
	if (st != GC_OK || size == 0) {
		return st;
	}
	pthread_mutex_lock(&d->xmu);
	if (is_lost(d)) {
		pthread_mutex_unlock(&d->xmu);
		return lost_error(d, err);
	}
	st = note_use(d, dst, 0, err);
	if (st == GC_OK) {
		st = note_use(d, src, 0, err);
	}
	if (st != GC_OK) {
		pthread_mutex_unlock(&d->xmu);
		return st;
	}
	VkResult r = d->fn.vkResetCommandBuffer(d->xcb, 0);
	const char *call = "vkResetCommandBuffer";
	if (r == VK_SUCCESS) {
		VkCommandBufferBeginInfo bi = {
			.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
			.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
		};
		call = "vkBeginCommandBuffer";
		r = d->fn.vkBeginCommandBuffer(d->xcb, &bi);
	}
	if (r == VK_SUCCESS) {
		VkBufferCopy region = {.srcOffset = src_off, .dstOffset = dst_off, .size = size};
		d->fn.vkCmdCopyBuffer(d->xcb, src->buf, dst->buf, 1, &region);
		barrier(d, d->xcb, 1);
		call = "vkEndCommandBuffer";
		r = d->fn.vkEndCommandBuffer(d->xcb);
	}
	if (r == VK_SUCCESS) {
		VkSubmitInfo si = {
			.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
			.commandBufferCount = 1,
			.pCommandBuffers = &d->xcb,
		};
		call = "vkQueueSubmit";
		pthread_mutex_lock(d->qmu);
		r = d->fn.vkQueueSubmit(d->queue, 1, &si, d->xfence);
		pthread_mutex_unlock(d->qmu);
	}
	if (r == VK_SUCCESS) {
		add_counter(&d->counters.submits, 1);
		add_counter(&d->counters.blocking_waits, 1);
		call = "vkWaitForFences";
		r = d->fn.vkWaitForFences(d->dev, 1, &d->xfence, VK_TRUE, d->drain_ns);
		if (r == VK_TIMEOUT) {
			pthread_mutex_unlock(&d->xmu);
			return drain_failed(d, err, "vkWaitForFences (copy_now)", 0);
		}
		if (r == VK_SUCCESS) {
			call = "vkResetFences";
			r = d->fn.vkResetFences(d->dev, 1, &d->xfence);
		}
	}
	if (r != VK_SUCCESS) {
		st = devfail(d, err, r, call);
	} else {
		copied(d, dst);
		copied(d, src);
	}
	pthread_mutex_unlock(&d->xmu);
	return st;
}

static gc_status vk_read_timestamps(gc_device d, uint32_t first, uint32_t count, uint64_t *out, gc_error *err) {
	if (d == NULL || (out == NULL && count > 0)) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "vkGetQueryPoolResults: NULL argument");
	}
	if (first > d->nqueries || count > d->nqueries - first) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "vkGetQueryPoolResults: queries [%u, +%u) out of %u", first, count,
			    d->nqueries);
	}
	if (count == 0) {
		return GC_OK;
	}
	if (is_lost(d)) {
		return lost_error(d, err);
	}
	VkResult r = d->fn.vkGetQueryPoolResults(d->dev, d->queries, first, count, (size_t)count * sizeof *out, out,
						 sizeof *out, VK_QUERY_RESULT_64_BIT);
	if (r == VK_NOT_READY) {
		if (err != NULL) {
			err->native = (int32_t)r;
		}
		return GC_NOT_READY;
	}
	if (r != VK_SUCCESS) {
		return devfail(d, err, r, "vkGetQueryPoolResults");
	}
	return GC_OK;
}

static const gc_backend vulkan_backend = {
	.abi_version = GC_ABI_VERSION,
	.name = "vulkan",
	.init = vk_init,
	.instance_info = vk_instance_info,
	.device_count = vk_device_count,
	.device_info = vk_device_info,
	.message_count = vk_message_count,
	.take_message = vk_take_message,
	.open = vk_open,
	.close = vk_close,
	.counters = vk_counters,
	.buffer_create = vk_buffer_create,
	.buffer_import = vk_buffer_import,
	.buffer_destroy = vk_buffer_destroy,
	.kernel_create = vk_kernel_create,
	.kernel_destroy = vk_kernel_destroy,
	.cmd_copy = vk_cmd_copy,
	.cmd_dispatch = vk_cmd_dispatch,
	.cmd_timestamp = vk_cmd_timestamp,
	.submit = vk_submit,
	.wait = vk_wait,
	.wait_idle = vk_wait_idle,
	.copy_now = vk_copy_now,
	.read_timestamps = vk_read_timestamps,
};

const gc_backend *gc_vulkan(void) {
	return &vulkan_backend;
}

/* ------------------------------------------------------ Vulkan interop */

gc_status gc_vk_device_handles(gc_device d, gc_vk_handles *out) {
	if (d == NULL || out == NULL) {
		return GC_INVALID_ARGUMENT;
	}
	out->instance = (uint64_t)(uintptr_t)g.instance;
	out->physical_device = (uint64_t)(uintptr_t)d->phys->pd;
	out->device = (uint64_t)(uintptr_t)d->dev;
	out->queue = (uint64_t)(uintptr_t)d->queue;
	out->queue_family = d->phys->info.compute_queue_family;
	out->api_version = g.api_version;
	out->get_instance_proc_addr = (uint64_t)(uintptr_t)g.gipa;
	return GC_OK;
}

gc_status gc_vk_queue_lock(gc_device d) {
	if (d == NULL) {
		return GC_INVALID_ARGUMENT;
	}
	pthread_mutex_lock(d->qmu);
	return GC_OK;
}

gc_status gc_vk_queue_unlock(gc_device d) {
	if (d == NULL) {
		return GC_INVALID_ARGUMENT;
	}
	pthread_mutex_unlock(d->qmu);
	return GC_OK;
}

gc_status gc_vk_buffer_handles(gc_buffer b, uint64_t *buffer, uint64_t *memory) {
	if (b == NULL || buffer == NULL || memory == NULL) {
		return GC_INVALID_ARGUMENT;
	}
	*buffer = (uint64_t)b->buf;
	*memory = (uint64_t)b->mem;
	return GC_OK;
}

gc_status gc_vk_wrap_buffer(gc_device d, uint64_t vkbuffer, uint64_t size, gc_buffer *out, gc_error *err) {
	if (d == NULL || out == NULL || vkbuffer == 0 || size == 0) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "gc_vk_wrap_buffer: NULL device, buffer or size");
	}
	struct gc_buffer_s *b = calloc(1, sizeof *b);
	if (b == NULL) {
		return fail(err, GC_OUT_OF_MEMORY, 0, "calloc: out of memory");
	}
	b->dev = d;
	b->buf = (VkBuffer)vkbuffer;
	b->size = size;
	b->borrowed = 1;
	link_buffer(d, b);
	*out = b;
	return GC_OK;
}

/* ------------------------------------------------------- test hooks */

/* Every stall semaphore alive in the process, so gc_vk_test_release can
 * signal them whatever became of their device (a device declared lost is
 * leaked with its semaphore; one closed normally removes its own). */
static struct {
	pthread_mutex_t mu;
	gc_device devs[64];
	uint32_t n;
} stalls = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* forget_stall removes d's semaphore from stalls (destroy_device). */
static void forget_stall(gc_device d) {
	pthread_mutex_lock(&stalls.mu);
	for (uint32_t i = 0; i < stalls.n; i++) {
		if (stalls.devs[i] == d) {
			stalls.devs[i] = stalls.devs[--stalls.n];
			break;
		}
	}
	pthread_mutex_unlock(&stalls.mu);
}

gc_status gc_vk_test_stall(gc_device d, gc_error *err) {
	if (d == NULL) {
		return fail(err, GC_INVALID_ARGUMENT, 0, "gc_vk_test_stall: NULL device");
	}
	if (!d->phys->timeline || d->fn.vkCreateSemaphore == NULL || d->fn.vkSignalSemaphore == NULL) {
		return fail(err, GC_UNSUPPORTED, 0, "gc_vk_test_stall: %s has no timeline semaphores", d->phys->info.name);
	}
	gc_status st = GC_OK;
	pthread_mutex_lock(&stalls.mu);
	pthread_mutex_lock(&d->mu);
	if (d->stall == VK_NULL_HANDLE) {
		if (stalls.n == sizeof stalls.devs / sizeof stalls.devs[0]) {
			st = fail(err, GC_OUT_OF_MEMORY, 0, "gc_vk_test_stall: too many stalled devices");
		} else {
			VkSemaphoreTypeCreateInfo ti = {
				.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
				.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
			};
			VkSemaphoreCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
			VkResult r = d->fn.vkCreateSemaphore(d->dev, &ci, NULL, &d->stall);
			if (r != VK_SUCCESS) {
				d->stall = VK_NULL_HANDLE;
				st = vkfail(err, r, "vkCreateSemaphore");
			} else {
				stalls.devs[stalls.n++] = d;
			}
		}
	}
	if (st == GC_OK) {
		d->stall_armed = 1;
	}
	pthread_mutex_unlock(&d->mu);
	pthread_mutex_unlock(&stalls.mu);
	return st;
}

void gc_vk_test_release(void) {
	pthread_mutex_lock(&stalls.mu);
	for (uint32_t i = 0; i < stalls.n; i++) {
		gc_device d = stalls.devs[i];
		/* Not under d->mu: a wait that holds it must not keep the release out. */
		VkSemaphoreSignalInfo si = {
			.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
			.semaphore = d->stall,
			.value = __atomic_add_fetch(&d->stall_value, 1, __ATOMIC_ACQ_REL),
		};
		d->fn.vkSignalSemaphore(d->dev, &si);
	}
	pthread_mutex_unlock(&stalls.mu);
}

#endif /* GOCOLL_NO_VULKAN */
