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

// nativeRefusal says why strategy Native cannot run d, "" when it can (a
// constant: it is asked per call):
// n is the elements of the call's block between processes (AllReduce:
// every element; ReduceScatter and AllGather: the process's ranks' blocks).
func (c *Comm) nativeRefusal(d *desc, n int) string {
	g := c.g
	nc := g.nativeOf()
	switch {
	case g.tr == nil:
		return "one process"
	case nc == nil:
		return "the transport has no native collectives"
	case d.tensor:
		return "native collectives take host slices, not device tensors"
	}
	reduces := callSpecs[d.kind].reduces
	block := 0 // MPI_Iallreduce, MPI_Ireduce and MPI_Ibcast are split into calls that fit
	if d.kind == collReduceScatter || d.kind == collAllGather {
		block = n
	}
	if g.cfg.Deterministic && reduces {
		// The Alltoall of raw blocks: every local rank's chunk.
		block = g.nl * algo.CeilDiv(n, g.nproc)
		if d.kind == collReduceScatter {
			block = g.nl * n
		}
	}
	switch {
	case block*d.dt.Size() > maxNativeBlock:
		return "a block between processes exceeds one MPI call"
	case reduces && !g.cfg.Deterministic && !nc.Reduces(d.dt, kernelOp(d.op)):
		return "the transport does not reduce the type with the op natively"
	}
	return ""
}

// nativeStrategy returns Native where the group's configured strategy is
// Auto or Native and Native can run d (n elements: nativeRefusal's); else
// s, or the collective's default for s Native.
func (c *Comm) nativeStrategy(d *desc, n int, s Strategy) Strategy {
	// Auto weighs Native only where the transport offers it (the refusal's
	// reason would be made per call).
	cs := c.g.cfg.Strategy
	if (cs == Native || (cs == Auto && c.g.nativeOf() != nil)) && c.nativeRefusal(d, n) == "" {
		return Native
	}
	if s == Native {
		return collectiveDefaults[callSpecs[d.kind].name]
	}
	return s
}

// nativeAllReduce runs an all-reduce of n elements with strategy Native:
// every rank published its slices (and counts in g.access); the leader
// computes the result into its recv; the others copy it from there.
func (c *Comm) nativeAllReduce(ctx context.Context, dt backend.DType, op Op, send, recv []byte, n int) error {
	nb := n * dt.Size()
	return c.nativeRun(ctx, "AllReduce", send, recv, func() error {
		return c.nativeLead(ctx, dt, op, n, c.g.pub.Recv[c.rank][:nb], -1)
	}, func() {
		if c.local != 0 {
			copy(recv[:nb], c.g.pub.Recv[c.g.base][:nb])
		}
	})
}

// nativeRun runs a collective of strategy Native once every rank of the
// process published its slices and counts in g.access: the leader (local
// rank 0) runs lead, then every rank runs fan (reading what the leader
// made), then the ranks meet so that none returns while another still
// reads its memory.
func (c *Comm) nativeRun(ctx context.Context, name string, send, recv []byte, lead func() error, fan func()) error {
	g := c.g
	if c.local == 0 {
		if err := lead(); err != nil {
			return c.failDirect(err, send, recv)
		}
	}
	fp := fingerprint{kind: collAllReduce}
	if g.nl > 1 {
		if err := c.arriveLocal(ctx, fp, name+" native result"); err != nil {
			c.leaveAccess()
			if werr := c.waitAccess(); werr != nil {
				return werr
			}
			return err
		}
	}
	fan()
	c.leaveAccess()
	if g.nl > 1 {
		if err := c.arriveLocal(ctx, fp, name+" completion"); err != nil {
			if werr := c.waitAccess(); werr != nil {
				return werr
			}
			return err
		}
	}
	return nil
}

// execNative runs d, a collective of host slices but AllReduce, with
// strategy Native: exec's prologue (the fingerprint fp) with the ranks'
// slices published.
func (c *Comm) execNative(ctx context.Context, d *desc, fp fingerprint) (err error) {
	g := c.g
	sp := &callSpecs[d.kind]
	g.pub.Send[c.rank], g.pub.Recv[c.rank] = d.send, d.recv
	if d.kind == collBroadcast {
		g.pub.Recv[c.rank] = d.send // one buffer
	}
	c.enterAccess()
	owned, err := c.begin(ctx, sp.name, fp, sp.phases[0])
	if err != nil {
		c.leaveAccess()
		if werr := c.waitAccess(); werr != nil {
			return werr
		}
		return err
	}
	defer c.leave(owned, &err)
	if fp.count == 0 {
		c.leaveAccess()
		return nil
	}
	es := d.dt.Size()
	switch d.kind {
	case collBroadcast, collBroadcastInto:
		return c.nativeBroadcast(ctx, d)
	case collReduce:
		n, _ := d.lens()
		rp := d.root / g.nl // the root's process
		var dst []byte
		if g.tr.Rank() == rp {
			dst = g.pub.Recv[d.root][:n*es]
		}
		return c.nativeRun(ctx, sp.name, d.send, d.recv, func() error {
			return c.nativeLead(ctx, d.dt, d.op, n, dst, rp)
		}, func() {})
	case collReduceScatter:
		_, m := d.lens()
		mb := m * es
		return c.nativeRun(ctx, sp.name, d.send, d.recv, func() error {
			return c.nativeReduceScatterLead(ctx, d.dt, d.op, m)
		}, func() {
			copy(d.recv[:mb], g.comms[0].natB[c.local*mb:(c.local+1)*mb]) // the leader's
		})
	default: // AllGather
		m, _ := d.lens()
		nb := g.n * m * es
		return c.nativeRun(ctx, sp.name, d.send, d.recv, func() error {
			return c.nativeAllGatherLead(ctx, m*es)
		}, func() {
			if c.local != 0 {
				copy(d.recv[:nb], g.pub.Recv[g.base][:nb])
			}
		})
	}
}

// nativeBroadcast runs a Broadcast or BroadcastInto with strategy Native:
// the leaders' Bcast from the root's process (its leader passes the root's
// send, which MPI only reads), then every rank copies the data from the
// root's send (in the root's process) or from its leader's recv.
func (c *Comm) nativeBroadcast(ctx context.Context, d *desc) error {
	g := c.g
	out := d.recv
	if d.kind == collBroadcast {
		out = d.send
	}
	nb := len(out)
	rp := d.root / g.nl
	src := g.pub.Recv[g.base]
	if g.tr.Rank() == rp {
		src = g.pub.Send[d.root]
	}
	src = src[:nb]
	return c.nativeRun(ctx, callSpecs[d.kind].name, d.send, d.recv, func() error {
		return c.nativeCall(ctx, "MPI_Ibcast", func(ctx context.Context) error {
			return g.nativeOf().Bcast(ctx, src, rp)
		})
	}, func() {
		if nb > 0 && &out[0] != &src[0] {
			copy(out[:nb], src)
		}
	})
}

// nativeReduceScatterLead is the leader's part of a ReduceScatter of m
// elements per rank: the blocks of the process's ranks, reduced across
// every rank, into the leader's pooled memory natB (block l: local rank
// l's), which each rank copies its own from.
func (c *Comm) nativeReduceScatterLead(ctx context.Context, dt backend.DType, op Op, m int) error {
	g := c.g
	es := dt.Size()
	L, N := g.nl, g.n
	mb, nb := m*es, N*m*es
	sends := g.pub.Send[g.base : g.base+L]
	nc := g.nativeOf()
	kop := kernelOp(op)
	res := c.natPool(&c.natB, L*mb)
	if g.cfg.Deterministic {
		// Chunk q of the all-reduce's exchange is process q's ranks'
		// blocks: the same Alltoall, no Allgather.
		P := g.nproc
		cb := L * mb
		sb := c.natPool(&c.natA, P*L*cb)
		rb := c.natPool(&c.natC, P*L*cb)
		for q := range P {
			for l, s := range sends {
				copy(sb[(q*L+l)*cb:(q*L+l+1)*cb], s[q*cb:(q+1)*cb])
			}
		}
		if err := c.nativeCall(ctx, "MPI_Ialltoall", func(ctx context.Context) error {
			return nc.Alltoall(ctx, sb, rb)
		}); err != nil {
			return err
		}
		hostmath.ReduceStrided(dt, kop, res, rb, L*m, 0, P*L, L*m, scaleFor(op, N))
		return nil
	}
	src := sends[0][:nb]
	if L > 1 {
		gb := c.natPool(&c.natA, L*nb)
		for l, s := range sends {
			copy(gb[l*nb:], s[:nb])
		}
		reduceHost(dt, gb[:nb], gb, N*m, 0, L, N*m, op, 1)
		src = gb[:nb]
	}
	if err := c.nativeCall(ctx, "MPI_Ireduce_scatter_block", func(ctx context.Context) error {
		return nc.ReduceScatterBlock(ctx, src, res, dt, kop)
	}); err != nil {
		return err
	}
	if s := scaleFor(op, N); s != 1 {
		reduceHost(dt, res, res, 0, 0, 1, L*m, op, s)
	}
	return nil
}

// nativeAllGatherLead is the leader's part of an AllGather of mb bytes per
// rank: the process's ranks' blocks gathered from every process into the
// leader's recv.
func (c *Comm) nativeAllGatherLead(ctx context.Context, mb int) error {
	g := c.g
	L := g.nl
	sends := g.pub.Send[g.base : g.base+L]
	recv := g.pub.Recv[c.rank][:g.n*mb]
	mine := sends[0][:mb]
	if L > 1 {
		mine = c.natPool(&c.natA, L*mb)
		for l, s := range sends {
			copy(mine[l*mb:], s[:mb])
		}
	}
	return c.nativeCall(ctx, "MPI_Iallgather", func(ctx context.Context) error {
		return g.tr.Allgather(ctx, mine, recv)
	})
}

// nativeLead is the leader's part of an all-reduce (root < 0) or a reduce
// to process root: the process's inputs (its ranks' published sends)
// reduced across every process into dst (nil for a reduce's other
// processes).
func (c *Comm) nativeLead(ctx context.Context, dt backend.DType, op Op, n int, dst []byte, root int) error {
	g := c.g
	es := dt.Size()
	nb := n * es
	sends := g.pub.Send[g.base : g.base+g.nl]
	recv := dst
	nc := g.nativeOf()
	kop := kernelOp(op)
	if g.cfg.Deterministic {
		return c.nativeDet(ctx, nc, dt, kop, scaleFor(op, g.n), n, dst)
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
	call, f := "MPI_Iallreduce", func(ctx context.Context) error {
		return nc.Allreduce(ctx, src, recv, dt, kop)
	}
	if root >= 0 {
		call, f = "MPI_Ireduce", func(ctx context.Context) error {
			return nc.Reduce(ctx, src, recv, dt, kop, root)
		}
	}
	if err := c.nativeCall(ctx, call, f); err != nil {
		return err
	}
	if s := scaleFor(op, g.n); s != 1 && recv != nil {
		reduceHost(dt, recv, recv, 0, 0, 1, n, op, s) // the mean's scale, as the kernels apply it
	}
	return nil
}

// nativeDet is the leader's part in deterministic mode: an Alltoall of the
// process's inputs by chunk, chunk q reduced in global rank order by
// process q, an Allgather of the chunks, the result copied into dst (if
// not nil).
func (c *Comm) nativeDet(ctx context.Context, nc backend.NativeCollectives, dt backend.DType, op backend.Op, scale float64, n int, dst []byte) error {
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
	copy(dst, all)
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
		c.natA, c.natB, c.natC = nil, nil, nil
	}
	return err
}
