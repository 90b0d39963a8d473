package importcache

import (
	"runtime"
	"unsafe"
	"weak"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/memory"
)

// Group is the ranks of one collective group: the unit of a bound of its
// own on the entries its ranks imported.
type Group struct {
	bound int64   // > 0: the bytes of entries its ranks may import
	ranks []*Rank // read under cache.mu (reserved)
}

// NewGroup returns a group whose ranks' entries stay within bound bytes
// (0: the process budget only).
func NewGroup(bound int64) *Group { return &Group{bound: bound} }

// Device is what a rank imports with and reports to.
type Device struct {
	Dev        backend.Device
	HostImport bool                // the device imports host memory
	Off        bool                // importing is off for the rank: every slice is staged
	Lost       func() bool         // the device was declared lost: its imports are never closed
	Pinned     func(b []byte) bool // b lies in memory imported by other means (never imported here)
	Failed     func(n int, err error)
}

// Rank is one rank's side of the cache: the entries its current call
// adopted. A rank's methods run on its own goroutine, one call at a time;
// the cache they share is the process's.
type Rank struct {
	g      *Group
	imp    backend.Importer // nil: the device imports nothing
	own    bool             // the device imports this rank's own slices (DeviceImports, not Off)
	lost   func() bool
	pinned func([]byte) bool
	failed func(int, error)

	failAt    int // the size of a slice whose import failed (larger ones are staged)
	notHeap   [8]uintptr
	notHeapAt int // recent slice addresses found outside the Go heap
	call      [maxCallImports]callImport
	n         int // adopted by the current call: call[:n]
	first     [maxCallImports]struct{ base, end uintptr }
	nfirst    int   // objects the current call saw first: first[:nfirst]
	reserved  int64 // bytes of the group's bound an import being made takes (cache.mu)
}

// callImport is an entry the current call adopted.
type callImport struct {
	e    *Entry
	buf  backend.Buffer
	keep unsafe.Pointer // the call's reference to the object
}

// NewRank adds a rank importing with d to g.
func (g *Group) NewRank(d Device) *Rank {
	r := &Rank{g: g, own: !d.Off && DeviceImports(d.Dev, d.HostImport), lost: d.Lost, pinned: d.Pinned, failed: d.Failed}
	r.imp, _ = d.Dev.(backend.Importer)
	if r.lost == nil {
		r.lost = func() bool { return false }
	}
	g.ranks = append(g.ranks, r)
	return r
}

// Group returns r's group.
func (r *Rank) Group() *Group { return r.g }

// Imported returns the bytes of the live entries r imported, and how many.
func (r *Rank) Imported() (bytes int64, n int) {
	cache.mu.RLock()
	defer cache.mu.RUnlock()
	for _, e := range cache.live {
		if e.importOf(r) != nil {
			bytes += e.Size()
			n++
		}
	}
	return bytes, n
}

// Entries returns the live entries ranks of g imported.
func (g *Group) Entries() []*Entry {
	cache.mu.RLock()
	defer cache.mu.RUnlock()
	var es []*Entry
	for _, e := range cache.live {
		if e.importedBy(g) {
			es = append(es, e)
		}
	}
	return es
}

// bytesLocked is the bytes of the live entries ranks of g imported, and of
// the imports its ranks are making.
func (g *Group) bytesLocked() int64 {
	var n int64
	for _, e := range cache.live {
		if e.importedBy(g) {
			n += e.Size()
		}
	}
	for _, r := range g.ranks {
		n += r.reserved
	}
	return n
}

// makeRoomLocked evicts until size more bytes fit the process budget and,
// under the group's own bound, groupSize more bytes fit the group's
// entries; false if they cannot.
func (r *Rank) makeRoomLocked(size, groupSize int64) bool {
	budget := Budget()
	if size > budget {
		return false
	}
	for cache.liveBytes+size > budget {
		if !evictLocked(nil) {
			return false
		}
	}
	if bound := r.g.bound; bound > 0 && groupSize > 0 {
		if groupSize > bound {
			return false
		}
		for r.g.bytesLocked()+groupSize > bound {
			if !evictLocked(r.g) {
				return false
			}
		}
	}
	return true
}

// groupShare is the bytes r's group adds to its own bound by importing e.
// cache.mu held.
func (r *Rank) groupShare(e *Entry) int64 {
	if r.g.bound == 0 || e.importedBy(r.g) {
		return 0
	}
	return e.Size()
}

// AdoptPair adopts a call's send and recv slices until Release; ok reports
// whether both are imported. When one holds the other (the in-place
// layouts) it is adopted first, so that its import serves both.
func (r *Rank) AdoptPair(send, recv []byte) (ok bool) {
	if memory.Holds(recv, send) {
		send, recv = recv, send
	}
	a := r.Adopt(send)
	b := r.Adopt(recv)
	return a && b
}

// Adopt imports b for the current call when it is a large plain Go slice
// this rank's device can import and its object was seen before, or finds
// its import; false when b is staged. The call holds b until Release.
func (r *Rank) Adopt(b []byte) bool {
	min := MinBytes
	if minHook > 0 {
		min = minHook
	}
	// Only a slice whose capacity exceeds the largest small object lies in
	// a large object, which starts and ends on runtime pages: rounding a
	// small object's range out to pages would cover its neighbours, and the
	// import's slice would point into free slots the collector must not
	// see (a test hook may lower min below that).
	if len(b) < min || cap(b) <= maxSmallObject || !r.own {
		return false
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	z := a + uintptr(len(b))
	for _, ci := range r.call[:r.n] {
		if ci.e.base <= a && z <= ci.e.end {
			return true // adopted already (send and recv in one object)
		}
	}
	if r.n == len(r.call) {
		return false
	}
	if deaths.Load() != reaped.Load() {
		reap()
	}
	keep := unsafe.Pointer(unsafe.SliceData(b))
	cache.mu.Lock()
	e := findLocked(a, z)
	if e == nil {
		unlock()
		return r.importNew(b)
	}
	buf := e.importOf(r)
	if buf == nil {
		// Another rank's entry (of another group: the ranks of one group
		// pass their own slices): import it on this rank's device too.
		if (r.failAt > 0 && len(b) >= r.failAt) || !r.makeRoomLocked(0, r.groupShare(e)) {
			unlock()
			return false
		}
	}
	e.users++
	cache.tick++
	e.lastUse = cache.tick
	if buf == nil {
		r.reserved = r.groupShare(e)
	}
	unlock()
	if buf == nil {
		var err error
		if buf, err = r.imp.Import(pageSpan(e.base, int(e.Size()))); err != nil {
			r.failAt = len(b)
			r.fail(len(b), err)
			r.unuse(e)
			return false
		}
		cache.mu.Lock()
		e.imports = append(e.imports, rankImport{r: r, buf: buf})
		r.reserved = 0
		cache.mu.Unlock()
	}
	r.call[r.n] = callImport{e: e, buf: buf, keep: keep}
	r.n++
	return true
}

func (r *Rank) fail(n int, err error) {
	if r.failed != nil {
		r.failed(n, err)
	}
}

// unuse ends a use of e by r that failed before it began.
func (r *Rank) unuse(e *Entry) {
	cache.mu.Lock()
	r.reserved = 0
	e.users--
	if e.users == 0 && len(e.imports) == 0 && e.live {
		unlinkEntryLocked(e)
	}
	unlock()
}

// importNew makes a new entry for b, imported by this rank's device.
func (r *Rank) importNew(b []byte) bool {
	if r.failAt > 0 && len(b) >= r.failAt {
		return false
	}
	if r.pinned != nil && r.pinned(b) {
		return false // imported by other means
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	a := uintptr(p)
	for _, x := range r.notHeap {
		if x == a {
			return false // seen before: not Go heap memory (probing allocates)
		}
	}
	if !InGoHeap(p) {
		r.notHeap[r.notHeapAt%len(r.notHeap)] = a
		r.notHeapAt++
		return false
	}
	// The object holds [a, a+cap) at least; a large object ends on a
	// runtime page, so rounding out to the system page stays inside it.
	page := uintptr(backend.PageSize())
	lo := a &^ (page - 1)
	hi := (a + uintptr(cap(b)) + page - 1) &^ (page - 1)
	size := int64(hi - lo)
	if size > Budget() {
		return false
	}
	// The first sighting is staged (see When, in the package doc), and so
	// are the call's other slices over the same pages.
	for _, f := range r.first[:r.nfirst] {
		if f.base < hi && lo < f.end {
			return false
		}
	}
	cache.mu.Lock()
	if !firstSightHook && !sightedLocked(lo, hi) {
		sightLocked(lo, hi, p)
		unlock()
		if r.nfirst < len(r.first) {
			r.first[r.nfirst].base, r.first[r.nfirst].end = lo, hi
			r.nfirst++
		}
		return false
	}
	// Entries over the range are of the same object (another slice of it,
	// or a dead one's addresses): they make way, unless a call uses one.
	for i := searchLocked(lo); i < len(cache.live) && cache.live[i].base < hi; i++ {
		if cache.live[i].users > 0 {
			unlock()
			return false
		}
	}
	for i := searchLocked(lo); i < len(cache.live) && cache.live[i].base < hi; {
		unlinkLocked(i)
	}
	if !r.makeRoomLocked(size, size) {
		unlock()
		return false
	}
	cache.liveBytes += size // reserved
	if r.g.bound > 0 {
		r.reserved = size
	}
	unlock()
	buf, err := r.imp.Import(pageSpan(lo, int(size)))
	if err != nil {
		cache.mu.Lock()
		cache.liveBytes -= size
		r.reserved = 0
		cache.mu.Unlock()
		r.failAt = len(b)
		r.fail(len(b), err)
		return false
	}
	e := &Entry{base: lo, end: hi, obj: weak.Make((*byte)(p)), death: new(death), users: 1,
		imports: []rankImport{{r: r, buf: buf}}}
	e.cl = runtime.AddCleanup((*byte)(p), markDead, e.death)
	cache.mu.Lock()
	r.reserved = 0
	i := searchLocked(lo)
	if i < len(cache.live) && cache.live[i].base < hi {
		// Another rank made an entry over the range meanwhile (the same
		// memory in another group): b is staged this time, and the next
		// call uses that entry.
		cache.liveBytes -= size
		cache.mu.Unlock()
		e.cl.Stop()
		closeImports(e, e.imports)
		return false
	}
	cache.live = append(cache.live, nil)
	copy(cache.live[i+1:], cache.live[i:])
	cache.live[i] = e
	e.live = true
	cache.tick++
	e.lastUse = cache.tick
	cache.mu.Unlock()
	r.call[r.n] = callImport{e: e, buf: buf, keep: p}
	r.n++
	return true
}

// Region returns b as a region of an import the current call adopted.
func (r *Rank) Region(b []byte) (backend.Region, bool) {
	if r.n == 0 || len(b) == 0 {
		return backend.Region{}, false
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	z := a + uintptr(len(b))
	for _, ci := range r.call[:r.n] {
		if ci.e.base <= a && z <= ci.e.end {
			return backend.Region{Buf: ci.buf, Off: int(a - ci.e.base), Len: len(b)}, true
		}
	}
	return backend.Region{}, false
}

// PeerRegion returns b as a region of this rank's import of an entry that
// a call uses now (a peer's slice in the direct algorithms, which read
// every rank's memory inside a call they all take part in), importing it
// on this rank's device first if needed; ok is false when no such entry
// holds b.
func (r *Rank) PeerRegion(b []byte) (backend.Region, bool, error) {
	if reg, ok := r.Region(b); ok {
		return reg, true, nil
	}
	if len(b) == 0 {
		return backend.Region{}, false, nil
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	z := a + uintptr(len(b))
	var e *Entry
	var buf backend.Buffer
	cache.mu.RLock()
	if i := searchLocked(a); i < len(cache.live) {
		if x := cache.live[i]; x.base <= a && z <= x.end && x.users > 0 {
			e, buf = x, x.importOf(r)
		}
	}
	cache.mu.RUnlock()
	if e == nil {
		return backend.Region{}, false, nil
	}
	if buf == nil {
		// The call that uses e keeps it live and its object alive until
		// every rank of the call is done with it.
		if r.imp == nil {
			return backend.Region{}, false, nil
		}
		var err error
		if buf, err = r.imp.Import(pageSpan(e.base, int(e.Size()))); err != nil {
			return backend.Region{}, false, err
		}
		cache.mu.Lock()
		e.imports = append(e.imports, rankImport{r: r, buf: buf})
		cache.mu.Unlock()
	}
	return backend.Region{Buf: buf, Off: int(a - e.base), Len: len(b)}, true, nil
}

// Release ends the current call's use of the slices it adopted (every peer
// is done with them). broken says the call's group failed: the objects of
// entries a lost device imported are then kept alive for good, since its
// work may still write them.
func (r *Rank) Release(broken bool) {
	r.nfirst = 0
	if r.n == 0 {
		return
	}
	cache.mu.Lock()
	cache.tick++
	for _, ci := range r.call[:r.n] {
		ci.e.users--
		ci.e.lastUse = cache.tick
	}
	cache.mu.Unlock()
	if broken {
		r.keepIfLost()
	}
	clear(r.call[:r.n])
	r.n = 0
}

// keepIfLost keeps the objects of the call's entries alive for good when a
// device that imported them was declared lost.
func (r *Rank) keepIfLost() {
	for _, ci := range r.call[:r.n] {
		cache.mu.Lock()
		lost := false
		for _, imp := range ci.e.imports {
			lost = lost || imp.r.lost()
		}
		if lost && !ci.e.leaked {
			ci.e.leaked = true
			cache.leaked = append(cache.leaked, ci.keep)
		}
		cache.mu.Unlock()
	}
}

// Close closes the rank's imports (with every rank of its group held); an
// entry other groups' ranks imported too stays open for them.
func (r *Rank) Close() {
	clear(r.call[:])
	r.n, r.nfirst = 0, 0
	closing.Lock()
	var mine []rankImport
	var of []*Entry
	cache.mu.Lock()
	take := func(e *Entry) {
		k := 0
		for _, imp := range e.imports {
			if imp.r == r {
				mine, of = append(mine, imp), append(of, e)
				continue
			}
			e.imports[k] = imp
			k++
		}
		clear(e.imports[k:])
		e.imports = e.imports[:k]
	}
	for _, e := range cache.dying {
		take(e)
	}
	for i := 0; i < len(cache.live); {
		e := cache.live[i]
		take(e)
		if len(e.imports) == 0 && e.users == 0 {
			unlinkLocked(i)
			continue
		}
		i++
	}
	cache.mu.Unlock()
	for i := range mine {
		closeImports(of[i], mine[i:i+1])
	}
	closing.Unlock()
	flushCloses()
}
