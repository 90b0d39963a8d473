package hostmath

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// TestReduceStridedMatchesReference: ReduceStrided of every type and op
// against a plain loop in float64 (floats whose every partial result is
// exact: small integers; the 16-bit types through their exact float32
// value and one rounding), for k = 1..9 inputs, strides and offsets, cnt
// around the 256-element block, in place on input 0 and not.
func TestReduceStridedMatchesReference(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	types := []backend.DType{backend.F32, backend.F64, backend.I32, backend.U32, backend.I64, backend.U64,
		backend.I8, backend.U8, backend.Half, backend.BFloat16}
	ops := []backend.Op{backend.Sum, backend.Prod, backend.Max, backend.Min}
	for _, dt := range types {
		for _, op := range ops {
			for _, cnt := range []int{0, 1, 7, 255, 256, 257, 600} {
				k := 1 + rng.IntN(9)
				off := rng.IntN(5)
				stride := cnt + off + rng.IntN(4)
				es := dt.Size()
				src := make([]byte, (k*stride+off+cnt)*es)
				vals := make([][]float64, k)
				for p := range k {
					vals[p] = make([]float64, cnt)
					for i := range cnt {
						v := float64(rng.IntN(7) - 3)
						if op == backend.Prod {
							v = []float64{-1, 1, 2, -2, 0.5}[rng.IntN(5)]
							if dt.Size() == 1 {
								v = []float64{-1, 1}[rng.IntN(2)] // 2^9 wraps in 8 bits
							}
						}
						if dt.IsInt() && v != math.Trunc(v) {
							v = 1
						}
						if !dt.Signed() && dt.IsInt() && v < 0 {
							v = -v
						}
						vals[p][i] = v
						put(dt, src, p*stride+off+i, v)
					}
				}
				for _, inPlace := range []bool{false, true} {
					in := append([]byte(nil), src...)
					dst := make([]byte, cnt*es)
					if inPlace {
						dst = in[off*es : (off+cnt)*es] // input 0's elements
					}
					ReduceStrided(dt, op, dst, in, stride, off, k, cnt, 1)
					for i := range cnt {
						want := vals[0][i]
						for p := 1; p < k; p++ {
							b := vals[p][i]
							switch op {
							case backend.Sum:
								want += b
							case backend.Prod:
								want *= b
							case backend.Max:
								want = math.Max(want, b)
							case backend.Min:
								want = math.Min(want, b)
							}
						}
						if got := get(dt, dst, i); got != want && !(want == 0 && got == 0) {
							t.Fatalf("%v %v k=%d cnt=%d in-place=%v: element %d = %v, want %v", dt, op, k, cnt, inPlace, i, got, want)
						}
					}
				}
			}
		}
	}
}

// TestReduceStridedMean: a scale of 1/N divides, correctly rounded, in
// every float type (and the 16-bit types round once).
func TestReduceStridedMean(t *testing.T) {
	for _, dt := range []backend.DType{backend.F32, backend.F64, backend.Half, backend.BFloat16} {
		es := dt.Size()
		src := make([]byte, 3*es)
		for p, v := range []float64{1, 1, 0} {
			put(dt, src, p, v)
		}
		dst := make([]byte, es)
		ReduceStrided(dt, backend.Sum, dst, src, 1, 0, 3, 1, 1.0/3)
		want := 2.0 / 3
		var w float64
		switch dt {
		case backend.F32:
			w = float64(float32(want))
		case backend.F64:
			w = want
		case backend.Half:
			w = float64(F16ToF32(F32ToF16(float32(want))))
		case backend.BFloat16:
			w = float64(BF16ToF32(F32ToBF16(float32(want))))
		}
		if got := get(dt, dst, 0); got != w {
			t.Errorf("%v: mean of [1 1 0] = %v, want %v", dt, got, w)
		}
	}
}

// TestMaximumMinimumSignedZeroNaN: IEEE 754-2019 maximum and minimum: of
// +0 and -0 the positive (maximum) or negative (minimum) one, in either
// order; a NaN operand wins.
func TestMaximumMinimumSignedZeroNaN(t *testing.T) {
	neg, pos := math.Copysign(0, -1), 0.0
	for _, ab := range [][2]float64{{neg, pos}, {pos, neg}} {
		if m := Maximum(ab[0], ab[1]); math.Signbit(m) {
			t.Errorf("Maximum(%v, %v) = -0", ab[0], ab[1])
		}
		if m := Minimum(ab[0], ab[1]); !math.Signbit(m) {
			t.Errorf("Minimum(%v, %v) = +0", ab[0], ab[1])
		}
	}
	nan := math.NaN()
	if !math.IsNaN(Maximum(1, nan)) || !math.IsNaN(Minimum(nan, 1)) || !math.IsNaN(float64(Maximum[float32](float32(nan), 2))) {
		t.Error("a NaN operand does not win")
	}
}

// TestF16Table: the table F16ToF32 reads equals the conversion from the bit
// fields for every binary16 pattern, and F32ToF16 round-trips every
// non-NaN one.
func TestF16Table(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if math.Float32bits(f) != math.Float32bits(f16ToF32(uint16(h))) {
			t.Fatalf("F16ToF32(%#04x) = %v, want %v", h, f, f16ToF32(uint16(h)))
		}
		if f == f && F32ToF16(f) != uint16(h) {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, F32ToF16(f))
		}
	}
}

func put(dt backend.DType, b []byte, i int, v float64) {
	switch dt {
	case backend.F32:
		View[float32](b)[i] = float32(v)
	case backend.F64:
		View[float64](b)[i] = v
	case backend.I32:
		View[int32](b)[i] = int32(v)
	case backend.U32:
		View[uint32](b)[i] = uint32(v)
	case backend.I64:
		View[int64](b)[i] = int64(v)
	case backend.U64:
		View[uint64](b)[i] = uint64(v)
	case backend.I8:
		View[int8](b)[i] = int8(v)
	case backend.U8:
		View[uint8](b)[i] = uint8(v)
	case backend.Half:
		View[uint16](b)[i] = F32ToF16(float32(v))
	case backend.BFloat16:
		View[uint16](b)[i] = F32ToBF16(float32(v))
	case backend.I16:
		View[int16](b)[i] = int16(v)
	case backend.U16:
		View[uint16](b)[i] = uint16(v)
	case backend.F8E4M3:
		b[i] = F32ToE4M3(float32(v))
	case backend.F8E5M2:
		b[i] = F32ToE5M2(float32(v))
	}
}

func get(dt backend.DType, b []byte, i int) float64 {
	switch dt {
	case backend.F32:
		return float64(View[float32](b)[i])
	case backend.F64:
		return View[float64](b)[i]
	case backend.I32:
		return float64(View[int32](b)[i])
	case backend.U32:
		return float64(View[uint32](b)[i])
	case backend.I64:
		return float64(View[int64](b)[i])
	case backend.U64:
		return float64(View[uint64](b)[i])
	case backend.I8:
		return float64(View[int8](b)[i])
	case backend.U8:
		return float64(View[uint8](b)[i])
	case backend.Half:
		return float64(F16ToF32(View[uint16](b)[i]))
	case backend.BFloat16:
		return float64(BF16ToF32(View[uint16](b)[i]))
	case backend.I16:
		return float64(View[int16](b)[i])
	case backend.U16:
		return float64(View[uint16](b)[i])
	case backend.F8E4M3:
		return float64(E4M3ToF32(b[i]))
	case backend.F8E5M2:
		return float64(E5M2ToF32(b[i]))
	}
	return math.NaN()
}

// TestIntMean: ReduceStrided of the integer types with a mean's scale 1/N
// is the sum wrapped in the type, divided once by N, truncated toward zero
// (NCCL's ncclAvg), and ApplyInt leaves integers alone for other scales.
func TestIntMean(t *testing.T) {
	i8 := []int8{127, -128, -7, -128, 127, -1, 0, -128} // two inputs of 4
	d := make([]int8, 4)
	ReduceStrided(backend.I8, backend.Sum, asBytes(d), asBytes(i8), 4, 0, 2, 4, 0.5)
	if want := []int8{-1, 63, -3, 0}; !slices.Equal(d, want) { // 254 wraps to -2, -129 to 127, -256 to 0
		t.Errorf("int8 mean of 2: %v, want %v", d, want)
	}
	u16 := []uint16{65535, 65535, 65535}
	e := make([]uint16, 1)
	ReduceStrided(backend.U16, backend.Sum, asBytes(e), asBytes(u16), 1, 0, 3, 1, 1.0/3)
	if e[0] != 65533/3 {
		t.Errorf("uint16 mean of 3: %v, want %v", e[0], 65533/3)
	}
	i64 := []int64{-7, 0, 0}
	f := make([]int64, 1)
	ReduceStrided(backend.I64, backend.Sum, asBytes(f), asBytes(i64), 1, 0, 3, 1, 1.0/3)
	if f[0] != -2 {
		t.Errorf("int64 -7/3: %v, want -2", f[0])
	}
	g := []uint8{200, 7}
	ApplyInt(NewScale(1.0/300), g) // 300 does not fit uint8: every quotient of a wrapped sum is 0
	ApplyInt(NewScale(0.3), g[1:]) // not 1/N: unchanged
	if g[0] != 0 || g[1] != 0 {
		t.Errorf("uint8 / 300: %v, want [0 0]", g)
	}
	h := []int32{-7}
	ApplyInt(NewScale(0.3), h)
	if h[0] != -7 {
		t.Errorf("int32 scaled by 0.3: %v, want -7 (unchanged)", h[0])
	}
}

func asBytes[T Integer](s []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}
