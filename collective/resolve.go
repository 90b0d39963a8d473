package collective

import (
	"context"
	"slices"
	"sort"
	"sync"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// The first stage of every call: memory ownership and aliasing, decided in
// one place for every collective and every form.
//
// Ownership. Memory a call can be handed that the library can free under
// it has an owner: the pages of a HostBuffer (and so of a ddp Arena) and a
// Tensor. Every entry point resolves its arguments through a memUse before
// anything reads them: each owner found counts the call as a user until
// the call drained (its defer), or, for an asynchronous form, until its
// Work is done. Close of the owner first marks it closed (a call that
// resolves it afterwards fails with ErrClosed before touching it), then
// waits for its users; each is bounded by its context,
// CommunicationTimeout and the drain limit. The address ranges of closed
// HostBuffers are remembered (closedSpans), so a slice of one passed after
// Close is refused instead of read, until new pinned memory reuses the
// addresses.
//
// Aliasing. checkAlias is the one rule for the overlap of a rank's own
// arguments: the in-place layouts of NCCL (send == recv; AllGather's send
// as recv's block r; ReduceScatter's recv as send's block r; the root
// layouts of Reduce, Gather and Scatter) and MPI_IN_PLACE's (AllToAll,
// AllToAllV and SendRecv with one buffer, staged) are allowed; any other
// overlap is ErrInvalidArgument on every rank of a collective before data
// moves.

// owner is the lifetime of memory a call can resolve.
type owner struct {
	mu     sync.Mutex
	users  int
	closed bool
	idle   chan struct{} // made by a Close waiting for users
}

// acquire counts a call as a user; false when the owner is closed.
func (o *owner) acquire() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.users++
	return true
}

func (o *owner) release() {
	o.mu.Lock()
	o.users--
	if o.users == 0 && o.idle != nil {
		close(o.idle)
		o.idle = nil
	}
	o.mu.Unlock()
}

// isClosed reports whether close was called.
func (o *owner) isClosed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closed
}

// close marks the owner closed; it reports false if it already was.
func (o *owner) close() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.closed = true
	return true
}

// wait waits until no call uses the owner (after close, none can start).
func (o *owner) wait() {
	o.mu.Lock()
	if o.users == 0 {
		o.mu.Unlock()
		return
	}
	if o.idle == nil {
		o.idle = make(chan struct{})
	}
	idle := o.idle
	o.mu.Unlock()
	<-idle
}

// maxUses bounds the owners one call resolves (send, recv, and a Comm.Go
// or Exec operation's named memory).
const maxUses = 8

// memUse is the owners a call resolved, released once it drained. It lives
// on the entry point's stack (no allocation).
type memUse struct {
	own    [maxUses]*owner
	n      int
	more   []*owner // past maxUses (a Holding of many HostBuffers)
	parent *memUse  // what the queued operation running this call holds
}

// uses starts the resolution of a call on c. Inside an operation the
// comm's worker runs (an asynchronous form, Comm.Go), the memory that
// operation resolved when it was queued counts as held: a Close since then
// waits for it rather than failing it.
func (c *Comm) uses(ctx context.Context) memUse {
	if c == nil || ctx == nil {
		return memUse{}
	}
	if w := c.running.Load(); w != nil && ctx.Value(workerKey{}) == c {
		return memUse{parent: &w.mem}
	}
	return memUse{}
}

// tensor resolves a tensor's owner (nil: a nil or zero Tensor, which the
// call's own checks refuse).
func (m *memUse) tensor(o *owner) error { return m.add(o, "the tensor") }

// errClosedMem is the failure of a call handed memory already closed: it
// matches ErrClosed, and ErrInvalidArgument (the caller passed memory it
// had closed).
func errClosedMem(what string) error { return closedMemError(what) }

type closedMemError string

func (e closedMemError) Error() string { return string(e) + " was closed" }

func (e closedMemError) Is(t error) bool { return t == ErrClosed || t == ErrInvalidArgument }

// add counts the call as a user of o.
func (m *memUse) add(o *owner, what string) error {
	if o == nil {
		return nil
	}
	if m.holds(o) || (m.parent != nil && m.parent.holds(o)) {
		return nil // held by this call, or by the queued operation running it
	}
	if !o.acquire() {
		return errClosedMem(what)
	}
	if m.n < maxUses {
		m.own[m.n] = o
		m.n++
	} else {
		m.more = append(m.more, o)
	}
	return nil
}

func (m *memUse) holds(o *owner) bool {
	for _, x := range m.own[:m.n] {
		if x == o {
			return true
		}
	}
	for _, x := range m.more {
		if x == o {
			return true
		}
	}
	return false
}

// slice resolves a host slice: a slice of a HostBuffer counts the call as
// its user; a slice of a closed HostBuffer is ErrClosed.
func (m *memUse) slice(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	sn := pinned.snap.Load()
	if sn == nil {
		return nil // no HostBuffer was ever made
	}
	if e := sn.find(b); e != nil {
		return m.add(&e.own, "the HostBuffer")
	}
	if sn.isClosed(b) && !goHeap(unsafe.Pointer(unsafe.SliceData(b))) {
		return errClosedMem("the HostBuffer holding this slice")
	}
	return nil
}

// slices resolves a call's send and recv.
func (m *memUse) slices(send, recv []byte) error {
	if err := m.slice(send); err != nil {
		return err
	}
	return m.slice(recv)
}

// release ends the call's use of what it resolved.
func (m *memUse) release() {
	for i := range m.own[:m.n] {
		m.own[i].release()
		m.own[i] = nil
	}
	m.n = 0
	for i, o := range m.more {
		o.release()
		m.more[i] = nil
	}
	m.more = m.more[:0]
}

// take moves m's owners to the returned memUse (an asynchronous operation
// keeps them until its Work is done).
func (m *memUse) take() memUse {
	t := *m
	t.parent = nil
	*m = memUse{}
	return t
}

// The record of closed HostBuffer ranges keeps at most closedSpans
// ranges, and where retired memory keeps its pages
// (!backend.RetireReleases), at most closedBytes of them; past either the
// oldest is dropped and its reservation released.
const (
	closedSpans = 4096
	closedBytes = 256 << 20
)

// span is a closed HostBuffer's address range, reserved (mem) while it is
// recorded; age orders the records for eviction.
type span struct {
	lo, hi uintptr
	mem    []byte
	age    uint64
}

// addClosed records [lo, hi), whose retired memory is mem, in s (mu
// held). The record is sorted by address (lookups are a binary search on
// every call given a plain slice); eviction scans it, at Close only.
func (p *pinnedSet) addClosed(s *pinSnap, lo, hi uintptr, mem []byte) {
	p.closedAge++
	i := sort.Search(len(s.closed), func(i int) bool { return s.closed[i].lo >= lo })
	s.closed = slices.Insert(s.closed, i, span{lo, hi, mem, p.closedAge})
	p.closedBytes += int(hi - lo)
	for len(s.closed) > closedSpans || (!backend.RetireReleases && p.closedBytes > closedBytes && len(s.closed) > 1) {
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

func (p *pinnedSet) removeClosed(s *pinSnap, i int) {
	p.closedBytes -= int(s.closed[i].hi - s.closed[i].lo)
	s.closed = slices.Delete(s.closed, i, i+1)
}

// dropClosed forgets closed ranges of s that [lo, hi) reuses (memory that
// is not retired, as on platforms where host memory is Go memory).
func (p *pinnedSet) dropClosed(s *pinSnap, lo, hi uintptr) {
	for i := len(s.closed) - 1; i >= 0; i-- {
		if x := s.closed[i]; x.lo < hi && lo < x.hi {
			p.removeClosed(s, i)
		}
	}
}

// isClosed reports whether b starts in the range of a closed HostBuffer.
func (s *pinSnap) isClosed(b []byte) bool {
	if len(s.closed) == 0 {
		return false
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	i := sort.Search(len(s.closed), func(i int) bool { return s.closed[i].hi > a })
	return i < len(s.closed) && s.closed[i].lo <= a
}

// layout is the overlap of a rank's send and recv that a collective
// allows.
type layout uint8

const (
	noOverlap  layout = iota // send and recv must not overlap
	sameMem                  // send == recv (same start, same length)
	sendInRecv               // send is recv's block at byte offset at
	recvInSend               // recv is send's block at byte offset at
)

func (l layout) String() string {
	switch l {
	case sameMem:
		return "send and recv may only be the same memory (in place)"
	case sendInRecv:
		return "send may only be recv's own block (in place)"
	case recvInSend:
		return "recv may only be send's own block (in place)"
	}
	return "send and recv must not overlap"
}

// area is a rank's argument as an address range: within a device buffer
// (tensors), or in host memory (buf nil).
type area struct {
	buf    backend.Buffer
	lo, hi uintptr
}

func hostArea(b []byte) area {
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return area{lo: a, hi: a + uintptr(len(b))}
}

func regionArea(r backend.Region) area {
	return area{buf: r.Buf, lo: uintptr(r.Off), hi: uintptr(r.Off + r.Len)}
}

// checkAlias is the one aliasing rule: send and recv either do not overlap
// or overlap exactly in layout allow (at: the byte offset of the block).
func checkAlias(name string, s, r area, allow layout, at int) error {
	if s.lo == s.hi || r.lo == r.hi || s.buf != r.buf || s.hi <= r.lo || r.hi <= s.lo {
		return nil
	}
	switch allow {
	case sameMem:
		if s == r {
			return nil
		}
	case sendInRecv:
		if s.lo == r.lo+uintptr(at) {
			return nil
		}
	case recvInSend:
		if r.lo == s.lo+uintptr(at) {
			return nil
		}
	}
	return invalidArg("%s: send and recv overlap in a layout it does not support (%s)", name, allow)
}

// checkSliceAlias is checkAlias of host slices.
func checkSliceAlias(name string, send, recv []byte, allow layout, at int) error {
	return checkAlias(name, hostArea(send), hostArea(recv), allow, at)
}

// sameSlice reports whether send and recv are the same memory.
func sameSlice(send, recv []byte) bool {
	return len(send) > 0 && len(send) == len(recv) && unsafe.SliceData(send) == unsafe.SliceData(recv)
}

// Holding is memory that code above collective reads or writes itself
// around its collectives (ddp's fused buckets and top-k selection): while
// it is held, Close of the HostBuffer (or ddp Arena) owning it waits, and
// memory closed already is refused with ErrClosed. The zero Holding is
// ready to use; Release ends it and leaves it ready again. One goroutine
// uses a Holding at a time.
type Holding struct {
	u    memUse
	used bool
}

// Hold adds s to h for code running on c. Inside an operation queued on c
// (Comm.Go), memory that operation named counts as held already.
func Hold[T Elem](ctx context.Context, c *Comm, h *Holding, s []T) error {
	if !h.used {
		h.u, h.used = c.uses(ctx), true
	}
	return h.u.slice(asBytes(s))
}

// Release ends h's hold on everything it held.
func (h *Holding) Release() {
	h.u.release()
	h.u.parent, h.used = nil, false
}
