package backendtest

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// testMean checks the scale a mean passes, 1/N for N = 1..8 (backend.Divisor):
// Reduce(Sum) of N sources and Scale of their sum, out of place and in
// place, must be within 1 ulp of the exact mean S/N, and in fact its
// correctly rounded value, computed with math/big; so must Scale by 1/N for
// larger N up to backend.MaxDivisor. The inputs are MeanInputs: every
// partial sum exact, no subnormal mean of up to 8 sources, tiny ones whose
// mean is normal but its ulp (and the kernels' remainders) subnormal, so
// that a device flushing subnormals must still get them right, and sums a
// multiply by the rounded 1/N gets more than 1 ulp wrong. Where a larger N
// makes the exact mean subnormal, it must be the correctly rounded
// subnormal too, also on a device that flushes subnormals (a kernel that
// flushes it to 0 fails). Lengths 1024 (whole 16-byte vectors:
// the 16-byte kernels, where a backend has them) and 1023 (the scalar
// kernels).
func testMean[T float](t *testing.T, s *suite) {
	dt := dtypeOf[T]()
	needDType(t, s.dev, dt)
	es := dt.Size()
	const maxN = 8
	dev, st := s.dev, s.dev.Stream()
	r := newRand(31 + uint64(dt))
	for _, n := range []int{1024, 1023} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			in := NewMeanInputs(r, dt, maxN, n)
			mant, exp, prec := in.Mant, in.Exp, in.Prec
			srcs := make([]backend.Region, maxN)
			for j := range mant {
				b := alloc(t, dev, n*es, alternate(j))
				writeT(t, b, 0, MeanValues[T](in, j))
				srcs[j] = backend.Region{Buf: b, Len: n * es}
			}
			// sum[N-1][i] is the exact sum of the first N sources.
			sum := make([][]int64, maxN)
			for N := 1; N <= maxN; N++ {
				sum[N-1] = make([]int64, n)
				for i := range n {
					for j := range N {
						sum[N-1][i] += mant[j][i]
					}
				}
			}
			type out struct {
				what string
				N    int
				buf  backend.Buffer
			}
			var outs []out
			var sums backend.Buffer // the sum of all maxN sources
			for N := 1; N <= maxN; N++ {
				scale := 1 / float64(N)
				whole := func(b backend.Buffer) backend.Region { return backend.Region{Buf: b, Len: n * es} }
				red := alloc(t, dev, n*es, backend.HostVisible)
				must(t, st.Reduce(backend.Sum, dt, whole(red), srcs[:N], scale), "Reduce")
				outs = append(outs, out{fmt.Sprintf("Reduce of %d sources", N), N, red})

				vals := make([]T, n)
				for i := range vals {
					vals[i] = T(math.Ldexp(float64(sum[N-1][i]), exp[i]))
				}
				sb := alloc(t, dev, n*es, backend.DeviceLocal)
				writeT(t, sb, 0, vals)
				if N == maxN {
					sums = alloc(t, dev, n*es, backend.DeviceLocal)
					writeT(t, sums, 0, vals)
				}
				sc := alloc(t, dev, n*es, backend.DeviceLocal)
				must(t, st.Scale(dt, whole(sc), whole(sb), scale), "Scale")
				outs = append(outs, out{fmt.Sprintf("Scale of the sum of %d", N), N, sc})
				must(t, st.Scale(dt, whole(sb), whole(sb), scale), "Scale in place")
				outs = append(outs, out{fmt.Sprintf("Scale in place of the sum of %d", N), N, sb})
			}
			// Larger N (Scale only): up to backend.MaxDivisor, odd parts up to
			// 2^12-1, applied to the sum of all maxN sources.
			for _, N := range []int{9, 17, 100, 4095, 4096, 6144, 4095 << 8, backend.MaxDivisor} {
				if backend.Divisor(1/float64(N)) != N {
					t.Fatalf("backend.Divisor(1/%d) = %d", N, backend.Divisor(1/float64(N)))
				}
				sc := alloc(t, dev, n*es, backend.HostVisible)
				must(t, st.Scale(dt, backend.Region{Buf: sc, Len: n * es}, backend.Region{Buf: sums, Len: n * es}, 1/float64(N)), "Scale")
				outs = append(outs, out{"Scale of the sum of 8", N, sc})
			}
			submitWait(t, st)

			for _, o := range outs {
				got := readT[T](t, o.buf, 0, n)
				m := &mismatches{t: t, what: fmt.Sprintf("%v %s by 1/%d", dt, o.what, o.N)}
				s := sum[min(o.N, maxN)-1]
				for i := range n {
					if sub, want := subnormalMean(s[i], exp[i], o.N, dt); sub {
						if float64(got[i]) != want || math.Signbit(float64(got[i])) != math.Signbit(want) {
							m.add("element %d: got %v, the exact subnormal mean %v rounds to %v", i, got[i], math.Ldexp(float64(s[i]), exp[i])/float64(o.N), want)
						}
						continue
					}
					want, ulps := MeanError(float64(got[i]), s[i], exp[i], o.N, prec)
					if ulps > 1 {
						m.add("element %d: got %v, %.3g ulp from the exact mean (nearest %v)", i, got[i], ulps, want)
					} else if float64(got[i]) != want {
						m.add("element %d: got %v, the exact mean rounds to %v (%.3g ulp)", i, got[i], want, ulps)
					}
				}
				m.done()
			}
		})
	}
	t.Run("Specials", func(t *testing.T) { testMeanSpecials[T](t, s) })
}

// MeanInputs are inputs whose means are exactly known: element i of source
// (rank) j is Mant[j][i] * 2^Exp[i], an integer of at most Prec-4 bits (the
// element type's precision less 4) times a power of two shared by the
// element's sources, so every partial sum of up to 16 sources is exact in
// the element type, in any order. The exponents range over 2^-90..2^90 (f32)
// or 2^-900..2^900 (f64) and the integers take either sign, so values are
// large, small and negative. Every 16th element is a small integer (exact
// or near-exact means); in every 16th plus one only source 0 is nonzero,
// 3*2^(Prec-2)+j for j in 0..7, a sum a multiply by float32(1/7) gets 1.14
// ulp wrong. Every 16th plus two (small integers) and plus three are tiny:
// exponents 2^-123..2^-100 (f32: values about 1e-37..1e-24) or
// 2^-1019..2^-996 (f64: about 1e-307..1e-285), so that no mean of up to 8
// sources is subnormal but many have a subnormal ulp (a mean of 2^20
// sources can be subnormal). Every other mean of up to 2^20 sources is normal.
type MeanInputs struct {
	Mant [][]int64
	Exp  []int
	Prec uint
}

// NewMeanInputs draws MeanInputs for sources sources of n elements of dt.
func NewMeanInputs(r *rand.Rand, dt backend.DType, sources, n int) MeanInputs {
	prec, maxExp, minNormalExp := uint(24), 90, -126
	if dt == backend.F64 {
		prec, maxExp, minNormalExp = 53, 900, -1022
	}
	in := MeanInputs{Mant: make([][]int64, sources), Exp: make([]int, n), Prec: prec}
	for i := range in.Exp {
		in.Exp[i] = r.IntN(2*maxExp+1) - maxExp
		if i%16 == 2 || i%16 == 3 { // tiny: a mean of 8 is at least 2^minNormalExp
			in.Exp[i] = minNormalExp + 3 + r.IntN(24)
		}
	}
	lim := int64(1) << (prec - 4)
	for j := range in.Mant {
		in.Mant[j] = make([]int64, n)
		for i := range n {
			m := r.Int64N(2*lim+1) - lim
			switch i % 16 {
			case 0, 2:
				m = r.Int64N(21) - 10
			case 1:
				m = 0
				if j == 0 {
					m = 3<<(prec-2) + int64(i/16%8)
				}
			}
			in.Mant[j][i] = m
		}
	}
	return in
}

// MeanValues returns source j of in as values of T.
func MeanValues[T float](in MeanInputs, j int) []T {
	v := make([]T, len(in.Exp))
	for i, m := range in.Mant[j] {
		v[i] = T(math.Ldexp(float64(m), in.Exp[i]))
	}
	return v
}

// subnormalMean reports whether the exact mean m*2^e/n is nonzero and below
// the least normal value of dt, and if so returns it rounded to nearest
// even in units of the least subnormal (a subnormal, or the least normal
// where it rounds up to it): the host's quotient.
func subnormalMean(m int64, e, n int, dt backend.DType) (sub bool, want float64) {
	prec, minNormalExp := 24, -126
	if dt == backend.F64 {
		prec, minNormalExp = 53, -1022
	}
	exact := new(big.Rat).SetFrac(big.NewInt(m), big.NewInt(int64(n)))
	exact.Mul(exact, pow2(e))
	abs := new(big.Rat).Abs(exact)
	if exact.Sign() == 0 || abs.Cmp(pow2(minNormalExp)) >= 0 {
		return false, 0
	}
	// |exact| / least subnormal = num/den, rounded to nearest even.
	least := minNormalExp - prec + 1
	units := new(big.Rat).Mul(abs, pow2(-least))
	q, r := new(big.Int).QuoRem(units.Num(), units.Denom(), new(big.Int))
	switch c := new(big.Int).Lsh(r, 1).Cmp(units.Denom()); {
	case c > 0, c == 0 && q.Bit(0) == 1:
		q.Add(q, big.NewInt(1))
	}
	want = math.Ldexp(float64(q.Int64()), least)
	if exact.Sign() < 0 {
		want = -want
	}
	return true, want
}

// pow2 returns 2^e.
func pow2(e int) *big.Rat {
	if e >= 0 {
		return new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(e)))
	}
	return new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), uint(-e)))
}

// MeanError returns the float of precision prec nearest to the exact mean
// m*2^e/n (m the exact sum of the integers), computed with math/big, and how
// many units in the last place of the exact mean's binade got lies from it.
func MeanError(got float64, m int64, e, n int, prec uint) (want, ulps float64) {
	num, den := big.NewInt(m), big.NewInt(int64(n))
	if e >= 0 {
		num.Lsh(num, uint(e))
	} else {
		den.Lsh(den, uint(-e))
	}
	exact := new(big.Rat).SetFrac(num, den)
	want, _ = new(big.Float).SetPrec(prec).SetMode(big.ToNearestEven).SetRat(exact).Float64()
	if exact.Sign() == 0 {
		if got == 0 {
			return 0, 0
		}
		return 0, math.Inf(1)
	}
	if math.IsNaN(got) || math.IsInf(got, 0) {
		return want, math.Inf(1)
	}
	// exact = mant * 2^bexp with 0.5 <= |mant| < 1: one ulp is 2^(bexp-prec).
	bexp := new(big.Float).SetPrec(256).SetRat(exact).MantExp(nil)
	diff := new(big.Rat).Sub(new(big.Rat).SetFloat64(got), exact)
	diff.Abs(diff)
	ulp := new(big.Rat)
	if k := bexp - int(prec); k >= 0 {
		ulp.SetInt(new(big.Int).Lsh(big.NewInt(1), uint(k)))
	} else {
		ulp.SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), uint(-k)))
	}
	ulps, _ = new(big.Rat).Quo(diff, ulp).Float64()
	return want, ulps
}

// testMeanSpecials checks that NaN and infinities propagate through a mean
// (Reduce of N sources by 1/N, and Scale by 1/N), that a sum that overflows
// stays infinite, and that a zero keeps its sign.
func testMeanSpecials[T float](t *testing.T, s *suite) {
	dt := dtypeOf[T]()
	es := dt.Size()
	nan, inf := T(math.NaN()), T(math.Inf(1))
	negZero := T(math.Copysign(0, -1))
	maxT := math.MaxFloat32
	if dt == backend.F64 {
		maxT = math.MaxFloat64
	}
	huge := T(maxT)
	// Hand-written: three sources, the mean's expected value.
	table := []struct{ a, b, c, want T }{
		{nan, 1, 2, nan}, {1, nan, 2, nan}, {1, 2, nan, nan},
		{inf, 1, 2, inf}, {1, -inf, 2, -inf}, {inf, -inf, 1, nan}, {inf, inf, inf, inf},
		{huge, huge, 0, inf}, {-huge, -huge, 1, -inf},
		{negZero, negZero, negZero, negZero}, {0, negZero, negZero, 0}, {3, 3, 3, 3},
	}
	cols := make([][]T, 3)
	for _, w := range table {
		cols[0], cols[1], cols[2] = append(cols[0], w.a), append(cols[1], w.b), append(cols[2], w.c)
	}
	n := len(table)
	dev, st := s.dev, s.dev.Stream()
	regs := make([]backend.Region, 3)
	for i, c := range cols {
		b := alloc(t, dev, n*es, backend.DeviceLocal)
		writeT(t, b, 0, c)
		regs[i] = backend.Region{Buf: b, Len: n * es}
	}
	red := alloc(t, dev, n*es, backend.HostVisible)
	must(t, st.Reduce(backend.Sum, dt, backend.Region{Buf: red, Len: n * es}, regs, 1.0/3), "Reduce")
	// Scale by 1/3 of the specials themselves, and of each N from 2 to 8.
	in := []T{nan, inf, -inf, negZero, 0, huge, -huge}
	m := len(in)
	src := alloc(t, dev, m*es, backend.DeviceLocal)
	writeT(t, src, 0, in)
	scaled := make([]backend.Buffer, 9)
	for N := 2; N <= 8; N++ {
		scaled[N] = alloc(t, dev, m*es, backend.HostVisible)
		must(t, st.Scale(dt, backend.Region{Buf: scaled[N], Len: m * es}, backend.Region{Buf: src, Len: m * es}, 1/float64(N)), "Scale")
	}
	submitWait(t, st)

	got := readT[T](t, red, 0, n)
	for i, w := range table {
		if !same(got[i], w.want) {
			t.Errorf("%v mean of (%v, %v, %v) = %v, want %v", dt, w.a, w.b, w.c, got[i], w.want)
		}
	}
	for N := 2; N <= 8; N++ {
		got := readT[T](t, scaled[N], 0, m)
		for i, v := range in {
			want := v
			if v == huge || v == -huge {
				want = T(float64(v) / float64(N))
			}
			if !same(got[i], want) {
				t.Errorf("%v Scale of %v by 1/%d = %v, want %v", dt, v, N, got[i], want)
			}
		}
	}
}
