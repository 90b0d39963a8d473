package backend

import (
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"testing"
)

func TestDivisor(t *testing.T) {
	for n := 2; n <= MaxDivisor; n++ {
		want := n
		if odd := n >> bits.TrailingZeros(uint(n)); odd >= 1<<12 {
			want = 0
		}
		if got := Divisor(1 / float64(n)); got != want {
			t.Fatalf("Divisor(1/%d) = %d, want %d", n, got, want)
		}
	}
	for _, n := range []int{4095, 4096, 6144, 8190, 12288, MaxDivisor} {
		if got := Divisor(1 / float64(n)); got != n {
			t.Errorf("Divisor(1/%d) = %d", n, got)
		}
	}
	for _, n := range []int{4097, 8191, MaxDivisor - 1} {
		if got := Divisor(1 / float64(n)); got != 0 {
			t.Errorf("Divisor(1/%d) = %d, want 0 (odd part of 12 bits or more)", n, got)
		}
	}
	for _, s := range []float64{
		1, 0, -0.5, -1.0 / 3, 0.3, 0.75, 2, 3, math.NaN(), math.Inf(1), math.Inf(-1),
		1 / float64(MaxDivisor+1), 1 / float64(MaxDivisor+3),
		math.Nextafter(1.0/3, 1), math.Nextafter(1.0/3, 0), float64(float32(1.0 / 3)),
		math.SmallestNonzeroFloat64,
	} {
		if got := Divisor(s); got != 0 {
			t.Errorf("Divisor(%v) = %d, want 0", s, got)
		}
	}
}

// TestApplyScale checks the helpers against math/big: a scale of 1/N gives
// the correctly rounded quotient in f32 and f64, another scale the rounded
// product, 1 the value itself.
func TestApplyScale(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	nearest := func(x float64, n int, prec uint) float64 {
		q := new(big.Rat).SetFloat64(x)
		q.Quo(q, new(big.Rat).SetInt64(int64(n)))
		f, _ := new(big.Float).SetPrec(prec).SetMode(big.ToNearestEven).SetRat(q).Float64()
		return f
	}
	for range 100000 {
		n := 2 + r.IntN(7)
		if r.IntN(8) == 0 {
			n = (1 + r.IntN(1<<12-1)) << r.IntN(9) // odd part below 2^12
			if n < 2 || n > MaxDivisor {
				n = 3
			}
		}
		x64 := math.Ldexp(r.Float64()+0.5, r.IntN(200)-100)
		if r.IntN(2) == 0 {
			x64 = -x64
		}
		x32 := float32(x64)
		if got, want := ApplyScale64(x64, 1/float64(n)), nearest(x64, n, 53); got != want {
			t.Fatalf("ApplyScale64(%v, 1/%d) = %v, want %v", x64, n, got, want)
		}
		if got, want := ApplyScale32(x32, 1/float64(n)), nearest(float64(x32), n, 24); float64(got) != want {
			t.Fatalf("ApplyScale32(%v, 1/%d) = %v, want %v", x32, n, got, want)
		}
	}
	x, s := 3.0, 0.3 // variables: a constant product would be exact
	if got, want := ApplyScale64(x, s), x*s; got != want {
		t.Errorf("ApplyScale64(3, 0.3) = %v, want the product %v", got, want)
	}
	if got, want := ApplyScale32(float32(x), s), float32(x)*float32(s); got != want {
		t.Errorf("ApplyScale32(3, 0.3) = %v, want the product %v", got, want)
	}
	for _, x := range []float64{math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0} {
		if got := ApplyScale64(x, 1.0/3); got != x || math.Signbit(got) != math.Signbit(x) {
			t.Errorf("ApplyScale64(%v, 1/3) = %v", x, got)
		}
		if got := ApplyScale32(float32(x), 1.0/3); float64(got) != x || math.Signbit(float64(got)) != math.Signbit(x) {
			t.Errorf("ApplyScale32(%v, 1/3) = %v", x, got)
		}
	}
	if got := ApplyScale64(math.NaN(), 1.0/3); !math.IsNaN(got) {
		t.Errorf("ApplyScale64(NaN, 1/3) = %v", got)
	}
	if got := ApplyScale32(float32(math.NaN()), 1.0/3); got == got {
		t.Errorf("ApplyScale32(NaN, 1/3) = %v", got)
	}
}
