package collective

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// The exchange layer: ranks in one process move data through links. A link
// carries messages from one rank to another through an outbox of host-visible
// slots on the sender's device: the sender's device copies a region into a
// free slot (a device-to-host copy on a discrete GPU), the message names the
// slot, the receiver copies the slot into its own host-visible inbox (a
// counted Buffer.Write at the backend seam) and returns the slot. Credits
// (free slots) bound what is in flight, so a sender runs at most linkSlots
// messages ahead of its receiver.

const linkSlots = 2

// linkSpin is how long a rank polls a link before it parks (spinBarrier).
const linkSpin = 200 * time.Microsecond

// msgKind separates collective traffic from point-to-point traffic on a link,
// so a Send that meets a collective is an error instead of corrupt data.
type msgKind uint8

const (
	msgCollective msgKind = iota + 1
	msgP2P
)

type msg struct {
	slot  int
	n     int // bytes
	kind  msgKind
	dt    backend.DType
	count int64 // P2P: the whole message's element count (first piece only)
	seq   uint64
}

type link struct {
	from, to int
	ready    chan msg
	free     chan int
	out      backend.Buffer // on the sender's device, linkSlots*slotBytes
	// Between ranks of one process on devices that do not share memory but
	// import host memory: the slots are host memory (mem) the sender's
	// device imported as out and the receiver's device imports as in, so
	// the receiver's device reads them in place (no host copy).
	mem []byte
	in  backend.Buffer
	// A remote link (the peer is in another process) sends each slot with
	// the transport; a slot is free again when its send completed.
	remote bool
	ch     channel // how the slots travel (the link's way: local or remote, shared or not)
	reqs   [linkSlots]backend.Request
	next   int
	// Go staging of a remote link's slots: the transport only ever sees Go
	// memory, so a request it cannot give back keeps its buffer alive and
	// no device memory is freed under it. A slot left to the transport is
	// set to nil and allocated again.
	stage [linkSlots][]byte

	// Point-to-point. Between local ranks: the operations posted on this
	// link and not yet matched, in order (guarded by pmu). To or from
	// another process: the comm's operations on this link in order, and
	// whether the link is on the lane's list (guarded by the comm's
	// laneMu); the transfer of the first (xop: its pieces and their
	// requests) and the staging (the lane only).
	pmu                          sync.Mutex
	psend                        opList
	precv                        opList
	pq                           opList
	active                       bool
	xop                          *p2pOp
	xposted, xcompleted, xpieces int
	preqs                        [linkSlots]backend.Request
	pstage                       [linkSlots][]byte
}

func newLink(g *Group, from, to int, remote bool) *link {
	l := &link{from: from, to: to, remote: remote, ch: channelOf(g, remote)}
	if remote {
		return l
	}
	l.ready, l.free = make(chan msg, linkSlots), make(chan int, linkSlots)
	for s := 0; s < linkSlots; s++ {
		l.free <- s
	}
	return l
}

// link returns the link from rank a to rank b (one of them c's rank),
// creating it on first use: a group holds only the links its algorithms use.
func (c *Comm) link(a, b int) *link {
	key := int64(a)*int64(c.g.n) + int64(b)
	if l, ok := c.links[key]; ok {
		return l
	}
	g := c.g
	g.linkMu.Lock()
	l, ok := g.linkMap[key]
	if !ok {
		l = newLink(g, a, b, !g.isLocal(a) || !g.isLocal(b))
		g.linkMap[key] = l
	}
	g.linkMu.Unlock()
	c.links[key] = l
	return l
}

// local returns the comm of rank r, a rank of this process.
func (g *Group) local(r int) *Comm { return g.comms[r-g.base] }

// freeSlot returns slot to l's sender and rings its doorbell.
func (g *Group) freeSlot(l *link, slot int) {
	l.free <- slot
	g.local(l.from).bell.ring()
}

// wait blocks on ch (a message or a credit) with the comm's timer, the
// caller's context and the group's breaking; peer names who is awaited.
func waitOn[T any](c *Comm, ctx context.Context, ch chan T, peer int, phase string) (T, error) {
	var zero T
	select {
	case v := <-ch:
		return v, nil
	default:
	}
	// With cores to spare, poll briefly before parking (as the barrier
	// does): a parked receive costs a wake-up and, spread over many Ps, a
	// runtime allocation now and then (sudog caches are per P).
	if spinBarrier {
		for start := time.Now(); time.Since(start) < linkSpin; {
			select {
			case v := <-ch:
				return v, nil
			default:
			}
			runtime.Gosched()
		}
	}
	g := c.g
	c.beginWait(phase, peer, 0)
	defer c.endWait()
	if useBell.Load() {
		// Sleep on the doorbell, which the peer rings after each message
		// or credit it sends to this rank (see doorbell), and markGone
		// when a rank goes.
		deadline := time.Now().Add(g.cfg.CommunicationTimeout)
		for {
			t := c.bell.ticket()
			select {
			case v := <-ch:
				return v, nil
			default:
			}
			if gi := g.goneRank(peer); gi != nil {
				return goneOn(c, ch, peer, gi, phase)
			}
			var timedOut bool
			var ctxErr error
			if g.Err() == nil {
				if timedOut, ctxErr = c.bellWait(ctx, t, deadline); !timedOut && ctxErr == nil {
					continue
				}
			}
			switch {
			case timedOut:
				te := &TimeoutError{Seq: c.seq, Phase: phase, Missing: []int{peer}}
				c.breakWith(te)
				return zero, te
			case ctxErr != nil:
				te := &TimeoutError{Seq: c.seq, Phase: phase, Missing: []int{peer}, Ctx: ctxErr}
				c.breakWith(te)
				return zero, te
			}
			if err := ctx.Err(); err != nil {
				return zero, &TimeoutError{Seq: c.seq, Phase: phase, Missing: []int{peer}, Ctx: err}
			}
			return zero, c.brokenErr()
		}
	}
	c.timer.Reset(g.cfg.CommunicationTimeout)
	defer c.timer.Stop()
	for {
		if gi := g.goneRank(peer); gi != nil {
			return goneOn(c, ch, peer, gi, phase)
		}
		select {
		case v := <-ch:
			return v, nil
		case <-c.goneWake:
			// A rank went: is it peer?
		case <-c.timer.C:
			te := &TimeoutError{Seq: c.seq, Phase: phase, Missing: []int{peer}}
			c.breakWith(te)
			return zero, te
		case <-ctx.Done():
			te := &TimeoutError{Seq: c.seq, Phase: phase, Missing: []int{peer}, Ctx: ctx.Err()}
			c.breakWith(te)
			return zero, te
		case <-g.brokenCh:
			if err := ctx.Err(); err != nil {
				return zero, &TimeoutError{Seq: c.seq, Phase: phase, Missing: []int{peer}, Ctx: err}
			}
			return zero, c.brokenErr()
		}
	}
}

// goneOn ends a wait on ch for peer, which is gone: what it sent before it
// went is in ch; anything else never comes.
func goneOn[T any](c *Comm, ch chan T, peer int, gi *goneInfo, phase string) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	default:
	}
	var zero T
	ge := c.goneErr(peer, gi, phase)
	c.breakWith(ge)
	return zero, ge
}

// The ways a link's slots reach the receiver (channels): the exchange
// steps (reserve, post, take) are written once over them, and the link's
// channel, chosen when the link is made, is the only place that knows the
// way:
//
//   - hostChannel: ranks of one process whose devices do not share memory.
//     The outbox is host memory; where both devices import host memory the
//     receiver's device reads the sender's slot in place, else the receiver
//     copies the slot into its inbox.
//   - sharedChannel: ranks sharing device memory (one logical device, or
//     the host backend): the outbox is device memory the receiver's work
//     reads in place; no byte crosses to the host.
//   - remoteChannel: a rank of another process: each slot goes through the
//     transport, staged through Go memory the comm owns.
type channel interface {
	// reserve waits for a free slot of the link to l.to and returns it and
	// its first n bytes, on the sender's device (c's).
	reserve(ctx context.Context, c *Comm, l *link, n int) (int, backend.Region, error)
	// post sends m (the slot's first m.n bytes) to l.to; it never blocks.
	post(c *Comm, l *link, m msg)
	// take waits for the next message from l.from (n bytes expected) and
	// returns its bytes as a region c's device reads: in place, or copied
	// into c's inbox slot idx.
	take(ctx context.Context, c *Comm, l *link, idx int, want msgKind, n int) (backend.Region, msg, error)
}

// channelOf returns the channel of a link between ranks of g, one of them
// in another process (remote) or not.
func channelOf(g *Group, remote bool) channel {
	switch {
	case remote:
		return remoteChannel{}
	case g.sharedMem:
		return sharedChannel{}
	}
	return hostChannel{}
}

// reserve waits for a free slot on the link to peer and returns the region
// of n bytes in it. The sender's outbox is allocated on first use.
func (c *Comm) reserve(ctx context.Context, to, n int) (int, backend.Region, error) {
	l := c.link(c.rank, to)
	return l.ch.reserve(ctx, c, l, n)
}

// post sends the reserved slot's n bytes to peer. It never blocks: credits
// bound the messages in flight.
func (c *Comm) post(to, slot, n int, m msg) {
	m.slot, m.n = slot, n
	if m.kind == 0 {
		m.kind = msgCollective
		m.seq = c.seq
	}
	l := c.link(c.rank, to)
	l.ch.post(c, l, m)
}

// take waits for the next message from peer (n bytes expected) and returns
// where its bytes are for this rank's device (see channel).
func (c *Comm) take(ctx context.Context, from, idx int, want msgKind, n int) (backend.Region, msg, error) {
	l := c.link(from, c.rank)
	return l.ch.take(ctx, c, l, idx, want, n)
}

type hostChannel struct{}

func (hostChannel) reserve(ctx context.Context, c *Comm, l *link, n int) (int, backend.Region, error) {
	if l.out == nil {
		// Host memory both devices import when they can (the receiver
		// then reads the slot in place), else a host-visible allocation.
		c.importLink(l)
	}
	return localReserve(ctx, c, l, n, backend.HostVisible)
}

func (hostChannel) post(c *Comm, l *link, m msg) { localPost(c, l, m) }

func (hostChannel) take(ctx context.Context, c *Comm, l *link, idx int, want msgKind, n int) (backend.Region, msg, error) {
	m, err := localTake(ctx, c, l, want, n)
	if err != nil {
		return backend.Region{}, m, err
	}
	if l.mem != nil && l.in == nil {
		if imp, ok := c.dev.(backend.Importer); ok {
			if b, err := imp.Import(l.mem); err == nil {
				l.in = b
			}
		}
	}
	if l.in != nil {
		// The sender's slots are host memory this device imported: read
		// them in place; the slot stays taken until that work completed.
		c.held = append(c.held, heldSlot{l: l, slot: m.slot})
		return backend.Region{Buf: l.in, Off: m.slot * c.g.slotBytes, Len: m.n}, m, nil
	}
	off := idx * c.g.slotBytes
	src := l.out.Bytes()[m.slot*c.g.slotBytes : m.slot*c.g.slotBytes+m.n]
	err = c.inbox.Write(off, src)
	c.g.freeSlot(l, m.slot)
	if err != nil {
		c.breakWith(err)
		return backend.Region{}, m, err
	}
	return backend.Region{Buf: c.inbox, Off: off, Len: m.n}, m, nil
}

type sharedChannel struct{}

func (sharedChannel) reserve(ctx context.Context, c *Comm, l *link, n int) (int, backend.Region, error) {
	return localReserve(ctx, c, l, n, backend.DeviceLocal)
}

func (sharedChannel) post(c *Comm, l *link, m msg) { localPost(c, l, m) }

func (sharedChannel) take(ctx context.Context, c *Comm, l *link, idx int, want msgKind, n int) (backend.Region, msg, error) {
	m, err := localTake(ctx, c, l, want, n)
	if err != nil {
		return backend.Region{}, m, err
	}
	// Zero-copy: the caller's device work reads the sender's slot, which
	// stays taken until that work completed (releaseHeld).
	c.held = append(c.held, heldSlot{l: l, slot: m.slot})
	return backend.Region{Buf: l.out, Off: m.slot * c.g.slotBytes, Len: m.n}, m, nil
}

// localReserve allocates a local link's outbox of memory kind on first use
// (unless the channel made it) and waits for a free slot (a credit).
func localReserve(ctx context.Context, c *Comm, l *link, n int, kind backend.Memory) (int, backend.Region, error) {
	if l.out == nil {
		b, err := c.dev.Alloc(linkSlots*c.g.slotBytes, kind)
		if err != nil {
			c.breakWith(err)
			return 0, backend.Region{}, err
		}
		l.out = b
	}
	slot, err := waitOn(c, ctx, l.free, l.to, "exchange (waiting for the receiver)")
	if err != nil {
		return 0, backend.Region{}, err
	}
	return slot, backend.Region{Buf: l.out, Off: slot * c.g.slotBytes, Len: n}, nil
}

// localPost hands m to the receiver and rings its doorbell.
func localPost(c *Comm, l *link, m msg) {
	l.ready <- m
	c.g.local(l.to).bell.ring()
}

// localTake waits for the next message on a local link and checks that it
// is the one expected: a message of another kind, call or size breaks the
// group with a *MismatchError.
func localTake(ctx context.Context, c *Comm, l *link, want msgKind, n int) (msg, error) {
	m, err := waitOn(c, ctx, l.ready, l.from, "exchange (waiting for the sender)")
	if err != nil {
		return m, err
	}
	if m.kind != want || (want == msgCollective && m.seq != c.seq) || (want == msgCollective && m.n != n) {
		c.g.freeSlot(l, m.slot)
		err := &MismatchError{Seq: c.seq, Rank: c.rank, Call: want.String(), Peer: l.from, PeerCall: m.kind.String()}
		c.breakWith(err)
		return m, err
	}
	c.recvBytes += int64(m.n)
	return m, nil
}

type remoteChannel struct{}

func (remoteChannel) reserve(ctx context.Context, c *Comm, l *link, n int) (int, backend.Region, error) {
	if l.out == nil {
		b, err := c.dev.Alloc(linkSlots*c.g.slotBytes, backend.HostVisible)
		if err != nil {
			c.breakWith(err)
			return 0, backend.Region{}, err
		}
		l.out = b
	}
	slot := l.next
	if r := l.reqs[slot]; r != nil {
		// Completed or cancelled either way: the transport recycles it.
		l.reqs[slot] = nil
		if err := c.waitReq(ctx, r, l.to, "exchange (sending)", &l.stage[slot]); err != nil {
			return 0, backend.Region{}, err
		}
	}
	l.next = (slot + 1) % linkSlots
	return slot, backend.Region{Buf: l.out, Off: slot * c.g.slotBytes, Len: n}, nil
}

func (remoteChannel) post(c *Comm, l *link, m msg) {
	g := c.g
	off := m.slot * g.slotBytes
	if l.stage[m.slot] == nil {
		l.stage[m.slot] = make([]byte, g.slotBytes)
	}
	buf := l.stage[m.slot][:m.n]
	copy(buf, l.out.Bytes()[off:off+m.n])
	req, err := g.tr.Isend(buf, g.procOf(l.to), g.tag(c.rank, l.to))
	if err != nil {
		// The next wait of any rank sees the broken group.
		c.breakWith(fmt.Errorf("sending to rank %d (process %d): %w", l.to, g.procOf(l.to), err))
		return
	}
	l.reqs[m.slot] = req
}

// take receives straight into the inbox slot idx (through the slot's Go
// staging).
func (remoteChannel) take(ctx context.Context, c *Comm, l *link, idx int, want msgKind, n int) (backend.Region, msg, error) {
	g := c.g
	off := idx * g.slotBytes
	if l.stage[0] == nil {
		l.stage[0] = make([]byte, g.slotBytes)
	}
	buf := l.stage[0][:n]
	req, err := g.tr.Irecv(buf, g.procOf(l.from), g.tag(l.from, c.rank))
	if err != nil {
		err = fmt.Errorf("receiving from rank %d (process %d): %w", l.from, g.procOf(l.from), err)
		c.breakWith(err)
		return backend.Region{}, msg{}, err
	}
	if err := c.waitReq(ctx, req, l.from, "exchange (receiving)", &l.stage[0]); err != nil {
		return backend.Region{}, msg{}, err
	}
	if err := c.inbox.Write(off, buf); err != nil {
		c.breakWith(err)
		return backend.Region{}, msg{}, err
	}
	c.recvBytes += int64(n)
	return backend.Region{Buf: c.inbox, Off: off, Len: n}, msg{kind: want, n: n}, nil
}

func (k msgKind) String() string {
	switch k {
	case msgCollective:
		return "a collective"
	case msgP2P:
		return "Send"
	}
	return fmt.Sprintf("msgKind(%d)", int(k))
}

// importLink makes a local link's slots host memory both devices can
// import (the sender's import becomes l.out; the receiver imports it on its
// first take), when both devices import host memory; otherwise it leaves
// l.out nil for a plain host-visible allocation.
func (c *Comm) importLink(l *link) {
	imp, ok := c.dev.(backend.Importer)
	if _, rok := c.g.devs[l.to-c.g.base].(backend.Importer); !ok || !rok {
		return
	}
	mem, err := backend.AllocHostMemory(linkSlots * c.g.slotBytes)
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

// heldSlot is a peer's link slot this comm's device work reads in place
// (ranks sharing memory): its credit returns to the sender only once that
// work completed.
type heldSlot struct {
	l    *link
	slot int
}

// releaseHeld returns the held slots to their senders: the comm's device
// work submitted so far is complete (queues are FIFO, so any later fence
// covers the reads of earlier work).
func (c *Comm) releaseHeld() {
	for _, h := range c.held {
		c.g.freeSlot(h.l, h.slot)
	}
	c.held = c.held[:0]
}

// flush submits what the stream recorded and waits for it.
func (c *Comm) flush(ctx context.Context) error {
	f, err := c.submitWork()
	if err != nil {
		c.breakWith(err)
		if derr := c.drain(); derr != nil {
			return derr
		}
		return err
	}
	return c.waitFence(ctx, f)
}

// flushPost submits the slices copied into outbox slots, waits for them and
// posts them to their receivers.
func (c *Comm) flushPost(ctx context.Context, pend []pending) error {
	if err := c.flush(ctx); err != nil {
		return err
	}
	for _, p := range pend {
		c.post(p.to, p.slot, p.n, msg{})
	}
	return nil
}

// rec wraps a recording error: it breaks the group.
func (c *Comm) rec(err error) error {
	if err != nil {
		c.breakWith(err)
	}
	return err
}
