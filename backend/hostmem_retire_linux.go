package backend

import (
	"fmt"
	"syscall"
	"unsafe"
)

// RetireReleases reports whether RetireHostMemory returns the pages to the
// system (else they stay until FreeHostMemory).
const RetireReleases = true

// RetireHostMemory ends the use of memory from AllocHostMemory but keeps
// its addresses reserved, inaccessible, so that no other mapping reuses
// them while stale slices of it may still be passed around: the range is
// mapped anew with no access (its pages return to the system). Release
// the reservation with FreeHostMemory of the same slice.
func RetireHostMemory(p []byte) error {
	if cap(p) == 0 {
		return nil
	}
	p = p[:cap(p)]
	_, _, errno := syscall.Syscall6(syscall.SYS_MMAP, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)),
		syscall.PROT_NONE, syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_FIXED|syscall.MAP_NORESERVE, ^uintptr(0), 0)
	if errno != 0 {
		return fmt.Errorf("host memory: retiring %d bytes: %v", len(p), errno)
	}
	return nil
}
