//go:build mpi && cgo

package mpi

import (
	"context"
	"math"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/mpibase"
)

func init() { mpibase.IallreduceLoop = iallreduceLoop }

// iallreduceLoop is mpibase.IallreduceLoop: k calls of MPI_Iallreduce on
// w's communicator, each tested with MPI_Test in a loop until done, in one
// call into C, in the World's collective order and under its thread level
// (on the executor's thread where MPI is funneled).
func iallreduceLoop(ctx context.Context, t any, send, recv unsafe.Pointer, n int, dt backend.DType, op backend.Op, k int) (time.Duration, error) {
	const call = "MPI_Iallreduce"
	w, _ := t.(*World)
	switch {
	case w == nil:
		return 0, argError(call, "the loop runs on an *mpi.World, not %T", t)
	case n < 0 || n > math.MaxInt32 || k < 0 || k > math.MaxInt32:
		return 0, argError(call, "%d elements, %d calls: want 0 to 2^31-1 of each", n, k)
	case op < backend.Sum || op > backend.Min || !cHasType(dt):
		return 0, argError(call, "no MPI all-reduce of %v with %v here (World's all-reduces: Sum, Prod, Max, Min)", dt, op)
	case n > 0 && (send == nil || recv == nil):
		return 0, argError(call, "nil buffer for %d elements", n)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if _, err := w.beginCollective(ctx, call); err != nil {
		return 0, err
	}
	defer w.collMu.Unlock()
	var took time.Duration
	code := 0
	closed := true
	ok := w.cold(false, func() {
		if closed = w.closed.Load(); !closed {
			took, code = cIallreduceLoop(send, recv, n, dt, op, w.comm, k)
		}
	})
	switch {
	case !ok || closed:
		return 0, closedError(call)
	case code != 0:
		return 0, w.mpiError(call, code, "")
	}
	return took, nil
}
