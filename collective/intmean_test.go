package collective

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// intMeanRef is Mean of integers as NCCL's ncclAvg computes it, in a plain
// loop: the sum wrapped in T (Go's integer arithmetic), then one division by
// N, Go's / (truncated toward zero).
func intMeanRef[T Integer](ins [][]T, lo, hi int) []T {
	out := make([]T, hi-lo)
	for e := range out {
		var s T
		for _, in := range ins {
			s += in[lo+e]
		}
		out[e] = s / T(len(ins))
	}
	return out
}

// intMeanInputs draws n values of T per rank: the type's minimum and
// maximum (so sums wrap), small values of either sign (negative sums with
// remainders), and any bits.
func intMeanInputs[T Integer](rng *rand.Rand, N, n int) [][]T {
	lo, hi := T(0), ^T(0)
	if hi < 0 { // signed: hi is -1
		hi = T(uint64(1)<<(8*dtypeOf[T]().Size()-1) - 1)
		lo = -hi - 1
	}
	ins := make([][]T, N)
	for r := range ins {
		ins[r] = make([]T, n)
		for e := range ins[r] {
			switch rng.IntN(5) {
			case 0:
				ins[r][e] = lo
			case 1:
				ins[r][e] = hi
			case 2:
				ins[r][e] = T(rng.Uint64())
			default:
				ins[r][e] = T(rng.IntN(19) - 9)
			}
		}
	}
	return ins
}

// intMeanCase runs Mean of T on g in every collective that takes an op
// (AllReduce, its Into, With and Async forms, ReduceScatter, ReduceScatterV,
// Reduce, and their tensor forms where the device has T's kernels) and
// checks every result exactly against intMeanRef. strategies are the
// strategies AllReduceWith and AllReduceTensor are asked for.
func intMeanCase[T Integer](t *testing.T, g *Group, rng *rand.Rand, n int, strategies []Strategy) {
	t.Helper()
	N := g.Size()
	ctx := context.Background()
	ins := intMeanInputs[T](rng, N, n*N)
	all := intMeanRef(ins, 0, n*N)
	what := fmt.Sprintf("%T N=%d n=%d", *new(T), N, n)
	check := func(coll string, r int, got, want []T) {
		t.Helper()
		for e := range want {
			if got[e] != want[e] {
				t.Fatalf("%s %s: rank %d element %d = %v, want %v (inputs %v)", what, coll, r, e, got[e], want[e], column(ins, e))
			}
		}
	}
	outs := make([][]T, N)
	for _, s := range strategies {
		for _, async := range []bool{false, true} {
			noErrors(t, onRanks(g, func(c *Comm) error {
				outs[c.Rank()] = slices.Clone(ins[c.Rank()])
				if async {
					return AllReduceAsync(ctx, c, outs[c.Rank()], Mean).Wait(ctx)
				}
				return AllReduceWith(ctx, c, ins[c.Rank()], outs[c.Rank()], Mean, s)
			}))
			for r := range outs {
				check(fmt.Sprintf("AllReduce %v async=%v", s, async), r, outs[r], all)
			}
		}
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		outs[c.Rank()] = make([]T, n)
		return ReduceScatter(ctx, c, ins[c.Rank()], outs[c.Rank()], Mean)
	}))
	for r := range outs {
		check("ReduceScatter", r, outs[r], all[r*n:(r+1)*n])
	}
	// ReduceScatterV: rank r receives counts[r] elements from displs[r].
	counts, displs := make([]int, N), make([]int, N)
	at := 0
	for r := range counts {
		counts[r] = 1 + (r*7+3)%n
		displs[r] = at
		at += counts[r]
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		outs[c.Rank()] = make([]T, counts[c.Rank()])
		return ReduceScatterV(ctx, c, ins[c.Rank()][:at], outs[c.Rank()], counts, displs, Mean)
	}))
	for r := range outs {
		check("ReduceScatterV", r, outs[r], all[displs[r]:displs[r]+counts[r]])
	}
	root := rng.IntN(N)
	noErrors(t, onRanks(g, func(c *Comm) error {
		outs[c.Rank()] = make([]T, n*N)
		return ReduceAsync(ctx, c, ins[c.Rank()], outs[c.Rank()], Mean, root).Wait(ctx)
	}))
	check(fmt.Sprintf("Reduce to %d", root), root, outs[root], all)

	if !g.kernels.Has(dtypeOf[T]()) {
		return
	}
	tensor := func(c *Comm, m int, in []T) (*Tensor[T], error) {
		tn, err := NewTensor[T](c, m)
		if err == nil && in != nil {
			err = tn.Upload(in)
		}
		return tn, err
	}
	download := func(tn *Tensor[T], m int) ([]T, error) {
		out := make([]T, m)
		return out, tn.Download(out)
	}
	for _, s := range strategies {
		noErrors(t, onRanks(g, func(c *Comm) error {
			tn, err := tensor(c, n*N, ins[c.Rank()])
			if err != nil {
				return err
			}
			defer tn.Close()
			if err := AllReduceTensor(ctx, c, tn, Mean, s); err != nil {
				return err
			}
			outs[c.Rank()], err = download(tn, n*N)
			return err
		}))
		for r := range outs {
			check(fmt.Sprintf("AllReduceTensor %v", s), r, outs[r], all)
		}
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		st, err := tensor(c, n*N, ins[c.Rank()])
		if err != nil {
			return err
		}
		defer st.Close()
		rt, err := tensor(c, n, nil)
		if err != nil {
			return err
		}
		defer rt.Close()
		if err := ReduceScatterTensor(ctx, c, st, rt, Mean); err != nil {
			return err
		}
		outs[c.Rank()], err = download(rt, n)
		return err
	}))
	for r := range outs {
		check("ReduceScatterTensor", r, outs[r], all[r*n:(r+1)*n])
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		st, err := tensor(c, n*N, ins[c.Rank()])
		if err != nil {
			return err
		}
		defer st.Close()
		rt, err := tensor(c, counts[c.Rank()], nil)
		if err != nil {
			return err
		}
		defer rt.Close()
		if err := ReduceScatterVTensor(ctx, c, st, rt, counts, displs, Mean); err != nil {
			return err
		}
		outs[c.Rank()], err = download(rt, counts[c.Rank()])
		return err
	}))
	for r := range outs {
		check("ReduceScatterVTensor", r, outs[r], all[displs[r]:displs[r]+counts[r]])
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		st, err := tensor(c, n*N, ins[c.Rank()])
		if err != nil {
			return err
		}
		defer st.Close()
		if err := ReduceTensor(ctx, c, st, st, Mean, root); err != nil {
			return err
		}
		outs[c.Rank()], err = download(st, n*N)
		return err
	}))
	check(fmt.Sprintf("ReduceTensor to %d", root), root, outs[root], all)
}

// column is element e of every rank's input.
func column[T any](ins [][]T, e int) []T {
	out := make([]T, len(ins))
	for r := range ins {
		out[r] = ins[r][e]
	}
	return out
}

// intMeanConfigs are the group configurations TestIntegerMean runs: the
// default (Auto), each strategy as the group's Config.Strategy (which
// ReduceScatter and Reduce follow where the algorithm table lists it), and
// deterministic mode.
var intMeanConfigs = []struct {
	name string
	mod  func(*Options)
}{
	{"auto", func(o *Options) {}},
	{"ring", func(o *Options) { o.Config.Strategy = Ring }},
	{"tree", func(o *Options) { o.Config.Strategy = Tree }},
	{"hierarchical", func(o *Options) { o.Config.Strategy, o.Config.LocalGroupSize = Hierarchical, 2 }},
	{"pipelined", func(o *Options) { o.Config.Strategy = Pipelined }},
	{"direct", func(o *Options) { o.Config.Strategy = Direct }},
	{"host", func(o *Options) { o.Config.Strategy = Host }},
	{"deterministic", func(o *Options) { o.Config.Deterministic = true }},
}

// TestIntegerMean checks Mean on every integer type against intMeanRef
// (NCCL's ncclAvg: the wrapped sum divided once by N, truncated toward
// zero) exactly, on 1 to 7 ranks, every strategy and deterministic mode,
// with the types' minimum and maximum among the inputs, on host and
// lavapipe (-short: fewer rank counts there). On lavapipe 1, 2, 3, 5 and 7
// ranks, every configuration on 3 and 5; unless full without 7 ranks and
// every configuration on 3 only, each beyond the default on the largest
// size only (each group's devices compile their kernels; the host backend
// runs every configuration on every count and size). The
// race run of ./build.sh test (-race -short) checks synchronisation on 1, 2,
// 3 and 5 host ranks and, on lavapipe, the default configuration's
// strategies.
func TestIntegerMean(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0xa76))
	allStrategies := []Strategy{Auto, Ring, Tree, Hierarchical, Pipelined, Direct, Host}
	for _, bk := range backendsUnderTest(t) {
		ranks := []int{1, 2, 3, 4, 5, 6, 7}
		if raceShort() {
			ranks = []int{1, 2, 3, 5}
		}
		if bk != "host" {
			ranks = []int{1, 2, 3, 5, 7}
			if !fullRun() {
				ranks = []int{1, 2, 3, 5}
			}
			if testing.Short() {
				ranks = []int{3}
			}
		}
		for _, N := range ranks {
			for ci, cfg := range intMeanConfigs {
				if bk != "host" && ci > 0 && (N != 3 || raceShort()) && (N != 5 || !fullRun()) {
					continue // lavapipe: every configuration on 3 ranks (and 5 if full)
				}
				g := openGroup(t, bk, N, func(o *Options) { o.ChunkBytes = 256 }, cfg.mod)
				strategies := []Strategy{Auto}
				if ci == 0 {
					strategies = allStrategies
				}
				for _, n := range []int{1, 5, 67} {
					if bk != "host" && ci > 0 && n != 67 && !fullRun() {
						continue // lavapipe: each configuration beyond auto on one size (the sizes: auto's)
					}
					t.Run(fmt.Sprintf("%s/N=%d/%s/n=%d", bk, N, cfg.name, n), func(t *testing.T) {
						intMeanCase[int8](t, g, rng, n, strategies)
						intMeanCase[uint8](t, g, rng, n, strategies)
						intMeanCase[int16](t, g, rng, n, strategies)
						intMeanCase[uint16](t, g, rng, n, strategies)
						intMeanCase[int32](t, g, rng, n, strategies)
						intMeanCase[uint32](t, g, rng, n, strategies)
						intMeanCase[int64](t, g, rng, n, strategies)
						intMeanCase[uint64](t, g, rng, n, strategies)
					})
				}
			}
		}
	}
}

// TestIntegerMeanExamples: hand-worked results of NCCL's integer average:
// the sum wraps in the type, then one division truncated toward zero.
func TestIntegerMeanExamples(t *testing.T) {
	ctx := context.Background()
	for _, bk := range backendsUnderTest(t) {
		g2, g3 := openGroup(t, bk, 2), openGroup(t, bk, 3)
		i32 := [][]int32{{-7, 7, -3, math.MaxInt32, math.MinInt32}, {0, 0, -4, 1, -1}}
		wantI32 := []int32{-3, 3, -3, math.MinInt32 / 2, math.MaxInt32 / 2} // -7/2, 7/2, -7/2; MaxInt32+1 and MinInt32-1 wrap
		i8 := [][]int8{{127, -128, -8, -128}, {127, -1, 0, -128}, {0, 0, 0, -128}}
		wantI8 := []int8{-2 / 3, 127 / 3, -8 / 3, -128 / 3} // 254 wraps to -2; -129 wraps to 127; -384 wraps to -128
		u8 := [][]uint8{{255, 7}, {3, 0}}
		wantU8 := []uint8{1, 3} // 258 wraps to 2
		for _, c := range []struct {
			name string
			run  func() error
		}{
			{"int32", func() error {
				outs := make([][]int32, 2)
				noErrors(t, onRanks(g2, func(cm *Comm) error {
					outs[cm.Rank()] = make([]int32, len(wantI32))
					return AllReduceInto(ctx, cm, i32[cm.Rank()], outs[cm.Rank()], Mean)
				}))
				return sameAll(outs, wantI32)
			}},
			{"int8", func() error {
				outs := make([][]int8, 3)
				noErrors(t, onRanks(g3, func(cm *Comm) error {
					outs[cm.Rank()] = slices.Clone(i8[cm.Rank()])
					return AllReduce(ctx, cm, outs[cm.Rank()], Mean)
				}))
				return sameAll(outs, wantI8)
			}},
			{"uint8", func() error {
				outs := make([][]uint8, 2)
				noErrors(t, onRanks(g2, func(cm *Comm) error {
					outs[cm.Rank()] = slices.Clone(u8[cm.Rank()])
					return AllReduce(ctx, cm, outs[cm.Rank()], Mean)
				}))
				return sameAll(outs, wantU8)
			}},
		} {
			if err := c.run(); err != nil {
				t.Errorf("%s: %s: %v", bk, c.name, err)
			}
		}
	}
}

func sameAll[T comparable](outs [][]T, want []T) error {
	for r := range outs {
		if !slices.Equal(outs[r], want) {
			return fmt.Errorf("rank %d got %v, want %v", r, outs[r], want)
		}
	}
	return nil
}

// TestIntegerMeanPrefixRefused: Scan and Exscan keep refusing Mean, on the
// integer types too.
func TestIntegerMeanPrefixRefused(t *testing.T) {
	g := openGroup(t, "host", 2)
	ctx := context.Background()
	for _, exclusive := range []bool{false, true} {
		errs := onRanks(g, func(c *Comm) error {
			in, out := []int32{1, 2}, []int32{5, 5}
			if exclusive {
				return Exscan(ctx, c, in, out, Mean)
			}
			return Scan(ctx, c, in, out, Mean)
		})
		for r, err := range errs {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("exclusive=%v: rank %d: %v, want ErrInvalidArgument", exclusive, r, err)
			}
		}
	}
}
