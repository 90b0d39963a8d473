package collective

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/memory"
)

// Plain Go slices imported in place: the import cache.
//
// A large plain slice passed to a collective is imported by the rank's
// device (VK_EXT_external_memory_host) the second time its memory is seen
// and kept imported for later calls, so devices read and write it by DMA
// with no staging copy, as they do a HostBuffer: in an all-reduce both PCIe
// directions in one dispatch, at the hardware's duplex rate; in the other
// collectives (adoptCall) the upload into the device buffer and the download
// of the result are DMA copies with no CPU copy. This is what MPI libraries
// call a registration cache. The cache never keeps a Go object alive; the
// design follows from what Go does and does not offer.
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
// What keeps the object alive. During a call, the call itself: adopt keeps
// a reference to each slice it adopted (callImport.keep) until the call
// drained (releaseAdopted), and Go's collector does not move heap objects,
// so the import's pages are the object's pages while any device uses them
// (a runtime.Pinner would add nothing to that reference, and pinning per
// call can allocate). Between calls, nothing: an entry refers to its object
// through a weak pointer only (weak.Pointer), and the backends' buffers of
// imported memory hold its address as a number, not as a pointer. A slice
// the user drops is freed by the collector like any other; a cleanup
// (runtime.AddCleanup) then marks its entry dead, and the next operation of
// the cache in the process (the adoption at the start of any rank's call,
// Group.Close, SetImportCacheBytes) closes the entry's imports.
//
// When. A slice is imported when its memory comes back: the first call
// that sees it stages the slice (copies it through the rank's staging
// buffer) and records a sighting (goSighting: the pages an import would
// cover and a weak pointer to the object); a later call, by any rank of
// any group, whose slice's pages overlap a sighting whose object is alive
// (so the same object) imports it. A driver
// that imports host memory pins its pages and maps them for the device,
// and unpins them when the import closes (17-27 ms per 256 MiB on an H200,
// more than copying it), so a slice used once, such as a gradient
// allocated anew every step, must not pay for an import it never reuses:
// it costs what the staging copy costs. Memory that comes back pays the
// import once and then runs zero-copy. Sightings are bounded
// (maxSightings, dead ones dropped first, then the oldest) and keep
// nothing alive.
//
// Never the wrong object. An entry is reused only after its weak pointer is
// found pointing at a live object (goFindLocked): that object's pages hold
// the new slice, and a large object's pages are its own, so it is the same
// object. An entry whose object died is never used again, even when a new
// object now occupies its addresses: that one gets a new entry.
//
// Budget. A driver that imported memory holds its pages until the import is
// closed, whether the Go object still lives or not; so every open import
// counts against one budget per process (SetImportCacheBytes, the
// GOCOLL_IMPORT_CACHE environment variable, default 4 GiB), whichever group
// or sub-group made it, once per entry however many ranks' devices imported
// it. A new import first closes the least recently used entries no call is
// using (dead ones first); when that does not make room, or the slice alone
// exceeds the budget, the slice is staged. ImportedBytes reports the bytes
// open. Options.ImportCacheBytes, a per-rank bound before, is deprecated:
// negative still turns importing off for the group, positive bounds the
// entries the group's ranks imported, within the process budget.
//
// Lost devices. An import on a device declared lost (ErrDeviceLost) may
// still be written by it: it is never closed, and its object, when still
// alive, is kept alive for the life of the process (goCache.leaked).
//
// Group.Close closes its ranks' imports (an entry that ranks of other
// groups also imported stays open for them) and drops the references to
// the last call's slices the group kept (dropCallRefs).

// goImportMin is the smallest slice imported: below it the staging copy is
// cheaper than pinning pages, and small objects share pages.
const goImportMin = 4 << 20

// goRuntimePage is the Go heap's page size: large objects start and end on
// its multiples.
const goRuntimePage = 8192

// goMaxSmallObject is the Go heap's largest small object: an object larger
// than this is a large object, with pages of its own.
const goMaxSmallObject = 32 << 10

// defaultImportCache is the process's import budget unless
// SetImportCacheBytes or GOCOLL_IMPORT_CACHE sets another.
const defaultImportCache = 4 << 30

// maxCallImports bounds the slices one call adopts.
const maxCallImports = 4

// maxSightings bounds the objects seen once and not imported that the
// process remembers: as many as the default budget holds imports of the
// smallest imported size.
const maxSightings = defaultImportCache / goImportMin

// goImportMinHook, when set (tests), replaces goImportMin.
var goImportMinHook int

// goImportFirstSightHook, when set (tests), imports a slice the first time
// its object is seen.
var goImportFirstSightHook bool

// SetImportCacheBytes sets the process's budget for imported plain Go
// slices, in bytes, and returns the previous budget. The budget bounds the
// pages that devices hold imported for plain slices, across every group and
// sub-group of the process, whether the slices are still in use or were
// dropped and their imports not closed yet (see ImportedBytes). 0 turns
// importing off (every plain slice is staged); a negative n restores the
// default: GOCOLL_IMPORT_CACHE if set (bytes, or with a K, M or G suffix
// for KiB, MiB, GiB; 0 or "off" turns importing off), else 4 GiB. Imports
// over a lowered budget that no call is using are closed before it
// returns, the others once their calls end.
func SetImportCacheBytes(n int64) int64 {
	goBudgetBytes() // the environment's value is read first
	if n < 0 {
		n = envImportCache()
	}
	prev := goBudget.n.Swap(n)
	trimGoImports()
	return prev
}

// ImportedBytes reports the bytes of plain Go slices imported by devices in
// this process: the imports kept for later calls, those of slices the
// collector freed that are not closed yet, and those of a device declared
// lost. It is at most the budget (SetImportCacheBytes) plus the last.
func ImportedBytes() int64 {
	goCache.mu.RLock()
	defer goCache.mu.RUnlock()
	return goCache.liveBytes + goCache.dyingBytes + goCache.leakedBytes
}

var goBudget struct {
	once sync.Once
	n    atomic.Int64
}

// goBudgetBytes returns the process's budget.
func goBudgetBytes() int64 {
	goBudget.once.Do(func() { goBudget.n.Store(envImportCache()) })
	return goBudget.n.Load()
}

// envImportCache is GOCOLL_IMPORT_CACHE's budget, or the default when it is
// unset or not a size.
func envImportCache() int64 {
	if n, ok := parseBytes(os.Getenv("GOCOLL_IMPORT_CACHE")); ok {
		return n
	}
	return defaultImportCache
}

// parseBytes parses a size: bytes, or a number with a K, M or G suffix
// (optionally KiB, MiB, GiB; binary units); "off" is 0.
func parseBytes(s string) (int64, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "off" {
		return 0, true
	}
	shift := 0
	for _, u := range []struct {
		suffix string
		shift  int
	}{{"kib", 10}, {"mib", 20}, {"gib", 30}, {"k", 10}, {"m", 20}, {"g", 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, shift = strings.TrimSuffix(s, u.suffix), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)>>shift {
		return 0, false
	}
	return n << shift, true
}

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
// its span (a span's pages are the span's alone). Built by hand: unsafe.Slice
// and pointer arithmetic under checkptr refuse a range past the object. The
// object is reachable (a call holds it) while the slice exists.
func pageSpan(p uintptr, n int) []byte {
	var b []byte
	h := (*struct {
		data     uintptr
		len, cap int
	})(unsafe.Pointer(&b))
	h.data, h.len, h.cap = p, n, n
	return b
}

// goEntry is the import of one range of a Go heap object, shared by every
// rank (of any group) whose device imported it.
type goEntry struct {
	base, end uintptr
	obj       weak.Pointer[byte] // the slice's first byte when it was imported
	death     *goDeath           // set by the object's cleanup
	cl        runtime.Cleanup

	// Guarded by goCache.mu.
	imports []goImport // one per comm that imported it
	users   int        // calls using it now (their objects are alive)
	lastUse uint64     // goCache.tick when a call last used it
	live    bool       // in goCache.live: lookups find it
	leaked  bool       // an import of it was on a device declared lost
}

func (e *goEntry) size() int64 { return int64(e.end - e.base) }

// importOf returns c's import of e, or nil. goCache.mu held.
func (e *goEntry) importOf(c *Comm) backend.Buffer {
	for _, imp := range e.imports {
		if imp.c == c {
			return imp.buf
		}
	}
	return nil
}

// importedBy reports whether a rank of g imported e. goCache.mu held.
func (e *goEntry) importedBy(g *Group) bool {
	for _, imp := range e.imports {
		if imp.c.g == g {
			return true
		}
	}
	return false
}

// goImport is one comm's import of an entry.
type goImport struct {
	c   *Comm
	buf backend.Buffer
}

// goDeath is the cleanup's argument: it must not reach the object, so it
// is not the entry (which reaches the comms, whose groups hold the last
// call's slices until the next call).
type goDeath struct{ dead atomic.Bool }

func markDead(d *goDeath) {
	d.dead.Store(true)
	goDeaths.Add(1)
}

// goDeaths counts the imported objects that died; goReaped is its value at
// the last reap.
var goDeaths, goReaped atomic.Uint64

// goSighting is an object a call saw and staged: the pages an import of
// the slice would have covered, inside the object, and the object, weakly.
type goSighting struct {
	base, end uintptr
	obj       weak.Pointer[byte]
}

// goCache is the process's imported Go slices.
var goCache struct {
	mu          sync.RWMutex
	live        []*goEntry   // sorted by base, disjoint
	seen        []goSighting // oldest first, at most maxSightings
	dying       []*goEntry   // out of live, imports not closed yet (flushGoCloses)
	liveBytes   int64        // live entries, and imports being made
	dyingBytes  int64
	leakedBytes int64
	tick        uint64
	leaked      []unsafe.Pointer // objects a lost device may still write
}

// goClose serializes the closing of imports; batch is its scratch.
var goClose struct {
	sync.Mutex
	batch []*goEntry
}

// goImportState is a comm's side of the cache; the comm's goroutine only.
type goImportState struct {
	off       bool  // importing is off: the group's option, or the host backend
	cap       int64 // the group's own bound (Options.ImportCacheBytes > 0), 0: none
	failAt    int   // the size of a slice whose import failed (larger ones are staged)
	notHeap   [8]uintptr
	notHeapAt int // recent slice addresses found outside the Go heap
	call      [maxCallImports]callImport
	n         int // adopted by the current call: call[:n]
	first     [maxCallImports]struct{ base, end uintptr }
	nfirst    int   // objects the current call saw first: first[:nfirst]
	reserved  int64 // bytes of the group's bound an import being made takes (goCache.mu)
}

// callImport is an entry the current call adopted.
type callImport struct {
	e    *goEntry
	buf  backend.Buffer
	keep unsafe.Pointer // the call's reference to the object
}

// importOptions maps Options.ImportCacheBytes onto a comm's state.
func importOptions(opts Options) (goImportState, error) {
	switch {
	case opts.ImportCacheBytes < 0:
		return goImportState{off: true}, nil
	case opts.ImportCacheBytes == 0:
		return goImportState{}, nil
	case opts.ImportCacheBytes < goImportMin:
		return goImportState{}, &ConfigError{Field: "ImportCacheBytes", Reason: fmt.Sprintf("must be 0 (default), negative (off) or >= %d, got %d", goImportMin, opts.ImportCacheBytes)}
	}
	return goImportState{cap: opts.ImportCacheBytes}, nil
}

// goSearchLocked returns the index of the first live entry that ends
// after a.
func goSearchLocked(a uintptr) int {
	es := goCache.live
	lo, hi := 0, len(es)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if es[m].end > a {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// unlinkLocked moves live entry i to the dying ones.
func unlinkLocked(i int) {
	e := goCache.live[i]
	n := len(goCache.live)
	copy(goCache.live[i:], goCache.live[i+1:])
	goCache.live[n-1] = nil
	goCache.live = goCache.live[:n-1]
	e.live = false
	e.cl.Stop()
	goCache.liveBytes -= e.size()
	goCache.dyingBytes += e.size()
	goCache.dying = append(goCache.dying, e)
}

// unlinkEntryLocked unlinks live entry e.
func unlinkEntryLocked(e *goEntry) {
	for i := goSearchLocked(e.base); i < len(goCache.live) && goCache.live[i].base <= e.base; i++ {
		if goCache.live[i] == e {
			unlinkLocked(i)
			return
		}
	}
}

// goFindLocked returns the live entry that holds [a, z), its object
// verified alive; entries over [a, z) whose object died are unlinked on the
// way. An entry in use by a call is alive: the call holds its object.
func goFindLocked(a, z uintptr) *goEntry {
	for i := goSearchLocked(a); i < len(goCache.live) && goCache.live[i].base < z; {
		e := goCache.live[i]
		if e.users == 0 && (e.death.dead.Load() || e.obj.Value() == nil) {
			unlinkLocked(i)
			continue
		}
		// Alive, and its pages overlap [a, z): the slice's own object.
		if e.base <= a && z <= e.end {
			return e
		}
		i++
	}
	return nil
}

// sightedLocked reports whether the pages [lo, hi) of a live object were
// seen before. A sighting whose pages overlap them and whose object is
// alive is of the same object (a live large object's pages are its own);
// one whose object died says nothing, even when a new object now occupies
// its addresses.
func sightedLocked(lo, hi uintptr) bool {
	for _, s := range goCache.seen {
		if s.base < hi && lo < s.end && s.obj.Value() != nil {
			return true
		}
	}
	return false
}

// sightLocked records a sighting of the object at p, whose pages
// [lo, hi) the slice's import would cover; when the record is full, the
// sightings of dead objects are dropped, then the oldest.
func sightLocked(lo, hi uintptr, p unsafe.Pointer) {
	if len(goCache.seen) >= maxSightings {
		k := 0
		for _, s := range goCache.seen {
			if s.obj.Value() != nil {
				goCache.seen[k] = s
				k++
			}
		}
		clear(goCache.seen[k:])
		goCache.seen = goCache.seen[:k]
		if k >= maxSightings {
			n := copy(goCache.seen, goCache.seen[k-maxSightings+1:])
			clear(goCache.seen[n:])
			goCache.seen = goCache.seen[:n]
		}
	}
	goCache.seen = append(goCache.seen, goSighting{base: lo, end: hi, obj: weak.Make((*byte)(p))})
}

// evictLocked unlinks the entry no call uses that is dead or least recently
// used, among those a rank of g imported when g is not nil; false if there
// is none.
func evictLocked(g *Group) bool {
	old := -1
	for i, e := range goCache.live {
		if e.users > 0 || (g != nil && !e.importedBy(g)) {
			continue
		}
		if e.death.dead.Load() {
			old = i
			break
		}
		if old < 0 || e.lastUse < goCache.live[old].lastUse {
			old = i
		}
	}
	if old < 0 {
		return false
	}
	unlinkLocked(old)
	return true
}

// groupBytesLocked is the bytes of the live entries ranks of g imported,
// and of the imports its ranks are making.
func groupBytesLocked(g *Group) int64 {
	var n int64
	for _, e := range goCache.live {
		if e.importedBy(g) {
			n += e.size()
		}
	}
	for _, c := range g.comms {
		n += c.goImp.reserved
	}
	return n
}

// makeRoomLocked evicts until size more bytes fit the process budget and,
// under the group's own bound, groupSize more bytes fit the group's
// entries; false if they cannot.
func (c *Comm) makeRoomLocked(size, groupSize int64) bool {
	budget := goBudgetBytes()
	if size > budget {
		return false
	}
	for goCache.liveBytes+size > budget {
		if !evictLocked(nil) {
			return false
		}
	}
	if bound := c.goImp.cap; bound > 0 && groupSize > 0 {
		if groupSize > bound {
			return false
		}
		for groupBytesLocked(c.g)+groupSize > bound {
			if !evictLocked(c.g) {
				return false
			}
		}
	}
	return true
}

// unlockGoCache releases goCache.mu and closes what was unlinked.
func unlockGoCache() {
	flush := len(goCache.dying) > 0
	goCache.mu.Unlock()
	if flush {
		flushGoCloses()
	}
}

// flushGoCloses closes the imports of the dying entries. Nothing uses them:
// they left live with no call using them, and imports are added to live
// entries only.
func flushGoCloses() {
	goClose.Lock()
	defer goClose.Unlock()
	goCache.mu.Lock()
	goClose.batch = append(goClose.batch[:0], goCache.dying...)
	clear(goCache.dying)
	goCache.dying = goCache.dying[:0]
	goCache.mu.Unlock()
	for _, e := range goClose.batch {
		leaked := closeGoImports(e, e.imports)
		goCache.mu.Lock()
		e.imports = nil
		goCache.dyingBytes -= e.size()
		if leaked || e.leaked {
			goCache.leakedBytes += e.size()
		}
		goCache.mu.Unlock()
	}
	clear(goClose.batch)
	goClose.batch = goClose.batch[:0]
}

// closeGoImports closes imports of e; an import on a device declared lost,
// or one that fails to close, is leaked instead (the device may still use
// the pages), and e's object, if alive, is kept alive for good.
func closeGoImports(e *goEntry, imps []goImport) (leaked bool) {
	for _, imp := range imps {
		if imp.c.isLost() || imp.buf.Close() != nil {
			leaked = true
		}
	}
	if leaked {
		p := e.obj.Value()
		goCache.mu.Lock()
		e.leaked = true
		if p != nil {
			goCache.leaked = append(goCache.leaked, unsafe.Pointer(p))
		}
		goCache.mu.Unlock()
	}
	return leaked
}

// reapGoImports closes the imports of the objects that died.
func reapGoImports() {
	goCache.mu.Lock()
	goReaped.Store(goDeaths.Load())
	for i := 0; i < len(goCache.live); {
		if e := goCache.live[i]; e.users == 0 && e.death.dead.Load() {
			unlinkLocked(i)
			continue
		}
		i++
	}
	unlockGoCache()
}

// trimGoImports evicts unused entries until the live ones fit the budget.
func trimGoImports() {
	budget := goBudgetBytes()
	goCache.mu.Lock()
	for goCache.liveBytes > budget && evictLocked(nil) {
	}
	unlockGoCache()
}

// adopt imports b for the current call when it is a large plain Go slice
// this rank's device can import and its object was seen before, or finds
// its import; false when b is staged. The call holds b until
// releaseAdopted.
func (c *Comm) adopt(b []byte) bool {
	st := &c.goImp
	min := goImportMin
	if goImportMinHook > 0 {
		min = goImportMinHook
	}
	// Only a slice whose capacity exceeds the largest small object lies in
	// a large object, which starts and ends on runtime pages: rounding a
	// small object's range out to pages would cover its neighbours, and the
	// import's slice would point into free slots the collector must not
	// see (a test hook may lower min below that).
	if len(b) < min || cap(b) <= goMaxSmallObject || st.off {
		return false
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	z := a + uintptr(len(b))
	for _, ci := range st.call[:st.n] {
		if ci.e.base <= a && z <= ci.e.end {
			return true // adopted already (send and recv in one object)
		}
	}
	if st.n == len(st.call) {
		return false
	}
	imp, ok := c.dev.(backend.Importer)
	page := backend.PageSize()
	if !ok || !c.info.HostImport || page > goRuntimePage || page&(page-1) != 0 {
		return false
	}
	if goDeaths.Load() != goReaped.Load() {
		reapGoImports()
	}
	keep := unsafe.Pointer(unsafe.SliceData(b))
	goCache.mu.Lock()
	e := goFindLocked(a, z)
	if e == nil {
		unlockGoCache()
		return c.importNew(b, imp, page)
	}
	buf := e.importOf(c)
	if buf == nil {
		// Another rank's entry (of another group: the ranks of one group
		// pass their own slices): import it on this rank's device too.
		if (st.failAt > 0 && len(b) >= st.failAt) || !c.makeRoomLocked(0, groupShare(c, e)) {
			unlockGoCache()
			return false
		}
	}
	e.users++
	goCache.tick++
	e.lastUse = goCache.tick
	if buf == nil {
		st.reserved = groupShare(c, e)
	}
	unlockGoCache()
	if buf == nil {
		var err error
		if buf, err = imp.Import(pageSpan(e.base, int(e.size()))); err != nil {
			st.failAt = len(b)
			c.logImportFailed(len(b), err)
			unuseGoEntry(c, e)
			return false
		}
		goCache.mu.Lock()
		e.imports = append(e.imports, goImport{c: c, buf: buf})
		st.reserved = 0
		goCache.mu.Unlock()
	}
	st.call[st.n] = callImport{e: e, buf: buf, keep: keep}
	st.n++
	return true
}

// groupShare is the bytes c's group adds to its own bound by importing e.
// goCache.mu held.
func groupShare(c *Comm, e *goEntry) int64 {
	if c.goImp.cap == 0 || e.importedBy(c.g) {
		return 0
	}
	return e.size()
}

// unuseGoEntry ends a use of e by c that failed before it began.
func unuseGoEntry(c *Comm, e *goEntry) {
	goCache.mu.Lock()
	c.goImp.reserved = 0
	e.users--
	if e.users == 0 && len(e.imports) == 0 && e.live {
		unlinkEntryLocked(e)
	}
	unlockGoCache()
}

// importNew makes a new entry for b, imported by this rank's device.
func (c *Comm) importNew(b []byte, imp backend.Importer, page int) bool {
	st := &c.goImp
	if st.failAt > 0 && len(b) >= st.failAt {
		return false
	}
	if lookupPinned(b) != nil {
		return false // a HostBuffer: its own path
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	a := uintptr(p)
	for _, x := range st.notHeap {
		if x == a {
			return false // seen before: not Go heap memory (probing allocates)
		}
	}
	if !goHeap(p) {
		st.notHeap[st.notHeapAt%len(st.notHeap)] = a
		st.notHeapAt++
		return false
	}
	// The object holds [a, a+cap) at least; a large object ends on a
	// runtime page, so rounding out to the system page stays inside it.
	lo := a &^ uintptr(page-1)
	hi := (a + uintptr(cap(b)) + uintptr(page-1)) &^ uintptr(page-1)
	size := int64(hi - lo)
	if size > goBudgetBytes() {
		return false
	}
	// The first sighting is staged (see When, above), and so are the
	// call's other slices over the same pages.
	for _, f := range st.first[:st.nfirst] {
		if f.base < hi && lo < f.end {
			return false
		}
	}
	goCache.mu.Lock()
	if !goImportFirstSightHook && !sightedLocked(lo, hi) {
		sightLocked(lo, hi, p)
		unlockGoCache()
		if st.nfirst < len(st.first) {
			st.first[st.nfirst].base, st.first[st.nfirst].end = lo, hi
			st.nfirst++
		}
		return false
	}
	// Entries over the range are of the same object (another slice of it,
	// or a dead one's addresses): they make way, unless a call uses one.
	for i := goSearchLocked(lo); i < len(goCache.live) && goCache.live[i].base < hi; i++ {
		if goCache.live[i].users > 0 {
			unlockGoCache()
			return false
		}
	}
	for i := goSearchLocked(lo); i < len(goCache.live) && goCache.live[i].base < hi; {
		unlinkLocked(i)
	}
	if !c.makeRoomLocked(size, size) {
		unlockGoCache()
		return false
	}
	goCache.liveBytes += size // reserved
	if st.cap > 0 {
		st.reserved = size
	}
	unlockGoCache()
	buf, err := imp.Import(pageSpan(lo, int(size)))
	if err != nil {
		goCache.mu.Lock()
		goCache.liveBytes -= size
		st.reserved = 0
		goCache.mu.Unlock()
		st.failAt = len(b)
		c.logImportFailed(len(b), err)
		return false
	}
	e := &goEntry{base: lo, end: hi, obj: weak.Make((*byte)(p)), death: new(goDeath), users: 1,
		imports: []goImport{{c: c, buf: buf}}}
	e.cl = runtime.AddCleanup((*byte)(p), markDead, e.death)
	goCache.mu.Lock()
	st.reserved = 0
	i := goSearchLocked(lo)
	if i < len(goCache.live) && goCache.live[i].base < hi {
		// Another rank made an entry over the range meanwhile (the same
		// memory in another group): b is staged this time, and the next
		// call uses that entry.
		goCache.liveBytes -= size
		goCache.mu.Unlock()
		e.cl.Stop()
		closeGoImports(e, e.imports)
		return false
	}
	goCache.live = append(goCache.live, nil)
	copy(goCache.live[i+1:], goCache.live[i:])
	goCache.live[i] = e
	e.live = true
	goCache.tick++
	e.lastUse = goCache.tick
	goCache.mu.Unlock()
	st.call[st.n] = callImport{e: e, buf: buf, keep: p}
	st.n++
	return true
}

func (c *Comm) logImportFailed(n int, err error) {
	if c.g.logCalls {
		c.g.log.Debug("gocoll: plain slice staged: import failed", "rank", c.rank, "bytes", n, "err", err)
	}
}

// goRegion returns b as a region of an import the current call adopted.
func (c *Comm) goRegion(b []byte) (backend.Region, bool) {
	st := &c.goImp
	if st.n == 0 || len(b) == 0 {
		return backend.Region{}, false
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	z := a + uintptr(len(b))
	for _, ci := range st.call[:st.n] {
		if ci.e.base <= a && z <= ci.e.end {
			return backend.Region{Buf: ci.buf, Off: int(a - ci.e.base), Len: len(b)}, true
		}
	}
	return backend.Region{}, false
}

// goImportRegion returns b as a region of this rank's import of an entry
// that a call uses now (a peer's slice in the direct algorithms, which read
// every rank's memory inside a call they all take part in), importing it
// on this rank's device first if needed; ok is false when no such entry
// holds b.
func (c *Comm) goImportRegion(b []byte) (backend.Region, bool, error) {
	if r, ok := c.goRegion(b); ok {
		return r, true, nil
	}
	if len(b) == 0 {
		return backend.Region{}, false, nil
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	z := a + uintptr(len(b))
	var e *goEntry
	var buf backend.Buffer
	goCache.mu.RLock()
	if i := goSearchLocked(a); i < len(goCache.live) {
		if x := goCache.live[i]; x.base <= a && z <= x.end && x.users > 0 {
			e, buf = x, x.importOf(c)
		}
	}
	goCache.mu.RUnlock()
	if e == nil {
		return backend.Region{}, false, nil
	}
	if buf == nil {
		// The call that uses e keeps it live and its object alive until
		// every rank of the call is done with it.
		imp, ok := c.dev.(backend.Importer)
		if !ok {
			return backend.Region{}, false, nil
		}
		var err error
		if buf, err = imp.Import(pageSpan(e.base, int(e.size()))); err != nil {
			return backend.Region{}, false, err
		}
		goCache.mu.Lock()
		e.imports = append(e.imports, goImport{c: c, buf: buf})
		goCache.mu.Unlock()
	}
	return backend.Region{Buf: buf, Off: int(a - e.base), Len: len(b)}, true, nil
}

// adoptCall adopts the large plain slices of a collective other than
// all-reduce (whose upload and download then run as DMA copies from and to
// the imported memory, as for HostBuffers); nothing for a group of one.
func (c *Comm) adoptCall(send, recv []byte) {
	if c.g.n > 1 {
		c.adoptPair(send, recv)
	}
}

// adoptPair adopts a call's send and recv slices until releaseAdopted; ok
// reports whether both are imported. When one holds the other (the
// in-place layouts) it is adopted first, so that its import serves both.
func (c *Comm) adoptPair(send, recv []byte) (ok bool) {
	if memory.Holds(recv, send) {
		send, recv = recv, send
	}
	a := c.adopt(send)
	b := c.adopt(recv)
	return a && b
}

// releaseAdopted ends the current call's use of the slices it adopted, and
// of the slices it published to its peers (every peer is done with them:
// the call's last rendezvous, or waitAccess on failure).
func (c *Comm) releaseAdopted() {
	g := c.g
	if c.rank < len(g.sendOf) {
		g.sendOf[c.rank] = nil
	}
	if c.rank < len(g.recvOf) {
		g.recvOf[c.rank] = nil
	}
	st := &c.goImp
	st.nfirst = 0
	if st.n == 0 {
		return
	}
	goCache.mu.Lock()
	goCache.tick++
	for _, ci := range st.call[:st.n] {
		ci.e.users--
		ci.e.lastUse = goCache.tick
	}
	goCache.mu.Unlock()
	if g.isBroken.Load() {
		c.keepIfLost()
	}
	clear(st.call[:st.n])
	st.n = 0
}

// keepIfLost keeps the objects of the call's entries alive for good when a
// device that imported them was declared lost: its work may still write
// them.
func (c *Comm) keepIfLost() {
	st := &c.goImp
	for _, ci := range st.call[:st.n] {
		goCache.mu.Lock()
		lost := false
		for _, imp := range ci.e.imports {
			lost = lost || imp.c.isLost()
		}
		if lost && !ci.e.leaked {
			ci.e.leaked = true
			goCache.leaked = append(goCache.leaked, ci.keep)
		}
		goCache.mu.Unlock()
	}
}

// releaseGoImports closes the rank's imports (Group.Close, with every rank
// of the group held); an entry other groups' ranks imported too stays
// open for them.
func (c *Comm) releaseGoImports() {
	st := &c.goImp
	clear(st.call[:])
	st.n, st.nfirst = 0, 0
	goClose.Lock()
	var mine []goImport
	var of []*goEntry
	goCache.mu.Lock()
	take := func(e *goEntry) {
		k := 0
		for _, imp := range e.imports {
			if imp.c == c {
				mine, of = append(mine, imp), append(of, e)
				continue
			}
			e.imports[k] = imp
			k++
		}
		clear(e.imports[k:])
		e.imports = e.imports[:k]
	}
	for _, e := range goCache.dying {
		take(e)
	}
	for i := 0; i < len(goCache.live); {
		e := goCache.live[i]
		take(e)
		if len(e.imports) == 0 && e.users == 0 {
			unlinkLocked(i)
			continue
		}
		i++
	}
	goCache.mu.Unlock()
	for i := range mine {
		closeGoImports(of[i], mine[i:i+1])
	}
	goClose.Unlock()
	flushGoCloses()
}

// dropCallRefs drops the references to the last calls' memory the group
// keeps for its ranks (Group.Close).
func (g *Group) dropCallRefs() {
	clear(g.sendOf)
	clear(g.recvOf)
	clear(g.tensorOf)
	clear(g.tRecvOf)
}
