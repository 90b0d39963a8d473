// Package p2p is a comm's point-to-point engine: the operations a rank
// posts (a send to a peer, a receive from one), matched with the peer's,
// moved, and completed once, or failed at their deadline, when their
// context ends and when the group breaks. The errors it reports are made by
// the comm it serves (Env), which owns their types.
//
//   - Between ranks of one process, a posted send and receive meet on the
//     link between the two ranks (FIFO per direction): whoever posts second
//     copies the send slice into the receive slice, once, and completes
//     both. No device and no staging is involved.
//   - With a rank of another process, the engine's lane goroutine moves the
//     message through the transport in slot-sized pieces, staged through Go
//     memory the link owns (a piece the transport cannot give back stays
//     with the transport, never reused or freed), with a 16-byte header in
//     the first piece so a mismatched pair is reported, not misread.
//   - The lane also fails the pending operations at their deadline
//     (CommunicationTimeout after posting, or after the last progress of a
//     transfer), when their context ends, when the group breaks and, where
//     the transport's requests report a peer that stopped responding
//     (backend.HangReporter: the mpi package's heartbeat), as soon as they
//     do. It runs while operations are pending.
//   - A synchronous call whose operations are all with ranks of this
//     process (Engine.Run) never starts the lane: its caller waits for
//     them and fails them itself, at their deadline, when its context
//     ends, when the group breaks and when their peer is gone, as the lane
//     would. Its two operations are the engine's own, reused from one such
//     call to the next (see Op).
//   - A synchronous call with a rank of another process runs on two other
//     operations of the engine's own, reused too: the lane marks the
//     operations of its pass as held, and a call reuses one only once the
//     lane's pass that held it ended (see Op). The lane starts without
//     allocating, so such a call allocates nothing in the steady state.
//
// Every step costs O(1) per operation, however many are outstanding: the
// queues are lists linked through the operations (internal/oplist), so
// matching, completing and failing one never scans the others; the lane
// keeps the local operations in posting order, which is deadline order, and
// looks only at the expired ones, at those whose context ended (queued for
// it by their context's watch: watch.go), at the synchronous call's (at most two) and at
// the head of each remote link's queue.
package p2p

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/channel"
	"github.com/gocoll/gocoll/internal/oplist"
	"github.com/gocoll/gocoll/internal/parktimer"
)

// Env is the comm an engine serves: the group's state, and the errors of
// its API.
type Env interface {
	// Broken returns the error a rank gets from the group once it is
	// broken (the same value each time: a failure is told apart from the
	// break by identity), or nil.
	Broken() error
	// BrokenCh is closed when the group breaks.
	BrokenCh() <-chan struct{}
	// GoneEvents counts the gone marks made in the group so far.
	GoneEvents() uint64
	// Gone returns o's failure when its peer is a gone rank of this
	// process, else nil.
	Gone(o *Op) error
	// Timeout is o's failure at its deadline (ctxErr nil) or when its
	// context ended (ctxErr).
	Timeout(o *Op, ctxErr error) error
	// Mismatch is o's failure when the peer's message has type dt and
	// count elements.
	Mismatch(o *Op, dt backend.DType, count int64) error
	// Break breaks the group with o's failure.
	Break(o *Op, err error)
	// Complete ends the asynchronous operation o (o.Work) with err.
	Complete(o *Op, err error)
	// CommunicationTimeout bounds an operation's wait for its peer.
	CommunicationTimeout() time.Duration
	// Blocked: the caller of a synchronous call (Engine.Run) blocks in its
	// operations, published (Engine.Blocked), from now on waitrec.Now's
	// clock, which it returns; Unblocked: it returns.
	Blocked() time.Duration
	Unblocked()
	// Spin is how long the caller of a synchronous call polls for its
	// operations before it parks (0: it parks at once).
	Spin() time.Duration
}

// Header is the size of the header of a message to another process: the
// element type and the element count of the whole message.
const Header = 16

// Op is one posted operation. The operation of an asynchronous call is
// reused once its handle was completed and nothing holds it (watch.go).
// The two operations of a synchronous call with ranks of this
// process are the engine's own (Engine.Run), reused by its next such call:
// nothing holds them once the call returns (the lane never sees them, a
// peer is done with one before it signals its completion, and a reader of
// the published ones pins the engine, see Pin). Those of a synchronous call
// with a rank of another process are two others of the engine's own: the
// lane may still hold one, finished, in its pass (it reads the fields of
// the operations it took for the pass without the locks), so the lane
// marks the operations of a pass held (under the engine's mu) until the
// pass ends, and Run reuses one only once it is not held (Engine.op): a
// pass never meets an operation reused under it. The transfer of an
// operation with another process is its link's (only the head of a link's
// queue moves).
type Op struct {
	Name  string
	Seq   uint64 // the call's number among the comm's point-to-point calls
	Peer  int
	Send  bool
	Data  []byte
	DT    backend.DType
	Count int64
	Ctx   context.Context
	// Work is the asynchronous operation's handle (Env.Complete ends it);
	// nil for a synchronous one, whose caller waits (Engine.Wait).
	Work any

	e        *Engine
	l        *Link
	deadline time.Time
	// Local matching (guarded by l.mu): taken off its link's queue, by
	// the peer's matching operation or by a failure.
	taken bool
	// Completion (guarded by e.mu).
	live bool // posted
	attn bool // queued on e.attn
	own  bool // the engine's own: its caller waits for it and fails it (Engine.Run)
	done bool
	// wrote: a piece of a remote receive reached Data (the lane's).
	wrote bool
	// held: in the lane's pass (Engine.run); drop: the references to the
	// caller's memory and context are dropped when the pass ends (a
	// reused operation whose call returned).
	held, drop bool
	// completed: an asynchronous operation's handle was completed (its
	// record is reused once nothing holds it: watch.go).
	completed bool
	err       error
	// watch is the registration on its context's end (asynchronous; cl
	// links o in its list).
	watch *watch
	cl    links
	// ql links o in its link's queue (send or recv, guarded by l.mu; pq,
	// guarded by e.mu), ll in the engine's list of local operations.
	ql, ll links
	sig    chan struct{} // synchronous operations: completion signal
}

type (
	links = oplist.Links[Op]
	list  = oplist.List[Op]
)

// Remote reports whether o's peer is a rank of another process.
func (o *Op) Remote() bool { return o.l.remote }

// Done reports whether o completed.
func (o *Op) Done() bool {
	o.e.mu.Lock()
	defer o.e.mu.Unlock()
	return o.done
}

// Err is o's failure, once it completed (Engine.Wait).
func (o *Op) Err() error { return o.err }

// Unmatched reports whether o is a synchronous operation with a rank of
// this process still waiting on its link for the peer's.
func (o *Op) Unmatched() bool {
	if o.l.remote || o.Work != nil {
		return false
	}
	o.l.mu.Lock()
	defer o.l.mu.Unlock()
	return !o.taken
}

// Link is the point-to-point state of the link from one rank to another.
// Between ranks of one process: the operations posted on it and not yet
// matched, in order (guarded by mu). To or from another process: the
// engine's operations on it in order, and whether it is on the lane's list
// (guarded by the engine's mu); the transfer of the first (xop: its pieces
// and their requests) and the staging (the lane only).
type Link struct {
	mu         sync.Mutex
	send, recv list
	pq         list
	active     bool

	remote                       bool
	tr                           backend.Transport
	proc, tag, slot              int
	xop                          *Op
	xposted, xcompleted, xpieces int
	reqs                         [channel.Slots]backend.Request
	stage                        [channel.Slots][]byte
}

// InitRemote makes l a link with a rank of another process: its messages
// travel through tr to process proc with tag, in pieces of slot bytes.
func (l *Link) InitRemote(tr backend.Transport, proc, tag, slot int) {
	l.remote, l.tr, l.proc, l.tag, l.slot = true, tr, proc, tag, slot
}

// SyncSendQueued reports whether a synchronous send waits on l for its
// receive.
func (l *Link) SyncSendQueued() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Once per failing send: a walk of the queue is fine here.
	for p := l.send.Head(); p != nil; p = p.ql.Next() {
		if p.Work == nil {
			return true
		}
	}
	return false
}

// Engine holds a comm's pending point-to-point operations (guarded by mu).
type Engine struct {
	env     Env
	mu      sync.Mutex
	local   list          // operations with a rank of this process, in posting order
	rlinks  []*Link       // links to other processes with operations queued
	sync    [2]*Op        // the synchronous call's pending operations
	attn    []*Op         // asynchronous operations whose context ended
	free    []*Op         // asynchronous operation records for reuse (watch.go)
	watches []*watch      // registrations on the end of their contexts (watch.go)
	scratch []*Op         // the lane's pass
	pending int           // pending operations
	async   int           // pending asynchronous operations
	running bool          // the lane runs: an operation is pending, or it is ending
	idle    chan struct{} // closed when the lane ends; made by Idle while it runs
	runLane func()        // the lane's goroutine (made once: its start allocates nothing)
	wake    chan struct{}
	timer   *time.Timer
	sigs    [2]chan struct{} // completion signals of a synchronous send and receive
	// own are the operations of a synchronous call with ranks of this
	// process (reused, see Op); ownLeft counts those not completed
	// (guarded by mu), and the last to complete signals ownDone. Its
	// caller waits with ownWake (Poke: a rank went) and ownTimer (their
	// deadline; armed lazily, left running from one call to the next).
	own      [2]Op
	rown     [2]Op         // a synchronous call's with another process (see Op)
	released chan struct{} // the lane's pass that held an operation of rown ended
	relWait  bool          // Run waits on released
	// reuseWaits counts those waits (tests see that they happen).
	reuseWaits uint64
	ownLeft    int
	ownDone    chan struct{}
	ownWake    chan struct{}
	ownTimer   parktimer.Timer
	// The lane's work: operations visited, and passes (tests check that
	// the work per operation is bounded).
	visits, passes uint64
	// goneSeen: the gone marks the lane looked at (the lane's).
	goneSeen uint64
	// stage holds the send of a SendRecv with one buffer (the comm's
	// running call).
	stage []byte
	// blk: the synchronous call's operations while its caller is blocked
	// in them (Block), read by any goroutine; blkEpoch counts their
	// changes.
	blk      [2]atomic.Pointer[Op]
	blkEpoch atomic.Uint64
	// pins counts the readers of the published operations (Pin).
	pins atomic.Int64
}

// Init prepares e to serve env.
func (e *Engine) Init(env Env) {
	e.env = env
	e.wake = make(chan struct{}, 1)
	e.timer = time.NewTimer(time.Hour)
	e.timer.Stop()
	e.ownDone = make(chan struct{}, 1)
	e.ownWake = make(chan struct{}, 1)
	e.released = make(chan struct{}, 1)
	e.runLane = e.run
	e.ownTimer.Init()
	for i := range e.sigs {
		e.sigs[i] = make(chan struct{}, 1)
	}
}

// Stage returns n bytes of the engine's pooled staging (one user at a
// time: the comm's running call).
func (e *Engine) Stage(n int) []byte {
	if cap(e.stage) < n {
		e.stage = make([]byte, n)
	}
	return e.stage[:n]
}

// Block publishes the synchronous call's operations while its caller waits
// for them (the edges of the wait-for graph among blocked ranks,
// internal/waitfor), and Unblock withdraws them: it returns once no reader
// that may have loaded them is left (Pin), so the engine may reuse them.
func (e *Engine) Block(ops *[2]*Op) {
	for i, o := range ops {
		e.blk[i].Store(o)
	}
	e.blkEpoch.Add(1)
}

func (e *Engine) Unblock() {
	e.blk[0].Store(nil)
	e.blk[1].Store(nil)
	e.blkEpoch.Add(1)
	// A reader pinned the engine before it loaded an operation, and reads
	// a few fields and locks: wait for it to be done.
	for e.pins.Load() != 0 {
		runtime.Gosched()
	}
}

// Pin lets the caller read the operations Blocked returns until Unpin:
// their caller's Unblock waits for it, so they are not reused meanwhile.
// Between the two the caller must not wait for the engine's caller.
func (e *Engine) Pin()   { e.pins.Add(1) }
func (e *Engine) Unpin() { e.pins.Add(-1) }

// Blocked returns the published operation i (0 or 1), or nil; it may be
// read while the engine is pinned (Pin). Epoch counts the changes of what
// Block published.
func (e *Engine) Blocked(i int) *Op { return e.blk[i].Load() }
func (e *Engine) Epoch() uint64     { return e.blkEpoch.Load() }

// BlockedOn returns the peer that the published operation i waits for if
// it is unmatched and the peer is a rank of this process, else -1.
func (e *Engine) BlockedOn(i int) int {
	e.Pin()
	defer e.Unpin()
	if o := e.blk[i].Load(); o != nil && o.Unmatched() {
		return o.Peer
	}
	return -1
}

// Poke wakes the lane and the caller of a synchronous call: a rank went.
func (e *Engine) Poke() {
	e.pokeLane()
	select {
	case e.ownWake <- struct{}{}:
	default:
	}
}

// pokeLane wakes the lane (a new operation, a context that ended, the last
// operation done).
func (e *Engine) pokeLane() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Async returns the number of pending asynchronous operations.
func (e *Engine) Async() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.async
}

// Work returns the lane's work so far: the operations it visited and its
// passes.
func (e *Engine) Work() (visits, passes uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.visits, e.passes
}

// Post posts o on link l: it meets a local peer's matching operation at
// once if one is waiting, or it waits on the lane. It never blocks. One
// goroutine posts an engine's operations at a time.
func (e *Engine) Post(o *Op, l *Link) {
	o.e, o.l, o.done, o.err, o.taken, o.wrote = e, l, false, nil, false, false
	if o.Work == nil {
		o.sig = e.sigs[0]
		if !o.Send {
			o.sig = e.sigs[1]
		}
	}
	// One goroutine posts at a time, so the local list is in deadline
	// order.
	o.deadline = time.Now().Add(e.env.CommunicationTimeout())
	e.mu.Lock()
	o.live = true
	e.pending++
	if o.Work != nil {
		e.async++
		e.watchCtx(o)
	} else if e.sync[0] == nil {
		e.sync[0] = o
	} else {
		e.sync[1] = o
	}
	if !e.running {
		e.running = true
		go e.runLane()
	}
	if l.remote {
		l.pq.Push(o, &o.ql)
		if !l.active {
			l.active = true
			e.rlinks = append(e.rlinks, l)
		}
	} else {
		e.local.Push(o, &o.ll)
	}
	// From here on an asynchronous o may complete and its record go back
	// to the free ones (the lane, a peer): only its poster reuses it, but
	// what reuse drops is read before.
	async, ctx := o.Work != nil, o.Ctx
	e.mu.Unlock()
	if async && ctx.Err() != nil {
		// Its context may have ended before its watch was made.
		e.Attend(o)
	}
	if l.remote {
		e.pokeLane() // the lane fails it if the group is broken
		return
	}
	e.meet(o)
}

// postOwn posts the engine's own operation o (Engine.Run) on its link, a
// link with a rank of this process: unlike Post it leaves o to its caller,
// who waits for it (await), counted in e.ownLeft.
func (e *Engine) postOwn(o *Op) {
	o.e, o.done, o.err, o.taken, o.own = e, false, nil, false, true
	e.meet(o)
}

// meet completes o, posted with a rank of this process, with the matching
// operation its peer posted first, or queues it on its link; it fails o
// at once if the group is broken or the peer gone.
func (e *Engine) meet(o *Op) {
	if err := e.env.Broken(); err != nil {
		e.Fail(o, err)
		return
	}
	e.matchLocal(o)
	// A peer gone before o was posted never matches it (the lane, or
	// o's caller, looks at the operations posted before a rank went).
	if ge := e.env.Gone(o); ge != nil && e.Fail(o, ge) {
		e.env.Break(o, ge)
	}
}

// Wait waits until the synchronous operation o completed; once ctx ends
// the lane fails it (then it completes).
func (e *Engine) Wait(ctx context.Context, o *Op) {
	select {
	case <-o.sig:
	case <-ctx.Done():
		e.pokeLane()
		<-o.sig
	}
}

// matchLocal queues o on its link or completes it with the operation the
// peer posted first.
func (e *Engine) matchLocal(o *Op) {
	l := o.l
	l.mu.Lock()
	if o.taken {
		// The lane failed it since it was posted.
		l.mu.Unlock()
		return
	}
	var m *Op
	if o.Send {
		if m = l.recv.Pop(); m == nil {
			l.send.Push(o, &o.ql)
		}
	} else {
		if m = l.send.Pop(); m == nil {
			l.recv.Push(o, &o.ql)
		}
	}
	if m != nil {
		m.taken, o.taken = true, true
	}
	l.mu.Unlock()
	if m == nil {
		return
	}
	s, r := o, m
	if !o.Send {
		s, r = m, o
	}
	if s.DT != r.DT || s.Count != r.Count {
		rerr := r.e.env.Mismatch(r, s.DT, s.Count)
		serr := s.e.env.Mismatch(s, r.DT, r.Count)
		r.e.env.Break(r, rerr)
		s.e.finish(s, serr)
		r.e.finish(r, rerr)
		return
	}
	copy(r.Data, s.Data)
	s.e.finish(s, nil)
	r.e.finish(r, nil)
}

// finish completes o with err (once).
func (e *Engine) finish(o *Op, err error) {
	e.mu.Lock()
	if o.done {
		e.mu.Unlock()
		return
	}
	if err != nil && o.wrote {
		err = &DeliveredError{Err: err} // the caller's buffer holds some of the data
	}
	o.done, o.err = true, err
	if o.own {
		// Not queued: its caller waits for the call's last.
		e.ownLeft--
		last := e.ownLeft == 0
		e.mu.Unlock()
		if last {
			e.ownDone <- struct{}{}
		}
		return
	}
	if o.l.remote {
		o.l.pq.Remove(&o.ql)
	} else {
		e.local.Remove(&o.ll)
	}
	e.pending--
	if o.Work != nil {
		e.async--
		e.unwatch(o)
	}
	for i, p := range e.sync {
		if p == o {
			e.sync[i] = nil
		}
	}
	last := e.pending == 0
	e.mu.Unlock()
	if last {
		e.pokeLane() // the lane ends
	}
	if o.Work != nil {
		e.env.Complete(o, err)
		e.mu.Lock()
		o.completed = true
		e.reuse(o)
		e.mu.Unlock()
		return
	}
	o.sig <- struct{}{}
}

// Fail fails o unless it already ended or a local peer already took it
// (then the peer completes it). It reports whether o failed.
func (e *Engine) Fail(o *Op, err error) bool {
	l := o.l
	if l.remote {
		// Only the lane fails remote operations.
		e.mu.Lock()
		done := o.done
		e.mu.Unlock()
		if done {
			return false
		}
		e.cancelRemote(o)
		e.finish(o, err)
		return true
	}
	l.mu.Lock()
	if o.taken {
		l.mu.Unlock()
		return false
	}
	o.taken = true
	if o.Send {
		l.send.Remove(&o.ql)
	} else {
		l.recv.Remove(&o.ql)
	}
	l.mu.Unlock()
	e.finish(o, err)
	return true
}

// Attend asks the lane to look at the asynchronous operation o: its
// context ended.
func (e *Engine) Attend(o *Op) {
	e.mu.Lock()
	add := o.live && !o.done && !o.attn
	if add {
		o.attn = true
		e.attn = append(e.attn, o)
	}
	e.mu.Unlock()
	if add {
		e.pokeLane()
	}
}

// expired returns why o must fail now, or nil, and whether that failure
// breaks the group (a timeout or an ended context: the peer would wait);
// late says that o's deadline passed.
func (e *Engine) expired(o *Op, late bool) (error, bool) {
	select {
	case <-e.env.BrokenCh():
		if err := o.Ctx.Err(); err != nil {
			return e.env.Timeout(o, err), false
		}
		return e.env.Broken(), false
	default:
	}
	if err := o.Ctx.Err(); err != nil {
		return e.env.Timeout(o, err), true
	}
	if ge := e.env.Gone(o); ge != nil {
		return ge, true
	}
	if late {
		return e.env.Timeout(o, nil), true
	}
	return nil, false
}

// run progresses and times out the engine's pending operations until none
// is pending. A pass visits only the operations that must fail or progress
// (see the package doc), so its work is O(1) per operation over the
// operations' lives, plus one visit per remote link with operations queued.
func (e *Engine) run() {
	lastProgress := time.Now()
	for {
		e.mu.Lock()
		if e.pending == 0 {
			idle := e.idle
			e.running, e.idle = false, nil
			e.dropAttn()
			e.mu.Unlock()
			if idle != nil {
				close(idle)
			}
			return
		}
		now := time.Now()
		next := now.Add(time.Hour)
		s := e.scratch[:0]
		if e.env.Broken() != nil {
			// Every pending operation fails, once.
			for o := e.local.Head(); o != nil; o = o.ll.Next() {
				s = append(s, o)
			}
			for _, l := range e.rlinks {
				for o := l.pq.Head(); o != nil; o = o.ql.Next() {
					s = append(s, o)
				}
			}
		} else {
			for _, o := range e.attn {
				if !o.done {
					s = append(s, o)
				}
			}
			for _, o := range e.sync {
				if o != nil && o.Ctx.Err() != nil {
					s = append(s, o)
				}
			}
			// Posting order is deadline order: the expired ones lead.
			var o *Op
			for o = e.local.Head(); o != nil; o = o.ll.Next() {
				if o.deadline.After(now) {
					next = o.deadline
					break
				}
				s = append(s, o)
			}
			if ev := e.env.GoneEvents(); ev != e.goneSeen {
				// A rank went (rare): the rest whose peer is gone fail.
				e.goneSeen = ev
				for ; o != nil; o = o.ll.Next() {
					if e.env.Gone(o) != nil {
						s = append(s, o)
					}
				}
			}
		}
		e.dropAttn()
		// The heads of the remote links' queues progress.
		remote := false
		j := 0
		for _, l := range e.rlinks {
			if l.pq.Head() == nil {
				l.active = false
				continue
			}
			e.rlinks[j] = l
			j++
			s = append(s, l.pq.Head())
			remote = true
		}
		clear(e.rlinks[j:])
		e.rlinks = e.rlinks[:j]
		for _, o := range s {
			o.held = true
		}
		e.visits += uint64(len(s))
		e.passes++
		e.mu.Unlock()
		for _, o := range s {
			if o.l.remote && o.l.xop != o {
				// Queued behind another message to the same peer: its
				// deadline starts when it reaches the head.
				o.deadline = now.Add(e.env.CommunicationTimeout())
			}
			if err, brk := e.expired(o, now.After(o.deadline)); err != nil {
				if e.Fail(o, err) && brk {
					e.env.Break(o, err)
				}
				continue
			}
			if o.l.remote && e.progressRemote(o) {
				lastProgress = now
			}
		}
		e.release(s)
		clear(s)
		e.scratch = s[:0]
		if remote {
			// Poll the transport: spin for 2 ms after progress, then
			// back off.
			select {
			case <-e.wake:
			default:
				if time.Since(lastProgress) < 2*time.Millisecond {
					runtime.Gosched()
				} else {
					// On the engine's timer: a lane's goroutine is
					// new each time, and its first time.Sleep
					// allocates its timer.
					e.timer.Reset(50 * time.Microsecond)
					select {
					case <-e.wake:
					case <-e.timer.C:
					}
					e.timer.Stop()
				}
			}
			continue
		}
		e.timer.Reset(time.Until(next) + time.Millisecond)
		select {
		case <-e.wake:
		case <-e.timer.C:
		case <-e.env.BrokenCh():
		}
		e.timer.Stop()
	}
}

// release ends the lane's hold on the operations of its pass s, and wakes
// a Run waiting to reuse one of them.
func (e *Engine) release(s []*Op) {
	if len(s) == 0 {
		return
	}
	e.mu.Lock()
	for _, o := range s {
		o.held = false
		if o.drop {
			o.Data, o.Ctx, o.drop = nil, nil, false
		}
		e.reuse(o)
	}
	wake := e.relWait
	e.relWait = false
	e.mu.Unlock()
	if wake {
		select {
		case e.released <- struct{}{}:
		default:
		}
	}
}

// Idle returns a channel closed once no operation is pending (nil when
// none is pending now).
func (e *Engine) Idle() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running {
		return nil
	}
	if e.idle == nil {
		e.idle = make(chan struct{})
	}
	return e.idle
}

// Transfers to and from other processes. A message of n bytes travels as
// pieces of at most slot bytes: the first carries the header and the
// first slot-Header bytes.

func pieceRange(slot, total, j int) (off, n int) {
	if j == 0 {
		return 0, min(total, slot-Header)
	}
	off = slot - Header + (j-1)*slot
	return off, min(slot, total-off)
}

func pieceCount(slot, n int) int {
	if n <= slot-Header {
		return 1
	}
	return 1 + (n-(slot-Header)+slot-1)/slot
}

// upToReceiver is a transport that can receive a message shorter than
// the buffer (mpi.World.IrecvUpTo). A receive posts its first piece that
// way, with room for a whole slot: whatever the sender's length and type,
// the header arrives and a mismatch is reported as such. Through another
// transport a first piece of another size is the transport's error.
type upToReceiver interface {
	IrecvUpTo(p []byte, peer, tag int) (backend.Request, error)
}

// stageSlot returns the link's Go staging slot i.
func (l *Link) stageSlot(i int) []byte {
	if l.stage[i] == nil {
		l.stage[i] = make([]byte, l.slot)
	}
	return l.stage[i]
}

// progressRemote advances o if it is the head of its link's queue; it
// reports whether a piece completed. A failure fails o (and breaks the
// group).
func (e *Engine) progressRemote(o *Op) bool {
	l := o.l
	e.mu.Lock()
	head := l.pq.Head() == o && !o.done
	e.mu.Unlock()
	if !head {
		return false
	}
	if l.xop != o {
		// It reached the head: its transfer starts.
		l.xop, l.xposted, l.xcompleted, l.xpieces = o, 0, 0, pieceCount(l.slot, len(o.Data))
	}
	progressed := false
	for {
		// Post pieces while slots are free; a receive posts the pieces
		// after the first only once the first arrived and its header
		// matched, so that a message of another length never meets them.
		for l.xposted < l.xpieces && l.xposted-l.xcompleted < channel.Slots && (o.Send || l.xcompleted > 0 || l.xposted == 0) {
			j := l.xposted
			buf := l.stageSlot(j % channel.Slots)
			off, n := pieceRange(l.slot, len(o.Data), j)
			hn := 0
			if j == 0 {
				hn = Header
			}
			var req backend.Request
			var err error
			if o.Send {
				if j == 0 {
					binary.LittleEndian.PutUint64(buf[0:], uint64(o.DT))
					binary.LittleEndian.PutUint64(buf[8:], uint64(o.Count))
				}
				copy(buf[hn:hn+n], o.Data[off:off+n])
				req, err = l.tr.Isend(buf[:hn+n], l.proc, l.tag)
			} else if u, ok := l.tr.(upToReceiver); ok && j == 0 {
				// Room for any first piece: a message of another
				// length is read as a header, not refused by the
				// transport.
				req, err = u.IrecvUpTo(buf, l.proc, l.tag)
			} else {
				req, err = l.tr.Irecv(buf[:hn+n], l.proc, l.tag)
			}
			if err != nil {
				e.failRemote(o, fmt.Errorf("%s with rank %d (process %d): %w", o.Name, o.Peer, l.proc, err))
				return progressed
			}
			l.reqs[j%channel.Slots] = req
			l.xposted++
		}
		if l.xcompleted == l.xposted {
			break
		}
		j := l.xcompleted
		done, err := l.reqs[j%channel.Slots].Test()
		if err != nil {
			l.reqs[j%channel.Slots] = nil
			e.failRemote(o, fmt.Errorf("%s with rank %d (process %d) (sizes or types differ?): %w", o.Name, o.Peer, l.proc, err))
			return progressed
		}
		if !done {
			// A transport that hears from the other processes (the mpi
			// package's heartbeat) may know the peer stopped responding:
			// the operation fails now rather than at its deadline.
			if hr, ok := l.reqs[j%channel.Slots].(backend.HangReporter); ok {
				if herr := hr.Hung(); herr != nil {
					e.failRemote(o, fmt.Errorf("%s with rank %d (process %d): %w", o.Name, o.Peer, l.proc, herr))
					return progressed
				}
			}
			break
		}
		l.reqs[j%channel.Slots] = nil
		l.xcompleted++
		progressed = true
		o.deadline = time.Now().Add(e.env.CommunicationTimeout())
		if !o.Send {
			buf := l.stage[j%channel.Slots]
			off, n := pieceRange(l.slot, len(o.Data), j)
			hn := 0
			if j == 0 {
				hn = Header
				dt := backend.DType(binary.LittleEndian.Uint64(buf[0:]))
				count := int64(binary.LittleEndian.Uint64(buf[8:]))
				if dt != o.DT || count != o.Count {
					e.failRemote(o, e.env.Mismatch(o, dt, count))
					return progressed
				}
			}
			copy(o.Data[off:off+n], buf[hn:hn+n])
			o.wrote = true
		}
	}
	if l.xcompleted == l.xpieces {
		l.xop = nil
		e.finish(o, nil) // and takes it off the link's queue
	}
	return progressed
}

// failRemote fails o with err and breaks the group.
func (e *Engine) failRemote(o *Op, err error) {
	e.env.Break(o, err)
	e.Fail(o, err)
}

// cancelRemote cancels o's pieces in flight, if its transfer started. A
// piece the transport cannot give back keeps its staging slot: the link
// stops using it.
func (e *Engine) cancelRemote(o *Op) {
	l := o.l
	if l.xop != o {
		return
	}
	l.xop = nil
	for i, r := range l.reqs {
		if r == nil {
			continue
		}
		l.reqs[i] = nil
		if r.Cancel() != nil {
			l.stage[i] = nil
		}
	}
}
