package collective

import (
	"context"
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/shareddev"
	"github.com/gocoll/gocoll/internal/vexchange"
)

// The algorithms of the device-tensor forms of the collectives (entry
// points in api.go): the execution stage of run (call.go), which has
// checked them as their slice forms and fingerprints them with the tensor
// data path: a rank passing tensors and another passing slices fail with
// ErrMismatch on every rank before any data moves.
//
// The data stays on the device. A send tensor is read by device copies:
// into the comm's work buffer where the algorithm reduces in place (ring,
// tree), else straight into the exchange slots. The result reaches the
// recv tensor by device copies recorded after the exchange succeeded, so a
// failure during the exchange leaves recv untouched, as the slice forms
// leave their recv slices (only a failure of that last step leaves it
// undefined: a DataError with Touched set). Send is never written, except
// where recv overlaps it (the in-place layouts the slice forms allow).
//
// Where the ranks share device memory (one process, one logical device or
// the host backend: the default layout of ranks on one GPU), the tensor
// collectives skip the exchange: one rank records the whole collective,
// device copies and rank-ordered reduce kernels reading the peers' tensors
// in place, as one submission (shared.go; the V forms once the counts
// agree); the reductions then give the deterministic mode's result
// whatever the strategy. A device error during that submission
// leaves the recv tensors undefined. A rank's tensors must not share memory
// with another rank's.
//
// A type some rank's device has no kernels for (noKernels) moves like any
// other. Where its slice form then reduces on the CPU (ReduceScatter,
// Reduce, ReduceScatterV), the tensor form does too: the blocks land by
// device copies in the comm's pooled host-visible buffer (c.gather), are
// reduced there in rank order with the kernels' arithmetic (bitwise the
// slice form's result), and the result is copied into recv. Pooled buffers
// grow once; a steady-state call allocates nothing.

// path is the data path exec fingerprints d's call with: a tensor's (the
// slice forms leave it unset).
func (d *desc) path() dataPath {
	if d.tensor {
		return pathTensor
	}
	return 0
}

// execTensor runs d, a checked tensor call, from exec's prologue (the
// fingerprint fp, the strategy s): the shared-memory path where the ranks
// share device memory, else the fingerprint, then the exact host path of a
// type without kernels or the kind's algorithm on the device.
func (c *Comm) execTensor(ctx context.Context, d *desc, fp fingerprint, s Strategy) (err error) {
	if d.kind == collBroadcastInto {
		return c.broadcastIntoT(ctx, d, fp, s)
	}
	m := int(fp.count)
	if c.g.sharedMem && !fp.noF64 {
		owned, e := c.enter(ctx, d.name(), true)
		if e != nil {
			return e
		}
		defer c.leave(owned, &err)
		return c.sharedColl(ctx, d, d.phase(0), fp, callSpecs[d.kind].shared, m, d.root)
	}
	owned, err := c.begin(ctx, d.name(), fp, d.phase(0))
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	if m == 0 || (d.kind == collBroadcast && c.g.n == 1) {
		return nil
	}
	switch d.kind {
	case collScan, collExscan:
		return c.execScanT(ctx, d, fp.noF64)
	case collReduceScatter:
		return c.execReduceScatter(ctx, d, s)
	case collAllGather:
		return c.execAllGather(ctx, d)
	case collBroadcast:
		return c.execBroadcastT(ctx, d)
	case collReduce:
		return c.execReduce(ctx, d)
	case collGather:
		return c.execGatherT(ctx, d)
	case collScatter:
		return c.execScatterT(ctx, d)
	case collAllToAll:
		return c.execAllToAllT(ctx, d)
	}
	return fmt.Errorf("collective: %s has no tensor form", callSpecs[d.kind].name)
}

// broadcastIntoT is BroadcastIntoTensor: BroadcastTensor from root's send
// into the other ranks' recv (fingerprinted as BroadcastTensor, so it
// matches peers calling that), then, once the data moved, root's send
// copied into its recv on the device (nothing where they are the same
// memory, the in-place broadcast). A failure before that leaves root's
// recv untouched; a failure of the copy is a *DataError with Touched set.
func (c *Comm) broadcastIntoT(ctx context.Context, d *desc, fp fingerprint, s Strategy) (err error) {
	recv, src := d.rt, d.rt
	if c.rank == d.root {
		src = d.st
	}
	d.kind, d.entry, d.st, d.rt = collBroadcast, callSpecs[collBroadcastInto].tname, src, nil
	if err := c.execTensor(ctx, d, fp, s); err != nil || c.rank != d.root || fp.count == 0 {
		return err
	}
	dst, from := recv.whole(true), src.whole(true)
	if dst == from {
		return nil
	}
	if _, err := c.enter(ctx, d.name(), false); err != nil {
		return err
	}
	defer c.leave(false, &err)
	return c.deliver(ctx, dst, from)
}

// execBroadcastT: down a binary tree, in place in the tensor.
func (c *Comm) execBroadcastT(ctx context.Context, d *desc) error {
	if err := c.ensureWork(0, d.dt); err != nil {
		return c.fail(err, false, nil, nil)
	}
	k := &c.k
	*k = callAt(d.dt, d.st.buf, d.st.off, 0)
	if err := c.algo(k).TreeBroadcast(ctx, c.rotated(d.root), d.st.n); err != nil {
		return c.failInPlace(err)
	}
	return nil
}

// execScanT is ScanTensor and ExscanTensor where the ranks do not share
// device memory (or a type has no kernels on some device): every rank's
// send is gathered in rank order by a ring, as AllGatherTensor's, into the
// comm's work buffer, or for a type without kernels its pooled
// host-visible buffer, and the blocks of ranks 0..r (Exscan: 0..r-1) are
// reduced into recv (reduceBlocks). Exscan leaves rank 0's recv untouched.
func (c *Comm) execScanT(ctx context.Context, d *desc, host bool) error {
	buf, L := &c.work, c.rank+1
	if host {
		buf = &c.gather
	}
	if d.kind == collExscan {
		L = c.rank
	}
	if _, err := c.gatherAt(ctx, d, buf); err != nil {
		return err
	}
	return c.reduceBlocks(ctx, d, L, host, 1)
}

// reduceBlocks reduces the first L of the blocks of send's length that
// the comm's call addresses (gatherAt's) in rank order into d's recv,
// scaled by scale: one kernel (one block: a copy), or on the CPU with the
// kernels' arithmetic where host (the blocks in the pooled host-visible
// buffer), then copied. Nothing is written where L is 0.
func (c *Comm) reduceBlocks(ctx context.Context, d *desc, L int, host bool, scale float64) error {
	m, es := d.st.n, d.dt.Size()
	if err := c.settle(ctx); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if L == 0 {
		return nil
	}
	k, dst, srcs := &c.k, d.rt.region(0, m), c.regions(L)
	for q := range srcs {
		srcs[q] = k.region(q*m, q*m+m)
	}
	if host {
		gb := c.gather.Bytes()
		reduceHost(d.dt, gb[:m*es], gb[:L*m*es], m, 0, L, m, d.op, scale)
	} else if L > 1 {
		if err := c.rec(c.dev.Stream().Reduce(kernelOp(d.op), d.dt, dst, srcs, scale)); err != nil {
			return c.fail(err, false, nil, nil)
		}
		dst = backend.Region{} // written: deliver submits and waits
	}
	return c.deliver(ctx, dst, srcs[0])
}

// execAllToAllT: chunks are sent straight from send and received into the
// work buffer, pairwise as in AllToAll, then copied into recv.
func (c *Comm) execAllToAllT(ctx context.Context, d *desc) error {
	N, r := c.g.n, c.rank
	m := d.st.n / N
	n, me := N*m, r*m
	if err := c.ensureWork(n*d.dt.Size(), d.dt); err != nil {
		return c.fail(err, false, nil, nil)
	}
	k := &c.k
	*k = callAt(d.dt, c.work, 0, 0)
	if err := c.record(k.region(me, me+m), d.st.region(me, me+m)); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.pairwise(ctx, k, d.st.region(0, n), 0, vexchange.Ranges{M: m}); err != nil {
		return c.failAfter(err, nil, nil)
	}
	return c.deliver(ctx, d.rt.region(0, n), k.region(0, n))
}

// execGatherT: ranks send straight from their tensor; root receives into
// the work buffer, then copies it into recv.
func (c *Comm) execGatherT(ctx context.Context, d *desc) error {
	if root, err := c.gatherAt(ctx, d, &c.work); !root || err != nil {
		return err
	}
	n := c.g.n * d.st.n
	return c.deliver(ctx, d.rt.region(0, n), c.k.region(0, n))
}

// gatherAt is the exchange of a tensor Gather: every rank's send (m
// elements) goes slice by slice, straight from the tensor, to root, whose
// buf (the work buffer, or a pooled one sized here) receives the N blocks
// of m, its own copied in by the device; Scan's and Exscan's go to every
// rank, a ring as AllGather's. It reports whether this rank received the
// blocks; the comm's call then addresses buf.
func (c *Comm) gatherAt(ctx context.Context, d *desc, buf *backend.Buffer) (bool, error) {
	N, m, me, es := c.g.n, d.st.n, c.rank*d.st.n, d.dt.Size()
	all := d.kind == collScan || d.kind == collExscan
	here := all || c.rank == d.root
	size := 0
	if here && buf == &c.work {
		size = N * m * es
	}
	if err := c.ensureWork(size, d.dt); err != nil { // the inbox, at least
		return false, c.fail(err, false, nil, nil)
	}
	k := &c.k
	if !here {
		*k = callAt(d.dt, d.st.buf, d.st.off, me)
		if err := c.algo(k).GatherTo(ctx, c.g.all, d.root, N*m, m); err != nil {
			return false, c.failAfter(err, nil, nil)
		}
		return false, nil
	}
	if buf != &c.work {
		if err := c.ensure(buf, N*m*es); err != nil {
			return false, c.fail(err, false, nil, nil)
		}
	}
	*k = callAt(d.dt, *buf, 0, 0)
	err := c.record(k.region(me, me+m), d.st.region(0, m))
	switch {
	case err != nil:
	case !all:
		err = c.algo(k).GatherTo(ctx, c.g.all, d.root, N*m, m)
	case N > 1:
		err = c.algo(k).RingAllGather(ctx, c.g.all, N*m, m, 0)
	}
	if err != nil {
		return false, c.failAfter(err, nil, nil)
	}
	return true, nil
}

// execScatterT: root sends straight from its tensor; the others receive
// into the work buffer, then copy into recv.
func (c *Comm) execScatterT(ctx context.Context, d *desc) error {
	N, m, root, es := c.g.n, d.rt.n, d.root, d.dt.Size()
	n, me := N*m, c.rank*m
	size := m * es
	if c.rank == root {
		size = 0
	}
	if err := c.ensureWork(size, d.dt); err != nil {
		return c.fail(err, false, nil, nil)
	}
	k := &c.k
	if c.rank != root {
		// Chunk me lands at element 0 of the work buffer.
		*k = callAt(d.dt, c.work, 0, me)
		if err := c.algo(k).ScatterFrom(ctx, c.g.all, root, n, m); err != nil {
			return c.failAfter(err, nil, nil)
		}
		return c.deliver(ctx, d.rt.region(0, m), k.region(me, me+m))
	}
	*k = callAt(d.dt, d.st.buf, d.st.off, 0)
	if err := c.algo(k).ScatterFrom(ctx, c.g.all, root, n, m); err != nil {
		return c.failAfter(err, nil, nil)
	}
	own, dst := d.st.region(me, me+m), d.rt.region(0, m)
	switch {
	case own == dst: // in place: root's chunk is already there
	case shareddev.Overlaps(own, dst):
		// A partial overlap: through the work buffer (Copy needs disjoint
		// regions).
		if err := c.ensureWork(m*es, d.dt); err != nil {
			return c.fail(err, false, nil, nil)
		}
		w := backend.Region{Buf: c.work, Len: m * es}
		if err := c.record(w, own); err != nil {
			return c.failAfter(err, nil, nil)
		}
		own = w
		fallthrough
	default:
		return c.deliver(ctx, dst, own)
	}
	return nil
}

// record records the device copy dst = src (nothing when empty); it runs
// with the next submission, ahead of what is recorded after it.
func (c *Comm) record(dst, src backend.Region) error {
	if dst.Len == 0 {
		return nil
	}
	c.unsubmitted = true
	return c.rec(c.dev.Stream().Copy(dst, src))
}

// settle submits and waits for work recorded but not submitted yet.
func (c *Comm) settle(ctx context.Context) error {
	if !c.unsubmitted {
		return nil
	}
	return c.flush(ctx)
}

// deliver is a tensor collective's last step: the device copy of its
// result src into the caller's dst, submitted and waited for. A failure
// leaves dst undefined: a *DataError with Touched set.
func (c *Comm) deliver(ctx context.Context, dst, src backend.Region) error {
	var err error
	if dst.Len > 0 {
		err = c.rec(c.dev.Stream().Copy(dst, src))
	}
	if err == nil {
		err = c.flush(ctx)
	}
	if err != nil {
		return c.fail(err, true, nil, nil)
	}
	return nil
}

// callAt returns a call (no reduction) on buf whose element at lies at
// byte off: an algorithm that addresses chunk q of an N-chunk layout then
// reads or writes a tensor or buffer that holds only that chunk.
func callAt(dt backend.DType, buf backend.Buffer, off, at int) call {
	es := dt.Size()
	return call{dt: dt, es: es, op: backend.Sum, scale: 1, work: buf, base: off - at*es}
}
