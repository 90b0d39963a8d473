//go:build !unix

package backend

import (
	"fmt"
	"os"
	"unsafe"
)

// PageSize is the host's memory page size.
func PageSize() int { return os.Getpagesize() }

// AllocHostMemory returns n bytes of page-aligned zeroed memory. Without
// mmap it comes from the Go heap, so devices must not import it (they
// return ErrUnsupported for it); collectives then stage it as any slice.
func AllocHostMemory(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("host memory: negative size %d: %w", n, ErrInvalidArgument)
	}
	ps := PageSize()
	raw := make([]byte, n+ps)
	off := (ps - int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))))%ps) % ps
	return raw[off : off+n : off+n], nil
}

// FreeHostMemory releases memory from AllocHostMemory.
func FreeHostMemory(p []byte) error { return nil }

// RetireReleases reports whether RetireHostMemory returns the pages to the
// system (else they stay until FreeHostMemory).
const RetireReleases = false

// RetireHostMemory ends the use of memory from AllocHostMemory; here it is
// Go memory, which stays valid while referenced.
func RetireHostMemory(p []byte) error { return nil }
