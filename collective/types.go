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
// complement), as NCCL's do; Max and Min compare as integers; Mean is the
// wrapped sum divided once by N, truncated toward zero (NCCL's ncclAvg on
// integers); the bitwise and logical operators (BAnd to LXor) are defined
// for integers only.
//
// uint16 is an exact member, not ~uint16: Float16 and BFloat16 are defined
// on uint16 and are not integers, so a type defined on uint16 is not an
// Integer (convert its slices to []uint16). Every other member admits the
// types defined on it.
type Integer interface {
	~int8 | ~uint8 | ~int16 | uint16 | ~int32 | ~uint32 | ~int64 | ~uint64
}

// Elem is every element type of the collectives: Float, Integer, Float16,
// BFloat16, Float8E4M3 and Float8E5M2.
type Elem interface {
	Float | Integer | Float16 | BFloat16 | Float8E4M3 | Float8E5M2
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

// Float8E4M3 is an OCP 8-bit float in the E4M3 format, FN variant (a sign,
// a 4-bit exponent of bias 7, a 3-bit fraction; no infinities, NaN only
// S.1111.111, largest finite value 448), held as its bit pattern, as NCCL's
// ncclFloat8e4m3. It is a struct of one byte, not a named uint8, so that it
// is not an Integer (whose ~uint8 would admit it): Float8E4M3FromBits and
// Bits convert the bits, and a []Float8E4M3 is the same memory as the
// []uint8 of its bits. Reductions convert to float32, accumulate in float32
// and round once to E4M3 (to nearest even) per reduction step, as Float16
// is reduced. Overflow saturates: a result beyond +-448, and +-Inf, gives
// +-448 (NCCL's conversions, __NV_SATFINITE, do the same); NaN stays NaN.
type Float8E4M3 struct{ bits uint8 }

// Float8E5M2 is an OCP 8-bit float in the E5M2 format (a sign, a 5-bit
// exponent of bias 15, a 2-bit fraction; IEEE-like, with +-Inf and NaNs,
// largest finite value 57344), held as its bit pattern, as NCCL's
// ncclFloat8e5m2; a struct of one byte as Float8E4M3 is. Reductions work as
// for Float8E4M3. Overflow saturates: a finite result beyond +-57344 gives
// +-57344 (as NCCL's conversions do); +-Inf stays +-Inf (NCCL's gives
// +-57344), so that a reduction of one rank's value is that value, and a
// float32 accumulator that overflowed (a product beyond 3.4e38) gives Inf;
// NaN stays NaN.
type Float8E5M2 struct{ bits uint8 }

// Float8E4M3From rounds f to the nearest E4M3 value (ties to even),
// saturating beyond +-448 (Inf included); NaN stays NaN.
func Float8E4M3From(f float32) Float8E4M3 { return Float8E4M3{hostmath.F32ToE4M3(f)} }

// Float8E4M3FromBits returns the E4M3 value of bit pattern b.
func Float8E4M3FromBits(b uint8) Float8E4M3 { return Float8E4M3{b} }

// Bits returns x's bit pattern.
func (x Float8E4M3) Bits() uint8 { return x.bits }

// Float32 returns x exactly (S.1111.111 as a NaN).
func (x Float8E4M3) Float32() float32 { return hostmath.E4M3ToF32(x.bits) }

// Float8E5M2From rounds f to the nearest E5M2 value (ties to even),
// saturating a finite value beyond +-57344; +-Inf and NaN stay so.
func Float8E5M2From(f float32) Float8E5M2 { return Float8E5M2{hostmath.F32ToE5M2(f)} }

// Float8E5M2FromBits returns the E5M2 value of bit pattern b.
func Float8E5M2FromBits(b uint8) Float8E5M2 { return Float8E5M2{b} }

// Bits returns x's bit pattern.
func (x Float8E5M2) Bits() uint8 { return x.bits }

// Float32 returns x exactly.
func (x Float8E5M2) Float32() float32 { return hostmath.E5M2ToF32(x.bits) }

// dtypeOf returns the backend type of T.
func dtypeOf[T Elem]() backend.DType {
	var z T
	switch any(z).(type) {
	case Float16:
		return backend.Half
	case BFloat16:
		return backend.BFloat16
	case Float8E4M3:
		return backend.F8E4M3
	case Float8E5M2:
		return backend.F8E5M2
	}
	return kindDTypes[reflect.TypeFor[T]().Kind()]
}

// kindDTypes is the backend type of each kind of the Float and Integer
// types (float32 the zero value's).
var kindDTypes = [reflect.Float64 + 1]backend.DType{reflect.Float32: backend.F32, reflect.Float64: backend.F64,
	reflect.Int8: backend.I8, reflect.Uint8: backend.U8, reflect.Int16: backend.I16, reflect.Uint16: backend.U16,
	reflect.Int32: backend.I32, reflect.Uint32: backend.U32, reflect.Int64: backend.I64, reflect.Uint64: backend.U64}

// asBytes returns the memory of s.
func asBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// checkOp returns an error for an op not defined on dt (a bitwise or
// logical op on a floating-point type), or, for Mean of an integer type, on
// n ranks where the backends cannot divide by n exactly (backend.Divisor:
// n above 4096 with an odd part of 4096 or more).
func checkOp(op Op, dt backend.DType, n int) error {
	if !op.Valid() {
		return invalidArg("unknown op %d", int(op))
	}
	if op == Mean && dt.IsInt() && n > 1 && backend.Divisor(scaleFor(op, n)) == 0 {
		return invalidArg("op avg of integer type %s on %d ranks: the kernels divide by at most %d (odd part below 4096)", dt, n, backend.MaxDivisor)
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
// and rounded once), the host backend's bit for bit. A large input reduces
// in chunks on the process's worker pool (internal/parreduce), each
// element's inputs still in rank order: the same bits.
func reduceHost(dt backend.DType, dst, src []byte, stride, off, k, cnt int, op Op, scale float64) {
	hostmath.ReduceStrided(dt, kernelOp(op), dst, src, stride, off, k, cnt, scale)
}
