package collective

import (
	"context"
	"runtime"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/parktimer"
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

// sharedAllReduce all-reduces rank tensors of n elements in place through
// device memory. The caller claimed the comm (enter).
func (c *Comm) sharedAllReduce(ctx context.Context, own backend.Region, n int, dt backend.DType, op Op, s Strategy, why string) error {
	c.g.tensorOf[c.rank] = own
	fp := fingerprint{kind: collAllReduce, op: op, dt: dt, count: int64(n), strategy: s, path: pathTensor}
	return c.sharedRun(ctx, "AllReduceTensor", "AllReduceTensor fingerprint check", fp, why, sharedAllReduce, n, 0)
}

// sharedRun is the protocol of a device-resident collective among ranks
// sharing memory: the caller claimed the comm and published its regions
// (g.tensorOf, g.tRecvOf); every rank's earlier work is made complete, the
// ranks meet once (fingerprint fp, phase naming the rendezvous), and the
// leader runs the collective of kind with chunk m and root (recorded,
// submitted and waited for: sharedWork) while the others wait for its
// signal.
func (c *Comm) sharedRun(ctx context.Context, name, phase string, fp fingerprint, why string, kind sharedKind, m, root int) error {
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
		if werr := c.waitAccess(); werr != nil {
			return werr
		}
		return err
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
			if werr := c.waitAccess(); werr != nil {
				return werr
			}
			return err
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
	if spinBarrier {
		for start, k := time.Now(), 0; time.Since(start) < deviceSpin; k++ {
			for i := 0; i < 256; i++ {
				if g.sharedDone.Load() >= call {
					return nil
				}
			}
			if k%64 == 63 {
				runtime.Gosched()
			}
		}
	}
	var deadline time.Time
	var due time.Duration // without doorbells: the deadline for c.wt
	bell := useBell.Load()
	if bell {
		deadline = time.Now().Add(g.cfg.CommunicationTimeout + g.drainLimit)
	} else {
		now := monoNow()
		due = parktimer.DueAfter(now, g.cfg.CommunicationTimeout+g.drainLimit)
		c.wt.Arm(now, due)
	}
	for {
		t := c.bell.Ticket()
		if g.sharedDone.Load() >= call {
			return nil
		}
		var ctxErr error
		if bell {
			if g.Err() == nil {
				timedOut, err := c.bellWait(ctx, t, deadline)
				if !timedOut && err == nil {
					continue
				}
				ctxErr = err
			}
		} else {
			select {
			case <-c.wake:
				if g.Err() == nil {
					continue
				}
			case <-c.wt.C():
				if !c.wt.Fired(monoNow(), due) {
					continue
				}
			case <-ctx.Done():
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
