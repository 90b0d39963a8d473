package main

import (
	"math"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// values is how a sweep makes, reduces and compares the elements of its
// type T, so that every #wrong is counted against an exact reference,
// independent of the library, the reduction order and the number of
// rounding steps:
//
//   - float and double: input's small integers and powers of two, reduced
//     in float64 and rounded to T (avg: within 1 ulp);
//   - the integer types: any odd value of the type (a hash of rank, element
//     and run), reduced in T itself: wrapping sum and prod, and the bitwise
//     ops, are associative and commutative, so every order gives the same
//     bits; avg is that wrapped sum divided once by N, Go's / (truncated
//     toward zero, as NCCL's ncclAvg); for the logical ops (land, lor,
//     lxor) half the inputs are 0 instead, so that every result occurs;
//   - half, bfloat16, f8e4m3 and f8e5m2: input16's small integers and powers
//     of two, whose every partial sum or product is exact in the type
//     whatever the number of ranks; avg is float32(float64(sum)/N) rounded to the type,
//     as the library defines it;
//   - the wire types (float32 data, --wire): wireInput, checked against the
//     bound in sweep.right, not here.
type values[T collective.Elem] struct {
	// input is rank r's element i of verified run rep, for op.
	input func(op collective.Op, r int, i int64, rep int) T
	// reduce is element i of op's result over the inputs of ranks (avg:
	// divided by len(ranks)).
	reduce func(op collective.Op, ranks []int, i int64, rep int) T
	// match reports whether got is the result want.
	match func(got, want T, op collective.Op) bool
	// poison is what fills the regions a call must write, and never a right
	// value there: NaN for the float types; for the integer types, whose
	// inputs are odd, a value of the parity no right value has (reduced:
	// the region holds op's result over n ranks, else copies of inputs).
	poison func(op collective.Op, n int, reduced bool) T
	// isPoison reports whether x is (still) that poison.
	isPoison func(x T, op collective.Op, n int, reduced bool) bool
}

// valuesFor returns the values of type dt, whose user buffers hold T.
func valuesFor[T collective.Elem](dt dtype) values[T] {
	var v any
	switch any(*new(T)).(type) {
	case float32:
		in := input
		if dt.wire() != 0 {
			in = wireInput
		}
		v = floatValues[float32](in)
	case float64:
		v = floatValues[float64](input)
	case int8:
		v = intValues[int8]()
	case uint8:
		v = intValues[uint8]()
	case int16:
		v = intValues[int16]()
	case uint16:
		v = intValues[uint16]()
	case int32:
		v = intValues[int32]()
	case uint32:
		v = intValues[uint32]()
	case int64:
		v = intValues[int64]()
	case uint64:
		v = intValues[uint64]()
	case collective.Float16:
		v = halfValues(collective.Float16.Float32, collective.Float16From, half16)
	case collective.BFloat16:
		v = halfValues(collective.BFloat16.Float32, collective.BFloat16From, bfloat16)
	case collective.Float8E4M3:
		v = halfValues(collective.Float8E4M3.Float32, collective.Float8E4M3From, fp8e4m3)
	case collective.Float8E5M2:
		v = halfValues(collective.Float8E5M2.Float32, collective.Float8E5M2From, fp8e5m2)
	}
	return v.(values[T])
}

// opPreMulSum stands for -o premulsum among the options' ops: each rank
// calls with its own op of Comm.PreMulSum (sweep.rankOp), whose scalar is
// premulScalar of its rank.
const opPreMulSum collective.Op = -1

// premulScalar is rank r's scalar for -o premulsum: nccl-tests'
// (ncclVerifiablePremulScalar), 1 on the even ranks, 2 on the odd ones,
// so every product and sum of the inputs stays exact.
func premulScalar(r int) float64 {
	if r%2 == 0 {
		return 1
	}
	return 2
}

// opString is op's name in the tables (premulsum for opPreMulSum).
func opString(op collective.Op) string {
	if op == opPreMulSum {
		return "premulsum"
	}
	return op.String()
}

// scaled returns the op a reference reduces with (premulsum: the sum) and
// rank r's multiplier of its input (premulsum: premulScalar, else 1).
func scaled(op collective.Op, r int) (collective.Op, float64) {
	if op == opPreMulSum {
		return collective.Sum, premulScalar(r)
	}
	return op, 1
}

func floatValues[T float](in func(collective.Op, int, int64, int) float64) values[T] {
	nan := T(math.NaN())
	return values[T]{
		input: func(op collective.Op, r int, i int64, rep int) T { return T(in(op, r, i, rep)) },
		reduce: func(op collective.Op, ranks []int, i int64, rep int) T {
			return T(reduce64(func(r int) float64 { return in(op, r, i, rep) }, op, ranks))
		},
		match:    matches[T],
		poison:   func(collective.Op, int, bool) T { return nan },
		isPoison: func(x T, _ collective.Op, _ int, _ bool) bool { return x != x },
	}
}

// reduce64 reduces x(r) over ranks in float64, in a plain loop (avg:
// divided by len(ranks); premulsum: the sum of x(r) times rank r's
// scalar).
func reduce64(x func(r int) float64, op0 collective.Op, ranks []int) float64 {
	op, k := scaled(op0, ranks[0])
	acc := x(ranks[0]) * k
	for _, r := range ranks[1:] {
		_, k := scaled(op0, r)
		v := x(r) * k
		switch op {
		case collective.Sum, collective.Mean:
			acc += v
		case collective.Prod:
			acc *= v
		case collective.Max:
			acc = math.Max(acc, v)
		case collective.Min:
			acc = math.Min(acc, v)
		}
	}
	if op == collective.Mean {
		acc /= float64(len(ranks))
	}
	return acc
}

// integer is the integer element types.
type integer interface {
	int8 | uint8 | int16 | uint16 | int32 | uint32 | int64 | uint64
}

// intInput is rank r's element i of run rep for the integer types: any
// odd value of the type (the low bits of a 64-bit hash, with bit 0 set),
// so that sums wrap and every sign and magnitude occurs.
func intInput(r int, i int64, rep int) uint64 {
	x := uint64(i)*0x9e3779b97f4a7c15 ^ uint64(r)*0xbf58476d1ce4e5b9 ^ uint64(rep)*0x94d049bb133111eb
	x ^= x >> 31
	x *= 0xd6e8feb86659fd39
	x ^= x >> 29
	return x | 1
}

// logical reports whether op is land, lor or lxor.
func logical(op collective.Op) bool {
	return op == collective.LAnd || op == collective.LOr || op == collective.LXor
}

func intValues[T integer]() values[T] {
	in := func(op collective.Op, r int, i int64, rep int) T {
		x := intInput(r, i, rep)
		if logical(op) && x&2 == 0 {
			return 0 // false; the other half odd, true
		}
		return T(x)
	}
	// A sum or XOR of n odd values has n's parity (premulsum: n's even
	// ranks', the odd ranks' inputs doubled); a product, a max, a
	// min, an AND and an OR of odd values, and a copy of one, are odd.
	// Wrapping keeps the parity. The logical ops' results are 0 or 1 (a
	// copy: 0 or odd), never an even value other than 0. An avg of n >= 2
	// ranks has any parity but a magnitude of at most half the type's
	// range: never even's bits (0x5a..., above a quarter of the range) in a
	// signed type, nor odd's (0xa5..., above half) in an unsigned one.
	oddResult := func(op collective.Op, n int, reduced bool) bool {
		if op == opPreMulSum { // the odd ranks' inputs doubled: even
			n = (n + 1) / 2
		}
		return !(reduced && (op == collective.Sum || op == collective.BXor || op == opPreMulSum) && n%2 == 0)
	}
	even, odd := uint64(0x5a5a5a5a5a5a5a5a), uint64(0xa5a5a5a5a5a5a5a5)
	signed := T(0)-1 < 0
	poison := func(op collective.Op, n int, reduced bool) T {
		if op == collective.Mean && reduced && n >= 2 {
			if signed {
				return T(even)
			}
			return T(odd)
		}
		if logical(op) || oddResult(op, n, reduced) {
			return T(even)
		}
		return T(odd)
	}
	return values[T]{
		input: in,
		reduce: func(op0 collective.Op, ranks []int, i int64, rep int) T {
			op, k := scaled(op0, ranks[0])
			acc := in(op0, ranks[0], i, rep) * T(k)
			for _, r := range ranks[1:] {
				_, k := scaled(op0, r)
				x := in(op0, r, i, rep) * T(k)
				switch op {
				case collective.Sum, collective.Mean:
					acc += x
				case collective.Prod:
					acc *= x
				case collective.Max:
					acc = max(acc, x)
				case collective.Min:
					acc = min(acc, x)
				case collective.BAnd:
					acc &= x
				case collective.BOr:
					acc |= x
				case collective.BXor:
					acc ^= x
				case collective.LAnd:
					acc = truth[T](acc != 0 && x != 0)
				case collective.LOr:
					acc = truth[T](acc != 0 || x != 0)
				case collective.LXor:
					acc = truth[T]((acc != 0) != (x != 0))
				}
			}
			if n := T(len(ranks)); op == collective.Mean && int(n) == len(ranks) {
				acc /= n
			} else if op == collective.Mean {
				acc = 0 // N beyond the type: every wrapped sum's quotient is 0
			}
			return acc
		},
		match:  func(got, want T, _ collective.Op) bool { return got == want },
		poison: poison,
		isPoison: func(x T, op collective.Op, n int, reduced bool) bool {
			return x == poison(op, n, reduced)
		},
	}
}

// truth is 1 for true, 0 for false.
func truth[T integer](b bool) T {
	if b {
		return 1
	}
	return 0
}

// format16 is what keeps a 16- or 8-bit float type's inputs exact: the largest
// integer up to which it holds every integer, and the largest k for which
// it holds 2^k and 2^-k as normal numbers.
type format16 struct {
	maxInt, maxExp int
}

var (
	half16   = format16{maxInt: 2048, maxExp: 14} // binary16: 11 significant bits, 2^-14..2^15 normal
	bfloat16 = format16{maxInt: 256, maxExp: 126} // bfloat16: 8 significant bits, float32's exponents
	fp8e4m3  = format16{maxInt: 16, maxExp: 6}    // E4M3: 4 significant bits, 2^-6..2^8 normal
	fp8e5m2  = format16{maxInt: 8, maxExp: 14}    // E5M2: 3 significant bits, 2^-14..2^15 normal
)

// input16 is input, capped so that every partial result of every order is
// exact in the 16-bit type f, however many ranks there are: sum and avg
// take input's values in [-5, 5] from the first maxInt/5 ranks (51 for
// bfloat16, 409 for half) and 0 from the others, so a partial sum never
// leaves [-maxInt, maxInt] (premulsum, whose odd ranks' inputs are
// doubled, from the first maxInt/10 ranks, at least rank 0); prod takes input's 1, 2, 1/2 or -1 from the
// first maxExp ranks (14 for half, 126 for bfloat16) and the sign alone
// from the others, so a partial product is +-2^k with |k| <= maxExp. Max
// and min are exact anyway.
func input16(f format16, op collective.Op, r int, i int64, rep int) float64 {
	x := input(op, r, i, rep)
	switch op {
	case collective.Sum, collective.Mean:
		if r >= f.maxInt/5 {
			return 0
		}
	case opPreMulSum: // doubled on the odd ranks
		if r >= max(f.maxInt/10, 1) {
			return 0
		}
	case collective.Prod:
		if r >= f.maxExp {
			return math.Copysign(1, x)
		}
	}
	return x
}

func halfValues[T collective.Float16 | collective.BFloat16 | collective.Float8E4M3 | collective.Float8E5M2](to32 func(T) float32, from32 func(float32) T, f format16) values[T] {
	nan := from32(float32(math.NaN()))
	return values[T]{
		input: func(op collective.Op, r int, i int64, rep int) T {
			return from32(float32(input16(f, op, r, i, rep)))
		},
		reduce: func(op collective.Op, ranks []int, i int64, rep int) T {
			// Exact in float64, and in the type for every op but avg,
			// whose quotient the library rounds to float32, then to T.
			return from32(float32(reduce64(func(r int) float64 { return input16(f, op, r, i, rep) }, op, ranks)))
		},
		// Equal values (+0 and -0 alike, as for float and double); NaN
		// never matches.
		match:    func(got, want T, _ collective.Op) bool { return to32(got) == to32(want) },
		poison:   func(collective.Op, int, bool) T { return nan },
		isPoison: func(x T, _ collective.Op, _ int, _ bool) bool { return to32(x) != to32(x) },
	}
}

// sameBits reports whether a and b are bitwise identical.
func sameBits[T collective.Elem](a, b T) bool {
	switch x := any(a).(type) {
	case float32:
		return math.Float32bits(x) == math.Float32bits(any(b).(float32))
	case float64:
		return math.Float64bits(x) == math.Float64bits(any(b).(float64))
	}
	return a == b // integers, and the 16-bit types' bit patterns
}

// ranksUpTo returns 0, 1, ..., n-1.
func ranksUpTo(n int) []int {
	rs := make([]int, n)
	for r := range rs {
		rs[r] = r
	}
	return rs
}

// groupKernels is the element types every local rank's device reduces in
// kernels. The library reduces the others exactly on the host in one
// process; an all-reduce of them across processes is ErrUnsupported.
func groupKernels(g *collective.Group) backend.DTypeSet {
	s := backend.AllDTypes
	for r := 0; r < g.LocalSize(); r++ {
		s &= g.DeviceInfo(r).KernelTypes()
	}
	return s
}
