//go:build mpi && cgo

package mpi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/internal/native"
)

// collective's strategy Native for the moves between ranks (AllToAll,
// AllToAllV, Gather, Scatter, GatherV, ScatterV, AllGatherV and
// ReduceScatterV's raw blocks): one MPI_Ialltoallv among the processes'
// leaders per call, after an MPI_Ialltoall of the counts for the V kinds.

// moveDraw is one round's shape, the same on every process: a block m,
// counts[i][j] (what rank i sends rank j in AllToAllV; counts[0][j] the V
// kinds' per-rank counts), 0 often, and a root.
type moveDraw struct {
	m      int
	counts [][]int
	root   int
}

func drawMove(rng *rand.Rand, N, most int) moveDraw {
	d := moveDraw{m: rng.IntN(most + 1), root: rng.IntN(N), counts: make([][]int, N)}
	for i := range d.counts {
		d.counts[i] = make([]int, N)
		for j := range d.counts[i] {
			if rng.IntN(4) > 0 {
				d.counts[i][j] = rng.IntN(most + 1)
			}
		}
	}
	return d
}

// spread returns offsets for counts with a gap of one element after each
// range, in reverse order when rev, and the length they cover.
func spread(counts []int, rev bool) ([]int, int) {
	displs, at := make([]int, len(counts)), 0
	for k := range counts {
		j := k
		if rev {
			j = len(counts) - 1 - k
		}
		displs[j] = at
		at += counts[j] + 1
	}
	return displs, at
}

// moveCase checks every move of one element type on a group.
type moveCase struct {
	name string
	run  func(t *testing.T, w *World, g, one *collective.Group, d moveDraw, seed uint64) (alltoallv int)
}

// moveType runs the eight moves of T for draw d on every local rank of g:
// each recv against a plain loop over every global rank's input (the
// elements outside the ranges received keep their mark), in place where
// the collective allows it (AllToAll), and ReduceScatterV (Sum) against
// the one-process deterministic group's result, bit for bit. It returns
// the MPI_Ialltoallv each process made.
func moveType[T collective.Elem](name string, draw func(*rand.Rand) T, mark T) moveCase {
	return moveCase{name, func(t *testing.T, w *World, g, one *collective.Group, d moveDraw, seed uint64) int {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		N, m, root, cnt := g.Size(), d.m, d.root, d.counts
		input := func(r, n, salt int) []T {
			rng := rand.New(rand.NewPCG(seed+uint64(salt), uint64(r)))
			return filled(n, func(int) T { return draw(rng) })
		}
		marks := func(n int) []T { return filled(n, func(int) T { return mark }) }
		same := func(what string, got, want []T) error {
			for i := range want {
				if !sameBits(got[i], want[i]) {
					return fmt.Errorf("%s: element %d of %d = %v, want %v", what, i, len(want), got[i], want[i])
				}
			}
			return nil
		}
		v := cnt[0] // the V kinds' counts: rank j's is v[j]
		vd, vlen := spread(v, true)
		// ReduceScatterV's one-process result.
		ref := make([][]T, N)
		errs := onLocal(one, func(c *collective.Comm) error {
			ref[c.Rank()] = make([]T, v[c.Rank()])
			return collective.ReduceScatterV(ctx, c, input(c.Rank(), vlen, 8), ref[c.Rank()], v, vd, collective.Sum)
		})
		if err := errors_(errs); err != nil {
			t.Fatalf("%s: the one-process group's ReduceScatterV: %v", name, err)
		}
		errs = onLocal(g, func(c *collective.Comm) error {
			r := c.Rank()
			// AllToAll, out of place then in place.
			send, recv := input(r, N*m, 1), marks(N*m)
			want := make([]T, 0, N*m)
			for j := range N {
				want = append(want, input(j, N*m, 1)[r*m:(r+1)*m]...)
			}
			if err := collective.AllToAll(ctx, c, send, recv); err != nil {
				return fmt.Errorf("AllToAll: %w", err)
			}
			if err := same("AllToAll", recv, want); err != nil {
				return err
			}
			if err := collective.AllToAll(ctx, c, send, send); err != nil {
				return fmt.Errorf("AllToAll in place: %w", err)
			}
			if err := same("AllToAll in place", send, want); err != nil {
				return err
			}
			// AllToAllV: rank i sends cnt[i][j] to j, ranges spread out,
			// received in reverse order.
			col := make([]int, N)
			for i := range N {
				col[i] = cnt[i][r]
			}
			sd, slen := spread(cnt[r], false)
			rd, rlen := spread(col, true)
			send, recv, want = input(r, slen, 2), marks(rlen), marks(rlen)
			for i := range N {
				id, ilen := spread(cnt[i], false)
				copy(want[rd[i]:], input(i, ilen, 2)[id[r]:id[r]+col[i]])
			}
			if err := collective.AllToAllV(ctx, c, send, cnt[r], sd, recv, col, rd); err != nil {
				return fmt.Errorf("AllToAllV: %w", err)
			}
			if err := same("AllToAllV", recv, want); err != nil {
				return err
			}
			// Gather and Scatter of m per rank.
			send, recv = input(r, m, 3), marks(N*m)
			if err := collective.Gather(ctx, c, send, recv, root); err != nil {
				return fmt.Errorf("Gather to %d: %w", root, err)
			}
			if r == root {
				want = nil
				for j := range N {
					want = append(want, input(j, m, 3)...)
				}
				if err := same("Gather", recv, want); err != nil {
					return err
				}
			}
			send, recv = input(r, N*m, 4), marks(m)
			if err := collective.Scatter(ctx, c, send, recv, root); err != nil {
				return fmt.Errorf("Scatter from %d: %w", root, err)
			}
			if err := same("Scatter", recv, input(root, N*m, 4)[r*m:(r+1)*m]); err != nil {
				return err
			}
			// GatherV, ScatterV, AllGatherV of v[j] for rank j.
			send, recv = input(r, v[r], 5), marks(vlen)
			if err := collective.GatherV(ctx, c, send, recv, v, vd, root); err != nil {
				return fmt.Errorf("GatherV to %d: %w", root, err)
			}
			want = marks(vlen)
			for j := range N {
				copy(want[vd[j]:], input(j, v[j], 5))
			}
			if r == root {
				if err := same("GatherV", recv, want); err != nil {
					return err
				}
			}
			send, recv = input(r, vlen, 6), marks(v[r])
			if err := collective.ScatterV(ctx, c, send, recv, v, vd, root); err != nil {
				return fmt.Errorf("ScatterV from %d: %w", root, err)
			}
			if err := same("ScatterV", recv, input(root, vlen, 6)[vd[r]:vd[r]+v[r]]); err != nil {
				return err
			}
			send, recv = input(r, v[r], 7), marks(vlen)
			if err := collective.AllGatherV(ctx, c, send, recv, v, vd); err != nil {
				return fmt.Errorf("AllGatherV: %w", err)
			}
			for j := range N {
				copy(want[vd[j]:], input(j, v[j], 7))
			}
			if err := same("AllGatherV", recv, want); err != nil {
				return err
			}
			// ReduceScatterV: the one-process deterministic bits.
			recv = marks(v[r])
			if err := collective.ReduceScatterV(ctx, c, input(r, vlen, 8), recv, v, vd, collective.Sum); err != nil {
				return fmt.Errorf("ReduceScatterV: %w", err)
			}
			return same("ReduceScatterV", recv, ref[r])
		})
		report(t, w, g, errs, fmt.Sprintf("moves of %s, m %d, counts %v, root %d (seed %d)", name, m, cnt, root, seed))
		calls := 5 // AllToAllV, GatherV, ScatterV, AllGatherV, ReduceScatterV
		if m > 0 {
			calls += 4 // AllToAll twice, Gather, Scatter
		}
		return calls
	}}
}

// moveTypes are every element type, each drawn over its whole range but
// for the floats (normal values, so that ReduceScatterV's sums are
// ordinary numbers), with a mark that no draw makes unnoticed.
var moveTypes = []moveCase{
	moveType("float32", func(r *rand.Rand) float32 { return float32(r.NormFloat64()) }, float32(math.NaN())),
	moveType("int8", func(r *rand.Rand) int8 { return int8(r.Uint32()) }, 0x5A),
	moveType("float16", func(r *rand.Rand) collective.Float16 { return collective.Float16From(float32(r.NormFloat64())) }, 0x7E01),
	moveType("float64", func(r *rand.Rand) float64 { return r.NormFloat64() * math.Exp2(float64(r.IntN(20))) }, math.Inf(-1)),
	moveType("uint8", func(r *rand.Rand) uint8 { return uint8(r.Uint32()) }, 0xA5),
	moveType("int16", func(r *rand.Rand) int16 { return int16(r.Uint32()) }, 0x5A5A),
	moveType("uint16", func(r *rand.Rand) uint16 { return uint16(r.Uint32()) }, 0xA5A5),
	moveType("int32", func(r *rand.Rand) int32 { return int32(r.Uint32()) }, 0x5A5A5A5A),
	moveType("uint32", func(r *rand.Rand) uint32 { return r.Uint32() }, 0xA5A5A5A5),
	moveType("int64", func(r *rand.Rand) int64 { return int64(r.Uint64()) }, 0x5A5A5A5A5A5A5A5A),
	moveType("uint64", func(r *rand.Rand) uint64 { return r.Uint64() }, 0xA5A5A5A5A5A5A5A5),
	moveType("bfloat16", func(r *rand.Rand) collective.BFloat16 { return collective.BFloat16From(float32(r.NormFloat64())) }, 0x7FC1),
	moveType("f8e4m3", func(r *rand.Rand) collective.Float8E4M3 { return collective.Float8E4M3From(float32(r.NormFloat64())) }, collective.Float8E4M3FromBits(0x7F)),
	moveType("f8e5m2", func(r *rand.Rand) collective.Float8E5M2 { return collective.Float8E5M2From(float32(r.NormFloat64())) }, collective.Float8E5M2FromBits(0x7E)),
}

// TestGroupNativeMoves runs the moves through strategy Native, which
// Auto chooses for them over a World, in deterministic mode and not, on
// host groups of 1 and 2 local ranks (and lavapipe when full): every
// element type (the trimmed jobs: the first three), random blocks and
// counts (0 often, uneven V counts) and roots from the shared seed, each
// against the plain loop and ReduceScatterV against the one-process
// deterministic result bitwise. Each process's MPI_Ialltoallv count grows
// by one per call (the fixed kinds with data, every V call).
func TestGroupNativeMoves(t *testing.T) {
	w := needWorld(t)
	seed := commonSeed(t, w)
	type layout struct {
		bk    string
		local int
	}
	layouts := []layout{{"host", 1}, {"host", 2}}
	types, rounds, most := moveTypes[:3], 2, 9
	if !light() {
		types, rounds, most = moveTypes, 4, 40
		if bks := groupBackends(t); len(bks) > 1 {
			layouts = append(layouts, layout{bks[1], 2})
		}
	}
	for _, lay := range layouts {
		for _, det := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/L=%d/det=%v", lay.bk, lay.local, det), func(t *testing.T) {
				_, _ = begin(t, 20*time.Second)
				g := openNativeGroup(t, w, lay.bk, lay.local, det)
				cfg := collective.DefaultConfig()
				cfg.Deterministic = true
				one, err := collective.NewGroup(context.Background(), collective.Options{Ranks: g.Size(), Backend: lay.bk, Config: cfg})
				if err != nil {
					t.Fatal(err)
				}
				defer one.Close()
				rng := rand.New(rand.NewPCG(seed, uint64(lay.local)))
				start, calls := nativeStats[nativeAlltoallv].Load(), 0
				for round := range rounds {
					for _, c := range types {
						d := drawMove(rng, g.Size(), most)
						if round == 0 {
							d.m = 0 // empty blocks, and no call for the fixed kinds
						}
						calls += c.run(t, w, g, one, d, seed+uint64(round))
					}
				}
				if got := nativeStats[nativeAlltoallv].Load() - start; got != int64(calls) {
					t.Errorf("%d MPI_Ialltoallv completed, want %d (strategy native: one per move with data, every V call)", got, calls)
				}
			})
		}
	}
}

// TestGroupNativeMovesSplit: with the largest count of one native
// Alltoallv lowered to 24 bytes in every process (the 2^31-1 of MPI's C
// ints, scaled down), every move splits into rounds of Alltoallv (24/P
// bytes of each pair's data a round, pieces cut anywhere) and still matches
// the one-process result, for every kind, 1 and 2 ranks per process.
func TestGroupNativeMovesSplit(t *testing.T) {
	w := needWorld(t)
	seed := commonSeed(t, w)
	defer native.SetMaxMoveForTest(native.SetMaxMoveForTest(24))
	for _, local := range []int{1, 2} {
		t.Run(fmt.Sprintf("L=%d", local), func(t *testing.T) {
			_, _ = begin(t, 20*time.Second)
			g := openNativeGroup(t, w, "host", local, false)
			cfg := collective.DefaultConfig()
			cfg.Deterministic = true
			one, err := collective.NewGroup(context.Background(), collective.Options{Ranks: g.Size(), Backend: "host", Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			rng := rand.New(rand.NewPCG(seed, uint64(local)+10))
			start, calls := nativeStats[nativeAlltoallv].Load(), 0
			for round := range 2 {
				for _, c := range moveTypes[:3] {
					calls += c.run(t, w, g, one, drawMove(rng, g.Size(), 9), seed+uint64(round))
				}
			}
			if got := nativeStats[nativeAlltoallv].Load() - start; got <= int64(calls) {
				t.Errorf("%d MPI_Ialltoallv completed for %d moves: want more (split into rounds)", got, calls)
			}
		})
	}
}

// TestGroupNativeMoveMismatch: an AllToAllV whose rank 0 expects one more
// element from the last rank (another process's) than that rank sends
// fails on every rank with a *MismatchError (rank 0's names the last rank
// and both counts), before any data moved (recv untouched); the group
// stays usable (an AllToAll after it is exact).
func TestGroupNativeMoveMismatch(t *testing.T) {
	w, _ := begin(t, 20*time.Second)
	for _, local := range []int{1, 2} {
		g := openNativeGroup(t, w, "host", local, false)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		N := g.Size()
		errs := onLocal(g, func(c *collective.Comm) error {
			r := c.Rank()
			counts := slices.Repeat([]int{2}, N)
			rcounts := slices.Clone(counts)
			if r == 0 {
				rcounts[N-1]++
			}
			sd, _ := spread(counts, false)
			rd, rlen := spread(rcounts, false)
			send, recv := filled(3*N, func(i int) int32 { return int32(r*1000 + i) }), filled(rlen, func(int) int32 { return -1 })
			err := collective.AllToAllV(ctx, c, send, counts, sd, recv, rcounts, rd)
			var me *collective.MismatchError
			switch {
			case !errors.As(err, &me):
				return fmt.Errorf("AllToAllV with a count that differs = %v, want a *MismatchError", err)
			case r == 0 && N > 1 && me.Peer != N-1:
				return fmt.Errorf("rank 0's mismatch %v names rank %d, want %d", me, me.Peer, N-1)
			case slices.ContainsFunc(recv, func(x int32) bool { return x != -1 }):
				return fmt.Errorf("recv written by the failed call: %v", recv)
			}
			a, b := filled(N, func(j int) int32 { return int32(r*N + j) }), make([]int32, N)
			if err := collective.AllToAll(ctx, c, a, b); err != nil {
				return fmt.Errorf("AllToAll after the mismatch: %w", err)
			}
			for j, x := range b {
				if x != int32(j*N+r) {
					return fmt.Errorf("AllToAll after the mismatch: element %d = %d, want %d", j, x, j*N+r)
				}
			}
			return nil
		})
		cancel()
		report(t, w, g, errs, fmt.Sprintf("AllToAllV count mismatch, %d local ranks", local))
	}
}

// lateMove is the World whose Alltoallv on process late starts only after
// delay: the other processes' leaders wait in MPI_Ialltoallv meanwhile.
type lateMove struct {
	*World
	late  int
	delay time.Duration
}

func (l lateMove) Alltoallv(ctx context.Context, send []byte, sc, sd []int, recv []byte, rc, rd []int) error {
	if l.World.Rank() == l.late {
		time.Sleep(l.delay)
	}
	return l.World.Alltoallv(ctx, send, sc, sd, recv, rc, rd)
}

// TestGroupNativeMoveCancel: the last process's leader calls
// MPI_Ialltoallv of an AllToAll 2 s late while the others' context ends
// after 500 ms: their calls fail with the context's error (a
// *TimeoutError, or the group broken by another process's), only once MPI
// released the call's memory (the wait for the collective up to the drain
// limit), and their recv is untouched (MPI wrote the leader's pooled
// memory, never copied out).
func TestGroupNativeMoveCancel(t *testing.T) {
	w, _ := begin(t, 30*time.Second)
	P := w.Size()
	if P < 2 {
		t.Skip("needs two processes")
	}
	late := P - 1
	const delay = 2 * time.Second
	cfg := collective.DefaultConfig()
	cfg.CommunicationTimeout = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tr := transportOnly{w, lateMove{w, late, delay}}
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 1, Backend: "host", Transport: tr, Config: cfg, DrainLimit: 20 * time.Second})
	agree(t, w, err == nil, fmt.Sprintf("NewGroup: %v", err))
	c := g.Comm(0)
	const m = 1000
	send, recv := filled(P*m, func(i int) int64 { return int64(i) }), filled(P*m, func(int) int64 { return -1 })
	cctx, ccancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer ccancel()
	if w.Rank() == late {
		cctx = ctx
	}
	start := time.Now()
	err = collective.AllToAll(cctx, c, send, recv)
	took := time.Since(start)
	switch {
	case w.Rank() == late:
		t.Logf("the late process's AllToAll: %v", err)
	case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, collective.ErrGroupBroken):
		t.Errorf("AllToAll with process %d late = %v; want the context's error or the group broken", late, err)
	case took < delay-200*time.Millisecond:
		t.Errorf("AllToAll returned after %v, before MPI could have released the memory", took)
	case slices.ContainsFunc(recv, func(x int64) bool { return x != -1 }):
		t.Errorf("recv written by the failed call")
	}
	closeBroken(t, w, g, "native move cancelled")
}

// TestGroupNativeMoveAllocs counts the Go allocations of a steady-state
// AllToAll and AllToAllV through strategy Native with one rank per
// process: none (the leader's memory is pooled, MPI_Ialltoallv's counts
// and offsets are C memory).
func TestGroupNativeMoveAllocs(t *testing.T) {
	w, _ := begin(t, 40*time.Second)
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	g := openNativeGroup(t, w, "host", 1, false)
	c := g.Comm(0)
	ctx := context.Background()
	N := g.Size()
	send, recv := make([]int32, 3*N), make([]int32, 3*N)
	counts, displs := make([]int, N), make([]int, N)
	for j := range N {
		counts[j], displs[j] = 3, 3*j
	}
	start := nativeStats[nativeAlltoallv].Load()
	allocs := testing.AllocsPerRun(20, func() {
		if err := collective.AllToAll(ctx, c, send, recv); err != nil {
			t.Error(err)
		}
		if err := collective.AllToAllV(ctx, c, send, counts, displs, recv, counts, displs); err != nil {
			t.Error(err)
		}
	})
	if got := nativeStats[nativeAlltoallv].Load() - start; got != 42 {
		t.Errorf("%d MPI_Ialltoallv completed, want 42", got)
	}
	if allocs > 0 {
		t.Errorf("%v allocations per AllToAll and AllToAllV, want 0", allocs)
	}
	agree(t, w, !t.Failed(), "native move allocations")
}
