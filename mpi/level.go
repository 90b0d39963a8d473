package mpi

import "fmt"

// ThreadLevel is an MPI thread support level (MPI_THREAD_*), lowest first.
type ThreadLevel int

const (
	ThreadSingle     ThreadLevel = iota // MPI_THREAD_SINGLE: one thread only
	ThreadFunneled                      // MPI_THREAD_FUNNELED: only the thread that initialized MPI calls it
	ThreadSerialized                    // MPI_THREAD_SERIALIZED: any thread, one at a time
	ThreadMultiple                      // MPI_THREAD_MULTIPLE: any thread, concurrently
)

func (l ThreadLevel) String() string {
	switch l {
	case ThreadSingle:
		return "MPI_THREAD_SINGLE"
	case ThreadFunneled:
		return "MPI_THREAD_FUNNELED"
	case ThreadSerialized:
		return "MPI_THREAD_SERIALIZED"
	case ThreadMultiple:
		return "MPI_THREAD_MULTIPLE"
	}
	return fmt.Sprintf("ThreadLevel(%d)", int(l))
}
