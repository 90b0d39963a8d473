//go:build !mpi || !cgo

package mpi

// Built without MPI (no -tags mpi, or without cgo): the API of api.go over
// stubs. No World can exist, so Init fails and says how to build with MPI;
// the World methods, unreachable but for a World made by hand, fail alike.

import (
	"context"
	"fmt"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// errNoMPI is what every call returns in this build (boxed once).
var errNoMPI error = fmt.Errorf("mpi: this program was built without MPI: build it with -tags mpi and cgo, with Open MPI installed (Debian: libopenmpi-dev openmpi-bin; MPICH: -tags mpi,mpich); see docs/MPI.md: %w", backend.ErrUnsupported)

// world is a World's state: only what api.go reads.
type world struct {
	rank, size int
	level      ThreadLevel
	version    string
}

// classSentinel: no MPI error exists without MPI.
func classSentinel(int) error { return nil }

func initMPI() (*World, error) { return nil, errNoMPI }

// finalizeMPI: nothing to finalize.
func finalizeMPI() error { return nil }

func waitMPI(context.Context, backend.Request) error { return errNoMPI }

func (w *World) isend([]byte, int, int) (backend.Request, error)     { return nil, errNoMPI }
func (w *World) irecv([]byte, int, int) (backend.Request, error)     { return nil, errNoMPI }
func (w *World) irecvUpTo([]byte, int, int) (backend.Request, error) { return nil, errNoMPI }
func (w *World) allgather(context.Context, []byte, []byte) error     { return errNoMPI }
func (w *World) barrier(context.Context) error                       { return errNoMPI }
func (w *World) closeWorld() error                                   { return nil }

func (w *World) allocShared(context.Context, int) ([]byte, bool, error) { return nil, false, errNoMPI }

func (w *World) allreduceF32(context.Context, []float32, []float32, backend.Op) error {
	return errNoMPI
}

func (w *World) allreduceF64(context.Context, []float64, []float64, backend.Op) error {
	return errNoMPI
}

func (w *World) dup(context.Context) (backend.Transport, error) { return nil, errNoMPI }

func (w *World) split(context.Context, int, int) (backend.Transport, error) { return nil, errNoMPI }

func reduces(backend.DType, backend.Op) bool { return false }

func (w *World) nativeAllreduce(context.Context, []byte, []byte, backend.DType, backend.Op) error {
	return errNoMPI
}

func (w *World) nativeReduceScatter(context.Context, []byte, []byte, backend.DType, backend.Op) error {
	return errNoMPI
}

func (w *World) nativeReduce(context.Context, []byte, []byte, backend.DType, backend.Op, int) error {
	return errNoMPI
}

func (w *World) nativeBcast(context.Context, []byte, int) error       { return errNoMPI }
func (w *World) nativeAlltoall(context.Context, []byte, []byte) error { return errNoMPI }
func (w *World) drainNative(time.Duration) bool                       { return true }

func (w *World) nativeAlltoallv(context.Context, []byte, []int, []int, []byte, []int, []int) error {
	return errNoMPI
}
