package native

import (
	"context"

	"github.com/gocoll/gocoll/backend"
)

// NodeAllreduce is an all-reduce among the processes of a transport through
// memory they all share (the mpi package registers one over an MPI-3
// shared-memory window): srcs are this process's inputs (the same count on
// every process), reduced with op in global order (process by process, each
// process's inputs in order) into dst's n elements, then scaled by scale,
// with hostmath's arithmetic. It reports ran false, having done nothing,
// where the transport's processes do not share memory (not one node, turned
// off): that answer is the same on every process, and the caller then runs
// the transport's own collective. It is collective like the transport's
// native collectives and honours ctx alike.
type NodeAllreduce func(ctx context.Context, nc backend.NativeCollectives, srcs [][]byte, dst []byte, n int,
	dt backend.DType, op backend.Op, scale float64) (ran bool, err error)

// node is the registered NodeAllreduce, nil when none is.
var node NodeAllreduce

// RegisterNode registers f as the all-reduce through shared memory that a
// leader tries first (called from the transport package's init).
func RegisterNode(f NodeAllreduce) { node = f }

// nodeReduce runs an all-reduce of n elements into dst through the
// registered NodeAllreduce: in deterministic mode every local rank's input
// (reduced in global rank order: bitwise the one-process deterministic
// result), else the process's combined input. ran false: nothing ran.
func (l *Leader) nodeReduce(ctx context.Context, dt backend.DType, op backend.Op, scale float64, n int, dst []byte) (ran bool, err error) {
	srcs := l.Sends
	if !l.Det {
		l.Pools.one[0] = l.combine(dt, op, n*dt.Size())
		srcs = l.Pools.one[:]
	}
	err = l.call(ctx, "MPI_Ibarrier of the shared-memory all-reduce", func(ctx context.Context) error {
		var err error
		ran, err = node(ctx, l.NC, srcs, dst, n, dt, op, scale)
		return err
	})
	l.Pools.one[0] = nil
	return ran, err
}
