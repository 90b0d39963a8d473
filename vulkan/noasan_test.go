//go:build !asan

package vulkan

// asanEnabled reports a build with -asan: its instrumented cgo calls
// allocate, so allocation counts mean nothing under it.
const asanEnabled = false
