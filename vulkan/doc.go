// Package vulkan is gocoll's Vulkan backend. It implements backend.Backend
// over the C ABI of package cshim and registers itself as "vulkan"
// (backend.Lookup("vulkan")). The devices, buffers, streams and fences it
// opens are the ones the Metal backend opens too (internal/shimdev): this
// package holds what is Vulkan's, loading the library, the validation layer,
// device properties, SPIR-V, and the interop handles (DeviceHandles,
// BufferHandle, WrapBuffer).
//
// Each Open creates its own VkDevice and compute queue, so several ranks may
// share one physical device and still exchange data for real. Reductions run
// the kernels of package kernels (reduce_f32/f64, scale_f32/f64, and the
// integer and 16-bit float reduce kernels; those of int64/uint64, int8/uint8
// and half/bfloat16/int16/uint16 where the device has shaderInt64,
// storageBuffer8BitAccess and storageBuffer16BitAccess, which Open enables,
// and DeviceInfo.Kernels says which) with
// pipelines created once per (kernel, op, source count, scale) and cached;
// regions larger than the device's binding limit are split across
// dispatches, and bindings start at offsets aligned to
// minStorageBufferOffsetAlignment with the remainder passed as push
// constants.
//
// The backend needs cgo and is left out by -tags novulkan; such a build
// registers it as omitted, so backend.Lookup("vulkan") says why.
//
// Environment (read once per process, when the Vulkan instance is created):
//
//	GOCOLL_VULKAN_LIB=path       load libvulkan from path (a missing one makes the backend unavailable)
//	GOCOLL_VULKAN_VALIDATION=1   enable VK_LAYER_KHRONOS_validation and record its messages
//
// Test hook (read when a device is opened):
//
//	GOCOLL_VULKAN_TEST_NONCOHERENT_IMPORT=1   hide the HOST_COHERENT memory types host memory could be
//	                                         imported into, so Import fails with ErrUnsupported
package vulkan
