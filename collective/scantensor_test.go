package collective

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// withBitOps is an integer type case that also draws the bitwise and
// logical ops, reduced by bitRef left to right.
func withBitOps[T Integer](tc typeCase[T]) typeCase[T] {
	ref := tc.ref
	tc.ops = append(slices.Clone(tc.ops), BAnd, BOr, BXor, LAnd, LOr, LXor)
	tc.ref = func(op Op, vals []T) T {
		if !op.IntOnly() {
			return ref(op, vals)
		}
		acc := vals[0]
		for _, v := range vals[1:] {
			acc = bitRef(op, acc, v)
		}
		return acc
	}
	return tc
}

// scanTensorCase runs ScanTensor or ExscanTensor (excl) of tc's type with
// op, m elements a rank, on the ranks of gs: out of place or in place (one
// tensor), synchronous or through the Async form. Every tensor lies at an
// element offset of a larger one whose other elements must stay as they
// were; a send tensor (out of place) must be unchanged. Rank r's recv must
// be the inputs of ranks 0..r (Exscan: 0..r-1) reduced in rank order by
// the case's reference arithmetic, and Exscan's rank 0 recv what it held
// (the sentinel, or in place its input).
func scanTensorCase[T Elem](t *testing.T, gs []*Group, rng *rand.Rand, tc typeCase[T], op Op, m int, excl, inPlace, async bool) {
	t.Helper()
	ctx := context.Background()
	N := gs[0].Size()
	in := make([][]T, N)
	for r := range in {
		in[r] = make([]T, m)
		for i := range in[r] {
			in[r][i] = tc.draw(rng, op, N)
		}
	}
	pad := rng.IntN(4)
	where := fmt.Sprintf("%s N=%d m=%d op=%s exscan=%v inPlace=%v async=%v pad=%d", tc.name, N, m, op, excl, inPlace, async, pad)
	out := make([][]T, N)
	errs := onGroups(gs, func(c *Comm) error {
		r := c.Rank()
		sb, err := newBox(c, in[r], pad)
		if err != nil {
			return err
		}
		defer sb.close()
		rb := sb
		if !inPlace {
			if rb, err = newBox(c, sentinel[T](m), (pad+1)%4); err != nil {
				return err
			}
			defer rb.close()
		}
		f, start := ScanTensor[T], ScanTensorAsync[T]
		if excl {
			f, start = ExscanTensor[T], ExscanTensorAsync[T]
		}
		if async {
			err = start(ctx, c, sb.t, rb.t, op).Wait(ctx)
		} else {
			err = f(ctx, c, sb.t, rb.t, op)
		}
		if err != nil {
			return err
		}
		for _, b := range []*tbox[T]{sb, rb} {
			if err := b.intact(); err != nil {
				return err
			}
		}
		if !inPlace {
			got, err := sb.read()
			if err != nil {
				return err
			}
			if !slices.Equal(asBytes(got), asBytes(in[r])) {
				return errors.New("send tensor changed")
			}
		}
		out[r], err = rb.read()
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("%s: rank %d: %v", where, r, err)
		}
	}
	for r := range out {
		L := r + 1
		if excl {
			L = r
		}
		var want []T
		switch {
		case L > 0:
			want = reduceRef(tc, op, in[:L], 0, m)
		case inPlace:
			want = in[0]
		default:
			want = sentinel[T](m)
		}
		if !slices.Equal(asBytes(out[r]), asBytes(want)) {
			for i := range want {
				if !slices.Equal(asBytes(out[r][i:i+1]), asBytes(want[i:i+1])) {
					t.Fatalf("%s: rank %d element %d: got %v, want %v (ranks 0..%d reduced)", where, r, i, out[r][i], want[i], L-1)
				}
			}
		}
	}
}

// scanTensorSizes: empty, one, odd, around the 256-wide work group, a
// 1024-byte exchange slot of 4- and 1-byte elements (the groups below) and
// past it.
var scanTensorSizes = []int{0, 1, 7, 63, 255, 256, 257, 1023, 1024, 1025, 2049}

// scanTensorTypes runs one case of each element type (drawScan).
func scanTensorTypes(t *testing.T, gs []*Group, rng *rand.Rand) {
	t.Helper()
	drawScan(t, gs, rng, floatCase[float32]("float"))
	drawScan(t, gs, rng, floatCase[float64]("double"))
	drawScan(t, gs, rng, withBitOps(intCase[int32]("int32")))
	drawScan(t, gs, rng, intCase[int64]("int64"))
	drawScan(t, gs, rng, withBitOps(intCase[uint8]("uint8")))
	drawScan(t, gs, rng, intCase[int16]("int16"))
	drawScan(t, gs, rng, halfCase("half", Float16From, Float16.Float32))
	drawScan(t, gs, rng, halfCase("bfloat16", BFloat16From, BFloat16.Float32))
	drawScan(t, gs, rng, fp8Case("f8e4m3", Float8E4M3From, Float8E4M3.Float32))
	drawScan(t, gs, rng, fp8Case("f8e5m2", Float8E5M2From, Float8E5M2.Float32))
}

// drawScan runs one scanTensorCase of tc with the op (Mean, which the
// scans refuse, left out), the size, the collective and the layout drawn
// from rng.
func drawScan[T Elem](t *testing.T, gs []*Group, rng *rand.Rand, tc typeCase[T]) {
	t.Helper()
	op := Mean
	for op == Mean {
		op = tc.ops[rng.IntN(len(tc.ops))]
	}
	m := scanTensorSizes[rng.IntN(len(scanTensorSizes))]
	scanTensorCase(t, gs, rng, tc, op, m, rng.IntN(2) == 0, rng.IntN(3) == 0, rng.IntN(4) == 0)
}

// TestScanTensor: ScanTensor and ExscanTensor of every element type (the
// bitwise and logical ops on int32 and uint8), ops, sizes and layouts
// drawn (the seed is printed), exact against a plain loop, on host and
// lavapipe: 1 to 7 ranks sharing device memory (every prefix one kernel
// in one submission), a logical device per rank (Vulkan) and 3 processes
// over a transport (the gathered inputs reduced by one kernel on each
// rank's device), and without f64 kernels (float64 gathered and reduced
// on the CPU).
func TestScanTensor(t *testing.T) {
	seed := tensorTestSeed(t)
	small := func(o *Options) { o.ChunkBytes = 1024 }
	for _, bk := range backendsUnderTest(t) {
		for ranks := 1; ranks <= 7; ranks++ {
			t.Run(fmt.Sprintf("%s/shared/%d", bk, ranks), func(t *testing.T) {
				scanTensorTypes(t, []*Group{openGroup(t, bk, ranks, small)}, rand.New(rand.NewPCG(seed, uint64(ranks))))
			})
		}
		if bk == "vulkan" {
			t.Run(bk+"/per-rank/3", func(t *testing.T) {
				g := openGroup(t, bk, 3, func(o *Options) { o.ChunkBytes = 1024; o.DevicePerRank = true })
				scanTensorTypes(t, []*Group{g}, rand.New(rand.NewPCG(seed, 30)))
			})
		}
		t.Run(bk+"/nof64/3", func(t *testing.T) {
			g := openGroup(t, bk, 3, func(o *Options) { o.ChunkBytes = 1024; o.DisableFloat64 = true })
			scanTensorTypes(t, []*Group{g}, rand.New(rand.NewPCG(seed, 31)))
		})
		t.Run(bk+"/processes/3x1", func(t *testing.T) {
			scanTensorTypes(t, openProcesses(t, bk, 3, 1, small), rand.New(rand.NewPCG(seed, 32)))
		})
		t.Run(bk+"/processes/2x2", func(t *testing.T) {
			scanTensorTypes(t, openProcesses(t, bk, 2, 2, small), rand.New(rand.NewPCG(seed, 33)))
		})
	}
}

// TestScanTensorLarge: inputs one element past and one short of the host
// reduction's chunks (internal/parreduce: 256 KiB of output), every op, on
// 3 ranks: float32 and int64 by the kernels where the ranks share device
// memory, int32 across processes (gathered first, then one kernel), and
// float64 without f64 kernels (gathered, reduced on the CPU in those
// chunks).
func TestScanTensorLarge(t *testing.T) {
	seed := tensorTestSeed(t)
	rng := rand.New(rand.NewPCG(seed, 34))
	const chunk = 256 << 10
	for _, bk := range backendsUnderTest(t) {
		shared := []*Group{openGroup(t, bk, 3)}
		procs := openProcesses(t, bk, 3, 1)
		nof64 := []*Group{openGroup(t, bk, 3, func(o *Options) { o.DisableFloat64 = true })}
		for i, op := range []Op{Sum, Prod, Max, Min} {
			excl, inPlace := i%2 == 1, i >= 2
			scanTensorCase(t, shared, rng, floatCase[float32]("float"), op, chunk/4+1, excl, inPlace, false)
			scanTensorCase(t, procs, rng, intCase[int32]("int32"), op, 2*chunk/4-1, !excl, !inPlace, false)
			scanTensorCase(t, nof64, rng, floatCase[float64]("double"), op, chunk/8+1, excl, !inPlace, false)
			scanTensorCase(t, shared, rng, intCase[int64]("int64"), op, 2*chunk/8-1, !excl, inPlace, false)
		}
	}
}

// TestScanTensorZeroAllocs: steady-state ScanTensor and ExscanTensor (in
// place) allocate nothing, counted over every rank: ranks sharing device
// memory (host and lavapipe, 4 ranks), a logical device per rank (Vulkan,
// 3), 2 processes of 2 ranks over the in-memory transport that allocates
// nothing itself (host), and float64 without f64 kernels (reduced on the
// CPU).
func TestScanTensorZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, bk := range backendsUnderTest(t) {
		g := []*Group{openGroup(t, bk, 4)}
		scanAllocs[float32](t, bk+"/shared", g, 3001)
		nof64 := openGroup(t, bk, 3, func(o *Options) { o.DisableFloat64 = true })
		scanAllocs[float64](t, bk+"/nof64", []*Group{nof64}, 1000)
		if bk == "vulkan" {
			perRank := openGroup(t, bk, 3, func(o *Options) { o.DevicePerRank = true })
			scanAllocs[float32](t, bk+"/per-rank", []*Group{perRank}, 3001)
		}
	}
	scanAllocs[float32](t, "host/processes", openProcessesOn(t, newQuietNet(2), "host", 2), 3001)
}

// scanAllocs counts the allocations of ScanTensor and ExscanTensor of m
// elements of T on the ranks of gs.
func scanAllocs[T Elem](t *testing.T, name string, gs []*Group, m int) {
	t.Helper()
	N := gs[0].Size()
	send, recv := make([]*Tensor[T], N), make([]*Tensor[T], N)
	for _, g := range gs {
		for i := range g.LocalSize() {
			c := g.Comm(i)
			r := c.Rank()
			var err error
			if send[r], err = NewTensor[T](c, m); err != nil {
				t.Fatal(err)
			}
			if recv[r], err = NewTensor[T](c, m); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { send[r].Close(); recv[r].Close() })
		}
	}
	for _, excl := range []bool{false, true} {
		a := groupsCtxAllocs(t, gs, "background", func(ctx context.Context, c *Comm) error {
			r := c.Rank()
			if excl {
				return ExscanTensor(ctx, c, send[r], send[r], Max)
			}
			return ScanTensor(ctx, c, send[r], recv[r], Min)
		})
		if a != 0 {
			t.Errorf("%s %T exscan=%v: %v allocations per call (every rank), want 0", name, *new(T), excl, a)
		}
	}
}
