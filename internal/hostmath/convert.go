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
