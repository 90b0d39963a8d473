package collective

import (
	"math"
	"math/rand/v2"
	"testing"
)

// format8 is an OCP 8-bit float format, converted here independently of
// the library's conversions (hostmath, which its kernels mirror): p bits of
// precision, bias bias, emin the least normal exponent, maxFin the largest
// finite value and maxBits its bits; inf: E5M2, whose exponent field of all
// ones holds +-Inf and NaNs (E4M3FN: only S.1111.111 is NaN).
type format8 struct {
	p, bias, emin int
	maxFin        float64
	maxBits       uint8
	inf           bool
}

var (
	e4m3 = format8{p: 4, bias: 7, emin: -6, maxFin: 448, maxBits: 0x7e}
	e5m2 = format8{p: 3, bias: 15, emin: -14, maxFin: 57344, maxBits: 0x7b, inf: true}
)

// ebits is the width of the exponent field.
func (f format8) ebits() int { return 8 - f.p }

// decode returns the value of bits v.
func (f format8) decode(v uint8) float64 {
	m := uint64(v) & (1<<(f.p-1) - 1)
	e := int(v>>(f.p-1)) & (1<<f.ebits() - 1)
	x := finiteValue(m, e, f.p, f.bias, f.emin)
	switch {
	case f.inf && e == 1<<f.ebits()-1:
		if m != 0 {
			return math.NaN()
		}
		x = math.Inf(1)
	case !f.inf && v&0x7f == 0x7f:
		return math.NaN()
	}
	if v&0x80 != 0 {
		x = -x
	}
	return x
}

// encode rounds x to the format, to nearest even, a value that rounds
// beyond the largest finite one saturating to it (and +-Inf where the
// format has none): NCCL's __NV_SATFINITE. +-Inf stays +-Inf in E5M2; NaN
// gives the quiet NaN (S.1111.111 in E4M3, S.11111.10 in E5M2).
func (f format8) encode(x float64) uint8 {
	var sign uint8
	if math.Signbit(x) {
		sign, x = 0x80, -x
	}
	switch {
	case math.IsNaN(x):
		if f.inf {
			return 0x7e
		}
		return 0x7f
	case math.IsInf(x, 0):
		if f.inf {
			return sign | 0x7c
		}
		return sign | f.maxBits
	case x == 0:
		return sign
	}
	r, E := roundSig(x, f.p, f.emin)
	if r == 0 {
		return sign
	}
	if math.Ldexp(float64(r), E-(f.p-1)) > f.maxFin {
		return sign | f.maxBits
	}
	if r < 1<<(f.p-1) { // subnormal (E == emin)
		return sign | uint8(r)
	}
	return sign | uint8(E+f.bias)<<(f.p-1) | uint8(r)&^(1<<(f.p-1))
}

// TestFloat8Conversions checks Float8E4M3 and Float8E5M2 against format8:
// Float32 on all 256 bit patterns (NaNs as NaN), and the rounding of
// float32 values to each format on every value of the format, the ties
// between neighbours and the float32 values next to them, the subnormals,
// the overflow boundaries, +-0, +-Inf, NaNs, float32 subnormals and
// extremes, and millions of float32 bit patterns spread over every exponent.
func TestFloat8Conversions(t *testing.T) {
	arithmetic(t)
	for _, c := range []struct {
		name string
		f    format8
		to   func(uint8) float32
		from func(float32) uint8
	}{
		{"E4M3", e4m3, func(b uint8) float32 { return Float8E4M3FromBits(b).Float32() }, func(x float32) uint8 { return Float8E4M3From(x).Bits() }},
		{"E5M2", e5m2, func(b uint8) float32 { return Float8E5M2FromBits(b).Float32() }, func(x float32) uint8 { return Float8E5M2From(x).Bits() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			nans := 0
			for b := range 256 {
				got, want := float64(c.to(uint8(b))), c.f.decode(uint8(b))
				switch {
				case want != want:
					nans++
					if got == got {
						t.Errorf("%#02x: Float32 %v, want NaN", b, got)
					}
				case got != want || math.Signbit(got) != math.Signbit(want):
					t.Errorf("%#02x: Float32 %v, want %v", b, got, want)
				}
				if want == c.f.maxFin && b != int(c.f.maxBits) {
					t.Errorf("%#02x is the largest finite value; want %#02x", b, c.f.maxBits)
				}
			}
			if wantNaNs := map[bool]int{false: 2, true: 6}[c.f.inf]; nans != wantNaNs {
				t.Errorf("%d NaN patterns, want %d", nans, wantNaNs)
			}
			checked := 0
			check := func(x float32) {
				t.Helper()
				checked++
				got, want := c.from(x), c.f.encode(float64(x))
				if x != x {
					if v := c.f.decode(got); v == v {
						t.Fatalf("From(%v) = %#02x (%v), want a NaN", x, got, v)
					}
					return
				}
				if got != want {
					t.Fatalf("From(%v = %#08x) = %#02x (%v), want %#02x (%v)", x, math.Float32bits(x), got, c.f.decode(got), want, c.f.decode(want))
				}
			}
			both := func(x float32) { check(x); check(-x) }
			// Every value, the ties between neighbours and the float32
			// values on either side of each, and of each value.
			for b := range int(c.f.maxBits) + 1 {
				v := c.f.decode(uint8(b))
				both(float32(v))
				both(math.Nextafter32(float32(v), 0))
				both(math.Nextafter32(float32(v), float32(math.Inf(1))))
				if b < int(c.f.maxBits) {
					mid := float32((v + c.f.decode(uint8(b+1))) / 2) // exact: a tie
					both(mid)
					both(math.Nextafter32(mid, 0))
					both(math.Nextafter32(mid, float32(math.Inf(1))))
				}
			}
			// Beyond the largest: half an ulp above it (a tie with the
			// next exponent's first value), far beyond, the float32 extreme.
			ulp := c.f.maxFin - c.f.decode(c.f.maxBits-1)
			for _, x := range []float64{c.f.maxFin + ulp/2, c.f.maxFin + ulp, 2 * c.f.maxFin, 1e30, math.MaxFloat32} {
				both(float32(x))
				both(math.Nextafter32(float32(x), 0))
			}
			// Below the least subnormal: half of it (a tie with 0), a
			// quarter, float32 subnormals.
			least := c.f.decode(1)
			for _, x := range []float64{least / 2, least / 4, 3 * least / 4, 0x1p-149, 0x1p-126, 0} {
				both(float32(x))
			}
			both(float32(math.Inf(1)))
			check(float32(math.NaN()))
			check(math.Float32frombits(0xffc00001))
			check(math.Float32frombits(0x7f800001)) // signalling
			// Float32 bit patterns over every exponent, each with random low
			// bits.
			rng := rand.New(rand.NewPCG(1, 8))
			for hi := range uint32(1 << 21) {
				check(math.Float32frombits(hi<<11 | rng.Uint32()&0x7ff))
			}
			t.Logf("%d float32 values rounded", checked)
		})
	}
}
