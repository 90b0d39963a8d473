//go:build cgo

package main

// cgoEnabled reports whether this binary was built with cgo, which the GPU
// backends need.
const cgoEnabled = true
