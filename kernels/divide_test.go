package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// divideModel is divide.glsl in Go, one correctly rounded operation at a
// time. With ftz it flushes as a device without shaderDenormPreserveFloat*
// may: every subnormal input reads as a zero of its sign, and every result
// whose exact value is below the least normal (tininess before rounding, the
// more eager choice) becomes a zero of its sign. scaled false leaves out the
// power-of-two scaling of small x (divide.glsl before it had one).
type divideModel[T float32 | float64] struct {
	ftz, scaled bool
}

func (m divideModel[T]) params() (minNormal, small, up, down T, keep uint64) {
	if _, ok := any(T(0)).(float32); ok {
		return T(math.Ldexp(1, -126)), T(math.Ldexp(1, -50)), T(math.Ldexp(1, 64)), T(math.Ldexp(1, -64)), 0xFFFFF000
	}
	return T(math.Ldexp(1, -1022)), T(math.Ldexp(1, -896)), T(math.Ldexp(1, 128)), T(math.Ldexp(1, -128)), 0xFFFFFFFFFC000000
}

// in flushes a subnormal input.
func (m divideModel[T]) in(v T) T {
	minNormal, _, _, _, _ := m.params()
	if m.ftz && v != 0 && abs(v) < minNormal {
		return T(math.Copysign(0, float64(v)))
	}
	return v
}

// out flushes a result whose exact value, exact - rounding error err (err
// of the sign of the rounded v minus the exact value), is subnormal.
func (m divideModel[T]) out(v T, below bool) T {
	minNormal, _, _, _, _ := m.params()
	if m.ftz && v != 0 && (abs(v) < minNormal || abs(v) == minNormal && below) {
		return T(math.Copysign(0, float64(v)))
	}
	return v
}

func (m divideModel[T]) mul(a, b T) T {
	a, b = m.in(a), m.in(b)
	p := T(a * b)
	// The product of two float32 is exact in float64, and FMA gives the
	// float64 product's rounding error: is |a*b| below |p|?
	d := math.FMA(float64(a), float64(b), -float64(p))
	return m.out(p, p > 0 && d < 0 || p < 0 && d > 0)
}

// add and sub: a sum near the least normal is exact (both are multiples of
// the least subnormal), so flushing the rounded value is the same.
func (m divideModel[T]) add(a, b T) T { return m.out(T(m.in(a)+m.in(b)), false) }
func (m divideModel[T]) sub(a, b T) T { return m.out(T(m.in(a)-m.in(b)), false) }

func (m divideModel[T]) highBits(v T) T {
	_, _, _, _, keep := m.params()
	switch v := any(v).(type) {
	case float32:
		return T(math.Float32frombits(math.Float32bits(v) & uint32(keep)))
	case float64:
		return T(math.Float64frombits(math.Float64bits(v) & keep))
	}
	panic("unreachable")
}

func abs[T float32 | float64](v T) T { return T(math.Abs(float64(v))) }

// divide is divide.glsl's divide for one component.
func (m divideModel[T]) divide(x T, div int, r T) T {
	minNormal, small, up, down, _ := m.params()
	n := T(div)
	a := abs(m.in(x))
	s, d := T(1), T(1)
	if m.scaled && a < small && !(a < m.mul(n, minNormal)) {
		s, d = up, down
	}
	xs := m.mul(x, s)
	q := m.mul(xs, r)
	qh := m.highBits(q)
	ql := m.sub(q, qh)
	e := m.add(m.sub(m.mul(qh, n), xs), m.mul(ql, n))
	q1 := m.sub(q, m.mul(e, r))
	if math.IsInf(float64(q), 0) {
		q1 = q
	}
	return m.mul(q1, d)
}

// TestDivideModel checks divide.glsl's argument on its Go model: x/N
// correctly rounded for every normal quotient, subnormals kept or flushed,
// for x from the least normal up (small ones most), and N among the
// divisors backend.Divisor accepts; a subnormal quotient is within 1 ulp
// where subnormals are kept, and within 1 ulp or 0 where flushed. Without
// the scaling of small x, flushing gets some normal quotients wrong.
func TestDivideModel(t *testing.T) {
	t.Run("f32", func(t *testing.T) { divideModelCase[float32](t, 24, -126, 127) })
	t.Run("f64", func(t *testing.T) { divideModelCase[float64](t, 53, -1022, 1023) })
}

func divideModelCase[T float32 | float64](t *testing.T, prec, emin, emax int) {
	r := rand.New(rand.NewPCG(7, uint64(prec)))
	divisors := []int{2, 3, 5, 7, 9, 17, 100, 4095, 4096, 6144, 4095 << 8, 1 << 20, 1048320}
	for len(divisors) < 100 {
		n, odd := 2+r.IntN(1<<20-1), 0
		for odd = n; odd%2 == 0; odd /= 2 {
		}
		if odd < 1<<12 {
			divisors = append(divisors, n)
		}
	}
	minNormal := math.Ldexp(1, emin)
	unscaledWrong := map[bool]int{}
	for _, ftz := range []bool{false, true} {
		m := divideModel[T]{ftz: ftz, scaled: true}
		old := divideModel[T]{ftz: ftz}
		bad := 0
		for i := range 400000 {
			div := divisors[r.IntN(len(divisors))]
			// Exponents: mostly the lowest 160 binades, else any.
			e := emin + r.IntN(160)
			if i%4 == 0 {
				e = emin + r.IntN(emax-emin)
			}
			mant := 1 + r.Float64()
			if i%8 == 1 {
				mant = float64(1 + r.IntN(16)) // small integers times 2^e
			}
			x := T(math.Ldexp(mant, e))
			if r.IntN(2) == 0 {
				x = -x
			}
			want := T(float64(x) / float64(div)) // f32: rounded twice, innocuous
			got := m.divide(x, div, T(1/float64(div)))
			ulp := math.Ldexp(1, max(math.Ilogb(math.Abs(float64(want))), emin)-prec+1)
			if math.Abs(float64(want)) >= minNormal {
				if got != want {
					bad++
					if bad <= 5 {
						t.Errorf("ftz %v: %v / %d = %v, want %v", ftz, x, div, got, want)
					}
				}
				if old.divide(x, div, T(1/float64(div))) != want {
					unscaledWrong[ftz]++
				}
			} else if d := math.Abs(float64(got) - float64(x)/float64(div)); d > ulp && !(ftz && got == 0) {
				bad++
				if bad <= 5 {
					t.Errorf("ftz %v: %v / %d = %v, subnormal quotient %v: %.3g ulp", ftz, x, div, got, want, d/ulp)
				}
			}
		}
		if bad > 0 {
			t.Errorf("ftz %v: %d quotients wrong", ftz, bad)
		}
	}
	if unscaledWrong[true] == 0 {
		t.Error("without the scaling every normal quotient is correctly rounded, also flushed: the model flushes nothing")
	}
	t.Logf("without the scaling: %d normal quotients wrong (subnormals kept), %d (flushed)", unscaledWrong[false], unscaledWrong[true])
}

// divideSmallF32 is divide.glsl's divide_small_f32: x / N for 0 < |x| < N *
// 2^-126, by integer long division in units of 2^-149.
func divideSmallF32(x, div uint32) uint32 {
	ax := x & 0x7FFFFFFF
	e, m, s := ax>>23, ax&0x7FFFFF, uint32(0)
	if e != 0 {
		m |= 0x800000
		s = e - 1
	}
	q, rem := m/div, m%div
	for i := uint32(0); i < s; i++ {
		rem <<= 1
		q <<= 1
		if rem >= div {
			rem -= div
			q |= 1
		}
	}
	if 2*rem > div || 2*rem == div && q&1 != 0 {
		q++
	}
	return x&0x80000000 | q
}

// divSmallF32 is div_small_f32, its limit N * 2^-126 computed on the model's
// hardware.
func divSmallF32(m divideModel[float32], x, div uint32) bool {
	ax := x & 0x7FFFFFFF
	return ax != 0 && ax < math.Float32bits(m.mul(float32(div), float32(math.Ldexp(1, -126))))
}

// divideSmallF64 is divide_small_f64 on the two words of float64 bits.
func divideSmallF64(lo, hi0, div uint32) (uint32, uint32) {
	hi := hi0 & 0x7FFFFFFF
	e, mhi, s := hi>>20, hi&0xFFFFF, uint32(0)
	if e != 0 {
		mhi |= 0x100000
		s = e - 1
	}
	var rem, qhi, qlo uint32
	for i := uint32(0); i < 53+s; i++ {
		bit := uint32(0)
		if i < 21 {
			bit = mhi >> (20 - i) & 1
		} else if i < 53 {
			bit = lo >> (52 - i) & 1
		}
		rem = rem<<1 | bit
		qhi = qhi<<1 | qlo>>31
		qlo <<= 1
		if rem >= div {
			rem -= div
			qlo |= 1
		}
	}
	if 2*rem > div || 2*rem == div && qlo&1 != 0 {
		qlo++
		if qlo == 0 {
			qhi++
		}
	}
	return qlo, hi0&0x80000000 | qhi
}

// divSmallF64 is div_small_f64.
func divSmallF64(m divideModel[float64], lo, hi, div uint32) bool {
	lim := math.Float64bits(m.mul(float64(div), math.Ldexp(1, -1022)))
	limLo, limHi := uint32(lim), uint32(lim>>32)
	hi &= 0x7FFFFFFF
	return hi|lo != 0 && (hi < limHi || hi == limHi && lo < limLo)
}

// divideExact is divide.glsl's divide_exact for one component on the model
// m: divide, then divide_small_* where the quotient is below the least
// normal.
func divideExact[T float32 | float64](m divideModel[T], x T, div uint32) T {
	q := m.divide(x, int(div), T(1/float64(div)))
	switch v := any(x).(type) {
	case float32:
		b := math.Float32bits(v)
		if divSmallF32(any(m).(divideModel[float32]), b, div) {
			return T(math.Float32frombits(divideSmallF32(b, div)))
		}
	case float64:
		b := math.Float64bits(v)
		lo, hi := uint32(b), uint32(b>>32)
		if divSmallF64(any(m).(divideModel[float64]), lo, hi, div) {
			qlo, qhi := divideSmallF64(lo, hi, div)
			return T(math.Float64frombits(uint64(qhi)<<32 | uint64(qlo)))
		}
	}
	return q
}

// TestDivideExact: divide_exact on its model, subnormals kept and flushed,
// is the correctly rounded x/N (the host's float32(float64(x) / N), and
// float64 division) for every finite x, subnormal quotients and subnormal
// x included, bit for bit, zeros keeping their sign.
func TestDivideExact(t *testing.T) {
	t.Run("f32", func(t *testing.T) {
		divideExactCase(t, func(r *rand.Rand) float32 { return math.Float32frombits(drawF32(r)) },
			func(x float32, div uint32) float32 { return float32(float64(x) / float64(div)) })
	})
	t.Run("f64", func(t *testing.T) {
		divideExactCase(t, drawF64, func(x float64, div uint32) float64 { return x / float64(div) })
	})
}

func divideExactCase[T float32 | float64](t *testing.T, draw func(*rand.Rand) T, host func(T, uint32) T) {
	r := rand.New(rand.NewPCG(11, 12))
	divisors := []uint32{1, 2, 3, 5, 7, 9, 17, 100, 4095, 4096, 6144, 4095 << 8, 1 << 20, 1048320}
	n := 400000
	if testing.Short() {
		n = 50000
	}
	bad, small := 0, 0
	for i := range n {
		x := draw(r)
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			continue
		}
		div := divisors[i%len(divisors)]
		if i%3 == 0 {
			div = uint32(2 + r.IntN(1<<12))
		}
		want := host(x, div)
		if want != 0 && float64(abs(want)) < minNormalOf[T]() {
			small++
		}
		for _, m := range []divideModel[T]{{ftz: true, scaled: true}, {scaled: true}} {
			got := divideExact(m, x, div)
			if got != want || math.Signbit(float64(got)) != math.Signbit(float64(want)) {
				bad++
				if bad <= 10 {
					t.Errorf("ftz %v: %g / %d = %g, want %g", m.ftz, x, div, got, want)
				}
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d wrong quotients", bad)
	}
	if small < n/100 {
		t.Fatalf("only %d of %d quotients subnormal: the draw misses divide_small", small, n)
	}
}

func minNormalOf[T float32 | float64]() float64 {
	if _, ok := any(T(0)).(float32); ok {
		return 0x1p-126
	}
	return 0x1p-1022
}

// drawF64 returns float64 values over every path of divide_exact: zeros,
// subnormals, the lowest binades (quotients below the least normal), any
// exponent, and any bits.
func drawF64(r *rand.Rand) float64 {
	sign := 1.0
	if r.IntN(2) == 0 {
		sign = -1
	}
	switch r.IntN(6) {
	case 0:
		return math.Copysign(0, sign)
	case 1: // subnormal
		return sign * math.Float64frombits(1+r.Uint64N(1<<52-1))
	case 2, 3: // the lowest 40 binades
		return sign * math.Ldexp(1+r.Float64(), -1022+r.IntN(40))
	case 4:
		return sign * math.Ldexp(1+r.Float64(), -1022+r.IntN(2046))
	}
	return math.Float64frombits(r.Uint64())
}
