// Package channel moves the messages of an exchange between two ranks: a
// Link carries messages from one rank to another through an outbox of Slots
// slots, and the link's way, chosen when it is made, is the only code that
// knows how a slot reaches the receiver. Algorithms reserve a slot, fill it
// with device work, post it and take it on the other side, and never branch
// on the transport.
//
// The ways:
//
//   - host (NewHost): ranks of one process whose devices do not share
//     memory. The outbox is host memory; where both devices import host
//     memory the receiver's device reads the sender's slot in place, else
//     the receiver copies the slot into its inbox (a counted Buffer.Write at
//     the backend seam).
//   - shared (NewShared): ranks sharing device memory (one logical device,
//     or the host backend): the outbox is device memory the receiver's work
//     reads in place; no byte crosses to the host.
//   - remote (NewRemote): a rank of another process: each slot goes through
//     the transport, staged through Go memory the link owns, so the
//     transport only ever sees Go memory.
//
// Credits (free slots) bound what is in flight: a sender runs at most Slots
// messages ahead of its receiver. The waits themselves (deadlines, the
// caller's context, a gone peer, a broken group) belong to the rank that
// waits, behind Waiter.
package channel

import (
	"context"
	"fmt"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// Slots is the number of slots of a link's outbox: the messages in flight.
const Slots = 2

// Msg is one message on a local link: the slot that holds it, its length
// in bytes and the number of the call that sent it.
type Msg struct {
	Slot, N int
	Seq     uint64
}

// Waiter is what a link's waits need from the rank that waits. Each wait
// honours ctx, the rank's communication timeout and the group breaking,
// and ends with an error naming peer when peer is gone and nothing it sent
// is left to take; a wait that fails has broken the group already.
type Waiter interface {
	// Message waits for the next message on ch from peer.
	Message(ctx context.Context, ch <-chan Msg, peer int, phase string) (Msg, error)
	// Credit waits for a free slot on ch, returned by peer.
	Credit(ctx context.Context, ch <-chan int, peer int, phase string) (int, error)
	// Request waits for a transport request with peer; stage is the Go
	// memory it uses, set to nil when the transport keeps it (a request
	// neither completed nor cancelled).
	Request(ctx context.Context, r backend.Request, peer int, phase string, stage *[]byte) error
	// Fail breaks the group with err (a device or transport failure).
	Fail(err error)
	// Mismatch breaks the group because the message from peer is not the
	// one expected (another call's, or another size), and returns the
	// error.
	Mismatch(peer int) error
}

// End is one rank's side of its links: its device and its waits.
type End struct {
	Dev backend.Device
	W   Waiter
}

// way is how a link's slots reach the receiver.
type way interface {
	reserve(ctx context.Context, e End, l *Link, n int) (int, backend.Region, error)
	post(e End, l *Link, m Msg)
	take(ctx context.Context, e End, l *Link, inbox backend.Buffer, idx int, seq uint64, n int) (backend.Region, Held, error)
}

// Link carries messages from rank From to rank To.
type Link struct {
	From, To int
	size     int // bytes per slot
	way      way

	// Local links: the messages posted and the free slots (credits), and
	// the doorbells of the sender and the receiver, rung after each.
	ready            chan Msg
	free             chan int
	wakeFrom, wakeTo func()
	// toDev is the receiver's device (host links: whether it imports).
	toDev backend.Device
	out   backend.Buffer // on the sender's device, Slots*size
	// Host links between devices that import host memory: the slots are
	// host memory (mem) the sender's device imported as out and the
	// receiver's device imports as in, so the receiver's device reads them
	// in place (no host copy).
	mem []byte
	in  backend.Buffer

	// Remote links: the transport, the processes of both ends and the
	// link's tag; a slot is free again when its send completed.
	remote           bool
	tr               backend.Transport
	fromProc, toProc int
	tag              int
	reqs             [Slots]backend.Request
	next             int
	// Go staging of the slots: a request the transport cannot give back
	// keeps its buffer alive and no device memory is freed under it. A
	// slot left to the transport is set to nil and allocated again.
	stage [Slots][]byte
}

// NewHost returns a link between ranks of one process whose devices do not
// share memory: toDev is the receiver's device, wakeFrom and wakeTo ring
// the sender's and the receiver's doorbells.
func NewHost(from, to, slotBytes int, toDev backend.Device, wakeFrom, wakeTo func()) *Link {
	l := newLocal(from, to, slotBytes, wakeFrom, wakeTo)
	l.way, l.toDev = hostWay{}, toDev
	return l
}

// NewShared returns a link between ranks of one process whose devices
// share memory.
func NewShared(from, to, slotBytes int, wakeFrom, wakeTo func()) *Link {
	l := newLocal(from, to, slotBytes, wakeFrom, wakeTo)
	l.way = sharedWay{}
	return l
}

func newLocal(from, to, slotBytes int, wakeFrom, wakeTo func()) *Link {
	l := &Link{From: from, To: to, size: slotBytes, wakeFrom: wakeFrom, wakeTo: wakeTo,
		ready: make(chan Msg, Slots), free: make(chan int, Slots)}
	for s := 0; s < Slots; s++ {
		l.free <- s
	}
	return l
}

// NewRemote returns a link one of whose ranks is in another process:
// fromProc and toProc are the ranks' processes, tag the link's transport
// tag.
func NewRemote(from, to, slotBytes int, tr backend.Transport, fromProc, toProc, tag int) *Link {
	return &Link{From: from, To: to, size: slotBytes, way: remoteWay{}, remote: true, tr: tr,
		fromProc: fromProc, toProc: toProc, tag: tag}
}

// Remote reports whether the link's other end is in another process.
func (l *Link) Remote() bool { return l.remote }

// Reserve waits for a free slot (the sender's, e's) and returns it and the
// region of its first n bytes, on the sender's device. The outbox is
// allocated on first use.
func (l *Link) Reserve(ctx context.Context, e End, n int) (int, backend.Region, error) {
	return l.way.reserve(ctx, e, l, n)
}

// Post sends the reserved slot's first n bytes, from call seq, to l.To. It
// never blocks: credits bound the messages in flight.
func (l *Link) Post(e End, slot, n int, seq uint64) {
	l.way.post(e, l, Msg{Slot: slot, N: n, Seq: seq})
}

// Take waits for the next message from l.From (call seq, n bytes expected)
// and returns its bytes as a region the receiver's (e's) device reads: in
// place, or copied into slot idx of inbox (slots of the link's size). A
// slot read in place is returned as Held: it goes back to the sender with
// Held.Release once the device work reading it completed.
func (l *Link) Take(ctx context.Context, e End, inbox backend.Buffer, idx int, seq uint64, n int) (backend.Region, Held, error) {
	return l.way.take(ctx, e, l, inbox, idx, seq, n)
}

// Held is a peer's slot the receiver's device work reads in place.
type Held struct {
	l    *Link
	slot int
}

// Release returns the slot to its sender.
func (h Held) Release() {
	if h.l != nil {
		h.l.freeSlot(h.slot)
	}
}

// freeSlot returns slot to the sender and rings its doorbell.
func (l *Link) freeSlot(slot int) {
	l.free <- slot
	l.wakeFrom()
}

type hostWay struct{}

func (hostWay) reserve(ctx context.Context, e End, l *Link, n int) (int, backend.Region, error) {
	if l.out == nil {
		// Host memory both devices import when they can (the receiver
		// then reads the slot in place), else a host-visible allocation.
		l.importSlots(e.Dev)
	}
	return localReserve(ctx, e, l, n, backend.HostVisible)
}

func (hostWay) post(e End, l *Link, m Msg) { localPost(l, m) }

func (hostWay) take(ctx context.Context, e End, l *Link, inbox backend.Buffer, idx int, seq uint64, n int) (backend.Region, Held, error) {
	m, err := localTake(ctx, e, l, seq, n)
	if err != nil {
		return backend.Region{}, Held{}, err
	}
	if l.mem != nil && l.in == nil {
		if imp, ok := e.Dev.(backend.Importer); ok {
			if b, err := imp.Import(l.mem); err == nil {
				l.in = b
			}
		}
	}
	if l.in != nil {
		// The sender's slots are host memory this device imported: read
		// them in place; the slot stays taken until that work completed.
		return backend.Region{Buf: l.in, Off: m.Slot * l.size, Len: m.N}, Held{l: l, slot: m.Slot}, nil
	}
	off := idx * l.size
	src := l.out.Bytes()[m.Slot*l.size : m.Slot*l.size+m.N]
	err = inbox.Write(off, src)
	l.freeSlot(m.Slot)
	if err != nil {
		e.W.Fail(err)
		return backend.Region{}, Held{}, err
	}
	return backend.Region{Buf: inbox, Off: off, Len: m.N}, Held{}, nil
}

// importSlots makes the slots host memory both devices import (the
// sender's import becomes l.out; the receiver imports it on its first
// take), when both devices import host memory; otherwise it leaves l.out
// nil for a plain host-visible allocation.
func (l *Link) importSlots(dev backend.Device) {
	imp, ok := dev.(backend.Importer)
	if _, rok := l.toDev.(backend.Importer); !ok || !rok {
		return
	}
	mem, err := backend.AllocHostMemory(Slots * l.size)
	if err != nil {
		return
	}
	b, err := imp.Import(mem)
	if err != nil {
		_ = backend.FreeHostMemory(mem)
		return
	}
	l.mem, l.out = mem, b
}

type sharedWay struct{}

func (sharedWay) reserve(ctx context.Context, e End, l *Link, n int) (int, backend.Region, error) {
	return localReserve(ctx, e, l, n, backend.DeviceLocal)
}

func (sharedWay) post(e End, l *Link, m Msg) { localPost(l, m) }

func (sharedWay) take(ctx context.Context, e End, l *Link, inbox backend.Buffer, idx int, seq uint64, n int) (backend.Region, Held, error) {
	m, err := localTake(ctx, e, l, seq, n)
	if err != nil {
		return backend.Region{}, Held{}, err
	}
	// Zero-copy: the caller's device work reads the sender's slot, which
	// stays taken until that work completed.
	return backend.Region{Buf: l.out, Off: m.Slot * l.size, Len: m.N}, Held{l: l, slot: m.Slot}, nil
}

// localReserve allocates a local link's outbox of memory kind on first use
// (unless the way made it) and waits for a free slot (a credit).
func localReserve(ctx context.Context, e End, l *Link, n int, kind backend.Memory) (int, backend.Region, error) {
	if l.out == nil {
		b, err := e.Dev.Alloc(Slots*l.size, kind)
		if err != nil {
			e.W.Fail(err)
			return 0, backend.Region{}, err
		}
		l.out = b
	}
	slot, err := e.W.Credit(ctx, l.free, l.To, "exchange (waiting for the receiver)")
	if err != nil {
		return 0, backend.Region{}, err
	}
	return slot, backend.Region{Buf: l.out, Off: slot * l.size, Len: n}, nil
}

// localPost hands m to the receiver and rings its doorbell.
func localPost(l *Link, m Msg) {
	l.ready <- m
	l.wakeTo()
}

// localTake waits for the next message on a local link and checks that it
// is the one expected: a message of another call or size breaks the group
// (Waiter.Mismatch).
func localTake(ctx context.Context, e End, l *Link, seq uint64, n int) (Msg, error) {
	m, err := e.W.Message(ctx, l.ready, l.From, "exchange (waiting for the sender)")
	if err != nil {
		return m, err
	}
	if m.Seq != seq || m.N != n {
		l.freeSlot(m.Slot)
		return m, e.W.Mismatch(l.From)
	}
	return m, nil
}

type remoteWay struct{}

func (remoteWay) reserve(ctx context.Context, e End, l *Link, n int) (int, backend.Region, error) {
	if l.out == nil {
		b, err := e.Dev.Alloc(Slots*l.size, backend.HostVisible)
		if err != nil {
			e.W.Fail(err)
			return 0, backend.Region{}, err
		}
		l.out = b
	}
	slot := l.next
	if r := l.reqs[slot]; r != nil {
		// Completed or cancelled either way: the transport recycles it.
		l.reqs[slot] = nil
		if err := e.W.Request(ctx, r, l.To, "exchange (sending)", &l.stage[slot]); err != nil {
			return 0, backend.Region{}, err
		}
	}
	l.next = (slot + 1) % Slots
	return slot, backend.Region{Buf: l.out, Off: slot * l.size, Len: n}, nil
}

func (remoteWay) post(e End, l *Link, m Msg) {
	off := m.Slot * l.size
	if l.stage[m.Slot] == nil {
		l.stage[m.Slot] = make([]byte, l.size)
	}
	buf := l.stage[m.Slot][:m.N]
	copy(buf, l.out.Bytes()[off:off+m.N])
	req, err := l.tr.Isend(buf, l.toProc, l.tag)
	if err != nil {
		// The next wait of any rank sees the broken group.
		e.W.Fail(fmt.Errorf("sending to rank %d (process %d): %w", l.To, l.toProc, err))
		return
	}
	l.reqs[m.Slot] = req
}

// take receives straight into the inbox slot idx (through the link's Go
// staging).
func (remoteWay) take(ctx context.Context, e End, l *Link, inbox backend.Buffer, idx int, seq uint64, n int) (backend.Region, Held, error) {
	off := idx * l.size
	if l.stage[0] == nil {
		l.stage[0] = make([]byte, l.size)
	}
	buf := l.stage[0][:n]
	req, err := l.tr.Irecv(buf, l.fromProc, l.tag)
	if err != nil {
		err = fmt.Errorf("receiving from rank %d (process %d): %w", l.From, l.fromProc, err)
		e.W.Fail(err)
		return backend.Region{}, Held{}, err
	}
	if err := e.W.Request(ctx, req, l.From, "exchange (receiving)", &l.stage[0]); err != nil {
		return backend.Region{}, Held{}, err
	}
	if err := inbox.Write(off, buf); err != nil {
		e.W.Fail(err)
		return backend.Region{}, Held{}, err
	}
	return backend.Region{Buf: inbox, Off: off, Len: n}, Held{}, nil
}

// FinishSends ends the transport sends still in flight on a remote link.
// After a clean run, the last pieces sent may still be on their way to a
// peer that is finishing the same call: they get timeout to complete.
// Anything left is cancelled; a send the transport cannot give back keeps
// its Go staging slot (the transport holds it), never device memory.
func (l *Link) FinishSends(clean bool, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for i, r := range l.reqs {
		if r == nil {
			continue
		}
		l.reqs[i] = nil
		for clean {
			done, err := r.Test()
			if err != nil || done {
				r = nil
				break
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
		if r != nil && r.Cancel() != nil {
			l.stage[i] = nil
		}
	}
}

// Close closes the link's buffers: the receiver's import unless toLost,
// the outbox unless fromLost (a device declared lost may still use them: they
// are leaked). Host memory both devices imported is freed only once both
// imports are closed.
func (l *Link) Close(fromLost, toLost bool) []error {
	var errs []error
	keep := false
	if l.in != nil {
		if toLost {
			keep = true
		} else if err := l.in.Close(); err != nil {
			errs = append(errs, err)
			keep = true
		}
		l.in = nil
	}
	if l.out != nil {
		if fromLost {
			keep = true
		} else if err := l.out.Close(); err != nil {
			errs = append(errs, err)
			keep = true
		}
		l.out = nil
	}
	if l.mem != nil && !keep {
		_ = backend.FreeHostMemory(l.mem)
	}
	l.mem = nil
	return errs
}

// InPlace reports whether the link's outbox exists (used) and, if so,
// whether it is host memory the receiver's device imported (the receiver
// reads the slots in place).
func (l *Link) InPlace() (used, inPlace bool) {
	return l.out != nil, l.mem != nil && l.in != nil
}
