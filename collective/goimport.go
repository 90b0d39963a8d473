package collective

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// Plain Go slices imported in place.
//
// A large plain slice passed to a collective is imported by the rank's
// device (VK_EXT_external_memory_host) the first time it is seen and kept
// imported for later calls, so devices read and write it by DMA with no
// staging copy, as they do a HostBuffer: in an all-reduce both PCIe
// directions in one dispatch, at the hardware's duplex rate; in the other
// collectives (adoptCall) the upload into the device buffer and the download
// of the result are DMA copies with no CPU copy. This is what MPI libraries
// call a registration cache.
//
// Importing pins the pages in the kernel; the import must never outlive the
// pages' meaning. So only Go heap memory is imported, never
// memory of unknown origin (C, mmap: it could be unmapped and the address
// reused while the import still holds the old pages), and the object is
// pinned with a runtime.Pinner while it is imported, so the collector cannot
// free it and the allocator cannot reuse or release its pages. A large Go
// object (over 32 KiB) owns whole 8 KiB runtime pages, so the import's range,
// the slice rounded out to the system page size (at most 8 KiB), never
// covers memory of another object. The cost is retention: an imported slice
// stays alive until it is evicted (least recently used first, past
// Options.ImportCacheBytes per rank) or the group closes.

// goImportMin is the smallest slice imported: below it the staging copy is
// cheaper than pinning pages, and small objects share pages.
const goImportMin = 4 << 20

// goRuntimePage is the Go heap's page size: large objects start and end on
// its multiples.
const goRuntimePage = 8192

// goMaxSmallObject is the Go heap's largest small object: an object larger
// than this is a large object, with pages of its own.
const goMaxSmallObject = 32 << 10

// defaultImportCache is Options.ImportCacheBytes' default.
const defaultImportCache = 4 << 30

// goImportMinHook, when set (tests), replaces goImportMin.
var goImportMinHook int

// goHeap reports whether p points into a Go heap object: memory the Go
// runtime owns, never unmapped while the object is reachable. AddCleanup
// panics for memory outside the Go heap, and gives a no-op Cleanup for Go
// globals (left out: their rounding could leave the section).
func goHeap(p unsafe.Pointer) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	cl := runtime.AddCleanup((*byte)(p), noCleanup, 0)
	if cl == (runtime.Cleanup{}) {
		return false
	}
	cl.Stop()
	return true
}

func noCleanup(int) {}

// pageSpan is the n bytes at address p as a slice: the pages of a Go
// object, which may run past the object's last byte into the unused tail of
// its span and, for a small object, cover its neighbours (a span's pages are
// the span's alone). Built by hand: unsafe.Slice and pointer arithmetic
// under checkptr refuse a range past the object. The object is pinned while
// the slice exists, so the address stays valid.
func pageSpan(p uintptr, n int) []byte {
	var b []byte
	h := (*struct {
		data     uintptr
		len, cap int
	})(unsafe.Pointer(&b))
	h.data, h.len, h.cap = p, n, n
	return b
}

// leakedImports keeps the entries whose import a lost device may still use:
// their objects stay pinned (and alive) for the life of the process.
var leakedImports struct {
	sync.Mutex
	e []*pinnedEntry
}

// holding is a rank's use of an imported Go slice: the entry is shared by
// every rank (of any group) that passed the same memory, and lives while
// one of them holds it.
type holding struct {
	e       *pinnedEntry
	lastUse uint64 // the rank's importTick at the last call that used it
	inCall  bool   // used by the rank's current call
}

// adopt returns the rank's holding of b's import, importing b first when
// it is a large plain Go slice this rank's device can import: -1 when b is
// staged. A rank uses and evicts only its own holdings; other ranks use an
// entry it holds only inside a call it takes part in.
func (c *Comm) adopt(b []byte) int {
	min := goImportMin
	if goImportMinHook > 0 {
		min = goImportMinHook
	}
	// Only a slice whose capacity exceeds the largest small object lies in
	// a large object, which starts and ends on runtime pages: rounding a
	// small object's range out to pages would cover its neighbours, and the
	// import's slice would point into free slots the collector must not
	// see (a test hook may lower min below that).
	if len(b) < min || cap(b) <= goMaxSmallObject || c.importCap <= 0 {
		return -1
	}
	if i := c.holds(b); i >= 0 {
		c.importTick++
		c.goImports[i].lastUse = c.importTick
		return i
	}
	if c.importFailAt > 0 && len(b) >= c.importFailAt {
		return -1
	}
	imp, ok := c.dev.(backend.Importer)
	page := backend.PageSize()
	if !ok || !c.info.HostImport || page > goRuntimePage || page&(page-1) != 0 {
		return -1
	}
	// Another rank's entry that holds b: hold it too.
	pinned.mu.Lock()
	e := pinned.lookupLocked(b)
	if e != nil && e.goSlice {
		e.holders++
	}
	pinned.mu.Unlock()
	if e != nil {
		if !e.goSlice {
			return -1 // a HostBuffer: its own path
		}
		if _, ok, _ := c.importRegion(b); !ok {
			c.unhold(e)
			return -1
		}
		return c.addHolding(e)
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, a := range c.notHeap {
		if a == start {
			return -1 // seen before: not Go heap memory (probing allocates)
		}
	}
	if !goHeap(unsafe.Pointer(unsafe.SliceData(b))) {
		c.notHeap[c.notHeapAt%len(c.notHeap)] = start
		c.notHeapAt++
		return -1
	}
	// The object holds [start, start+cap) at least; a large object ends on
	// a runtime page, so rounding out to the system page stays inside it.
	lo := start &^ uintptr(page-1)
	hi := (start + uintptr(cap(b)) + uintptr(page-1)) &^ uintptr(page-1)
	size := int64(hi - lo)
	if size > c.importCap {
		return -1
	}
	// The rank's entries that overlap (another slice of the same object)
	// make way; when one of them is in use by this call, b is staged.
	for _, h := range c.goImports {
		if h.e.base < hi && lo < h.e.end && h.inCall {
			return -1
		}
	}
	for i := 0; i < len(c.goImports); {
		if h := c.goImports[i]; h.e.base < hi && lo < h.e.end {
			c.dropImport(i)
			continue
		}
		i++
	}
	if !c.makeRoom(size) {
		return -1
	}
	mem := pageSpan(lo, int(size))
	e = &pinnedEntry{mem: mem, base: lo, end: hi, goSlice: true, holders: 1}
	e.pin.Pin(unsafe.Pointer(unsafe.SliceData(b)))
	buf, err := imp.Import(mem)
	if err != nil {
		e.pin.Unpin()
		c.importFailAt = len(b)
		if c.g.logCalls {
			c.g.log.Debug("gocoll: plain slice staged: import failed", "rank", c.rank, "bytes", len(b), "err", err)
		}
		return -1
	}
	e.imports = append(e.imports, pinnedImport{c: c, buf: buf})
	// Publish it, unless another rank published an overlapping entry
	// meanwhile (the same memory in another group): then b is staged this
	// time, and the next call holds that entry.
	pinned.mu.Lock()
	clash := pinned.overlapsLocked(lo, hi)
	if !clash {
		pinned.addLocked(e)
	}
	pinned.mu.Unlock()
	if clash {
		buf.Close()
		e.pin.Unpin()
		return -1
	}
	c.importMu.Lock()
	c.imported = append(c.imported, importedMem{e: e, buf: buf})
	c.importMu.Unlock()
	return c.addHolding(e)
}

// holds returns the index of the rank's holding that contains b, or -1.
func (c *Comm) holds(b []byte) int {
	if len(c.goImports) == 0 || len(b) == 0 {
		return -1
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for i, h := range c.goImports {
		if h.e.base <= a && a+uintptr(len(b)) <= h.e.end {
			return i
		}
	}
	return -1
}

// addHolding records a new holding of e (already counted in e.holders),
// making room for it first.
func (c *Comm) addHolding(e *pinnedEntry) int {
	size := int64(e.end - e.base)
	if !c.makeRoom(size) {
		c.unhold(e)
		return -1
	}
	c.importTick++
	c.goImports = append(c.goImports, holding{e: e, lastUse: c.importTick})
	c.importBytes += size
	return len(c.goImports) - 1
}

// makeRoom evicts the rank's least recently used holdings not in use by
// the current call until size more bytes fit; false if they cannot.
func (c *Comm) makeRoom(size int64) bool {
	for c.importBytes+size > c.importCap {
		old := -1
		for i, h := range c.goImports {
			if !h.inCall && (old < 0 || h.lastUse < c.goImports[old].lastUse) {
				old = i
			}
		}
		if old < 0 {
			return false
		}
		c.dropImport(old)
	}
	return true
}

// dropImport ends the rank's i-th holding.
func (c *Comm) dropImport(i int) {
	e := c.goImports[i].e
	c.goImports = append(c.goImports[:i], c.goImports[i+1:]...)
	c.importBytes -= int64(e.end - e.base)
	c.unhold(e)
}

// unhold ends one holding of e by c: the last holder removes the entry
// from the pinned set and releases it; otherwise only c's own import of it
// is closed.
func (c *Comm) unhold(e *pinnedEntry) {
	pinned.mu.Lock()
	e.holders--
	dead := e.holders == 0
	if dead {
		pinned.removeLocked(e)
	}
	pinned.mu.Unlock()
	if dead {
		releaseEntry(e)
		return
	}
	e.mu.Lock()
	var buf backend.Buffer
	for i, imp := range e.imports {
		if imp.c == c {
			buf = imp.buf
			e.imports = append(e.imports[:i], e.imports[i+1:]...)
			break
		}
	}
	e.mu.Unlock()
	if buf == nil {
		return
	}
	c.forget(e)
	if c.isLost() || buf.Close() != nil {
		leakedImports.Lock()
		leakedImports.e = append(leakedImports.e, e) // never unpinned
		leakedImports.Unlock()
		e.mu.Lock()
		e.leaked = true
		e.mu.Unlock()
	}
}

// releaseEntry closes every import of an imported slice that left the
// pinned set, then unpins it, unless a device that imported it was declared
// lost or could not drain (then it stays pinned for good).
func releaseEntry(e *pinnedEntry) {
	if leak, err := e.closeImports(); leak || err != nil {
		leakedImports.Lock()
		leakedImports.e = append(leakedImports.e, e)
		leakedImports.Unlock()
		return
	}
	e.pin.Unpin()
}

// releaseGoImports ends the rank's holdings (Group.Close, after every
// rank's releaseImports).
func (c *Comm) releaseGoImports() {
	for len(c.goImports) > 0 {
		c.dropImport(len(c.goImports) - 1)
	}
	c.importBytes = 0
}

// adoptCall adopts the large plain slices of a collective other than
// all-reduce (whose upload and download then run as DMA copies from and to
// the imported memory, as for HostBuffers); nothing for a group of one.
func (c *Comm) adoptCall(send, recv []byte) {
	if c.g.n > 1 {
		c.adoptPair(send, recv)
	}
}

// adoptPair adopts a call's send and recv slices and marks them in use
// until releaseAdopted; ok reports whether both are imported.
func (c *Comm) adoptPair(send, recv []byte) (ok bool) {
	a := c.adopt(send)
	if a >= 0 {
		c.goImports[a].inCall = true
	}
	b := c.adopt(recv)
	if b >= 0 {
		c.goImports[b].inCall = true
	}
	return a >= 0 && b >= 0
}

// releaseAdopted ends the current call's use of the rank's holdings.
func (c *Comm) releaseAdopted() {
	for i := range c.goImports {
		c.goImports[i].inCall = false
	}
}

func importCapOf(opts Options) (int64, error) {
	switch {
	case opts.ImportCacheBytes < 0:
		return 0, nil
	case opts.ImportCacheBytes == 0:
		return defaultImportCache, nil
	case opts.ImportCacheBytes < goImportMin:
		return 0, &ConfigError{Field: "ImportCacheBytes", Reason: fmt.Sprintf("must be 0 (default), negative (off) or >= %d, got %d", goImportMin, opts.ImportCacheBytes)}
	}
	return opts.ImportCacheBytes, nil
}
