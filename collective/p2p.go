package collective

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/channel"
	"github.com/gocoll/gocoll/internal/memory"
	"github.com/gocoll/gocoll/internal/oplist"
	"github.com/gocoll/gocoll/internal/waitrec"
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
// Every step costs O(1) per operation, however many are outstanding: the
// queues are lists linked through the operations (opList), so matching,
// completing and failing one never scans the others; the lane keeps the
// local operations in posting order, which is deadline order, and looks
// only at the expired ones, at those whose context ended (queued for it by
// a context watch), at the synchronous call's (at most two) and at the head
// of each remote link's queue.
//
// Point-to-point calls are numbered in their own sequence per comm (lane.seq:
// a synchronous call when it starts, an asynchronous one when it is
// posted, which is call order), apart from the collectives' numbers; a
// failed operation's error, and the group's break, name its number.
//
// Posting never blocks, so asynchronous operations started back to back
// (SendAsync then RecvAsync on both ranks of a pair) always meet. Stream
// order: a point-to-point operation is posted after the comm's earlier
// operations ran; any other operation waits for the earlier point-to-point
// operations to complete.

// Send sends data to rank peer, which must call Recv (or SendRecv, or
// RecvAsync) with the same length and type, and returns once the peer
// received it. Point-to-point calls are not numbered with the collectives:
// they pair on the direction between the two ranks, in call order. Two
// ranks that both Send to each other and then Recv deadlock (in one
// process the Sends fail at once with ErrDeadlock, naming the pattern;
// across processes after CommunicationTimeout): use SendRecv, or SendAsync
// and RecvAsync. A blocking Send to this rank itself would wait for itself
// and is refused at once (ErrInvalidArgument): a rank sends to itself
// through SendRecv, SendAsync and RecvAsync, or a Batch.
func Send[T Elem](ctx context.Context, c *Comm, data []T, peer int) error {
	d := p2pDesc(collSend, "", data, peer)
	return c.run(ctx, &d)
}

// Recv receives into data what rank peer sends with Send (or SendRecv, or
// SendAsync). A length or type that differs from the sender's is a
// *MismatchError on both ranks. Like Send, it is refused with peer set to
// this rank itself.
func Recv[T Elem](ctx context.Context, c *Comm, data []T, peer int) error {
	d := p2pDesc(collRecv, "", data, peer)
	return c.run(ctx, &d)
}

// SendRecv sends send to rank to and receives recv from rank from in one
// call: both are posted before either is waited for, so pairwise exchanges
// (to == from) and shifts along a ring (every rank sends to r+1 and
// receives from r-1) never deadlock, whatever the sizes. to or from may be
// -1 to only receive or only send. The peer sending to this rank must call
// Send, SendRecv or SendAsync with the same length and type; the one
// receiving, Recv, SendRecv or RecvAsync. send and recv may be the same
// slice (MPI_Sendrecv_replace: what it holds when the call starts is
// sent); any other overlap is refused. to and from may both be this rank
// itself (the message is copied in the process, as nccl-tests' sendrecv on
// one rank), not one of them alone.
func SendRecv[T Elem](ctx context.Context, c *Comm, send []T, to int, recv []T, from int) error {
	return c.run(ctx, &desc{kind: collSendRecv, dt: dtypeOf[T](), send: asBytes(send), recv: asBytes(recv), to: to, from: from})
}

// SendAsync starts Send and returns at once; data must not be modified
// until the Work is done. Point-to-point operations started back to back
// are all posted before any is waited for, so a pairwise exchange of
// SendAsync and RecvAsync on both ranks (in any order) never deadlocks, nor
// does a SendAsync and a RecvAsync to this rank itself. ctx bounds the
// operation; CommunicationTimeout bounds its wait for the peer.
func SendAsync[T Elem](ctx context.Context, c *Comm, data []T, peer int) *Work {
	return c.start(ctx, p2pDesc(collSend, "SendAsync", data, peer))
}

// RecvAsync starts Recv and returns at once; data must not be read or
// modified until the Work is done.
func RecvAsync[T Elem](ctx context.Context, c *Comm, data []T, peer int) *Work {
	return c.start(ctx, p2pDesc(collRecv, "RecvAsync", data, peer))
}

// p2pDesc describes a Send (kind collSend) or a Recv (collRecv) of data
// with peer, through entry point entry ("": the kind's).
func p2pDesc[T Elem](kind collKind, entry string, data []T, peer int) desc {
	d := desc{kind: kind, entry: entry, dt: dtypeOf[T](), to: -1, from: -1}
	if kind == collSend {
		d.send, d.to = asBytes(data), peer
	} else {
		d.recv, d.from = asBytes(data), peer
	}
	return d
}

// execP2P runs the point-to-point call d, checked: numbered, it posts its
// operations (a send to d.to, a receive from d.from) and waits for them;
// an asynchronous one (d.async, run by the comm's worker for its Work)
// posts its operation, which completes the Work.
func (c *Comm) execP2P(ctx context.Context, d *desc) (err error) {
	name := d.name()
	owned, err := c.enterOp(ctx, name, false, true)
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	es := d.dt.Size()
	send := d.send
	if d.from >= 0 && memory.SameSlice(send, d.recv) {
		// One buffer (MPI_Sendrecv_replace): send what it holds now, from
		// the comm's pooled copy, while the peer's data lands in it.
		if cap(c.p2pStage) < len(send) {
			c.p2pStage = make([]byte, len(send))
		}
		send = c.p2pStage[:len(send)]
		copy(send, d.send)
	}
	var ops [2]*p2pOp
	if d.to >= 0 {
		ops[0] = &p2pOp{name: name, send: true, peer: d.to, data: send, dt: d.dt, count: int64(len(send) / es), ctx: ctx, sig: c.sigs[0]}
	}
	if d.from >= 0 {
		ops[1] = &p2pOp{name: name, peer: d.from, data: d.recv, dt: d.dt, count: int64(len(d.recv) / es), ctx: ctx, sig: c.sigs[1]}
	}
	if d.async {
		// Posted for the Work the worker runs (start: one operation).
		w := c.running.Load()
		o := ops[0]
		if o == nil {
			o = ops[1]
		}
		o.sig, o.work = nil, w
		if ctx.Done() != nil {
			o.stop = context.AfterFunc(ctx, func() { c.attendP2P(o) })
		}
		w.posted = true
		c.postP2P(o)
		return nil
	}
	for _, o := range ops {
		if o != nil {
			c.postP2P(o)
		}
	}
	// Blocked until the peers post theirs: a wait cycle among blocked
	// ranks fails at once (blockP2P), and Group.Pending reports the wait.
	c.blockP2P(&ops)
	c.beginWait("", waitrec.P2P, 0)
	for _, o := range ops {
		if o == nil {
			continue
		}
		select {
		case <-o.sig:
		case <-ctx.Done():
			c.pokeLane()
			<-o.sig
		}
	}
	c.endWait()
	c.unblockP2P()
	// The failure that caused the other one, if any, comes first.
	for _, o := range ops {
		if o != nil && o.err != nil {
			if _, broken := o.err.(*BrokenError); !broken || err == nil {
				err = o.err
			}
		}
	}
	return err
}

// refuseP2P fails point-to-point call name, refused on this rank with err
// before it posted anything: the call is numbered, and breaks the group
// naming itself, so the peers waiting for its operations fail at once
// (there is no rendezvous to tell them, as invalidCall tells a
// collective's peers).
func (c *Comm) refuseP2P(ctx context.Context, name string, err error) error {
	owned, e := c.enterOp(ctx, name, false, true)
	if e != nil && ctx.Err() != nil {
		return e // the call's context ended: enterOp broke the group naming it
	}
	if e != nil {
		// Not started (the group closed or broke, the comm in use, the
		// context ended): the peers are told all the same.
		c.g.breakGroup(&BrokenError{Rank: c.rank, Op: name, P2P: true, Cause: err, hideCtx: true})
		return c.wrapP2P(name, 0, err)
	}
	c.breakWith(err)
	c.leave(owned, &err)
	return err
}

// p2pHeader is the size of the header of a message to another process: the
// element type and the element count of the whole message.
const p2pHeader = 16

// p2pOp is one posted operation. It is never reused: the lane may still
// hold a finished operation in its scratch list, so only fields that do not
// change after posting are read without the locks. The transfer of an
// operation with another process is its link's (only the head of a link's
// queue moves).
type p2pOp struct {
	c     *Comm
	name  string
	seq   uint64 // the call's number among the comm's point-to-point calls
	peer  int
	l     *link
	data  []byte
	dt    backend.DType
	count int64
	ctx   context.Context

	deadline time.Time
	send     bool
	// Local matching (guarded by l.pmu): taken off its link's queue, by
	// the peer's matching operation or by a failure.
	taken bool
	// Completion (guarded by c.laneMu).
	live bool // posted
	attn bool // queued on lane.attn
	done bool
	err  error
	// ql links o in its link's queue (psend or precv, guarded by l.pmu; pq,
	// guarded by laneMu), ll in the lane's list of local operations.
	ql, ll opLinks
	sig    chan struct{} // synchronous operations: completion signal
	work   *Work         // asynchronous operations
	stop   func() bool   // stops the context watch of an asynchronous operation
}

// opLinks are an operation's links in one opList.
type opLinks = oplist.Links[p2pOp]

// opList is a FIFO of operations linked through their own opLinks (ll in
// the lane's list, else ql): push, pop and removal are O(1) and allocate
// nothing (internal/oplist).
type opList = oplist.List[p2pOp]

// lane holds a comm's pending point-to-point operations (guarded by
// laneMu).
type lane struct {
	local   opList        // operations with a rank of this process, in posting order
	rlinks  []*link       // links to other processes with operations queued
	sync    [2]*p2pOp     // the synchronous call's pending operations
	attn    []*p2pOp      // asynchronous operations whose context ended
	scratch []*p2pOp      // the lane's pass
	pending int           // pending operations
	async   int           // pending asynchronous operations
	idle    chan struct{} // closed when no operation is pending; nil when none is
	wake    chan struct{}
	timer   *time.Timer
	// The lane's work: operations visited, and passes (tests check that
	// the work per operation is bounded).
	visits, passes uint64

	// goneSeen: the group's gone marks the lane looked at (the lane's).
	goneSeen uint64

	// Not guarded by laneMu: owned by the comm's running operation.
	seq   uint64 // point-to-point calls numbered so far
	inP2P bool   // the running synchronous call is point-to-point
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
	o.c, o.done, o.err, o.taken = c, false, nil, false
	o.seq = c.lane.seq // numbered by enterOp (an asynchronous call in queue order)
	if o.send {
		o.l = c.link(c.rank, o.peer)
	} else {
		o.l = c.link(o.peer, c.rank)
	}
	l, ln := o.l, &c.lane
	// One goroutine posts a comm's operations at a time (its caller, or
	// its worker), so the local list is in deadline order.
	o.deadline = time.Now().Add(g.cfg.CommunicationTimeout)
	c.laneMu.Lock()
	o.live = true
	ln.pending++
	if o.work != nil {
		ln.async++
	} else if ln.sync[0] == nil {
		ln.sync[0] = o
	} else {
		ln.sync[1] = o
	}
	if ln.idle == nil {
		ln.idle = make(chan struct{})
		go c.runLane(ln.idle)
	}
	if l.Remote() {
		l.pq.Push(o, &o.ql)
		if !l.active {
			l.active = true
			ln.rlinks = append(ln.rlinks, l)
		}
	} else {
		ln.local.Push(o, &o.ll)
	}
	c.laneMu.Unlock()
	if o.work != nil && o.ctx.Err() != nil {
		// Its context watch may have fired before it was posted.
		c.attendP2P(o)
	}
	if l.Remote() {
		c.pokeLane() // the lane fails it if the group is broken
		return
	}
	if err := c.g.Err(); err != nil {
		c.failP2P(o, c.brokenErr())
		return
	}
	c.matchLocal(o)
	// A peer gone before o was posted never matches it (the lane looks at
	// the operations posted before a rank went).
	if gi := g.goneRank(o.peer); gi != nil {
		if ge := c.goneErr(o.peer, gi, o.phase()); c.failP2P(o, ge) {
			c.breakP2P(o, ge)
		}
	}
}

// matchLocal queues o on its link or completes it with the operation the
// peer posted first.
func (c *Comm) matchLocal(o *p2pOp) {
	l := o.l
	l.pmu.Lock()
	if o.taken {
		// The lane failed it since it was posted.
		l.pmu.Unlock()
		return
	}
	var m *p2pOp
	if o.send {
		if m = l.precv.Pop(); m == nil {
			l.psend.Push(o, &o.ql)
		}
	} else {
		if m = l.psend.Pop(); m == nil {
			l.precv.Push(o, &o.ql)
		}
	}
	if m != nil {
		m.taken, o.taken = true, true
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
		r.c.breakP2P(r, rerr)
		s.c.finish(s, serr)
		r.c.finish(r, rerr)
		return
	}
	copy(r.data, s.data)
	s.c.finish(s, nil)
	r.c.finish(r, nil)
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
	ln := &c.lane
	c.laneMu.Lock()
	if o.done {
		c.laneMu.Unlock()
		return
	}
	o.done, o.err = true, err
	if o.l.Remote() {
		o.l.pq.Remove(&o.ql)
	} else {
		ln.local.Remove(&o.ll)
	}
	ln.pending--
	if o.work != nil {
		ln.async--
	}
	for i, p := range ln.sync {
		if p == o {
			ln.sync[i] = nil
		}
	}
	last := ln.pending == 0
	c.laneMu.Unlock()
	if last {
		c.pokeLane() // the lane ends
	}
	if o.stop != nil {
		o.stop()
		o.stop = nil
	}
	if w := o.work; w != nil {
		if err != nil {
			w.err = c.wrapP2P(o.name, o.seq, err)
		}
		w.mem.release()
		w.fn, w.ctx = nil, nil
		close(w.done)
		return
	}
	o.sig <- struct{}{}
}

// failP2P fails o unless it already ended or a local peer already took it
// (then the peer completes it). It reports whether o failed.
func (c *Comm) failP2P(o *p2pOp, err error) bool {
	l := o.l
	if l.Remote() {
		// Only the lane fails remote operations.
		c.laneMu.Lock()
		done := o.done
		c.laneMu.Unlock()
		if done {
			return false
		}
		c.cancelRemote(o)
		c.finish(o, err)
		return true
	}
	l.pmu.Lock()
	if o.taken {
		l.pmu.Unlock()
		return false
	}
	o.taken = true
	if o.send {
		l.psend.Remove(&o.ql)
	} else {
		l.precv.Remove(&o.ql)
	}
	l.pmu.Unlock()
	c.finish(o, err)
	return true
}

// attendP2P asks the lane to look at o: its context ended. It runs on the
// context watch of an asynchronous operation.
func (c *Comm) attendP2P(o *p2pOp) {
	c.laneMu.Lock()
	add := o.live && !o.done && !o.attn
	if add {
		o.attn = true
		c.lane.attn = append(c.lane.attn, o)
	}
	c.laneMu.Unlock()
	if add {
		c.pokeLane()
	}
}

// breakP2P breaks the group with o's failure, naming o.
func (c *Comm) breakP2P(o *p2pOp, err error) {
	c.g.breakGroup(&BrokenError{Rank: c.rank, Op: o.name, Seq: o.seq, P2P: true, Cause: err, hideCtx: true})
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
	if gi := c.g.goneRank(o.peer); gi != nil {
		return c.goneErr(o.peer, gi, o.phase()), true
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
	if !o.send || o.work != nil || o.l.Remote() {
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
	// Once per failing Send: a walk of the peer's queue is fine here.
	for p := back.psend.Head(); p != nil; p = p.ql.Next() {
		if p.work == nil {
			return fmt.Sprintf("; rank %d is itself blocked in a Send to rank %d: both ranks Send before they Recv "+
				"(use SendRecv, or SendAsync and RecvAsync)", o.peer, c.rank)
		}
	}
	return ""
}

// runLane progresses and times out the comm's pending operations until none
// is pending. A pass visits only the operations that must fail or progress
// (see the top of the file), so its work is O(1) per operation over the
// operations' lives, plus one visit per remote link with operations queued.
func (c *Comm) runLane(idle chan struct{}) {
	ln := &c.lane
	lastProgress := time.Now()
	for {
		c.laneMu.Lock()
		if ln.pending == 0 {
			ln.idle = nil
			clear(ln.attn)
			ln.attn = ln.attn[:0]
			c.laneMu.Unlock()
			close(idle)
			return
		}
		now := time.Now()
		next := now.Add(time.Hour)
		s := ln.scratch[:0]
		if c.g.isBroken.Load() {
			// Every pending operation fails, once.
			for o := ln.local.Head(); o != nil; o = o.ll.Next() {
				s = append(s, o)
			}
			for _, l := range ln.rlinks {
				for o := l.pq.Head(); o != nil; o = o.ql.Next() {
					s = append(s, o)
				}
			}
		} else {
			for _, o := range ln.attn {
				if !o.done {
					s = append(s, o)
				}
			}
			for _, o := range ln.sync {
				if o != nil && o.ctx.Err() != nil {
					s = append(s, o)
				}
			}
			// Posting order is deadline order: the expired ones lead.
			var o *p2pOp
			for o = ln.local.Head(); o != nil; o = o.ll.Next() {
				if o.deadline.After(now) {
					next = o.deadline
					break
				}
				s = append(s, o)
			}
			if ev := c.g.goneEvents.Load(); ev != ln.goneSeen {
				// A rank went (rare): the rest whose peer is gone fail.
				ln.goneSeen = ev
				for ; o != nil; o = o.ll.Next() {
					if c.g.goneRank(o.peer) != nil {
						s = append(s, o)
					}
				}
			}
		}
		clear(ln.attn)
		ln.attn = ln.attn[:0]
		// The heads of the remote links' queues progress.
		remote := false
		j := 0
		for _, l := range ln.rlinks {
			if l.pq.Head() == nil {
				l.active = false
				continue
			}
			ln.rlinks[j] = l
			j++
			s = append(s, l.pq.Head())
			remote = true
		}
		clear(ln.rlinks[j:])
		ln.rlinks = ln.rlinks[:j]
		ln.visits += uint64(len(s))
		ln.passes++
		c.laneMu.Unlock()
		for _, o := range s {
			if o.l.Remote() && o.l.xop != o {
				// Queued behind another message to the same peer: its
				// deadline starts when it reaches the head.
				o.deadline = now.Add(c.g.cfg.CommunicationTimeout)
			}
			if err, brk := c.expired(o, now); err != nil {
				if c.failP2P(o, err) && brk {
					c.breakP2P(o, err)
				}
				continue
			}
			if o.l.Remote() && c.progressRemote(o) {
				lastProgress = now
			}
		}
		clear(s)
		ln.scratch = s[:0]
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
	head := l.pq.Head() == o && !o.done
	c.laneMu.Unlock()
	if !head {
		return false
	}
	g := c.g
	if l.xop != o {
		// It reached the head: its transfer starts.
		l.xop, l.xposted, l.xcompleted, l.xpieces = o, 0, 0, c.pieceCount(len(o.data))
	}
	proc, tag := g.procOf(o.peer), g.p2pTag(l.From, l.To)
	progressed := false
	for {
		// Post pieces while slots are free.
		for l.xposted < l.xpieces && l.xposted-l.xcompleted < channel.Slots {
			j := l.xposted
			buf := c.pstage(l, j%channel.Slots)
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
			l.preqs[j%channel.Slots] = req
			l.xposted++
		}
		if l.xcompleted == l.xposted {
			break
		}
		j := l.xcompleted
		done, err := l.preqs[j%channel.Slots].Test()
		if err != nil {
			l.preqs[j%channel.Slots] = nil
			c.failRemote(o, fmt.Errorf("%s with rank %d (process %d) (sizes or types differ?): %w", o.name, o.peer, proc, err))
			return progressed
		}
		if !done {
			break
		}
		l.preqs[j%channel.Slots] = nil
		l.xcompleted++
		progressed = true
		o.deadline = time.Now().Add(g.cfg.CommunicationTimeout)
		if !o.send {
			buf := l.pstage[j%channel.Slots]
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
	if l.xcompleted == l.xpieces {
		l.xop = nil
		c.finish(o, nil) // and takes it off the link's queue
	}
	return progressed
}

// failRemote fails o with err and breaks the group.
func (c *Comm) failRemote(o *p2pOp, err error) {
	c.breakP2P(o, err)
	c.failP2P(o, err)
}

// cancelRemote cancels o's pieces in flight, if its transfer started. A
// piece the transport cannot give back keeps its staging slot: the link
// stops using it.
func (c *Comm) cancelRemote(o *p2pOp) {
	l := o.l
	if l.xop != o {
		return
	}
	l.xop = nil
	for i, r := range l.preqs {
		if r == nil {
			continue
		}
		l.preqs[i] = nil
		if r.Cancel() != nil {
			l.pstage[i] = nil
		}
	}
}

// p2pTag is the transport tag of point-to-point messages from global rank
// a to b (collective traffic uses tag, the group's control messages
// ctrlTag).
func (g *Group) p2pTag(a, b int) int { return g.nl*g.nl + g.tag(a, b) }
