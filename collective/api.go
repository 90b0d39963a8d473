package collective

import "context"

// The entry points of the collectives on host slices other than all-reduce:
// each describes its call and runs it through the pipeline (call.go); its
// Async form queues the same description on the comm (start): the call
// starts when the comm's earlier operations are done, and its slices
// (counts and offsets included) must not be touched until its Work is
// done.

// ReduceScatter reduces send (len(recv) * N elements on every rank) with op
// and leaves chunk r of the result (elements [r*len(recv), (r+1)*len(recv)))
// in rank r's recv. Ring: N-1 steps; in deterministic mode (or with the
// Direct strategy) each chunk is reduced at its owner in rank order. recv
// may be send's chunk r (in place).
func ReduceScatter[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	return c.run(ctx, &desc{kind: collReduceScatter, dt: dtypeOf[T](), op: op, send: asBytes(send), recv: asBytes(recv)})
}

// ReduceScatterAsync starts ReduceScatter and returns at once.
func ReduceScatterAsync[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op) Work {
	return c.start(ctx, desc{kind: collReduceScatter, dt: dtypeOf[T](), op: op, send: asBytes(send), recv: asBytes(recv)})
}

// AllGather concatenates every rank's send (len(recv)/N elements each) in
// rank order into every rank's recv, with a ring of N-1 steps. send may be
// recv's block r (in place).
func AllGather[T Elem](ctx context.Context, c *Comm, send, recv []T) error {
	return c.run(ctx, &desc{kind: collAllGather, dt: dtypeOf[T](), send: asBytes(send), recv: asBytes(recv)})
}

// AllGatherAsync starts AllGather and returns at once.
func AllGatherAsync[T Elem](ctx context.Context, c *Comm, send, recv []T) Work {
	return c.start(ctx, desc{kind: collAllGather, dt: dtypeOf[T](), send: asBytes(send), recv: asBytes(recv)})
}

// Broadcast copies root's data to every rank's data, down a binary tree
// rooted at root, in slices.
func Broadcast[T Elem](ctx context.Context, c *Comm, data []T, root int) error {
	return c.run(ctx, &desc{kind: collBroadcast, dt: dtypeOf[T](), root: root, send: asBytes(data)})
}

// BroadcastAsync starts Broadcast and returns at once.
func BroadcastAsync[T Elem](ctx context.Context, c *Comm, data []T, root int) Work {
	return c.start(ctx, desc{kind: collBroadcast, dt: dtypeOf[T](), root: root, send: asBytes(data)})
}

// Reduce reduces every rank's send with op into root's recv (len(send)
// elements; other ranks' recv is not used and may be nil), along a binary
// tree rooted at root. In deterministic mode the reduction is in rank
// order. send and recv may be the same slice (in place).
func Reduce[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op, root int) error {
	return c.run(ctx, &desc{kind: collReduce, dt: dtypeOf[T](), op: op, root: root, send: asBytes(send), recv: asBytes(recv)})
}

// ReduceAsync starts Reduce and returns at once.
func ReduceAsync[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op, root int) Work {
	return c.start(ctx, desc{kind: collReduce, dt: dtypeOf[T](), op: op, root: root, send: asBytes(send), recv: asBytes(recv)})
}

// Gather collects every rank's send into root's recv, rank i's at
// [i*len(send), (i+1)*len(send)) (len(recv) = N x len(send) on root; other
// ranks' recv is not used and may be nil), as ncclGather / MPI_Gather.
// Root's send may be its own block of recv (in place).
func Gather[T Elem](ctx context.Context, c *Comm, send, recv []T, root int) error {
	return c.run(ctx, &desc{kind: collGather, dt: dtypeOf[T](), root: root, send: asBytes(send), recv: asBytes(recv)})
}

// GatherAsync starts Gather and returns at once.
func GatherAsync[T Elem](ctx context.Context, c *Comm, send, recv []T, root int) Work {
	return c.start(ctx, desc{kind: collGather, dt: dtypeOf[T](), root: root, send: asBytes(send), recv: asBytes(recv)})
}

// Scatter sends chunk i of root's send (len(send)/N elements from
// i*len(send)/N) to rank i's recv (len(send) = N x len(recv) on root; other
// ranks' send is not used and may be nil), as ncclScatter / MPI_Scatter.
// Root's recv may be its own chunk of send (in place).
func Scatter[T Elem](ctx context.Context, c *Comm, send, recv []T, root int) error {
	return c.run(ctx, &desc{kind: collScatter, dt: dtypeOf[T](), root: root, send: asBytes(send), recv: asBytes(recv)})
}

// ScatterAsync starts Scatter and returns at once.
func ScatterAsync[T Elem](ctx context.Context, c *Comm, send, recv []T, root int) Work {
	return c.start(ctx, desc{kind: collScatter, dt: dtypeOf[T](), root: root, send: asBytes(send), recv: asBytes(recv)})
}

// AllToAll sends chunk j of every rank's send (len(send)/N elements from
// j*len(send)/N) to rank j, which stores it as chunk i of its recv (i the
// sender's rank): a transpose of the ranks' chunks, as ncclAllToAll or
// MPI_Alltoall with equal counts. len(send) = len(recv) = N x chunk on
// every rank, the chunk length the same everywhere. The exchange is
// pairwise: in step s (1..N-1) rank i sends to i+s and receives from i-s,
// slice by slice, so every link carries one message at a time and no rank
// waits on another's unrelated transfer. send and recv may be the same
// slice (MPI_IN_PLACE); any other overlap is refused.
func AllToAll[T Elem](ctx context.Context, c *Comm, send, recv []T) error {
	return c.run(ctx, &desc{kind: collAllToAll, dt: dtypeOf[T](), send: asBytes(send), recv: asBytes(recv)})
}

// AllToAllAsync starts AllToAll and returns at once.
func AllToAllAsync[T Elem](ctx context.Context, c *Comm, send, recv []T) Work {
	return c.start(ctx, desc{kind: collAllToAll, dt: dtypeOf[T](), send: asBytes(send), recv: asBytes(recv)})
}

// AllToAllV is AllToAll with per-peer counts and offsets (MPI_Alltoallv,
// NCCL's grouped send/recv pattern): rank i sends
// send[sdispls[j] : sdispls[j]+scounts[j]] to rank j, which stores it at
// recv[rdispls[i] : rdispls[i]+rcounts[i]]. Every slice has one entry per
// rank; scounts[j] on rank i must equal rcounts[i] on rank j. The ranks
// first exchange their counts and check them: a disagreement fails on
// every rank with a *MismatchError before any data moves, and the group
// stays usable. recv elements outside the received ranges are not written.
// Regions may not overlap within recv (send regions may).
//
// send and recv may be the same slice (MPI_IN_PLACE): the ranges sent are
// what it holds when the call starts. Any other overlap is refused.
func AllToAllV[T Elem](ctx context.Context, c *Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) error {
	return c.run(ctx, &desc{kind: collAllToAllV, dt: dtypeOf[T](), send: asBytes(send), recv: asBytes(recv), scounts: scounts, sdispls: sdispls, counts: rcounts, displs: rdispls})
}

// AllToAllVAsync starts AllToAllV and returns at once.
func AllToAllVAsync[T Elem](ctx context.Context, c *Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) Work {
	return c.start(ctx, desc{kind: collAllToAllV, dt: dtypeOf[T](), send: asBytes(send), recv: asBytes(recv), scounts: scounts, sdispls: sdispls, counts: rcounts, displs: rdispls})
}

// AllGatherV gathers every rank's send into every rank's recv, rank j's at
// recv[displs[j] : displs[j]+counts[j]] (MPI_Allgatherv): counts[j] is rank
// j's len(send), and counts and displs are the same on every rank. Checked
// as AllToAllV is. send may be recv's range r (in place).
func AllGatherV[T Elem](ctx context.Context, c *Comm, send []T, recv []T, counts, displs []int) error {
	return c.run(ctx, &desc{kind: collAllGatherV, dt: dtypeOf[T](), send: asBytes(send), recv: asBytes(recv), counts: counts, displs: displs})
}

// AllGatherVAsync starts AllGatherV and returns at once.
func AllGatherVAsync[T Elem](ctx context.Context, c *Comm, send []T, recv []T, counts, displs []int) Work {
	return c.start(ctx, desc{kind: collAllGatherV, dt: dtypeOf[T](), send: asBytes(send), recv: asBytes(recv), counts: counts, displs: displs})
}

// ReduceScatterV reduces every rank's send with op and leaves elements
// [displs[j], displs[j]+counts[j]) of the reduction in rank j's recv
// (len(recv) = counts[j]): ReduceScatter with per-rank block sizes. counts
// and displs are the same on every rank and describe ranges of send (whose
// length is the same on every rank). The blocks travel as in AllToAllV
// (counts agreed first) and each rank reduces the N blocks it receives in
// rank order with one kernel on its device (on the CPU, with the kernels'
// arithmetic, for a type some device has no kernels for): bitwise what
// ReduceScatter gives with Config.Deterministic, for every element type
// and op (Mean of Float16, BFloat16 and the fp8 types included: they divide
// the float32 sum by N before the one rounding to the type). recv may be
// send's range r
// (in place).
func ReduceScatterV[T Elem](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, op Op) error {
	return c.run(ctx, &desc{kind: collReduceScatterV, dt: dtypeOf[T](), op: op, send: asBytes(send), recv: asBytes(recv), counts: counts, displs: displs})
}

// ReduceScatterVAsync starts ReduceScatterV and returns at once.
func ReduceScatterVAsync[T Elem](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, op Op) Work {
	return c.start(ctx, desc{kind: collReduceScatterV, dt: dtypeOf[T](), op: op, send: asBytes(send), recv: asBytes(recv), counts: counts, displs: displs})
}

// GatherV collects every rank's send into root's recv, rank j's at
// recv[displs[j] : displs[j]+counts[j]] (MPI_Gatherv): counts[j] is rank
// j's len(send). recv, counts and displs are used on root only (others may
// pass nil). The ranks agree on the counts before any data moves: a rank
// whose len(send) differs from root's counts fails every rank with a
// *MismatchError, and the group stays usable. recv elements outside the
// received ranges are not written; the ranges may not overlap. Root's send
// may be its own range of recv (in place).
func GatherV[T Elem](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, root int) error {
	return c.run(ctx, &desc{kind: collGatherV, dt: dtypeOf[T](), root: root, send: asBytes(send), recv: asBytes(recv), counts: counts, displs: displs})
}

// GatherVAsync starts GatherV and returns at once.
func GatherVAsync[T Elem](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, root int) Work {
	return c.start(ctx, desc{kind: collGatherV, dt: dtypeOf[T](), root: root, send: asBytes(send), recv: asBytes(recv), counts: counts, displs: displs})
}

// ScatterV sends send[displs[j] : displs[j]+counts[j]] of root's send to
// rank j's recv (MPI_Scatterv): len(recv) on rank j must be counts[j].
// send, counts and displs are used on root only (others may pass nil); the
// counts are agreed as in GatherV. Root's recv may be its own range of
// send (in place).
func ScatterV[T Elem](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, root int) error {
	return c.run(ctx, &desc{kind: collScatterV, dt: dtypeOf[T](), root: root, send: asBytes(send), recv: asBytes(recv), counts: counts, displs: displs})
}

// ScatterVAsync starts ScatterV and returns at once.
func ScatterVAsync[T Elem](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, root int) Work {
	return c.start(ctx, desc{kind: collScatterV, dt: dtypeOf[T](), root: root, send: asBytes(send), recv: asBytes(recv), counts: counts, displs: displs})
}

// The device-tensor forms of the same collectives (tensorcoll.go has their
// algorithms): the same descriptions with tensors for buffers.

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
func ReduceScatterTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], op Op) error {
	return c.run(ctx, &desc{kind: collReduceScatter, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), op: op})
}

// ReduceScatterTensorAsync starts ReduceScatterTensor and returns at once.
func ReduceScatterTensorAsync[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], op Op) Work {
	return c.start(ctx, desc{kind: collReduceScatter, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), op: op})
}

// AllGatherTensor is AllGather on device tensors (ncclAllGather): every
// rank's send (recv.Len()/N elements each) is concatenated in rank order
// into every rank's recv, with a ring of N-1 steps in the comm's work
// buffer on the device, then copied into recv. Every element type works on
// every device (no kernels run).
func AllGatherTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T]) error {
	return c.run(ctx, &desc{kind: collAllGather, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core()})
}

// AllGatherTensorAsync starts AllGatherTensor and returns at once.
func AllGatherTensorAsync[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T]) Work {
	return c.start(ctx, desc{kind: collAllGather, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core()})
}

// ReduceTensor is Reduce on device tensors (ncclReduce): every rank's send
// is reduced with op into root's recv (send.Len() elements; other ranks'
// recv is not used and may be nil), along a binary tree rooted at root (in
// deterministic mode in rank order) in the comm's work buffer on the
// device, then copied into recv; ranks sharing device memory instead reduce
// in rank order in one submission, straight into root's recv. A type
// without kernels on some rank's device is gathered at root and reduced
// there exactly on the host, in rank order, as Reduce does.
func ReduceTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], op Op, root int) error {
	return c.run(ctx, &desc{kind: collReduce, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), op: op, root: root})
}

// ReduceTensorAsync starts ReduceTensor and returns at once.
func ReduceTensorAsync[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], op Op, root int) Work {
	return c.start(ctx, desc{kind: collReduce, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), op: op, root: root})
}

// AllToAllTensor is AllToAll on device tensors (ncclAllToAll): chunk j of
// every rank's send (send.Len()/N elements) goes to rank j, which stores it
// as chunk i of its recv (i the sender). send.Len() = recv.Len() = N x
// chunk on every rank; send and recv may be the same tensor (in place,
// MPI_IN_PLACE); any other overlap is refused. Chunks
// are sent straight from send and received into the comm's work buffer on
// the device, pairwise as in AllToAll, then copied into recv.
func AllToAllTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T]) error {
	return c.run(ctx, &desc{kind: collAllToAll, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core()})
}

// AllToAllTensorAsync starts AllToAllTensor and returns at once.
func AllToAllTensorAsync[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T]) Work {
	return c.start(ctx, desc{kind: collAllToAll, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core()})
}

// GatherTensor is Gather on device tensors (ncclGather): every rank's send
// lands in root's recv, rank i's at [i*send.Len(), (i+1)*send.Len())
// (recv.Len() = N x send.Len() on root; other ranks' recv is not used and
// may be nil). Ranks send straight from their tensor; root receives into
// the comm's work buffer on the device, then copies it into recv.
func GatherTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], root int) error {
	return c.run(ctx, &desc{kind: collGather, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), root: root})
}

// GatherTensorAsync starts GatherTensor and returns at once.
func GatherTensorAsync[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], root int) Work {
	return c.start(ctx, desc{kind: collGather, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), root: root})
}

// ScatterTensor is Scatter on device tensors (ncclScatter): chunk i of
// root's send (send.Len()/N elements) goes to rank i's recv (send.Len() = N
// x recv.Len() on root; other ranks' send is not used and may be nil).
// Root sends straight from its tensor; the others receive into the comm's
// work buffer on the device, then copy into recv.
func ScatterTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], root int) error {
	return c.run(ctx, &desc{kind: collScatter, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), root: root})
}

// ScatterTensorAsync starts ScatterTensor and returns at once.
func ScatterTensorAsync[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], root int) Work {
	return c.start(ctx, desc{kind: collScatter, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), root: root})
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
	return c.run(ctx, &desc{kind: collAllToAllV, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), scounts: scounts, sdispls: sdispls, counts: rcounts, displs: rdispls})
}

// AllToAllVTensorAsync starts AllToAllVTensor and returns at once.
func AllToAllVTensorAsync[T Elem](ctx context.Context, c *Comm, send *Tensor[T], scounts, sdispls []int, recv *Tensor[T], rcounts, rdispls []int) Work {
	return c.start(ctx, desc{kind: collAllToAllV, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), scounts: scounts, sdispls: sdispls, counts: rcounts, displs: rdispls})
}

// AllGatherVTensor is AllGatherV on device tensors (MPI_Allgatherv): every
// rank's send lands in every rank's recv, rank j's at
// recv[displs[j] : displs[j]+counts[j]]; counts[j] is rank j's
// send.Len(), and counts and displs are the same on every rank. Checked
// and moved as AllToAllVTensor.
func AllGatherVTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], counts, displs []int) error {
	return c.run(ctx, &desc{kind: collAllGatherV, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), counts: counts, displs: displs})
}

// AllGatherVTensorAsync starts AllGatherVTensor and returns at once.
func AllGatherVTensorAsync[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], counts, displs []int) Work {
	return c.start(ctx, desc{kind: collAllGatherV, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), counts: counts, displs: displs})
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
	return c.run(ctx, &desc{kind: collReduceScatterV, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), op: op, counts: counts, displs: displs})
}

// ReduceScatterVTensorAsync starts ReduceScatterVTensor and returns at once.
func ReduceScatterVTensorAsync[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], counts, displs []int, op Op) Work {
	return c.start(ctx, desc{kind: collReduceScatterV, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), op: op, counts: counts, displs: displs})
}

// BroadcastTensor copies root's tensor to every rank's tensor.
func BroadcastTensor[T Elem](ctx context.Context, c *Comm, t *Tensor[T], root int) error {
	return c.run(ctx, &desc{kind: collBroadcast, dt: dtypeOf[T](), tensor: true, st: t.core(), root: root})
}

// BroadcastTensorAsync starts BroadcastTensor and returns at once.
func BroadcastTensorAsync[T Elem](ctx context.Context, c *Comm, t *Tensor[T], root int) Work {
	return c.start(ctx, desc{kind: collBroadcast, dt: dtypeOf[T](), tensor: true, st: t.core(), root: root})
}

// AllReduceAsync starts AllReduce on data and returns at once; data must
// not be touched until the Work is done. A Comm is an ordered stream:
// operations run in the order they were started, asynchronous or not, and
// ctx bounds the operation. Every rank must start the same sequence of
// collectives.
func AllReduceAsync[T Elem](ctx context.Context, c *Comm, data []T, op Op) Work {
	b := asBytes(data)
	return c.start(ctx, desc{kind: collAllReduce, dt: dtypeOf[T](), op: op, send: b, recv: b})
}

// AllReduceTensor all-reduces a device tensor in place with strategy s
// (Auto: the group's). The data stays on the device; exchange slices cross
// host memory between ranks.
func AllReduceTensor[T Elem](ctx context.Context, c *Comm, t *Tensor[T], op Op, s Strategy) error {
	return c.run(ctx, &desc{kind: collAllReduce, dt: dtypeOf[T](), tensor: true, st: t.core(), op: op, strategy: s})
}

// AllReduceTensorAsync starts AllReduceTensor and returns at once.
func AllReduceTensorAsync[T Elem](ctx context.Context, c *Comm, t *Tensor[T], op Op, s Strategy) Work {
	return c.start(ctx, desc{kind: collAllReduce, dt: dtypeOf[T](), tensor: true, st: t.core(), op: op, strategy: s})
}

// Scan is the inclusive prefix reduction (MPI_Scan): rank r's recv holds
// send of ranks 0..r reduced with op, in rank order. send and recv have the
// same length on every rank and may be the same slice. In one process on
// a GPU backend with kernels for the type, each rank gathers its slice of
// the elements of every rank's input and its device reduces every prefix
// of that slice (the reduce kernels, in rank order), written into each
// rank's recv: every element crosses to and from the devices once (from
// HostBuffers the devices read and write in place, without a host copy,
// but for a sum or product of 16- and 8-bit floats).
// Elsewhere (the host backend, a type without kernels, ranks in several
// processes) every rank's input is gathered (each rank holds N times its
// input, in pooled host memory) and each rank reduces its prefix on the
// CPU with the kernels' arithmetic. Either way the result is rounded once:
// exact for integers, the same bits whatever the backend or layout,
// 16-bit and 8-bit floats accumulated in float32. Mean is refused
// (ErrInvalidArgument): divide rank r's Sum by r+1.
func Scan[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	return c.run(ctx, &desc{kind: collScan, dt: dtypeOf[T](), op: op, send: asBytes(send), recv: asBytes(recv)})
}

// ScanAsync starts Scan and returns at once.
func ScanAsync[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op) Work {
	return c.start(ctx, desc{kind: collScan, dt: dtypeOf[T](), op: op, send: asBytes(send), recv: asBytes(recv)})
}

// Exscan is the exclusive prefix reduction (MPI_Exscan): rank r's recv
// holds send of ranks 0..r-1 reduced with op, as Scan computes it. Rank 0's
// recv is left untouched (MPI leaves it undefined).
func Exscan[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	return c.run(ctx, &desc{kind: collExscan, dt: dtypeOf[T](), op: op, send: asBytes(send), recv: asBytes(recv)})
}

// ExscanAsync starts Exscan and returns at once.
func ExscanAsync[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op) Work {
	return c.start(ctx, desc{kind: collExscan, dt: dtypeOf[T](), op: op, send: asBytes(send), recv: asBytes(recv)})
}

// ScanTensor is Scan on device tensors: rank r's recv holds send of ranks
// 0..r reduced with op in rank order, bit for bit what Scan gives (the
// kernels' arithmetic, rounded once). send and recv have the same length
// on every rank and may be the same tensor; Mean is refused
// (ErrInvalidArgument), as in Scan. The data stays on the devices: ranks
// sharing device memory reduce every rank's prefix in one submission,
// reading the peers' send tensors in place (each prefix one kernel in rank
// order); elsewhere (a logical device per rank, ranks in several
// processes) every rank's send is gathered, a ring as AllGatherTensor's,
// into the comm's work buffer on the device (N times send), where one
// kernel reduces this rank's prefix into recv. A type without kernels on
// some rank's device is gathered into host memory and reduced there
// exactly, as Scan does.
func ScanTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], op Op) error {
	return c.run(ctx, &desc{kind: collScan, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), op: op})
}

// ScanTensorAsync starts ScanTensor and returns at once.
func ScanTensorAsync[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], op Op) Work {
	return c.start(ctx, desc{kind: collScan, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), op: op})
}

// ExscanTensor is Exscan on device tensors: rank r's recv holds send of
// ranks 0..r-1 reduced with op, as ScanTensor computes it; rank 0's recv
// is left untouched, as in Exscan (rank 0 still passes a recv of send's
// length). send and recv may be the same tensor.
func ExscanTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], op Op) error {
	return c.run(ctx, &desc{kind: collExscan, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), op: op})
}

// ExscanTensorAsync starts ExscanTensor and returns at once.
func ExscanTensorAsync[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], op Op) Work {
	return c.start(ctx, desc{kind: collExscan, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), op: op})
}

// BroadcastInto is Broadcast out of place (ncclBroadcast): root's send is
// copied into every rank's recv (root's included, once the data moved), as
// Broadcast does in place; send is used on root only (others may pass nil)
// and root may pass send == recv. It matches peers calling Broadcast on
// recv.
func BroadcastInto[T Elem](ctx context.Context, c *Comm, send, recv []T, root int) error {
	return c.run(ctx, &desc{kind: collBroadcastInto, dt: dtypeOf[T](), root: root, send: asBytes(send), recv: asBytes(recv)})
}

// BroadcastIntoAsync starts BroadcastInto and returns at once.
func BroadcastIntoAsync[T Elem](ctx context.Context, c *Comm, send, recv []T, root int) Work {
	return c.start(ctx, desc{kind: collBroadcastInto, dt: dtypeOf[T](), root: root, send: asBytes(send), recv: asBytes(recv)})
}

// BroadcastIntoTensor is BroadcastInto on device tensors (ncclBroadcast
// out of place): root's send is copied into every rank's recv, as
// BroadcastTensor does in place (root's recv by a device copy once the
// data moved); send is used on root only (others may pass nil) and has
// recv's length, and root may pass send == recv (the in-place broadcast);
// any other overlap of send and recv is ErrInvalidArgument before any data
// moves. It matches peers calling BroadcastTensor on recv.
func BroadcastIntoTensor[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], root int) error {
	return c.run(ctx, &desc{kind: collBroadcastInto, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), root: root})
}

// BroadcastIntoTensorAsync starts BroadcastIntoTensor and returns at once.
func BroadcastIntoTensorAsync[T Elem](ctx context.Context, c *Comm, send, recv *Tensor[T], root int) Work {
	return c.start(ctx, desc{kind: collBroadcastInto, dt: dtypeOf[T](), tensor: true, st: send.core(), rt: recv.core(), root: root})
}
