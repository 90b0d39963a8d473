package collective

import (
	"context"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/park"
	"github.com/gocoll/gocoll/internal/shareddev"
)

// Device-resident collectives among ranks that share device memory (one
// logical device, or the host backend): every rank publishes its tensor,
// and one rank (the leader, local rank 0) runs the whole reduction on its
// queue, reading every rank's tensor and writing every rank's tensor, in
// one submission; no byte crosses to the host. The ranks meet once, when
// every input is ready; then the leader submits, waits for its device and
// signals completion (g.sharedDone), which the other ranks wait for
// without a second rendezvous: the leader returns as soon as its device is
// done.
//
// Ownership: the leader counts itself in g.access while its work may touch
// the peers' tensors; a rank that fails waits for it to leave (waitAccess)
// before returning, so no device writes a tensor after its rank returned.
// A leader that fails breaks the group (the ranks waiting for its signal
// wake on the break).

// The tensor collectives other than all-reduce among ranks that share
// device memory (g.sharedMem): as AllReduceTensor, every rank publishes its
// send and recv tensors and the leader records the whole collective on its
// queue (internal/shareddev: one submission of device copies and reduce
// kernels reading the peers' send tensors in place and writing their recv
// tensors, in rank order; any overlap of a rank's send and recv other than
// the in-place layouts staged in the leader's work buffer).
//
// Failure: a mismatch or timeout at the rendezvous fails before anything
// moves; a device error during the one submission leaves the recv tensors
// undefined (a DataError with Touched set), the group broken.

// sharedColl runs a tensor collective of d through shared device memory:
// send and recv are this rank's tensors (whole; either may be empty where
// the collective does not use it), m the chunk length in elements (the
// per-rank block of the collective), root the root where there is one. The
// caller checked the arguments and claimed the comm (enter).
func (c *Comm) sharedColl(ctx context.Context, d *desc, phase string, fp fingerprint, kind shareddev.Kind, m, root int) error {
	g := c.g
	g.pub.SendT[c.rank], g.pub.RecvT[c.rank] = d.st.whole(true), d.rt.whole(true)
	c.strat = fp.strategy
	return c.sharedRun(ctx, d.name(), phase, fp, "the ranks share device memory", kind, m, root)
}

// sharedWork is the leader's part of sharedRun: the collective of kind
// recorded over every rank's published regions, submitted and waited for.
func (c *Comm) sharedWork(ctx context.Context, fp fingerprint, kind shareddev.Kind, m, root int) error {
	if m == 0 {
		return nil
	}
	g := c.g
	p := shareddev.Plan{Kind: kind, DT: fp.dt, Op: kernelOp(fp.op), Scale: scaleFor(fp.op, g.n), M: m, Root: root, Leader: c.rank,
		Send: g.pub.SendT, Recv: g.pub.RecvT, SCounts: g.pub.SCounts, SDispls: g.pub.SDispls, RDispls: g.pub.RDispls,
		Sends: c.dstRegions(g.n), Srcs: c.regions(g.n)}
	if n := p.Staging(); n > 0 {
		if err := c.ensureMem(&c.work, n, backend.DeviceLocal); err != nil {
			return err
		}
	}
	if err := c.rec(p.Record(c.dev.Stream(), c.work)); err != nil {
		return err
	}
	return c.flush(ctx)
}

// sharedRun is the protocol of a device-resident collective among ranks
// sharing memory: the caller claimed the comm and published its regions
// (g.pub's SendT, RecvT); every rank's earlier work is made complete, the
// ranks meet once (fingerprint fp, phase naming the rendezvous), and the
// leader runs the collective of kind with chunk m and root (recorded,
// submitted and waited for: sharedWork) while the others wait for its
// signal.
func (c *Comm) sharedRun(ctx context.Context, name, phase string, fp fingerprint, why string, kind shareddev.Kind, m, root int) error {
	g := c.g
	// Inputs ready: this rank's recorded and submitted work is done before
	// another rank's queue reads the tensor.
	// (Recorded work not yet submitted is only ever a pinned upload; a fence
	// already signalled needs no armed wait.)
	if c.unsubmitted {
		if err := c.flush(ctx); err != nil {
			return c.failAfter(err, nil, nil)
		}
	}
	if prev := c.last; prev != nil && prev.Wait(doneCtx) != nil {
		if err := c.waitFence(ctx, prev); err != nil {
			return c.failAfter(err, nil, nil)
		}
	}
	leader := c.local == 0
	if leader {
		c.enterAccess()
	}
	if err := c.arrive(ctx, fp, phase); err != nil {
		if leader {
			c.leaveAccess()
		}
		return c.afterAccess(err)
	}
	// Every rank passed the rendezvous (a mismatch fails every rank, a
	// timeout breaks the group): every rank numbers this call alike.
	c.sharedCalls++
	call := c.sharedCalls
	if g.logCalls {
		c.logCall(ctx, name, int(fp.count), fp.dt, fp.op, fp.strategy, why+" (shared device memory)")
	}
	if !leader {
		if err := c.awaitShared(ctx, name, call); err != nil {
			return c.undefined(c.afterAccess(err), nil, nil) // the leader's submission may have written
		}
		return nil
	}
	if err := c.sharedWork(ctx, fp, kind, m, root); err != nil {
		return c.failDirect(err, nil, nil)
	}
	c.leaveAccess()
	g.sharedDone.Store(call)
	for _, p := range g.comms[1:] {
		p.poke()
	}
	return nil
}

// awaitShared waits until the leader signals that shared-memory collective
// number call (name) completed: where cores are spare (spinBarrier) it polls for
// up to deviceSpin, as long as the leader's own fence wait spins (a rank
// woken from a channel arrives at the next call tens of microseconds late,
// and the leader waits for it there), then blocks; it ends early when the
// group breaks or ctx ends. The leader times its own device out after
// CommunicationTimeout and drains it for up to the drain limit, breaking
// the group with the cause; only past both does this rank give up on it
// (breaking the group).
func (c *Comm) awaitShared(ctx context.Context, name string, call uint64) error {
	g := c.g
	if spinBarrier && park.Spin(&g.sharedDone, call, deviceSpin) {
		return nil
	}
	w := park.Begin(&c.bell, &c.wt, useBell.Load(), monoNow(), g.cfg.CommunicationTimeout+g.drainLimit)
	for {
		t := w.Ticket()
		if g.sharedDone.Load() >= call {
			return nil
		}
		var ctxErr error
		if g.Err() == nil {
			switch _, ev := park.Next[struct{}](&w, ctx, t, nil, c.wake); ev {
			case park.Woken:
				if g.Err() == nil {
					continue
				}
			case park.Cancelled:
				ctxErr = ctx.Err()
			}
		}
		if g.sharedDone.Load() >= call {
			return nil
		}
		if g.Err() != nil && ctx.Err() == nil {
			return c.brokenErr()
		}
		if ctxErr == nil {
			ctxErr = ctx.Err()
		}
		te := &TimeoutError{Seq: c.seq, Phase: name + " completion (waiting for local rank 0's device)", Ctx: ctxErr}
		c.breakWith(te)
		return te
	}
}

// deviceSpin is how long a rank polls for the completion of device work
// that another rank waits for (spinBarrier): the GPU fence spin of the
// backends on such machines.
const deviceSpin = 2 * time.Millisecond

// doneCtx is a context that has ended: Fence.Wait(doneCtx) polls a fence
// without blocking.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()
