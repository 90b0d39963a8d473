package backend

import "math"

// MaxDivisor is the largest N for which a scale of 1/N divides by N.
const MaxDivisor = 1 << 20

// maxOddDivisor bounds the odd part of N: the kernels split a quotient's
// f32 significand into two halves of 12 bits, each of which times N must be
// exact.
const maxOddDivisor = 1<<12 - 1

// Divisor returns N when scale is exactly 1/N as float64 computes it
// (scale == 1/float64(N)) for an integer N >= 2 that every backend divides
// by exactly: N <= MaxDivisor whose odd part is below 2^12 (so every N up
// to 4096, and larger ones such as 6144 or 8192). It returns 0 for any
// other scale.
//
// A Reduce or Scale whose scale is 1/N divides by N instead of multiplying:
// x * float32(1/N) can be more than 1 ulp from x/N (1.14 ulp for N = 7),
// while every backend returns x/N correctly rounded for normal results (so
// a mean is within half an ulp of the exact mean of exact sums; a GPU that
// flushes subnormals may flush subnormal results). The host backend divides
// in float64 (f32: then rounds to float32, still correctly rounded); the
// kernels take N as a push constant and correct q = x*r, r = 1/N, with the
// exact remainder q*N - x (kernels/divide.glsl).
func Divisor(scale float64) int {
	if !(scale > 0 && scale <= 0.5) {
		return 0
	}
	n := math.Round(1 / scale)
	if n < 2 || n > MaxDivisor || 1/n != scale {
		return 0
	}
	odd := int(n)
	for odd%2 == 0 {
		odd /= 2
	}
	if odd > maxOddDivisor {
		return 0
	}
	return int(n)
}

// IntScale reports whether an integer element type takes scale: 1 (no
// scaling), or 1/N (Divisor), a mean: the sum, wrapped in the type, divided
// by N once, truncated toward zero for the signed types (NCCL's ncclAvg on
// integers). Backends refuse any other integer scale with
// ErrInvalidArgument.
func IntScale(scale float64) bool { return scale == 1 || Divisor(scale) != 0 }

// ApplyScale64 scales x as every backend's f64 kernels do: x unchanged when
// scale is 1, x/N correctly rounded when Divisor(scale) is N, else x*scale.
func ApplyScale64(x, scale float64) float64 {
	if scale == 1 {
		return x
	}
	if n := Divisor(scale); n != 0 {
		return x / float64(n)
	}
	return x * scale
}

// ApplyScale32 scales x as every backend's f32 kernels do: x unchanged when
// scale is 1, x/N correctly rounded when Divisor(scale) is N (computed in
// float64 and rounded once more to float32: for a quotient that double
// rounding is innocuous, since float64 has more than 2*24+2 bits), else
// x*float32(scale).
func ApplyScale32(x float32, scale float64) float32 {
	if scale == 1 {
		return x
	}
	if n := Divisor(scale); n != 0 {
		return float32(float64(x) / float64(n))
	}
	return x * float32(scale)
}
