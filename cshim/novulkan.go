//go:build cgo && novulkan

package cshim

// With -tags novulkan, vulkan.c compiles to nothing and Vulkan does not exist.

/*
#cgo CFLAGS: -DGOCOLL_NO_VULKAN
*/
import "C"
