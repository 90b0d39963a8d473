//go:build mpi && cgo

package mpi

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// The native collectives (backend.NativeCollectives) on the World: every
// type and op Reduces accepts, through Allreduce (in place and out of
// place), Reduce (every root), ReduceScatterBlock, Bcast and Alltoall, at
// sizes 0, 1, odd and split over several MPI calls, each process's result
// checked element by element against a reference computed here from every
// process's known inputs.

// collOps names each backend op as the parity tests' references take it.
var collOps = map[backend.Op]collective.Op{
	backend.Sum: collective.Sum, backend.Prod: collective.Prod, backend.Max: collective.Max, backend.Min: collective.Min,
	backend.BAnd: collective.BAnd, backend.BOr: collective.BOr, backend.BXor: collective.BXor,
	backend.LAnd: collective.LAnd, backend.LOr: collective.LOr, backend.LXor: collective.LXor,
}

// nativeType is one element type of the native tests: process p's element
// i for op, and the reduction over every process of element i.
type nativeType struct {
	dt  backend.DType
	run func(t *testing.T, w *World, ctx context.Context, op backend.Op, n int)
}

// intNative is the native case of integer type T (the parity tests'
// inputs and exact reference).
func intNative[T collective.Integer](dt backend.DType) nativeType {
	return nativeType{dt, func(t *testing.T, w *World, ctx context.Context, op backend.Op, n int) {
		cop := collOps[op]
		in := func(p, i int) T { return intIn[T](cop, p, i) }
		ref := func(i int) T {
			if w.Size() == 1 {
				return in(0, i) // a reduction of one source copies it (backend.Op)
			}
			xs := make([]T, w.Size())
			for p := range xs {
				xs[p] = in(p, i)
			}
			return intRef(cop, xs)
		}
		testNative(t, w, ctx, dt, op, n, in, ref)
	}}
}

// floatNative is the native case of float type T: small integers (Sum) or
// signed powers of two (Prod), so that every order of the reduction gives
// the float64 reference exactly.
func floatNative[T float32 | float64](dt backend.DType) nativeType {
	return nativeType{dt, func(t *testing.T, w *World, ctx context.Context, op backend.Op, n int) {
		cop := collOps[op]
		in := func(p, i int) T { return T(exactIn(cop, p, i)) }
		ref := func(i int) T { return T(refReduce(cop, w.Size(), i)) }
		testNative(t, w, ctx, dt, op, n, in, ref)
	}}
}

var nativeTypes = []nativeType{
	intNative[int32](backend.I32), intNative[uint32](backend.U32), intNative[int64](backend.I64), intNative[uint64](backend.U64),
	floatNative[float32](backend.F32), floatNative[float64](backend.F64),
}

// wrongAt returns the first i where got[i] != want(i), -1 if none.
func wrongAt[T comparable](got []T, want func(i int) T) int {
	for i, g := range got {
		if g != want(i) {
			return i
		}
	}
	return -1
}

// testNative runs every native collective of n elements of type dt with
// op on this process and checks its result; the processes agree on the
// outcome.
func testNative[T comparable](t *testing.T, w *World, ctx context.Context, dt backend.DType, op backend.Op, n int,
	in func(p, i int) T, ref func(i int) T) {
	t.Helper()
	P, me := w.Size(), w.Rank()
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	mine := filled(n, func(i int) T { return in(me, i) })
	var mark T
	// Allreduce out of place, then in place.
	recv := filled(n, func(int) T { return mark })
	if err := w.Allreduce(ctx, bytesOf(mine), bytesOf(recv), dt, op); err != nil {
		fail("Allreduce: %v", err)
	} else if i := wrongAt(recv, ref); i >= 0 {
		fail("Allreduce: element %d = %v, want %v", i, recv[i], ref(i))
	} else if i := wrongAt(mine, func(i int) T { return in(me, i) }); i >= 0 {
		fail("Allreduce wrote its send at element %d", i)
	}
	data := slices.Clone(mine)
	if err := w.Allreduce(ctx, bytesOf(data), bytesOf(data), dt, op); err != nil {
		fail("Allreduce in place: %v", err)
	} else if i := wrongAt(data, ref); i >= 0 {
		fail("Allreduce in place: element %d = %v, want %v", i, data[i], ref(i))
	}
	// Reduce to every root, out of place, then in place at the root.
	for root := range P {
		recv := filled(n, func(int) T { return mark })
		if err := w.Reduce(ctx, bytesOf(mine), bytesOf(recv), dt, op, root); err != nil {
			fail("Reduce to %d: %v", root, err)
		} else if me == root {
			if i := wrongAt(recv, ref); i >= 0 {
				fail("Reduce to %d: element %d = %v, want %v", root, i, recv[i], ref(i))
			}
		} else if i := wrongAt(recv, func(int) T { return mark }); i >= 0 {
			fail("Reduce to %d wrote a non-root's recv at element %d", root, i)
		}
		data := slices.Clone(mine)
		if err := w.Reduce(ctx, bytesOf(data), bytesOf(data), dt, op, root); err != nil {
			fail("Reduce in place to %d: %v", root, err)
		} else if me == root {
			if i := wrongAt(data, ref); i >= 0 {
				fail("Reduce in place to %d: element %d = %v, want %v", root, i, data[i], ref(i))
			}
		}
	}
	// ReduceScatterBlock: process p's send is element i = b*n+j of P*n,
	// its input at global index i; block me of the reduction comes back.
	if n <= w.limit {
		send := filled(P*n, func(i int) T { return in(me, i) })
		recv := filled(n, func(int) T { return mark })
		if err := w.ReduceScatterBlock(ctx, bytesOf(send), bytesOf(recv), dt, op); err != nil {
			fail("ReduceScatterBlock: %v", err)
		} else if i := wrongAt(recv, func(j int) T { return ref(me*n + j) }); i >= 0 {
			fail("ReduceScatterBlock: element %d = %v, want %v", i, recv[i], ref(me*n+i))
		}
	}
	if len(errs) > 0 {
		t.Errorf("%v %v, %d elements, process %d:\n%v", dt, op, n, me, errs)
	}
	agree(t, w, !t.Failed(), fmt.Sprintf("%v %v %d", dt, op, n))
}

// TestNativeReductions runs every type and op Reduces accepts at 13
// elements (Sum also at 0 and 1), then 13 split into MPI calls of 5
// elements, and a large int32 and float64 sum (4 and 8 MiB; float64 not in
// the light jobs).
func TestNativeReductions(t *testing.T) {
	w, ctx := begin(t, 120*time.Second)
	start := nativeStats[nativeAllreduce].Load()
	calls := 0
	for _, nt := range nativeTypes {
		for op := backend.Sum; op < backend.NumOps; op++ {
			if !w.Reduces(nt.dt, op) {
				continue
			}
			sizes := []int{0, 1, 13}
			if op != backend.Sum {
				sizes = sizes[2:] // the sizes are Sum's to check; the ops, 13 elements'
			}
			for _, n := range sizes {
				nt.run(t, w, ctx, op, n)
				calls += 2
			}
		}
	}
	if got := nativeStats[nativeAllreduce].Load() - start; got != int64(calls) {
		t.Errorf("%d MPI_Iallreduce completed, want %d", got, calls)
	}
	t.Run("split", func(t *testing.T) {
		setLimit(t, w, 5)
		nativeTypes[0].run(t, w, ctx, backend.Sum, 13)  // int32
		nativeTypes[5].run(t, w, ctx, backend.Prod, 13) // float64
	})
	t.Run("large", func(t *testing.T) {
		n := 1<<20 + 3
		nativeTypes[0].run(t, w, ctx, backend.Sum, n)
		if !light() {
			nativeTypes[5].run(t, w, ctx, backend.Sum, n)
		}
	})
}

// TestNativeReduces checks which pairs Reduces accepts: every op on the
// integer types, Sum and Prod on float32 and float64, nothing on the 16-
// and 8-bit floats nor on the 8- and 16-bit integers.
func TestNativeReduces(t *testing.T) {
	w := needWorld(t)
	for dt := backend.F32; dt < backend.NumDTypes; dt++ {
		for op := backend.Sum; op < backend.NumOps; op++ {
			want := op.Defined(dt) && dt.Size() >= 4 && (dt.IsInt() || ((dt == backend.F32 || dt == backend.F64) && (op == backend.Sum || op == backend.Prod)))
			if got := w.Reduces(dt, op); got != want {
				t.Errorf("Reduces(%v, %v) = %v, want %v", dt, op, got, want)
			}
		}
	}
	ctx := context.Background()
	if err := w.Allreduce(ctx, make([]byte, 4), make([]byte, 4), backend.F32, backend.Max); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Allreduce of float max = %v, want ErrInvalidArgument", err)
	}
	if err := w.Allreduce(ctx, make([]byte, 4), make([]byte, 8), backend.F32, backend.Sum); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Allreduce of unequal lengths = %v, want ErrInvalidArgument", err)
	}
	b := make([]byte, 16)
	if err := w.Allreduce(ctx, b[:8], b[4:12], backend.F32, backend.Sum); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Allreduce of overlapping slices = %v, want ErrInvalidArgument", err)
	}
	if err := w.Bcast(ctx, b, w.Size()); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Bcast to root %d = %v, want ErrInvalidArgument", w.Size(), err)
	}
	if err := w.Alltoall(ctx, make([]byte, w.Size()+1), make([]byte, w.Size()+1)); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Alltoall of %d bytes = %v, want ErrInvalidArgument", w.Size()+1, err)
	}
}

// TestNativeMoves runs Bcast from every root and Alltoall, at 0, 1 and 13
// bytes per process, and Bcast split into MPI calls of 5 bytes.
func TestNativeMoves(t *testing.T) {
	w, ctx := begin(t, 60*time.Second)
	P, me := w.Size(), w.Rank()
	run := func(t *testing.T, sizes ...int) {
		for _, n := range sizes {
			for root := range P {
				buf := pattern(me, n, 1)
				if err := w.Bcast(ctx, buf, root); err != nil {
					t.Errorf("Bcast of %d bytes from %d: %v", n, root, err)
				} else if !slices.Equal(buf, pattern(root, n, 1)) {
					t.Errorf("Bcast of %d bytes from %d: not the root's bytes", n, root)
				}
			}
			if n > w.limit {
				continue
			}
			send := make([]byte, 0, P*n)
			for q := range P {
				send = append(send, pattern(me, n, q)...)
			}
			recv := make([]byte, P*n)
			if err := w.Alltoall(ctx, send, recv); err != nil {
				t.Errorf("Alltoall of %d bytes: %v", n, err)
			}
			for p := range P {
				if !slices.Equal(recv[p*n:(p+1)*n], pattern(p, n, me)) {
					t.Errorf("Alltoall of %d bytes: block %d is not process %d's", n, p, p)
				}
			}
		}
		agree(t, w, !t.Failed(), "moves")
	}
	run(t, 0, 1, 13, 1<<20)
	t.Run("split", func(t *testing.T) {
		setLimit(t, w, 5)
		run(t, 13)
	})
}

// TestNativeAlltoallv runs Alltoallv with uneven byte counts (process p
// sends q (p+q)%3*5 bytes, 0 among them), ranges spread out with gaps and
// received in reverse order, and with every count 0 (nil buffers): each
// range lands where the counts say, the gaps untouched. A range outside
// its buffer, counts of the wrong length, overlapping buffers and, with
// MPI's count lowered to 5, a count or offset past it are an
// ErrInvalidArgument before anything is sent.
func TestNativeAlltoallv(t *testing.T) {
	w, ctx := begin(t, 60*time.Second)
	P, me := w.Size(), w.Rank()
	count := func(p, q int) int { return (p + q) % 3 * 5 }
	sc, sd, rc, rd := make([]int, P), make([]int, P), make([]int, P), make([]int, P)
	S, R := 0, 0
	for q := range P {
		sc[q], sd[q] = count(me, q), S+1
		S += sc[q] + 1
	}
	for k := range P {
		p := P - 1 - k
		rc[p], rd[p] = count(p, me), R
		R += rc[p] + 2
	}
	send := make([]byte, S)
	for q := range P {
		copy(send[sd[q]:], pattern(me, sc[q], q))
	}
	recv := slices.Repeat([]byte{0xEE}, R)
	if err := w.Alltoallv(ctx, send, sc, sd, recv, rc, rd); err != nil {
		t.Fatalf("Alltoallv: %v", err)
	}
	want := slices.Repeat([]byte{0xEE}, R)
	for p := range P {
		copy(want[rd[p]:], pattern(p, rc[p], me))
	}
	if !slices.Equal(recv, want) {
		t.Errorf("Alltoallv received %v, want %v", recv, want)
	}
	zero := make([]int, P)
	if err := w.Alltoallv(ctx, nil, zero, zero, nil, zero, zero); err != nil {
		t.Errorf("Alltoallv of nothing: %v", err)
	}
	agree(t, w, !t.Failed(), "Alltoallv")
	bad := slices.Clone(sc)
	bad[0] = S + 1
	for _, tc := range []struct {
		what           string
		send, recv     []byte
		sc, sd, rc, rd []int
	}{
		{"a send range past the buffer", send, recv, bad, sd, rc, rd},
		{"one count short", send, recv, sc[:P-1], sd, rc, rd},
		{"send and recv overlapping", recv, recv, zero, zero, zero, zero},
	} {
		if err := w.Alltoallv(ctx, tc.send, tc.sc, tc.sd, tc.recv, tc.rc, tc.rd); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("Alltoallv with %s = %v, want ErrInvalidArgument", tc.what, err)
		}
	}
	setLimit(t, w, 5)
	big := []int{6}
	if P > 1 {
		big = append(big, make([]int, P-1)...)
	}
	if err := w.Alltoallv(ctx, make([]byte, 6), big, zero, make([]byte, 6), big, zero); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Alltoallv of a 6-byte range with MPI's count at 5 = %v, want ErrInvalidArgument", err)
	}
	agree(t, w, !t.Failed(), "Alltoallv refused")
}

// TestNativeTimeout lets the last process call Allreduce late: the others'
// calls time out with an *Error that matches ErrTimeout and names it, their
// memory stays in MPI's use, and once the late process calls, Drain
// reports true and the memory holds the reduction MPI completed.
func TestNativeTimeout(t *testing.T) {
	w, ctx := begin(t, 60*time.Second)
	P, me := w.Size(), w.Rank()
	const n = 1001
	mine := filled(n, func(i int) int32 { return intIn[int32](collective.Sum, me, i) })
	recv := make([]int32, n)
	want := func(i int) int32 {
		var s int32
		for p := range P {
			s += intIn[int32](collective.Sum, p, i)
		}
		return s
	}
	if P < 2 {
		t.Skip("needs two processes")
	}
	late := P - 1
	if me == late {
		time.Sleep(600 * time.Millisecond)
		if err := w.Allreduce(ctx, bytesOf(mine), bytesOf(recv), backend.I32, backend.Sum); err != nil {
			t.Errorf("the late process's Allreduce: %v", err)
		}
	} else {
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := w.Allreduce(tctx, bytesOf(mine), bytesOf(recv), backend.I32, backend.Sum)
		cancel()
		var e *Error
		if !errors.Is(err, backend.ErrTimeout) || !errors.As(err, &e) || !slices.Contains(e.MissingProcesses(), late) {
			t.Errorf("Allreduce with the last process late = %v; want an *Error matching ErrTimeout naming process %d", err, late)
		}
		if w.nativeHeld.Load() != 1 {
			t.Errorf("%d native collectives held after the timeout, want 1", w.nativeHeld.Load())
		}
		if !w.Drain(30 * time.Second) {
			t.Fatalf("Drain: the collective did not complete after the late process called")
		}
	}
	if i := wrongAt(recv, want); i >= 0 {
		t.Errorf("after the collective completed, element %d = %d, want %d", i, recv[i], want(i))
	}
	agree(t, w, !t.Failed(), "native timeout")
}

// TestNativeLost: on a duplicate of the World, the last process does not
// call Allreduce while the others' deadline passes and their Drain, with a
// limit of 1 ms, reports the collective still held: their duplicate is
// declared lost. Every later call on it (collectives, Dup, Split, Isend,
// Irecv, native) fails at once with an *Error matching
// backend.ErrTransportLost that says MPI may still write the memory, which
// stays pinned (the request, with the caller's recv, kept by the World);
// the World it was made from goes on. Once the last process calls, Drain
// reports true and recv holds the sum MPI wrote after the call returned;
// the duplicate stays lost, and closes cleanly.
func TestNativeLost(t *testing.T) {
	w, ctx := begin(t, 60*time.Second)
	P, me := w.Size(), w.Rank()
	if P < 2 {
		t.Skip("needs two processes")
	}
	tr, err := w.Dup(ctx)
	agree(t, w, err == nil, fmt.Sprintf("Dup: %v", err))
	d := tr.(*World)
	const n = 1001
	mine := filled(n, func(i int) int32 { return intIn[int32](collective.Sum, me, i) })
	recv := make([]int32, n)
	want := func(i int) int32 {
		var s int32
		for p := range P {
			s += intIn[int32](collective.Sum, p, i)
		}
		return s
	}
	late := P - 1
	if me != late {
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := d.Allreduce(tctx, bytesOf(mine), bytesOf(recv), backend.I32, backend.Sum)
		cancel()
		if !errors.Is(err, backend.ErrTimeout) || errors.Is(err, backend.ErrTransportLost) {
			t.Errorf("Allreduce with process %d missing = %v; want ErrTimeout (the World not lost yet)", late, err)
		}
		if d.Drain(time.Millisecond) {
			t.Fatal("Drain reported true while process", late, "had not called")
		}
		calls := map[string]func() error{
			"Barrier":   func() error { return d.Barrier(ctx) },
			"Allgather": func() error { return d.Allgather(ctx, []byte{1}, make([]byte, P)) },
			"Allreduce": func() error {
				return d.Allreduce(ctx, bytesOf(mine), bytesOf(make([]int32, n)), backend.I32, backend.Sum)
			},
			"AllreduceF32": func() error { return d.AllreduceF32(ctx, []float32{1}, []float32{0}, backend.Sum) },
			"Bcast":        func() error { return d.Bcast(ctx, []byte{1}, 0) },
			"Dup":          func() error { _, err := d.Dup(ctx); return err },
			"Split":        func() error { _, err := d.Split(ctx, 0, 0); return err },
			"Isend":        func() error { _, err := d.Isend([]byte{1}, 0, 0); return err },
			"Irecv":        func() error { _, err := d.Irecv([]byte{1}, 0, 0); return err },
			"IrecvUpTo":    func() error { _, err := d.IrecvUpTo([]byte{1}, 0, 0); return err },
		}
		for name, call := range calls {
			start := time.Now()
			err := call()
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, backend.ErrTransportLost) || !strings.Contains(err.Error(), "MPI may still write") {
				t.Errorf("%s on the lost World = %v; want an *Error matching ErrTransportLost", name, err)
			}
			if took := time.Since(start); took > 100*time.Millisecond {
				t.Errorf("%s on the lost World took %v, want at once", name, took)
			}
		}
		// The memory stays pinned: the World keeps the request over recv.
		d.bgMu.Lock()
		pinned := slices.ContainsFunc(d.orphans, func(r *request) bool {
			return r.native == nativeAllreduce && r.buf == unsafe.Pointer(unsafe.SliceData(recv))
		})
		d.bgMu.Unlock()
		if !pinned || d.nativeHeld.Load() != 1 {
			t.Errorf("the World keeps the request over recv: %v, %d native collectives held; want true, 1", pinned, d.nativeHeld.Load())
		}
		runtime.GC()
		runtime.GC()
	}
	agree(t, w, !t.Failed(), "lost World") // the World d was made from goes on
	if me == late {
		if err := d.Allreduce(ctx, bytesOf(mine), bytesOf(recv), backend.I32, backend.Sum); err != nil {
			t.Errorf("the late process's Allreduce: %v", err)
		}
	} else {
		if !d.Drain(30 * time.Second) {
			t.Fatal("Drain: the collective did not complete after the late process called")
		}
		if err := d.Barrier(ctx); !errors.Is(err, backend.ErrTransportLost) {
			t.Errorf("Barrier on the lost World once drained = %v; want ErrTransportLost (lost for good)", err)
		}
	}
	if i := wrongAt(recv, want); i >= 0 {
		t.Errorf("after the collective completed, element %d = %d, want %d", i, recv[i], want(i))
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	agree(t, w, !t.Failed(), "lost World closed")
}
