package mpi

// The package's API, the same in every build: the exported declarations
// and their documentation. Each calls its implementation, which the mpi
// build provides (world.go, collective.go, dup.go, split.go) and
// mpi_omit.go, built without it, replaces with stubs that fail with an
// error matching backend.ErrUnsupported (errNoMPI).

import (
	"context"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

var (
	_ backend.Transport  = (*World)(nil)
	_ backend.Duplicator = (*World)(nil)
	_ backend.Splitter   = (*World)(nil)

	_ backend.NativeCollectives = (*World)(nil)
)

// World is this process's view of MPI_COMM_WORLD: a backend.Transport over
// a duplicate of it (or, for a World made by [World.Dup], over a duplicate
// of another World's communicator), with MPI's collectives as baselines. Its
// methods may be called from any goroutine; collectives (Allgather,
// Allreduce*, Barrier, Dup) from one goroutine at a time, in the same order
// on every process, as MPI requires.
//
// Built without -tags mpi, the package declares the same API, but no World
// exists: Init returns an error matching backend.ErrUnsupported that says
// how to build with MPI.
type World struct {
	world // the build's state: world.go with MPI, mpi_omit.go without
}

// Init starts MPI and returns the World; later calls return the same World
// until it is closed, then a new one over the same MPI. It calls
// MPI_Init_thread once per process, asking for MPI_THREAD_MULTIPLE (or the
// level in GOCOLL_MPI_THREAD: single, funneled, serialized, multiple), on a
// dedicated OS thread that stays MPI's main thread until Finalize. When MPI
// provides less than MPI_THREAD_MULTIPLE, the World serializes its calls
// (MPI_THREAD_SERIALIZED) or makes all of them on that thread (FUNNELED,
// SINGLE). It sets MPI_ERRORS_RETURN on MPI_COMM_WORLD so failures come back
// as errors, and duplicates MPI_COMM_WORLD (MPI_Comm_dup, collective: every
// process must call Init). When something else initialized MPI already, Init
// uses it (MPI_Query_thread) if it provides MPI_THREAD_SERIALIZED or more.
func Init() (*World, error) { return initMPI() }

// Finalize closes the open World and every World made by Dup that is still
// open, then calls MPI_Finalize on MPI's main thread, if this package
// initialized MPI. MPI cannot start again in this
// process: later calls of every World method fail with backend.ErrClosed and
// Init fails. MPI_Finalize is collective in practice: it returns once every
// process has called it. Finalize is idempotent.
func Finalize() error { return finalizeMPI() }

// Wait waits until the request completes or fails, or ctx ends. A request
// of this package is tested by the process's MPI progress thread
// (MPI_Testsome over every pending request of every World), and Wait parks
// until that thread signals its completion; any other backend.Request is
// polled with Test (a short spin, then sleeps of 50 to 200 µs). When ctx
// ends first, Wait cancels req (Request.Cancel) and returns an *Error that
// matches backend.ErrTimeout when the deadline passed, wraps ctx's error, and
// names the peer.
func Wait(ctx context.Context, req backend.Request) error { return waitMPI(ctx, req) }

// Name returns "mpi".
func (w *World) Name() string { return "mpi" }

// Rank is MPI_Comm_rank of the World's communicator.
func (w *World) Rank() int { return w.rank }

// Size is MPI_Comm_size of the World's communicator.
func (w *World) Size() int { return w.size }

// ThreadLevel is the thread level the World works under: what
// MPI_Init_thread provided, capped at the level asked for.
func (w *World) ThreadLevel() ThreadLevel { return w.level }

// LibraryVersion is MPI_Get_library_version, such as "Open MPI v4.1.4, ...".
func (w *World) LibraryVersion() string { return w.version }

// Isend starts sending p to process peer with tag (MPI_Isend of MPI_BYTE on
// the World's communicator; a message longer than MPI's int count goes as
// several, matched in order by Irecv). MPI reads p until the request
// completes: p stays pinned until then, and the caller must not modify it
// before Test reports completion or Cancel returns nil.
func (w *World) Isend(p []byte, peer, tag int) (backend.Request, error) { return w.isend(p, peer, tag) }

// Irecv starts receiving exactly len(p) bytes from process peer with tag
// (MPI_Irecv of MPI_BYTE). MPI writes p until the request completes: p stays
// pinned until then, and the caller must not read or modify it before Test
// reports completion or Cancel returns nil.
func (w *World) Irecv(p []byte, peer, tag int) (backend.Request, error) { return w.irecv(p, peer, tag) }

// IrecvUpTo is Irecv of a message of at most len(p) bytes (MPI_Irecv of
// MPI_BYTE, the count an upper bound): a shorter message completes the
// request without error, filling the start of p; a longer one is
// MPI_ERR_TRUNCATE. The point-to-point engine (internal/p2p) receives a
// message's first piece this way, so that a sender's message of another
// length is read as a header and reported as a mismatch, not as a transport
// error. A message longer than MPI's int count is not split: p must fit one
// MPI_Irecv.
func (w *World) IrecvUpTo(p []byte, peer, tag int) (backend.Request, error) {
	return w.irecvUpTo(p, peer, tag)
}

// Allgather gathers every process's mine (the same length on all) into all,
// in process order (MPI_Iallgather of MPI_BYTE, then MPI_Test until done).
// It honours ctx: when a process never calls, it returns an *Error matching
// backend.ErrTimeout that lists, in Ranks, the processes not seen to arrive.
// The data goes through C memory, so after any return MPI no longer touches
// mine or all; a collective that timed out stays posted and completes, with
// its result discarded, when the missing processes call Allgather.
func (w *World) Allgather(ctx context.Context, mine, all []byte) error {
	return w.allgather(ctx, mine, all)
}

// AllreduceF32 sets recv[i] to op over every process's send[i]
// (MPI_Iallreduce of MPI_FLOAT, then MPI_Test until done), for benchmarks
// and baselines. send and recv have equal lengths; recv may be send itself
// (MPI_IN_PLACE). op is backend.Sum, Prod, Max or Min, with MPI's semantics
// (the order of a sum is MPI's; MPI_MAX and MPI_MIN do not promise to
// propagate NaN). MPI works on the Go memory directly: when ctx ends first,
// the returned error matches backend.ErrTimeout and recv stays pinned and may
// still be written until every process has called the matching Allreduce.
func (w *World) AllreduceF32(ctx context.Context, send, recv []float32, op backend.Op) error {
	return w.allreduceF32(ctx, send, recv, op)
}

// AllreduceF64 is AllreduceF32 for float64 (MPI_DOUBLE).
func (w *World) AllreduceF64(ctx context.Context, send, recv []float64, op backend.Op) error {
	return w.allreduceF64(ctx, send, recv, op)
}

// Reduces reports whether Allreduce, ReduceScatterBlock and Reduce take
// element type dt with op (backend.NativeCollectives): every op defined on
// the 32- and 64-bit integer types (MPI_INT32_T to MPI_UINT64_T with
// MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_BAND, MPI_BOR, MPI_BXOR,
// MPI_LAND, MPI_LOR, MPI_LXOR), and Sum and Prod on float32 and float64
// (MPI_FLOAT, MPI_DOUBLE). MPI_MAX and MPI_MIN do not propagate NaN as
// backend.Max and Min do; MPI has no 16- or 8-bit float types; Open MPI
// 4.1's MPI_Ireduce_scatter_block saturates sums of 8- and 16-bit integers
// instead of wrapping them. A collective.Group runs those through its own
// path between processes.
func (w *World) Reduces(dt backend.DType, op backend.Op) bool { return reduces(dt, op) }

// Allreduce sets recv to op over every process's send
// (backend.NativeCollectives: MPI_Iallreduce, then MPI_Test until done; a
// count above MPI's int as several calls). send and recv have the same
// length, a whole number of dt's elements; recv may be send itself
// (MPI_IN_PLACE) but must not otherwise overlap it. The order of a sum is
// MPI's. MPI works on the given memory: when ctx ends first, the returned
// *Error matches backend.ErrTimeout (or wraps ctx's error) and names the
// processes not seen to arrive, and the memory stays pinned and in MPI's use
// until the collective completes (Drain; past Drain's limit the World is
// declared lost and MPI may still write the memory at any time).
func (w *World) Allreduce(ctx context.Context, send, recv []byte, dt backend.DType, op backend.Op) error {
	return w.nativeAllreduce(ctx, send, recv, dt, op)
}

// ReduceScatterBlock reduces send (Size() blocks of len(recv) bytes) over
// every process with op and leaves block Rank() of the result in recv
// (MPI_Ireduce_scatter_block; a block must fit one MPI call). send and recv
// must not overlap. Otherwise as Allreduce.
func (w *World) ReduceScatterBlock(ctx context.Context, send, recv []byte, dt backend.DType, op backend.Op) error {
	return w.nativeReduceScatter(ctx, send, recv, dt, op)
}

// Reduce sets the root's recv to op over every process's send (MPI_Ireduce);
// recv is ignored on the other processes. At the root, recv may be send
// itself (MPI_IN_PLACE). Otherwise as Allreduce.
func (w *World) Reduce(ctx context.Context, send, recv []byte, dt backend.DType, op backend.Op, root int) error {
	return w.nativeReduce(ctx, send, recv, dt, op, root)
}

// Bcast copies the root's buf into every other process's buf (MPI_Ibcast of
// MPI_BYTE). Otherwise as Allreduce.
func (w *World) Bcast(ctx context.Context, buf []byte, root int) error {
	return w.nativeBcast(ctx, buf, root)
}

// Alltoall sends block q of send (len(send)/Size() bytes each) to process q,
// which receives it as block Rank() of its recv (MPI_Ialltoall of MPI_BYTE;
// a block must fit one MPI call). send and recv have the same length and
// must not overlap. Otherwise as Allreduce.
func (w *World) Alltoall(ctx context.Context, send, recv []byte) error {
	return w.nativeAlltoall(ctx, send, recv)
}

// Alltoallv sends send[sdispls[q]:][:scounts[q]] to process q, which
// receives it at recv[rdispls[p]:][:rcounts[p]] for p this process
// (MPI_Ialltoallv of MPI_BYTE; counts and offsets in bytes, one of each per
// process, every one at most 2^31-1, a C int: an *Error matching
// backend.ErrInvalidArgument otherwise, nothing sent). send and recv must
// not overlap. Otherwise as Allreduce.
func (w *World) Alltoallv(ctx context.Context, send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	return w.nativeAlltoallv(ctx, send, scounts, sdispls, recv, rcounts, rdispls)
}

// Elem is an element type of shared memory: every element type of
// collective.Elem is one.
type Elem interface {
	~float32 | ~float64 | ~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64
}

// AllocShared returns n zeroed elements of T in memory that the World's
// processes share (an MPI-3 shared-memory allocation over the node,
// MPI_Win_allocate_shared). It is a collective of w: every process calls
// it, in the same order as w's other collectives, from one goroutine at a
// time; n may differ between processes. The memory stays valid until the
// process ends (MPI_Finalize releases it); it is never freed earlier, so a
// slice of it never dangles.
//
// Inputs in such memory need no copy: where every process's inputs of an
// AllReduce, ReduceScatter or AllGather of strategy Native (a
// collective.Group over w, or over a World made from w by Dup or Split,
// with host slices) lie in memory from AllocShared that every process of
// the call's World shares, and each moves at least 64 KiB, the processes
// read one another's inputs where they lie instead of copying them into
// the shared-memory window first (docs/MPI.md). Results may lie anywhere;
// where every process's AllReduce result lies in such memory too (or is
// its input) and moves at least 1 MiB, the processes' workers claim pieces
// of the result and write each straight into every process's result, and
// none copies the whole result out of the window; a ReduceScatter of one
// rank per process writes the rank's result straight wherever it lies.
// The call returns only once every process is done with its memory, as
// any call does.
// The processes agree on it in every call, so any mix is correct: where
// some processes' inputs are elsewhere, every process copies in.
//
// Where w has no shared-memory window (its processes span nodes, the
// window is turned off with GOCOLL_MPI_SHM=0, or MPI provides less than
// MPI_THREAD_MULTIPLE), AllocShared returns ordinary Go memory, and calls
// copy in as usual. An n below zero, or n elements of more bytes than an
// int holds, is an *Error that matches backend.ErrInvalidArgument.
func AllocShared[T Elem](ctx context.Context, w *World, n int) ([]T, error) {
	var z T
	es := int(unsafe.Sizeof(z))
	if n < 0 || n > math.MaxInt/es {
		return nil, &Error{Call: "MPI_Win_allocate_shared", Err: backend.ErrInvalidArgument,
			Msg: fmt.Sprintf("AllocShared of %d elements of %d bytes", n, es)}
	}
	mem, shared, err := w.allocShared(ctx, n*es)
	switch {
	case err != nil:
		return nil, err
	case !shared:
		return make([]T, n), nil
	case n == 0:
		return []T{}, nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(mem))), n), nil
}

// Drain waits up to limit for the native collectives (Allreduce,
// ReduceScatterBlock, Reduce, Bcast, Alltoall, Alltoallv) of w that returned early
// because their ctx ended, testing them, and reports whether none is left:
// only then may their memory be reused. A World closed while MPI held one
// keeps it pinned for the life of the process, and Drain reports false.
//
// When Drain reports false, w is declared lost, for good: MPI may still
// write the memory of those collectives at any time (they complete if the
// missing processes ever call them), so it stays pinned, kept by w (and
// after Close for the life of the process), and must not be reused; every
// later call on w but Drain and Close (collectives, Dup, Split, Isend,
// Irecv, the native collectives) fails at once with an *Error matching
// backend.ErrTransportLost. Requests started before go on as before. The
// Worlds made from w by Dup or Split have communicators and requests of
// their own and are not lost with it; a collective.Group over w works on
// such a duplicate, and a group whose native collective was still in
// flight past its drain limit is broken and its call's error matches
// collective.ErrTransportLost.
func (w *World) Drain(limit time.Duration) bool { return w.drainNative(limit) }

// Barrier returns once every process has called it (MPI_Ibarrier, then
// MPI_Test until done), or when ctx ends, with an error like Allgather's.
func (w *World) Barrier(ctx context.Context) error { return w.barrier(ctx) }

// Dup returns a new World (a *World, as a backend.Transport) over duplicates
// of w's communicators: MPI_Comm_idup of the one that carries the caller's
// traffic and of the one that carries arrival notices. The messages and
// collectives of the duplicate never meet w's or another duplicate's, even
// with the same peers and tags, so several duplicates may be used at the
// same time from different goroutines, each with its own collective order.
// The duplicate has w's thread level, rank, size, tag bound and largest count
// per MPI call. Its Close frees only its own communicators; closing w does
// not close it; Finalize closes it if it is still open.
//
// Dup is a collective of w, like Allgather: every process calls it, in the
// same order as w's other collectives, from one goroutine at a time (a Dup
// while another collective is in progress on w fails at once with
// backend.ErrInvalidArgument). It honours ctx: when a process never calls, it
// returns an *Error for MPI_Comm_idup that matches backend.ErrTimeout and
// lists, in Ranks, the processes not seen to arrive. Dup of a closed World
// fails with backend.ErrClosed.
//
// MPI cannot cancel MPI_Comm_idup, so a Dup that timed out stays posted on w,
// as a timed-out Allgather does, and completes when the missing processes
// call Dup on w; w then frees the communicators it made. Meanwhile a
// collective of w (Allgather, Allreduce*, Barrier, Dup) first waits for it,
// within its own ctx, and fails without being posted when ctx ends first:
// Open MPI posts the steps of MPI_Comm_idup on w's communicator as they
// come, so a collective posted in between would be matched out of order
// (open-mpi/ompi#2025). The missing processes must therefore call Dup next,
// or the job should end. In Open MPI 4.1 the unfinished MPI_Comm_idup also
// holds up, in that process, every communicator creation that starts from a
// communicator with a higher context id, which includes Dup of the Worlds
// made after w: such a Dup times out on every process, although all arrive,
// and completes in the background once the first one has. Closing w does
// not lift that: the request stays in MPI, and Close reports it with
// ErrInFlight.
func (w *World) Dup(ctx context.Context) (backend.Transport, error) { return w.dup(ctx) }

// Split returns a new World (a *World, as a backend.Transport) over the
// processes of w that pass the same color: MPI_Comm_split of w's two
// communicators (the caller's traffic and the arrival notices), ranked by
// key, then by rank in w. A process that passes a negative color
// (MPI_UNDEFINED) gets nil, nil. The new World is isolated from w and from
// every other World, like a duplicate: it has w's thread level, tag bound and
// largest count per MPI call, its own rank and size, and its Close frees only
// its own communicators (closing w does not close it; Finalize does). color
// and key must fit in a C int.
//
// Split is a collective of w, like Dup: every process calls it, in the same
// order as w's other collectives, from one goroutine at a time. MPI has no
// nonblocking MPI_Comm_split, so Split first waits in an MPI_Ibarrier on w,
// honouring ctx as Allgather does: when a process never calls, it returns an
// *Error for MPI_Comm_split that matches backend.ErrTimeout and lists, in
// Ranks, the processes not seen to arrive. Once the barrier completed, every
// process has called Split, and the blocking MPI_Comm_split runs on a
// goroutine of its own while the caller waits for it within ctx.
//
// When ctx ends first, the work is left to w, as a Dup that timed out is: a
// barrier still posted completes when the missing processes call Split, and
// then this process makes its MPI_Comm_split in the background (a process
// whose barrier completed makes it in any case, so the others never wait for
// it in vain) and frees what it made. Until then w's next collective waits
// for it within its own ctx, and fails without being posted when ctx ends
// first. The missing processes must therefore call Split next, or the job
// should end. An MPI_Comm_split that never returns (a process stopped using
// w) holds w's communicators, and under MPI_THREAD_FUNNELED or SERIALIZED
// MPI's main thread or w's lock: Close then leaves them to MPI (ErrInFlight).
func (w *World) Split(ctx context.Context, color, key int) (backend.Transport, error) {
	return w.split(ctx, color, key)
}

// Close releases the World. It takes over the requests that Isend and Irecv
// started and that their callers have not finished (Test did not report
// completion, Cancel was not called), and cancels them (MPI_Cancel). It
// waits up to half a second for them and for background work (requests that
// Cancel or a timed-out collective left to MPI), frees what remains that MPI
// allows to free, and frees the World's communicators (MPI_Comm_free). It
// does not finalize MPI (Finalize does): a later Init returns a new World.
// Requests still held by MPI keep their buffers pinned for the life of the
// process, and Close reports them with an error matching ErrInFlight. A
// request Close took over answers Test and Cancel with an error matching
// backend.ErrClosed. Closing a World does not close the Worlds Dup made from
// it. Close is idempotent.
func (w *World) Close() error { return w.closeWorld() }
