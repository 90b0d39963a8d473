package backendtest

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// float is the element types of the kernels.
type float interface{ ~float32 | ~float64 }

// dtypeOf returns the DType of T.
func dtypeOf[T float]() backend.DType {
	var zero T
	if unsafe.Sizeof(zero) == 8 {
		return backend.F64
	}
	return backend.F32
}

// bytesOf is the memory of s as bytes, in the host's byte order (the order
// device memory uses on every platform gocoll runs on).
func bytesOf[T float](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// writeT writes vals into b at byte offset off.
func writeT[T float](t *testing.T, b backend.Buffer, off int, vals []T) {
	t.Helper()
	if err := b.Write(off, bytesOf(vals)); err != nil {
		t.Fatalf("Write(%d, %d bytes): %v", off, len(vals)*dtypeOf[T]().Size(), err)
	}
}

// readT reads n elements from b at byte offset off.
func readT[T float](t *testing.T, b backend.Buffer, off, n int) []T {
	t.Helper()
	p := make([]T, n)
	if err := b.Read(off, bytesOf(p)); err != nil {
		t.Fatalf("Read(%d, %d bytes): %v", off, n*dtypeOf[T]().Size(), err)
	}
	return p
}

// combine is reduce.comp's combine(a, b), written from the kernel's text:
// IEEE sum and product; for max/min a NaN a, else a NaN b, else of equal
// values the non-negative (max) or negative (min) one, else the larger or
// smaller. The explicit conversions keep Go from fusing operations.
func combine[T float](op backend.Op, a, b T) T {
	switch op {
	case backend.Sum:
		return T(a + b)
	case backend.Prod:
		return T(a * b)
	}
	if math.IsNaN(float64(a)) {
		return a
	}
	if math.IsNaN(float64(b)) {
		return b
	}
	neg := math.Signbit(float64(a))
	if op == backend.Max {
		switch {
		case a == b && !neg, a > b:
			return a
		}
		return b
	}
	switch {
	case a == b && neg, a < b:
		return a
	}
	return b
}

// reduceRef is element i of a reduction computed left to right in T, then
// scaled by scaleRef: what the kernels must produce bit for bit.
func reduceRef[T float](op backend.Op, srcs [][]T, i int, scale float64) T {
	acc := srcs[0][i]
	for _, s := range srcs[1:] {
		acc = combine(op, acc, s[i])
	}
	return scaleRef(acc, scale)
}

// scaleRef is x scaled as the kernels scale: unchanged when scale is 1;
// divided by N and correctly rounded when scale is 1/N (backend.Divisor),
// here through float64, exact for f64 and rounded once more for f32 (which
// for a quotient gives the same float); else multiplied by scale converted
// to T.
func scaleRef[T float](x T, scale float64) T {
	if scale == 1 {
		return x
	}
	if n := backend.Divisor(scale); n != 0 {
		return T(float64(x) / float64(n))
	}
	return T(x * T(scale))
}

// reduce64 is element i of a reduction computed in float64.
func reduce64[T float](op backend.Op, srcs [][]T, i int) float64 {
	acc := float64(srcs[0][i])
	for _, s := range srcs[1:] {
		acc = combine(op, acc, float64(s[i]))
	}
	return acc
}

// same reports whether a and b are the same value: both NaN, or equal with
// the same sign (so +0 and -0 differ). For non-NaN values that is bitwise
// equality. NaN payloads are not compared: the kernels need not keep them.
func same[T float](a, b T) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	return a == b && math.Signbit(float64(a)) == math.Signbit(float64(b))
}

// unit is the unit roundoff of T: 2^-24 or 2^-53.
func unit[T float]() float64 {
	if dtypeOf[T]() == backend.F64 {
		return 0x1p-53
	}
	return 0x1p-24
}

// newRand returns the suite's deterministic random source.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// exactValues are inputs whose sums and products of up to 17 terms are
// exact in f32 and f64: multiples of 1/2 of magnitude at most 2 (sums stay
// below 2^6 in units of 1/2) and powers of two or zero (products stay within
// 2^-17..2^17).
var exactValues = [...]float64{-2, -1, -0.5, 0, 0.5, 1, 2, 1, -1, 0.5, -0.5, 2, -2, 1, 0.5, -1}

// fillExact fills v with exactValues chosen at random.
func fillExact[T float](r *rand.Rand, v []T) {
	for i := range v {
		v[i] = T(exactValues[r.IntN(len(exactValues))])
	}
}

// fillRandom fills v with random values of magnitude in [0.5, 2) and random
// sign, rounded to T: full-precision mantissas, and no product of up to 17 of
// them overflows or becomes subnormal (which a GPU may flush to zero).
func fillRandom[T float](r *rand.Rand, v []T) {
	for i := range v {
		x := 0.5 + 1.5*r.Float64()
		if r.IntN(2) == 0 {
			x = -x
		}
		v[i] = T(x)
	}
}

// mismatches collects the first few differences of a check and counts the
// rest, so one bad kernel does not print a million lines.
type mismatches struct {
	t    *testing.T
	what string
	n    int
}

func (m *mismatches) add(format string, args ...any) {
	m.t.Helper()
	m.n++
	if m.n <= 5 {
		m.t.Errorf(m.what+": "+format, args...)
	}
}

func (m *mismatches) done() {
	m.t.Helper()
	if m.n > 5 {
		m.t.Errorf("%s: %d mismatches in all", m.what, m.n)
	}
}
