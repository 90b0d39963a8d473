// Package importcache keeps large plain Go slices imported by the devices
// across calls (a registration cache), so that a slice that comes back is
// read and written by DMA in place, never keeping a Go object alive.
//
// A large plain slice passed to a collective is imported by the rank's
// device (VK_EXT_external_memory_host) the second time its memory is seen
// and kept imported for later calls, so devices read and write it by DMA
// with no staging copy, as they do a HostBuffer: in an all-reduce both PCIe
// directions in one dispatch, at the hardware's duplex rate; in the other
// collectives the upload into the device buffer and the download of the
// result are DMA copies with no CPU copy. This is what MPI libraries call a
// registration cache. The design follows from what Go does and does not
// offer.
//
// What an import covers. No public Go API gives an object's base or size.
// Only Go heap memory is imported, never memory of unknown origin (C, mmap:
// it could be unmapped and the address reused while the import still holds
// the old pages), and only a slice whose capacity exceeds the largest small
// object (32 KiB): it lies in a large object, which owns whole 8 KiB runtime
// pages, so the import's range, the slice's first byte to the end of its
// capacity rounded out to system pages (at most 8 KiB), never covers memory
// of another object.
//
// What keeps the object alive. During a call, the call itself: Rank.Adopt
// keeps a reference to each slice it adopted until Rank.Release, and Go's
// collector does not move heap objects, so the import's pages are the
// object's pages while any device uses them (a runtime.Pinner would add
// nothing to that reference, and pinning per call can allocate). Between
// calls, nothing: an entry refers to its object through a weak pointer only
// (weak.Pointer), and the backends' buffers of imported memory hold its
// address as a number, not as a pointer. A slice the user drops is freed by
// the collector like any other; a cleanup (runtime.AddCleanup) then marks
// its entry dead, and the next operation of the cache in the process (an
// adoption at the start of any rank's call, Rank.Close, SetBudget) closes
// the entry's imports.
//
// When. A slice is imported when its memory comes back: the first call
// that sees it stages the slice (copies it through the rank's staging
// buffer) and records a sighting (the pages an import would cover and a
// weak pointer to the object); a later call, by any rank of any group,
// whose slice's pages overlap a sighting whose object is alive (so the same
// object) imports it. A driver that imports host memory pins its pages and
// maps them for the device, and unpins them when the import closes
// (17-27 ms per 256 MiB on an H200, more than copying it), so a slice used
// once, such as a gradient allocated anew every step, must not pay for an
// import it never reuses: it costs what the staging copy costs. Memory that
// comes back pays the import once and then runs zero-copy. Sightings are
// bounded (maxSightings, dead ones dropped first, then the oldest) and
// keep nothing alive.
//
// Never the wrong object. An entry is reused only after its weak pointer is
// found pointing at a live object (findLocked): that object's pages hold
// the new slice, and a large object's pages are its own, so it is the same
// object. An entry whose object died is never used again, even when a new
// object now occupies its addresses: that one gets a new entry.
//
// Budget. A driver that imported memory holds its pages until the import is
// closed, whether the Go object still lives or not; so every open import
// counts against one budget per process (SetBudget, the
// GOCOLL_IMPORT_CACHE environment variable, default 4 GiB), whichever group
// made it, once per entry however many ranks' devices imported it. A new
// import first closes the least recently used entries no call is using
// (dead ones first); when that does not make room, or the slice alone
// exceeds the budget, the slice is staged. Bytes reports the bytes open. A
// Group may carry a bound of its own: the entries its ranks imported stay
// within it, inside the process budget.
//
// Lost devices. An import on a device declared lost may still be written
// by it: it is never closed, and its object, when still alive, is kept
// alive for the life of the process (cache.leaked).
//
// Rank.Close closes a rank's imports; an entry that ranks of other groups
// also imported stays open for them.
package importcache
