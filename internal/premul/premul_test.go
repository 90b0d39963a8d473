package premul

import (
	"math"
	"slices"
	"testing"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
)

func TestTable(t *testing.T) {
	var a, b Table
	h, err := a.Create(0.5)
	if err != nil || !IsHandle(h) {
		t.Fatalf("Create: %d, %v", h, err)
	}
	h2, _ := a.Create(2)
	if h2 == h {
		t.Fatal("a handle issued twice")
	}
	if s, ok := a.Scalar(h); !ok || s != 0.5 {
		t.Errorf("Scalar = %v, %v", s, ok)
	}
	if _, ok := b.Scalar(h); ok {
		t.Error("another table knows the handle")
	}
	if b.Destroy(h) || !a.Destroy(h) || a.Destroy(h) {
		t.Error("Destroy: want true once, in its own table only")
	}
	if _, ok := a.Scalar(h); ok {
		t.Error("a destroyed handle is live")
	}
	if IsHandle(10) || IsHandle(-1) {
		t.Error("small values are handles")
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		dt backend.DType
		s  float64
		ok bool
	}{
		{backend.F32, 0.3, true}, {backend.F64, math.Inf(-1), true}, {backend.Half, math.NaN(), true},
		{backend.I8, 127, true}, {backend.I8, 128, false}, {backend.I8, -128, true}, {backend.I8, -129, false},
		{backend.U8, 255, true}, {backend.U8, 256, false}, {backend.U8, -1, false},
		{backend.I32, 0.5, false}, {backend.I32, math.NaN(), false}, {backend.I32, math.Inf(1), false},
		{backend.I64, -math.Ldexp(1, 63), true}, {backend.I64, math.Ldexp(1, 63), false},
		{backend.U64, math.Ldexp(1, 64) - 2048, true}, {backend.U64, math.Ldexp(1, 64), false},
		{backend.U16, 65535, true}, {backend.I16, -32769, false},
	} {
		if err := Check(c.dt, c.s); (err == nil) != c.ok {
			t.Errorf("Check(%v, %v) = %v, want ok=%v", c.dt, c.s, err, c.ok)
		}
	}
}

// TestScale: integers multiply and wrap; float32 multiplies by the scalar
// rounded to float32, or divides by N for 1/N; a narrow float is scaled in
// float32 and rounded once to the type; dst may be src.
func TestScale(t *testing.T) {
	i8 := []int8{1, -2, 100, -128}
	Scale(backend.I8, bytesOf(i8), bytesOf(i8), 3)
	if want := []int8{3, -6, 44, -128}; !slices.Equal(i8, want) { // 300 wraps to 44; -384 to -128
		t.Errorf("int8 * 3 = %v, want %v", i8, want)
	}
	u64 := []uint64{1, math.MaxUint64}
	out := make([]uint64, 2)
	Scale(backend.U64, bytesOf(out), bytesOf(u64), 2)
	if out[0] != 2 || out[1] != math.MaxUint64-1 || u64[1] != math.MaxUint64 {
		t.Errorf("uint64 * 2 = %v (src %v)", out, u64)
	}
	f := []float32{1, 3, 0.1}
	g := make([]float32, 3)
	Scale(backend.F32, bytesOf(g), bytesOf(f), 0.3)
	for i := range f {
		if want := float32(float64(f[i]) * float64(float32(0.3))); g[i] != want {
			t.Errorf("float32 %v * 0.3 = %v, want %v", f[i], g[i], want)
		}
	}
	Scale(backend.F32, bytesOf(g), bytesOf(f), 1.0/3)
	for i := range f {
		if want := float32(float64(f[i]) / 3); g[i] != want {
			t.Errorf("float32 %v * 1/3 = %v, want %v (a division)", f[i], g[i], want)
		}
	}
	h := []uint16{hostmath.F32ToF16(1.5), hostmath.F32ToF16(-3)}
	Scale(backend.Half, bytesOf(h), bytesOf(h), 0.1)
	for i, x := range []float32{1.5, -3} {
		if want := hostmath.F32ToF16(x * float32(0.1)); h[i] != want {
			t.Errorf("half %v * 0.1 = %#x, want %#x", x, h[i], want)
		}
	}
}

func TestScratch(t *testing.T) {
	var s Scratch
	if s.Bytes(0) != nil {
		t.Error("Bytes(0) is not nil")
	}
	a := s.Bytes(13)
	if len(a) != 13 {
		t.Fatalf("len %d", len(a))
	}
	b := s.Bytes(9)
	if &a[0] != &b[0] {
		t.Error("a smaller request did not reuse the memory")
	}
	if n := testing.AllocsPerRun(10, func() { s.Bytes(13) }); n != 0 {
		t.Errorf("%v allocations reusing the scratch", n)
	}
}

func bytesOf[T any](s []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}
