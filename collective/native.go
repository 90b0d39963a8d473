package collective

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/algo"
	"github.com/gocoll/gocoll/internal/hostmath"
	"github.com/gocoll/gocoll/internal/waitctx"
)

// The strategy Native: a group that spans processes over a transport with
// native collectives (backend.NativeCollectives: MPI's own) reduces inside
// each process on the CPU from its ranks' host slices, runs the transport's
// collective among one leader per process (local rank 0), and fans the
// result out to the process's ranks.
//
// In deterministic mode MPI's reduction order is not rank order, so the
// transport only moves raw blocks: an Alltoall gives process q every
// rank's inputs of chunk q (ceil(n/P) elements), q reduces them in global
// rank order on the CPU (the arithmetic of every rank-ordered strategy),
// and an Allgather of the reduced chunks gives every process the result:
// bitwise the one-process deterministic result whatever the processes'
// layout. It costs LocalSize times the bytes of an all-reduce of partial
// sums between processes, and one process's CPU reduces all N inputs of
// its chunk.

// maxNativeBlock is the largest block of a native Alltoall or Allgather
// (one MPI call counts it in a C int).
const maxNativeBlock = 1<<31 - 1

// nativeOf returns the group's transport as native collectives, nil when
// the group is one process or its transport offers none.
func (g *Group) nativeOf() backend.NativeCollectives {
	if g.tr == nil {
		return nil
	}
	nc, _ := g.tr.(backend.NativeCollectives)
	return nc
}

// nativeRefusal says why strategy Native cannot run an all-reduce of d (n
// elements), "" when it can.
func (c *Comm) nativeRefusal(d *desc, n int) string {
	g := c.g
	switch {
	case g.tr == nil:
		return "one process"
	case g.nativeOf() == nil:
		return "the transport (" + g.tr.Name() + ") has no native collectives"
	case d.tensor:
		return "native collectives take host slices, not device tensors"
	case g.cfg.Deterministic:
		if g.nl*algo.CeilDiv(n, g.nproc)*d.dt.Size() > maxNativeBlock {
			return "a block of the deterministic exchange exceeds one MPI call"
		}
		return ""
	case !g.nativeOf().Reduces(d.dt, kernelOp(d.op)):
		return fmt.Sprintf("the transport does not reduce %v with %v natively", d.dt, kernelOp(d.op))
	}
	return ""
}

// nativeAllReduce runs an all-reduce of n elements with strategy Native:
// every rank published its slices (and counts in g.access); the leader
// computes the result into its recv; the others copy it from there.
func (c *Comm) nativeAllReduce(ctx context.Context, dt backend.DType, op Op, send, recv []byte, n int) error {
	g := c.g
	es := dt.Size()
	lead := c.local == 0
	if lead {
		if err := c.nativeLead(ctx, dt, op, n); err != nil {
			return c.failDirect(err, send, recv)
		}
	}
	if g.nl == 1 {
		c.leaveAccess()
		return nil
	}
	fp := fingerprint{kind: collAllReduce}
	if err := c.arriveLocal(ctx, fp, "AllReduce native result"); err != nil {
		c.leaveAccess()
		if werr := c.waitAccess(); werr != nil {
			return werr
		}
		return err
	}
	if !lead {
		copy(recv[:n*es], g.pub.Recv[g.base][:n*es])
	}
	c.leaveAccess()
	if err := c.arriveLocal(ctx, fp, "AllReduce completion"); err != nil {
		if werr := c.waitAccess(); werr != nil {
			return werr
		}
		return err
	}
	return nil
}

// nativeLead is the leader's part: the process's inputs (its ranks'
// published sends) reduced across every process into its own recv.
func (c *Comm) nativeLead(ctx context.Context, dt backend.DType, op Op, n int) error {
	g := c.g
	es := dt.Size()
	nb := n * es
	sends := g.pub.Send[g.base : g.base+g.nl]
	recv := g.pub.Recv[c.rank][:nb]
	nc := g.nativeOf()
	kop := kernelOp(op)
	if g.cfg.Deterministic {
		return c.nativeDet(ctx, nc, dt, kop, scaleFor(op, g.n), n)
	}
	src := sends[0][:nb]
	if g.nl > 1 {
		// The process's ranks in rank order, reduced on the CPU into
		// pooled memory (the partial sum MPI then adds up).
		gb := c.natPool(&c.natA, g.nl*nb)
		for l, s := range sends {
			copy(gb[l*nb:], s[:nb])
		}
		reduceHost(dt, gb[:nb], gb, n, 0, g.nl, n, op, 1)
		src = gb[:nb]
	}
	if err := c.nativeCall(ctx, "MPI_Iallreduce", func(ctx context.Context) error {
		return nc.Allreduce(ctx, src, recv, dt, kop)
	}); err != nil {
		return err
	}
	if s := scaleFor(op, g.n); s != 1 {
		reduceHost(dt, recv, recv, 0, 0, 1, n, op, s) // the mean's scale, as the kernels apply it
	}
	return nil
}

// nativeDet is the leader's part in deterministic mode: an Alltoall of the
// process's inputs by chunk, chunk q reduced in global rank order by
// process q, an Allgather of the chunks.
func (c *Comm) nativeDet(ctx context.Context, nc backend.NativeCollectives, dt backend.DType, op backend.Op, scale float64, n int) error {
	g := c.g
	es := dt.Size()
	P, L := g.nproc, g.nl
	chunk := algo.CeilDiv(n, P)
	cb := chunk * es
	sends := g.pub.Send[g.base : g.base+L]
	// Block q of sb: chunk q of each local rank in turn (the last chunk
	// short, its tail unused).
	sb := c.natPool(&c.natA, P*L*cb)
	rb := c.natPool(&c.natB, P*L*cb)
	for q := range P {
		lo, hi := min(q*chunk, n), min((q+1)*chunk, n)
		for l, s := range sends {
			copy(sb[(q*L+l)*cb:], s[lo*es:hi*es])
		}
	}
	if err := c.nativeCall(ctx, "MPI_Ialltoall", func(ctx context.Context) error {
		return nc.Alltoall(ctx, sb, rb)
	}); err != nil {
		return err
	}
	// rb holds, rank by rank in global order, every rank's chunk of this
	// process: reduce them in that order.
	me := g.tr.Rank()
	cnt := min((me+1)*chunk, n) - min(me*chunk, n)
	mine := sb[:cb]
	clear(mine[cnt*es:])
	hostmath.ReduceStrided(dt, op, mine, rb, chunk, 0, P*L, cnt, scale)
	all := rb[:P*cb]
	if err := c.nativeCall(ctx, "MPI_Iallgather", func(ctx context.Context) error {
		return g.tr.Allgather(ctx, mine, all)
	}); err != nil {
		return err
	}
	copy(g.pub.Recv[c.rank][:n*es], all)
	return nil
}

// natPool returns (*p)[:n], growing the comm's pooled host memory when it
// is short.
func (c *Comm) natPool(p *[]byte, n int) []byte {
	if cap(*p) < n {
		*p = make([]byte, n+n/4)
	}
	return (*p)[:n]
}

// nativeCall runs f, a native collective between the processes, under the
// call's context, CommunicationTimeout and the group breaking. A failure
// breaks the group; when the transport still holds memory of the call
// (MPI cannot cancel a collective), it waits up to the drain limit for it,
// and past that gives the comm's pooled memory up to the transport.
func (c *Comm) nativeCall(ctx context.Context, call string, f func(context.Context) error) error {
	g := c.g
	w := &c.wctx
	w.Arm(ctx, g.cfg.CommunicationTimeout)
	err := f(w)
	why := w.Disarm()
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(why, waitctx.ErrBroken):
		err = c.brokenErr()
	case why != nil:
		te := &TimeoutError{Seq: c.seq, Phase: call + " between processes", Missing: g.ranksOf(err)}
		if !errors.Is(why, waitctx.ErrTimeout) {
			te.Ctx = why
		}
		err = te
	default:
		err = fmt.Errorf("%s between processes: %w", call, err)
	}
	if g.Err() == nil {
		c.breakWith(err)
	}
	if nc := g.nativeOf(); nc != nil && !nc.Drain(g.drainLimit) {
		// MPI still uses the pooled memory: it is the transport's now.
		c.natA, c.natB = nil, nil
	}
	return err
}
