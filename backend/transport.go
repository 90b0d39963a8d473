package backend

import (
	"context"
	"time"
)

// Transport moves host bytes between processes (ranks in other processes,
// possibly on other machines). The mpi package implements it over MPI.
// Collectives use it only for host memory: device data reaches it through
// host-visible staging slots.
type Transport interface {
	// Name names the implementation ("mpi").
	Name() string
	// Rank is this process's rank among Size processes.
	Rank() int
	Size() int
	// Isend starts sending p to process peer with tag. p must stay
	// untouched until the request completes.
	Isend(p []byte, peer, tag int) (Request, error)
	// Irecv starts receiving exactly len(p) bytes from process peer with
	// tag into p.
	Irecv(p []byte, peer, tag int) (Request, error)
	// Allgather gathers every process's mine (the same length on all) into
	// all (Size()*len(mine) bytes, in process order). It honours ctx: a
	// process that never calls makes it return ctx's error, never hang.
	Allgather(ctx context.Context, mine, all []byte) error
	// Close releases the transport (it does not finalize the library if
	// others still use it).
	Close() error
}

// Request is a started Isend or Irecv.
type Request interface {
	// Test reports whether the request completed, without blocking; an
	// error means it failed (the peer died, a truncated message, ...).
	Test() (bool, error)
	// Cancel abandons a request that has not completed (best effort) and
	// releases it; after Cancel the request must not be used.
	Cancel() error
}

// MissingProcesses is implemented by transport errors that know which
// processes did not arrive at a collective that timed out.
type MissingProcesses interface {
	MissingProcesses() []int
}

// HangReporter is implemented by transport requests whose transport hears
// from the other processes (the mpi package's heartbeat). Hung returns nil
// while the request's peer is alive, or not known to be otherwise, and once
// the peer stopped responding an error that matches ErrTimeout and names it
// (MissingProcesses). A wait on such a request ends with that error rather
// than at its timeout, then cancels the request as a timed-out wait does.
type HangReporter interface {
	Hung() error
}

// Duplicator is implemented by transports that can make an isolated copy of
// themselves (the mpi package's World: MPI_Comm_dup). A collective.Group
// over such a transport works on its own duplicate, so several groups over
// one transport never see each other's messages or collectives and may run
// at the same time. Dup is collective: every process calls it, in the same
// order, one call at a time; it honours ctx (a process that never calls makes
// it return an error matching ErrTimeout). The duplicate is closed with its
// own Close, which does not close the original.
type Duplicator interface {
	Dup(ctx context.Context) (Transport, error)
}

// Splitter is implemented by transports that can split themselves into
// sub-communicators (the mpi package's World: MPI_Comm_split). A
// collective.Group over such a transport can Split into sub-groups that span
// several processes. Split is collective: every process calls it, in the
// same order as the transport's other collectives, one call at a time. The
// processes that pass the same color (>= 0) get a new Transport over just
// them, ranked by key, then by their rank in the original; a process that
// passes a negative color (MPI_UNDEFINED) gets nil, nil. Split honours ctx
// like Allgather (a process that never calls makes it return an error
// matching ErrTimeout). The new transport's messages and collectives never
// meet the original's; it is closed with its own Close, which does not close
// the original.
type Splitter interface {
	Split(ctx context.Context, color, key int) (Transport, error)
}

// NativeCollectives is implemented by transports whose library runs
// collectives itself (the mpi package's World: MPI's own nonblocking
// collectives). A collective.Group over such a transport runs the step
// between its processes through them (the strategy Native): the ranks of a
// process combine inside it, one leader per process calls the native
// collective on host memory, and the result fans out inside the process.
//
// Every method is collective over the transport's processes, like
// Allgather: every process calls it, in the same order as the transport's
// other collectives, from one goroutine at a time, with the same lengths,
// type, op and root. The calls work on the memory they are given (no
// copy): MPI reads send and writes recv or buf until the collective
// completes. send may be recv itself (in place); otherwise the two must not
// overlap.
//
// Each honours ctx: when a process never calls, it returns an error that
// matches ErrTimeout (or wraps ctx's error) and names the processes not
// seen to arrive (MissingProcesses). MPI cannot cancel a collective, so the
// memory of a call that returned early stays in the transport's use (kept
// alive and in place, never freed) until the collective completes when the
// missing processes call it; the caller must neither reuse nor release it
// before Drain reported true. A Drain that reports false declares the
// transport lost: the memory stays pinned, MPI may still write it at any
// time, and every later call on the transport but Drain and Close fails at
// once with an error matching ErrTransportLost.
type NativeCollectives interface {
	// Reduces reports whether Allreduce, ReduceScatterBlock and Reduce
	// reduce element type dt with op natively, with Op's semantics.
	Reduces(dt DType, op Op) bool
	// Allreduce sets recv to op over every process's send (same length).
	Allreduce(ctx context.Context, send, recv []byte, dt DType, op Op) error
	// ReduceScatterBlock reduces send (Size() blocks of len(recv) bytes)
	// with op over every process and leaves block Rank() of the result in
	// recv. recv may be block Rank() of send (in place).
	ReduceScatterBlock(ctx context.Context, send, recv []byte, dt DType, op Op) error
	// Reduce sets the root's recv to op over every process's send; recv is
	// ignored on the other processes (it may be nil).
	Reduce(ctx context.Context, send, recv []byte, dt DType, op Op, root int) error
	// Bcast copies the root's buf into every other process's buf.
	Bcast(ctx context.Context, buf []byte, root int) error
	// Alltoall sends block q of send (len(send)/Size() bytes each) to
	// process q, which receives it as block Rank() of its recv (as long
	// as send); send and recv must not overlap.
	Alltoall(ctx context.Context, send, recv []byte) error
	// Alltoallv sends send[sdispls[q]:][:scounts[q]] to process q, which
	// receives it at recv[rdispls[p]:][:rcounts[p]] for p the sender:
	// counts and offsets in bytes, one of each per process. What q expects
	// from p must be what p sends it (the caller agrees on the counts
	// first). send and recv must not overlap.
	Alltoallv(ctx context.Context, send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error
	// Drain waits up to limit for the native collectives that returned
	// early (their ctx ended) to complete, and reports whether none is
	// left in flight: only then may their memory be reused. False declares
	// the transport lost (ErrTransportLost), for good.
	Drain(limit time.Duration) bool
}
