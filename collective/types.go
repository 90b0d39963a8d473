package collective

import (
	"reflect"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
)

// Float is the floating-point element types of host slices and tensors
// (float32 and float64, and types defined on them).
type Float interface{ ~float32 | ~float64 }

// Integer is the integer element types. Sum and Prod wrap (two's
// complement), as NCCL's do; Max and Min compare as integers; Mean is not
// defined for integers (an ErrInvalidArgument); the bitwise and logical
// operators (BAnd to LXor) are defined for integers only.
//
// uint16 is an exact member, not ~uint16: Float16 and BFloat16 are defined
// on uint16 and are not integers, so a type defined on uint16 is not an
// Integer (convert its slices to []uint16). Every other member admits the
// types defined on it.
type Integer interface {
	~int8 | ~uint8 | ~int16 | uint16 | ~int32 | ~uint32 | ~int64 | ~uint64
}

// Elem is every element type of the collectives: Float, Integer, Float16
// and BFloat16.
type Elem interface {
	Float | Integer | Float16 | BFloat16
}

// Float16 is an IEEE 754 binary16 value held as its bit pattern. Go has no
// 16-bit float type; a named uint16 keeps the two bytes a device or a file
// holds, so slices of it are the same memory a framework's half tensors
// are, and arithmetic on it does not compile by mistake. Reductions convert
// to float32, accumulate in float32 and round once to binary16 (to nearest
// even) per reduction step: a ring or tree rounds once per step, the direct
// strategies once per call.
type Float16 uint16

// BFloat16 is a bfloat16 value (the top 16 bits of a binary32) held as its
// bit pattern; reduced as Float16 is.
type BFloat16 uint16

// Float16From rounds f to the nearest binary16 (ties to even); beyond
// +-65504 it gives +-Inf, NaN stays NaN.
func Float16From(f float32) Float16 { return Float16(hostmath.F32ToF16(f)) }

// Float32 returns h exactly.
func (h Float16) Float32() float32 { return hostmath.F16ToF32(uint16(h)) }

// BFloat16From rounds f to the nearest bfloat16 (ties to even); NaN stays
// NaN.
func BFloat16From(f float32) BFloat16 { return BFloat16(hostmath.F32ToBF16(f)) }

// Float32 returns b exactly.
func (b BFloat16) Float32() float32 { return hostmath.BF16ToF32(uint16(b)) }

// dtypeOf returns the backend type of T.
func dtypeOf[T Elem]() backend.DType {
	var z T
	switch any(z).(type) {
	case Float16:
		return backend.Half
	case BFloat16:
		return backend.BFloat16
	}
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Float64:
		return backend.F64
	case reflect.Int32:
		return backend.I32
	case reflect.Uint32:
		return backend.U32
	case reflect.Int64:
		return backend.I64
	case reflect.Uint64:
		return backend.U64
	case reflect.Int8:
		return backend.I8
	case reflect.Uint8:
		return backend.U8
	case reflect.Int16:
		return backend.I16
	case reflect.Uint16:
		return backend.U16
	}
	return backend.F32
}

// asBytes returns the memory of s.
func asBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// viewAs returns b's memory as a slice of T (b's length a multiple of T's
// size, b aligned for T: buffers and slices of the caller's element type).
func viewAs[T any](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

// checkOp returns an error for an op not defined on dt (Mean on integers,
// a bitwise or logical op on a floating-point type).
func checkOp(op Op, dt backend.DType) error {
	if !op.Valid() {
		return invalidArg("unknown op %d", int(op))
	}
	if op == Mean && dt.IsInt() {
		return invalidArg("op avg is not defined for integer type %s (use sum and divide)", dt)
	}
	if op.IntOnly() && !dt.IsInt() {
		return invalidArg("op %v is not defined for floating-point type %s (integer types only)", op, dt)
	}
	return nil
}

// reduceHost reduces k inputs in rank order into dst[0:cnt]: input p's
// elements [off, off+cnt) are at element p*stride+off of src; dst may be
// input 0's elements. The arithmetic is the kernels' (hostmath: floats in
// their own type, integers wrapping, 16-bit floats accumulated in float32
// and rounded once), the host backend's bit for bit.
func reduceHost(dt backend.DType, dst, src []byte, stride, off, k, cnt int, op Op, scale float64) {
	hostmath.ReduceStrided(dt, kernelOp(op), dst, src, stride, off, k, cnt, scale)
}
