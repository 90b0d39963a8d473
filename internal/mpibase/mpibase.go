// Package mpibase is the seam through which cmd/allreduce-perf times MPI's
// own nonblocking all-reduce from C inside its own processes (the peer of
// mpi.World.AllreduceF32 on the same buffers, placement and thread level).
// Package mpi sets IallreduceLoop where it is built with MPI (-tags mpi and
// cgo); elsewhere it stays nil.
package mpibase

import (
	"context"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// IallreduceLoop runs k all-reduces of n elements of dt with op from send
// into recv on w's communicator (w an *mpi.World), each MPI_Iallreduce
// followed by MPI_Test in a spinning loop until done, all of them in one
// call into C, as a C program's loop does; it returns the time they took.
// It waits for the World's collective order as World's collectives do;
// once in C it runs to the end (ctx is seen before).
var IallreduceLoop func(ctx context.Context, w any, send, recv unsafe.Pointer, n int, dt backend.DType, op backend.Op, k int) (time.Duration, error)
