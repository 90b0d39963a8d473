//go:build !cgo || novulkan

package main

// vulkanBuilt says whether this build includes the Vulkan backend (in CI it
// must then be available).
const vulkanBuilt = false
