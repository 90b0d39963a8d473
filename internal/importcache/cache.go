package importcache

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/gocoll/gocoll/backend"
)

// runtimePage is the Go heap's page size: large objects start and end on
// its multiples.
const runtimePage = 8192

// maxSmallObject is the Go heap's largest small object: an object larger
// than this is a large object, with pages of its own.
const maxSmallObject = 32 << 10

// maxCallImports bounds the slices one call adopts.
const maxCallImports = 4

// maxSightings bounds the objects seen once and not imported that the
// process remembers: as many as the default budget holds imports of the
// smallest imported size.
const maxSightings = DefaultBudget / MinBytes

// minHook, when set (tests), replaces MinBytes.
var minHook int

// firstSightHook, when set (tests), imports a slice the first time its
// object is seen.
var firstSightHook bool

// SetMinBytesForTest makes n the smallest slice imported (0: MinBytes) and
// returns the previous setting. Tests only; no call may run meanwhile.
func SetMinBytesForTest(n int) int {
	prev := minHook
	minHook = n
	return prev
}

// SetImportAtFirstSightForTest makes an object's first sighting import it
// and returns the previous setting. Tests only; no call may run meanwhile.
func SetImportAtFirstSightForTest(on bool) bool {
	prev := firstSightHook
	firstSightHook = on
	return prev
}

// DeviceImports reports whether dev imports the pages of Go heap objects:
// it is an Importer whose device imports host memory (hostImport), on
// system pages that divide the Go runtime's.
func DeviceImports(dev backend.Device, hostImport bool) bool {
	_, ok := dev.(backend.Importer)
	page := backend.PageSize()
	return ok && hostImport && page <= runtimePage && page&(page-1) == 0
}

// Entry is the import of one range of a Go heap object, shared by every
// rank (of any group) whose device imported it.
type Entry struct {
	base, end uintptr
	obj       weak.Pointer[byte] // the slice's first byte when it was imported
	death     *death             // set by the object's cleanup
	cl        runtime.Cleanup

	// Guarded by cache.mu.
	imports []rankImport // one per rank that imported it
	users   int          // calls using it now (their objects are alive)
	lastUse uint64       // cache.tick when a call last used it
	live    bool         // in cache.live: lookups find it
	leaked  bool         // an import of it was on a device declared lost
}

// Size is the bytes of the pages e imports.
func (e *Entry) Size() int64 { return int64(e.end - e.base) }

// importOf returns r's import of e, or nil. cache.mu held.
func (e *Entry) importOf(r *Rank) backend.Buffer {
	for _, imp := range e.imports {
		if imp.r == r {
			return imp.buf
		}
	}
	return nil
}

// importedBy reports whether a rank of g imported e. cache.mu held.
func (e *Entry) importedBy(g *Group) bool {
	for _, imp := range e.imports {
		if imp.r.g == g {
			return true
		}
	}
	return false
}

// rankImport is one rank's import of an entry.
type rankImport struct {
	r   *Rank
	buf backend.Buffer
}

// death is the cleanup's argument: it must not reach the object, so it is
// not the entry (which reaches the ranks and, through their callbacks,
// whatever holds the last call's slices).
type death struct{ dead atomic.Bool }

func markDead(d *death) {
	d.dead.Store(true)
	deaths.Add(1)
}

// deaths counts the imported objects that died; reaped is its value at the
// last reap.
var deaths, reaped atomic.Uint64

// sighting is an object a call saw and staged: the pages an import of the
// slice would have covered, inside the object, and the object, weakly.
type sighting struct {
	base, end uintptr
	obj       weak.Pointer[byte]
}

// cache is the process's imported Go slices.
var cache struct {
	mu          sync.RWMutex
	live        []*Entry   // sorted by base, disjoint
	seen        []sighting // oldest first, at most maxSightings
	dying       []*Entry   // out of live, imports not closed yet (flushCloses)
	liveBytes   int64      // live entries, and imports being made
	dyingBytes  int64
	leakedBytes int64
	tick        uint64
	leaked      []unsafe.Pointer // objects a lost device may still write
}

// closing serializes the closing of imports; batch is its scratch.
var closing struct {
	sync.Mutex
	batch []*Entry
}

// searchLocked returns the index of the first live entry that ends after
// a.
func searchLocked(a uintptr) int {
	es := cache.live
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
	e := cache.live[i]
	n := len(cache.live)
	copy(cache.live[i:], cache.live[i+1:])
	cache.live[n-1] = nil
	cache.live = cache.live[:n-1]
	e.live = false
	e.cl.Stop()
	cache.liveBytes -= e.Size()
	cache.dyingBytes += e.Size()
	cache.dying = append(cache.dying, e)
}

// unlinkEntryLocked unlinks live entry e.
func unlinkEntryLocked(e *Entry) {
	for i := searchLocked(e.base); i < len(cache.live) && cache.live[i].base <= e.base; i++ {
		if cache.live[i] == e {
			unlinkLocked(i)
			return
		}
	}
}

// findLocked returns the live entry that holds [a, z), its object verified
// alive; entries over [a, z) whose object died are unlinked on the way. An
// entry in use by a call is alive: the call holds its object.
func findLocked(a, z uintptr) *Entry {
	for i := searchLocked(a); i < len(cache.live) && cache.live[i].base < z; {
		e := cache.live[i]
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
	for _, s := range cache.seen {
		if s.base < hi && lo < s.end && s.obj.Value() != nil {
			return true
		}
	}
	return false
}

// sightLocked records a sighting of the object at p, whose pages [lo, hi)
// the slice's import would cover; when the record is full, the sightings
// of dead objects are dropped, then the oldest.
func sightLocked(lo, hi uintptr, p unsafe.Pointer) {
	if len(cache.seen) >= maxSightings {
		k := 0
		for _, s := range cache.seen {
			if s.obj.Value() != nil {
				cache.seen[k] = s
				k++
			}
		}
		clear(cache.seen[k:])
		cache.seen = cache.seen[:k]
		if k >= maxSightings {
			n := copy(cache.seen, cache.seen[k-maxSightings+1:])
			clear(cache.seen[n:])
			cache.seen = cache.seen[:n]
		}
	}
	cache.seen = append(cache.seen, sighting{base: lo, end: hi, obj: weak.Make((*byte)(p))})
}

// evictLocked unlinks the entry no call uses that is dead or least recently
// used, among those a rank of g imported when g is not nil; false if there
// is none.
func evictLocked(g *Group) bool {
	old := -1
	for i, e := range cache.live {
		if e.users > 0 || (g != nil && !e.importedBy(g)) {
			continue
		}
		if e.death.dead.Load() {
			old = i
			break
		}
		if old < 0 || e.lastUse < cache.live[old].lastUse {
			old = i
		}
	}
	if old < 0 {
		return false
	}
	unlinkLocked(old)
	return true
}

// unlock releases cache.mu and closes what was unlinked.
func unlock() {
	flush := len(cache.dying) > 0
	cache.mu.Unlock()
	if flush {
		flushCloses()
	}
}

// flushCloses closes the imports of the dying entries. Nothing uses them:
// they left live with no call using them, and imports are added to live
// entries only.
func flushCloses() {
	closing.Lock()
	defer closing.Unlock()
	cache.mu.Lock()
	closing.batch = append(closing.batch[:0], cache.dying...)
	clear(cache.dying)
	cache.dying = cache.dying[:0]
	cache.mu.Unlock()
	for _, e := range closing.batch {
		leaked := closeImports(e, e.imports)
		cache.mu.Lock()
		e.imports = nil
		cache.dyingBytes -= e.Size()
		if leaked || e.leaked {
			cache.leakedBytes += e.Size()
		}
		cache.mu.Unlock()
	}
	clear(closing.batch)
	closing.batch = closing.batch[:0]
}

// closeImports closes imports of e; an import on a device declared lost,
// or one that fails to close, is leaked instead (the device may still use
// the pages), and e's object, if alive, is kept alive for good.
func closeImports(e *Entry, imps []rankImport) (leaked bool) {
	for _, imp := range imps {
		if imp.r.lost() || imp.buf.Close() != nil {
			leaked = true
		}
	}
	if leaked {
		p := e.obj.Value()
		cache.mu.Lock()
		e.leaked = true
		if p != nil {
			cache.leaked = append(cache.leaked, unsafe.Pointer(p))
		}
		cache.mu.Unlock()
	}
	return leaked
}

// reap closes the imports of the objects that died.
func reap() {
	cache.mu.Lock()
	reaped.Store(deaths.Load())
	for i := 0; i < len(cache.live); {
		if e := cache.live[i]; e.users == 0 && e.death.dead.Load() {
			unlinkLocked(i)
			continue
		}
		i++
	}
	unlock()
}

// trim evicts unused entries until the live ones fit the budget.
func trim() {
	budget := Budget()
	cache.mu.Lock()
	for cache.liveBytes > budget && evictLocked(nil) {
	}
	unlock()
}

// Lookup returns the live entry that holds b, or nil.
func Lookup(b []byte) *Entry {
	cache.mu.RLock()
	defer cache.mu.RUnlock()
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if i := searchLocked(a); i < len(cache.live) {
		if e := cache.live[i]; e.base <= a && a+uintptr(len(b)) <= e.end {
			return e
		}
	}
	return nil
}

// ImportedBy reports whether r's device imported e.
func (e *Entry) ImportedBy(r *Rank) bool {
	cache.mu.RLock()
	defer cache.mu.RUnlock()
	return e.importOf(r) != nil
}

// ImportedByGroup reports whether a rank of g imported e.
func (e *Entry) ImportedByGroup(g *Group) bool {
	cache.mu.RLock()
	defer cache.mu.RUnlock()
	return e.importedBy(g)
}

// Closed reports whether e left the cache with every import closed.
func (e *Entry) Closed() bool {
	cache.mu.RLock()
	defer cache.mu.RUnlock()
	return !e.live && len(e.imports) == 0
}
