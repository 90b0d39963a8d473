// Package metal is gocoll's Metal backend for macOS. It implements
// backend.Backend over the C ABI of package cshim, whose Metal implementation
// (cshim/metal.m) fills the same function table as the Vulkan one, and
// registers itself as "metal".
//
// Everything above the ABI is shared with Linux: the Go binding (cshim) and
// the device, buffer, stream and fence code (internal/shimdev) are the ones
// the Vulkan backend uses, so this package holds only what is Metal's: the
// table, the device properties and the kernels' code. The kernels are the
// same GLSL sources, translated to MSL by spirv-cross when they are generated (kernels.MSL) and
// compiled by Metal at run time, once per device. Each Open creates its own
// MTLCommandQueue, so several ranks may share one GPU and still exchange data
// for real; a fence waits for the submission's last command buffer.
//
// Metal has no double: Info().Float64 is false, f64 kernels are refused with
// backend.ErrUnsupported, and collectives reduce f64 exactly on the host path.
// The f32 kernels are all there: reduce and scale, their 16-byte variants
// (used on 16-byte aligned regions), and the compression kernels (pack,
// unpack, top-k: the stream implements backend.Compressor).
// Host memory from backend.AllocHostMemory is imported without copying
// (newBufferWithBytesNoCopy); Go slices go through pooled shared-storage
// buffers.
//
// The backend needs darwin and cgo, and is left out by -tags nometal; a build
// without it registers it as omitted, so backend.Lookup("metal") says why.
// docs/METAL.md maps every ABI entry to the Metal calls it makes.
//
// Environment (read by Metal when the process starts):
//
//	MTL_DEBUG_LAYER=1        Metal's API validation (OpenOptions.Validation needs it)
//	MTL_SHADER_VALIDATION=1  out-of-bounds checks in kernels (slow)
package metal
