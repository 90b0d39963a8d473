package hostmath

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// TestCombinePacked checks Combine's Sum and Prod of float32 and float64
// (the assembly loops on amd64: packed, then element by element) bit for
// bit against Go's scalar operations, element by element (of two NaNs: on
// amd64 acc's, whichever order Go's compiler gives its own loop;
// elsewhere either), on values drawn from every class: NaNs with payloads
// in both operands, infinities, signed zeros, subnormals whose sums and
// products stay subnormal or cross into the normals, and normals; lengths
// around the packed loop's 16 and 8 elements, at unaligned offsets.
func TestCombinePacked(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000, 1027} {
		for off := 0; off < 3; off++ {
			for _, op := range []backend.Op{backend.Sum, backend.Prod} {
				checkPacked(t, rng, op, n, off, bits32, math.Float32frombits, math.Float32bits, 1<<22)
				checkPacked(t, rng, op, n, off, bits64, math.Float64frombits, math.Float64bits, 1<<51)
			}
		}
	}
}

func checkPacked[T Float, B uint32 | uint64](t *testing.T, rng *rand.Rand, op backend.Op, n, off int,
	draw func(*rand.Rand) B, from func(B) T, to func(T) B, quiet B) {
	t.Helper()
	acc, x := make([]T, n+off), make([]T, n+off)
	for i := range acc {
		acc[i], x[i] = from(draw(rng)), from(draw(rng))
	}
	want, alt := make([]B, n), make([]B, n)
	for i := range want {
		a, b := acc[off+i], x[off+i]
		if op == backend.Sum {
			want[i] = to(T(a + b))
		} else {
			want[i] = to(T(a * b))
		}
		alt[i] = want[i]
		if a != a && b != b { // two NaNs: acc's, quieted, on amd64; elsewhere either
			want[i], alt[i] = to(a)|quiet, to(b)|quiet
			if runtime.GOARCH == "amd64" {
				alt[i] = want[i]
			}
		}
	}
	Combine(op, acc[off:], x[off:])
	for i := range want {
		if got := to(acc[off+i]); got != want[i] && got != alt[i] {
			t.Fatalf("%v of %T, n=%d off=%d: element %d is %#x, want %#x", op, acc[0], n, off, i, got, want[i])
		}
	}
}

// bits32 draws a float32's bits from every class of values.
func bits32(rng *rand.Rand) uint32 {
	sign := uint32(rng.IntN(2)) << 31
	switch rng.IntN(8) {
	case 0:
		return sign | 0x7f800000 | uint32(1+rng.IntN(1<<23-1)) // NaN with a payload
	case 1:
		return sign | 0x7f800000 // infinity
	case 2:
		return sign // zero
	case 3:
		return sign | uint32(1+rng.IntN(1<<23-1)) // subnormal
	case 4:
		return sign | uint32(1+rng.IntN(3))<<23 | uint32(rng.IntN(1<<23)) // smallest normals
	}
	return sign | uint32(100+rng.IntN(56))<<23 | uint32(rng.IntN(1<<23))
}

// bits64 draws a float64's bits from every class of values.
func bits64(rng *rand.Rand) uint64 {
	sign := uint64(rng.IntN(2)) << 63
	const frac = 1<<52 - 1
	switch rng.IntN(8) {
	case 0:
		return sign | 0x7ff<<52 | (1 + rng.Uint64()%(frac-1))
	case 1:
		return sign | 0x7ff<<52
	case 2:
		return sign
	case 3:
		return sign | (1 + rng.Uint64()%(frac-1))
	case 4:
		return sign | uint64(1+rng.IntN(3))<<52 | rng.Uint64()&frac
	}
	return sign | uint64(1000+rng.IntN(48))<<52 | rng.Uint64()&frac
}
