//go:build unix

package backend

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// PageSize is the host's memory page size.
func PageSize() int { return os.Getpagesize() }

// AllocHostMemory returns n bytes (rounded up to whole pages) of
// page-aligned, zeroed memory outside the Go heap (an anonymous mmap), for
// pinned host buffers that devices import. Free it with FreeHostMemory.
func AllocHostMemory(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("host memory: negative size %d: %w", n, ErrInvalidArgument)
	}
	ps := PageSize()
	size := (n + ps - 1) / ps * ps
	if size == 0 {
		size = ps
	}
	p, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("host memory: mmap %d bytes: %v: %w", size, err, ErrOutOfMemory)
	}
	return p, nil
}

// FreeHostMemory releases memory from AllocHostMemory. No device may still
// use it.
func FreeHostMemory(p []byte) error {
	if p == nil {
		return nil
	}
	return unix.Munmap(p[:cap(p)])
}
