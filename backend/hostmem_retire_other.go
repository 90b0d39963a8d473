//go:build unix && !linux

package backend

import "syscall"

// RetireReleases reports whether RetireHostMemory returns the pages to the
// system (else they stay until FreeHostMemory).
const RetireReleases = false

// RetireHostMemory ends the use of memory from AllocHostMemory but keeps
// its addresses reserved, inaccessible, so that no other mapping reuses
// them while stale slices of it may still be passed around (here the pages
// stay allocated until FreeHostMemory releases the reservation).
func RetireHostMemory(p []byte) error {
	if cap(p) == 0 {
		return nil
	}
	return syscall.Mprotect(p[:cap(p)], syscall.PROT_NONE)
}
