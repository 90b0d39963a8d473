//go:build cgo && !novulkan

package cshim

/*
#include "shim.h"
*/
import "C"

import "sync"

var vulkanImpl = sync.OnceValue(func() *Impl { return newImpl(C.gc_vulkan()) })

// Vulkan returns the Vulkan implementation of the ABI (gc_vulkan in
// vulkan.c). Call Init before anything else.
func Vulkan() *Impl { return vulkanImpl() }
