//go:build mpi && cgo

package mpi

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// The native collectives (backend.NativeCollectives): MPI's nonblocking
// collectives on the caller's memory, posted and polled as Allreduce* are
// (collective.go). A reduction of more elements than one MPI call counts
// (w.limit) goes as several calls over consecutive pieces; the block of a
// reduce-scatter or an all-to-all must fit one call, and so must every
// count and offset of an MPI_Ialltoallv (C ints, in bytes).

// nativeKind says which native collective a request runs.
type nativeKind uint8

const (
	nativeNone nativeKind = iota
	nativeAllreduce
	nativeReduceScatter
	nativeReduce
	nativeBcast
	nativeAlltoall
	nativeAlltoallv
	// nativeFence is the barrier that ends a shared-memory call whose
	// processes read each other's inputs where they lie (shmzc.go).
	nativeFence
	numNative
)

var nativeCalls = [numNative]string{
	nativeAllreduce:     "MPI_Iallreduce",
	nativeReduceScatter: "MPI_Ireduce_scatter_block",
	nativeReduce:        "MPI_Ireduce",
	nativeBcast:         "MPI_Ibcast",
	nativeAlltoall:      "MPI_Ialltoall",
	nativeAlltoallv:     "MPI_Ialltoallv",
	nativeFence:         "MPI_Ibarrier",
}

// nativeStats counts the native collectives each process completed, by
// kind (the tests read it to see which path a collective.Group took).
var nativeStats [numNative]atomic.Int64

// reduces is World.Reduces: the 32- and 64-bit types (MPI has no 16- and
// 8-bit floats, and Open MPI 4.1's MPI_Ireduce_scatter_block saturates the
// sums of its 8- and 16-bit integers instead of wrapping them), every op
// defined on an integer type, and Sum and Prod on the floating-point ones
// (MPI_MAX and MPI_MIN do not follow Op's IEEE 754-2019 maximum and minimum
// for NaN).
func reduces(dt backend.DType, op backend.Op) bool {
	if !op.Defined(dt) || !cHasType(dt) || dt.Size() < 4 {
		return false
	}
	return dt.IsInt() || op == backend.Sum || op == backend.Prod
}

// overlap reports whether [a, a+na) and [b, b+nb) share a byte.
func overlap(a []byte, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

func same(a, b []byte) bool {
	return len(a) > 0 && len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// native runs native collective kind: send and recv (buf for a broadcast)
// on the caller's memory, n units per process's block (elements of a
// reduction, bytes otherwise).
func (w *World) native(ctx context.Context, kind nativeKind, send, recv []byte, dt backend.DType, op backend.Op, root, n int) error {
	return w.post(ctx, kind, send, recv, dt, op, root, n, nil)
}

// nativeWith is native of a kind whose arguments are in C memory cmem
// (taken over: freed with the request).
func (w *World) nativeWith(ctx context.Context, kind nativeKind, send, recv []byte, cmem unsafe.Pointer) error {
	return w.post(ctx, kind, send, recv, backend.U8, backend.Sum, 0, 0, cmem)
}

// post is native with the C memory of the call's arguments (nil: none).
func (w *World) post(ctx context.Context, kind nativeKind, send, recv []byte, dt backend.DType, op backend.Op, root, n int, cmem unsafe.Pointer) error {
	call := nativeCalls[kind]
	seq, err := w.beginCollective(ctx, call)
	if err != nil {
		cFree(cmem)
		return err
	}
	defer w.collMu.Unlock()
	r := w.getRequest(kindCollective, call, -1, 0)
	r.seq, r.n, r.dt, r.op, r.native, r.root, r.cmem = seq, n, dt, op, kind, root, cmem
	if len(recv) > 0 {
		r.buf = unsafe.Pointer(unsafe.SliceData(recv))
		r.pinBuffer(r.buf)
	}
	if len(send) > 0 && !same(send, recv) {
		r.send = unsafe.Pointer(unsafe.SliceData(send))
		r.pinBuffer(r.send)
	}
	switch kind {
	case nativeReduceScatter, nativeAlltoall, nativeAlltoallv:
		r.useSubs(1)
	default:
		r.setSubs(n)
	}
	if err := w.collective(ctx, r, postNative); err != nil {
		return err // r is released, or left to the World (orphan counts it)
	}
	nativeStats[kind].Add(1)
	r.release()
	return nil
}

// postNative posts the MPI calls of a native collective (on the MPI
// thread): one per piece of r.limit units, or one for the block kinds.
func postNative(r *request) {
	if !r.beginPost() {
		return
	}
	w := r.w
	size := 1
	if r.native != nativeBcast && r.native != nativeAlltoall {
		size = r.dt.Size()
	}
	for i := range r.subs {
		off := i * r.limit
		m := min(r.limit, r.n-off)
		var send, recv unsafe.Pointer
		if r.send != nil {
			send = unsafe.Add(r.send, off*size)
		}
		if r.buf != nil {
			recv = unsafe.Add(r.buf, off*size)
		}
		var req cRequest
		var code int
		switch r.native {
		case nativeAllreduce:
			req, code = cIallreduce(send, recv, m, r.dt, r.op, w.comm)
		case nativeReduce:
			// In place is the root's only (the caller gave the same slice).
			inPlace := r.send == nil && w.rank == r.root
			req, code = cIreduce(send, recv, m, r.dt, r.op, r.root, inPlace, w.comm)
		case nativeBcast:
			req, code = cIbcast(recv, m, r.root, w.comm)
		case nativeReduceScatter:
			req, code = cIreduceScatterBlock(r.send, r.buf, r.n, r.dt, r.op, w.comm)
		case nativeAlltoall:
			req, code = cIalltoall(r.send, r.buf, r.n, w.comm)
		case nativeAlltoallv:
			req, code = cIalltoallv(r.send, r.buf, r.cmem, w.size, w.comm)
		}
		if !r.record(i, req, code) {
			return
		}
	}
}

// checkNative checks a native reduction's type and op.
func checkNative(call string, dt backend.DType, op backend.Op) error {
	if !reduces(dt, op) {
		return argError(call, "%v of %v is not reduced natively (Reduces)", op, dt)
	}
	return nil
}

func (w *World) nativeAllreduce(ctx context.Context, send, recv []byte, dt backend.DType, op backend.Op) error {
	const call = "MPI_Iallreduce"
	if err := checkNative(call, dt, op); err != nil {
		return err
	}
	es := dt.Size()
	switch {
	case len(send) != len(recv) || len(send)%es != 0:
		return argError(call, "send holds %d bytes, recv %d: want the same whole number of %v elements", len(send), len(recv), dt)
	case overlap(send, recv) && !same(send, recv):
		return argError(call, "send and recv overlap without being the same slice")
	}
	return w.native(ctx, nativeAllreduce, send, recv, dt, op, 0, len(recv)/es)
}

func (w *World) nativeReduceScatter(ctx context.Context, send, recv []byte, dt backend.DType, op backend.Op) error {
	const call = "MPI_Ireduce_scatter_block"
	if err := checkNative(call, dt, op); err != nil {
		return err
	}
	es := dt.Size()
	n := len(recv) / es
	switch {
	case len(send) != w.size*len(recv) || len(recv)%es != 0:
		return argError(call, "send holds %d bytes, recv %d: want %d blocks of recv's length, a whole number of %v elements", len(send), len(recv), w.size, dt)
	case overlap(send, recv):
		return argError(call, "send and recv overlap")
	case n > w.limit:
		return argError(call, "a block of %d elements: more than one MPI call counts (%d)", n, w.limit)
	}
	return w.native(ctx, nativeReduceScatter, send, recv, dt, op, 0, n)
}

func (w *World) nativeReduce(ctx context.Context, send, recv []byte, dt backend.DType, op backend.Op, root int) error {
	const call = "MPI_Ireduce"
	if err := checkNative(call, dt, op); err != nil {
		return err
	}
	es := dt.Size()
	if root < 0 || root >= w.size {
		return argError(call, "root %d out of range [0, %d)", root, w.size)
	}
	if w.rank != root {
		recv = nil
	}
	switch {
	case len(send)%es != 0:
		return argError(call, "send holds %d bytes, not a whole number of %v elements", len(send), dt)
	case w.rank == root && len(recv) != len(send):
		return argError(call, "send holds %d bytes, recv %d", len(send), len(recv))
	case overlap(send, recv) && !same(send, recv):
		return argError(call, "send and recv overlap without being the same slice")
	}
	return w.native(ctx, nativeReduce, send, recv, dt, op, root, len(send)/es)
}

func (w *World) nativeBcast(ctx context.Context, buf []byte, root int) error {
	const call = "MPI_Ibcast"
	if root < 0 || root >= w.size {
		return argError(call, "root %d out of range [0, %d)", root, w.size)
	}
	return w.native(ctx, nativeBcast, nil, buf, backend.U8, backend.Sum, root, len(buf))
}

func (w *World) nativeAlltoall(ctx context.Context, send, recv []byte) error {
	const call = "MPI_Ialltoall"
	n := len(send) / w.size
	switch {
	case len(send) != len(recv) || len(send)%w.size != 0:
		return argError(call, "send holds %d bytes, recv %d: want the same, %d blocks", len(send), len(recv), w.size)
	case overlap(send, recv):
		return argError(call, "send and recv overlap")
	case n > w.limit:
		return argError(call, "a block of %d bytes: more than one MPI call counts (%d)", n, w.limit)
	}
	return w.native(ctx, nativeAlltoall, send, recv, backend.U8, backend.Sum, 0, n)
}

// nativeAlltoallv checks an MPI_Ialltoallv's counts and offsets (bytes)
// and runs it, the counts and offsets copied into C memory that MPI reads
// until the collective completes (freed with the request, kept with it
// when the World keeps the request).
func (w *World) nativeAlltoallv(ctx context.Context, send []byte, scounts, sdispls []int, recv []byte, rcounts, rdispls []int) error {
	const call = "MPI_Ialltoallv"
	if err := checkRanges(call, "send", send, scounts, sdispls, w.size, w.limit); err != nil {
		return err
	}
	if err := checkRanges(call, "recv", recv, rcounts, rdispls, w.size, w.limit); err != nil {
		return err
	}
	if overlap(send, recv) {
		return argError(call, "send and recv overlap")
	}
	ints := cMalloc(4 * w.size * 4)
	if ints == nil {
		return argError(call, "no C memory for %d counts and offsets", 4*w.size)
	}
	c := unsafe.Slice((*int32)(ints), 4*w.size)
	for q := range w.size {
		c[q], c[w.size+q], c[2*w.size+q], c[3*w.size+q] = int32(scounts[q]), int32(sdispls[q]), int32(rcounts[q]), int32(rdispls[q])
	}
	return w.nativeWith(ctx, nativeAlltoallv, send, recv, ints)
}

// checkRanges checks the size ranges [displs[q], +counts[q]) of buf (what
// names it), each count and offset at most limit (one C int).
func checkRanges(call, what string, buf []byte, counts, displs []int, size, limit int) error {
	if len(counts) != size || len(displs) != size {
		return argError(call, "%d %s counts and %d offsets, want %d each", len(counts), what, len(displs), size)
	}
	for q, n := range counts {
		d := displs[q]
		switch {
		case n < 0 || d < 0 || d > len(buf) || n > len(buf)-d:
			return argError(call, "%s range %d [%d, +%d) outside the %d bytes", what, q, d, n, len(buf))
		case n > limit || d > limit:
			return argError(call, "%s range %d [%d, +%d): more than one MPI call counts (%d)", what, q, d, n, limit)
		}
	}
	return nil
}

// drainNative is World.Drain: it completes what it can of the requests
// left to the World until no native collective remains among them, or
// limit passed; then the World is lost (its requests stay pinned, kept by
// the World, and by Close for the life of the process).
func (w *World) drainNative(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	sleep := sleepMin
	for {
		w.progressOrphans()
		if w.nativeHeld.Load() == 0 {
			return true
		}
		if time.Now().After(deadline) {
			w.lost.Store(true)
			return false
		}
		cNap(int64(sleep))
		sleep = min(2*sleep, sleepMax)
	}
}
