//go:build mpi && cgo

package mpi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/internal/hostmath"
	"github.com/gocoll/gocoll/internal/native"
)

// The calls through the window that read the inputs where they lie
// (shmzc.go).

// TestShmZeroCopy draws calls from a seed the processes share (printed;
// GOCOLL_TEST_SEED reruns it): all-reduce, reduce-scatter or all-gather; an
// element type and op; 1 or 2 inputs per process; a size about the offer's
// floors and the window's chunks (slots of 1 KiB, the floor at 512 bytes,
// 2 KiB for an all-gather of one chunk);
// in place or not; where the inputs lie: in memory of AllocShared on
// every process (made on another duplicate of the World than the one the
// calls run on, at offsets each process draws alone), on none, or on all
// but process 0; and for an all-reduce out of place, whether its result
// lies there too. Every result is checked against the one-process
// deterministic result and the reference (checkShmResult), every input
// out of place is unchanged, the call read its inputs where they lie
// exactly when every process's inputs are shared and at least the floor,
// and an all-reduce wrote its result straight into every process's
// (zcDirect) exactly when, besides, every result is shared (or is the
// input) and at least that floor (1 KiB here).
func TestShmZeroCopy(t *testing.T) {
	w, _ := begin(t, 20*time.Second)
	needShm(t, w)
	const slot = 1 << 10
	setShm(t, true, slot)
	defer func(m, g, dm, pb, rf int) {
		zcMin, zcGatherMin, zcDirectMin, directPieceBytes, claimRSFloor = m, g, dm, pb, rf
	}(zcMin, zcGatherMin, zcDirectMin, directPieceBytes, claimRSFloor)
	zcMin, zcGatherMin, zcDirectMin, claimRSFloor = 512, 2048, 1024, 2
	d, d2 := shmDup(t, w), shmDup(t, w)
	seed := commonSeed(t, w)
	P, me := w.Size(), d.Rank()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const arena = 1 << 20
	mem, err := AllocShared[byte](ctx, d2, arena)
	if err != nil {
		t.Fatalf("AllocShared: %v", err)
	}
	if len(mem) != arena || slices.ContainsFunc(mem, func(b byte) bool { return b != 0 }) {
		t.Fatalf("AllocShared: %d bytes, not all zero", len(mem))
	}
	rng := rand.New(rand.NewPCG(seed, 7))           // the same on every process
	mine := rand.New(rand.NewPCG(seed, uint64(me))) // this process's offsets
	types := []backend.DType{backend.F32, backend.F64, backend.I32, backend.I8, backend.Half, backend.BFloat16}
	var zcs, directs, rsDirects, intos uint64
	cases := 120
	if light() {
		cases = 40
	}
	for i := range cases {
		kind := rng.IntN(3)
		dt := types[rng.IntN(len(types))]
		op := backend.Op(rng.IntN(int(backend.NumOps)))
		for !op.Defined(dt) {
			op = backend.Op(rng.IntN(int(backend.NumOps)))
		}
		if kind == 2 {
			dt, op = backend.U8, backend.Sum
		}
		// With 2 inputs, an all-reduce or reduce-scatter may take them with a
		// Combiner (a process of several ranks outside deterministic mode),
		// on int32 whose reductions are exact in any order.
		withComb := kind < 2 && rng.IntN(2) == 0
		if withComb {
			dt = backend.I32
		}
		es := dt.Size()
		L := 1 + rng.IntN(2)
		where := []int{0, 0, 1, 2}[rng.IntN(4)] // 0: every process shared, 1: none, 2: all but process 0
		inPlace := rng.IntN(3) == 0 && (kind != 0 || L == 1)
		// n: elements per input (all-reduce), per segment per rank
		// (reduce-scatter: segments of L*n) or bytes per input
		// (all-gather), about the floor and the chunks; nb: bytes per input.
		per := []int{es, P * L * es, 1}[kind]
		// (claimRSFloor*zcDirectMin/per: a reduce-scatter's input about the floor of its claimed pieces.)
		near := []int{zcMin / per, P * slot / per, 3 * P * slot / per, 1, 7, zcGatherMin / per, zcDirectMin / per, claimRSFloor * zcDirectMin / per}[rng.IntN(8)]
		n := max(near+rng.IntN(5)-2, 1)
		nb, seg := n*per, L*n
		ins := make([][]byte, P*L)
		for g := range ins {
			ins[g] = shmInput(dt, op, seed+uint64(i), g, nb/es)
		}
		shared := where == 0 || where == 2 && me != 0
		resShared := rng.IntN(2) == 0 // a result out of place (all-reduce, reduce-scatter into): in the arena too
		// A reduce-scatter's result as into (the process's one rank's
		// result, written straight where every input is read where it
		// lies), the window's dst then a scratch block that must stay
		// untouched.
		useInto := kind == 1 && rng.IntN(2) == 0
		// This process's inputs (and, in place, result): in the arena at
		// offsets of its own, or in Go memory.
		srcs := make([][]byte, L)
		var dst []byte
		at := 0
		outBytes := []int{nb, seg * es, P * L * nb}[kind]
		if inPlace && kind == 2 {
			dst = take(mem, &at, mine, outBytes, shared)
			for l := range srcs {
				g := me*L + l
				srcs[l] = dst[g*nb : (g+1)*nb]
			}
		} else {
			for l := range srcs {
				srcs[l] = take(mem, &at, mine, nb, shared)
			}
			switch {
			case inPlace && kind == 0:
				dst = srcs[0]
			case inPlace: // the reduce-scatter's result: this process's segment of its first input
				dst = srcs[0][me*seg*es : (me+1)*seg*es]
			case (kind == 0 || useInto) && resShared:
				dst = take(mem, &at, mine, outBytes, shared)
			default:
				dst = make([]byte, outBytes)
			}
		}
		for l := range srcs {
			copy(srcs[l], ins[me*L+l])
		}
		var comb *testCombiner
		var nc native.Combiner
		if withComb && L == 2 {
			comb = &testCombiner{dt: dt, op: op, srcs: srcs, nb: nb}
			nc = comb
		}
		// The direct path's pieces: from one cache line to more than the
		// call or a segment (several claims per worker, or one piece).
		directPieceBytes = []int{1, 64, 200, 1 << 10, 64 << 10}[rng.IntN(5)]
		zc0, direct0 := shmZeroCopy.Load(), shmDirect.Load()
		what := fmt.Sprintf("case %d: kind %d %v %v L=%d n=%d in place %v where %d result shared %v combiner %v into %v", i, kind, dt, op, L, n, inPlace, where, resShared, comb != nil, useInto)
		var ran bool
		switch kind {
		case 0:
			ran, err = d.shmAllreduce(ctx, srcs, nc, dst, n, dt, op, 1)
		case 1:
			if !useInto {
				ran, err = d.shmReduceScatter(ctx, srcs, nc, dst, seg, dt, op, 1)
				break
			}
			scratch := bytes.Repeat([]byte{0xa5}, seg*es)
			var wrote bool
			wrote, ran, err = d.shmReduceScatterInto(ctx, srcs, nc, scratch, dst, seg, dt, op, 1)
			wantWrote := where == 0 && nb >= zcMin && P > 1
			switch {
			case err != nil:
			case wrote != wantWrote:
				t.Errorf("case %d: the reduce-scatter wrote its result straight: %v, want %v", i, wrote, wantWrote)
			case wrote && slices.ContainsFunc(scratch, func(b byte) bool { return b != 0xa5 }):
				t.Errorf("case %d: the reduce-scatter wrote its result straight and into dst too", i)
			case !wrote:
				copy(dst, scratch) // as the group's ranks copy their blocks
			}
			intos += b2u(wrote)
		default:
			_, _, ran, err = d.shmAllgather(ctx, srcs, dst, nb, false)
		}
		if err != nil || !ran {
			t.Fatalf("%s: ran %v, %v", what, ran, err)
		}
		wantZC := where == 0 && nb >= zcMin && P > 1
		if C := P * slot / (P * L) &^ 7; kind == 2 && nb <= C && nb < zcGatherMin {
			wantZC = false // an all-gather of one chunk below its floor copies in
		}
		zcs += b2u(wantZC)
		wantDirect := wantZC && (kind == 0 && nb >= zcDirectMin || useInto && P >= 4 && nb >= claimRSFloor*zcDirectMin) && (inPlace || resShared)
		directs += b2u(wantDirect)
		rsDirects += b2u(wantDirect && kind == 1)
		if got := shmDirect.Load() - direct0; got != int64(b2u(wantDirect)) {
			t.Errorf("%s: %d calls wrote every process's result straight, want %v", what, got, wantDirect)
		}
		if comb != nil && comb.calls != 1-int(b2u(wantZC)) {
			t.Errorf("%s: combined %d times, want %d (read where they lie: %v)", what, comb.calls, 1-b2u(wantZC), wantZC)
		}
		if got := shmZeroCopy.Load() - zc0; got != int64(b2u(wantZC)) {
			t.Errorf("%s: %d calls read their inputs where they lie, want %v", what, got, wantZC)
		}
		switch kind {
		case 0:
			if s := checkShmResult(dt, op, false, ins, dst, n); s != "" {
				t.Errorf("%s: %s", what, s)
			}
		case 1:
			mineOf := make([][]byte, P*L)
			for g := range mineOf {
				mineOf[g] = ins[g][me*seg*es : (me+1)*seg*es]
			}
			if s := checkShmResult(dt, op, false, mineOf, dst, seg); s != "" {
				t.Errorf("%s: %s", what, s)
			}
		default:
			if want := slices.Concat(ins...); !slices.Equal(dst, want) {
				t.Errorf("%s: the gathered bytes differ", what)
			}
		}
		if !inPlace {
			for l := range srcs {
				if !slices.Equal(srcs[l], ins[me*L+l]) {
					t.Errorf("%s: input %d changed", what, l)
				}
			}
		}
	}
	t.Logf("%d of %d calls read their inputs where they lie, %d wrote every result straight (%d reduce-scatters' pieces claimed by every process), %d reduce-scatters wrote theirs straight", zcs, cases, directs, rsDirects, intos)
	agree(t, w, !t.Failed(), "calls that read their inputs where they lie")
}

// testCombiner combines its inputs in order (hostmath.ReduceMulti), as a
// leader does, and counts the calls.
type testCombiner struct {
	dt        backend.DType
	op        backend.Op
	srcs      [][]byte
	nb, calls int
}

func (c *testCombiner) Combined() []byte {
	c.calls++
	out := make([]byte, c.nb)
	hostmath.ReduceMulti(c.dt, c.op, [][]byte{out}, c.srcs, c.nb/c.dt.Size(), 1)
	return out
}

// take returns nb bytes of the arena after *at, at a gap drawn from rng (a
// multiple of 8), and moves *at past them; or Go memory where shared is
// false. A case's pieces never overlap.
func take(arena []byte, at *int, rng *rand.Rand, nb int, shared bool) []byte {
	off := *at + rng.IntN(64)*8
	if !shared || off+nb > len(arena) {
		return make([]byte, nb)
	}
	*at = off + nb
	return arena[off : off+nb : off+nb]
}

// TestAllocShared: the memory is zeroed, each process's own (writes by one
// are not seen in another's slice), the same World's collectives still
// run after it, a negative count is an error that matches
// backend.ErrInvalidArgument, and a World without a window
// (GOCOLL_MPI_SHM=0) gets Go memory.
func TestAllocShared(t *testing.T) {
	w, _ := begin(t, 20*time.Second)
	needShm(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := AllocShared[float32](ctx, w, -1); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("AllocShared(-1): %v, want ErrInvalidArgument", err)
	}
	setShm(t, true, 4096)
	d := shmDup(t, w)
	for _, n := range []int{0, 1, 1001} {
		x, err := AllocShared[float64](ctx, d, n+d.Rank())
		if err != nil || len(x) != n+d.Rank() {
			t.Fatalf("AllocShared(%d): %d elements, %v", n+d.Rank(), len(x), err)
		}
		for i := range x {
			if x[i] != 0 {
				t.Fatalf("element %d is %v, want 0", i, x[i])
			}
			x[i] = float64(d.Rank()*1e6 + i)
		}
		if err := d.Barrier(ctx); err != nil {
			t.Fatal(err)
		}
		for i := range x {
			if x[i] != float64(d.Rank()*1e6+i) {
				t.Fatalf("element %d is %v after the barrier: another process wrote it", i, x[i])
			}
		}
	}
	setShm(t, false, 4096)
	off := shmDup(t, w)
	x, err := AllocShared[int32](ctx, off, 10)
	if err != nil || len(x) != 10 {
		t.Fatalf("AllocShared without a window: %d elements, %v", len(x), err)
	}
	if findShared(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 40)) != nil {
		t.Errorf("AllocShared without a window returned shared memory")
	}
	agree(t, w, !t.Failed(), "AllocShared")
}

// TestShmZeroCopyFails: calls whose inputs every process reads where they
// lie (all-reduce of one chunk and of 4, reduce-scatter, all-gather of
// float32), where the last process's context ends while the others still
// read its inputs:
//
//   - mode 1: it ends before the last process posts a fence after the
//     agreement (the first, for the all-reduce of 4 chunks): it posts it
//     all the same and goes on to the end of the call, then returns the
//     context's error, its result complete; the others succeed;
//   - mode 2: its deadline passes in the fence, while the others arrive
//     800 ms late: it returns the deadline's error only once they arrived
//     (it waits past its deadline, up to fenceDrain), holding nothing; the
//     others succeed;
//   - mode 3: as 2, with fenceDrain 200 ms: it returns past fenceDrain, the
//     fence held (nativeFence), so its Drain returns true only once the
//     others arrived; the others succeed, except in the all-reduce of 4
//     chunks with more than 2 processes (2 reduce all in one step), where
//     they time out at the next chunk's fence, which it never posts, and
//     their Drain returns once it posts the barrier they hold.
//
// AllReduceDirect is the all-reduce of one chunk whose results are shared
// too (zcDirect: a commit fence, then the processes' workers write the
// pieces they claim into every result): in mode 3 the others, past the commit the last process
// posted, write its result and time out at the last fence, as in the
// all-reduce of 4 chunks.
//
// Every success is checked against the exact sums or blocks.
//
// The trimmed matrix (CI) runs it with 3 and 4 processes only: with 2 on 2
// cores the progress threads yield rather than sleep through its waits,
// taking the cores from the tests that run beside the MPI jobs.
func TestShmZeroCopyFails(t *testing.T) {
	w, _ := begin(t, 30*time.Second)
	needShmGroup(t, w)
	if light() && w.Size() == 2 {
		t.Skip("trimmed matrix: run with 3 and 4 processes (GOCOLL_TEST_FULL runs it here too)")
	}
	setShm(t, true, 1<<10)
	defer func(m int) { zcMin = m }(zcMin)
	zcMin = 512
	P, me := w.Size(), w.Rank()
	last := P - 1
	defer func(g, dm int) { zcGatherMin, zcDirectMin = g, dm }(zcGatherMin, zcDirectMin)
	zcGatherMin, zcDirectMin = 512, 512
	defer func(d time.Duration) { fenceDrain = d }(fenceDrain)
	var mode atomic.Int32
	const late = 800 * time.Millisecond
	var cancelLast atomic.Pointer[context.CancelFunc]
	shmChunkHook = func(ctx context.Context, hw *World, k int) {
		switch {
		case k != -2:
		case mode.Load() == 1 && hw.Rank() == last:
			(*cancelLast.Load())()
		case mode.Load() >= 2 && hw.Rank() != last:
			time.Sleep(late)
		}
	}
	t.Cleanup(func() { shmChunkHook = nil })
	for _, kind := range []string{"AllReduce", "AllReduceChunks", "AllReduceDirect", "ReduceScatter", "ReduceScatterDirect", "AllGather"} {
		for _, m := range []int32{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/mode=%d", kind, m), func(t *testing.T) {
				if kind == "ReduceScatterDirect" && P < 4 {
					t.Skip("a reduce-scatter's pieces are claimed from 4 processes")
				}
				fenceDrain = 10 * time.Second
				if m == 3 {
					fenceDrain = 200 * time.Millisecond
				}
				d := shmDup(t, w)
				bg, bgCancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer bgCancel()
				mem, err := AllocShared[float32](bg, d, 64<<10)
				if err != nil {
					t.Fatalf("AllocShared: %v", err)
				}
				n := 1024 // float32 per segment (reduce-scatter), input (all-gather) or piece (all-reduce of 4 chunks)
				if kind == "AllReduce" || kind == "AllReduceDirect" {
					n = 256 // P*n per input: one chunk, one fence after the reading
				}
				src := mem[:P*n]
				for i := range src {
					src[i] = float32(me*1000 + i%997)
				}
				dst := make([]float32, P*n)
				direct := strings.HasSuffix(kind, "Direct") // every result in the arena too: the pieces claimed
				if direct {
					dst = mem[P*n : 2*P*n]
				}
				othersFail := (kind == "AllReduceChunks" && P > 2 || direct) && m == 3
				var ctx context.Context
				var cancel context.CancelFunc
				switch {
				case me == last && m == 1:
					ctx, cancel = context.WithCancel(bg)
					cancelLast.Store(&cancel)
				case me == last:
					ctx, cancel = context.WithTimeout(bg, 250*time.Millisecond)
				case othersFail:
					ctx, cancel = context.WithTimeout(bg, 5*time.Second)
				default:
					ctx, cancel = context.WithTimeout(bg, 30*time.Second)
				}
				defer cancel()
				b := func(f []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f)) }
				zc0, direct0 := shmZeroCopy.Load(), shmDirect.Load()
				mode.Store(m)
				start := time.Now()
				switch kind {
				case "AllReduce", "AllReduceChunks", "AllReduceDirect":
					_, err = d.shmAllreduce(ctx, [][]byte{b(src)}, nil, b(dst), P*n, backend.F32, backend.Sum, 1)
				case "ReduceScatter":
					_, err = d.shmReduceScatter(ctx, [][]byte{b(src)}, nil, b(dst[:n]), n, backend.F32, backend.Sum, 1)
				case "ReduceScatterDirect":
					scratch := make([]float32, n)
					_, _, err = d.shmReduceScatterInto(ctx, [][]byte{b(src)}, nil, b(scratch), b(dst[:n]), n, backend.F32, backend.Sum, 1)
				default:
					_, _, _, err = d.shmAllgather(ctx, [][]byte{b(src[:n])}, b(dst), 4*n, false)
				}
				took := time.Since(start)
				mode.Store(0)
				held := d.nativeHeld.Load()
				complete := me != last && !othersFail || m == 1 // the results to check
				switch {
				case othersFail && me != last:
					if !errors.Is(err, backend.ErrTimeout) || !slices.Equal(err.(*Error).Ranks, []int{last}) {
						t.Errorf("process %d: %v, want a timeout naming process %d", me, err, last)
					}
				case me != last:
					if err != nil {
						t.Errorf("process %d: %v, want success", me, err)
					}
				case m == 1:
					if !errors.Is(err, context.Canceled) {
						t.Errorf("the last process: %v, want its context's end", err)
					}
				default:
					if !errors.Is(err, backend.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("the last process: %v, want its deadline's error", err)
					}
					if took < late-50*time.Millisecond && m == 2 {
						t.Errorf("returned %v after the call began, before the others arrived (%v)", took, late)
					}
					if m == 3 && took > late-200*time.Millisecond {
						t.Errorf("returned %v after the call began, want about 250 ms + fenceDrain", took)
					}
				}
				switch want := int64(b2i(m == 3 && (me == last || othersFail))); {
				case held != want:
					t.Errorf("%d calls held, want %d", held, want)
				case want == 1 && me != last:
					if !d.Drain(10 * time.Second) {
						t.Errorf("Drain: false, want true once the last process posted the barrier it lacks")
					}
				case want == 1:
					if !d.Drain(10 * time.Second) {
						t.Errorf("Drain: false, want true once the others arrived")
					}
					if e := time.Since(start); e < late-50*time.Millisecond {
						t.Errorf("Drain returned %v after the call began, before the others arrived (%v)", e, late)
					}
					if othersFail {
						// Once the others timed out, the barrier they hold.
						time.Sleep(time.Until(start.Add(5*time.Second + time.Second)))
						if err := d.Barrier(bg); err != nil {
							t.Errorf("Barrier: %v", err)
						}
					}
				}
				if complete && shmZeroCopy.Load() != zc0+1 {
					t.Errorf("the call copied its inputs in")
				}
				if got, want := shmDirect.Load()-direct0, int64(b2i(direct)); complete && got != want {
					t.Errorf("%d calls wrote every result straight, want %d", got, want)
				}
				for i := 0; complete && i < len(dst); i++ {
					want := float32(0)
					switch kind {
					case "ReduceScatter", "ReduceScatterDirect":
						if i >= n {
							break
						}
						for p := range P {
							want += float32(p*1000 + (me*n+i)%997)
						}
					case "AllGather":
						want = float32(i/n*1000 + i%n%997)
					default:
						for p := range P {
							want += float32(p*1000 + i%997)
						}
					}
					if dst[i] != want {
						t.Fatalf("element %d: %v, want %v", i, dst[i], want)
					}
				}
				agree(t, w, !t.Failed(), kind)
			})
		}
	}
}

// TestShmZeroCopyGroup: a group over the World, strategy Native, host
// slices in memory of AllocShared (made on the World the group
// duplicates): 1 rank per process, and 2 in deterministic mode (each
// rank's input goes to the window as it is); AllReduce (out of place and
// in place), ReduceScatter and AllGather of 64 Ki float32 per rank (the
// all-gather's floor lowered to 64 KiB) read the inputs where they lie (one call each through shmZeroCopy), and give
// the exact sums and blocks; the all-reduces, whose results lie there too,
// write them straight into every process's (zcDirect, its floor lowered to
// 64 KiB), and so do the reduce-scatters of one rank per process from 4
// processes (every process's workers claim pieces of every segment); an AllGather in place too, and with 2 ranks per process the
// all-gathers write both ranks' results in one pass (shmGatherMore).
func TestShmZeroCopyGroup(t *testing.T) {
	w, _ := begin(t, 30*time.Second)
	needShmGroup(t, w)
	setShm(t, true, 4<<20)
	defer func(g, d int) { zcGatherMin, zcDirectMin = g, d }(zcGatherMin, zcDirectMin)
	zcGatherMin = zcMin    // the all-gather of one chunk too
	zcDirectMin = 64 << 10 // the all-reduces of 64 Ki float32, the reduce-scatters of 4 processes x 64 Ki
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, lay := range []struct {
		local int
		det   bool
	}{{1, false}, {2, true}, {2, false}} {
		local := lay.local
		t.Run(fmt.Sprintf("L=%d/det=%v", local, lay.det), func(t *testing.T) {
			g := openNativeGroup(t, w, "host", local, lay.det)
			N := g.Size()
			const m = 64 << 10
			mem, err := AllocShared[float32](ctx, w, 3*local*N*m)
			if err != nil {
				t.Fatalf("AllocShared: %v", err)
			}
			for _, kind := range []string{"AllReduce", "AllReduce in place", "ReduceScatter", "ReduceScatter in place", "AllGather", "AllGather in place"} {
				zc0, direct0, more0 := shmZeroCopy.Load(), shmDirect.Load(), shmGatherMore.Load()
				errs := onLocal(g, func(c *collective.Comm) error {
					r, l := c.Rank(), c.Rank()%local
					send := mem[3*l*N*m : (3*l+1)*N*m]
					recv := mem[(3*l+1)*N*m : (3*l+3)*N*m] // Go memory would do as well
					for i := range send {
						send[i] = float32(r*7 + i%1000)
					}
					var err error
					var got, want []float32
					switch kind {
					case "AllReduce":
						err = collective.AllReduceInto(ctx, c, send[:m], recv[:m], collective.Sum)
						got = recv[:m]
					case "AllReduce in place":
						err = collective.AllReduce(ctx, c, send[:m], collective.Sum)
						got = send[:m]
					case "ReduceScatter":
						err = collective.ReduceScatter(ctx, c, send, recv[:m], collective.Sum)
						got = recv[:m]
					case "ReduceScatter in place": // the result is the rank's block of its input
						err = collective.ReduceScatter(ctx, c, send, send[r*m:(r+1)*m], collective.Sum)
						got = send[r*m : (r+1)*m]
					case "AllGather":
						err = collective.AllGather(ctx, c, send[:m], recv[:N*m])
						got = recv[:N*m]
					default: // in place: this rank's block of recv is its input
						copy(recv[r*m:(r+1)*m], send[:m])
						clear(recv[:r*m])
						clear(recv[(r+1)*m : N*m])
						err = collective.AllGather(ctx, c, recv[r*m:(r+1)*m], recv[:N*m])
						got = recv[:N*m]
					}
					if err != nil {
						return err
					}
					for i := range got {
						var v float32
						switch kind {
						case "AllGather", "AllGather in place":
							v = float32(i/m*7 + i%m%1000)
						case "ReduceScatter", "ReduceScatter in place":
							for q := range N {
								v += float32(q*7 + (r*m+i)%1000)
							}
						default:
							for q := range N {
								v += float32(q*7 + i%1000)
							}
						}
						want = append(want, v)
					}
					for i := range got {
						if got[i] != want[i] {
							return fmt.Errorf("rank %d: element %d is %v, want %v", r, i, got[i], want[i])
						}
					}
					return nil
				})
				for _, err := range errs {
					if err != nil {
						t.Errorf("%s: %v", kind, err)
					}
				}
				if got := shmZeroCopy.Load() - zc0; got != 1 {
					t.Errorf("%s: %d calls read their inputs where they lie, want 1", kind, got)
				}
				// The reduce-scatter of one rank per process gives its result
				// as into: its pieces claimed by every process too.
				wantDirect := strings.HasPrefix(kind, "AllReduce") || strings.HasPrefix(kind, "ReduceScatter") && local == 1 && w.Size() >= 4
				if got, want := shmDirect.Load()-direct0, int64(b2i(wantDirect)); got != want {
					t.Errorf("%s: %d calls wrote the results straight, want %d", kind, got, want)
				}
				if got, want := shmGatherMore.Load()-more0, int64(b2i(strings.HasPrefix(kind, "AllGather") && local > 1)); got != want {
					t.Errorf("%s: %d all-gathers wrote the other ranks' results, want %d", kind, got, want)
				}
			}
			agree(t, w, !t.Failed(), "zero-copy group")
		})
	}
}

// TestShmZeroCopyAllocs: steady-state AllReduce, ReduceScatter and
// AllGather of a group (one rank per process) whose inputs are in
// AllocShared memory read them where they lie (one call each through
// shmZeroCopy per call) and allocate nothing.
func TestShmZeroCopyAllocs(t *testing.T) {
	w, _ := begin(t, 40*time.Second)
	needShmGroup(t, w)
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	setShm(t, true, 4<<20)
	defer func(g int) { zcGatherMin = g }(zcGatherMin)
	zcGatherMin = zcMin
	ctx := context.Background()
	g := openNativeGroup(t, w, "host", 1, false)
	N := g.Size()
	const m = 64 << 10
	big := zcDirectMin / 4 // float32: results written straight from here (zcDirect)
	mem, err := AllocShared[float32](ctx, w, 2*N*max(m, big))
	if err != nil {
		t.Fatalf("AllocShared: %v", err)
	}
	send, recv := mem[:N*max(m, big)], mem[N*max(m, big):]
	c := g.Comm(0)
	for _, name := range []string{"AllReduce", "AllReduceDirect", "ReduceScatter", "AllGather"} {
		call := func() error {
			switch name {
			case "AllReduce":
				return collective.AllReduceInto(ctx, c, send[:m], recv[:m], collective.Sum)
			case "AllReduceDirect":
				return collective.AllReduceInto(ctx, c, send[:big], recv[:big], collective.Sum)
			case "ReduceScatter":
				return collective.ReduceScatter(ctx, c, send[:N*m], recv[:m], collective.Sum)
			}
			return collective.AllGather(ctx, c, send[:m], recv[:N*m])
		}
		zc0, direct0 := shmZeroCopy.Load(), shmDirect.Load()
		allocs := testing.AllocsPerRun(20, func() {
			if err := call(); err != nil {
				t.Error(err)
			}
		})
		if got := shmZeroCopy.Load() - zc0; got != 21 {
			t.Errorf("%s: %d calls read their inputs where they lie, want 21", name, got)
		}
		if got, want := shmDirect.Load()-direct0, int64(21*b2i(name == "AllReduceDirect")); got != want {
			t.Errorf("%s: %d calls wrote the results straight, want %d", name, got, want)
		}
		if allocs > 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, allocs)
		}
	}
	agree(t, w, !t.Failed(), "allocations of calls that read their inputs where they lie")
}

// TestShmProbe: where MPI's own all-reduce and all-gather beat the
// window's copies (mpiBetter; forced here at every size of job), a call
// whose inputs may be read where they lie probes: it copies nothing in,
// and goes on through the window only if every process offered its
// inputs (AllocShared memory), the exact sums and blocks; otherwise
// (inputs on the Go heap on every process, or on one) every process
// leaves for MPI after the one fence of the offers, its result untouched,
// and the window stays usable. Below the floor (the agreed zcMin) it
// leaves at once, with no fence. The same through groups of 1 and 2 ranks
// per process (deterministic too): exact results, read where they lie
// only from shared memory.
func TestShmProbe(t *testing.T) {
	w, _ := begin(t, 60*time.Second)
	needShmGroup(t, w)
	setShm(t, true, 1<<10)
	defer func(m, g int) { zcMin, zcGatherMin = m, g }(zcMin, zcGatherMin)
	zcMin, zcGatherMin = 512, 512
	shmProbeAll = true
	t.Cleanup(func() { shmProbeAll = false })
	d := shmDup(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	P, me := d.Size(), d.Rank()
	const n = 3000 // float32 per input: 12000 bytes, several chunks of the window's 1 KiB slots
	mem, err := AllocShared[float32](ctx, d, 2*n+P*n)
	if err != nil {
		t.Fatalf("AllocShared: %v", err)
	}
	heap := make([]float32, n)
	b := func(f []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f)) }
	val := func(p, i int) float32 { return float32((p+1)*1000 + i%997) }
	for i := range n {
		mem[i], heap[i] = val(me, i), val(me, i)
	}
	sharedSrc := mem[:n]
	for _, kind := range []string{"AllReduce", "AllGather"} {
		for _, where := range []string{"shared", "heap", "one heap", "small"} {
			t.Run(kind+"/"+where, func(t *testing.T) {
				src, cnt := sharedSrc, n
				switch {
				case where == "heap", where == "one heap" && me == P-1:
					src = heap
				case where == "small":
					cnt = 100 // 400 bytes, under the floor
				}
				dst := mem[n : n+P*n]
				const sentinel = -7
				for i := range dst {
					dst[i] = sentinel
				}
				f0, zc0 := shmFences.Load(), shmZeroCopy.Load()
				var ran bool
				var err error
				if kind == "AllReduce" {
					ran, err = d.shmAllreduce(ctx, [][]byte{b(src[:cnt])}, nil, b(dst[:cnt]), cnt, backend.F32, backend.Sum, 1)
				} else {
					_, _, ran, err = d.shmAllgather(ctx, [][]byte{b(src[:cnt])}, b(dst[:P*cnt]), 4*cnt, false)
				}
				fences, zc := shmFences.Load()-f0, shmZeroCopy.Load()-zc0
				if err != nil {
					t.Fatalf("%v", err)
				}
				want := where == "shared"
				if ran != want || zc != int64(b2i(want)) {
					t.Fatalf("ran %v, read where they lie %d times; want %v", ran, zc, want)
				}
				if where == "small" && fences != 0 || where != "small" && !want && fences != 1 {
					t.Errorf("%d fences, want %d", fences, b2i(where != "small"))
				}
				for i, v := range dst {
					exp := float32(sentinel)
					switch {
					case !want:
					case kind == "AllReduce" && i < cnt:
						exp = 0
						for p := range P {
							exp += val(p, i)
						}
					case kind == "AllGather":
						exp = val(i/cnt, i%cnt)
					}
					if v != exp {
						t.Fatalf("dst[%d] = %v, want %v", i, v, exp)
					}
				}
			})
		}
	}
	// Through groups (the leader's native collectives; with 2 ranks per
	// process the offers are the ranks' inputs, in deterministic mode too):
	// inputs in AllocShared memory go through the window, read where they
	// lie; on the Go heap the probe leaves for MPI. Exact either way.
	const m = 4096
	for _, lay := range []struct {
		local int
		det   bool
	}{{1, false}, {2, true}, {2, false}} {
		g := openNativeGroup(t, w, "host", lay.local, lay.det)
		N := g.Size()
		gmem, err := AllocShared[float32](ctx, w, lay.local*(m+N*m))
		if err != nil {
			t.Fatalf("AllocShared: %v", err)
		}
		for _, where := range []string{"shared", "heap"} {
			for _, kind := range []string{"AllReduce", "AllGather"} {
				zc0 := shmZeroCopy.Load()
				errs := onLocal(g, func(c *collective.Comm) error {
					r, l := c.Rank(), c.Rank()%lay.local
					send, recv := gmem[l*(m+N*m):][:m], gmem[l*(m+N*m)+m:][:N*m]
					if where == "heap" {
						send, recv = make([]float32, m), make([]float32, N*m)
					}
					for i := range send {
						send[i] = val(r, i)
					}
					if kind == "AllReduce" {
						if err := collective.AllReduceInto(ctx, c, send, recv[:m], collective.Sum); err != nil {
							return err
						}
						for i, v := range recv[:m] {
							var exp float32
							for q := range N {
								exp += val(q, i)
							}
							if v != exp {
								return fmt.Errorf("rank %d: recv[%d] = %v, want %v", r, i, v, exp)
							}
						}
						return nil
					}
					if err := collective.AllGather(ctx, c, send, recv); err != nil {
						return err
					}
					for i, v := range recv {
						if exp := val(i/m, i%m); v != exp {
							return fmt.Errorf("rank %d: recv[%d] = %v, want %v", r, i, v, exp)
						}
					}
					return nil
				})
				for _, err := range errs {
					if err != nil {
						t.Errorf("group of %d ranks per process (deterministic %v), %s, inputs %s: %v", lay.local, lay.det, kind, where, err)
					}
				}
				if zc := shmZeroCopy.Load() - zc0; (zc > 0) != (where == "shared") {
					t.Errorf("group of %d ranks per process (deterministic %v), %s, inputs %s: %d calls read their inputs where they lie",
						lay.local, lay.det, kind, where, zc)
				}
			}
		}
	}

	// The window still agrees: a reduce-scatter (never probed) through it.
	shmProbeAll = false
	seg := n / P
	out := make([]float32, seg)
	if ran, err := d.shmReduceScatter(ctx, [][]byte{b(heap[:P*seg])}, nil, b(out), seg, backend.F32, backend.Sum, 1); !ran || err != nil {
		t.Fatalf("reduce-scatter after the probes: ran %v, %v", ran, err)
	}
	for i, v := range out {
		var exp float32
		for p := range P {
			exp += val(p, me*seg+i)
		}
		if v != exp {
			t.Fatalf("reduce-scatter: out[%d] = %v, want %v", i, v, exp)
		}
	}
	agree(t, w, !t.Failed(), "the probes of the window")
}
