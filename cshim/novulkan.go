//go:build cgo && novulkan

package cshim

// With -tags novulkan, vulkan.c compiles to nothing and Vulkan does not exist.

/*
#cgo CFLAGS: -DGOCOLL_NO_VULKAN
*/
import "C"

// shareIdentity: without Vulkan no device shares memory with another.
func shareIdentity(*Device) uint64 { return 0 }
