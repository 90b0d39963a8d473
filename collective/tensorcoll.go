package collective

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// Device-resident forms of the collectives that take host slices
// (collectives.go, alltoall.go, alltoallv.go). Each checks its arguments as
// its slice form does and runs the same algorithm under the same
// fingerprint, with the tensor data path added: a rank passing tensors and
// another passing slices fail with ErrMismatch on every rank before any
// data moves.
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
// in place, as one submission (sharedcoll.go; the V forms once the counts
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

// ReduceScatterTensor is ReduceScatter on device tensors (ncclReduceScatter):
// send (recv.Len() * N elements on every rank) is reduced with op and chunk r
// of the result, elements [r*recv.Len(), (r+1)*recv.Len()), lands in rank r's
// recv. send is copied into the comm's work buffer on the device, where the
// ring (or, in deterministic mode and with the Direct strategy, the
// rank-ordered reduction) runs as in ReduceScatter; chunk r is then copied
// into recv. Ranks sharing device memory instead reduce every chunk in
// rank order in one submission, reading the peers' send tensors in place.
// A type without kernels on some rank's device is reduced exactly on the
// host, as ReduceScatter does.
func ReduceScatterTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], op Op) (err error) {
	const name = "ReduceScatterTensor"
	u := c.uses(ctx)
	defer u.release()
	if err := checkTensorCall(ctx, c, name, &u, send, recv); err != nil {
		return err
	}
	N := c.g.n
	if send.n != recv.n*N {
		return c.invalidCall(ctx, name, invalidArg("send.Len()=%d, want recv.Len()*%d=%d", send.n, N, recv.n*N))
	}
	if err := tensorAlias(name, send, recv, recvInSend, c.rank*recv.n); err != nil {
		return c.invalidCall(ctx, name, err)
	}
	dt := dtypeOf[T]()
	if err := checkOp(op, dt); err != nil {
		return c.invalidCall(ctx, name, err)
	}
	if c.noKernels(dt) {
		cnt, dsp := c.eqScratch(N, recv.n)
		return reduceScatterVTensor(ctx, c, name, send, recv, cnt, dsp, op)
	}
	s := c.collStrategy("ReduceScatter")
	fp := fingerprint{kind: collReduceScatter, op: op, dt: dt, count: int64(recv.n), strategy: s, path: pathTensor}
	if ok, err := c.tryShared(ctx, name, "ReduceScatterTensor fingerprint check", fp, sharedReduceScatter, whole(send, true), whole(recv, true), recv.n, 0); ok {
		return err
	}
	owned, err := c.begin(ctx, name, fp, "ReduceScatterTensor fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	m := recv.n
	if m == 0 {
		return nil
	}
	n, me := m*N, c.rank*m
	if err := c.ensureWork(n*dt.Size(), dt); err != nil {
		return c.fail(err, false, nil, nil)
	}
	k := &c.k
	*k = call{dt: dt, es: dt.Size(), op: kernelOp(op), scale: scaleFor(op, N), work: c.work}
	if err := c.record(k.region(0, n), send.region(0, n)); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if N > 1 {
		if c.g.cfg.Deterministic || s == Direct {
			err = c.detReduceScatter(ctx, k, c.g.all, n, m)
		} else {
			err = c.ringReduceScatter(ctx, k, c.g.all, n, m, 0, 0)
		}
		if err != nil {
			return c.failAfter(err, nil, nil)
		}
	}
	if err := c.scaleOwned(ctx, k, me, me+m); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.deliver(ctx, recv.region(0, m), k.region(me, me+m)); err != nil {
		return c.fail(err, true, nil, nil)
	}
	return nil
}

// AllGatherTensor is AllGather on device tensors (ncclAllGather): every
// rank's send (recv.Len()/N elements each) is concatenated in rank order
// into every rank's recv, with a ring of N-1 steps in the comm's work
// buffer on the device, then copied into recv. Every element type works on
// every device (no kernels run).
func AllGatherTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T]) (err error) {
	const name = "AllGatherTensor"
	u := c.uses(ctx)
	defer u.release()
	if err := checkTensorCall(ctx, c, name, &u, send, recv); err != nil {
		return err
	}
	N := c.g.n
	if recv.n != send.n*N {
		return c.invalidCall(ctx, name, invalidArg("recv.Len()=%d, want send.Len()*%d=%d", recv.n, N, send.n*N))
	}
	if err := tensorAlias(name, send, recv, sendInRecv, c.rank*send.n); err != nil {
		return c.invalidCall(ctx, name, err)
	}
	dt := dtypeOf[T]()
	fp := fingerprint{kind: collAllGather, dt: dt, count: int64(send.n), strategy: Ring, path: pathTensor}
	if ok, err := c.tryShared(ctx, name, "AllGatherTensor fingerprint check", fp, sharedAllGather, whole(send, true), whole(recv, true), send.n, 0); ok {
		return err
	}
	owned, err := c.begin(ctx, name, fp, "AllGatherTensor fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	m := send.n
	if m == 0 {
		return nil
	}
	n, me := m*N, c.rank*m
	if err := c.ensureWork(n*dt.Size(), dt); err != nil {
		return c.fail(err, false, nil, nil)
	}
	k := &c.k
	*k = call{dt: dt, es: dt.Size(), op: backend.Sum, scale: 1, work: c.work}
	if err := c.record(k.region(me, me+m), send.region(0, m)); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if N > 1 {
		if err := c.ringAllGather(ctx, k, c.g.all, n, m, 0); err != nil {
			return c.failAfter(err, nil, nil)
		}
	}
	if err := c.deliver(ctx, recv.region(0, n), k.region(0, n)); err != nil {
		return c.fail(err, true, nil, nil)
	}
	return nil
}

// ReduceTensor is Reduce on device tensors (ncclReduce): every rank's send
// is reduced with op into root's recv (send.Len() elements; other ranks'
// recv is not used and may be nil), along a binary tree rooted at root (in
// deterministic mode in rank order) in the comm's work buffer on the
// device, then copied into recv; ranks sharing device memory instead reduce
// in rank order in one submission, straight into root's recv. A type
// without kernels on some rank's device is gathered at root and reduced
// there exactly on the host, in rank order, as Reduce does.
func ReduceTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], op Op, root int) (err error) {
	const name = "ReduceTensor"
	u := c.uses(ctx)
	defer u.release()
	if err := checkRootedTensorCall(ctx, c, name, &u, send, recv, root); err != nil {
		return err
	}
	N := c.g.n
	if c.rank == root && recv.n != send.n {
		return c.invalidCall(ctx, name, invalidArg("root's recv.Len()=%d != send.Len()=%d", recv.n, send.n))
	}
	if c.rank == root {
		if err := tensorAlias(name, send, recv, sameMem, 0); err != nil {
			return c.invalidCall(ctx, name, err)
		}
	}
	dt := dtypeOf[T]()
	if err := checkOp(op, dt); err != nil {
		return c.invalidCall(ctx, name, err)
	}
	if c.noKernels(dt) {
		return reduceGatherTensor(ctx, c, send, recv, op, root)
	}
	fp := fingerprint{kind: collReduce, op: op, dt: dt, count: int64(send.n), root: int32(root), strategy: Tree, path: pathTensor}
	if ok, err := c.tryShared(ctx, name, "ReduceTensor fingerprint check", fp, sharedReduce, whole(send, true), whole(recv, c.rank == root), send.n, root); ok {
		return err
	}
	owned, err := c.begin(ctx, name, fp, "ReduceTensor fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	n := send.n
	if n == 0 {
		return nil
	}
	if err := c.ensureWork(n*dt.Size(), dt); err != nil {
		return c.fail(err, false, nil, nil)
	}
	k := &c.k
	*k = call{dt: dt, es: dt.Size(), op: kernelOp(op), scale: scaleFor(op, N), work: c.work}
	if err := c.record(k.region(0, n), send.region(0, n)); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if N > 1 {
		if c.g.cfg.Deterministic {
			chunkLen := ceilDiv(n, N)
			if err = c.detReduceScatter(ctx, k, c.g.all, n, chunkLen); err == nil {
				err = c.gatherTo(ctx, k, c.g.all, root, n, chunkLen)
			}
		} else {
			err = c.treeReduce(ctx, k, c.rotated(root), n)
		}
		if err != nil {
			return c.failAfter(err, nil, nil)
		}
	}
	if c.rank != root {
		// The copy of send ran with the first slice sent (flushed); settle
		// makes sure before send is the caller's again.
		if err := c.settle(ctx); err != nil {
			return c.failAfter(err, nil, nil)
		}
		return nil
	}
	if err := c.scaleOwned(ctx, k, 0, n); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.deliver(ctx, recv.region(0, n), k.region(0, n)); err != nil {
		return c.fail(err, true, nil, nil)
	}
	return nil
}

// reduceGatherTensor is ReduceTensor for a type some device has no kernels
// for (reduceGather's tensor form): every rank's send goes, slice by slice
// and straight from the tensor, to root's pooled host-visible buffer; root
// reduces the N blocks there in rank order on the CPU (in place, into block
// 0) and copies the result into recv.
func reduceGatherTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], op Op, root int) (err error) {
	const name = "ReduceTensor"
	N, n := c.g.n, send.n
	dt := dtypeOf[T]()
	es := dt.Size()
	fp := fingerprint{kind: collReduce, op: op, dt: dt, count: int64(n), root: int32(root), strategy: Direct, path: pathTensor, noF64: true}
	owned, err := c.begin(ctx, name, fp, "ReduceTensor fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	if n == 0 {
		return nil
	}
	if err := c.ensureWork(0, dt); err != nil { // the inbox
		return c.fail(err, false, nil, nil)
	}
	k := &c.k
	if c.rank != root {
		*k = callAt(dt, send.buf, send.off, c.rank*n)
		if err := c.gatherTo(ctx, k, c.g.all, root, N*n, n); err != nil {
			return c.failAfter(err, nil, nil)
		}
		return nil
	}
	if err := c.ensure(&c.gather, N*n*es); err != nil {
		return c.fail(err, false, nil, nil)
	}
	*k = callAt(dt, c.gather, 0, 0)
	if err := c.record(k.region(root*n, root*n+n), send.region(0, n)); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.gatherTo(ctx, k, c.g.all, root, N*n, n); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.settle(ctx); err != nil {
		return c.failAfter(err, nil, nil)
	}
	gb := c.gather.Bytes()
	reduceHost(dt, gb[:n*es], gb[:N*n*es], n, 0, N, n, op, scaleFor(op, N))
	if err := c.deliver(ctx, recv.region(0, n), k.region(0, n)); err != nil {
		return c.fail(err, true, nil, nil)
	}
	return nil
}

// AllToAllTensor is AllToAll on device tensors (ncclAllToAll): chunk j of
// every rank's send (send.Len()/N elements) goes to rank j, which stores it
// as chunk i of its recv (i the sender). send.Len() = recv.Len() = N x
// chunk on every rank; send and recv must not be the same tensor. Chunks
// are sent straight from send and received into the comm's work buffer on
// the device, pairwise as in AllToAll, then copied into recv.
func AllToAllTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T]) (err error) {
	const name = "AllToAllTensor"
	u := c.uses(ctx)
	defer u.release()
	if err := checkTensorCall(ctx, c, name, &u, send, recv); err != nil {
		return err
	}
	N := c.g.n
	if send.n != recv.n || send.n%N != 0 {
		return c.invalidCall(ctx, name, invalidArg("send.Len()=%d and recv.Len()=%d, want equal multiples of the group size (%d)", send.n, recv.n, N))
	}
	if err := tensorAlias(name, send, recv, sameMem, 0); err != nil {
		return c.invalidCall(ctx, name, err)
	}
	dt := dtypeOf[T]()
	m := send.n / N
	fp := fingerprint{kind: collAllToAll, dt: dt, count: int64(m), strategy: Direct, path: pathTensor}
	if ok, err := c.tryShared(ctx, name, "AllToAllTensor fingerprint check", fp, sharedAllToAll, whole(send, true), whole(recv, true), m, 0); ok {
		return err
	}
	owned, err := c.begin(ctx, name, fp, "AllToAllTensor fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	if m == 0 {
		return nil
	}
	n, me := N*m, c.rank*m
	if err := c.ensureWork(n*dt.Size(), dt); err != nil {
		return c.fail(err, false, nil, nil)
	}
	k := &c.k
	*k = callAt(dt, c.work, 0, 0)
	if err := c.record(k.region(me, me+m), send.region(me, me+m)); err != nil {
		return c.failAfter(err, nil, nil)
	}
	cnt, dsp := c.eqScratch(N, m)
	if err := c.pairwise(ctx, k, send.region(0, n), cnt, dsp, cnt, dsp); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.deliver(ctx, recv.region(0, n), k.region(0, n)); err != nil {
		return c.fail(err, true, nil, nil)
	}
	return nil
}

// GatherTensor is Gather on device tensors (ncclGather): every rank's send
// lands in root's recv, rank i's at [i*send.Len(), (i+1)*send.Len())
// (recv.Len() = N x send.Len() on root; other ranks' recv is not used and
// may be nil). Ranks send straight from their tensor; root receives into
// the comm's work buffer on the device, then copies it into recv.
func GatherTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], root int) (err error) {
	const name = "GatherTensor"
	u := c.uses(ctx)
	defer u.release()
	if err := checkRootedTensorCall(ctx, c, name, &u, send, recv, root); err != nil {
		return err
	}
	N := c.g.n
	if c.rank == root && recv.n != send.n*N {
		return c.invalidCall(ctx, name, invalidArg("root's recv.Len()=%d, want send.Len()*%d=%d", recv.n, N, send.n*N))
	}
	if c.rank == root {
		if err := tensorAlias(name, send, recv, sendInRecv, root*send.n); err != nil {
			return c.invalidCall(ctx, name, err)
		}
	}
	dt := dtypeOf[T]()
	m := send.n
	fp := fingerprint{kind: collGather, dt: dt, count: int64(m), root: int32(root), strategy: Direct, path: pathTensor}
	if ok, err := c.tryShared(ctx, name, "GatherTensor fingerprint check", fp, sharedGather, whole(send, true), whole(recv, c.rank == root), m, root); ok {
		return err
	}
	owned, err := c.begin(ctx, name, fp, "GatherTensor fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	if m == 0 {
		return nil
	}
	n := N * m
	size := 0
	if c.rank == root {
		size = n * dt.Size()
	}
	if err := c.ensureWork(size, dt); err != nil {
		return c.fail(err, false, nil, nil)
	}
	k := &c.k
	if c.rank != root {
		*k = callAt(dt, send.buf, send.off, c.rank*m)
		if err := c.gatherTo(ctx, k, c.g.all, root, n, m); err != nil {
			return c.failAfter(err, nil, nil)
		}
		return nil
	}
	*k = callAt(dt, c.work, 0, 0)
	if err := c.record(k.region(root*m, root*m+m), send.region(0, m)); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.gatherTo(ctx, k, c.g.all, root, n, m); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.deliver(ctx, recv.region(0, n), k.region(0, n)); err != nil {
		return c.fail(err, true, nil, nil)
	}
	return nil
}

// ScatterTensor is Scatter on device tensors (ncclScatter): chunk i of
// root's send (send.Len()/N elements) goes to rank i's recv (send.Len() = N
// x recv.Len() on root; other ranks' send is not used and may be nil).
// Root sends straight from its tensor; the others receive into the comm's
// work buffer on the device, then copy into recv.
func ScatterTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], root int) (err error) {
	const name = "ScatterTensor"
	u := c.uses(ctx)
	defer u.release()
	if err := checkRootedTensorCall(ctx, c, name, &u, recv, send, root); err != nil {
		return err
	}
	N := c.g.n
	if c.rank == root && send.n != recv.n*N {
		return c.invalidCall(ctx, name, invalidArg("root's send.Len()=%d, want recv.Len()*%d=%d", send.n, N, recv.n*N))
	}
	if c.rank == root {
		if err := tensorAlias(name, send, recv, recvInSend, root*recv.n); err != nil {
			return c.invalidCall(ctx, name, err)
		}
	}
	dt := dtypeOf[T]()
	es := dt.Size()
	m := recv.n
	fp := fingerprint{kind: collScatter, dt: dt, count: int64(m), root: int32(root), strategy: Direct, path: pathTensor}
	if ok, err := c.tryShared(ctx, name, "ScatterTensor fingerprint check", fp, sharedScatter, whole(send, c.rank == root), whole(recv, true), m, root); ok {
		return err
	}
	owned, err := c.begin(ctx, name, fp, "ScatterTensor fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	if m == 0 {
		return nil
	}
	n, me := N*m, c.rank*m
	size := m * es
	if c.rank == root {
		size = 0
	}
	if err := c.ensureWork(size, dt); err != nil {
		return c.fail(err, false, nil, nil)
	}
	k := &c.k
	if c.rank != root {
		// Chunk me lands at element 0 of the work buffer.
		*k = callAt(dt, c.work, 0, me)
		if err := c.scatterFrom(ctx, k, root, n, m); err != nil {
			return c.failAfter(err, nil, nil)
		}
		if err := c.deliver(ctx, recv.region(0, m), k.region(me, me+m)); err != nil {
			return c.fail(err, true, nil, nil)
		}
		return nil
	}
	*k = callAt(dt, send.buf, send.off, 0)
	if err := c.scatterFrom(ctx, k, root, n, m); err != nil {
		return c.failAfter(err, nil, nil)
	}
	own, dst := send.region(me, me+m), recv.region(0, m)
	switch {
	case own == dst: // in place: root's chunk is already there
	case overlaps(own, dst):
		// A partial overlap: through the work buffer (Copy needs disjoint
		// regions).
		if err := c.ensureWork(m*es, dt); err != nil {
			return c.fail(err, false, nil, nil)
		}
		w := backend.Region{Buf: c.work, Len: m * es}
		if err := c.record(w, own); err != nil {
			return c.failAfter(err, nil, nil)
		}
		own = w
		fallthrough
	default:
		if err := c.deliver(ctx, dst, own); err != nil {
			return c.fail(err, true, nil, nil)
		}
	}
	return nil
}

// AllToAllVTensor is AllToAllV on device tensors (MPI_Alltoallv): rank i
// sends send[sdispls[j] : sdispls[j]+scounts[j]] to rank j, which stores it
// at recv[rdispls[i] : rdispls[i]+rcounts[i]]; the counts and offsets are
// checked, and agreed between the ranks before any data moves, exactly as
// in AllToAllV (a disagreement is a *MismatchError on every rank and the
// group stays usable). Ranges are sent straight from send and received
// into the comm's work buffer on the device; each received range is then
// copied into recv, whose other elements are not written.
func AllToAllVTensor[T Elem](ctx context.Context, c *Comm, send *Tensor[T], scounts, sdispls []int, recv *Tensor[T], rcounts, rdispls []int) error {
	const name = "AllToAllVTensor"
	u := c.uses(ctx)
	defer u.release()
	if err := checkTensorCall(ctx, c, name, &u, send, recv); err != nil {
		return err
	}
	if err := tensorAlias(name, send, recv, sameMem, 0); err != nil {
		return c.invalidCall(ctx, name, err)
	}
	return vTensor(ctx, c, name, collAllToAllV, Sum, send, scounts, sdispls, recv, recv.n, rcounts, rdispls)
}

// AllGatherVTensor is AllGatherV on device tensors (MPI_Allgatherv): every
// rank's send lands in every rank's recv, rank j's at
// recv[displs[j] : displs[j]+counts[j]]; counts[j] is rank j's
// send.Len(), and counts and displs are the same on every rank. Checked
// and moved as AllToAllVTensor.
func AllGatherVTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], counts, displs []int) error {
	const name = "AllGatherVTensor"
	u := c.uses(ctx)
	defer u.release()
	if err := checkTensorCall(ctx, c, name, &u, send, recv); err != nil {
		return err
	}
	N := c.g.n
	if len(counts) != N || len(displs) != N {
		return c.invalidCall(ctx, name, invalidArg("len(counts)=%d and len(displs)=%d, want one per rank (%d)", len(counts), len(displs), N))
	}
	if err := tensorAlias(name, send, recv, sendInRecv, displs[c.rank]); err != nil {
		return c.invalidCall(ctx, name, err)
	}
	sc, sd, _, _ := c.vScratch(N)
	for j := range sc {
		sc[j], sd[j] = send.n, 0
	}
	return vTensor(ctx, c, name, collAllGatherV, Sum, send, sc, sd, recv, recv.n, counts, displs)
}

// ReduceScatterVTensor is ReduceScatterV on device tensors: every rank's
// send is reduced with op and elements [displs[j], displs[j]+counts[j]) of
// the reduction land in rank j's recv (recv.Len() = counts[j]); counts and
// displs are the same on every rank and describe ranges of send. The
// blocks travel as in AllToAllVTensor into the comm's work buffer, and
// each rank reduces the N blocks it received in rank order with one kernel
// into recv (bitwise what ReduceScatterV gives); a type without kernels on
// some rank's device is reduced on the host, as ReduceScatterV does.
func ReduceScatterVTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], counts, displs []int, op Op) error {
	const name = "ReduceScatterVTensor"
	u := c.uses(ctx)
	defer u.release()
	if err := checkTensorCall(ctx, c, name, &u, send, recv); err != nil {
		return err
	}
	N := c.g.n
	if err := checkOp(op, dtypeOf[T]()); err != nil {
		return c.invalidCall(ctx, name, err)
	}
	if len(counts) != N || len(displs) != N {
		return c.invalidCall(ctx, name, invalidArg("%d counts and %d offsets, want %d each", len(counts), len(displs), N))
	}
	if m := counts[c.rank]; m < 0 || recv.n != m {
		return c.invalidCall(ctx, name, invalidArg("recv.Len()=%d, want counts[%d]=%d", recv.n, c.rank, m))
	}
	if err := tensorAlias(name, send, recv, recvInSend, displs[c.rank]); err != nil {
		return c.invalidCall(ctx, name, err)
	}
	return reduceScatterVTensor(ctx, c, name, send, recv, counts, displs, op)
}

// reduceScatterVTensor is ReduceScatterVTensor after its checks (and
// ReduceScatterTensor for a type without kernels): the N blocks of
// recv.Len() elements land 16 bytes apart in the receive space, so the
// reduction kernel reads them aligned.
func reduceScatterVTensor[T Elem](ctx context.Context, c *Comm, name string, send, recv *Tensor[T], counts, displs []int, op Op) error {
	N, m := c.g.n, recv.n
	es := dtypeOf[T]().Size()
	stride := ((m*es + 15) &^ 15) / es
	_, _, rc, rd := c.vScratch(N)
	for q := range rc {
		rc[q], rd[q] = m, q*stride
	}
	return vTensor(ctx, c, name, collReduceScatterV, op, send, counts, displs, recv, N*stride, rc, rd)
}

// vTensorPhases names the rendezvous of each V tensor collective (static
// strings: no allocation per call).
var vTensorPhases = map[string][4]string{
	"AllToAllVTensor":      {"AllToAllVTensor fingerprint check", "AllToAllVTensor counts check", "AllToAllVTensor counts exchange", "AllToAllVTensor shared data"},
	"AllGatherVTensor":     {"AllGatherVTensor fingerprint check", "AllGatherVTensor counts check", "AllGatherVTensor counts exchange", "AllGatherVTensor shared data"},
	"ReduceScatterVTensor": {"ReduceScatterVTensor fingerprint check", "ReduceScatterVTensor counts check", "ReduceScatterVTensor counts exchange", "ReduceScatterVTensor shared data"},
	"ReduceScatterTensor":  {"ReduceScatterTensor fingerprint check", "ReduceScatterTensor counts check", "ReduceScatterTensor counts exchange", "ReduceScatterTensor shared data"},
}

// vTensor is the tensor forms' allToAllV: send's ranges go to their ranks
// and the ranges received land in a receive space of R elements described
// by rcounts and rdispls: the comm's work buffer, whose ranges are then
// copied into recv (AllToAllV, AllGatherV), or for ReduceScatterV (kind)
// N blocks of recv.Len() that are reduced into recv, by a kernel or on the
// host (the comm's host-visible buffer is then the receive space).
func vTensor[T Elem](ctx context.Context, c *Comm, name string, kind collKind, op Op, send *Tensor[T], scounts, sdispls []int, recv *Tensor[T], R int, rcounts, rdispls []int) (err error) {
	N := c.g.n
	if e := checkV(N, send.n, scounts, sdispls, "send"); e != nil {
		return c.invalidCall(ctx, name, e)
	}
	if e := checkRecvV(N, R, rcounts, rdispls); e != nil {
		return c.invalidCall(ctx, name, e)
	}
	dt := dtypeOf[T]()
	es := dt.Size()
	phases := vTensorPhases[name]
	fp := fingerprint{kind: kind, op: op, dt: dt, strategy: Direct, path: pathTensor}
	owned, err := c.begin(ctx, name, fp, phases[0])
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	reduce := kind == collReduceScatterV
	host := reduce && c.noKernels(dt)
	// Ranks sharing device memory: the leader moves (or reduces) every
	// range in one submission once the counts agree (sharedcoll.go).
	shared := c.g.sharedMem && !host
	if shared {
		c.publishV(sdispls, rcounts, rdispls)
	}
	if err := c.agreeCounts(ctx, name, fp, phases[2], phases[1], scounts, rcounts); err != nil {
		return err
	}
	if shared {
		sk := sharedAllToAllV
		if reduce {
			sk = sharedReduceScatterV
		}
		c.g.tensorOf[c.rank], c.g.tRecvOf[c.rank] = send.region(0, send.n), recv.region(0, recv.n)
		c.strat = fp.strategy
		return c.sharedRun(ctx, name, phases[3], fp, "the ranks share device memory", sharedJob{kind: sk, m: 1})
	}
	S, i := send.n, c.rank
	if S+R == 0 {
		return nil
	}
	size := R * es
	if host {
		size = 0
	}
	if err := c.ensureWork(size, dt); err != nil {
		return c.fail(err, false, nil, nil)
	}
	k := &c.k
	if host {
		if err := c.ensure(&c.gather, R*es); err != nil {
			return c.fail(err, false, nil, nil)
		}
		*k = callAt(dt, c.gather, 0, 0)
	} else {
		*k = callAt(dt, c.work, 0, 0)
	}
	if scounts[i] > 0 {
		if err := c.record(k.region(rdispls[i], rdispls[i]+rcounts[i]), send.region(sdispls[i], sdispls[i]+scounts[i])); err != nil {
			return c.failAfter(err, nil, nil)
		}
	}
	if err := c.pairwise(ctx, k, send.region(0, S), scounts, sdispls, rcounts, rdispls); err != nil {
		return c.failAfter(err, nil, nil)
	}
	st := c.dev.Stream()
	m := recv.n
	switch {
	case !reduce:
		for j := 0; j < N; j++ {
			if rcounts[j] == 0 {
				continue
			}
			a, b := rdispls[j], rdispls[j]+rcounts[j]
			if err := c.rec(st.Copy(recv.region(a, b), k.region(a, b))); err != nil {
				return c.fail(err, true, nil, nil)
			}
		}
		if err := c.flush(ctx); err != nil {
			return c.fail(err, true, nil, nil)
		}
	case host:
		if err := c.settle(ctx); err != nil {
			return c.failAfter(err, nil, nil)
		}
		if m == 0 {
			return nil
		}
		gb := c.gather.Bytes()
		reduceHost(dt, gb[:m*es], gb[:R*es], R/N, 0, N, m, op, scaleFor(op, N))
		if err := c.deliver(ctx, recv.region(0, m), k.region(0, m)); err != nil {
			return c.fail(err, true, nil, nil)
		}
	default:
		if m > 0 {
			srcs := c.regions(N)
			for q := range srcs {
				srcs[q] = k.region(rdispls[q], rdispls[q]+m)
			}
			if err := c.rec(st.Reduce(kernelOp(op), dt, recv.region(0, m), srcs, scaleFor(op, N))); err != nil {
				return c.fail(err, true, nil, nil)
			}
		}
		if err := c.flush(ctx); err != nil {
			return c.fail(err, true, nil, nil)
		}
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
	cnt := c.vCountBuf(2 * N)
	if g.tr == nil {
		pub := c.vPubBuf(N)
		copy(pub, scounts)
		g.vCountsOf[i] = pub
		if err := c.arrive(ctx, fp, exchange); err != nil {
			return err
		}
		for j := 0; j < N; j++ {
			cnt[N+j] = float64(g.vCountsOf[j][i])
		}
	} else if err := c.exchangeCounts(ctx, &c.k, scounts, cnt); err != nil {
		return err
	}
	bad := -1
	for j := 0; j < N; j++ {
		if int(cnt[N+j]) != rcounts[j] {
			bad = j
			break
		}
	}
	all, err := c.arriveFlag(ctx, fp, check, bad < 0)
	if err != nil {
		return err
	}
	if !all {
		if bad >= 0 {
			return &MismatchError{Seq: c.seq, Rank: i, Call: fmt.Sprintf("%s expecting %d elements from rank %d", name, rcounts[bad], bad),
				Peer: bad, PeerCall: fmt.Sprintf("%s sending %d", name, int(cnt[N+bad]))}
		}
		return &MismatchError{Seq: c.seq, Rank: i, Call: name, Peer: -1, PeerCall: name + " with counts that disagree between other ranks"}
	}
	return nil
}

// pairwise is AllToAllV's exchange for data outside the call's buffer:
// src's ranges [sdispls[j], +scounts[j]) go to rank j, and the ranges rank
// j sends here land in k's [rdispls[j], +rcounts[j]); N-1 shift steps (to
// i+s, from i-s), slice by slice, one message per link at a time. The
// caller copies its own range.
func (c *Comm) pairwise(ctx context.Context, k *call, src backend.Region, scounts, sdispls, rcounts, rdispls []int) error {
	N, i := c.g.n, c.rank
	slice := c.g.slotBytes / k.es
	st := c.dev.Stream()
	for s := 1; s < N; s++ {
		to, from := mod(i+s, N), mod(i-s, N)
		for j := 0; j*slice < max(scounts[to], rcounts[from]); j++ {
			a, b := sliceRange(sdispls[to], sdispls[to]+scounts[to], slice, j)
			out := backend.Region{Buf: src.Buf, Off: src.Off + a*k.es, Len: (b - a) * k.es}
			if err := c.sendRegion(ctx, to, out); err != nil {
				return err
			}
			a, b = sliceRange(rdispls[from], rdispls[from]+rcounts[from], slice, j)
			if b <= a {
				continue
			}
			in, _, err := c.take(ctx, from, 0, msgCollective, (b-a)*k.es)
			if err != nil {
				return err
			}
			if err := c.rec(st.Copy(k.region(a, b), in)); err != nil {
				return err
			}
			if err := c.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// sendRegion is sendSlice for a region outside the call's buffer: src
// (at most one slot) goes to peer through a free outbox slot; nothing when
// src is empty.
func (c *Comm) sendRegion(ctx context.Context, to int, src backend.Region) error {
	if src.Len == 0 {
		return nil
	}
	slot, out, err := c.reserve(ctx, to, src.Len)
	if err != nil {
		return err
	}
	if err := c.rec(c.dev.Stream().Copy(out, src)); err != nil {
		return err
	}
	if err := c.flush(ctx); err != nil {
		return err
	}
	c.post(to, slot, src.Len, msg{})
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
// result src into the caller's dst, submitted and waited for (a failure
// leaves dst undefined).
func (c *Comm) deliver(ctx context.Context, dst, src backend.Region) error {
	if dst.Len > 0 {
		if err := c.rec(c.dev.Stream().Copy(dst, src)); err != nil {
			return err
		}
	}
	return c.flush(ctx)
}

// callAt returns a call (no reduction) on buf whose element at lies at
// byte off: an algorithm that addresses chunk q of an N-chunk layout then
// reads or writes a tensor or buffer that holds only that chunk.
func callAt(dt backend.DType, buf backend.Buffer, off, at int) call {
	es := dt.Size()
	return call{dt: dt, es: es, op: backend.Sum, scale: 1, work: buf, base: off - at*es}
}

// region returns elements [lo, hi) of t.
func (t *Tensor[T]) region(lo, hi int) backend.Region {
	var z T
	es := int(unsafe.Sizeof(z))
	return backend.Region{Buf: t.buf, Off: t.off + lo*es, Len: (hi - lo) * es}
}

// checkTensorCall resolves (into u) and checks the comm and the send and
// recv tensors of tensor collective name.
func checkTensorCall[T Elem](ctx context.Context, c *Comm, name string, u *memUse, send, recv *Tensor[T]) error {
	if c == nil {
		return invalidArg("nil Comm")
	}
	err := u.tensor(send.life())
	if err == nil {
		err = u.tensor(recv.life())
	}
	if err == nil {
		err = send.check(c, name)
	}
	if err == nil {
		err = recv.check(c, name)
	}
	if err != nil {
		return c.invalidCall(ctx, name, err)
	}
	return nil
}

// checkRootedTensorCall resolves and checks the comm, the tensors and the
// root of rooted tensor collective name: every rank's tensor (mine), root,
// then root's other tensor (atRoot, which the other ranks do not use), as
// checkTensorCall does.
func checkRootedTensorCall[T Elem](ctx context.Context, c *Comm, name string, u *memUse, mine, atRoot *Tensor[T], root int) error {
	if c == nil {
		return invalidArg("nil Comm")
	}
	err := u.tensor(mine.life())
	if err == nil {
		err = mine.check(c, name)
	}
	if err != nil {
		return c.invalidCall(ctx, name, err)
	}
	if N := c.g.n; root < 0 || root >= N {
		return c.invalidCall(ctx, name, invalidArg("root %d out of range [0, %d)", root, N))
	}
	if c.rank == root {
		err := u.tensor(atRoot.life())
		if err == nil {
			err = atRoot.check(c, name)
		}
		if err != nil {
			return c.invalidCall(ctx, name, err)
		}
	}
	return nil
}

// tensorAlias is checkAlias of two tensors (at: the block's element
// offset).
func tensorAlias[T Elem](name string, send, recv *Tensor[T], allow layout, at int) error {
	es := dtypeOf[T]().Size()
	return checkAlias(name, regionArea(send.region(0, send.n)), regionArea(recv.region(0, recv.n)), allow, at*es)
}

// overlaps reports whether two regions share a byte.
func overlaps(a, b backend.Region) bool {
	return a.Buf == b.Buf && a.Off < b.Off+b.Len && b.Off < a.Off+a.Len
}
