//go:build unix && !linux

package backend

import "golang.org/x/sys/unix"

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
	return unix.Mprotect(p[:cap(p)], unix.PROT_NONE)
}
