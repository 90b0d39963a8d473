package collective

import (
	"context"
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/direct"
	"github.com/gocoll/gocoll/internal/shareddev"
	"github.com/gocoll/gocoll/internal/vexchange"
)

// vRun is the V kinds' exchange, on host slices or device tensors: send's
// ranges [sdispls[j], +scounts[j]) go to rank j, and the ranges each rank
// j sends here land at recv's [rdispls[j], +rcounts[j]), after the ranks
// agreed on the counts. With reduce (ReduceScatterV, and ReduceScatter
// without kernels), recv is the reduction of N blocks of recv's length
// received, 16 bytes apart so that the kernel reads them aligned: one
// kernel reduces them in rank order with d.op, or, for a type some device
// has no kernels for, they land in the comm's host-visible buffer and are
// reduced on the CPU with the kernels' arithmetic.
//
// Where the data lives: a slice's send is uploaded into the work buffer at
// [0, S), the ranges received land after it and a slice's reduction after
// those, then are downloaded; a tensor's send is read in place, the ranges
// received land in the work buffer and reach recv by device copies (or the
// kernel's write) once the exchange succeeded. Tensors among ranks sharing
// device memory skip the exchange: the leader moves (or reduces) every
// range in one submission once the counts agree (shared.go).
func (c *Comm) vRun(ctx context.Context, d *desc, fp fingerprint, scounts, sdispls, rcounts, rdispls []int, reduce bool) (err error) {
	N, i, dt, es := c.g.n, c.rank, d.dt, d.dt.Size()
	S, R := d.lens()
	m := R // with reduce, the block reduced into recv
	host := reduce && c.noKernels(dt)
	if reduce {
		_, _, rcounts, rdispls = c.vScratch(N)
		R = vexchange.Aligned(rcounts, rdispls, m, es)
	}
	name := d.name()
	owned, err := c.begin(ctx, name, fp, d.phase(0))
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	if !d.tensor {
		out := d.recv
		if host {
			out = nil // reduced into on the CPU
		}
		c.adoptCall(d.send, out)
		defer c.releaseAdopted()
	}
	shared := d.tensor && c.g.sharedMem && !host
	if shared {
		// For the leader, read after the rendezvous of agreeCounts.
		c.vxState.PublishRanges(&c.g.pub, c.rank, sdispls, rdispls)
	}
	// AllGatherV of host slices in one process (Direct): each rank copies
	// every block from the senders' slices on the CPU, as AllGather does.
	cpu := d.kind == collAllGatherV && c.g.tr == nil && !d.tensor && fp.strategy == Direct
	if cpu {
		c.g.pub.Send[i] = d.send // read by the peers once agreeCounts met
		c.enterAccess()
	}
	if err := c.agreeCounts(ctx, name, fp, d.phase(2), d.phase(1), scounts, rcounts); err != nil {
		if cpu {
			c.leaveAccess()
			return c.afterAccess(err)
		}
		return err
	}
	if cpu {
		direct.AllGatherV(i, c.g.pub.Send, d.recv, rcounts, rdispls, es)
		return c.completed(fingerprint{kind: d.kind}, d.phase(4), true)
	}
	if shared {
		kind := shareddev.AllToAllV
		if reduce {
			kind = shareddev.ReduceScatterV
		}
		return c.sharedColl(ctx, d, d.phase(3), fp, kind, 1, 0)
	}
	if S+R == 0 {
		return nil
	}
	// The work buffer's elements (at: where the receive space starts in
	// k's buffer) and where send's ranges go from (src: none for k's
	// buffer).
	work, at, src := 0, 0, backend.Region{}
	var up []byte
	switch {
	case d.tensor:
		src = d.st.region(0, S)
	case host:
		work, up = S, d.send // read from the work buffer (src below)
	default:
		work, at, up = S, S, d.send
	}
	if !host {
		work += R
		if reduce && !d.tensor {
			work += m
		}
	}
	k := &c.k
	if err := c.prepare(k, dt, Sum, work, up, 0); err != nil {
		return c.fail(err, false, nil, nil)
	}
	if host {
		if err := c.ensure(&c.gather, R*es); err != nil {
			return c.fail(err, false, nil, nil)
		}
		if !d.tensor {
			src = backend.Region{Buf: c.work, Len: S * es}
		}
		*k = callAt(dt, c.gather, 0, 0)
	}
	if n := scounts[i]; n > 0 {
		own := k.region(sdispls[i], sdispls[i]+n)
		if src.Buf != nil {
			own = backend.Region{Buf: src.Buf, Off: src.Off + sdispls[i]*es, Len: n * es}
		}
		if err := c.record(k.region(at+rdispls[i], at+rdispls[i]+rcounts[i]), own); err != nil {
			return c.failAfter(err, nil, nil)
		}
	}
	if err := c.pairwise(ctx, k, src, at, vexchange.Ranges{SCounts: scounts, SDispls: sdispls, RCounts: rcounts, RDispls: rdispls}); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if !d.tensor || host {
		if err := c.settle(ctx); err != nil {
			return c.failAfter(err, nil, nil)
		}
	}
	switch {
	case !reduce:
		return c.vDeliver(ctx, d, k, at, rcounts, rdispls)
	case m == 0:
		return nil
	case host:
		gb := c.gather.Bytes()
		out := d.recv
		if d.tensor {
			out = gb[:m*es] // in place into block 0, then copied into recv
		}
		reduceHost(dt, out, gb[:R*es], R/N, 0, N, m, d.op, scaleFor(d.op, N))
		if !d.tensor {
			return nil
		}
		return c.deliver(ctx, d.rt.region(0, m), k.region(0, m))
	}
	srcs := c.regions(N)
	for q := range srcs {
		srcs[q] = k.region(at+rdispls[q], at+rdispls[q]+m)
	}
	// A tensor's recv is written by the kernel; a slice's result is
	// downloaded from after the blocks.
	dst := k.region(at+R, at+R+m)
	if d.tensor {
		dst = d.rt.region(0, m)
	}
	err = c.rec(c.dev.Stream().Reduce(kernelOp(d.op), dt, dst, srcs, scaleFor(d.op, N)))
	if err == nil {
		err = c.flush(ctx)
	}
	switch {
	case err != nil && d.tensor:
		return c.fail(err, true, nil, nil)
	case err != nil:
		return c.failAfter(err, nil, nil)
	case !d.tensor:
		if err := c.download(ctx, k, at+R, d.recv); err != nil {
			return c.fail(err, true, nil, nil)
		}
	}
	return nil
}

// vDeliver delivers the ranges a V exchange received into k's buffer from
// element at into recv: downloaded into a slice, copied on the device into
// a tensor.
func (c *Comm) vDeliver(ctx context.Context, d *desc, k *call, at int, rcounts, rdispls []int) error {
	es := d.dt.Size()
	for j, n := range rcounts {
		if n == 0 {
			continue
		}
		a, b := rdispls[j], rdispls[j]+n
		var err error
		if d.tensor {
			err = c.rec(c.dev.Stream().Copy(d.rt.region(a, b), k.region(at+a, at+b)))
		} else {
			err = c.download(ctx, k, at+a, d.recv[a*es:b*es])
		}
		if err != nil {
			return c.fail(err, true, nil, nil)
		}
	}
	if !d.tensor {
		return nil
	}
	if err := c.flush(ctx); err != nil {
		return c.fail(err, true, nil, nil)
	}
	return nil
}

// agreeCounts is the V collectives' counts check: every rank learns what
// each rank j sends it (scounts[me] of rank j) and compares it with its
// rcounts, and the ranks agree on the outcome (rendezvous check) before any
// data moves. In one process each rank publishes a copy of its scounts and
// the ranks meet once (rendezvous exchange) before reading the peers';
// across processes the counts travel through the devices
// (exchangeCounts). A disagreement is a *MismatchError on every rank; the
// group stays usable.
func (c *Comm) agreeCounts(ctx context.Context, name string, fp fingerprint, exchange, check string, scounts, rcounts []int) error {
	g := c.g
	N, i := g.n, c.rank
	cnt := c.vxState.Counts(2 * N)
	if g.tr == nil {
		c.vxState.PublishCounts(&g.pub, i, scounts)
		if err := c.arrive(ctx, fp, exchange); err != nil {
			return err
		}
		vexchange.CountsTo(&g.pub, i, cnt[N:])
	} else if err := c.exchangeCounts(ctx, &c.k, scounts, cnt); err != nil {
		return err
	}
	bad := vexchange.Disagree(cnt[N:], rcounts)
	all, err := c.meet(ctx, fp, check, bad < 0, c.g.tr != nil)
	if err != nil {
		return err
	}
	if !all {
		want, got := 0, 0
		if bad >= 0 {
			want, got = rcounts[bad], int(cnt[N+bad])
		}
		return c.countsMismatch(name, bad, want, got)
	}
	return nil
}

// countsMismatch is the V kinds' disagreement on counts as this rank sees
// it: it expects want elements from rank bad, which sends got (bad < 0:
// the disagreement is between other ranks).
func (c *Comm) countsMismatch(name string, bad, want, got int) error {
	if bad >= 0 {
		return &MismatchError{Seq: c.seq, Rank: c.rank, Call: fmt.Sprintf("%s expecting %d elements from rank %d", name, want, bad),
			Peer: bad, PeerCall: fmt.Sprintf("%s sending %d", name, got)}
	}
	return &MismatchError{Seq: c.seq, Rank: c.rank, Call: name, Peer: -1, PeerCall: name + " with counts that disagree between other ranks"}
}
