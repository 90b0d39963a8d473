package kernels

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// reduce.comp's sum_fast in Go, statement for statement (keep the two in
// step), on the flushing model (flush: subnormal inputs and results become
// zeros): where it reports the element exact, its result must be the
// host's float32 sum in source order bit for bit, zeros' signs included;
// elsewhere the kernel runs the exact fallback (sum_slow).

const (
	sumFastLo2  = uint32(25<<24) - 2 // FAST_LO2
	sumFastInf2 = uint32(0xFF000000) // FAST_INF2
)

func sumFast(xs []uint32) (uint32, bool) {
	x := xs[0]
	t := x + x
	lo, hi, all := t-2, t, x
	f := math.Float32frombits(x)
	for _, x := range xs[1:] {
		t = x + x
		lo = min(lo, t-2)
		hi = max(hi, t)
		all &= x
		f = flush.add(f, math.Float32frombits(x))
	}
	acc := math.Float32bits(f)
	if acc&f32Abs == 0 { // FAST_ZERO
		acc = all & f32Sign
	}
	return acc, sumFastLo2 <= lo && hi < sumFastInf2 && acc&f32Abs < f32Inf
}

// TestSumFastRange checks sum_fast's per-input range check: an input passes
// exactly where it is a zero or finite with a biased exponent of at least
// 25. Every exponent, sign and edge fraction; with GOCOLL_TEST_FULL=1 every
// 32-bit value.
func TestSumFastRange(t *testing.T) {
	check := func(x uint32) {
		e := x & f32Abs >> 23
		want := x&f32Abs == 0 || e >= 25 && e < 255
		if _, got := sumFast([]uint32{x}); x&f32Abs < f32Inf && got != want || x&f32Abs >= f32Inf && got {
			t.Fatalf("%#08x: the fast path accepts it: %v, want %v", x, got, want)
		}
		if got := sumFastLo2 <= x+x-2 && x+x < sumFastInf2; got != want {
			t.Fatalf("%#08x: the range check gives %v, want %v", x, got, want)
		}
	}
	if os.Getenv("GOCOLL_TEST_FULL") != "" {
		for x := uint64(0); x < 1<<32; x++ {
			check(uint32(x))
		}
		return
	}
	r := rand.New(rand.NewPCG(0x5f, 0xa57))
	for e := uint32(0); e < 256; e++ {
		for _, m := range []uint32{0, 1, 2, 0x400000, 0x7FFFFE, 0x7FFFFF, uint32(r.IntN(1 << 23)), uint32(r.IntN(1 << 23))} {
			check(e<<23 | m)
			check(f32Sign | e<<23 | m)
		}
	}
}

// TestSumFastExact draws sums of 1 to 8 sources at the edges of the fast
// path's range (as backendtest's SumEdges does on devices) and checks that
// every sum the fast path takes is the host's bits, and that it takes most
// of the sums of values in its range.
func TestSumFastExact(t *testing.T) {
	seed := uint64(0x5fa57)
	r := rand.New(rand.NewPCG(seed, 2))
	t.Logf("seed %#x", seed)
	sign := func() uint32 { return uint32(r.IntN(2)) << 31 }
	fast := func() uint32 {
		e := 25 + uint32(r.IntN(230))
		switch r.IntN(4) {
		case 0:
			e = 25 + uint32(r.IntN(3))
		case 1:
			e = 250 + uint32(r.IntN(5))
		}
		return sign() | e<<23 | uint32(r.IntN(1<<23))
	}
	edges := []uint32{0, f32Sign, 1, 0x807FFFFF, f32Inf, f32Sign | f32Inf, 0x7FC00000, 0xFFC01234, 24 << 23, 26 << 23}
	n, taken, inRange := 200000, 0, 0
	if os.Getenv("GOCOLL_TEST_FULL") != "" {
		n *= 20
	}
	xs := make([]uint32, 8)
	for range n {
		k := 1 + r.IntN(8)
		x := xs[:k]
		all := true
		for j := range x {
			switch r.IntN(10) {
			case 0:
				x[j] = sign()
			case 1:
				x[j] = edges[r.IntN(len(edges))]
				all = false
			case 2: // near the low end of the range, on both sides of it
				e := 1 + uint32(r.IntN(30))
				x[j] = sign() | e<<23 | uint32(r.IntN(1<<23))
				all = all && e >= 25
			default:
				x[j] = fast()
			}
		}
		if k > 1 && r.IntN(4) == 0 { // cancel down to a few ulps of the smallest
			var acc float32
			for _, v := range x[:k-1] {
				acc += math.Float32frombits(v)
			}
			if b := math.Float32bits(-acc); b&f32Inf != f32Inf {
				x[k-1] = b + uint32(r.IntN(3)) - 1
				all = all && b>>23&0xFF >= 25
			}
		}
		want := math.Float32frombits(x[0])
		for _, v := range x[1:] {
			want += math.Float32frombits(v)
		}
		got, ok := sumFast(x)
		if all && math.Float32bits(want)&f32Abs < f32Inf {
			inRange++
		}
		if !ok {
			continue
		}
		taken++
		if got != math.Float32bits(want) {
			t.Fatalf("sum of %#08x: the fast path gives %#08x, the host %#08x", x, got, math.Float32bits(want))
		}
	}
	if taken < inRange {
		t.Fatalf("the fast path took %d of the %d sums whose inputs are all in its range and whose result is finite", taken, inRange)
	}
	t.Logf("%d sums, %d on the fast path", n, taken)
}
