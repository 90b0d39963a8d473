package backend

import "context"

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
