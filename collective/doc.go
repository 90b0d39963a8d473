// Package collective runs collective operations (all-reduce, and the rest as
// they arrive) across the ranks of a Group, on whichever compute backend is
// available: Metal, Vulkan, or the pure-Go host backend.
//
// A Group places its ranks on devices; ranks on one physical device share
// one logical device (the group's own, a queue each; Options.DevicePerRank
// opens one per rank instead), and device-resident collectives among them
// run in device memory. Each rank calls the collective from its own
// goroutine with its own Comm, as with NCCL; the call returns when the
// rank's result is ready. Arguments are checked at the entry point
// and every rank's call is compared (a fingerprint of collective, op, type,
// count) before any data moves, so mismatched calls fail with ErrMismatch
// on every rank instead of hanging or corrupting data. Waits honour the
// caller's context and Config.CommunicationTimeout; a rank that never
// arrives makes the others fail with ErrTimeout naming it, and the group is
// then broken (later calls fail fast with the original cause).
//
// # Streams, ownership and failures
//
// These rules hold for every call; the code enforces them (stream.go).
//
// A Comm is an ordered stream. Operations on one rank run in the order they
// were called, synchronous or asynchronous (a synchronous call is an
// enqueue and a wait: it first waits for the rank's queued operations), and
// their device work follows that order on the rank's queue. Use a Comm from
// one goroutine at a time; a call from a second goroutine while one runs
// gets ErrConcurrentUse (best effort). The ctx given when an operation
// starts (or is queued) bounds the operation; the ctx of Work.Wait bounds
// only the wait.
//
// Ownership. A call owns the caller's memory (slices, HostBuffers, tensors)
// from entry until it returns. When it returns, with a result or an error,
// no device, peer rank or transport reads or writes that memory again: an
// error path first drains the rank's own submitted work and waits for its
// peers to stop touching its buffers. A device that does not drain within
// Options.DrainLimit (default 10 s) is declared lost (ErrDeviceLost): its
// memory, and host memory it imported, is leaked, never freed or unmapped
// under it. The one exception is a native collective between processes
// (strategy Native): MPI cannot cancel it, so past the drain limit the
// transport is declared lost (ErrTransportLost) and MPI may still write the
// call's receive buffer, which stays pinned and must not be reused. An
// asynchronous operation owns its buffers until its Work is done.
//
// Closing memory. Every entry point first resolves its arguments: each
// piece of memory the library could free under it (a HostBuffer's pages, so
// a ddp Arena's, and a Tensor) counts the call as a user until the call
// drained, or, for an asynchronous form, until its Work is done. Close of a
// HostBuffer, Tensor or Arena waits for the calls that resolved it before
// Close (each bounded by its context, CommunicationTimeout and the drain
// limit); a call handed it after Close fails with ErrClosed (the error also
// matches ErrInvalidArgument) before touching it, on every rank of a
// collective. A closed HostBuffer's addresses stay reserved while a record
// of the latest closed ranges (4096, on Linux) holds them, so a stale slice
// of it is refused rather than read. Group.Close breaks the calls in flight
// and waits for them. Comm.Go and Comm.Exec take the memory they use as
// arguments (Mem, a HostBuffer, a Tensor); code above the package that
// reads or writes memory itself between collectives holds it with Hold.
//
// Aliasing. A rank's send and recv may overlap only in the in-place
// layouts: send == recv (AllReduceInto, Reduce at its root, AllToAll,
// AllToAllV and SendRecv with one buffer, as MPI_IN_PLACE), AllGather(V)'s
// send as recv's own block, ReduceScatter(V)'s recv as send's own block,
// Gather's root send as its own block of recv, Scatter's root recv as its
// own block of send; tensors likewise, by buffer and offset. Any other
// overlap is ErrInvalidArgument on every rank before data moves.
//
// Imported Go slices. A large plain slice (4 MiB or more of Go heap memory)
// passed to a collective on a device that imports host memory is imported
// the second time its memory is seen (the first call stages it: a slice
// used once, such as a gradient allocated every step, never pays for an
// import) and read and written in place by DMA from then on, as a
// HostBuffer is: no staging copy (in an all-reduce, both PCIe directions in
// one pass). The imports never keep a slice alive: a call holds its slices
// while it runs; between calls an import refers to its slice weakly, and
// the import of a slice the collector freed is closed (at the next call of
// any rank, or Close). The bytes devices hold imported (ImportedBytes) stay
// within one budget per process, across groups and sub-groups
// (SetImportCacheBytes or GOCOLL_IMPORT_CACHE, default 4 GiB; least
// recently used imports are closed first, and a slice that does not fit is
// staged). Options.ImportCacheBytes < 0 turns importing off for a group.
// Group.Close closes the group's imports.
// Memory outside the Go heap (C, mmap) is never imported this way (it could
// be unmapped under the import): use a HostBuffer.
//
// Failures. The first failure of any rank breaks the group; Abort breaks
// it on purpose. Every call blocked on any rank then returns promptly, and
// every later call fails at once. Every error, of a synchronous call or of
// a Work, point-to-point or in a Batch, is an *Error naming the rank, the
// operation and the call's sequence number: collectives are numbered from
// 1 in one sequence per rank, point-to-point calls (Send, Recv, SendRecv,
// SendAsync, RecvAsync, each send and receive of a Batch) in another, also
// from 1 (Error.P2P; an asynchronous one takes its number in call order).
// A failed point-to-point operation breaks the group naming itself, with
// its number; so does one refused on its own rank before it was posted (a
// bad peer, a blocking Send or Recv to itself, aliased arguments, memory
// closed, its context ended): no rendezvous tells its peer, which would
// otherwise wait for it until the timeout. A collective refused on one
// rank instead fails every rank and leaves the group usable.
// Each error matches one of the sentinels of errors.go, except
// where a rank's own context ended: only that rank's error matches
// context.Canceled or context.DeadlineExceeded, a deadline also matches
// ErrTimeout, and a cancellation matches context.Canceled alone, none of
// the sentinels (Work.Wait whose own ctx ends first returns ctx.Err()
// itself); the other ranks get a *BrokenError (ErrGroupBroken) that names
// the first failure's rank, operation and cause and matches
// errors.Is(err, cause) except for that rank's context errors. Group.Run runs one function per rank; a
// function's error, or its panic (recovered into a *PanicError with the
// rank, the value and the stack), breaks the group naming that rank, and
// Run returns the root cause: the error of the rank whose own failure
// first broke the group, never a *BrokenError derived from it. Ranks match
// calls by sequence number and a fingerprint of everything that changes
// what moves (collective, op, type, count, root, strategy, data path, f64
// support); a difference fails every rank with ErrMismatch before any data
// moved. A failed call's error says what became of the caller's memory: a
// *DataError with Touched set where data may have moved into it (the recv,
// or an in-place buffer, is then undefined; an out-of-place send is never
// written); any other error leaves every buffer of the call as it was. A
// rank whose recv holds its whole result before its peers are done (one
// that writes only its own recv, as AllGather's ranks do) returns nil
// whatever happens after, its context ending included.
//
// Liveness. A rank that is gone (its function in Group.Run returned, with
// or without an error, or panicked, and the operations it started ended; or
// its Comm.Close was called) fails every rank waiting for it at once with
// an error naming it and why (ErrRankGone, *RankGoneError); Group.Close
// fails every wait at once (ErrClosed). A cycle of ranks of one process
// blocked in Send, Recv or SendRecv calls that wait for each other fails at
// once (ErrDeadlock, *DeadlockError). A slow rank that is alive (a
// checkpoint, an evaluation) is waited for up to
// Config.CommunicationTimeout, 10 minutes by default (ErrTimeout, naming
// the ranks that did not arrive); a ctx with a deadline bounds a call more
// tightly. While ranks wait, Group.Pending says which call each waits in
// and for which ranks, and a group with a logger logs the waits that last
// (every 30 s, or every quarter of the timeout if shorter). Ranks of
// another process are not watched this way: a process that hangs is waited
// for up to the timeout.
//
// Point-to-point. Send, Recv, SendRecv, SendAsync and RecvAsync pair on
// the direction between two ranks, in call order; a length or type that
// differs is a *MismatchError on both ranks. They are posted in stream
// order, and point-to-point operations posted back to back never wait for
// each other, so SendAsync and RecvAsync in any order on both ranks, and
// SendRecv, never deadlock; any other operation waits for the comm's
// earlier point-to-point operations to complete. A blocking Send or Recv
// waits for its peer: two ranks of one process that both Send to each
// other before they Recv deadlock, and fail at once with ErrDeadlock
// naming the ranks and the pattern (across processes, after
// CommunicationTimeout). Between ranks of one process the data is copied
// once, from the send slice to the receive slice. A rank may send to and
// receive from itself (its messages are copied in the process, never
// through the Transport) with SendRecv to and from itself, SendAsync and
// RecvAsync, or a Batch; a blocking Send or Recv to itself, which would
// wait for itself, is refused at once with ErrInvalidArgument.
//
// Processes. A Group given a Transport spans processes (one of Size 1 makes
// a group of one process, which works as one without a Transport: code
// written for several processes runs unchanged under mpirun -np 1). A
// transport that can duplicate itself (backend.Duplicator: the mpi package's
// World) gives each Group its own communicator, so groups over one World
// never see each other's traffic and may run at the same time; create them
// in the same order on every process. The transport only ever sees Go memory
// the group owns (staged copies), so a message it cannot give back never
// pins or outlives device memory. A group that breaks in one process tells
// the others (a control message), whose ranks fail at once with a
// *RemoteError cause (ErrAborted after Abort, ErrTimeout after a timeout); a
// process that dies ends the others' waits within CommunicationTimeout.
// Close ends the group's transport requests; a Group dropped without Close
// releases its transport when collected (its devices only at exit).
//
// Element types (Elem): float32, float64, int8, uint8, int16, uint16, int32,
// uint32, int64, uint64 (and types defined on them, but for uint16, whose
// defined types Float16 and BFloat16 are floats), Float16 and BFloat16 (bit
// patterns in a named uint16: Go has no 16-bit float), and the fp8 types
// Float8E4M3 and Float8E5M2 (OCP E4M3 FN and E5M2, one-byte bit patterns,
// reduced as Float16 is, a finite overflow saturating to the largest finite
// value). Reductions run in the backend's
// kernels: f32 in f32 and f64 in f64 (never rounded through f32); integers
// wrap on Sum and Prod, as NCCL's do; Mean of an integer type is NCCL's
// ncclAvg on integers: the sum, wrapped in the type (two's complement, as
// Sum), divided once by N at the end, truncated toward zero for the signed
// types (-7/2 is -3: Go's /) and plain division for the unsigned ones. That
// is what NCCL users and nccl-tests expect of avg, and the one definition
// every strategy can give exactly: a ring or tree carries the wrapped
// partial sums and divides only where it writes the result. (Scan and Exscan
// refuse Mean on every type.) The bitwise and logical ops (BAnd, BOr, BXor,
// LAnd, LOr, LXor: integers only) on the other types are an
// ErrInvalidArgument; Float16, BFloat16 and
// the fp8 types are accumulated in float32 and rounded once to the type per
// reduction step (once per call on the direct strategies, once per step of a
// ring or tree: each rounding is within half an ulp of the type). Vulkan has
// kernels for every type where the device has the features they need (f64:
// shaderFloat64; int64 and uint64: shaderInt64; the 8-bit types:
// storageBuffer8BitAccess; the 16-bit types: storageBuffer16BitAccess), Metal
// for float32, int32 and uint32. A device without kernels for a type reduces
// it exactly on the host, in rank order (AllReduce, ReduceScatter, Reduce,
// ReduceScatterV, and their tensor forms, which stage the blocks through
// the comm's pooled host-visible memory); an AllReduce of such a type
// across processes, and a tensor all-reduce, is ErrUnsupported. Mean is the sum divided by N, correctly rounded (for the
// 16-bit types: rounded to float32, then to the type). Where one step
// reduces every rank's element (the direct strategies, deterministic mode,
// ReduceScatterV, the host paths) a 16-bit Mean divides that step's float32
// sum before its one rounding, so these paths give the same bits; a ring
// or tree rounds its last step's sum, then the quotient. NaN and Inf propagate;
// max and min follow IEEE 754-2019 (NaN wins, -0 < +0). Every rank ends with
// bitwise identical data.
//
// Backend selection: Options.Backend, else the environment variable
// GOCOLL_BACKEND, else metal (darwin), vulkan, host. Build tags novulkan and
// nometal leave a backend out; CGO_ENABLED=0 builds keep the host backend.
// GOCOLL_DEBUG=INFO logs the backend, placement and each call's algorithm.
//
// # Entry points
//
// The common case is one line: AllReduce(ctx, c, data, Sum), in place, with
// the strategy Auto picks. AllReduceInto writes another slice;
// AllReduceWith also fixes the strategy; AllReduceTensor takes
// device-resident data; AllReduceWire compresses float32 on the wire; the
// Async variants return a Work. They are separate functions rather than
// one function with options because Go has no generic methods (so the
// element type is a type parameter of a function taking the Comm) and
// variadic options would allocate on every call, which the steady state
// must not. The training layer (gradient averaging, fusion, compression,
// adaptive strategy choice) is package ddp; diagnostics (backends, counters,
// what Auto picks) are package diag.
//
// The collectives on host slices beside all-reduce: ReduceScatter,
// AllGather, Broadcast (in place) and BroadcastInto (out of place), Reduce,
// Gather, Scatter, AllToAll, the forms with per-rank counts and offsets
// AllToAllV, AllGatherV, ReduceScatterV, GatherV and ScatterV, and the
// prefix reductions Scan and Exscan; each has an Async form returning a
// Work (Wait, Done, Test; WaitAll and WaitAny wait for several). The Work
// of a point-to-point operation is recycled once its result was reported
// (see Work: after that it reports ErrStaleWork, never another
// operation's result), so SendAsync and RecvAsync allocate nothing in the
// steady state.
//
// # Adding a collective, an algorithm, a transport
//
// Every call of a collective but all-reduce takes one path (call.go): the
// entry point builds a description of the call (desc: kind, type, op,
// root, buffers: host slices or device tensors, counts), and run checks
// its shape, resolves its memory and aliasing, compares fingerprints, runs
// the kind's algorithm (exec; execTensor for tensors, tensorcoll.go) and
// releases. A collective is a collKind with its callSpecs entry (name,
// rooted, op, in-place layout, shared-memory kind) and its shape and exec
// cases (call.go), its entry point and Async form (api.go), and the
// strategies that run it in the algorithm table (algorithms.go): GatherV
// and ScatterV took those three files; a tensor form adds its entry point
// and its execTensor case. An
// algorithm is a Strategy, its table entry, its cost in the model
// (auto.go) and its schedule in package internal/algo, written over the
// exchange steps of algo.Steps (reduce, copy, scatter, gather, the ordered
// reduction, the scale), which package internal/steps implements on the
// comm's device and links (steps.Steps; the comm's side, ring.go); a new
// kind of step is a method there. A way for bytes to travel between two ranks
// is a way of package internal/channel (a Link's reserve, post and take,
// written once per way: host slots, shared device memory and the remote
// transport today; its constructor is chosen in newLink, link.go) and,
// across processes, a backend.Transport.
//
// Device tensors (Tensor, of the calling rank's Comm) have their own forms
// of the collectives: AllReduceTensor and BroadcastTensor (in place),
// ReduceScatterTensor, AllGatherTensor, ReduceTensor, AllToAllTensor,
// GatherTensor, ScatterTensor, AllToAllVTensor, AllGatherVTensor,
// ReduceScatterVTensor, BroadcastIntoTensor, and the prefix reductions
// ScanTensor and ExscanTensor, each with its Async form. They check, fingerprint and fail as their slice
// forms do; every rank must pass tensors when one does (a rank passing
// slices fails the call with ErrMismatch on every rank). The data stays on
// the device: send is read by device copies, the algorithms run in the
// comm's device buffers (only the exchange slices, and the blocks of a
// type reduced on the host, cross host memory), and the out-of-place forms
// copy the result into recv
// once the exchange succeeded, so a failure leaves recv untouched as the
// slice forms leave their recv slices.
package collective
