package collective

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/drain"
	"github.com/gocoll/gocoll/internal/opqueue"
	"github.com/gocoll/gocoll/internal/waitctx"
)

// The execution model (package doc, "Streams, ownership and failures"):
//
//   - claim/release bracket every operation of a Comm, and enter/leave its
//     start and end. A synchronous call first waits for the comm's queued
//     operations, then claims the comm, before it touches anything the comm
//     owns (its pooled scratch, its call state); an operation the comm's
//     worker runs is already ordered.
//   - Every submission goes through submitWork, so the comm knows its last
//     fence; every error path drains it (drain) before the call returns, so
//     no device writes a caller's memory after the call returned.
//   - Ranks that read or write peers' memory (the direct algorithms) count
//     themselves in g.access for the whole exchange; a failing rank waits for
//     the count to fall to zero before it returns.

// claim takes the comm for operation name, before it touches anything
// the comm owns: a synchronous call first waits for the comm's queued
// operations, then claims the comm (opqueue.Queue.Claim: one operation holds
// the comm at a time); an operation the comm's worker runs is
// already ordered (owned is false: there is nothing to release). An
// operation that owns the comm releases it when it ends (release). Every
// operation claims the comm before it enters it: run for every call, and
// Exec, the cost model and the refusals of calls whose arguments failed
// their checks on their own.
func (c *Comm) claim(ctx context.Context, name string) (owned bool, err error) {
	if c == nil {
		return false, invalidArg("nil Comm")
	}
	// Until the comm is claimed, its fields belong to whoever holds it:
	// errors here carry sequence number 0 (the call was not numbered).
	if err := c.closedErr(name); err != nil {
		return false, err
	}
	if ctx.Value(workerKey{}) == c {
		return false, nil
	}
	switch err := c.queue.Claim(ctx); {
	case err == nil:
		return true, nil
	case err == opqueue.ErrHeld && c.g.closed.Load():
		return false, c.wrapErr(name, 0, errGroupClosed) // Close holds the comm
	case err == opqueue.ErrHeld, err == opqueue.ErrQueued:
		return false, c.wrapErr(name, 0, ErrConcurrentUse)
	default:
		return false, c.earlierErr(name, "operations", err)
	}
}

// earlierErr is the error of operation name whose ctx ended (err) while it
// waited for the comm's earlier operations of a kind (what). The call
// never started, but peers will wait for it: it breaks the group, naming
// this rank's context.
func (c *Comm) earlierErr(name, what string, err error) error {
	te := &TimeoutError{Phase: "waiting for the comm's earlier " + what, Ctx: err}
	c.g.breakGroup(&BrokenError{Rank: c.rank, Op: name, Cause: te, hideCtx: true})
	return c.wrapErr(name, 0, te)
}

// release ends the claim of an operation that owned the comm.
func (c *Comm) release(owned bool) {
	if owned {
		c.queue.Release()
	}
}

// closedErr is the error of operation name on a closed group or comm.
func (c *Comm) closedErr(name string) error {
	if c.g.closed.Load() {
		return c.wrapErr(name, 0, errGroupClosed)
	}
	if c.gone.Mark() != nil && c.commClosed() {
		return c.wrapErr(name, 0, errCommClosed)
	}
	return nil
}

// enter starts operation name on the comm its caller claimed (claim).
// numbered operations (the collectives) take the next sequence number;
// point-to-point calls take the next number of their own sequence
// (enterOp). It never releases the comm: the result, false, is the
// ownership to pass to leave, and the claimer releases the comm.
func (c *Comm) enter(ctx context.Context, name string, numbered bool) (bool, error) {
	return c.enterOp(ctx, name, numbered, false)
}

// enterOp is enter; p2p operations are posted without waiting for the
// comm's earlier point-to-point operations, every other one waits for them
// to complete.
func (c *Comm) enterOp(ctx context.Context, name string, numbered, p2p bool) (bool, error) {
	if c == nil {
		return false, invalidArg("nil Comm")
	}
	// The group or the comm may have closed since the claim (Comm.Close
	// does not wait for the comm).
	if err := c.closedErr(name); err != nil {
		return false, err
	}
	if !c.queue.Held() && ctx.Value(workerKey{}) != c {
		return false, c.wrapErr(name, 0, fmt.Errorf("collective: internal error: %s entered the comm without claiming it", name))
	}
	if !p2p {
		if err := c.waitLane(ctx); err != nil {
			return false, c.earlierErr(name, "point-to-point operations", err)
		}
	}
	if numbered {
		c.seq++
		c.calls.Store(c.seq)
	}
	if p2p {
		c.p2pSeq++
		c.p2pCalls.Store(c.p2pSeq)
	}
	c.op, c.inP2P = name, p2p
	c.strat = Auto
	if c.g.Err() != nil {
		return false, c.callErr(c.brokenErr())
	}
	if err := ctx.Err(); err != nil && (numbered || p2p) {
		// A call whose context ended before it started never starts,
		// whatever its peers did: they are told (the group breaks,
		// naming this rank's context and call), not left waiting.
		te := &TimeoutError{Phase: "starting the call", Ctx: err}
		c.breakWith(te)
		return false, c.callErr(te)
	}
	return false, nil
}

// leave ends the operation: it wraps a failure into an *Error and releases
// the comm if owned.
func (c *Comm) leave(owned bool, errp *error) {
	if *errp != nil {
		*errp = c.callErr(*errp)
	}
	c.release(owned)
}

// wrapErr makes err an *Error of this rank (once).
func (c *Comm) wrapErr(name string, seq uint64, err error) error {
	return c.wrapAs(name, seq, false, err)
}

// wrapP2P makes err an *Error of this rank's point-to-point call number
// seq (once).
func (c *Comm) wrapP2P(name string, seq uint64, err error) error {
	return c.wrapAs(name, seq, true, err)
}

// wrapAs makes err an *Error of this rank's call name number seq (p2p: a
// point-to-point call), unless it is one already.
func (c *Comm) wrapAs(name string, seq uint64, p2p bool, err error) error {
	if e, ok := err.(*Error); ok && e.Rank == c.rank {
		return err
	}
	return &Error{Rank: c.rank, Op: name, Seq: seq, P2P: p2p, Err: err}
}

// callErr makes err an *Error of the running call.
func (c *Comm) callErr(err error) error {
	if c.inP2P {
		return c.wrapP2P(c.op, c.p2pSeq, err)
	}
	return c.wrapErr(c.op, c.seq, err)
}

// breakWith breaks the group with a failure of this rank's current
// operation (a point-to-point call by its own number).
func (c *Comm) breakWith(err error) {
	b := &BrokenError{Rank: c.rank, Op: c.op, Seq: c.seq, Cause: err, hideCtx: true}
	if c.inP2P {
		b.Seq, b.P2P = c.p2pSeq, true
	}
	c.g.breakGroup(b)
}

// brokenErr returns the error a rank gets from a group that is broken.
func (c *Comm) brokenErr() error { return c.g.brokenCause() }

// submitWork submits what the stream recorded and remembers the fence.
func (c *Comm) submitWork() (backend.Fence, error) {
	f, err := c.dev.Stream().Submit()
	if err != nil {
		return nil, err
	}
	c.last, c.unsubmitted = f, false
	return f, nil
}

// waitFence waits for f: bounded by ctx, CommunicationTimeout and the
// group breaking. A failure breaks the group (after draining the comm's own
// work).
func (c *Comm) waitFence(ctx context.Context, f backend.Fence) error {
	w := &c.wctx
	w.Arm(ctx, c.g.cfg.CommunicationTimeout)
	err := f.Wait(w)
	why := w.Disarm()
	if err == nil {
		if len(c.held) > 0 && f == c.last {
			c.releaseHeld()
		}
		return nil
	}
	switch {
	case errors.Is(why, waitctx.ErrBroken):
		err = c.brokenErr()
	case errors.Is(why, waitctx.ErrTimeout):
		err = &TimeoutError{Seq: c.seq, Phase: "device work (waiting for this rank's device)"}
		c.breakWith(err)
	case why != nil:
		err = &TimeoutError{Seq: c.seq, Phase: "device work", Ctx: why}
		c.breakWith(err)
	default:
		c.breakWith(err)
	}
	if derr := c.drain(); derr != nil {
		return derr
	}
	return err
}

// drain waits, up to the drain limit, for every piece of work this comm
// submitted (and submits what was recorded but not submitted, so nothing
// reaches the device later), and for its host copies. Past the limit the
// device is declared lost: its memory is then never freed.
func (c *Comm) drain() error {
	_ = c.copyWait() // the copies' own error was reported where it happened
	if c.isLost() {
		return c.lostErr()
	}
	fs := [2]backend.Fence{c.last}
	if f, err := c.dev.Stream().Submit(); err == nil {
		fs[1] = f
	}
	c.unsubmitted = false
	c.last = nil
	// A fence that reports another failure (the device reported an
	// error): the work ended.
	if !drain.Fences(c.g.drainLimit, fs[:]...) {
		c.markLost(errors.New("the device did not finish within the drain limit"))
		return c.lostErr()
	}
	c.releaseHeld()
	return nil
}

// markLost declares the comm's device lost: its buffers and the host
// memory it imported are leaked, never freed.
func (c *Comm) markLost(cause error) {
	c.g.brokenMu.Lock()
	if c.lost == nil {
		c.lost = cause
	}
	c.g.brokenMu.Unlock()
	c.breakWith(c.lostErr())
}

func (c *Comm) lostErr() error { return &lostError{rank: c.rank, cause: c.lost} }

type lostError struct {
	rank  int
	cause error
}

func (e *lostError) Error() string {
	return "rank's device declared lost (its memory is leaked): " + e.cause.Error()
}
func (e *lostError) Is(t error) bool { return t == ErrDeviceLost }
func (e *lostError) Unwrap() error   { return e.cause }

// enterAccess counts the comm in the group's exchange of peers' memory.
func (c *Comm) enterAccess() { c.g.access.Add(1) }

// leaveAccess ends the comm's part in the exchange of peers' memory: its
// own copies and device work are done (or it drained them).
func (c *Comm) leaveAccess() { c.g.access.Add(-1) }

// waitAccess waits, up to the drain limit, until no rank reads or writes
// peers' memory any more: a failing rank of the direct algorithms calls it
// before returning, so no peer touches its buffers after it returned.
func (c *Comm) waitAccess() error {
	// A peer whose device hangs gives up after CommunicationTimeout and
	// then drains for up to the drain limit (declaring its own device lost
	// if that fails): wait that long before blaming this rank's device.
	if !drain.Zero(&c.g.access, c.g.cfg.CommunicationTimeout+c.g.drainLimit) {
		c.markLost(errors.New("peers did not leave the exchange within the drain limit"))
		return c.lostErr()
	}
	return nil
}

// afterAccess is a failing rank's return: err once no rank touches peers'
// memory any more (waitAccess), or the rank's lost device if peers did not
// leave in time.
func (c *Comm) afterAccess(err error) error {
	if werr := c.waitAccess(); werr != nil {
		return werr
	}
	return err
}

// errGroupClosed is what calls on a closed group return.
var errGroupClosed = &BrokenError{Rank: -1, Op: "Close", Cause: ErrClosed}
