//go:build cgo && !novulkan

package main

import "os"

// vulkanBuilt says whether this build includes the Vulkan backend (in CI it
// must then be available).
const vulkanBuilt = true

func init() {
	// Run the Vulkan cases under the validation layer: with it, a validation
	// message fails the call that caused it, so the command exits 1. The
	// instance is created once per process, so ask before anything loads
	// Vulkan; leave an explicit choice (or a custom loader) alone.
	if os.Getenv("GOCOLL_VULKAN_VALIDATION") == "" && os.Getenv("GOCOLL_VULKAN_LIB") == "" {
		os.Setenv("GOCOLL_VULKAN_VALIDATION", "1")
	}
}
