package collective

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// Point-to-point: Send, Recv, SendRecv and their asynchronous forms are
// operations (p2pOp) posted to the comm and completed when they meet their
// peer's matching operation.
//
//   - Between ranks of one process, a posted Send and Recv meet on the link
//     between the two ranks (FIFO per direction): whoever posts second copies
//     the send slice into the receive slice, once, and completes both. No
//     device and no staging is involved.
//   - With a rank of another process, the comm's lane goroutine moves the
//     message through the transport in slot-sized pieces, staged through Go
//     memory the comm owns (a piece the transport cannot give back stays
//     with the transport, never reused or freed), with a 16-byte header in
//     the first piece so a mismatched pair is reported, not misread.
//   - The lane also fails the comm's pending operations at their deadline
//     (CommunicationTimeout after posting, or after the last progress of a
//     transfer), when their context ends and when the group breaks. It runs
//     while operations are pending.
//
// Posting never blocks, so asynchronous operations started back to back
// (SendAsync then RecvAsync on both ranks of a pair) always meet. Stream
// order: a point-to-point operation is posted after the comm's earlier
// operations ran; any other operation waits for the earlier point-to-point
// operations to complete.

// p2pHeader is the size of the header of a message to another process: the
// element type and the element count of the whole message.
const p2pHeader = 16

// p2pOp is one posted operation. It is never reused: the lane may still
// hold a finished operation in its scratch list, so only fields that do not
// change after posting are read without the locks.
type p2pOp struct {
	c     *Comm
	name  string
	send  bool
	peer  int
	l     *link
	data  []byte
	dt    backend.DType
	count int64
	ctx   context.Context

	deadline time.Time
	// Local matching (guarded by l.pmu).
	matched bool
	// Completion (guarded by c.lane.mu).
	done bool
	err  error
	sig  chan struct{} // synchronous operations: completion signal
	work *Work         // asynchronous operations
	stop func() bool   // stops the context watch of an asynchronous operation

	// Transfer to or from another process (the lane only).
	posted, completed, pieces int
	reqs                      [linkSlots]backend.Request
	hdr                       [p2pHeader]byte
}

// lane holds a comm's pending point-to-point operations.
type lane struct {
	ops     []*p2pOp
	scratch []*p2pOp
	async   int           // pending asynchronous operations
	idle    chan struct{} // closed when no operation is pending; nil when none is
	wake    chan struct{}
	timer   *time.Timer
}

func (c *Comm) initLane() {
	c.lane.wake = make(chan struct{}, 1)
	c.lane.timer = time.NewTimer(time.Hour)
	c.lane.timer.Stop()
	for i := range c.sigs {
		c.sigs[i] = make(chan struct{}, 1)
	}
}

// pokeLane wakes the lane (a new operation, a context that ended).
func (c *Comm) pokeLane() {
	select {
	case c.lane.wake <- struct{}{}:
	default:
	}
}

// postP2P posts o: it meets a local peer's matching operation at once if
// one is waiting, or it waits on the lane. It never blocks.
func (c *Comm) postP2P(o *p2pOp) {
	g := c.g
	o.c, o.done, o.err, o.matched = c, false, nil, false
	o.posted, o.completed, o.pieces = 0, 0, 0
	o.deadline = time.Now().Add(g.cfg.CommunicationTimeout)
	if o.send {
		o.l = c.link(c.rank, o.peer)
	} else {
		o.l = c.link(o.peer, c.rank)
	}
	c.laneMu.Lock()
	c.lane.ops = append(c.lane.ops, o)
	if o.work != nil {
		c.lane.async++
	}
	if c.lane.idle == nil {
		c.lane.idle = make(chan struct{})
		go c.runLane(c.lane.idle)
	}
	if o.l.remote {
		o.l.pq = append(o.l.pq, o)
	}
	c.laneMu.Unlock()
	if o.l.remote {
		c.pokeLane() // the lane fails it if the group is broken
		return
	}
	if err := c.g.Err(); err != nil {
		c.failP2P(o, c.brokenErr())
		return
	}
	c.matchLocal(o)
}

// matchLocal queues o on its link or completes it with the operation the
// peer posted first.
func (c *Comm) matchLocal(o *p2pOp) {
	l := o.l
	l.pmu.Lock()
	var m *p2pOp
	if o.send {
		if len(l.precv) > 0 {
			m = l.precv[0]
			l.precv = popFront(l.precv)
		} else {
			l.psend = append(l.psend, o)
		}
	} else {
		if len(l.psend) > 0 {
			m = l.psend[0]
			l.psend = popFront(l.psend)
		} else {
			l.precv = append(l.precv, o)
		}
	}
	if m != nil {
		m.matched, o.matched = true, true
	}
	l.pmu.Unlock()
	if m == nil {
		return
	}
	s, r := o, m
	if !o.send {
		s, r = m, o
	}
	if s.dt != r.dt || s.count != r.count {
		rerr := &MismatchError{Rank: r.c.rank, Call: r.String(), Peer: s.c.rank, PeerCall: s.String()}
		serr := &MismatchError{Rank: s.c.rank, Call: s.String(), Peer: r.c.rank, PeerCall: r.String()}
		r.c.breakWith(rerr)
		s.c.finish(s, serr)
		r.c.finish(r, rerr)
		return
	}
	copy(r.data, s.data)
	s.c.finish(s, nil)
	r.c.finish(r, nil)
}

func popFront(q []*p2pOp) []*p2pOp {
	copy(q, q[1:])
	q[len(q)-1] = nil
	return q[:len(q)-1]
}

func (o *p2pOp) String() string {
	k := collRecv
	if o.send {
		k = collSend
	}
	return fingerprint{kind: k, dt: o.dt, count: o.count}.String()
}

// finish completes o with err (once).
func (c *Comm) finish(o *p2pOp, err error) {
	c.laneMu.Lock()
	if o.done {
		c.laneMu.Unlock()
		return
	}
	o.done, o.err = true, err
	ops := c.lane.ops
	for i, p := range ops {
		if p == o {
			ops[i] = ops[len(ops)-1]
			ops[len(ops)-1] = nil
			c.lane.ops = ops[:len(ops)-1]
			break
		}
	}
	if o.work != nil {
		c.lane.async--
	}
	c.laneMu.Unlock()
	c.pokeLane()
	if o.stop != nil {
		o.stop()
		o.stop = nil
	}
	if w := o.work; w != nil {
		if err != nil {
			w.err = c.wrapErr(o.name, 0, err)
		}
		releasePinned(w.pin, nil)
		w.pin, w.op = nil, nil
		close(w.done)
		return
	}
	o.sig <- struct{}{}
}

// failP2P fails o unless a local peer already took it (then the peer
// completes it). It reports whether o failed.
func (c *Comm) failP2P(o *p2pOp, err error) bool {
	l := o.l
	if l.remote {
		c.cancelRemote(o)
		c.laneMu.Lock()
		for i, p := range l.pq {
			if p == o {
				copy(l.pq[i:], l.pq[i+1:])
				l.pq[len(l.pq)-1] = nil
				l.pq = l.pq[:len(l.pq)-1]
				break
			}
		}
		c.laneMu.Unlock()
		c.finish(o, err)
		return true
	}
	l.pmu.Lock()
	if o.matched {
		l.pmu.Unlock()
		return false
	}
	q := &l.precv
	if o.send {
		q = &l.psend
	}
	for i, p := range *q {
		if p == o {
			copy((*q)[i:], (*q)[i+1:])
			(*q)[len(*q)-1] = nil
			*q = (*q)[:len(*q)-1]
			break
		}
	}
	l.pmu.Unlock()
	c.finish(o, err)
	return true
}

// expired returns why o must fail now, or nil, and whether that failure
// breaks the group (a timeout or an ended context: the peer would wait).
func (c *Comm) expired(o *p2pOp, now time.Time) (error, bool) {
	select {
	case <-c.g.brokenCh:
		if err := o.ctx.Err(); err != nil {
			return &TimeoutError{Phase: o.phase(), Missing: []int{o.peer}, Ctx: err}, false
		}
		return c.brokenErr(), false
	default:
	}
	if err := o.ctx.Err(); err != nil {
		return &TimeoutError{Phase: o.phase(), Missing: []int{o.peer}, Ctx: err}, true
	}
	if now.After(o.deadline) {
		return &TimeoutError{Phase: o.phase() + c.deadlockHint(o), Missing: []int{o.peer}}, true
	}
	return nil, false
}

func (o *p2pOp) phase() string {
	if o.send {
		return fmt.Sprintf("%s to rank %d (%s): no matching Recv", o.name, o.peer, o)
	}
	return fmt.Sprintf("%s from rank %d (%s): no matching Send", o.name, o.peer, o)
}

// deadlockHint names the pattern when o is a blocking Send whose peer is
// itself blocked in a Send to this rank: both ranks Send before they Recv.
func (c *Comm) deadlockHint(o *p2pOp) string {
	if !o.send || o.work != nil || o.l.remote {
		return ""
	}
	g := c.g
	g.linkMu.Lock()
	back := g.linkMap[int64(o.peer)*int64(g.n)+int64(c.rank)]
	g.linkMu.Unlock()
	if back == nil {
		return ""
	}
	back.pmu.Lock()
	defer back.pmu.Unlock()
	for _, p := range back.psend {
		if p.work == nil && !p.matched {
			return fmt.Sprintf("; rank %d is itself blocked in a Send to rank %d: both ranks Send before they Recv "+
				"(use SendRecv, or SendAsync and RecvAsync)", o.peer, c.rank)
		}
	}
	return ""
}

// runLane progresses and times out the comm's pending operations until none
// is pending.
func (c *Comm) runLane(idle chan struct{}) {
	ln := &c.lane
	lastProgress := time.Now()
	for {
		c.laneMu.Lock()
		if len(ln.ops) == 0 {
			ln.idle = nil
			clear(ln.scratch)
			c.laneMu.Unlock()
			close(idle)
			return
		}
		ln.scratch = append(ln.scratch[:0], ln.ops...)
		c.laneMu.Unlock()
		now := time.Now()
		remote := false
		next := now.Add(time.Hour)
		for _, o := range ln.scratch {
			if err, brk := c.expired(o, now); err != nil {
				if c.failP2P(o, err) && brk {
					c.g.breakGroup(&BrokenError{Rank: c.rank, Op: o.name, Cause: err, hideCtx: true})
				}
				continue
			}
			if o.l.remote {
				remote = true
				if c.progressRemote(o) {
					lastProgress = now
				}
			}
			if o.deadline.Before(next) {
				next = o.deadline
			}
		}
		if remote {
			// Poll the transport: spin for 2 ms after progress, then
			// back off.
			select {
			case <-ln.wake:
			default:
				if time.Since(lastProgress) < 2*time.Millisecond {
					runtime.Gosched()
				} else {
					time.Sleep(50 * time.Microsecond)
				}
			}
			continue
		}
		ln.timer.Reset(time.Until(next) + time.Millisecond)
		select {
		case <-ln.wake:
		case <-ln.timer.C:
		case <-c.g.brokenCh:
		}
		ln.timer.Stop()
	}
}

// waitLane waits until the comm has no pending point-to-point operation.
func (c *Comm) waitLane(ctx context.Context) error {
	c.laneMu.Lock()
	idle := c.lane.idle
	c.laneMu.Unlock()
	return waitIdle(ctx, idle)
}

// Transfers to and from other processes. A message of n bytes travels as
// pieces of at most slotBytes: the first carries the header and the first
// slotBytes-p2pHeader bytes.

func (c *Comm) pieceRange(o *p2pOp, j int) (off, n int) {
	s := c.g.slotBytes
	total := len(o.data)
	if j == 0 {
		return 0, min(total, s-p2pHeader)
	}
	off = s - p2pHeader + (j-1)*s
	return off, min(s, total-off)
}

func (c *Comm) pieceCount(n int) int {
	s := c.g.slotBytes
	if n <= s-p2pHeader {
		return 1
	}
	return 1 + (n-(s-p2pHeader)+s-1)/s
}

// stage returns the link's Go staging slot i for point-to-point pieces.
func (c *Comm) pstage(l *link, i int) []byte {
	if l.pstage[i] == nil {
		l.pstage[i] = make([]byte, c.g.slotBytes)
	}
	return l.pstage[i]
}

// progressRemote advances o if it is the head of its link's queue; it
// reports whether a piece completed. A failure fails o (and breaks the
// group).
func (c *Comm) progressRemote(o *p2pOp) bool {
	l := o.l
	c.laneMu.Lock()
	head := len(l.pq) > 0 && l.pq[0] == o
	c.laneMu.Unlock()
	if !head {
		// Queued behind another message to the same peer: its deadline
		// starts when it reaches the head.
		o.deadline = time.Now().Add(c.g.cfg.CommunicationTimeout)
		return false
	}
	g := c.g
	if o.pieces == 0 {
		o.pieces = c.pieceCount(len(o.data))
	}
	proc, tag := g.procOf(o.peer), g.p2pTag(l.from, l.to)
	progressed := false
	for {
		// Post pieces while slots are free.
		for o.posted < o.pieces && o.posted-o.completed < linkSlots {
			j := o.posted
			buf := c.pstage(l, j%linkSlots)
			off, n := c.pieceRange(o, j)
			hn := 0
			if j == 0 {
				hn = p2pHeader
			}
			var req backend.Request
			var err error
			if o.send {
				if j == 0 {
					binary.LittleEndian.PutUint64(buf[0:], uint64(o.dt))
					binary.LittleEndian.PutUint64(buf[8:], uint64(o.count))
				}
				copy(buf[hn:hn+n], o.data[off:off+n])
				req, err = g.tr.Isend(buf[:hn+n], proc, tag)
			} else {
				req, err = g.tr.Irecv(buf[:hn+n], proc, tag)
			}
			if err != nil {
				c.failRemote(o, fmt.Errorf("%s with rank %d (process %d): %w", o.name, o.peer, proc, err))
				return progressed
			}
			o.reqs[j%linkSlots] = req
			o.posted++
		}
		if o.completed == o.posted {
			break
		}
		j := o.completed
		done, err := o.reqs[j%linkSlots].Test()
		if err != nil {
			o.reqs[j%linkSlots] = nil
			c.failRemote(o, fmt.Errorf("%s with rank %d (process %d) (sizes or types differ?): %w", o.name, o.peer, proc, err))
			return progressed
		}
		if !done {
			break
		}
		o.reqs[j%linkSlots] = nil
		o.completed++
		progressed = true
		o.deadline = time.Now().Add(g.cfg.CommunicationTimeout)
		if !o.send {
			buf := l.pstage[j%linkSlots]
			off, n := c.pieceRange(o, j)
			hn := 0
			if j == 0 {
				hn = p2pHeader
				dt := backend.DType(binary.LittleEndian.Uint64(buf[0:]))
				count := int64(binary.LittleEndian.Uint64(buf[8:]))
				if dt != o.dt || count != o.count {
					peer := p2pOp{send: true, dt: dt, count: count}
					c.failRemote(o, &MismatchError{Rank: c.rank, Call: o.String(), Peer: o.peer, PeerCall: peer.String()})
					return progressed
				}
			}
			copy(o.data[off:off+n], buf[hn:hn+n])
		}
	}
	if o.completed == o.pieces {
		c.laneMu.Lock()
		l.pq = popFront(l.pq)
		c.laneMu.Unlock()
		c.finish(o, nil)
	}
	return progressed
}

// failRemote fails o with err and breaks the group.
func (c *Comm) failRemote(o *p2pOp, err error) {
	c.g.breakGroup(&BrokenError{Rank: c.rank, Op: o.name, Cause: err, hideCtx: true})
	c.failP2P(o, err)
}

// cancelRemote cancels o's pieces in flight. A piece the transport cannot
// give back keeps its staging slot: the link stops using it.
func (c *Comm) cancelRemote(o *p2pOp) {
	for i, r := range o.reqs {
		if r == nil {
			continue
		}
		o.reqs[i] = nil
		if r.Cancel() != nil {
			o.l.pstage[i] = nil
		}
	}
}

// p2pTag is the transport tag of point-to-point messages from global rank
// a to b (collective traffic uses tag, the group's control messages
// ctrlTag).
func (g *Group) p2pTag(a, b int) int { return g.nl*g.nl + g.tag(a, b) }
