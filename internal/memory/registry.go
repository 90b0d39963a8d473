package memory

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// Entry is what the registry holds: memory with a fixed address range
// [base, end).
type Entry interface {
	comparable
	Bounds() (base, end uintptr)
}

// The record of closed ranges keeps at most ClosedSpans ranges, and where
// retired memory keeps its pages (!backend.RetireReleases), at most
// ClosedBytes of them; past either the oldest is dropped and its
// reservation released.
const (
	ClosedSpans = 4096
	ClosedBytes = 256 << 20
)

// Registry finds the entry that holds an address (pinned host memory) and
// remembers the ranges of closed entries, whose retired memory stays
// reserved while recorded. Readers (every call resolving its arguments)
// load an immutable snapshot, with no lock; writers (an allocation, a
// Close) publish a new one. The zero Registry is empty.
type Registry[E Entry] struct {
	mu   sync.Mutex
	snap atomic.Pointer[snapshot[E]]
	// closedBytes sums the closed ranges; closedAge numbers them (mu).
	closedBytes int
	closedAge   uint64
	// retiring: reservations of ranges evicted from the record, released
	// at the next change (a reader may still search the snapshot that
	// held them).
	retiring [][]byte
}

type snapshot[E Entry] struct {
	entries []E    // sorted by base
	closed  []span // ranges of closed entries, sorted by lo
}

// span is a closed entry's address range, reserved (mem) while it is
// recorded; age orders the records for eviction.
type span struct {
	lo, hi uintptr
	mem    []byte
	age    uint64
}

func (p *Registry[E]) load() *snapshot[E] {
	if s := p.snap.Load(); s != nil {
		return s
	}
	return &snapshot[E]{}
}

// edit returns a copy of the current snapshot to change and publish (mu
// held), first releasing the reservations evicted by the last change.
func (p *Registry[E]) edit() *snapshot[E] {
	for i, mem := range p.retiring {
		_ = backend.FreeHostMemory(mem)
		p.retiring[i] = nil
	}
	p.retiring = p.retiring[:0]
	s := p.load()
	return &snapshot[E]{entries: slices.Clone(s.entries), closed: slices.Clone(s.closed)}
}

// Add registers e; closed ranges it reuses are forgotten (memory that is
// not retired, as on platforms where host memory is Go memory).
func (p *Registry[E]) Add(e E) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.edit()
	lo, hi := e.Bounds()
	for i := len(s.closed) - 1; i >= 0; i-- {
		if x := s.closed[i]; x.lo < hi && lo < x.hi {
			p.removeClosed(s, i)
		}
	}
	i := sort.Search(len(s.entries), func(i int) bool {
		b, _ := s.entries[i].Bounds()
		return b >= lo
	})
	s.entries = slices.Insert(s.entries, i, e)
	p.snap.Store(s)
}

// Remove drops e and, when retired is not nil (its memory, retired and
// still reserved), records e's range as closed, in one snapshot: a reader
// finds either, never neither.
func (p *Registry[E]) Remove(e E, retired []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.edit()
	if i := slices.Index(s.entries, e); i >= 0 {
		s.entries = slices.Delete(s.entries, i, i+1)
	}
	if retired != nil {
		lo, hi := e.Bounds()
		p.addClosed(s, lo, hi, retired)
	}
	p.snap.Store(s)
}

// addClosed records [lo, hi), whose retired memory is mem, in s (mu
// held). The record is sorted by address (lookups are a binary search on
// every call given a plain slice); eviction scans it, at Close only.
func (p *Registry[E]) addClosed(s *snapshot[E], lo, hi uintptr, mem []byte) {
	p.closedAge++
	i := sort.Search(len(s.closed), func(i int) bool { return s.closed[i].lo >= lo })
	s.closed = slices.Insert(s.closed, i, span{lo, hi, mem, p.closedAge})
	p.closedBytes += int(hi - lo)
	for len(s.closed) > ClosedSpans || (!backend.RetireReleases && p.closedBytes > ClosedBytes && len(s.closed) > 1) {
		old := 0
		for j, x := range s.closed {
			if x.age < s.closed[old].age {
				old = j
			}
		}
		// Readers of older snapshots may still find the range: release the
		// reservation only once no snapshot can (after the next change).
		p.retiring = append(p.retiring, s.closed[old].mem)
		p.removeClosed(s, old)
	}
}

func (p *Registry[E]) removeClosed(s *snapshot[E], i int) {
	p.closedBytes -= int(s.closed[i].hi - s.closed[i].lo)
	s.closed = slices.Delete(s.closed, i, i+1)
}

// Lookup returns the entry that holds b entirely (ok false: none).
func (p *Registry[E]) Lookup(b []byte) (e E, ok bool) {
	e, ok, _ = p.Find(b)
	return e, ok
}

// Find is Lookup, and also reports whether b starts in the range of a
// closed entry, both from one snapshot: memory being closed is found
// either open or closed, never neither.
func (p *Registry[E]) Find(b []byte) (e E, ok, closed bool) {
	s := p.snap.Load()
	if s == nil || len(b) == 0 {
		return e, false, false // nothing was ever registered
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	es := s.entries
	i := sort.Search(len(es), func(i int) bool {
		_, end := es[i].Bounds()
		return end > a
	})
	if i < len(es) {
		base, end := es[i].Bounds()
		if base <= a && a+uintptr(len(b)) <= end {
			return es[i], true, false
		}
	}
	j := sort.Search(len(s.closed), func(j int) bool { return s.closed[j].hi > a })
	return e, false, j < len(s.closed) && s.closed[j].lo <= a
}

// Len returns the number of entries.
func (p *Registry[E]) Len() int { return len(p.load().entries) }

// ClosedLen returns the number of closed ranges recorded.
func (p *Registry[E]) ClosedLen() int { return len(p.load().closed) }
