// Package mpi is gocoll's transport between processes, possibly on several
// hosts: a cgo binding of the MPI C API that implements backend.Transport and
// adds MPI's own all-reduce and barrier as baselines for benchmarks.
//
// The binding is optional and needs an MPI library: build with -tags mpi
// (Open MPI through pkg-config ompi-c), -tags mpi,mpich (MPICH through
// pkg-config mpich) or -tags mpi,mpicustom (no pkg-config; CGO_CFLAGS and
// CGO_LDFLAGS name the library, for example from mpicc --showme). Without the
// mpi tag (or without cgo) the package declares the same API over stubs, so
// go build ./... and go vet ./... need no MPI, programs that use the package
// build everywhere, and go doc lists it; Init then returns an error matching
// backend.ErrUnsupported (collective.ErrUnsupported) that says how to build
// with MPI. docs/MPI.md says how to run the programs under mpirun.
//
// A process calls [Init] once (later calls return the same [World]), uses the
// World as a backend.Transport from any goroutine, and calls [Finalize]
// before it exits. Init asks MPI for MPI_THREAD_MULTIPLE; when the library
// provides less, the package serializes its MPI calls (MPI_THREAD_SERIALIZED)
// or runs all of them on the one OS thread that initialized MPI
// (MPI_THREAD_FUNNELED or MPI_THREAD_SINGLE). [World.ThreadLevel] says which.
//
// [World.Dup] (backend.Duplicator) makes an isolated copy of a World over
// MPI_Comm_idup: its messages and collectives never meet the original's or
// another copy's, so several copies may carry traffic at the same time, each
// with its own collective order. A copy is closed by its own Close, which
// leaves the original open; Finalize closes the copies still open.
// [World.Split] (backend.Splitter) makes such a World over a subset of the
// processes (MPI_Comm_split), which lets a collective.Group split into
// sub-groups that span processes.
//
// A request that Isend or Irecv returns belongs to its caller until Test
// reports completion or Cancel returns. Until then its World keeps it, so a
// request dropped without being finished never leaves a pinned buffer to the
// garbage collector. Closing the World takes over the requests still
// active: Close cancels them, releases those MPI lets go of, keeps the
// others pinned for the life of the process (reported as ErrInFlight), and
// answers their former owner's Test and Cancel with an error matching
// backend.ErrClosed.
//
// [World.IrecvUpTo] receives a message of at most its buffer's length. The
// point-to-point engine of a group that spans processes receives the first
// piece of each message that way, with room for a whole slot, and checks the
// header that piece carries before it posts the rest: a Send and a Recv
// whose lengths or types differ fail the Recv with a
// *collective.MismatchError, never a transport error, and break the group,
// which tells the sender's process (its next call fails with
// collective.ErrGroupBroken matching collective.ErrMismatch). Send does not
// wait for the receiver's acknowledgement: that would cost a round trip on
// every Send (docs/MPI.md).
//
// The native collectives (backend.NativeCollectives: Allreduce,
// ReduceScatterBlock, Reduce, Bcast, Alltoall, Alltoallv) work on the caller's memory
// with no copy. MPI cannot cancel a collective: one whose ctx ended keeps
// that memory pinned and in MPI's use until it completes, and
// [World.Drain] waits for it up to a limit. Past the limit the World is
// declared lost: MPI may still write the memory at any time, so it stays
// pinned and must not be reused, and every later call on the World but
// Drain and Close fails at once with an error matching
// backend.ErrTransportLost.
//
// Where every process of a World runs on one node, collective's strategy
// Native runs AllReduce, ReduceScatter, AllGather, Reduce and Broadcast
// through an MPI-3 shared-memory window of the World
// (MPI_Win_allocate_shared over MPI_Comm_split_type's node communicator,
// fenced with MPI_Win_sync and MPI_Ibarrier) instead of MPI's collectives;
// between 2 processes on one core each, AllReduce and AllGather run MPI's
// collectives, which move each block once, unless every process's inputs
// lie in memory of [AllocShared] (the window reads them where they lie, and
// is faster). GOCOLL_MPI_SHM=0 turns the
// window off, =always uses it for every collective it has;
// GOCOLL_MPI_SHM_SLOT sizes it (docs/MPI.md). Inputs in memory of
// [AllocShared], shared by the node's processes, are read where they lie
// instead of being copied into the window first.
//
// MPI errors return to the caller (MPI_ERRORS_RETURN) as *[Error] values that
// match backend's sentinels with errors.Is. Waits take a context and never
// hang: a process that never arrives at a collective makes the others return
// an error matching backend.ErrTimeout, naming the processes that were not
// seen to arrive.
//
// A process that hangs (stopped by SIGSTOP, frozen, its MPI progress thread
// stuck) can be found sooner by a heartbeat. It is off unless
// GOCOLL_MPI_HEARTBEAT sets its interval: a Go duration of at least 10ms, or
// on for 1s. It is read when MPI starts. Each process's progress thread then
// sends every other process an 8-byte message four times per interval, on a
// duplicate of MPI_COMM_WORLD of its own. A process that nothing came from
// for longer than its interval plus half a second counts as hung. The waits
// that depend on it then fail with an error matching ErrHung and
// backend.ErrTimeout that names it. Those waits are a World's collectives,
// Wait, and the Hung method (backend.HangReporter) of a request polled with
// Test. The report comes within the interval plus 1 s of the stop. A
// process that is alive but late keeps sending, and is waited for.
// docs/MPI.md says why the heartbeat is off by default: on an oversubscribed
// machine, live progress threads fell seconds behind.
package mpi
