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
