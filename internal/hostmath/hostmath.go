// Package hostmath is the one home of gocoll's element arithmetic on the CPU:
// the reduction operators of every element type as the kernels compute them
// (floats in their own type with IEEE 754-2019 maximum and minimum, integers
// wrapping, float16 and bfloat16 widened exactly to float32, reduced there
// and rounded once, as are the 8-bit floats), the mean's scaling, and the
// 16- and 8-bit float conversions. The host
// backend's device and collective's CPU reductions both run it, so the two
// give the same bits by construction (and the kernels are tested against
// it).
package hostmath

import (
	"math"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// Float is a floating-point element type reduced in its own arithmetic.
type Float interface{ ~float32 | ~float64 }

// Integer is an integer element type (Sum and Prod wrap).
type Integer interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64
}

// Maximum is IEEE 754-2019 maximum as reduce.comp computes it: a if a is
// NaN, else b if b is NaN; of equal values (+0 and -0) the positive one.
func Maximum[T Float](a, b T) T {
	if a != a {
		return a
	}
	if b != b {
		return b
	}
	if a == b {
		if math.Signbit(float64(a)) {
			return b
		}
		return a
	}
	if a > b {
		return a
	}
	return b
}

// Minimum is IEEE 754-2019 minimum as reduce.comp computes it: a if a is
// NaN, else b if b is NaN; of equal values (+0 and -0) the negative one.
func Minimum[T Float](a, b T) T {
	if a != a {
		return a
	}
	if b != b {
		return b
	}
	if a == b {
		if math.Signbit(float64(a)) {
			return a
		}
		return b
	}
	if a < b {
		return a
	}
	return b
}

// Combine sets acc[i] = op(acc[i], x[i]) in T, as reduce.comp's combine
// does. op is Sum, Prod, Max or Min (a mean is a Sum, then Scale); the
// integer-only operators (backend.Op.IntOnly) leave acc unchanged.
func Combine[T Float](op backend.Op, acc, x []T) {
	x = x[:len(acc)]
	if n := combinePacked(op, acc, x); n > 0 {
		acc, x = acc[n:], x[n:]
	}
	switch op {
	case backend.Sum:
		for i, v := range x {
			acc[i] = T(acc[i] + v) // the conversion forbids fusing
		}
	case backend.Prod:
		for i, v := range x {
			acc[i] = T(acc[i] * v)
		}
	case backend.Max:
		for i, v := range x {
			acc[i] = Maximum(acc[i], v)
		}
	case backend.Min:
		for i, v := range x {
			acc[i] = Minimum(acc[i], v)
		}
	}
}

// CombineInt sets acc[i] = op(acc[i], x[i]) for integers, Sum and Prod
// wrapping as Go's integer arithmetic does, BAnd, BOr and BXor on the bits
// (two's complement), LAnd, LOr and LXor 1 where (acc[i] != 0) op (x[i] !=
// 0) holds, else 0.
func CombineInt[T Integer](op backend.Op, acc, x []T) {
	x = x[:len(acc)]
	switch op {
	case backend.Sum:
		for i, v := range x {
			acc[i] += v
		}
	case backend.Prod:
		for i, v := range x {
			acc[i] *= v
		}
	case backend.Max:
		for i, v := range x {
			acc[i] = max(acc[i], v)
		}
	case backend.Min:
		for i, v := range x {
			acc[i] = min(acc[i], v)
		}
	case backend.BAnd:
		for i, v := range x {
			acc[i] &= v
		}
	case backend.BOr:
		for i, v := range x {
			acc[i] |= v
		}
	case backend.BXor:
		for i, v := range x {
			acc[i] ^= v
		}
	case backend.LAnd:
		for i, v := range x {
			acc[i] = truth[T](acc[i] != 0 && v != 0)
		}
	case backend.LOr:
		for i, v := range x {
			acc[i] = truth[T](acc[i] != 0 || v != 0)
		}
	case backend.LXor:
		for i, v := range x {
			acc[i] = truth[T]((acc[i] != 0) != (v != 0))
		}
	}
}

// truth is 1 for true, 0 for false.
func truth[T Integer](b bool) T {
	if b {
		return 1
	}
	return 0
}

// Scale is a scale factor as the kernels apply it: none when it is 1, the
// quotient by N correctly rounded when it is 1/N (backend.Divisor), else a
// multiplication in the element type.
type Scale struct {
	factor float64
	div    float64 // N where the factor is 1/N, else 0
	use    bool
}

// NewScale returns the Scale of factor.
func NewScale(factor float64) Scale {
	return Scale{factor: factor, div: float64(backend.Divisor(factor)), use: factor != 1}
}

// Identity reports whether s leaves values unchanged (a factor of 1).
func (s Scale) Identity() bool { return !s.use }

// Apply sets dst[i] = src[i] scaled by s in T: unchanged (bit for bit, NaN
// payloads included) for a factor of 1; src[i] / N correctly rounded to T
// for 1/N (exact in float64, and for float32 rounded twice, which for a
// quotient is the same as once: float64 has more than 2*24+2 bits); else
// src[i] * T(factor). dst may be src.
func Apply[T Float](s Scale, dst, src []T) {
	dst = dst[:len(src)]
	switch {
	case !s.use:
		copy(dst, src)
	case s.div != 0:
		for i, v := range src {
			dst[i] = T(float64(v) / s.div)
		}
	default:
		f := T(s.factor)
		for i, v := range src {
			dst[i] = T(v * f) // the conversion forbids fusing with anything else
		}
	}
}

// ApplyInt divides d[i] by N in place where s is the mean's scale 1/N
// (backend.Divisor): the wrapped sum divided once, truncated toward zero for
// the signed types (Go's /, the same as NCCL's division of the magnitude
// with the sign put back), plain division for the unsigned ones. Any other
// scale leaves d unchanged (backends accept only 1 and 1/N for integers).
func ApplyInt[T Integer](s Scale, d []T) {
	if s.div == 0 {
		return
	}
	n := T(s.div) // N <= backend.MaxDivisor: representable in every type it can scale (checked by the caller)
	if int64(n) != int64(s.div) {
		// N does not fit the type (int8 with N > 127, ...): every wrapped
		// sum's quotient has a magnitude below 1.
		clear(d)
		return
	}
	for i, v := range d {
		d[i] = v / n
	}
}

// Bits is the memory of an element of a narrow float type: uint16 for
// Half and BFloat16, uint8 for F8E4M3 and F8E5M2.
type Bits interface{ uint8 | uint16 }

// Widen sets dst[i] to src[i], the bits of an element of the narrow float
// type dt (backend.DType.IsNarrowFloat: uint16 for Half and BFloat16, uint8
// for F8E4M3 and F8E5M2), as float32: exact.
func Widen[E Bits](dt backend.DType, dst []float32, src []E) {
	src = src[:len(dst)]
	switch s := any(src).(type) {
	case []uint16:
		if dt == backend.BFloat16 {
			for i, h := range s {
				dst[i] = BF16ToF32(h)
			}
			return
		}
		t := f16Table()
		for i, h := range s {
			dst[i] = t[h]
		}
	case []uint8:
		t := e4m3Table
		if dt == backend.F8E5M2 {
			t = e5m2Table
		}
		for i, h := range s {
			dst[i] = t[h]
		}
	}
}

// Narrow sets dst[i] to src[i] rounded to the narrow float type dt, to
// nearest even (F32ToF16, F32ToBF16, F32ToE4M3, F32ToE5M2).
func Narrow[E Bits](dt backend.DType, dst []E, src []float32) {
	dst = dst[:len(src)]
	switch d := any(dst).(type) {
	case []uint16:
		if dt == backend.BFloat16 {
			for i, v := range src {
				d[i] = F32ToBF16(v)
			}
			return
		}
		for i, v := range src {
			d[i] = F32ToF16(v)
		}
	case []uint8:
		f := e4m3
		if dt == backend.F8E5M2 {
			f = e5m2
		}
		for i, v := range src {
			d[i] = f.from32(v)
		}
	}
}

// block is the number of elements ReduceStrided works on at a time (its
// float32 accumulators for the narrow float types live on the stack).
const block = 256

// ReduceStrided reduces k inputs in order (input 0 op input 1 op ...) into
// dst's first cnt elements of dt, then scales them: input p's elements are
// src's elements [p*stride+off, p*stride+off+cnt). Floats reduce in their
// own type, integers wrap, the 16- and 8-bit floats reduce in float32 and round
// once; op is Sum, Prod, Max or Min (a mean: Sum and the scale 1/N), or for
// the integer types also a bitwise or logical operator. dst may be input 0's
// elements. Integers take only the scale 1/N (ApplyInt: the wrapped sum
// divided once by N, truncated toward zero); any other scale leaves them
// unscaled.
//
// More than one chunk of elements (parreduce.ChunkBytes of dst) is reduced
// in chunks on the process's worker pool (internal/parreduce, capped by
// parreduce.Reduce): every element still reduces its inputs in order, so
// the bits are the serial reduction's.
func ReduceStrided(dt backend.DType, op backend.Op, dst, src []byte, stride, off, k, cnt int, scale float64) {
	if cnt <= 0 || k <= 0 {
		return
	}
	chunk := chunkBytes / dt.Size()
	if cnt <= chunk || parreduce.Reduce.Limit() == 1 {
		reduceStrided(dt, op, dst, src, stride, off, k, cnt, scale)
		return
	}
	j := stridedJobs.get()
	j.dt, j.op, j.dst, j.src = dt, op, dst, src
	j.stride, j.off, j.k, j.scale = stride, off, k, scale
	j.job.Run(&parreduce.Reduce, j, cnt, chunk)
	j.dst, j.src = nil, nil // hold no reference to the caller's memory
	stridedJobs.put(j)
}

// chunkBytes is the bytes of dst a chunk of a parallel ReduceStrided
// reduces (a variable for the tests, which make it small).
var chunkBytes = parreduce.ChunkBytes

// stridedJob is a parallel ReduceStrided's arguments and its job.
type stridedJob struct {
	job            parreduce.Job
	dt             backend.DType
	op             backend.Op
	dst, src       []byte
	stride, off, k int
	scale          float64
}

// Range reduces elements [lo, hi) of the call: a ReduceStrided of its own.
func (j *stridedJob) Range(lo, hi int) {
	es := j.dt.Size()
	reduceStrided(j.dt, j.op, j.dst[lo*es:hi*es], j.src, j.stride, j.off+lo, j.k, hi-lo, j.scale)
}

var stridedJobs freeList[stridedJob]

// reduceStrided is ReduceStrided on the caller's goroutine alone.
func reduceStrided(dt backend.DType, op backend.Op, dst, src []byte, stride, off, k, cnt int, scale float64) {
	s := NewScale(scale)
	switch dt {
	case backend.F32:
		reduceFloat[float32](op, dst, src, stride, off, k, cnt, s)
	case backend.F64:
		reduceFloat[float64](op, dst, src, stride, off, k, cnt, s)
	case backend.I32:
		reduceInt[int32](op, dst, src, stride, off, k, cnt, s)
	case backend.U32:
		reduceInt[uint32](op, dst, src, stride, off, k, cnt, s)
	case backend.I64:
		reduceInt[int64](op, dst, src, stride, off, k, cnt, s)
	case backend.U64:
		reduceInt[uint64](op, dst, src, stride, off, k, cnt, s)
	case backend.I8:
		reduceInt[int8](op, dst, src, stride, off, k, cnt, s)
	case backend.U8:
		reduceInt[uint8](op, dst, src, stride, off, k, cnt, s)
	case backend.I16:
		reduceInt[int16](op, dst, src, stride, off, k, cnt, s)
	case backend.U16:
		reduceInt[uint16](op, dst, src, stride, off, k, cnt, s)
	case backend.Half, backend.BFloat16:
		reduceNarrow[uint16](dt, op, dst, src, stride, off, k, cnt, s)
	case backend.F8E4M3, backend.F8E5M2:
		reduceNarrow[uint8](dt, op, dst, src, stride, off, k, cnt, s)
	}
}

// View returns b as a slice of T (len(b)/size elements; b's memory holds
// T's alignment).
func View[T any](b []byte) []T {
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

// reduceFloat and reduceInt reduce a block of multiBlock elements at a time
// in dst, which stays in the L1 cache while every input is added to it:
// each input is read once and dst written once. dst may be input 0's
// elements (a block of it is read before it is written).
func reduceFloat[T Float](op backend.Op, dst, src []byte, stride, off, k, cnt int, s Scale) {
	d, in := View[T](dst)[:cnt], View[T](src)
	for lo := 0; lo < cnt; lo += multiBlock {
		a := d[lo:min(lo+multiBlock, cnt)]
		copy(a, in[off+lo:off+lo+len(a)])
		for p := 1; p < k; p++ {
			Combine(op, a, in[p*stride+off+lo:][:len(a)])
		}
		Apply(s, a, a)
	}
}

func reduceInt[T Integer](op backend.Op, dst, src []byte, stride, off, k, cnt int, s Scale) {
	d, in := View[T](dst)[:cnt], View[T](src)
	for lo := 0; lo < cnt; lo += multiBlock {
		a := d[lo:min(lo+multiBlock, cnt)]
		copy(a, in[off+lo:off+lo+len(a)])
		for p := 1; p < k; p++ {
			CombineInt(op, a, in[p*stride+off+lo:][:len(a)])
		}
		ApplyInt(s, a)
	}
}

func reduceNarrow[E Bits](dt backend.DType, op backend.Op, dst, src []byte, stride, off, k, cnt int, s Scale) {
	d := View[E](dst)[:cnt]
	in := View[E](src)
	var acc, x [block]float32
	for lo := 0; lo < cnt; lo += block {
		n := min(block, cnt-lo)
		a := acc[:n]
		Widen(dt, a, in[off+lo:off+lo+n])
		for p := 1; p < k; p++ {
			b := p*stride + off + lo
			v := x[:n]
			Widen(dt, v, in[b:b+n])
			Combine(op, a, v)
		}
		Apply(s, a, a)
		Narrow(dt, d[lo:lo+n], a)
	}
}
