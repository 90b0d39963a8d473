package collective

import (
	"context"
	"unsafe"

	"github.com/gocoll/gocoll/internal/importcache"
	"github.com/gocoll/gocoll/internal/memory"
	"github.com/gocoll/gocoll/internal/pin"
)

// The first stage of every call: memory ownership and aliasing, decided in
// one place for every collective and every form.
//
// Ownership. Memory a call can be handed that the library can free under
// it has an owner (memory.Owner): the pages of a HostBuffer (and so of a
// ddp Arena) and a Tensor. Every entry point resolves its arguments through a memUse before
// anything reads them: each owner found counts the call as a user until
// the call drained (its defer), or, for an asynchronous form, until its
// Work is done. Close of the owner first marks it closed (a call that
// resolves it afterwards fails with ErrClosed before touching it), then
// waits for its users; each is bounded by its context,
// CommunicationTimeout and the drain limit. The address ranges of closed
// HostBuffers are remembered (memory.Registry), so a slice of one passed
// after Close is refused instead of read, until new pinned memory reuses
// the addresses.
//
// Aliasing. memory.Allowed (checkAlias) is the one rule for the overlap of a rank's own
// arguments: the in-place layouts of NCCL (send == recv; AllGather's send
// as recv's block r; ReduceScatter's recv as send's block r; the root
// layouts of Reduce, Gather and Scatter) and MPI_IN_PLACE's (AllToAll,
// AllToAllV and SendRecv with one buffer, staged) are allowed; any other
// overlap is ErrInvalidArgument on every rank of a collective before data
// moves.

// memUse is the owners a call resolved (memory.Uses), released once it
// drained. It lives on the entry point's stack (no allocation).
type memUse struct{ memory.Uses }

// uses starts the resolution of a call on c. Inside an operation the
// comm's worker runs (an asynchronous form, Comm.Go), the memory that
// operation resolved when it was queued counts as held: a Close since then
// waits for it rather than failing it.
func (c *Comm) uses(ctx context.Context) memUse {
	if c == nil || ctx == nil {
		return memUse{}
	}
	if w := c.running.Load(); w != nil && ctx.Value(workerKey{}) == c {
		return memUse{memory.Uses{Parent: &w.mem.Uses}}
	}
	return memUse{}
}

// tensor resolves a tensor's owner (nil: a nil or zero Tensor, which the
// call's own checks refuse).
func (m *memUse) tensor(o *memory.Owner) error { return m.add(o, "the tensor") }

// closedMemError is the failure of a call handed memory already closed
// (what names it): it matches ErrClosed, and ErrInvalidArgument (the
// caller passed memory it had closed).
type closedMemError string

func (e closedMemError) Error() string { return string(e) + " was closed" }

func (e closedMemError) Is(t error) bool { return t == ErrClosed || t == ErrInvalidArgument }

// add counts the call as a user of o (what names it in the error).
func (m *memUse) add(o *memory.Owner, what string) error {
	if !m.Add(o) {
		return closedMemError(what)
	}
	return nil
}

// slice resolves a host slice: a slice of a HostBuffer counts the call as
// its user; a slice of a closed HostBuffer is ErrClosed.
func (m *memUse) slice(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	e, ok, closed := pin.Find(b)
	if ok {
		return m.add(&e.Own, "the HostBuffer")
	}
	if closed && !importcache.InGoHeap(unsafe.Pointer(unsafe.SliceData(b))) {
		return closedMemError("the HostBuffer holding this slice")
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

// checkAlias is memory.Allowed as an argument error of call name.
func checkAlias(name string, s, r memory.Area, allow memory.Layout, at int) error {
	if memory.Allowed(s, r, allow, at) {
		return nil
	}
	return invalidArg("%s: send and recv overlap in a layout it does not support (%s)", name, allow)
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
	h.u.Release()
	h.u.Parent, h.used = nil, false
}
