//go:build cgo && !nometal

package cshim

// The Metal implementation (metal.m) behind the same ABI as vulkan.c: the
// Impl, Device, Buffer and Kernel code of cshim.go serves both, only the
// table differs. metal.m is Objective-C compiled with ARC; the frameworks are
// part of macOS, so nothing is loaded at run time.

/*
#cgo CFLAGS: -fobjc-arc
#cgo LDFLAGS: -framework Metal -framework Foundation
#include "shim.h"

const gc_backend *gc_metal(void);
*/
import "C"

import "sync"

var metalImpl = sync.OnceValue(func() *Impl { return newImpl(C.gc_metal()) })

// Metal returns the Metal implementation of the ABI (gc_metal in metal.m).
// Call Init before anything else. Its kernels are MSL source, not SPIR-V:
// build KernelDesc with MetalKernel.
func Metal() *Impl { return metalImpl() }
