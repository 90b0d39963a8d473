package kernels

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/host"
	"github.com/gocoll/gocoll/internal/hostmath"
)

// float32.glsl in Go, statement for statement (uint is uint32, findMSB is
// bits.Len32 - 1), checked against Go's float32 arithmetic, which keeps
// subnormals: the host backend's. The hardware paths run on the flushing
// model of divide_test.go (subnormal inputs and results become zeros), so
// the tests show the results do not depend on what a device does with
// subnormals.

const (
	f32Sign   = 0x80000000
	f32Abs    = 0x7FFFFFFF
	f32Inf    = 0x7F800000
	f32Quiet  = 0x00400000
	f32NewNaN = 0xFFC00000
)

func findMSB(x uint32) int { return bits.Len32(x) - 1 }

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// flush is the hardware of a device that flushes subnormals.
var flush = divideModel[float32]{ftz: true, scaled: true}

func f32AddSoft(a, b uint32) uint32 {
	aa, ab := a&f32Abs, b&f32Abs
	if aa > f32Inf {
		return a | f32Quiet
	}
	if ab > f32Inf {
		return b | f32Quiet
	}
	if aa == f32Inf {
		if ab == f32Inf && (a^b)&f32Sign != 0 {
			return f32NewNaN
		}
		return a
	}
	if ab == f32Inf {
		return b
	}
	if ab == 0 {
		if aa == 0 {
			return a & b
		}
		return a
	}
	if aa == 0 {
		return b
	}
	if ab > aa {
		a, b = b, a
		aa, ab = ab, aa
	}
	ea, eb := aa>>23, ab>>23
	ma, mb := aa&0x7FFFFF, ab&0x7FFFFF
	if ea != 0 {
		ma |= 0x800000
	} else {
		ea = 1
	}
	if eb != 0 {
		mb |= 0x800000
	} else {
		eb = 1
	}
	ma <<= 3
	mb <<= 3
	d := ea - eb
	if d >= 27 {
		mb = 1
	} else if d != 0 {
		mb = mb>>d | b2u(mb&(1<<d-1) != 0)
	}
	e := ea
	var m uint32
	if (a^b)&f32Sign == 0 {
		m = ma + mb
		if m >= 1<<27 {
			m = m>>1 | m&1
			e++
		}
	} else {
		m = ma - mb
		if m == 0 {
			return 0
		}
		sh := min(uint32(26-findMSB(m)), e-1)
		m <<= sh
		e -= sh
	}
	rem := m & 7
	m >>= 3
	if rem > 4 || rem == 4 && m&1 != 0 {
		m++
	}
	return a&f32Sign | min((e-1)<<23+m, f32Inf)
}

func f32Add(a, b uint32) uint32 {
	ea, eb := a>>23&0xFF, b>>23&0xFF
	if ea-25 <= 228 && eb-25 <= 228 {
		r := math.Float32bits(flush.add(math.Float32frombits(a), math.Float32frombits(b)))
		if r&f32Abs == 0 {
			return 0
		}
		return r
	}
	return f32AddSoft(a, b)
}

func f32MulSoft(a, b uint32) uint32 {
	sign := (a ^ b) & f32Sign
	aa, ab := a&f32Abs, b&f32Abs
	if aa > f32Inf {
		return a | f32Quiet
	}
	if ab > f32Inf {
		return b | f32Quiet
	}
	if aa == f32Inf {
		if ab == 0 {
			return f32NewNaN
		}
		return sign | f32Inf
	}
	if ab == f32Inf {
		if aa == 0 {
			return f32NewNaN
		}
		return sign | f32Inf
	}
	if aa == 0 || ab == 0 {
		return sign
	}
	ea, eb := int32(aa>>23), int32(ab>>23)
	ma, mb := aa&0x7FFFFF, ab&0x7FFFFF
	if ea == 0 {
		s := int32(23 - findMSB(ma))
		ma <<= s
		ea = 1 - s
	} else {
		ma |= 0x800000
	}
	if eb == 0 {
		s := int32(23 - findMSB(mb))
		mb <<= s
		eb = 1 - s
	} else {
		mb |= 0x800000
	}
	hi, lo := bits.Mul32(ma, mb) // umulExtended
	e := ea + eb - 127
	var m uint32
	if hi >= 0x8000 {
		m = hi<<16 | lo>>16 | b2u(lo&0xFFFF != 0)
		e++
	} else {
		m = hi<<17 | lo>>15 | b2u(lo&0x7FFF != 0)
	}
	if e >= 255 {
		return sign | f32Inf
	}
	if e < 1 {
		sh := uint32(1 - e)
		if sh >= 32 {
			m = 1
		} else {
			m = m>>sh | b2u(m&(1<<sh-1) != 0)
		}
		e = 1
	}
	rem := m & 0xFF
	m >>= 8
	if rem > 0x80 || rem == 0x80 && m&1 != 0 {
		m++
	}
	return sign | min(uint32(e-1)<<23+m, f32Inf)
}

func f32Mul(a, b uint32) uint32 {
	ea, eb := a>>23&0xFF, b>>23&0xFF
	if ea-1 < 254 && eb-1 < 254 && ea+eb-128 <= 251 {
		return math.Float32bits(flush.mul(math.Float32frombits(a), math.Float32frombits(b)))
	}
	return f32MulSoft(a, b)
}

func f32Key(x uint32) uint32 {
	if x&f32Sign != 0 {
		return ^x
	}
	return x | f32Sign
}

func f32Max(a, b uint32) uint32 {
	if a&f32Abs > f32Inf {
		return a
	}
	if b&f32Abs > f32Inf {
		return b
	}
	if f32Key(a) >= f32Key(b) {
		return a
	}
	return b
}

func f32Min(a, b uint32) uint32 {
	if a&f32Abs > f32Inf {
		return a
	}
	if b&f32Abs > f32Inf {
		return b
	}
	if f32Key(a) <= f32Key(b) {
		return a
	}
	return b
}

// f32Div runs divide.glsl on the model m.
func f32Div(m divideModel[float32], x, div uint32, r float32) uint32 {
	ax := x & f32Abs
	if ax >= f32Inf || ax == 0 {
		return x
	}
	if divSmallF32(m, x, div) {
		return divideSmallF32(x, div)
	}
	return math.Float32bits(m.divide(math.Float32frombits(x), int(div), r))
}

func f16ToF32(h uint32) uint32 {
	sign := (h & 0x8000) << 16
	e, m := h>>10&0x1F, h&0x3FF
	if e == 0x1F {
		return sign | f32Inf | m<<13
	}
	if e == 0 {
		if m == 0 {
			return sign
		}
		s := 10 - findMSB(m)
		return sign | uint32(113-s)<<23 | (m<<s&0x3FF)<<13
	}
	return sign | (e+112)<<23 | m<<13
}

func f32ToF16(b uint32) uint32 {
	sign := b >> 16 & 0x8000
	exp, mant := b>>23&0xFF, b&0x7FFFFF
	if exp == 0xFF {
		if mant != 0 {
			return sign | 0x7E00 | mant>>13
		}
		return sign | 0x7C00
	}
	e := int32(exp) - 127 + 15
	if e >= 0x1F {
		return sign | 0x7C00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint32(14 - e)
		r, rem, half := m>>shift, m&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || rem == half && r&1 != 0 {
			r++
		}
		return sign | r
	}
	r, rem := uint32(e)<<10|mant>>13, mant&0x1FFF
	if rem > 0x1000 || rem == 0x1000 && r&1 != 0 {
		r++
	}
	return sign | r
}

func f32ToBF16(b uint32) uint32 {
	if b&f32Abs > f32Inf {
		return b>>16 | 0x40
	}
	return (b + 0x7FFF + b>>16&1) >> 16
}

// drawF32 returns binary32 bits that exercise every path: specials, zeros,
// subnormals, the lowest and highest binades, the fast paths' edges, bits
// of bfloat16 and binary16 values, and any bits.
func drawF32(r *rand.Rand) uint32 {
	sign := uint32(r.IntN(2)) << 31
	switch r.IntN(12) {
	case 0:
		sp := []uint32{0, f32Inf, 0x7FC00000, 0x7F800001, 0x7FBFFFFF, 1, 0x7FFFFF, 0x800000, 0x7F7FFFFF, 0x3F800000, 0x00400000, 0x00000003}
		return sign | sp[r.IntN(len(sp))]
	case 1, 2: // subnormal
		return sign | r.Uint32()&0x7FFFFF>>r.IntN(23)
	case 3, 4: // the lowest binades: exponents 0..40
		return sign | uint32(r.IntN(41))<<23 | r.Uint32()&0x7FFFFF
	case 5: // the highest: 215..254
		return sign | uint32(215+r.IntN(40))<<23 | r.Uint32()&0x7FFFFF
	case 6: // the fast paths' edges
		e := []int{1, 2, 24, 25, 26, 63, 64, 65, 100, 101, 102, 126, 127, 128, 190, 191, 252, 253, 254}
		return sign | uint32(e[r.IntN(len(e))])<<23 | r.Uint32()&0x7FFFFF>>r.IntN(24)
	case 7: // bfloat16 bits
		return uint32(uint16(r.Uint32())) << 16
	case 8: // binary16 bits
		return f16ToF32(r.Uint32() & 0xFFFF)
	case 9: // few significant bits: exact sums, ties
		return sign | uint32(r.IntN(255))<<23 | (r.Uint32()&0x7FFFFF)&^(1<<r.IntN(23)-1)
	}
	return r.Uint32()
}

func isNaN32(x uint32) bool { return x&f32Abs > f32Inf }

// same reports whether got is want, or both NaN.
func same(got, want uint32) bool { return got == want || isNaN32(got) && isNaN32(want) }

// TestFloat32Arith: float32.glsl's add and mul, hardware paths flushing,
// against Go's float32 + and * (and the soft paths alone on every input);
// max and min against the host's maximum and minimum; NaN results are
// quiet and propagate the first NaN input.
func TestFloat32Arith(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 3000000
	if testing.Short() {
		n = 300000
	}
	bad := 0
	fail := func(format string, args ...any) {
		bad++
		if bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for range n {
		a, b := drawF32(r), drawF32(r)
		fa, fb := math.Float32frombits(a), math.Float32frombits(b)
		sum := math.Float32bits(fa + fb)
		prod := math.Float32bits(fa * fb)
		for _, c := range []struct {
			name      string
			got, want uint32
		}{
			{"add", f32Add(a, b), sum},
			{"add soft", f32AddSoft(a, b), sum},
			{"mul", f32Mul(a, b), prod},
			{"mul soft", f32MulSoft(a, b), prod},
		} {
			if !same(c.got, c.want) {
				fail("%s(%#08x, %#08x) = %#08x, want %#08x (%g, %g)", c.name, a, b, c.got, c.want, fa, fb)
			}
			if isNaN32(c.got) && c.got&f32Quiet == 0 {
				fail("%s(%#08x, %#08x) = %#08x: a signalling NaN", c.name, a, b, c.got)
			}
			if isNaN32(c.want) && (isNaN32(a) && c.got != a|f32Quiet || !isNaN32(a) && isNaN32(b) && c.got != b|f32Quiet) {
				fail("%s(%#08x, %#08x) = %#08x: not the first NaN input, quieted", c.name, a, b, c.got)
			}
		}
		if got, want := f32Max(a, b), hostMax(a, b); got != want {
			fail("max(%#08x, %#08x) = %#08x, want %#08x", a, b, got, want)
		}
		if got, want := f32Min(a, b), hostMin(a, b); got != want {
			fail("min(%#08x, %#08x) = %#08x, want %#08x", a, b, got, want)
		}
	}
	if bad > 0 {
		t.Fatalf("%d wrong results", bad)
	}
}

// hostMax and hostMin are host/exec.go's maximum and minimum on bits.
func hostMax(a, b uint32) uint32 {
	fa, fb := math.Float32frombits(a), math.Float32frombits(b)
	switch {
	case fa != fa:
		return a
	case fb != fb:
		return b
	case fa == fb:
		if a&f32Sign != 0 {
			return b
		}
		return a
	case fa > fb:
		return a
	}
	return b
}

func hostMin(a, b uint32) uint32 {
	fa, fb := math.Float32frombits(a), math.Float32frombits(b)
	switch {
	case fa != fa:
		return a
	case fb != fb:
		return b
	case fa == fb:
		if a&f32Sign != 0 {
			return a
		}
		return b
	case fa < fb:
		return a
	}
	return b
}

// TestFloat32Div: f32_div against the host's float32(float64(x) / N) for
// every kind of x, subnormal quotients included, bit for bit, with
// subnormals kept and flushed by the hardware.
func TestFloat32Div(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	divisors := []uint32{1, 2, 3, 5, 7, 9, 17, 100, 4095, 4096, 6144, 4095 << 8, 1 << 20, 1048320}
	n := 1000000
	if testing.Short() {
		n = 100000
	}
	bad := 0
	for i := range n {
		x := drawF32(r)
		div := divisors[i%len(divisors)]
		if i%3 == 0 {
			div = uint32(2 + r.IntN(1<<12))
		}
		want := math.Float32bits(float32(float64(math.Float32frombits(x)) / float64(div)))
		for _, m := range []divideModel[float32]{flush, {scaled: true}} {
			if got := f32Div(m, x, div, float32(1/float64(div))); !same(got, want) {
				bad++
				if bad <= 10 {
					t.Errorf("ftz %v: %#08x / %d = %#08x, want %#08x (%g)", m.ftz, x, div, got, want, math.Float32frombits(want))
				}
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d wrong quotients", bad)
	}
}

// TestFloat16Conversions: the widening and rounding of float32.glsl against
// the host's F16ToF32, F32ToF16 and F32ToBF16: every binary16 value, and
// binary32 values around every rounding point of both types.
func TestFloat16Conversions(t *testing.T) {
	for h := uint32(0); h < 1<<16; h++ {
		if got, want := f16ToF32(h), math.Float32bits(host.F16ToF32(uint16(h))); got != want {
			t.Fatalf("f16_to_f32(%#04x) = %#08x, want %#08x", h, got, want)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	check := func(b uint32) {
		if got, want := f32ToF16(b), uint32(host.F32ToF16(math.Float32frombits(b))); got != want {
			t.Fatalf("f32_to_f16(%#08x) = %#04x, want %#04x", b, got, want)
		}
		if got, want := f32ToBF16(b), uint32(host.F32ToBF16(math.Float32frombits(b))); got != want {
			t.Fatalf("f32_to_bf16(%#08x) = %#04x, want %#04x", b, got, want)
		}
	}
	// Every exponent and sign, with the bits below each type's last kept bit
	// just below, at and above half, and random.
	for top := uint32(0); top < 1<<9; top++ {
		for _, low := range []uint32{0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x10000, 0x7FFFFF, 0x400000} {
			for range 4 {
				check(top<<23 | (low+r.Uint32()&0x7FFFFF&^0x1FFFF)&0x7FFFFF)
				check(top<<23 | low)
			}
		}
	}
	for range 2000000 {
		check(drawF32(r))
	}
}

// e4m3ToF32, e5m2ToF32 and f32ToF8 are float32.glsl's e4m3_to_f32,
// e5m2_to_f32 and f32_to_f8, step for step.
func e4m3ToF32(h uint32) uint32 {
	sign := (h & 0x80) << 24
	e, m := h>>3&0xF, h&7
	if h&0x7F == 0x7F {
		return sign | 0x7FC00000
	}
	if e == 0 {
		if m == 0 {
			return sign
		}
		s := 3 - (bits.Len32(m) - 1)
		return sign | uint32(121-s)<<23 | (m<<s&7)<<20
	}
	return sign | (e+120)<<23 | m<<20
}

func e5m2ToF32(h uint32) uint32 {
	sign := (h & 0x80) << 24
	e, m := h>>2&0x1F, h&3
	if e == 0x1F {
		return sign | 0x7F800000 | m<<21
	}
	if e == 0 {
		if m == 0 {
			return sign
		}
		s := 2 - (bits.Len32(m) - 1)
		return sign | uint32(113-s)<<23 | (m<<s&3)<<21
	}
	return sign | (e+112)<<23 | m<<21
}

func f32ToF8(b, mbits uint32, bias int, maxb uint32, inf bool) uint32 {
	sign := b >> 24 & 0x80
	a := b & 0x7FFFFFFF
	if a > 0x7F800000 {
		if inf {
			return sign | 0x7E | a>>(23-mbits)&3
		}
		return sign | 0x7F
	}
	if a == 0x7F800000 {
		if inf {
			return sign | 0x7C
		}
		return sign | maxb
	}
	exp := int(a >> 23)
	if exp == 0 {
		return sign
	}
	m := a&0x7FFFFF | 0x800000
	e := exp - 127 + bias
	shift := 23 - mbits
	if e <= 0 {
		shift += uint32(1 - e)
		e = 0
		if shift > 24 {
			return sign
		}
	}
	r := m >> shift
	if e > 0 {
		r = uint32(e)<<mbits | r&(1<<mbits-1)
	}
	rem, half := m&(1<<shift-1), uint32(1)<<(shift-1)
	if rem > half || rem == half && r&1 != 0 {
		r++
	}
	return sign | min(r, maxb)
}

// TestFloat8Conversions: the fp8 widening and rounding of float32.glsl
// against the host's E4M3ToF32, E5M2ToF32, F32ToE4M3 and F32ToE5M2: every
// fp8 value, and binary32 values around every rounding point of both.
func TestFloat8Conversions(t *testing.T) {
	for h := uint32(0); h < 256; h++ {
		if got, want := e4m3ToF32(h), math.Float32bits(hostmath.E4M3ToF32(uint8(h))); got != want {
			t.Fatalf("e4m3_to_f32(%#02x) = %#08x, want %#08x", h, got, want)
		}
		if got, want := e5m2ToF32(h), math.Float32bits(hostmath.E5M2ToF32(uint8(h))); got != want {
			t.Fatalf("e5m2_to_f32(%#02x) = %#08x, want %#08x", h, got, want)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	check := func(b uint32) {
		if got, want := f32ToF8(b, 3, 7, 0x7E, false), uint32(hostmath.F32ToE4M3(math.Float32frombits(b))); got != want {
			t.Fatalf("f32_to_e4m3(%#08x) = %#02x, want %#02x", b, got, want)
		}
		if got, want := f32ToF8(b, 2, 15, 0x7B, true), uint32(hostmath.F32ToE5M2(math.Float32frombits(b))); got != want {
			t.Fatalf("f32_to_e5m2(%#08x) = %#02x, want %#02x", b, got, want)
		}
	}
	for top := uint32(0); top < 1<<9; top++ {
		for _, low := range []uint32{0, 1, 0x7FFFF, 0x80000, 0x80001, 0xFFFFF, 0x100000, 0x100001, 0x1FFFFF, 0x200000, 0x200001, 0x3FFFFF, 0x400000, 0x7FFFFF} {
			check(top<<23 | low)
			check(top<<23 | (low+r.Uint32()&0x7FFFF)&0x7FFFFF)
		}
	}
	for range 1000000 {
		check(drawF32(r))
	}
}
