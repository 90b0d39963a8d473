package backend

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
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
	_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(p)), uintptr(len(p)),
		unix.PROT_NONE, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_FIXED|unix.MAP_NORESERVE)
	if err != nil {
		return fmt.Errorf("host memory: retiring %d bytes: %v", len(p), err)
	}
	return nil
}
