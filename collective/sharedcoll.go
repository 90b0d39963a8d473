package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/shareddev"
)

// The tensor collectives other than all-reduce among ranks that share
// device memory (g.sharedMem): as sharedAllReduce, every rank publishes its
// send and recv tensors and the leader records the whole collective on its
// queue (internal/shareddev: one submission of device copies and reduce
// kernels reading the peers' send tensors in place and writing their recv
// tensors, in rank order; any overlap of a rank's send and recv other than
// the in-place layouts staged in the leader's work buffer).
//
// Failure: a mismatch or timeout at the rendezvous fails before anything
// moves; a device error during the one submission leaves the recv tensors
// undefined (a DataError with Touched set), the group broken.

// sharedKind is the collective a shared-memory tensor call runs.
type sharedKind = shareddev.Kind

const (
	sharedAllReduce      = shareddev.AllReduce
	sharedReduceScatter  = shareddev.ReduceScatter
	sharedAllGather      = shareddev.AllGather
	sharedReduce         = shareddev.Reduce
	sharedBroadcast      = shareddev.Broadcast
	sharedAllToAll       = shareddev.AllToAll
	sharedGather         = shareddev.Gather
	sharedScatter        = shareddev.Scatter
	sharedAllToAllV      = shareddev.AllToAllV      // AllToAllVTensor and AllGatherVTensor
	sharedReduceScatterV = shareddev.ReduceScatterV // ReduceScatterVTensor
)

// sharedColl runs a tensor collective of d through shared device memory:
// send and recv are this rank's tensors (whole; either may be empty where
// the collective does not use it), m the chunk length in elements (the
// per-rank block of the collective), root the root where there is one. The
// caller checked the arguments and claimed the comm (enter).
func (c *Comm) sharedColl(ctx context.Context, d *desc, phase string, fp fingerprint, kind sharedKind, m, root int) error {
	g := c.g
	g.tensorOf[c.rank], g.tRecvOf[c.rank] = d.st.whole(true), d.rt.whole(true)
	c.strat = fp.strategy
	return c.sharedRun(ctx, d.name(), phase, fp, "the ranks share device memory", kind, m, root)
}

// sharedWork is the leader's part of sharedRun: the collective of kind
// recorded over every rank's published regions, submitted and waited for.
func (c *Comm) sharedWork(ctx context.Context, fp fingerprint, kind sharedKind, m, root int) error {
	if m == 0 {
		return nil
	}
	g := c.g
	p := shareddev.Plan{Kind: kind, DT: fp.dt, Op: kernelOp(fp.op), Scale: scaleFor(fp.op, g.n), M: m, Root: root, Leader: c.rank,
		Send: g.tensorOf, Recv: g.tRecvOf, SCounts: g.vCountsOf, SDispls: g.vSDOf, RDispls: g.vRDOf,
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

// tryShared runs a tensor collective through shared device memory where
// the ranks share it (sharedColl), claiming the comm; ok is false where
// they do not, and the caller runs the exchange.
func (c *Comm) tryShared(ctx context.Context, d *desc, fp fingerprint, kind sharedKind, m, root int) (ok bool, err error) {
	if !c.g.sharedMem {
		return false, nil
	}
	owned, err := c.enter(ctx, d.name(), true)
	if err != nil {
		return true, err
	}
	err = c.sharedColl(ctx, d, d.phase(0), fp, kind, m, root)
	c.leave(owned, &err)
	return true, err
}

// publishV publishes copies of a V tensor collective's send offsets and
// receive counts and offsets for the leader (g.vSDOf, g.vRCOf, g.vRDOf;
// the send counts are published by agreeCounts), before the rendezvous
// that precedes its reads.
func (c *Comm) publishV(sdispls, rcounts, rdispls []int) {
	N := c.g.n
	if cap(c.vPubV) < 3*N {
		c.vPubV = make([]int, 3*N)
	}
	b := c.vPubV[:3*N]
	copy(b, sdispls)
	copy(b[N:], rcounts)
	copy(b[2*N:], rdispls)
	c.g.vSDOf[c.rank], c.g.vRCOf[c.rank], c.g.vRDOf[c.rank] = b[:N], b[N:2*N], b[2*N:]
}
