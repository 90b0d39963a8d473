//go:build mpi && cgo

package mpi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// collective's strategy Native over the World: AllReduce of a group that
// spans the processes runs its step between them through the World's
// native collectives (MPI_Iallreduce; in deterministic mode
// MPI_Ialltoall and MPI_Iallgather of raw blocks). Each test counts the
// native collectives the process completed, so it knows which path ran.

// exactType is the etype of float32 or float64 over exactIn (small
// integers, signed powers of two for Prod): every order of the reduction
// gives the float64 reference exactly.
func exactType[T float32 | float64](name string) etype[T] {
	return etype[T]{
		name: name,
		in:   func(op collective.Op, r, i int) T { return T(exactIn(op, r, i)) },
		ref: func(op collective.Op, xs []T) T {
			acc := float64(xs[0])
			for _, x := range xs[1:] {
				acc = step64(op, acc, float64(x))
			}
			if op == collective.Mean {
				acc /= float64(len(xs))
			}
			return T(acc)
		},
		near: func(_ collective.Op, got, want T) bool { return got == want },
		mark: T(-12345),
	}
}

// openNativeGroup opens a group of local ranks on backend bk over w,
// deterministic or not, closed when the test ends.
func openNativeGroup(t *testing.T, w *World, bk string, local int, det bool) *collective.Group {
	t.Helper()
	cfg := collective.DefaultConfig()
	cfg.CommunicationTimeout = 30 * time.Second
	cfg.Deterministic = det
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: local, Backend: bk, Transport: w, Config: cfg})
	if err != nil {
		t.Errorf("NewGroup(%s, %d local ranks): %v", bk, local, err)
	}
	agree(t, w, err == nil, "NewGroup")
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return g
}

// nativeAllReduce runs AllReduce of n elements of e with op on every local
// rank of g, out of place then in place, and checks every element against
// e's reference over the global ranks' inputs. It returns the calls made
// per process with data (the leader's native collectives).
func nativeAllReduce[T collective.Elem](t *testing.T, w *World, g *collective.Group, e etype[T], op collective.Op, n int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	N := g.Size()
	want := func(i int) T { return e.ref(op, ins(e, op, N, i)) }
	errs := onLocal(g, func(c *collective.Comm) error {
		r := c.Rank()
		send := filled(n, func(i int) T { return e.in(op, r, i) })
		recv := filled(n, func(int) T { return e.mark })
		if err := collective.AllReduceInto(ctx, c, send, recv, op); err != nil {
			return fmt.Errorf("AllReduceInto: %w", err)
		}
		if s := firstWrong(e, op, recv, want); s != "" {
			return fmt.Errorf("AllReduceInto: %s", s)
		}
		if s := firstWrong(e, op, send, func(i int) T { return e.in(op, r, i) }); s != "" {
			return fmt.Errorf("AllReduceInto wrote its send: %s", s)
		}
		if err := collective.AllReduce(ctx, c, send, op); err != nil {
			return fmt.Errorf("AllReduce in place: %w", err)
		}
		if s := firstWrong(e, op, send, want); s != "" {
			return fmt.Errorf("AllReduce in place: %s", s)
		}
		return nil
	})
	ok := true
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s %v, %d elements: rank %d: %v", e.name, op, n, g.Comm(i).Rank(), err)
			ok = false
		}
	}
	agree(t, w, ok, fmt.Sprintf("%s %v %d", e.name, op, n))
	if n == 0 {
		return 0
	}
	return 2
}

// TestGroupNative runs AllReduce through strategy Native on host groups of
// 1 and 2 local ranks: every 32- and 64-bit type with several ops (the
// bitwise and logical ones on the integers), PreMulSum, at 0, 1 and 13
// elements and 1M+3 (4 MiB) of int32 and float32 sum, each against the
// exact reference; the process's MPI_Iallreduce count must grow by one per
// call with data. A pair MPI does not reduce with the library's semantics
// (float32 max, float16 sum, bfloat16 and fp8 sums, int8 max) runs Native
// too, as raw blocks: one MPI_Ialltoall per call with data and no
// MPI_Iallreduce, reduced here in rank order.
func TestGroupNative(t *testing.T) {
	w := needWorld(t)
	setShm(t, false, defaultShmSlot) // MPI_Iallreduce, not the shared-memory window (TestShmAllreduce)
	for _, local := range []int{1, 2} {
		t.Run(fmt.Sprintf("L=%d", local), func(t *testing.T) {
			_, _ = begin(t, 20*time.Second)
			g := openNativeGroup(t, w, "host", local, false)
			start := nativeStats[nativeAllreduce].Load()
			calls := 0
			sizes := []int{0, 1, 13}
			i32, f32 := intType[int32]("int32"), exactType[float32]("float32")
			for _, op := range []collective.Op{collective.Sum, collective.Mean, collective.Prod, collective.Max, collective.Min,
				collective.BAnd, collective.BXor, collective.LOr} {
				for _, n := range sizes {
					calls += nativeAllReduce(t, w, g, i32, op, n)
				}
			}
			for _, op := range []collective.Op{collective.Sum, collective.Mean, collective.LAnd} {
				calls += nativeAllReduce(t, w, g, intType[uint64]("uint64"), op, 13)
			}
			calls += nativeAllReduce(t, w, g, intType[uint32]("uint32"), collective.Min, 13)
			calls += nativeAllReduce(t, w, g, intType[int64]("int64"), collective.BOr, 13)
			for _, op := range []collective.Op{collective.Sum, collective.Mean, collective.Prod} {
				for _, n := range sizes {
					calls += nativeAllReduce(t, w, g, f32, op, n)
					calls += nativeAllReduce(t, w, g, exactType[float64]("float64"), op, n)
				}
			}
			calls += nativeAllReduce(t, w, g, i32, collective.Sum, 1<<20+3)
			calls += nativeAllReduce(t, w, g, f32, collective.Sum, 1<<20+3)
			if got := nativeStats[nativeAllreduce].Load() - start; got != int64(calls) {
				t.Errorf("%d MPI_Iallreduce completed, want %d (one per call with data)", got, calls)
			}
			// Pairs MPI does not reduce: raw blocks, no MPI_Iallreduce.
			start = nativeStats[nativeAllreduce].Load()
			startA2A := nativeStats[nativeAlltoall].Load()
			raw := nativeAllReduce(t, w, g, f32, collective.Max, 13)
			raw += nativeAllReduce(t, w, g, exactType[float64]("float64"), collective.Min, 13)
			raw += nativeAllReduce(t, w, g, floatType("float16", f16), collective.Sum, 13)
			raw += nativeAllReduce(t, w, g, floatType("bfloat16", bf16), collective.Mean, 13)
			raw += nativeAllReduce(t, w, g, floatType("fp8e4m3", e4m3), collective.Sum, 13)
			raw += nativeAllReduce(t, w, g, intType[int8]("int8"), collective.Max, 13)
			raw += nativeAllReduce(t, w, g, intType[uint16]("uint16"), collective.Sum, 1<<16+1)
			if got := nativeStats[nativeAllreduce].Load() - start; got != 0 {
				t.Errorf("the pairs MPI does not reduce ran %d MPI_Iallreduce, want none", got)
			}
			if got := nativeStats[nativeAlltoall].Load() - startA2A; got != int64(raw) {
				t.Errorf("the pairs MPI does not reduce ran %d MPI_Ialltoall, want %d (one per call with data)", got, raw)
			}
			nativePreMulSum(t, w, g)
		})
	}
}

// nativePreMulSum runs AllReduce of float64 with PreMulSum (rank r's
// scalar r+1: each rank's input multiplied before the native sum).
func nativePreMulSum(t *testing.T, w *World, g *collective.Group) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 13
	N := g.Size()
	want := func(i int) float64 {
		var s float64
		for r := range N {
			s += float64(r+1) * exactIn(collective.Sum, r, i)
		}
		return s
	}
	start := nativeStats[nativeAllreduce].Load()
	errs := onLocal(g, func(c *collective.Comm) error {
		r := c.Rank()
		op, err := c.PreMulSum(float64(r + 1))
		if err != nil {
			return err
		}
		defer c.DestroyOp(op)
		x := filled(n, func(i int) float64 { return exactIn(collective.Sum, r, i) })
		if err := collective.AllReduce(ctx, c, x, op); err != nil {
			return err
		}
		for i, v := range x {
			if v != want(i) {
				return fmt.Errorf("PreMulSum: element %d = %v, want %v", i, v, want(i))
			}
		}
		return nil
	})
	ok := true
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", g.Comm(i).Rank(), err)
			ok = false
		}
	}
	if got := nativeStats[nativeAllreduce].Load() - start; got != 1 {
		t.Errorf("PreMulSum ran %d MPI_Iallreduce, want 1", got)
	}
	agree(t, w, ok, "PreMulSum")
}

// detCase is one element type of the deterministic test: random inputs
// (rank r's from a seed and r) and its bits.
type detCase struct {
	name string
	run  func(t *testing.T, w *World, g, one *collective.Group, op collective.Op, n int, seed uint64)
}

// detType is the detCase of T, whose random values draw makes.
func detType[T collective.Elem](name string, draw func(*rand.Rand) T) detCase {
	return detCase{name, func(t *testing.T, w *World, g, one *collective.Group, op collective.Op, n int, seed uint64) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		N := g.Size()
		input := func(r int) []T {
			rng := rand.New(rand.NewPCG(seed, uint64(r)))
			return filled(n, func(int) T { return draw(rng) })
		}
		// The one-process result: every global rank's input in a group of
		// N ranks in this process.
		ref := make([][]T, N)
		errs := onLocal(one, func(c *collective.Comm) error {
			ref[c.Rank()] = make([]T, n)
			return collective.AllReduceInto(ctx, c, input(c.Rank()), ref[c.Rank()], op)
		})
		if err := errors_(errs); err != nil {
			t.Fatalf("%s %v: the one-process group: %v", name, op, err)
		}
		errs = onLocal(g, func(c *collective.Comm) error {
			x := input(c.Rank())
			if err := collective.AllReduce(ctx, c, x, op); err != nil {
				return err
			}
			for i := range x {
				if !sameBits(x[i], ref[0][i]) {
					return fmt.Errorf("element %d = %v, the one-process result %v", i, x[i], ref[0][i])
				}
			}
			return nil
		})
		ok := true
		for i, err := range errs {
			if err != nil {
				t.Errorf("%s %v, %d elements (seed %d): rank %d: %v", name, op, n, seed, g.Comm(i).Rank(), err)
				ok = false
			}
		}
		agree(t, w, ok, fmt.Sprintf("deterministic %s %v %d", name, op, n))
		// ReduceScatter of n elements per rank (N*n sent): each rank's
		// block against the one-process rank's.
		big := func(r int) []T {
			rng := rand.New(rand.NewPCG(seed+1, uint64(r)))
			return filled(N*n, func(int) T { return draw(rng) })
		}
		errs = onLocal(one, func(c *collective.Comm) error {
			ref[c.Rank()] = make([]T, n)
			return collective.ReduceScatter(ctx, c, big(c.Rank()), ref[c.Rank()], op)
		})
		if err := errors_(errs); err != nil {
			t.Fatalf("%s %v: the one-process group's ReduceScatter: %v", name, op, err)
		}
		errs = onLocal(g, func(c *collective.Comm) error {
			x := make([]T, n)
			if err := collective.ReduceScatter(ctx, c, big(c.Rank()), x, op); err != nil {
				return err
			}
			for i := range x {
				if !sameBits(x[i], ref[c.Rank()][i]) {
					return fmt.Errorf("ReduceScatter: element %d = %v, the one-process result %v", i, x[i], ref[c.Rank()][i])
				}
			}
			return nil
		})
		report(t, w, g, errs, fmt.Sprintf("deterministic ReduceScatter %s %v %d (seed %d)", name, op, n, seed))
		// Reduce to the last rank: its recv against the one-process root's.
		root := N - 1
		errs = onLocal(one, func(c *collective.Comm) error {
			return collective.Reduce(ctx, c, input(c.Rank()), ref[c.Rank()], op, root)
		})
		if err := errors_(errs); err != nil {
			t.Fatalf("%s %v: the one-process group's Reduce: %v", name, op, err)
		}
		errs = onLocal(g, func(c *collective.Comm) error {
			x := make([]T, n)
			if err := collective.Reduce(ctx, c, input(c.Rank()), x, op, root); err != nil {
				return err
			}
			for i := range x {
				if c.Rank() == root && !sameBits(x[i], ref[root][i]) {
					return fmt.Errorf("Reduce: element %d = %v, the one-process result %v", i, x[i], ref[root][i])
				}
			}
			return nil
		})
		report(t, w, g, errs, fmt.Sprintf("deterministic Reduce %s %v %d (seed %d)", name, op, n, seed))
	}}
}

// sameBits compares a and b bit for bit.
func sameBits[T any](a, b T) bool { return slices.Equal(bytesOf([]T{a}), bytesOf([]T{b})) }

// errors_ is the first non-nil error of errs.
func errors_(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestGroupNativeDeterministic runs deterministic AllReduce, ReduceScatter
// and Reduce through strategy Native (raw blocks over MPI_Ialltoall,
// reduced in rank order here; the all-reduce's chunks then all-gathered) on
// host groups of 1 and 2 local ranks (and vulkan with 2, lavapipe under CI,
// but in the light jobs), with random float32, float64, float16
// and int32 inputs, and compares every result bit for bit with the same
// call in a one-process deterministic group of as many ranks: the bits do
// not depend on the layout of the ranks in processes. Each layout runs
// twice: over MPI, then through the shared-memory window (shm.go; 4 KiB
// slots, several chunks at 30011 elements). The light jobs (but under
// GOCOLL_TEST_FULL) take two of the four types in each of a layout's two
// runs, the other two in the other.
func TestGroupNativeDeterministic(t *testing.T) {
	w := needWorld(t)
	seed := commonSeed(t, w) // every process draws with process 0's seed
	cases := []detCase{
		detType("float32", func(r *rand.Rand) float32 { return float32(r.NormFloat64()) }),
		detType("float64", func(r *rand.Rand) float64 { return r.NormFloat64() * math.Exp2(float64(r.IntN(20))) }),
		detType("float16", func(r *rand.Rand) collective.Float16 { return collective.Float16From(float32(r.NormFloat64())) }),
		detType("int32", func(r *rand.Rand) int32 { return int32(r.Uint32()) }),
	}
	type layout struct {
		bk    string
		local int
	}
	layouts := []layout{{"host", 1}, {"host", 2}}
	if bks := groupBackends(t); len(bks) > 1 && fullOnlyHere(w) {
		layouts = append(layouts, layout{bks[1], 2}) // lavapipe: its kernels reduce the one-process group
	}
	for li, lay := range layouts {
		for si, shm := range []bool{false, true} {
			local := lay.local
			// The light jobs: half the types per run (float32 and float16,
			// then float64 and int32), so that each layout takes every type
			// over its two runs (GOCOLL_TEST_FULL: every type in every run).
			cases := cases
			if light() && os.Getenv("GOCOLL_TEST_FULL") == "" {
				k := (li*2 + si) % 2
				cases = []detCase{cases[k], cases[k+2]}
			}
			t.Run(fmt.Sprintf("%s/L=%d/shm=%v", lay.bk, local, shm), func(t *testing.T) {
				_, _ = begin(t, 20*time.Second)
				// With the window: 4 KiB slots, so that 30011 elements take
				// several chunks.
				setShm(t, shm, 4096)
				g := openNativeGroup(t, w, lay.bk, local, true)
				cfg := collective.DefaultConfig()
				cfg.Deterministic = true
				one, err := collective.NewGroup(context.Background(), collective.Options{Ranks: g.Size(), Backend: lay.bk, Config: cfg})
				if err != nil {
					t.Fatal(err)
				}
				defer one.Close()
				start, startShm := nativeStats[nativeAlltoall].Load(), shmCalls.Load()
				calls, shmWant := 0, 0
				for _, c := range cases {
					for _, n := range []int{0, 1, 13, 30011} {
						for _, op := range []collective.Op{collective.Sum, collective.Mean} {
							if op == collective.Mean && c.name == "int32" {
								op = collective.Max
							}
							c.run(t, w, g, one, op, n, seed)
							if n > 0 {
								calls += 3 // AllReduce, ReduceScatter, Reduce
								if shm && w.mode == modeConcurrent {
									calls, shmWant = calls-3, shmWant+3 // all three through the window
								}
							}
						}
					}
				}
				if got := nativeStats[nativeAlltoall].Load() - start; got != int64(calls) {
					t.Errorf("%d MPI_Ialltoall completed, want %d (one per call with data)", got, calls)
				}
				if got := shmCalls.Load() - startShm; got != int64(shmWant) {
					t.Errorf("%d calls through the shared-memory window, want %d", got, shmWant)
				}
			})
		}
	}
}

// checkReduceScatter runs ReduceScatter of m elements per rank of e with
// op on every local rank of g, out of place then in place (recv as send's
// own block), and checks each rank's block against e's reference. It
// returns the native collectives the process made (one per call with
// data).
func checkReduceScatter[T collective.Elem](t *testing.T, w *World, g *collective.Group, e etype[T], op collective.Op, m int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	N := g.Size()
	errs := onLocal(g, func(c *collective.Comm) error {
		r := c.Rank()
		want := func(j int) T { return e.ref(op, ins(e, op, N, r*m+j)) }
		send := filled(N*m, func(i int) T { return e.in(op, r, i) })
		recv := filled(m, func(int) T { return e.mark })
		if err := collective.ReduceScatter(ctx, c, send, recv, op); err != nil {
			return fmt.Errorf("ReduceScatter: %w", err)
		}
		if s := firstWrong(e, op, recv, want); s != "" {
			return fmt.Errorf("ReduceScatter: %s", s)
		}
		if s := firstWrong(e, op, send, func(i int) T { return e.in(op, r, i) }); s != "" {
			return fmt.Errorf("ReduceScatter wrote its send: %s", s)
		}
		own := send[r*m : (r+1)*m]
		if err := collective.ReduceScatter(ctx, c, send, own, op); err != nil {
			return fmt.Errorf("ReduceScatter in place: %w", err)
		}
		if s := firstWrong(e, op, own, want); s != "" {
			return fmt.Errorf("ReduceScatter in place: %s", s)
		}
		return nil
	})
	report(t, w, g, errs, fmt.Sprintf("ReduceScatter %s %v %d", e.name, op, m))
	if m == 0 {
		return 0
	}
	return 2
}

// checkAllGather runs AllGather of m elements per rank of e on every
// local rank of g, out of place then in place (send as recv's own block).
func checkAllGather[T collective.Elem](t *testing.T, w *World, g *collective.Group, e etype[T], m int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	N := g.Size()
	want := func(i int) T { return e.in(collective.Sum, i/max(m, 1), i%max(m, 1)) }
	errs := onLocal(g, func(c *collective.Comm) error {
		r := c.Rank()
		send := filled(m, func(j int) T { return e.in(collective.Sum, r, j) })
		recv := filled(N*m, func(int) T { return e.mark })
		if err := collective.AllGather(ctx, c, send, recv); err != nil {
			return fmt.Errorf("AllGather: %w", err)
		}
		if s := firstWrong(e, collective.Sum, recv, want); s != "" {
			return fmt.Errorf("AllGather: %s", s)
		}
		all := filled(N*m, func(int) T { return e.mark })
		copy(all[r*m:], send)
		if err := collective.AllGather(ctx, c, all[r*m:(r+1)*m], all); err != nil {
			return fmt.Errorf("AllGather in place: %w", err)
		}
		if s := firstWrong(e, collective.Sum, all, want); s != "" {
			return fmt.Errorf("AllGather in place: %s", s)
		}
		return nil
	})
	report(t, w, g, errs, fmt.Sprintf("AllGather %s %d", e.name, m))
}

// checkRootedNative runs, for every root in {0, the last rank, a rank of
// the middle process}, Reduce of m elements of e with op (out of place,
// then in place at the root) and Broadcast and BroadcastInto of them, on
// every local rank of g, each against the reference. It returns the calls
// with data (one native collective each per process).
func checkRootedNative[T collective.Elem](t *testing.T, w *World, g *collective.Group, e etype[T], op collective.Op, m int) (reduces, bcasts int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	N := g.Size()
	roots := []int{0, N - 1, (N / 2)}
	want := func(i int) T { return e.ref(op, ins(e, op, N, i)) }
	errs := onLocal(g, func(c *collective.Comm) error {
		r := c.Rank()
		for _, root := range roots {
			send := filled(m, func(i int) T { return e.in(op, r, i) })
			recv := filled(m, func(int) T { return e.mark })
			if err := collective.Reduce(ctx, c, send, recv, op, root); err != nil {
				return fmt.Errorf("Reduce to %d: %w", root, err)
			}
			if r == root {
				if s := firstWrong(e, op, recv, want); s != "" {
					return fmt.Errorf("Reduce to %d: %s", root, s)
				}
				recv = send // in place at the root
			}
			if err := collective.Reduce(ctx, c, send, recv, op, root); err != nil {
				return fmt.Errorf("Reduce in place to %d: %w", root, err)
			}
			if s := firstWrong(e, op, recv, want); r == root && s != "" {
				return fmt.Errorf("Reduce in place to %d: %s", root, s)
			}
			data := filled(m, func(i int) T { return e.in(collective.Sum, r, i) })
			fromRoot := func(i int) T { return e.in(collective.Sum, root, i) }
			if err := collective.Broadcast(ctx, c, data, root); err != nil {
				return fmt.Errorf("Broadcast from %d: %w", root, err)
			}
			if s := firstWrong(e, collective.Sum, data, fromRoot); s != "" {
				return fmt.Errorf("Broadcast from %d: %s", root, s)
			}
			src := filled(m, func(i int) T { return e.in(collective.Sum, r, i) })
			dst := filled(m, func(int) T { return e.mark })
			if err := collective.BroadcastInto(ctx, c, src, dst, root); err != nil {
				return fmt.Errorf("BroadcastInto from %d: %w", root, err)
			}
			if s := firstWrong(e, collective.Sum, dst, fromRoot); s != "" {
				return fmt.Errorf("BroadcastInto from %d: %s", root, s)
			}
		}
		return nil
	})
	report(t, w, g, errs, fmt.Sprintf("Reduce and Broadcast %s %v %d", e.name, op, m))
	if m == 0 {
		return 0, 0
	}
	return 2 * len(roots), 2 * len(roots)
}

// report fails the test for each rank's error and agrees on the outcome
// with the other processes.
func report(t *testing.T, w *World, g *collective.Group, errs []error, what string) {
	t.Helper()
	ok := true
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: rank %d: %v", what, g.Comm(i).Rank(), err)
			ok = false
		}
	}
	agree(t, w, ok, what)
}

// nativeLogs is a log handler that counts the call log's records of
// AllGather that name strategy native.
type nativeLogs struct{ n atomic.Int64 }

func (h *nativeLogs) Enabled(context.Context, slog.Level) bool { return true }
func (h *nativeLogs) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *nativeLogs) WithGroup(string) slog.Handler            { return h }

func (h *nativeLogs) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "AllGather") {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "strategy" && a.Value.String() == "native" {
				h.n.Add(1)
			}
			return true
		})
	}
	return nil
}

// TestGroupNativeReduceScatterAllGather runs ReduceScatter and AllGather
// through strategy Native on host groups of 1 and 2 local ranks: int32 and
// float64 with several ops, float32 sum, at 0, 1 and 13 elements per rank
// and 256Ki (1 MiB of every rank's block), each against the exact
// reference; the process's MPI_Ireduce_scatter_block count grows by one
// per ReduceScatter with data, and the call log names strategy native for
// every AllGather.
func TestGroupNativeReduceScatterAllGather(t *testing.T) {
	w := needWorld(t)
	for _, local := range []int{1, 2} {
		t.Run(fmt.Sprintf("L=%d", local), func(t *testing.T) {
			_, _ = begin(t, 20*time.Second)
			setShm(t, false, defaultShmSlot) // MPI's collectives, not the window (TestShmGroupReduceScatterAllGather)
			var log nativeLogs
			cfg := collective.DefaultConfig()
			cfg.CommunicationTimeout = 30 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			g, err := collective.NewGroup(ctx, collective.Options{Ranks: local, Backend: "host", Transport: w, Config: cfg,
				Logger: slog.New(&log)})
			agree(t, w, err == nil, fmt.Sprintf("NewGroup: %v", err))
			defer g.Close()
			start := nativeStats[nativeReduceScatter].Load()
			calls := 0
			i32, f64 := intType[int32]("int32"), exactType[float64]("float64")
			sizes := []int{0, 1, 13}
			for _, m := range sizes {
				for _, op := range []collective.Op{collective.Sum, collective.Mean, collective.BXor, collective.Min} {
					calls += checkReduceScatter(t, w, g, i32, op, m)
				}
				for _, op := range []collective.Op{collective.Sum, collective.Prod} {
					calls += checkReduceScatter(t, w, g, f64, op, m)
				}
				checkAllGather(t, w, g, i32, m)
				checkAllGather(t, w, g, f64, m)
			}
			calls += checkReduceScatter(t, w, g, exactType[float32]("float32"), collective.Sum, 1<<18)
			startR, startB := nativeStats[nativeReduce].Load(), nativeStats[nativeBcast].Load()
			var reduces, bcasts int
			for _, tc := range []struct {
				op collective.Op
				m  int
			}{{collective.Sum, 0}, {collective.Sum, 13}, {collective.Mean, 13}, {collective.BOr, 1}, {collective.Sum, 1 << 18}} {
				r, b := checkRootedNative(t, w, g, i32, tc.op, tc.m)
				reduces, bcasts = reduces+r, bcasts+b
			}
			r, b := checkRootedNative(t, w, g, f64, collective.Prod, 13)
			reduces, bcasts = reduces+r, bcasts+b
			if got := nativeStats[nativeReduce].Load() - startR; got != int64(reduces) {
				t.Errorf("%d MPI_Ireduce completed, want %d", got, reduces)
			}
			if got := nativeStats[nativeBcast].Load() - startB; got != int64(bcasts) {
				t.Errorf("%d MPI_Ibcast completed, want %d", got, bcasts)
			}
			checkAllGather(t, w, g, exactType[float32]("float32"), 1<<18)
			if got := nativeStats[nativeReduceScatter].Load() - start; got != int64(calls) {
				t.Errorf("%d MPI_Ireduce_scatter_block completed, want %d (one per call with data)", got, calls)
			}
			want := local * 2 * (len(sizes)*2 + 1)
			if got := int(log.n.Load()); got != want {
				t.Errorf("%d AllGather calls logged strategy native, want %d", got, want)
			}
		})
	}
}

// lateNative is the World as a transport (not a Duplicator, so a group
// works on it directly) whose Allreduce on process late starts only after
// delay: the other processes' leaders wait in MPI_Iallreduce meanwhile.
type lateNative struct {
	*World
	late  int
	delay time.Duration
}

func (l lateNative) Allreduce(ctx context.Context, send, recv []byte, dt backend.DType, op backend.Op) error {
	if l.World.Rank() == l.late {
		time.Sleep(l.delay)
	}
	return l.World.Allreduce(ctx, send, recv, dt, op)
}

// transportOnly hides every method of t but the Transport's and the
// native collectives' (Dup and Split among them).
type transportOnly struct {
	backend.Transport
	backend.NativeCollectives
}

func (t transportOnly) Allgather(ctx context.Context, mine, all []byte) error {
	return t.Transport.Allgather(ctx, mine, all)
}

// TestGroupNativeTimeout lets the last process's leader call
// MPI_Iallreduce 2 s late while the group's CommunicationTimeout is 500
// ms: the other processes' AllReduce fails with a *collective.TimeoutError
// (errors.Is ErrTimeout) that names the late process's ranks (or, where
// another process timed out first, ErrGroupBroken citing that), only once
// MPI released the caller's memory (the call waits for the collective up
// to the drain limit): on return their recv, which MPI wrote in place of a
// copy (one rank per process), already holds the sum, and nothing writes it
// later.
func TestGroupNativeTimeout(t *testing.T) {
	w, _ := begin(t, 20*time.Second)
	P := w.Size()
	if P < 2 {
		t.Skip("needs two processes")
	}
	late := P - 1
	const delay = 2 * time.Second
	tr := transportOnly{w, lateNative{w, late, delay}}
	cfg := collective.DefaultConfig()
	cfg.CommunicationTimeout = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 1, Backend: "host", Transport: tr, Config: cfg, DrainLimit: 20 * time.Second})
	agree(t, w, err == nil, fmt.Sprintf("NewGroup: %v", err))
	const n = 4099
	e := intType[int32]("int32")
	want := func(i int) int32 { return e.ref(collective.Sum, ins(e, collective.Sum, P, i)) }
	c := g.Comm(0)
	send := filled(n, func(i int) int32 { return e.in(collective.Sum, c.Rank(), i) })
	recv := make([]int32, n)
	start := time.Now()
	err = collective.AllReduceInto(ctx, c, send, recv, collective.Sum)
	took := time.Since(start)
	var te *collective.TimeoutError
	switch {
	case w.Rank() == late:
		if err == nil {
			t.Logf("the late process's AllReduce returned nil")
		}
	case errors.Is(err, collective.ErrGroupBroken) && strings.Contains(err.Error(), fmt.Sprintf("waiting for rank(s) [%d]", late)):
		// Another early process timed out first and broke the group.
	case !errors.Is(err, collective.ErrTimeout) || !errors.As(err, &te) || !slices.Contains(te.Missing, late):
		t.Errorf("AllReduce with process %d late = %v; want a *TimeoutError naming rank %d (or the group broken by one)", late, err, late)
	case took < delay-200*time.Millisecond:
		t.Errorf("AllReduce returned after %v, before MPI could have released the memory", took)
	}
	if s := firstWrong(e, collective.Sum, recv, want); s != "" {
		t.Errorf("recv on return (%v): %s", err, s)
	}
	closeBroken(t, w, g, "native timeout")
}

// closeBroken closes g, a group a test broke, and agrees on the test's
// outcome (what) with the other processes.
func closeBroken(t *testing.T, w *World, g *collective.Group, what string) {
	t.Helper()
	if err := g.Close(); err != nil {
		t.Logf("Close of the broken group: %v", err)
	}
	agree(t, w, !t.Failed(), what)
}

// TestGroupNativeAllocs counts the Go allocations of a steady-state
// AllReduce and AllGather through strategy Native with one rank per process
// (the caller's slices handed to MPI_Iallreduce and MPI_Ialltoallv): none.
func TestGroupNativeAllocs(t *testing.T) {
	w, _ := begin(t, 40*time.Second)
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	setShm(t, false, defaultShmSlot) // MPI_Iallreduce (TestShmGroupAllocs: the window)
	g := openNativeGroup(t, w, "host", 1, false)
	c := g.Comm(0)
	ctx := context.Background()
	x := make([]float32, 4099)
	start := nativeStats[nativeAllreduce].Load()
	allocs := testing.AllocsPerRun(50, func() {
		if err := collective.AllReduce(ctx, c, x, collective.Sum); err != nil {
			t.Error(err)
		}
	})
	if got := nativeStats[nativeAllreduce].Load() - start; got != 51 {
		t.Errorf("%d MPI_Iallreduce completed, want 51", got)
	}
	if allocs > 0 {
		t.Errorf("%v allocations per AllReduce, want 0", allocs)
	}
	// AllGather: one MPI_Ialltoallv of the caller's memory.
	all := make([]float32, g.Size()*len(x))
	start = nativeStats[nativeAlltoallv].Load()
	allocs = testing.AllocsPerRun(50, func() {
		if err := collective.AllGather(ctx, c, x, all); err != nil {
			t.Error(err)
		}
	})
	if got := nativeStats[nativeAlltoallv].Load() - start; got != 51 {
		t.Errorf("%d MPI_Ialltoallv completed for AllGather, want 51", got)
	}
	if allocs > 0 {
		t.Errorf("%v allocations per AllGather, want 0", allocs)
	}
	// Two ranks per process: the leader's combine and the ranks' local
	// meetings allocate nothing either (rank 1 runs in step on a goroutine
	// of its own; AllocsPerRun counts the process's mallocs).
	g2 := openNativeGroup(t, w, "host", 2, false)
	c0, c1 := g2.Comm(0), g2.Comm(1)
	y := make([]float32, 4099)
	next, done := make(chan struct{}), make(chan error)
	go func() {
		for range next {
			done <- collective.AllReduce(ctx, c1, y, collective.Sum)
		}
	}()
	allocs = testing.AllocsPerRun(50, func() {
		next <- struct{}{}
		err := collective.AllReduce(ctx, c0, x, collective.Sum)
		if err1 := <-done; err == nil {
			err = err1
		}
		if err != nil {
			t.Error(err)
		}
	})
	close(next)
	if allocs > 0 {
		t.Errorf("%v allocations per AllReduce with 2 ranks per process, want 0", allocs)
	}
	agree(t, w, !t.Failed(), "allocations")
}

// gatedNative is the World as a transport (not a Duplicator, so a group
// works on it directly) whose Allreduce on process late starts only once
// gate closes, under a context of its own: a process hung before the
// native collective.
type gatedNative struct {
	*World
	late int
	gate chan struct{}
}

func (l gatedNative) Allreduce(ctx context.Context, send, recv []byte, dt backend.DType, op backend.Op) error {
	if l.World.Rank() == l.late {
		<-l.gate
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
	}
	return l.World.Allreduce(ctx, send, recv, dt, op)
}

// TestGroupNativeLost: a group of one and of two ranks per process over a
// duplicate of the World, DrainLimit 1 ms, whose last process hangs before
// its leader's MPI_Iallreduce. The other processes' AllReduce returns when
// its deadline passes (the leader's; its other rank's error is the group's
// break), on every rank with an error matching collective.ErrTransportLost
// that says MPI may still write the receive buffer; the duplicate is lost:
// its next call fails at once with ErrTransportLost, the group's with
// ErrGroupBroken. Once the last process calls, Drain reports true and the
// leader's recv (MPI's receive buffer) holds the sum MPI wrote after the
// call returned (the memory was MPI's, as the error said).
func TestGroupNativeLost(t *testing.T) {
	w, _ := begin(t, 60*time.Second)
	if w.Size() < 2 {
		t.Skip("needs two processes")
	}
	for _, local := range []int{1, 2} {
		t.Run(fmt.Sprintf("local=%d", local), func(t *testing.T) { groupNativeLost(t, w, local) })
	}
}

func groupNativeLost(t *testing.T, w *World, local int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	P, me := w.Size(), w.Rank()
	dtr, err := w.Dup(ctx)
	agree(t, w, err == nil, fmt.Sprintf("Dup: %v", err))
	d := dtr.(*World)
	late := P - 1
	gate := make(chan struct{})
	cfg := collective.DefaultConfig()
	cfg.CommunicationTimeout = 30 * time.Second
	cfg.Strategy = collective.Native
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: local, Backend: "host", Transport: transportOnly{d, gatedNative{d, late, gate}},
		Config: cfg, DrainLimit: time.Millisecond})
	agree(t, w, err == nil, fmt.Sprintf("NewGroup: %v", err))
	const n = 4099
	e := intType[int32]("int32")
	want := func(i int) int32 { return e.ref(collective.Sum, ins(e, collective.Sum, P*local, i)) }
	recvs := make([][]int32, local)
	errs := make([]error, local)
	var wg sync.WaitGroup
	start := time.Now()
	for l := range local {
		c := g.Comm(l)
		send := filled(n, func(i int) int32 { return e.in(collective.Sum, c.Rank(), i) })
		recvs[l] = make([]int32, n)
		timeout := 300 * time.Millisecond
		if l > 0 || me == late {
			timeout = 30 * time.Second // the leaders' deadlines pass first
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			errs[l] = collective.AllReduceInto(tctx, c, send, recvs[l], collective.Sum)
		}()
	}
	if me != late {
		wg.Wait()
		took := time.Since(start)
		var ce *collective.Error
		for l, err := range errs {
			switch {
			case !errors.As(err, &ce) || !errors.Is(err, collective.ErrTransportLost) || !strings.Contains(err.Error(), "MPI may still write"):
				t.Errorf("rank %d: AllReduce with process %d hung = %v; want a *collective.Error matching ErrTransportLost", l, late, err)
			case !errors.Is(err, collective.ErrTimeout) && !errors.Is(err, collective.ErrGroupBroken):
				t.Errorf("rank %d: AllReduce = %v; want ErrTimeout or ErrGroupBroken (another rank's deadline first)", l, err)
			}
		}
		if took > 5*time.Second {
			t.Errorf("AllReduce returned after %v", took)
		}
		begin := time.Now()
		if err := d.Barrier(ctx); !errors.Is(err, backend.ErrTransportLost) || time.Since(begin) > 100*time.Millisecond {
			t.Errorf("Barrier on the group's World after the loss = %v after %v; want ErrTransportLost at once", err, time.Since(begin))
		}
		if err := collective.AllReduceInto(ctx, g.Comm(0), recvs[0], recvs[0], collective.Sum); !errors.Is(err, collective.ErrGroupBroken) {
			t.Errorf("the next AllReduce = %v; want ErrGroupBroken", err)
		}
	}
	agree(t, w, !t.Failed(), "native loss")
	if me == late {
		close(gate)
		wg.Wait()
		for l, err := range errs {
			if err != nil {
				t.Logf("the hung process's rank %d: %v", l, err)
			}
		}
	}
	if !d.Drain(30 * time.Second) {
		t.Fatal("Drain: the collective did not complete after the hung process called")
	}
	if me != late {
		if s := firstWrong(e, collective.Sum, recvs[0], want); s != "" {
			t.Errorf("the leader's recv once MPI completed the collective: %s", s)
		}
	}
	if err := g.Close(); err != nil {
		t.Logf("Close of the broken group: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Logf("Close of the group's World: %v", err)
	}
	agree(t, w, !t.Failed(), "native loss closed")
}
