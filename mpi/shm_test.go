//go:build mpi && cgo

package mpi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/internal/hostmath"
	"github.com/gocoll/gocoll/internal/native"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// The shared-memory all-reduce (shm.go). The jobs' processes share one
// node, so the window is used wherever it is on.

// setShm turns the window on (for every collective it has: always) or
// off, with slot bytes per slot, for the Worlds (and so the groups) the
// test opens; the settings come back after it. Every process sets the
// same.
func setShm(t *testing.T, on bool, slot int64) {
	t.Helper()
	on0, always0, slot0 := shmOn.Load(), shmAlways.Load(), shmSlot.Load()
	shmOn.Store(on)
	shmAlways.Store(on)
	shmSlot.Store(slot)
	t.Cleanup(func() {
		shmOn.Store(on0)
		shmAlways.Store(always0)
		shmSlot.Store(slot0)
	})
}

// needShm skips where the window is never used: below MPI_THREAD_MULTIPLE.
func needShm(t *testing.T, w *World) {
	t.Helper()
	if w.mode != modeConcurrent {
		t.Skipf("the shared-memory window needs MPI_THREAD_MULTIPLE; this job has %v", w.ThreadLevel())
	}
}

// needShmGroup is needShm for a test of a group through the window: it
// also skips in a job of one process, whose groups run in process.
func needShmGroup(t *testing.T, w *World) {
	t.Helper()
	needShm(t, w)
	if w.Size() < 2 {
		t.Skip("one process: its groups run in process, not through the window")
	}
}

// shmDup returns a duplicate of w (its own window, allocated on first use
// with the settings then), closed when the test ends.
func shmDup(t *testing.T, w *World) *World {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := w.Dup(ctx)
	if err != nil {
		t.Fatalf("Dup: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close of the duplicate: %v", err)
		}
	})
	return d.(*World)
}

// commonSeed returns a seed every process shares (process 0's, or
// GOCOLL_TEST_SEED), logged.
func commonSeed(t *testing.T, w *World) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("GOCOLL_TEST_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := []uint64{seed}
	if err := w.Bcast(ctx, bytesOf(s), 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d (GOCOLL_TEST_SEED reruns it)", s[0])
	return s[0]
}

// shmInput is input g's n elements of dt (g: the global index, process by
// process, each process's inputs in order) drawn from seed: random bits for
// the integers, for the floats values in [-4, 4) (in [0.5, 2) for Prod)
// rounded to the type.
func shmInput(dt backend.DType, op backend.Op, seed uint64, g, n int) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(g)*7919+uint64(dt)*31+uint64(op)))
	es := dt.Size()
	b := make([]byte, n*es)
	for i := range n {
		x := r.Float64()*8 - 4
		if op == backend.Prod {
			x = 0.5 + r.Float64()*1.5
		}
		e := b[i*es : (i+1)*es]
		switch dt {
		case backend.F32:
			binary.LittleEndian.PutUint32(e, math.Float32bits(float32(x)))
		case backend.F64:
			binary.LittleEndian.PutUint64(e, math.Float64bits(x))
		case backend.Half:
			binary.LittleEndian.PutUint16(e, hostmath.F32ToF16(float32(x)))
		case backend.BFloat16:
			binary.LittleEndian.PutUint16(e, hostmath.F32ToBF16(float32(x)))
		case backend.F8E4M3:
			e[0] = hostmath.F32ToE4M3(float32(x))
		case backend.F8E5M2:
			e[0] = hostmath.F32ToE5M2(float32(x))
		default:
			v := r.Uint64()
			if op == backend.LAnd || op == backend.LOr || op == backend.LXor {
				v &= 1 // zeros too, often
			}
			for k := range es {
				e[k] = byte(v >> (8 * k))
			}
		}
	}
	return b
}

// float64Of decodes element e of dt (a float type) exactly.
func float64Of(dt backend.DType, e []byte) float64 {
	switch dt {
	case backend.F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(e)))
	case backend.F64:
		return math.Float64frombits(binary.LittleEndian.Uint64(e))
	case backend.Half:
		return float64(hostmath.F16ToF32(binary.LittleEndian.Uint16(e)))
	case backend.BFloat16:
		return float64(hostmath.BF16ToF32(binary.LittleEndian.Uint16(e)))
	case backend.F8E4M3:
		return float64(hostmath.E4M3ToF32(e[0]))
	}
	return float64(hostmath.E5M2ToF32(e[0]))
}

// intOf decodes element e of dt (an integer type) into 64 bits, sign
// extended for the signed types.
func intOf(dt backend.DType, e []byte) uint64 {
	var v uint64
	for k := len(e) - 1; k >= 0; k-- {
		v = v<<8 | uint64(e[k])
	}
	if bits := 8 * len(e); dt.Signed() && bits < 64 {
		v = uint64(int64(v<<(64-bits)) >> (64 - bits))
	}
	return v
}

// refInt is op over xs (every input's element, in order) in dt's width,
// mean: the wrapped sum divided by len(xs), truncated toward zero; the
// result's low bytes are dt's element.
func refInt(dt backend.DType, op backend.Op, mean bool, xs []uint64) uint64 {
	es := dt.Size()
	ext := func(v uint64) uint64 { return intOf(dt, binary.LittleEndian.AppendUint64(nil, v)[:es]) }
	less := func(a, b uint64) bool {
		if dt.Signed() {
			return int64(a) < int64(b)
		}
		return a < b
	}
	acc := xs[0]
	if op >= backend.LAnd {
		acc = b2u(acc != 0)
	}
	for _, x := range xs[1:] {
		switch op {
		case backend.Sum:
			acc += x
		case backend.Prod:
			acc *= x
		case backend.Max:
			if less(acc, x) {
				acc = x
			}
		case backend.Min:
			if less(x, acc) {
				acc = x
			}
		case backend.BAnd:
			acc &= x
		case backend.BOr:
			acc |= x
		case backend.BXor:
			acc ^= x
		case backend.LAnd:
			acc = b2u(acc != 0 && x != 0)
		case backend.LOr:
			acc = b2u(acc != 0 || x != 0)
		case backend.LXor:
			acc = b2u((acc != 0) != (x != 0))
		}
		acc = ext(acc)
	}
	if mean {
		n := uint64(len(xs))
		if dt.Signed() {
			acc = uint64(int64(acc) / int64(n))
		} else {
			acc /= n
		}
	}
	return acc
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// checkShmResult checks got (n elements of dt) against the inputs: bitwise
// the one-process deterministic result (hostmath.ReduceStrided over every
// input in order, the arithmetic the in-process strategies use), and
// against an independent reference: the integers exactly, the floats
// within a bound of the float64 result. It returns the first difference.
func checkShmResult(dt backend.DType, op backend.Op, mean bool, ins [][]byte, got []byte, n int) string {
	es := dt.Size()
	k := len(ins)
	scale := 1.0
	if mean {
		scale = 1 / float64(k)
	}
	all := slices.Concat(ins...)
	want := make([]byte, n*es)
	hostmath.ReduceStrided(dt, op, want, all, n, 0, k, n, scale)
	xs := make([]uint64, k)
	fs := make([]float64, k)
	for i := range n {
		e := got[i*es : (i+1)*es]
		if !slices.Equal(e, want[i*es:(i+1)*es]) {
			return fmt.Sprintf("element %d: % x, the one-process deterministic result % x", i, e, want[i*es:(i+1)*es])
		}
		if dt.IsInt() {
			for g := range k {
				xs[g] = intOf(dt, ins[g][i*es:(i+1)*es])
			}
			if r, v := refInt(dt, op, mean, xs), intOf(dt, e); r != v {
				return fmt.Sprintf("element %d: %d, want %d", i, int64(v), int64(r))
			}
			continue
		}
		sumAbs := 0.0
		for g := range k {
			fs[g] = float64Of(dt, ins[g][i*es:(i+1)*es])
			sumAbs += math.Abs(fs[g])
		}
		acc := fs[0]
		for _, x := range fs[1:] {
			switch op {
			case backend.Sum:
				acc += x
			case backend.Prod:
				acc *= x
			case backend.Max:
				acc = math.Max(acc, x)
			default:
				acc = math.Min(acc, x)
			}
		}
		if mean {
			acc /= float64(k)
		}
		// Rounded once to the type (its epsilon), after float32 sums (the
		// narrow types) or sums in the type itself.
		eps := map[backend.DType]float64{backend.F32: 0x1p-23, backend.F64: 0x1p-52, backend.Half: 0x1p-10,
			backend.BFloat16: 0x1p-7, backend.F8E4M3: 0x1p-3, backend.F8E5M2: 0x1p-2}[dt]
		sumEps := eps
		if dt.IsNarrowFloat() {
			sumEps = 0x1p-23
		}
		// Plus the type's least subnormal: its spacing near zero.
		tiny := map[backend.DType]float64{backend.F32: 0x1p-149, backend.Half: 0x1p-24, backend.BFloat16: 0x1p-133,
			backend.F8E4M3: 0x1p-9, backend.F8E5M2: 0x1p-16}[dt]
		bound := eps*math.Abs(acc) + float64(k)*sumEps*sumAbs + tiny
		if op == backend.Prod {
			bound = float64(k+1) * max(eps, sumEps) * math.Abs(acc)
		}
		if v := float64Of(dt, e); math.Abs(v-acc) > bound {
			return fmt.Sprintf("element %d: %v, want %v within %v", i, v, acc, bound)
		}
	}
	return ""
}

// TestShmAllreduce runs the window's all-reduce on a World of 256-byte
// slots for every element type and op hostmath reduces (Sum also as a
// mean), one and two inputs per process, in place and out of place, at 0,
// 1, 7 elements and one chunk -1, +0, +1 and three chunks +2 (C elements
// per input per chunk: the slot over the inputs per process), each checked
// bitwise against the one-process deterministic result and against the
// exact or float64 reference. It counts the calls (one per call with data)
// and the fences (two per chunk; one for 2 processes).
func TestShmAllreduce(t *testing.T) {
	w, _ := begin(t, 20*time.Second)
	needShm(t, w)
	const slot = 256
	setShm(t, true, slot)
	d := shmDup(t, w)
	seed := commonSeed(t, w)
	P := w.Size()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	calls0, fences0 := shmCalls.Load(), shmFences.Load()
	calls, fences := 0, 0
	types := []backend.DType{backend.F32, backend.F64, backend.I32, backend.U32, backend.I64, backend.U64, backend.I8,
		backend.U8, backend.I16, backend.U16, backend.Half, backend.BFloat16, backend.F8E4M3, backend.F8E5M2}
	for _, dt := range types {
		for op := backend.Op(0); op < backend.NumOps; op++ {
			if !op.Defined(dt) {
				continue
			}
			for _, L := range []int{1, 2} {
				C := slot / (L * dt.Size())
				sizes := []int{0, 1, 7, C - 1, C, C + 1, 3*C + 2}
				if light() && dt != backend.F32 && dt != backend.I8 && dt != backend.Half {
					sizes = []int{7, C + 1}
				}
				for _, n := range sizes {
					for _, mean := range []bool{false, true} {
						if mean && op != backend.Sum {
							continue
						}
						inPlace := L == 1 && n%2 == 1
						ins := make([][]byte, P*L)
						for g := range ins {
							ins[g] = shmInput(dt, op, seed, g, n)
						}
						srcs := slices.Clone(ins[d.Rank()*L : (d.Rank()+1)*L])
						for i := range srcs {
							srcs[i] = slices.Clone(srcs[i])
						}
						dst := make([]byte, n*dt.Size())
						if inPlace {
							dst = srcs[0]
						}
						scale := 1.0
						if mean {
							scale = 1 / float64(P*L)
						}
						ran, err := d.shmAllreduce(ctx, srcs, nil, dst, n, dt, op, scale)
						what := fmt.Sprintf("%v %v (mean %v) n=%d L=%d in place %v", dt, op, mean, n, L, inPlace)
						if err != nil || !ran {
							t.Fatalf("%s: ran %v, %v", what, ran, err)
						}
						if n > 0 {
							calls++
							fences += shmReduceFences(P) * ((n + C - 1) / C)
						}
						if s := checkShmResult(dt, op, mean, ins, dst, n); s != "" {
							t.Errorf("%s: %s", what, s)
						}
					}
				}
			}
		}
	}
	if got := shmCalls.Load() - calls0; got != int64(calls) {
		t.Errorf("%d all-reduces through the window, want %d", got, calls)
	}
	if got := shmFences.Load() - fences0; got != int64(fences) {
		t.Errorf("%d fences, want %d (two per chunk, one for 2 processes)", got, fences)
	}
	agree(t, w, !t.Failed(), "shared-memory all-reduce")
}

// shmReduceFences is the fences of one chunk of the window's all-reduce
// and reduce for P processes: two (a piece reduced by each process, then
// copied out), one for 2 processes (each reduces the whole chunk).
func shmReduceFences(P int) int {
	if P == 2 {
		return 1
	}
	return 2
}

// TestShmOff checks that the window is not used where any process turns it
// off: process 0 does (GOCOLL_MPI_SHM=0 there), the others not; the
// all-reduce, the reduce-scatter and the all-gather report they did not
// run, on every process, and leave the destination untouched.
func TestShmOff(t *testing.T) {
	w, _ := begin(t, 20*time.Second)
	setShm(t, w.Rank() != 0, 4096)
	d := shmDup(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	x := make([]byte, 64)
	ran, err := d.shmAllreduce(ctx, [][]byte{x}, nil, x, 16, backend.F32, backend.Sum, 1)
	if err != nil || ran {
		t.Errorf("with the window off on process 0: ran %v, %v; want false, nil", ran, err)
	}
	P := w.Size()
	src := make([]byte, P*64)
	for i := range src {
		src[i] = byte(i)
	}
	dst := make([]byte, P*64)
	ran, err = d.shmReduceScatter(ctx, [][]byte{src}, nil, dst[:64], 16, backend.F32, backend.Sum, 1)
	if err != nil || ran {
		t.Errorf("reduce-scatter with the window off on process 0: ran %v, %v; want false, nil", ran, err)
	}
	_, _, ran, err = d.shmAllgather(ctx, [][]byte{src[:64]}, dst, 64, false)
	if err != nil || ran {
		t.Errorf("all-gather with the window off on process 0: ran %v, %v; want false, nil", ran, err)
	}
	if !slices.Equal(dst, make([]byte, P*64)) {
		t.Errorf("the destination was written")
	}
	agree(t, w, !t.Failed(), "window off")
}

// TestShmChoice checks the window's choice against MPI's all-reduce
// (mpiBetter), which the processes agree on: with 2 processes and one
// whose copies take one goroutine (GOCOLL_MPI_SHM at its default), the
// all-reduce and the all-gather report they did not run, on every
// process, the all-reduce leaving its destination untouched, while the
// reduce-scatter and the reduce run; with 2 goroutines on every process,
// or other than 2 processes, every one runs through the window, and the
// all-reduce's result is the sum.
func TestShmChoice(t *testing.T) {
	w, _ := begin(t, 20*time.Second)
	needShm(t, w)
	P := w.Size()
	setShm(t, true, 4096)
	shmAlways.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	procs0, copy0 := runtime.GOMAXPROCS(0), parreduce.Copy.Get()
	defer func() {
		runtime.GOMAXPROCS(procs0)
		parreduce.Copy.Set(copy0)
	}()
	for _, one := range []bool{true, false} {
		runtime.GOMAXPROCS(max(procs0, 2))
		parreduce.Copy.Set(2)
		if one && w.Rank() == P-1 {
			parreduce.Copy.Set(1)
		}
		d := shmDup(t, w)
		want := !(one && P == 2)
		x := make([]float32, 1000)
		for i := range x {
			x[i] = float32(i*P + w.Rank())
		}
		dst := make([]float32, len(x))
		ran, err := d.shmAllreduce(ctx, [][]byte{bytesOf(x)}, nil, bytesOf(dst), len(x), backend.F32, backend.Sum, 1)
		if err != nil || ran != want {
			t.Errorf("one goroutine on a process %v, %d processes: all-reduce ran %v, %v; want %v, nil", one, P, ran, err, want)
		}
		for i, v := range dst {
			sum := float32(0)
			for r := range P {
				sum += float32(i*P + r)
			}
			if !want {
				sum = 0
			}
			if v != sum {
				t.Errorf("one goroutine %v: element %d is %v, want %v", one, i, v, sum)
				break
			}
		}
		seg := make([]float32, len(x)/P)
		ran, err = d.shmReduceScatter(ctx, [][]byte{bytesOf(x[:len(seg)*P])}, nil, bytesOf(seg), len(seg), backend.F32, backend.Sum, 1)
		if err != nil || !ran {
			t.Errorf("one goroutine %v: reduce-scatter ran %v, %v; want true, nil", one, ran, err)
		}
		all := make([]float32, P*len(seg))
		_, _, ran, err = d.shmAllgather(ctx, [][]byte{bytesOf(seg)}, bytesOf(all), 4*len(seg), false)
		if err != nil || ran != want {
			t.Errorf("one goroutine %v, %d processes: all-gather ran %v, %v; want %v, nil", one, P, ran, err, want)
		}
		_, _, ran, err = d.shmAllgather(ctx, [][]byte{bytesOf(seg)}, bytesOf(all), 4*len(seg), true)
		if err != nil || ran != want {
			t.Errorf("one goroutine %v, %d processes: all-gather view ran %v, %v; want %v, nil", one, P, ran, err, want)
		}
		var root []byte
		if w.Rank() == 0 {
			root = bytesOf(dst)
		}
		ran, err = d.shmReduce(ctx, [][]byte{bytesOf(x)}, nil, root, len(x), backend.F32, backend.Sum, 1, 0)
		if err != nil || !ran {
			t.Errorf("one goroutine %v: reduce ran %v, %v; want true, nil", one, ran, err)
		}
	}
	agree(t, w, !t.Failed(), "window choice")
}

// TestShmTimeout lets the last process come 1.5 s late to an all-reduce
// through the window while the others wait 300 ms: their call fails with an
// error matching ErrTimeout that names the late process (MissingProcesses),
// the window's fence being a collective of the World; then the late
// process's barrier completes theirs.
func TestShmTimeout(t *testing.T) {
	w, _ := begin(t, 20*time.Second)
	needShm(t, w)
	P := w.Size()
	if P < 2 {
		t.Skip("needs two processes")
	}
	setShm(t, true, 4096)
	d := shmDup(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	x := make([]byte, 4*1000)
	if _, err := d.shmAllreduce(ctx, [][]byte{x}, nil, x, 1000, backend.F32, backend.Sum, 1); err != nil {
		t.Fatal(err) // the window is open
	}
	late := P - 1
	if d.Rank() == late {
		time.Sleep(1500 * time.Millisecond)
		if err := d.barrier(ctx); err != nil { // the others' first fence, left posted
			t.Errorf("the late process's barrier: %v", err)
		}
	} else {
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		ran, err := d.shmAllreduce(short, [][]byte{x}, nil, x, 1000, backend.F32, backend.Sum, 1)
		var mp backend.MissingProcesses
		switch {
		case !ran || !errors.Is(err, backend.ErrTimeout) || !errors.As(err, &mp):
			t.Errorf("all-reduce with process %d late: ran %v, %v; want an error matching ErrTimeout naming it", late, ran, err)
		case !slices.Contains(mp.MissingProcesses(), late):
			t.Errorf("all-reduce with process %d late: %v names %v", late, err, mp.MissingProcesses())
		}
	}
	if err := d.Barrier(ctx); err != nil {
		t.Errorf("Barrier after the timeout: %v", err)
	}
	agree(t, w, !t.Failed(), "window timeout")
}

// TestShmGroupAllocs counts the Go allocations of a steady-state AllReduce
// of a group through the window (strategy Native, one and two ranks per
// process, 4 KiB slots so that the call takes three chunks): none, and one
// all-reduce through the window per call, none through MPI_Iallreduce.
func TestShmGroupAllocs(t *testing.T) {
	w, _ := begin(t, 40*time.Second)
	needShmGroup(t, w)
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	setShm(t, true, 4096)
	ctx := context.Background()
	for _, local := range []int{1, 2} {
		g := openNativeGroup(t, w, "host", local, false)
		xs := make([][]float32, local)
		for i := range xs {
			xs[i] = make([]float32, 2500)
		}
		next, done := make(chan struct{}), make(chan error)
		for l := 1; l < local; l++ {
			go func() {
				for range next {
					done <- collective.AllReduce(ctx, g.Comm(l), xs[l], collective.Sum)
				}
			}()
		}
		mpi0, calls0 := nativeStats[nativeAllreduce].Load(), shmCalls.Load()
		allocs := testing.AllocsPerRun(20, func() {
			for l := 1; l < local; l++ {
				next <- struct{}{}
			}
			err := collective.AllReduce(ctx, g.Comm(0), xs[0], collective.Sum)
			for l := 1; l < local; l++ {
				if err1 := <-done; err == nil {
					err = err1
				}
			}
			if err != nil {
				t.Error(err)
			}
		})
		close(next)
		if got := shmCalls.Load() - calls0; got != 21 {
			t.Errorf("L=%d: %d all-reduces through the window, want 21", local, got)
		}
		if got := nativeStats[nativeAllreduce].Load() - mpi0; got != 0 {
			t.Errorf("L=%d: %d MPI_Iallreduce, want 0", local, got)
		}
		if allocs > 0 {
			t.Errorf("L=%d: %v allocations per AllReduce, want 0", local, allocs)
		}
	}
	agree(t, w, !t.Failed(), "allocations through the window")
}

// shmReduceScatter is shmReduceScatterInto without into: the result in dst.
func (w *World) shmReduceScatter(ctx context.Context, srcs [][]byte, comb native.Combiner, dst []byte, seg int, dt backend.DType, op backend.Op, scale float64) (ran bool, err error) {
	_, ran, err = w.shmReduceScatterInto(ctx, srcs, comb, dst, nil, seg, dt, op, scale)
	return ran, err
}

// shmAllgather is shmAllgatherMore without more.
func (w *World) shmAllgather(ctx context.Context, srcs [][]byte, dst []byte, mb int, keep bool) (view []byte, stride int, ran bool, err error) {
	view, stride, _, ran, err = w.shmAllgatherMore(ctx, srcs, dst, nil, mb, keep)
	return view, stride, ran, err
}
