package native

import (
	"context"

	"github.com/gocoll/gocoll/backend"
)

// Node is a transport's collectives among its processes through memory
// they all share (the mpi package registers them over an MPI-3
// shared-memory window). Each is collective like the transport's native
// collectives and honours ctx alike; srcs are this process's inputs (the
// same count on every process), and a reduction reduces every process's
// inputs with op in global order (process by process, each process's
// inputs in order), then scales by scale, with hostmath's arithmetic. Each
// reports ran false, having done nothing, where the transport's processes
// do not share memory (not one node, turned off): that answer is the same
// on every process, and the caller then runs the transport's own
// collective. dst is written chunk by chunk, each chunk once: a failed
// call may have written part of it, as MPI's own collectives may (srcs may
// be dst's memory: in place).
//
// Allreduce and ReduceScatter take a Combiner where the process has
// several ranks outside deterministic mode: srcs are then the ranks'
// inputs as they are, and comb makes their rank-order reduction on demand
// (the one input the Node otherwise reduces), so that the Node may read
// the inputs where they lie (AllocShared memory) or combine them first.
type Node struct {
	// Allreduce reduces srcs (n elements each) into dst's n elements.
	Allreduce func(ctx context.Context, nc backend.NativeCollectives, srcs [][]byte, comb Combiner, dst []byte, n int,
		dt backend.DType, op backend.Op, scale float64) (ran bool, err error)
	// Reduce reduces srcs (n elements each) into dst's n elements on
	// process root (dst is nil on the others).
	Reduce func(ctx context.Context, nc backend.NativeCollectives, srcs [][]byte, dst []byte, n int,
		dt backend.DType, op backend.Op, scale float64, root int) (ran bool, err error)
	// Bcast copies buf of process root into buf of every other process.
	Bcast func(ctx context.Context, nc backend.NativeCollectives, buf []byte, root int) (ran bool, err error)
	// ReduceScatter reduces segment p of srcs (P segments of seg elements
	// each, P the processes) into dst's seg elements on process p, or
	// into into's instead (the process's one rank's result; nil where it
	// has several), where the call reads every input where it lies and
	// writes its result once: wrote says so.
	ReduceScatter func(ctx context.Context, nc backend.NativeCollectives, srcs [][]byte, comb Combiner, dst, into []byte, seg int,
		dt backend.DType, op backend.Op, scale float64) (wrote, ran bool, err error)
	// Allgather gathers every process's srcs (mb bytes each) into dst, in
	// global order (P·len(srcs)·mb bytes). With keep, a call of one chunk
	// leaves the gathered blocks in the shared memory instead of copying
	// them out (dst is not written): block r (in global order) at
	// view[r*stride:], valid until the process's next call through the
	// Node; view is nil where dst holds the result. more (the process's
	// other ranks' results, nil with one rank) may be written with dst's
	// result too, in the same pass: wrote says so.
	Allgather func(ctx context.Context, nc backend.NativeCollectives, srcs [][]byte, dst []byte, more [][]byte, mb int, keep bool) (view []byte, stride int, wrote, ran bool, err error)
}

// Combiner makes a process's inputs' rank-order reduction (Combined: in
// the leader's pooled memory) for a Node that did not read them where
// they lie. A *Leader is one, set up for the call (combineFor).
type Combiner interface{ Combined() []byte }

// combineFor sets the leader up as the Combiner of a call of nb bytes per
// rank and returns the inputs and the Combiner handed to a Node: the
// ranks' inputs and the leader where the process has several ranks
// outside deterministic mode, else inputs' and nil.
func (l *Leader) combineFor(dt backend.DType, op backend.Op, nb int) ([][]byte, Combiner) {
	if l.Det || l.L == 1 {
		return l.inputs(dt, op, nb), nil
	}
	l.cdt, l.cop, l.cnb = dt, op, nb
	return l.Sends, l
}

// Combined is the process's inputs reduced in rank order (combine), for a
// call set up by combineFor.
func (l *Leader) Combined() []byte { return l.combine(l.cdt, l.cop, l.cnb) }

// node is the registered Node, nil when none is.
var node *Node

// RegisterNode registers n as the collectives through shared memory that a
// leader tries first (called from the transport package's init).
func RegisterNode(n *Node) { node = n }

// inputs returns the inputs of a reduction of nb bytes per rank handed to
// a Node: in deterministic mode every local rank's input (reduced in
// global rank order: bitwise the one-process deterministic result), else
// the process's combined input.
func (l *Leader) inputs(dt backend.DType, op backend.Op, nb int) [][]byte {
	if l.Det {
		return l.Sends
	}
	l.Pools.one[0] = l.combine(dt, op, nb)
	return l.Pools.one[:]
}

// nodeCall runs f, a Node's collective, under the wait context (name: the
// failure's call); ran false: nothing ran.
func (l *Leader) nodeCall(ctx context.Context, name string, f func(context.Context) (bool, error)) (ran bool, err error) {
	err = l.call(ctx, name, func(ctx context.Context) error {
		var err error
		ran, err = f(ctx)
		return err
	})
	l.Pools.one[0] = nil
	return ran, err
}

// nodeReduce runs an all-reduce of n elements into dst through the
// registered Node. ran false: nothing ran.
func (l *Leader) nodeReduce(ctx context.Context, dt backend.DType, op backend.Op, scale float64, n int, dst []byte) (ran bool, err error) {
	srcs, comb := l.combineFor(dt, op, n*dt.Size())
	return l.nodeCall(ctx, "MPI_Ibarrier of the shared-memory all-reduce", func(ctx context.Context) (bool, error) {
		return node.Allreduce(ctx, l.NC, srcs, comb, dst, n, dt, op, scale)
	})
}

// nodeRootReduce runs a reduce of n elements to process root into dst
// (nil but on root) through the registered Node.
func (l *Leader) nodeRootReduce(ctx context.Context, dt backend.DType, op backend.Op, scale float64, n int, dst []byte, root int) (ran bool, err error) {
	srcs := l.inputs(dt, op, n*dt.Size())
	return l.nodeCall(ctx, "MPI_Ibarrier of the shared-memory reduce", func(ctx context.Context) (bool, error) {
		return node.Reduce(ctx, l.NC, srcs, dst, n, dt, op, scale, root)
	})
}

// nodeBcast runs a broadcast of buf from process root through the
// registered Node.
func (l *Leader) nodeBcast(ctx context.Context, buf []byte, root int) (ran bool, err error) {
	return l.nodeCall(ctx, "MPI_Ibarrier of the shared-memory broadcast", func(ctx context.Context) (bool, error) {
		return node.Bcast(ctx, l.NC, buf, root)
	})
}

// nodeReduceScatter runs a ReduceScatter of m elements per rank into res,
// or into into (not nil: the process's one rank's result) where the Node
// writes it there (Pools' wrote)
// (the process's ranks' blocks) through the registered Node.
func (l *Leader) nodeReduceScatter(ctx context.Context, dt backend.DType, op backend.Op, scale float64, m int, res, into []byte) (ran bool, err error) {
	srcs, comb := l.combineFor(dt, op, l.N*m*dt.Size())
	return l.nodeCall(ctx, "MPI_Ibarrier of the shared-memory reduce-scatter", func(ctx context.Context) (bool, error) {
		var err error
		l.Pools.wrote, ran, err = node.ReduceScatter(ctx, l.NC, srcs, comb, res, into, l.L*m, dt, op, scale)
		return ran, err
	})
}

// nodeAllGather runs an AllGather of mb bytes per rank into recv through
// the registered Node; with several ranks in the process, a call of one
// chunk leaves the blocks in the Node's memory (Pools' view), and a call
// may write the other ranks' results (more) too (Pools' wrote).
func (l *Leader) nodeAllGather(ctx context.Context, mb int, recv []byte, more [][]byte) (ran bool, err error) {
	return l.nodeCall(ctx, "MPI_Ibarrier of the shared-memory all-gather", func(ctx context.Context) (bool, error) {
		var err error
		l.Pools.view, l.Pools.stride, l.Pools.wrote, ran, err = node.Allgather(ctx, l.NC, l.Sends, recv, more, mb, l.L > 1)
		if err != nil {
			l.Pools.view, l.Pools.wrote = nil, false
		}
		return ran, err
	})
}
