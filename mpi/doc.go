// Package mpi is gocoll's transport between processes, possibly on several
// hosts: a cgo binding of the MPI C API that implements backend.Transport and
// adds MPI's own all-reduce and barrier as baselines for benchmarks.
//
// The binding is optional and needs an MPI library: build with -tags mpi
// (Open MPI through pkg-config ompi-c), -tags mpi,mpich (MPICH through
// pkg-config mpich) or -tags mpi,mpicustom (no pkg-config; CGO_CFLAGS and
// CGO_LDFLAGS name the library, for example from mpicc --showme). Without the
// mpi tag this package is empty, so go build ./... and go vet ./... need no
// MPI. docs/MPI.md says how to run the programs under mpirun.
//
// A process calls [Init] once (later calls return the same [World]), uses the
// World as a backend.Transport from any goroutine, and calls [Finalize]
// before it exits. Init asks MPI for MPI_THREAD_MULTIPLE; when the library
// provides less, the package serializes its MPI calls (MPI_THREAD_SERIALIZED)
// or runs all of them on the one OS thread that initialized MPI
// (MPI_THREAD_FUNNELED or MPI_THREAD_SINGLE). [World.ThreadLevel] says which.
//
// MPI errors return to the caller (MPI_ERRORS_RETURN) as *[Error] values that
// match backend's sentinels with errors.Is. Waits take a context and never
// hang: a process that never arrives at a collective makes the others return
// an error matching backend.ErrTimeout, naming the processes that were not
// seen to arrive.
package mpi
