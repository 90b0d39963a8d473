// Package shimdev is the one implementation of backend.Device, Buffer,
// Stream and Fence over the C ABI of package cshim. The Vulkan and Metal
// backends both drive that ABI (one function table each), so everything
// above it exists once, here: the device and its buffers, staged reads and
// writes, the stream that records copies and kernels (reduce, scale, their
// 16-byte variants, pack/unpack and top-k) and splits them by the binding
// limit, the fences, import of host memory, counters, the validation check
// and the drain limit. Package vulkan and package metal keep only what is
// API-specific, handed over in an API value: which table to load and with
// which options, how a device's properties become a backend.DeviceInfo, and
// the kernels' code (SPIR-V, or MSL prepared by cshim.MetalKernel); Vulkan's
// interop handles stay in package vulkan.
//
// Why a package of its own rather than part of cshim: cshim is the binding
// of the ABI (small Go types over its handles, no policy), and the only cgo
// package; this is policy over that binding (kernel choice, staging, fence
// polling, ownership rules), in plain Go. Keeping them apart keeps cshim a
// thin binding that tests can drive call by call, and lets this code be
// compiled and tested on Linux with Vulkan although its Metal user can only
// be built on macOS. It is internal: nothing here is gocoll's API.
//
// The package needs cgo (it uses cshim's device types); without cgo it holds
// only this comment.
package shimdev
