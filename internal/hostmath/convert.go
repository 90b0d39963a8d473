package hostmath

import (
	"math"
	"sync"
)

// F32ToF16 converts to IEEE binary16, rounding to nearest even; overflow
// gives +-Inf, NaN stays a (quiet) NaN.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		r := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent: the largest values round to Inf
	}
	return sign | uint16(r)
}

// F16ToF32 converts IEEE binary16 to float32 exactly (a table lookup: the
// table is built on first use).
func F16ToF32(h uint16) float32 { return f16Table()[h] }

var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for h := range t {
		t[h] = f16ToF32(uint16(h))
	}
	return t
})

// f16ToF32 is F16ToF32 computed from the bit fields.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: mant * 2^-24.
		v := float32(mant) * float32(1.0/16777216)
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToBF16 converts to bfloat16, rounding to nearest even; NaN stays NaN.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BF16ToF32 converts bfloat16 to float32 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// fp8 is an OCP 8-bit floating-point format (OFP8): a sign bit, an
// exponent of bias bias and mbits of fraction.
type fp8 struct {
	mbits uint
	bias  int
	max   uint8 // the bits of the largest finite value
	// inf: E5M2, whose largest exponent holds +-Inf (fraction 0) and NaNs,
	// as IEEE formats do. E4M3FN has no infinities: of its largest
	// exponent only S.1111.111 is NaN, the others are finite.
	inf bool
}

var (
	e4m3 = fp8{mbits: 3, bias: 7, max: 0x7e}
	e5m2 = fp8{mbits: 2, bias: 15, max: 0x7b, inf: true}
)

// F32ToE4M3 converts to OCP E4M3 (the FN variant: no infinities, NaN
// S.1111.111, largest finite 448), rounding to nearest even. A finite value
// whose rounded magnitude is beyond 448, and +-Inf, saturate to +-448 (as
// NCCL's conversions, __NV_SATFINITE, do); NaN gives NaN (S.1111.111).
func F32ToE4M3(f float32) uint8 { return e4m3.from32(f) }

// F32ToE5M2 converts to OCP E5M2 (IEEE-like: +-Inf, NaNs, largest finite
// 57344), rounding to nearest even. A finite value whose rounded magnitude
// is beyond 57344 saturates to +-57344 (as NCCL's conversions,
// __NV_SATFINITE, do); +-Inf stays +-Inf, so that widening and narrowing
// again is the identity on every value; a NaN stays a quiet NaN with the top
// of its payload (as F32ToF16 does).
func F32ToE5M2(f float32) uint8 { return e5m2.from32(f) }

// E4M3ToF32 converts OCP E4M3 (FN) to float32 exactly; S.1111.111 is a
// quiet NaN of sign S.
func E4M3ToF32(h uint8) float32 { return e4m3Table[h] }

// E5M2ToF32 converts OCP E5M2 to float32 exactly; a NaN keeps its payload.
func E5M2ToF32(h uint8) float32 { return e5m2Table[h] }

var (
	e4m3Table = e4m3.table()
	e5m2Table = e5m2.table()
)

func (f fp8) table() *[256]float32 {
	t := new([256]float32)
	for h := range t {
		t[h] = f.to32(uint8(h))
	}
	return t
}

// to32 is the value of h, from its bit fields.
func (f fp8) to32(h uint8) float32 {
	sign := uint32(h&0x80) << 24
	e := int(h&0x7f) >> f.mbits
	m := uint32(h) & (1<<f.mbits - 1)
	top := 1<<(7-f.mbits) - 1 // the largest exponent field
	switch {
	case f.inf && e == top:
		return math.Float32frombits(sign | 0x7f800000 | m<<(23-f.mbits))
	case !f.inf && h&0x7f == 0x7f:
		return math.Float32frombits(sign | 0x7fc00000)
	case e == 0: // zero or subnormal: m * 2^(1-bias-mbits), exact in float32
		return math.Float32frombits(sign | math.Float32bits(float32(math.Ldexp(float64(m), 1-f.bias-int(f.mbits)))))
	}
	return math.Float32frombits(sign | uint32(e-f.bias+127)<<23 | m<<(23-f.mbits))
}

// from32 rounds v to f, to nearest even, saturating a finite overflow.
func (f fp8) from32(v float32) uint8 {
	b := math.Float32bits(v)
	sign := uint8(b>>24) & 0x80
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN
		if f.inf {
			return sign | 0x7e | uint8(abs>>(23-f.mbits))&0x3
		}
		return sign | 0x7f
	case abs == 0x7f800000:
		if f.inf {
			return sign | 0x7c
		}
		return sign | f.max
	}
	exp := int(abs >> 23)
	if exp == 0 {
		return sign // float32 zeros and subnormals are far below f's least subnormal
	}
	m := abs&0x7fffff | 0x800000 // v = m * 2^(exp-150)
	e := exp - 127 + f.bias      // f's biased exponent of v
	shift := 23 - f.mbits        // the fraction bits dropped at a normal result
	if e <= 0 {
		shift += uint(1 - e) // subnormal: the unit is 2^(1-bias-mbits)
		e = 0
		if shift > 24 {
			return sign // below half the least subnormal
		}
	}
	r := m >> shift
	if e > 0 {
		r = uint32(e)<<f.mbits | r&(1<<f.mbits-1)
	}
	rem, half := m&(1<<shift-1), uint32(1)<<(shift-1)
	if rem > half || rem == half && r&1 == 1 {
		r++ // may carry into the exponent
	}
	if r > uint32(f.max) {
		return sign | f.max
	}
	return sign | uint8(r)
}
