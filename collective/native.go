package collective

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
	"github.com/gocoll/gocoll/internal/native"
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
// and an all-gather of the reduced chunks gives every process the result:
// bitwise the one-process deterministic result whatever the processes'
// layout. It costs LocalSize times the bytes of an all-reduce of partial
// sums between processes, and one process's CPU reduces all N inputs of
// its chunk.

// nativeRefusal says why strategy Native cannot run d, "" when it can (a
// constant: it is asked per call):
// n is the elements of the call's block between processes (AllReduce:
// every element; ReduceScatter and AllGather: the process's ranks' blocks;
// a move: native.Call.Block's).
func (c *Comm) nativeRefusal(d *desc, n int) string {
	g := c.g
	nc := g.nc
	switch {
	case g.tr == nil:
		return "one process"
	case nc == nil:
		return "the transport has no native collectives"
	case d.tensor:
		return "native collectives take host slices, not device tensors"
	}
	// Raw blocks (internal/native's det): deterministic mode, or a pair
	// the transport does not reduce natively; a move's ReduceScatterV
	// reduces its raw blocks on the CPU.
	move := callSpecs[d.kind].move != native.NoMove
	raw := callSpecs[d.kind].reduces && !move && (g.cfg.Deterministic || !nc.Reduces(d.dt, kernelOp(d.op)))
	if !move && !native.Fits(d.kind == collReduceScatter, d.kind == collAllGather, raw, g.nl, g.nproc, n, d.dt.Size()) { // a move splits
		return "a block between processes exceeds one MPI call"
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
	if (cs == Native || (cs == Auto && c.g.nc != nil)) && c.nativeRefusal(d, n) == "" {
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
	return c.nativeRun(ctx, send, recv, false, func(l *native.Leader) error {
		return l.Reduce(ctx, dt, kernelOp(op), scaleFor(op, c.g.n), n, c.g.pub.Recv[c.rank][:nb], -1)
	}, func() {
		if c.local != 0 {
			hostmath.Copy(recv[:nb], c.g.pub.Recv[c.g.base][:nb])
		}
	})
}

// nativeRun runs a collective of strategy Native once every rank of the
// process published its slices and counts in g.access: the leader (local
// rank 0) runs lead, then every rank runs fan (reading what the leader
// made), then the ranks meet so that none returns while another still
// reads its memory. The meetings' phases are constants (a wait record
// keeps its phase, beside the call's name): no string made per call.
//
// into: lead writes the other ranks' recvs too (a move, Reduce), so a rank
// that fails waiting for it reports its recv undefined. Once its lead
// succeeded, the leader waits for its ranks' arrival (bounded local work)
// whatever its ctx, and holds its result whatever they do: it fans out and
// returns nil if they broke the group meanwhile. Every rank's completion is
// completed's.
func (c *Comm) nativeRun(ctx context.Context, send, recv []byte, into bool, lead func(l *native.Leader) error, fan func()) error {
	g := c.g
	wctx := ctx
	if c.local == 0 {
		c.lead = native.Leader{NC: g.nc, Tr: g.tr, P: g.nproc, L: g.nl, N: g.n, Det: g.cfg.Deterministic,
			Sends: g.pub.Send[g.base : g.base+g.nl], Pools: &c.nat, W: &c.wctx, Timeout: g.cfg.CommunicationTimeout}
		if err := c.nativeErr(lead(&c.lead)); err != nil {
			return c.failDirect(err, send, recv)
		}
		wctx = context.Background() // no allocation: the wait reads no value of ctx
	}
	fp := fingerprint{kind: collAllReduce}
	if g.nl > 1 {
		if _, err := c.meet(wctx, fp, "native result", false, false); err != nil && c.local != 0 {
			c.leaveAccess()
			if err = g.comms[0].nat.Mark(c.afterAccess(err)); into {
				err = c.undefined(err, send, recv)
			}
			return err
		}
	}
	fan()
	return c.completed(fp, "native completion", true)
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
		return c.afterAccess(err)
	}
	defer c.leave(owned, &err)
	if fp.count == 0 && !callSpecs[d.kind].move.V() {
		c.leaveAccess()
		return nil
	}
	es := d.dt.Size()
	switch d.kind {
	case collAllToAll, collAllToAllV, collGather, collScatter, collGatherV, collScatterV, collAllGatherV, collReduceScatterV:
		return c.nativeMove(ctx, d)
	case collBroadcast, collBroadcastInto:
		return c.nativeBroadcast(ctx, d)
	case collReduce:
		n, _ := d.lens()
		rp := d.root / g.nl // the root's process
		var dst []byte
		if g.tr.Rank() == rp {
			dst = g.pub.Recv[d.root][:n*es]
		}
		return c.nativeRun(ctx, d.send, d.recv, true, func(l *native.Leader) error {
			return l.Reduce(ctx, d.dt, kernelOp(d.op), scaleFor(d.op, g.n), n, dst, rp)
		}, func() {})
	case collReduceScatter:
		_, m := d.lens()
		mb := m * es
		return c.nativeRun(ctx, d.send, d.recv, false, func(l *native.Leader) error {
			return l.ReduceScatter(ctx, d.dt, kernelOp(d.op), scaleFor(d.op, g.n), m, d.recv[:mb])
		}, func() {
			if !g.comms[0].nat.WroteAll() { // the leader wrote its one rank's result straight
				hostmath.Copy(d.recv[:mb], g.comms[0].nat.Blocks()[c.local*mb:(c.local+1)*mb]) // the leader's
			}
		})
	default: // AllGather
		m, _ := d.lens()
		nb := g.n * m * es
		return c.nativeRun(ctx, d.send, d.recv, g.nl > 1, func(l *native.Leader) error { // it may write the ranks' recvs
			return l.AllGather(ctx, m*es, g.pub.Recv[c.rank][:nb], g.pub.Recv[g.base+1:g.base+g.nl])
		}, func() {
			if v, stride := g.comms[0].nat.Gathered(); v != nil { // in the node's memory
				hostmath.CopyBlocks(d.recv[:nb], v, m*es, stride)
			} else if c.local != 0 && !g.comms[0].nat.WroteAll() {
				hostmath.Copy(d.recv[:nb], g.pub.Recv[g.base][:nb])
			}
		})
	}
}

// nativeMove runs d, a move, with strategy Native: the leader's Move of
// the ranges its ranks published, delivered straight into their recvs;
// then every rank learns from the leader whether the counts disagreed (a
// *MismatchError, the group usable) or a process's data exceeded one MPI
// call (ErrUnsupported), in which case nothing moved.
func (c *Comm) nativeMove(ctx context.Context, d *desc) error {
	g := c.g
	err := c.nativeRun(ctx, d.send, d.recv, true, func(l *native.Leader) error {
		return l.MoveOn(ctx, &g.pub, callSpecs[d.kind].move, d.dt, kernelOp(d.op), scaleFor(d.op, g.n))
	}, func() {})
	if o, bad := g.comms[0].nat.MoveOutcome(c.local); err == nil && o.Disagree { // the leader's
		return c.countsMismatch(callSpecs[d.kind].name, bad.Peer, bad.Want, bad.Got)
	}
	return err
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
	return c.nativeRun(ctx, d.send, d.recv, false, func(l *native.Leader) error {
		return l.Bcast(ctx, src, rp)
	}, func() {
		if nb > 0 && &out[0] != &src[0] {
			hostmath.Copy(out[:nb], src)
		}
	})
}

// nativeErr attributes a failed native call (a *native.Failure): the group
// broke, or the wait timed out or its context ended (a *TimeoutError naming
// the processes the transport says are missing), or the transport failed.
// A failure breaks the group; when the transport still holds memory of the
// call (MPI cannot cancel a collective), it waits up to the drain limit for
// it, and past that the transport is lost (native.Pools.Drain: the pooled
// memory is given up to it; the error matches ErrTransportLost).
func (c *Comm) nativeErr(err error) error {
	if err == nil {
		return nil
	}
	g := c.g
	var f *native.Failure
	if errors.As(err, &f) {
		switch {
		case errors.Is(f.Why, waitctx.ErrBroken):
			err = c.brokenErr()
		case f.Why != nil:
			te := &TimeoutError{Seq: c.seq, Phase: f.Call + " between processes", Missing: g.ranksOf(f.Err)}
			if !errors.Is(f.Why, waitctx.ErrTimeout) {
				te.Ctx = f.Why
			}
			err = te
		default:
			err = fmt.Errorf("%s between processes: %w", f.Call, f.Err)
		}
	}
	if g.Err() == nil {
		c.breakWith(err)
	}
	return c.nat.Drain(g.nc, g.drainLimit, err)
}
