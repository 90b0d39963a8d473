// Package cshim is gocoll's one cgo package: the backend-neutral C ABI for
// GPU compute (shim.h), its implementations (vulkan.c, and later metal.m),
// and the Go binding of that ABI.
//
// The ABI is a table of function pointers per implementation (gc_vulkan(),
// later gc_metal()), so implementations link side by side. Every entry returns
// a status and, on failure, a message allocated by C that names the failing
// API call; the binding turns it into an *Error whose Is method matches the
// sentinels of package backend (backend.ErrOutOfMemory, ErrDeviceLost, ...).
//
// The binding exposes small Go types over the ABI's handles: Impl (one
// implementation), Device (a logical device with its own queue), Buffer and
// Kernel (a compute pipeline). No exported identifier shows a C type and C
// keeps no Go pointer. The hot path (CmdDispatch, CmdCopy, Submit, Wait)
// allocates no Go memory: arguments travel through a per-device descriptor in
// C memory and results come back by value.
//
// Build tags: without cgo this package holds only its pure-Go parts (Status,
// Error); -tags novulkan leaves the Vulkan implementation out (Vulkan then
// does not exist). Vulkan itself is opened with dlopen at run time, so a
// binary built with it still starts where libvulkan is missing: Init then
// returns an error wrapping backend.ErrUnavailable.
package cshim
