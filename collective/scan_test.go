package collective

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// scanRef is rank r's Scan (exclusive: Exscan) of ins with op, in rank
// order, in float64 (inputs small integers: exact in every type below).
func scanRef(ins [][]float64, r int, op Op, exclusive bool) []float64 {
	last := r
	if exclusive {
		last = r - 1
	}
	out := slices.Clone(ins[0])
	for q := 1; q <= last; q++ {
		for e := range out {
			a, b := out[e], ins[q][e]
			switch op {
			case Sum:
				out[e] = a + b
			case Prod:
				out[e] = a * b
			case Max:
				out[e] = max(a, b)
			case Min:
				out[e] = min(a, b)
			}
		}
	}
	return out
}

// scanCase runs Scan or Exscan of type T on g with inputs drawn from rng,
// in place or not, and checks every rank against scanRef (rank 0's Exscan
// recv keeps its sentinel).
func scanCase[T Elem](t *testing.T, g *Group, rng *rand.Rand, n int, op Op, exclusive, inPlace bool, conv func(float64) T) {
	t.Helper()
	N := g.Size()
	ins := make([][]float64, N)
	for r := range ins {
		ins[r] = make([]float64, n)
		for e := range ins[r] {
			ins[r][e] = float64(rng.IntN(7) - 2)
			if op == Prod {
				ins[r][e] = float64(rng.IntN(3) + 1)
			}
		}
	}
	const sentinel = 99
	recvs := make([][]T, N)
	ctx := context.Background()
	noErrors(t, onRanks(g, func(c *Comm) error {
		r := c.Rank()
		send := make([]T, n)
		for e := range send {
			send[e] = conv(ins[r][e])
		}
		recv := make([]T, n)
		for e := range recv {
			recv[e] = conv(sentinel)
		}
		if inPlace {
			recv = send
		}
		recvs[r] = recv
		if exclusive {
			return Exscan(ctx, c, send, recv, op)
		}
		return Scan(ctx, c, send, recv, op)
	}))
	for r := range recvs {
		var want []float64
		switch {
		case exclusive && r == 0 && inPlace:
			want = ins[0] // untouched
		case exclusive && r == 0:
			want = slices.Repeat([]float64{sentinel}, n)
		default:
			want = scanRef(ins, r, op, exclusive)
		}
		for e := range want {
			if recvs[r][e] != conv(want[e]) {
				t.Fatalf("%T N=%d op=%s exclusive=%v inPlace=%v: rank %d element %d = %v, want %v",
					*new(T), N, op, exclusive, inPlace, r, e, recvs[r][e], want[e])
			}
		}
	}
}

// TestScanExscan draws rank counts, lengths (around the 256-byte slot),
// ops, types and in-place layouts (the seed is printed) and checks Scan and
// Exscan exactly against a plain loop, on host and lavapipe.
func TestScanExscan(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	sizes := []int{0, 1, 7, 63, 64, 65, 200}
	ops := []Op{Sum, Prod, Max, Min}
	for _, bk := range backendsUnderTest(t) {
		for _, N := range []int{1, 2, 3, 5, 7} {
			g := openGroup(t, bk, N, func(o *Options) { o.ChunkBytes = 256 })
			for tc := 0; tc < 3; tc++ {
				n := sizes[rng.IntN(len(sizes))]
				op := ops[rng.IntN(len(ops))]
				excl, inPlace := rng.IntN(2) == 0, rng.IntN(3) == 0
				switch rng.IntN(4) {
				case 0:
					scanCase(t, g, rng, n, op, excl, inPlace, func(v float64) int32 { return int32(v) })
				case 1:
					scanCase(t, g, rng, n, op, excl, inPlace, func(v float64) float64 { return v })
				case 2:
					scanCase(t, g, rng, n, op, excl, inPlace, func(v float64) float32 { return float32(v) })
				default:
					scanCase(t, g, rng, n, op, excl, inPlace, func(v float64) Float16 { return Float16From(float32(v)) })
				}
			}
		}
	}
}

// TestScanExscanLarge: Scan and Exscan of inputs that span several of the
// parallel host reduction's chunks (internal/parreduce: 256 KiB of output
// each), one element past and one short of their boundaries, every op, in
// place or not, exact against a plain loop on host (the prefix reduced on
// the CPU, in those chunks) and lavapipe (on the devices, each rank its
// third of the elements). The race run of ./build.sh test (-race -short)
// runs two of the four lengths per op, the other two with the next.
func TestScanExscanLarge(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 6))
	const chunk = 256 << 10
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3, func(*Options) {})
		for i, op := range []Op{Sum, Prod, Max, Min} {
			excl, inPlace := i%2 == 1, i >= 2
			half := raceShort()
			if !half || i%2 == 0 {
				scanCase(t, g, rng, 2*chunk/4+1, op, excl, inPlace, func(v float64) int32 { return int32(v) })
				scanCase(t, g, rng, 3*chunk/8-1, op, !excl, inPlace, func(v float64) float64 { return v })
			}
			if !half || i%2 == 1 {
				scanCase(t, g, rng, chunk/4+chunk/8+3, op, excl, !inPlace, func(v float64) float32 { return float32(v) })
				scanCase(t, g, rng, 2*chunk/2+5, op, !excl, !inPlace, func(v float64) Float16 { return Float16From(float32(v)) })
			}
		}
	}
}

// TestScanRefusals: Mean, and lengths that differ, are ErrInvalidArgument
// on the rank and fail its peers, buffers untouched; the group stays
// usable; the Async forms give the same results.
func TestScanRefusals(t *testing.T) {
	ctx := context.Background()
	g := openGroup(t, "host", 3)
	errs := onRanks(g, func(c *Comm) error {
		return Scan(ctx, c, []float32{1}, make([]float32, 1), Mean)
	})
	for r, err := range errs {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("rank %d: Scan Mean: %v, want ErrInvalidArgument", r, err)
		}
	}
	recv := []int64{-1, -1}
	errs = onRanks(g, func(c *Comm) error {
		if c.Rank() == 1 {
			return Exscan(ctx, c, []int64{1}, []int64{-1, -1}, Sum)
		}
		return Exscan(ctx, c, []int64{1, 2}, recv, Sum)
	})
	if !errors.Is(errs[1], ErrInvalidArgument) || errs[0] == nil || errs[2] == nil {
		t.Fatalf("lengths that differ: %v", errs)
	}
	if !slices.Equal(recv, []int64{-1, -1}) {
		t.Fatalf("recv written by a failed Exscan: %v", recv)
	}
	outs := make([][]int64, 3)
	noErrors(t, onRanks(g, func(c *Comm) error {
		outs[c.Rank()] = make([]int64, 2)
		return ScanAsync(ctx, c, []int64{int64(c.Rank() + 1), 10}, outs[c.Rank()], Prod).Wait(ctx)
	}))
	for r, want := range [][]int64{{1, 10}, {2, 100}, {6, 1000}} {
		if !slices.Equal(outs[r], want) {
			t.Fatalf("ScanAsync Prod rank %d: %v, want %v", r, outs[r], want)
		}
	}
}

// TestBroadcastInto: out of place from a random root into every rank's
// recv, root in place or not, peers mixing Broadcast and BroadcastInto (one
// call); a length mismatch fails every rank with root's recv untouched.
func TestBroadcastInto(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 6))
	for _, bk := range backendsUnderTest(t) {
		for _, N := range []int{1, 2, 3, 4} {
			g := openGroup(t, bk, N, func(o *Options) { o.ChunkBytes = 256 })
			for tc := 0; tc < 3; tc++ {
				root, n := rng.IntN(N), []int{1, 33, 300}[tc]
				inPlace := tc == 1
				src := make([]float64, n)
				for e := range src {
					src[e] = float64(e) + 0.25
				}
				recvs := make([][]float64, N)
				noErrors(t, onRanks(g, func(c *Comm) error {
					r := c.Rank()
					recvs[r] = slices.Repeat([]float64{-7}, n)
					switch {
					case r == root && inPlace:
						recvs[r] = slices.Clone(src)
						return BroadcastInto(ctx, c, recvs[r], recvs[r], root)
					case r == root:
						return BroadcastInto(ctx, c, src, recvs[r], root)
					case r%2 == 1:
						return Broadcast(ctx, c, recvs[r], root) // the in-place form matches
					}
					return BroadcastIntoAsync(ctx, c, nil, recvs[r], root).Wait(ctx)
				}))
				for r := range recvs {
					if !slices.Equal(recvs[r], src) {
						t.Fatalf("%s N=%d root=%d inPlace=%v: rank %d got %v", bk, N, root, inPlace, r, recvs[r][:min(4, n)])
					}
				}
			}
			if N < 2 {
				continue
			}
			rootRecv := []float64{-7, -7}
			errs := onRanks(g, func(c *Comm) error {
				if c.Rank() == 0 {
					return BroadcastInto(ctx, c, []float64{1, 2}, rootRecv, 0)
				}
				return BroadcastInto(ctx, c, nil, make([]float64, 3), 0)
			})
			for r, err := range errs {
				var me *MismatchError
				if !errors.As(err, &me) {
					t.Fatalf("%s: rank %d: %v, want a *MismatchError", bk, r, err)
				}
			}
			if !slices.Equal(rootRecv, []float64{-7, -7}) {
				t.Fatalf("%s: root's recv written by a failed BroadcastInto: %v", bk, rootRecv)
			}
		}
	}
}
