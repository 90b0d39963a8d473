//go:build mpi && cgo

package mpi

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// The shared-memory ReduceScatter and AllGather (shm.go), and what a
// failed call through the window leaves in the caller's memory.

// TestShmReduceScatterAllgather runs the window's reduce-scatter and
// all-gather on a World of 256-byte slots. The reduce-scatter: every
// element type and op hostmath reduces (Sum also as a mean), one and two
// inputs per process, segments of 0, 1, 7 elements and one chunk -1, +0,
// +1 and three chunks +2 (C elements per segment per input per chunk: the
// slot over every process's inputs), each process's segment checked
// bitwise against the one-process deterministic result and against the
// exact or float64 reference (checkShmResult). The all-gather: one and two
// inputs per process, in place (each input in its block of the result) and
// out of place, at the same sizes in bytes (C: the window's half over all
// inputs, a multiple of 8), checked byte for byte. It counts the calls
// (one per call with data) and the fences (one per chunk).
func TestShmReduceScatterAllgather(t *testing.T) {
	w, _ := begin(t, 20*time.Second)
	needShm(t, w)
	const slot = 256
	setShm(t, true, slot)
	d := shmDup(t, w)
	seed := commonSeed(t, w)
	P, me := w.Size(), d.Rank()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	calls0, fences0 := shmCalls.Load(), shmFences.Load()
	calls, fences := 0, 0
	types := []backend.DType{backend.F32, backend.F64, backend.I32, backend.U32, backend.I64, backend.U64, backend.I8,
		backend.U8, backend.I16, backend.U16, backend.Half, backend.BFloat16, backend.F8E4M3, backend.F8E5M2}
	for _, dt := range types {
		es := dt.Size()
		for op := backend.Op(0); op < backend.NumOps; op++ {
			if !op.Defined(dt) {
				continue
			}
			for _, L := range []int{1, 2} {
				N := P * L
				C := slot / (N * es)
				sizes := []int{0, 1, 7, C - 1, C, C + 1, 3*C + 2}
				if light() && dt != backend.F32 && dt != backend.I8 && dt != backend.Half {
					sizes = []int{7, C + 1}
				}
				for _, seg := range sizes {
					for _, mean := range []bool{false, true} {
						if mean && op != backend.Sum {
							continue
						}
						ins := make([][]byte, N)
						for g := range ins {
							ins[g] = shmInput(dt, op, seed, g, P*seg)
						}
						srcs := make([][]byte, L)
						for l := range srcs {
							srcs[l] = slices.Clone(ins[me*L+l])
						}
						dst := make([]byte, seg*es)
						scale := 1.0
						if mean {
							scale = 1 / float64(N)
						}
						ran, err := d.shmReduceScatter(ctx, srcs, nil, dst, seg, dt, op, scale)
						what := fmt.Sprintf("%v %v (mean %v) seg=%d L=%d", dt, op, mean, seg, L)
						if err != nil || !ran {
							t.Fatalf("%s: ran %v, %v", what, ran, err)
						}
						if seg > 0 {
							calls++
							fences += (seg + C - 1) / C
						}
						mine := make([][]byte, N)
						for g := range mine {
							mine[g] = ins[g][me*seg*es : (me+1)*seg*es]
						}
						if s := checkShmResult(dt, op, mean, mine, dst, seg); s != "" {
							t.Errorf("%s: %s", what, s)
						}
						for l := range srcs {
							if !slices.Equal(srcs[l], ins[me*L+l]) {
								t.Errorf("%s: input %d changed", what, l)
							}
						}
					}
				}
			}
		}
	}
	for _, L := range []int{1, 2} {
		N := P * L
		C := P * slot / N &^ 7
		for _, mb := range []int{0, 1, 7, C - 1, C, C + 1, 3*C + 2} {
			for _, inPlace := range []bool{false, true} {
				ins := make([][]byte, N)
				for g := range ins {
					ins[g] = pattern(g, mb, int(seed%1000))
				}
				dst := make([]byte, N*mb)
				for i := range dst {
					dst[i] = 0xa5
				}
				srcs := make([][]byte, L)
				for l := range srcs {
					srcs[l] = slices.Clone(ins[me*L+l])
					if inPlace {
						g := me*L + l
						srcs[l] = dst[g*mb : (g+1)*mb]
						copy(srcs[l], ins[g])
					}
				}
				_, _, ran, err := d.shmAllgather(ctx, srcs, dst, mb, false)
				what := fmt.Sprintf("all-gather mb=%d L=%d in place %v", mb, L, inPlace)
				if err != nil || !ran {
					t.Fatalf("%s: ran %v, %v", what, ran, err)
				}
				if mb > 0 {
					calls++
					fences += (mb + C - 1) / C
				}
				if want := slices.Concat(ins...); !slices.Equal(dst, want) {
					i := 0
					for dst[i] == want[i] {
						i++
					}
					t.Errorf("%s: byte %d (input %d) is %#x, want %#x", what, i, i/mb, dst[i], want[i])
				}
			}
		}
	}
	if got := shmCalls.Load() - calls0; got != int64(calls) {
		t.Errorf("%d calls through the window, want %d", got, calls)
	}
	if got := shmFences.Load() - fences0; got != int64(fences) {
		t.Errorf("%d fences, want %d (one per chunk)", got, fences)
	}
	agree(t, w, !t.Failed(), "shared-memory reduce-scatter and all-gather")
}

// TestShmGroupReduceScatterAllGather runs ReduceScatter, AllGather,
// Reduce, Broadcast and BroadcastInto of host groups of 1 and 2 local
// ranks per process through strategy Native with the window's slots at
// 256 bytes (checkReduceScatter, checkAllGather, checkRootedNative: out of
// place and in place, roots in every process, against the exact
// reference): int32 and float64 with several ops at 0, 1, 13 and 1001
// elements per rank (one chunk, then many); every call with data goes
// through the window (shmCalls), none through MPI_Ireduce_scatter_block,
// MPI_Ireduce or MPI_Ibcast.
func TestShmGroupReduceScatterAllGather(t *testing.T) {
	w, _ := begin(t, 20*time.Second)
	needShmGroup(t, w)
	setShm(t, true, 256)
	for _, local := range []int{1, 2} {
		t.Run(fmt.Sprintf("L=%d", local), func(t *testing.T) {
			g := openNativeGroup(t, w, "host", local, false)
			start, startShm := nativeStats[nativeReduceScatter].Load(), shmCalls.Load()
			startR, startB := nativeStats[nativeReduce].Load(), nativeStats[nativeBcast].Load()
			calls := 0
			i32, f64 := intType[int32]("int32"), exactType[float64]("float64")
			for _, m := range []int{0, 1, 13, 1001} {
				for _, op := range []collective.Op{collective.Sum, collective.Mean, collective.BXor, collective.Min} {
					calls += checkReduceScatter(t, w, g, i32, op, m)
				}
				for _, op := range []collective.Op{collective.Sum, collective.Prod} {
					calls += checkReduceScatter(t, w, g, f64, op, m)
				}
				checkAllGather(t, w, g, i32, m)
				checkAllGather(t, w, g, f64, m)
				if m > 0 {
					calls += 4
				}
				r, b := checkRootedNative(t, w, g, i32, collective.Sum, m)
				calls += r + b
				r, b = checkRootedNative(t, w, g, f64, collective.Prod, m)
				calls += r + b
			}
			if got := shmCalls.Load() - startShm; got != int64(calls) {
				t.Errorf("%d calls through the window, want %d (one per call with data)", got, calls)
			}
			if got := nativeStats[nativeReduceScatter].Load() - start; got != 0 {
				t.Errorf("%d MPI_Ireduce_scatter_block completed, want 0", got)
			}
			if r, b := nativeStats[nativeReduce].Load()-startR, nativeStats[nativeBcast].Load()-startB; r != 0 || b != 0 {
				t.Errorf("%d MPI_Ireduce and %d MPI_Ibcast completed, want 0", r, b)
			}
		})
	}
}

// TestShmGroupCollAllocs counts the Go allocations of steady-state
// ReduceScatter, AllGather, Reduce and Broadcast calls of a group through
// the window (one and two ranks per process, 256-byte slots so that each
// call takes several chunks; also an AllGather of one chunk, whose blocks
// stay in the window with two ranks; the root in the last process): none,
// and one call through the window per call.
func TestShmGroupCollAllocs(t *testing.T) {
	w, _ := begin(t, 40*time.Second)
	needShmGroup(t, w)
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	setShm(t, true, 256)
	ctx := context.Background()
	for _, local := range []int{1, 2} {
		g := openNativeGroup(t, w, "host", local, false)
		N := g.Size()
		const m = 300
		sends := make([][]float32, local)
		recvs := make([][]float32, local)
		for i := range sends {
			sends[i] = make([]float32, N*m)
			recvs[i] = make([]float32, N*m)
		}
		for _, name := range []string{"ReduceScatter", "AllGather", "AllGather of one chunk", "Reduce", "Broadcast"} {
			call := func(l int) error {
				c := g.Comm(l)
				switch name {
				case "ReduceScatter":
					return collective.ReduceScatter(ctx, c, sends[l], recvs[l][:m], collective.Sum)
				case "AllGather":
					return collective.AllGather(ctx, c, sends[l][:m], recvs[l])
				case "AllGather of one chunk": // with 2 ranks, the blocks stay in the window (keep)
					return collective.AllGather(ctx, c, sends[l][:5], recvs[l][:5*N])
				case "Reduce": // to the last rank
					return collective.Reduce(ctx, c, sends[l], recvs[l], collective.Sum, N-1)
				}
				return collective.Broadcast(ctx, c, recvs[l], N-1)
			}
			next, done := make(chan struct{}), make(chan error)
			for l := 1; l < local; l++ {
				go func() {
					for range next {
						done <- call(l)
					}
				}()
			}
			calls0 := shmCalls.Load()
			allocs := testing.AllocsPerRun(20, func() {
				for l := 1; l < local; l++ {
					next <- struct{}{}
				}
				err := call(0)
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
				t.Errorf("%s L=%d: %d calls through the window, want 21", name, local, got)
			}
			if allocs > 0 {
				t.Errorf("%s L=%d: %v allocations per call, want 0", name, local, allocs)
			}
		}
	}
	agree(t, w, !t.Failed(), "allocations through the window")
}

// TestShmUntouched: the last process stops mid-call through the window,
// after chunk k (shmChunkHook), in two ways: its call's context ends (its
// next fence is not posted), or it stops calling for 3 s, past the
// group's CommunicationTimeout of 1.5 s. Groups of 1 and 2 local ranks
// per process, strategy Native, 256-byte slots (every call takes many
// chunks); AllReduce out of place and in place, ReduceScatter, AllGather
// out of place and in place, Reduce to rank 0 out of place and in place,
// Broadcast from rank 0, int32. On every rank of every process the
// receive memory and the input (in place and out of place) are bitwise
// what they were before the call, unless the rank is its process's leader
// and its error is a *collective.DataError with Touched (the window writes
// each chunk's result once, after its fence). The errors: where the context ended, the
// last process's leader gets the context's error (or ErrGroupBroken where
// its other rank saw the end first) and the others' leaders
// a *collective.TimeoutError naming a rank of the last process or
// ErrGroupBroken (its failure broke the group); where it stopped, the
// other processes' leaders get a *TimeoutError naming it (or
// ErrGroupBroken, broken by a rank that timed out first); every other
// rank an error matching ErrTimeout, ErrGroupBroken or the context's.
// (The second way runs for every other collective, in the light jobs for
// AllReduce only: each case waits out the timeout.) Then every process posts the fences it lacks (the World's
// collectives complete in order), so the group closes cleanly.
func TestShmUntouched(t *testing.T) {
	w, _ := begin(t, 30*time.Second)
	needShm(t, w)
	if w.Size() < 2 {
		t.Skip("needs two processes")
	}
	var cases []shmFailCase
	for i, kind := range shmFailKinds {
		for _, local := range []int{1, 2} {
			cases = append(cases, shmFailCase{kind, local, (i + local) % 3, true, 301, 256})
		}
		// A process that stops calling costs the timeout (1.5 s) and its
		// 3 s sleep: the trimmed jobs wait it out once, the 3-process job
		// twice (every even kind under test-full).
		if i%2 == 0 && (i == 0 || !light() && (i == 4 || os.Getenv("GOCOLL_TEST_FULL") != "")) {
			cases = append(cases, shmFailCase{kind, 1 + i/2%2, i % 3, false, 301, 256})
		}
	}
	runShmFail(t, w, cases)
}

// TestShmFailRandom is TestShmUntouched's check on cases drawn from a seed
// the processes share (printed; GOCOLL_TEST_SEED reruns it): the kind, 1
// or 2 ranks per process, the slot (64 B to 1 KiB: chunks of 4 to 64
// int32 elements per input), the count (within one element of a multiple
// of the kind's chunk, one to four chunks, or 1) and the chunk after which
// the last process's context ends (any of the call's).
func TestShmFailRandom(t *testing.T) {
	w, _ := begin(t, 30*time.Second)
	needShm(t, w)
	P := w.Size()
	if P < 2 {
		t.Skip("needs two processes")
	}
	rng := rand.New(rand.NewPCG(commonSeed(t, w), 7))
	n := 8
	if !light() {
		n = 24
	}
	var cases []shmFailCase
	for range n {
		tc := shmFailCase{kind: shmFailKinds[rng.IntN(len(shmFailKinds))], local: 1 + rng.IntN(2), ctxEnds: true,
			slot: 64 << rng.IntN(5)}
		per := shmChunkElems(tc.kind, P, tc.local, int(tc.slot)) // m per chunk
		tc.m = max(1, int(float64(1+rng.IntN(4))*per)+rng.IntN(3)-1)
		for shmChunks(tc.kind, P, tc.local, int(tc.slot), tc.m) < 2 {
			tc.m *= 2 // a chunk after the one where the context ends
		}
		tc.k = rng.IntN(shmChunks(tc.kind, P, tc.local, int(tc.slot), tc.m) - 1)
		cases = append(cases, tc)
	}
	runShmFail(t, w, cases)
}

// shmChunks is the chunks of a call of kind through the window (shm.go)
// with m int32 elements a rank, P processes of local ranks (not
// deterministic: a reduction's leader hands the window its process's
// combined input, an all-gather's every rank's block) and slot-byte slots.
func shmChunks(kind string, P, local, slot, m int) int {
	N := P * local
	ceil := func(a, b int) int { return (a + b - 1) / max(b, 1) }
	switch kind {
	case "ReduceScatter":
		return ceil(local*m, slot/(P*4))
	case "AllGather", "AllGather in place":
		return ceil(4*m, slot/local&^7)
	case "Broadcast":
		return ceil(4*N*m, P*slot)
	}
	return ceil(N*m, slot/4)
}

// shmChunkElems is about m's elements a rank per chunk of shmChunks.
func shmChunkElems(kind string, P, local, slot int) float64 {
	switch kind {
	case "ReduceScatter":
		return float64(slot/(P*4)) / float64(local)
	case "AllGather", "AllGather in place":
		return float64(slot/local&^7) / 4
	case "Broadcast":
		return float64(P*slot) / float64(4*P*local)
	}
	return float64(slot/4) / float64(P*local)
}

// shmFailKinds are the calls TestShmUntouched and TestShmFailRandom stop.
var shmFailKinds = []string{"AllReduce", "AllReduce in place", "ReduceScatter", "AllGather", "AllGather in place", "Reduce",
	"Reduce in place", "Broadcast"}

// shmFailCase is one call the last process stops after chunk k: its context
// ends (ctxEnds) or it stops calling; m int32 elements a rank (the
// all-gather's block and the reduce-scatter's, the others' whole buffer is
// N·m), through a window of slot-byte slots.
type shmFailCase struct {
	kind     string
	local, k int
	ctxEnds  bool
	m        int
	slot     int64
}

// runShmFail runs cases (see TestShmUntouched) on w's processes.
func runShmFail(t *testing.T, w *World, cases []shmFailCase) {
	P := w.Size()
	last := P - 1
	var hooked atomic.Pointer[World]
	var stopAt atomic.Int64
	var stop atomic.Pointer[context.CancelFunc] // nil: the last process sleeps instead
	var armed atomic.Bool
	shmChunkHook = func(ctx context.Context, hw *World, k int) {
		hooked.Store(hw)
		if hw.Rank() != last || int64(k) != stopAt.Load() || !armed.Load() {
			return
		}
		if f := stop.Load(); f != nil {
			(*f)()
			<-ctx.Done() // the call's wait context sees the end (it watches the caller's asynchronously)
			return
		}
		time.Sleep(3 * time.Second)
	}
	t.Cleanup(func() { shmChunkHook = nil })
	for _, tc := range cases {
		kind, local, k, m := tc.kind, tc.local, tc.k, tc.m
		{
			t.Run(fmt.Sprintf("%s/L=%d/m=%d/slot=%d/k=%d/ctx=%v", kind, local, m, tc.slot, k, tc.ctxEnds), func(t *testing.T) {
				setShm(t, true, tc.slot)
				cfg := collective.DefaultConfig()
				cfg.CommunicationTimeout = 1500 * time.Millisecond // (NewGroup's too: long enough under -race)
				octx, ocancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer ocancel()
				g, err := collective.NewGroup(octx, collective.Options{Ranks: local, Backend: "host", Transport: w, Config: cfg})
				agree(t, w, err == nil, fmt.Sprintf("NewGroup: %v", err))
				N := g.Size()
				ctx, cancel := context.WithCancel(octx)
				defer cancel()
				stopAt.Store(int64(k))
				stop.Store(nil)
				if tc.ctxEnds {
					stop.Store(&cancel)
				}
				hooked.Store(nil)
				armed.Store(true)
				errs := onLocal(g, func(c *collective.Comm) error {
					r := c.Rank()
					in := func(i int) int32 { return int32(r*100003 + i*7 + 1) }
					send := filled(N*m, in)
					recv := filled(N*m, func(i int) int32 { return int32(markBits) ^ int32(i) })
					send0, recv0 := slices.Clone(send), slices.Clone(recv)
					var err error
					switch kind {
					case "AllReduce":
						err = collective.AllReduceInto(ctx, c, send, recv, collective.Sum)
					case "AllReduce in place":
						err = collective.AllReduce(ctx, c, send, collective.Sum)
					case "ReduceScatter":
						err = collective.ReduceScatter(ctx, c, send, recv[:m], collective.Sum)
					case "AllGather":
						err = collective.AllGather(ctx, c, send[:m], recv)
					case "Reduce": // to rank 0 (process 0)
						err = collective.Reduce(ctx, c, send, recv, collective.Sum, 0)
					case "Reduce in place":
						err = collective.Reduce(ctx, c, send, send, collective.Sum, 0)
					case "Broadcast":
						err = collective.Broadcast(ctx, c, send, 0)
					default:
						copy(recv[r*m:(r+1)*m], send[:m])
						recv0 = slices.Clone(recv)
						err = collective.AllGather(ctx, c, recv[r*m:(r+1)*m], recv)
					}
					// A leader's memory may hold part of the result (the
					// window writes each chunk's once): its error must say
					// so. The other ranks copy only from a leader that
					// succeeded.
					var bad []string
					var de *collective.DataError
					said := r%local == 0 && errors.As(err, &de) && de.Touched
					if !said && !slices.Equal(send, send0) {
						bad = append(bad, "its input changed")
					}
					if !said && !slices.Equal(recv, recv0) {
						bad = append(bad, "its receive memory changed")
					}
					var te *collective.TimeoutError
					switch {
					case err == nil:
						bad = append(bad, "it returned nil")
					case r%local == 0 && w.Rank() == last && tc.ctxEnds:
						// (ErrGroupBroken: its other rank saw the context end first.)
						if !errors.Is(err, context.Canceled) && !errors.Is(err, collective.ErrGroupBroken) {
							bad = append(bad, fmt.Sprintf("%v matches neither context.Canceled nor ErrGroupBroken", err))
						}
					case r%local == 0 && w.Rank() != last:
						named := errors.Is(err, collective.ErrTimeout) && errors.As(err, &te) && slices.Contains(te.Missing, last*local)
						if !named && !errors.Is(err, collective.ErrGroupBroken) {
							bad = append(bad, fmt.Sprintf("%v: want a *TimeoutError naming rank %d or ErrGroupBroken", err, last*local))
						}
					case !errors.Is(err, collective.ErrTimeout) && !errors.Is(err, collective.ErrGroupBroken) && !errors.Is(err, context.Canceled):
						bad = append(bad, fmt.Sprintf("%v matches neither ErrTimeout, ErrGroupBroken nor the context's error", err))
					}
					if len(bad) > 0 {
						return fmt.Errorf("%v", bad)
					}
					t.Logf("rank %d: %v", r, err)
					return nil
				})
				armed.Store(false)
				// The fences the processes posted differ by the one the last
				// process never posted: post the missing ones.
				hw := hooked.Load()
				seqs := make([]uint64, P)
				mine := []uint64{0}
				if hw != nil {
					mine[0] = hw.seq
				}
				if err := w.Allgather(octx, bytesOf(mine), bytesOf(seqs)); err != nil {
					t.Fatal(err)
				}
				for hw != nil && hw.seq < slices.Max(seqs) {
					if err := hw.barrier(octx); err != nil {
						t.Fatalf("posting the missing fences: %v", err)
					}
				}
				report(t, w, g, errs, kind)
				if err := g.Close(); err != nil {
					t.Logf("Close of the broken group: %v", err)
				}
			})
		}
	}
}

// TestShmReduceBcast runs the window's reduce (to process 0 and to the
// last process) and broadcast (from the same roots) on a World of 256-byte
// slots. The reduce: float32, int32, float16 and int8 with sum (also as a
// mean) and max, one and two inputs per process, 0, 1 and 7 elements and
// one chunk -1, +0, +1 and three chunks +2 (C: the all-reduce's), the
// root's result checked bitwise against the one-process deterministic
// result and the exact or float64 reference (checkShmResult), in place and
// out of place; the other processes pass no destination. The broadcast:
// 0, 1 and 7 bytes and one chunk (a half: P slots) -1, +0, +1 and three
// chunks +2, every process's buffer byte for byte the root's. It counts
// the calls and the fences (two per chunk of a reduce, one for 2 processes, one of a
// broadcast).
func TestShmReduceBcast(t *testing.T) {
	w, _ := begin(t, 20*time.Second)
	needShm(t, w)
	const slot = 256
	setShm(t, true, slot)
	d := shmDup(t, w)
	seed := commonSeed(t, w)
	P, me := w.Size(), d.Rank()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	calls0, fences0 := shmCalls.Load(), shmFences.Load()
	calls, fences := 0, 0
	for _, root := range []int{0, P - 1} {
		for _, dt := range []backend.DType{backend.F32, backend.I32, backend.Half, backend.I8} {
			es := dt.Size()
			for _, op := range []backend.Op{backend.Sum, backend.Max} {
				for _, L := range []int{1, 2} {
					C := slot / (L * es)
					for _, n := range []int{0, 1, 7, C - 1, C, C + 1, 3*C + 2} {
						for _, mean := range []bool{false, true} {
							if mean && op != backend.Sum {
								continue
							}
							inPlace := L == 1 && n%2 == 1
							ins := make([][]byte, P*L)
							for g := range ins {
								ins[g] = shmInput(dt, op, seed, g, n)
							}
							srcs := make([][]byte, L)
							for l := range srcs {
								srcs[l] = slices.Clone(ins[me*L+l])
							}
							var dst []byte
							if me == root {
								dst = make([]byte, n*es)
								if inPlace {
									dst = srcs[0]
								}
							}
							scale := 1.0
							if mean {
								scale = 1 / float64(P*L)
							}
							ran, err := d.shmReduce(ctx, srcs, nil, dst, n, dt, op, scale, root)
							what := fmt.Sprintf("reduce to %d %v %v (mean %v) n=%d L=%d in place %v", root, dt, op, mean, n, L, inPlace)
							if err != nil || !ran {
								t.Fatalf("%s: ran %v, %v", what, ran, err)
							}
							if n > 0 {
								calls++
								fences += shmReduceFences(P) * ((n + C - 1) / C)
							}
							if me == root {
								if s := checkShmResult(dt, op, mean, ins, dst, n); s != "" {
									t.Errorf("%s: %s", what, s)
								}
							}
						}
					}
				}
			}
		}
		C := P * slot
		for _, nb := range []int{0, 1, 7, C - 1, C, C + 1, 3*C + 2} {
			want := pattern(root, nb, int(seed%1000))
			buf := pattern(me+P, nb, 1)
			if me == root {
				buf = slices.Clone(want)
			}
			ran, err := d.shmBcast(ctx, buf, root)
			what := fmt.Sprintf("broadcast from %d of %d bytes", root, nb)
			if err != nil || !ran {
				t.Fatalf("%s: ran %v, %v", what, ran, err)
			}
			if nb > 0 {
				calls++
				fences += (nb + C - 1) / C
			}
			if !slices.Equal(buf, want) {
				t.Errorf("%s: not the root's bytes", what)
			}
		}
	}
	if got := shmCalls.Load() - calls0; got != int64(calls) {
		t.Errorf("%d calls through the window, want %d", got, calls)
	}
	if got := shmFences.Load() - fences0; got != int64(fences) {
		t.Errorf("%d fences, want %d", got, fences)
	}
	agree(t, w, !t.Failed(), "shared-memory reduce and broadcast")
}
