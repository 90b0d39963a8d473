package collective

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// The element types of the conformance test (conformance_test.go): how
// their inputs are drawn, their references and checks, and how buffers of
// any element type are read and written as bit patterns.

// confType is a call's element type.
type confType int

const (
	tF32 confType = iota
	tF64
	tI8
	tU8
	tI32
	tU32
	tI64
	tU64
	tF16  // Float16 (IEEE binary16)
	tBF16 // BFloat16
	tI16
	tU16
	tE4M3 // Float8E4M3
	tE5M2 // Float8E5M2
	numConfTypes
)

var typeNames = [...]string{"f32", "f64", "i8", "u8", "i32", "u32", "i64", "u64", "f16", "bf16", "i16", "u16", "e4m3", "e5m2"}

func (t confType) String() string { return typeNames[t] }

func (t confType) size() int { return [...]int{4, 8, 1, 1, 4, 4, 8, 8, 2, 2, 2, 2, 1, 1}[t] }

func (t confType) isInt() bool  { return t >= tI8 && t <= tU64 || t == tI16 || t == tU16 }
func (t confType) signed() bool { return t == tI8 || t == tI16 || t == tI32 || t == tI64 }
func (t confType) is16() bool   { return t == tF16 || t == tBF16 }
func (t confType) is8() bool    { return t == tE4M3 || t == tE5M2 }

// fmt8 is an fp8 type's format.
func (t confType) fmt8() format8 {
	if t == tE5M2 {
		return e5m2
	}
	return e4m3
}

// mask is the bits of an element.
func (t confType) mask() uint64 { return ^uint64(0) >> (64 - 8*t.size()) }

// float returns the value of float bits v.
func (t confType) float(v uint64) float64 {
	switch t {
	case tF32:
		return float64(math.Float32frombits(uint32(v)))
	case tF64:
		return math.Float64frombits(v)
	case tF16:
		return binary16.decode(v)
	case tBF16:
		return bfloat16.decode(v)
	case tE4M3, tE5M2:
		return t.fmt8().decode(uint8(v))
	}
	panic("not a float type: " + t.String())
}

// encode returns the bits of x rounded to float type t (to nearest even).
func (t confType) encode(x float64) uint64 {
	switch t {
	case tF32:
		return uint64(math.Float32bits(float32(x)))
	case tF64:
		return math.Float64bits(x)
	case tF16:
		return binary16.encode(x)
	case tBF16:
		return bfloat16.encode(x)
	case tE4M3, tE5M2:
		return uint64(t.fmt8().encode(x))
	}
	panic("not a float type: " + t.String())
}

// format16 is a 16-bit binary floating-point format, converted here
// independently of the library's conversions (host.F32ToF16 and friends,
// which its kernels and Float16From share): p bits of precision, exponent
// field ebits wide with bias bias, emin the least normal exponent.
type format16 struct{ p, ebits, bias, emin int }

var (
	binary16 = format16{p: 11, ebits: 5, bias: 15, emin: -14}
	bfloat16 = format16{p: 8, ebits: 8, bias: 127, emin: -126}
)

func (f format16) decode(v uint64) float64 {
	m := v & (1<<(f.p-1) - 1)
	e := int(v>>(f.p-1)) & (1<<f.ebits - 1)
	x := finiteValue(m, e, f.p, f.bias, f.emin)
	if e == 1<<f.ebits-1 {
		if m != 0 {
			return math.NaN()
		}
		x = math.Inf(1)
	}
	if v&0x8000 != 0 {
		x = -x
	}
	return x
}

// finiteValue is the value of a binary format's positive finite element of
// exponent field e and fraction m (p bits of precision, bias bias, emin the
// least normal exponent): a subnormal or zero where e is 0.
func finiteValue(m uint64, e, p, bias, emin int) float64 {
	if e == 0 {
		return math.Ldexp(float64(m), emin-(p-1))
	}
	return math.Ldexp(float64(m|1<<(p-1)), e-bias-(p-1))
}

// roundSig rounds x > 0 to p significant bits, to nearest even, at an
// exponent of at least emin: x rounds to r * 2^(E-(p-1)), r < 2^p (below
// 2^(p-1): a subnormal, E == emin).
func roundSig(x float64, p, emin int) (r uint64, E int) {
	_, e := math.Frexp(x) // x in [2^(e-1), 2^e)
	E = max(e-1, emin)
	r = uint64(math.RoundToEven(x / math.Ldexp(1, E-(p-1)))) // the significand in ulps of 2^E
	if r == 1<<p {
		r, E = r/2, E+1
	}
	return r, E
}

// encode rounds x to the format, to nearest even: beyond the largest
// finite value (after rounding) to Inf, NaN to the quiet NaN.
func (f format16) encode(x float64) uint64 {
	inf := uint64(1<<f.ebits-1) << (f.p - 1)
	if math.IsNaN(x) {
		return inf | 1<<(f.p-2)
	}
	var sign uint64
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	if math.IsInf(x, 0) {
		return sign | inf
	}
	if x == 0 {
		return sign
	}
	r, E := roundSig(x, f.p, f.emin)
	switch {
	case E > f.bias: // beyond the largest exponent
		return sign | inf
	case r < 1<<(f.p-1): // subnormal (E == emin)
		return sign | r
	}
	return sign | uint64(E+f.bias)<<(f.p-1) | r&^(1<<(f.p-1))
}

// intLess compares integer bits as t does (signed or unsigned).
func (t confType) intLess(a, b uint64) bool {
	if t.signed() {
		s := 64 - 8*uint(t.size())
		return int64(a<<s)>>s < int64(b<<s)>>s
	}
	return a < b
}

// format prints bits v as a value of t.
func (t confType) format(v uint64) string {
	switch {
	case t.isInt() && t.signed():
		s := 64 - 8*uint(t.size())
		return strconv.FormatInt(int64(v<<s)>>s, 10)
	case t.isInt():
		return strconv.FormatUint(v, 10)
	case t.is16(), t.is8():
		return fmt.Sprintf("%v (%#04x)", t.float(v), v)
	}
	return fmt.Sprint(t.float(v))
}

// poison is what an output element holds before a call: for f32, f64 and
// binary16 a value no result of the drawn inputs takes (binary16: -65472,
// beyond every sum and every large input but the extremes, and not what
// a bug that saturates overflow instead of rounding to Inf gives), for
// bfloat16 and the integers an unlikely one.
func (t confType) poison() uint64 {
	switch t {
	case tF32, tF64, tBF16:
		return t.encode(confPoison)
	case tF16:
		return 0xfbfe
	case tE4M3, tE5M2:
		return 0xf9 // -288 (E4M3), -40960 (E5M2): no sum of inputs8's, nor an extreme
	}
	return 0x5a5a5a5a5a5a5a5a & t.mask()
}

// elemBits returns the elements of s as bit patterns.
func elemBits[T Elem](s []T) []uint64 {
	if s == nil {
		return nil
	}
	b := asBytes(s)
	out := make([]uint64, len(s))
	switch dtypeOf[T]().Size() {
	case 1:
		for i := range out {
			out[i] = uint64(b[i])
		}
	case 2:
		for i := range out {
			out[i] = uint64(binary.NativeEndian.Uint16(b[2*i:]))
		}
	case 4:
		for i := range out {
			out[i] = uint64(binary.NativeEndian.Uint32(b[4*i:]))
		}
	default:
		for i := range out {
			out[i] = binary.NativeEndian.Uint64(b[8*i:])
		}
	}
	return out
}

// setBits stores bit patterns src into dst (v for every element if src is
// nil).
func setBits[T Elem](dst []T, src []uint64, v uint64) {
	b := asBytes(dst)
	es := dtypeOf[T]().Size()
	for i := range dst {
		if src != nil {
			v = src[i]
		}
		switch es {
		case 1:
			b[i] = byte(v)
		case 2:
			binary.NativeEndian.PutUint16(b[2*i:], uint16(v))
		case 4:
			binary.NativeEndian.PutUint32(b[4*i:], uint32(v))
		default:
			binary.NativeEndian.PutUint64(b[8*i:], v)
		}
	}
}

// sameBits reports whether a and b hold the same bits.
func sameBits[T Elem](a, b []T) bool {
	return len(a) == len(b) && string(asBytes(a)) == string(asBytes(b))
}

// intInputs draws integer inputs: small values (in [-2^Mag, 2^Mag], or
// [0, 2^Mag] unsigned, within the type; [-4, 4] for products, so they do
// not all wrap to 0), the full range (inRandom: sums and products wrap), or
// both mixed with the extremes MinInt, MaxInt, MinInt+1, MaxInt-1, 0, -1
// (all ones) and 1 (inSpecial); for the logical ops half the inputs are 0.
func intInputs(c confCall, ls []int) [][]uint64 {
	rng := rand.New(rand.NewPCG(c.DataSeed, 0x696e70))
	t := c.Type
	w, mask := 8*t.size(), t.mask()
	var lo, hi uint64 = 0, mask // the bits of the least and greatest values
	if t.signed() {
		lo, hi = 1<<(w-1), 1<<(w-1)-1
	}
	extremes := [...]uint64{lo, hi, (lo + 1) & mask, (hi - 1) & mask, 0, mask, 1}
	mag := c.Mag
	if c.Op == Prod && c.Coll.reduces() {
		mag = 2
	}
	small := func() uint64 {
		if t.signed() {
			k := int64(1) << min(mag, w-2)
			return uint64(rng.Int64N(2*k+1)-k) & mask
		}
		return uint64(rng.Int64N(int64(1)<<min(mag, w-1)+1)) & mask
	}
	in := make([][]uint64, len(ls))
	for r := range in {
		in[r] = make([]uint64, ls[r])
		for i := range in[r] {
			var v uint64
			switch c.Input {
			case inRandom:
				v = rng.Uint64() & mask
			case inSpecial:
				switch rng.IntN(6) {
				case 0:
					v = extremes[rng.IntN(len(extremes))]
				case 1, 2:
					v = rng.Uint64() & mask
				default:
					v = small()
				}
			default:
				v = small()
			}
			if c.Op >= LAnd && c.Op <= LXor && rng.IntN(2) == 0 {
				v = 0 // the logical ops: as many false inputs as true
			}
			in[r][i] = v
		}
	}
	return in
}

// inputs16 draws 16-bit float inputs.
//
// Exact inputs are k*2^e, |k| <= 2^min(Mag, K), e drawn per call (half the
// time in [-8, 4]), so that every partial sum of up to 8 ranks is a
// multiple of 2^e below 2^(p-1+e) in magnitude (p the type's precision)
// and within range: exact in the type whatever the order and the roundings
// (binary16: K = 7, e in [-24, 4], down to the smallest subnormal, sums
// below 2^14; bfloat16: K = 4, e in [-133, 120]).
// Products multiply powers of two whose partial products stay within [2^-8,
// 2^8] (binary16) or [2^-16, 2^16] (bfloat16).
//
// Random inputs are reals rounded to the type: N(0,1) times 2^[-8, 8]
// (binary16: partial sums stay far below 65504) or 2^[-30, 30] (bfloat16),
// magnitudes 2^[-1, 1] with random signs for products; for data movement,
// any bit pattern (NaN payloads, subnormals, -0).
//
// Special inputs are exact inputs with NaN and +-Inf sprinkled in, and
// elements where every rank holds a large value of one sign (a random sign
// per rank for products) so that any partial sum or product of two of them
// overflows to Inf: binary16 sums in [40000, 65024] (two exceed 65520, the
// overflow threshold), products in [256, 65504]; bfloat16 sums in [2e38,
// 3.3e38] (two overflow float32 already), products in [2^64, 2^127]. Such
// elements get only NaN sprinkled in (an Inf there could meet a partial sum
// that overflowed to the other Inf in some orders), and none for Mean,
// where the direct strategies accumulate in float32 without overflowing
// and divide before rounding, but a ring rounds and overflows first. Max,
// Min and data movement also see the extreme finite, subnormal and zero
// values.
func inputs16(c confCall, ls []int) [][]uint64 {
	rng := rand.New(rand.NewPCG(c.DataSeed, 0x696e70))
	t := c.Type
	bf := t == tBF16
	red := c.Coll.reduces()
	kb, e := min(c.Mag, 7), -24+rng.IntN(29)
	if bf {
		kb, e = min(c.Mag, 4), -133+rng.IntN(254)
	}
	if rng.IntN(2) == 0 {
		e = rng.IntN(13) - 8 // moderate: [-8, 4]
	}
	prodSet := []float64{1, 2, -1, 0.5, -2, -0.5}
	if bf {
		prodSet = []float64{1, 2, -1, 0.5, 1, -2, 0.25, 4, -0.5, 1}
	}
	maxFinite, minNormal, minSub := 65504.0, 0x1p-14, 0x1p-24
	if bf {
		maxFinite, minNormal, minSub = bfloat16.decode(0x7f7f), 0x1p-126, 0x1p-133
	}
	extremes := []float64{maxFinite, -maxFinite, minNormal, -minNormal, minSub, -minSub, 0, math.Copysign(0, -1)}
	ov := overflowElems(c, ls)
	prod := red && c.Op == Prod
	big := func(sign int8) float64 {
		if prod {
			sign = int8(1 - 2*rng.IntN(2))
		}
		var v float64
		switch {
		case prod && bf:
			v = math.Exp2(64 + 63*rng.Float64())
		case prod:
			v = 256 + rng.Float64()*(65504-256)
		case bf:
			v = 2e38 + rng.Float64()*1.3e38
		default:
			v = 40000 + rng.Float64()*25000
		}
		return float64(sign) * v
	}
	in := make([][]uint64, len(ls))
	for r := range in {
		in[r] = make([]uint64, ls[r])
		for i := range in[r] {
			var v float64
			switch c.Input {
			case inRandom:
				switch {
				case !red:
					in[r][i] = rng.Uint64() & 0xffff
					continue
				case prod:
					v = math.Exp2(rng.Float64()*2 - 1)
					if rng.IntN(2) == 0 {
						v = -v
					}
				case bf:
					v = rng.NormFloat64() * math.Exp2(float64(rng.IntN(61)-30))
				default:
					v = rng.NormFloat64() * math.Exp2(float64(rng.IntN(17)-8))
				}
			default:
				if prod {
					v = prodSet[rng.IntN(len(prodSet))]
				} else {
					m := int64(1) << kb
					v = math.Ldexp(float64(rng.Int64N(2*m+1)-m), e)
				}
				if c.Input != inSpecial {
					break
				}
				if ov[i] != 0 {
					v = big(ov[i])
				} else if (!red || c.Op == Max || c.Op == Min) && rng.IntN(16) == 0 {
					v = extremes[rng.IntN(len(extremes))]
				}
				if rng.IntN(48) == 0 {
					v = math.NaN()
					if ov[i] == 0 {
						v = [...]float64{math.NaN(), math.Inf(1), math.Inf(-1)}[rng.IntN(3)]
					}
				}
			}
			in[r][i] = t.encode(v)
		}
	}
	return in
}

// overflowElems returns the elements of special inputs where every rank
// holds a large value (sign +-1; 0 elsewhere), the same indices on every
// rank; none for other inputs, nor for a reduction's Mean.
func overflowElems(c confCall, ls []int) []int8 {
	maxL := 0
	for _, l := range ls {
		maxL = max(maxL, l)
	}
	ov := make([]int8, maxL)
	if c.Input == inSpecial && !(c.Coll.reduces() && c.Op == Mean) {
		orng := rand.New(rand.NewPCG(c.DataSeed, 0x6f766572))
		for i := range ov {
			if orng.IntN(24) == 0 {
				ov[i] = int8(1 - 2*orng.IntN(2))
			}
		}
	}
	return ov
}

// inputs8 draws fp8 inputs whose reductions every strategy computes
// exactly, in any order and with any number of rounding steps, so that
// each result is the rank-order reference (rankOrderRef) bit for bit:
// integers times 2^e whose every partial sum over the ranks holds in the
// format's significand (E4M3: up to 16, E5M2: up to 8, shared among the
// ranks) at an exponent that keeps them finite and at least the least
// subnormal; for products 1, 2, 1/2 and their negatives. Special inputs add
// NaN (E5M2 also +-Inf, which absorb finite values in every order; E4M3 has
// none, and its saturated +-448 would not), elements where every rank holds
// a large value of one sign (products: any signs) so that every partial
// sum or product of two saturates to the largest finite value (not for
// Mean, whose direct strategies divide the float32 sum before rounding),
// and for Max, Min and data movement the extreme finite, subnormal and zero
// values. Data movement also takes any bit pattern.
func inputs8(c confCall, ls []int) [][]uint64 {
	rng := rand.New(rand.NewPCG(c.DataSeed, 0x696e70))
	t, f := c.Type, c.Type.fmt8()
	red := c.Coll.reduces()
	limit, elo, ehi := 16, -9, 4 // E4M3: sums up to 16 * 2^4 = 256 < 448
	bigLo, prodBigLo := 240.0, 32.0
	if t == tE5M2 {
		limit, elo, ehi = 8, -16, 12 // 8 * 2^12 = 32768 < 57344
		bigLo, prodBigLo = 32768, 256
	}
	m := int64(limit / max(len(ls), 1)) // every partial sum within +-limit
	e := elo + rng.IntN(ehi-elo+1)
	prodSet := []float64{1, 2, -1, 0.5, -2, -0.5}
	extremes := []float64{f.maxFin, -f.maxFin, f.decode(1 << (f.p - 1)), f.decode(1), -f.decode(1), 0, math.Copysign(0, -1)}
	ov := overflowElems(c, ls)
	prod := red && c.Op == Prod
	in := make([][]uint64, len(ls))
	for r := range in {
		in[r] = make([]uint64, ls[r])
		for i := range in[r] {
			if !red && c.Input == inRandom {
				in[r][i] = uint64(rng.IntN(256))
				continue
			}
			var v float64
			switch {
			case prod:
				v = prodSet[rng.IntN(len(prodSet))]
			default:
				v = math.Ldexp(float64(rng.Int64N(2*m+1)-m), e)
			}
			if c.Input == inSpecial {
				switch {
				case ov[i] != 0 && prod:
					v = float64(1-2*rng.IntN(2)) * (prodBigLo + rng.Float64()*(f.maxFin-prodBigLo))
				case ov[i] != 0:
					v = float64(ov[i]) * (bigLo + rng.Float64()*(f.maxFin-bigLo))
				case (!red || c.Op == Max || c.Op == Min) && rng.IntN(16) == 0:
					v = extremes[rng.IntN(len(extremes))]
				}
				if rng.IntN(48) == 0 {
					v = math.NaN()
					if f.inf && rng.IntN(2) == 0 {
						v = math.Inf(1 - 2*rng.IntN(2))
					}
				}
			}
			in[r][i] = t.encode(v)
		}
	}
	return in
}

// confRefs is the reference of a reduction of c's inputs over every
// element: for the float types the float64 reference and the sums of
// magnitudes (confRef), for the integer types the exact result.
type confRefs struct {
	f, abs []float64
	bits   []uint64
	// ord: 16-bit floats reduced in one rounding step (c.Steps == 1,
	// Mean included): the rank-order result (rankOrderRef), which the call
	// must give bit for bit.
	ord []uint64
}

func refsOf(c confCall, in [][]uint64) *confRefs {
	if c.Type.isInt() {
		ref := make([]uint64, len(in[0]))
		for i := range ref {
			acc := in[0][i]
			for r := 1; r < len(in); r++ {
				acc = intOp(c.Type, c.Op, acc, in[r][i])
			}
			ref[i] = intMean(c.Type, c.Op, acc, len(in))
		}
		return &confRefs{bits: ref}
	}
	f := make([][]float64, len(in))
	for r := range in {
		f[r] = make([]float64, len(in[r]))
		for i, v := range in[r] {
			f[r][i] = c.Type.float(v)
		}
	}
	ref, abs := confRef(f, c.Op)
	refs := &confRefs{f: ref, abs: abs}
	if c.Type.is16() && c.Steps == 1 || c.Type.is8() {
		refs.ord = make([]uint64, len(ref))
		vals := make([]uint64, len(in))
		for i := range refs.ord {
			for r := range in {
				vals[r] = in[r][i]
			}
			refs.ord[i] = rankOrderRef(c.Type, c.Op, vals)
		}
	}
	return refs
}

// intOp is op on integer bits of type t: sums and products wrap (modulo
// 2^bits), extrema compare signed or unsigned, the bitwise ops act on the
// bits, the logical ones give 1 or 0 as (a != 0) op (b != 0) holds.
func intOp(t confType, op Op, a, b uint64) uint64 {
	switch op {
	case BAnd, BOr, BXor, LAnd, LOr, LXor:
		return bitRef(op, a, b) // on the bits, zero-extended: the same bits
	case Sum, Mean: // Mean: the wrapped sum, divided by intMean
		return (a + b) & t.mask()
	case Prod:
		return (a * b) & t.mask()
	case Max:
		if t.intLess(a, b) {
			return b
		}
		return a
	case Min:
		if t.intLess(b, a) {
			return b
		}
		return a
	}
	panic("no integer " + op.String())
}

// intMean is acc, op's wrapped result over n ranks, divided by n where op is
// Mean (NCCL's ncclAvg on integers: truncated toward zero, Go's /), else
// acc.
func intMean(t confType, op Op, acc uint64, n int) uint64 {
	if op != Mean {
		return acc
	}
	if t.signed() {
		s := 64 - 8*uint(t.size())
		return uint64((int64(acc<<s)>>s)/int64(n)) & t.mask()
	}
	return acc / uint64(n)
}

// checkReduction checks got, elements [lo, hi) of the reduction of c's
// inputs on ranks ranks, against refs.
func checkReduction(c confCall, ranks int, refs *confRefs, lo, hi int, got []uint64) (kind, desc string) {
	switch t := c.Type; {
	case t == tF32 && c.Input == inSubnormal:
		// Exact in any order, Mean included (correctly rounded): bit for
		// bit, the sign of zero too.
		return checkBits(t, got, subnormalWant(c, ranks, refs, lo, hi), false)
	case t == tF32:
		g := make([]float32, len(got))
		for i, v := range got {
			g[i] = math.Float32frombits(uint32(v))
		}
		return checkReduced(g, refs.f[lo:hi], refs.abs[lo:hi], c.Op, ranks, c.exact())
	case t == tF64:
		g := make([]float64, len(got))
		for i, v := range got {
			g[i] = math.Float64frombits(v)
		}
		return checkReduced(g, refs.f[lo:hi], refs.abs[lo:hi], c.Op, ranks, c.exact())
	case t.isInt():
		return checkBits(t, got, refs.bits[lo:hi], false)
	case t.is8():
		return checkBits(t, got, refs.ord[lo:hi], true)
	}
	var ord []uint64
	if refs.ord != nil {
		ord = refs.ord[lo:hi]
	}
	return checkReduced16(c.Type, got, refs.f[lo:hi], refs.abs[lo:hi], ord, c.Op, ranks, c.Steps, c.exact())
}

// checkBits compares got with want bit for bit (nan: any NaN for a NaN).
func checkBits(t confType, got, want []uint64, nan bool) (kind, desc string) {
	var bad []string
	wrong, unwritten := 0, 0
	for i := range want {
		if got[i] == want[i] || nan && math.IsNaN(t.float(want[i])) && math.IsNaN(t.float(got[i])) {
			continue
		}
		if got[i] == t.poison() {
			unwritten++
		}
		if wrong < 4 {
			bad = append(bad, fmt.Sprintf("element %d: got %s, want %s", i, t.format(got[i]), t.format(want[i])))
		}
		wrong++
	}
	return failKind(wrong, unwritten, 0, len(want), bad)
}

// failKind classifies wrong elements (unwritten of them still the poison,
// meanUlp only a mean beyond 1 ulp) and joins the descriptions.
func failKind(wrong, unwritten, meanUlp, n int, bad []string) (kind, desc string) {
	if wrong == 0 {
		return "", ""
	}
	bad = append(bad, fmt.Sprintf("%d of %d elements wrong", wrong, n))
	switch {
	case unwritten > 0:
		kind = fmt.Sprintf("outputs never written (%d of %d)", unwritten, wrong)
		if unwritten == wrong {
			kind = "outputs never written"
		}
	case meanUlp == wrong:
		kind = "mean beyond 1 ulp"
	default:
		kind = "wrong result"
	}
	return kind, strings.Join(bad, "; ")
}

// checkReduced16 compares a reduction of 16-bit floats with the float64
// reference ref of the 16-bit inputs (abs: the sums of their magnitudes;
// Mean: ref is the sum, divided here).
//
// Exact, bit for bit (any NaN for a NaN): Max and Min; NaN (which
// propagates), Inf and overflow (a reference that rounds to +-Inf in the
// type, as IEEE rounds); and the results of exact inputs, whose sums and
// products every strategy computes exactly (Mean: the exact sum divided by
// ranks, rounded to float32, then to the type, as the kernels' scale does).
//
// Otherwise within the bound of the arithmetic: every step of a reduction
// accumulates its inputs in float32 and rounds its result once to the
// 16-bit type; steps (c.Steps, roundSteps) such roundings lie on an
// element's path (Mean's division on a ring or tree included) and at most
// ranks-1 float32 additions or products (Mean: one more float32 rounding,
// the division). A rounding to the type is a relative error
// of at most u16 = 2^-11 (binary16) or 2^-8 (bfloat16), half an ulp, plus
// eta = 2^-25 or 2^-134 absolute (half the smallest subnormal) among the
// subnormals; a float32 rounding at most u32 = 2^-24. So, with s16 and s32
// those counts,
//
//	|got - sum| <= ((1+u16)^s16 (1+u32)^s32 - 1) sum|x_i| + 2 s16 eta + gamma(ranks-1, 2^-53) sum|x_i|
//
// the last term the float64 reference's own error. A product (no
// cancellation) replaces sum|x_i| by |prod|; Mean compares with sum/ranks
// and divides the bound by ranks.
//
// Where one step reduces every element (steps == 1: one kernel in rank
// order, or two ranks, whose order does not matter), the result is
// exactly determined: ord, the rank-order reduction with float32
// accumulation and one rounding (Mean: the float32 sum divided by ranks
// before that rounding), must match bit for bit.
func checkReduced16(t confType, got []uint64, ref, abs []float64, ord []uint64, op Op, ranks, steps int, exact bool) (kind, desc string) {
	u16, eta := 0x1p-11, 0x1p-25
	if t == tBF16 {
		u16, eta = 0x1p-8, 0x1p-134
	}
	const u32 = 0x1p-24
	s16, s32 := steps, ranks-1
	if op == Mean {
		s32 = ranks
	}
	grow := math.Pow(1+u16, float64(s16))*math.Pow(1+u32, float64(s32)) - 1
	refErr := gamma(ranks-1, 0x1p-53)
	var bad []string
	wrong, unwritten := 0, 0
	for i := range ref {
		g := t.float(got[i])
		w := ref[i]
		if op == Mean {
			w /= float64(ranks)
		}
		want := t.encode(w)
		if op == Mean {
			want = t.encode(float64(float32(w)))
		}
		ok := true
		why := ""
		switch {
		case ord != nil:
			ok = got[i] == ord[i] || math.IsNaN(t.float(ord[i])) && math.IsNaN(g)
			why = fmt.Sprintf("(one rounding in rank order: %s)", t.format(ord[i]))
		case math.IsNaN(w):
			ok = math.IsNaN(g)
		case exact || op == Max || op == Min || math.IsInf(t.float(want), 0):
			ok = got[i] == want
		case op == Prod:
			bound := (grow+refErr)*math.Abs(w) + 2*float64(s16)*eta
			ok = math.Abs(g-w) <= bound
			why = fmt.Sprintf("(bound %g)", bound)
		default:
			bound := (grow+refErr)*abs[i] + 2*float64(s16)*eta
			if op == Mean {
				bound /= float64(ranks)
			}
			ok = math.Abs(g-w) <= bound
			why = fmt.Sprintf("(bound %g)", bound)
		}
		if ok {
			continue
		}
		if got[i] == t.poison() {
			unwritten++
		}
		if wrong < 4 {
			bad = append(bad, fmt.Sprintf("element %d: got %s, want %v %s", i, t.format(got[i]), w, why))
		}
		wrong++
	}
	return failKind(wrong, unwritten, 0, len(ref), bad)
}

// rankOrderRef reduces vals (one per rank, in rank order) as ReduceScatterV
// promises: in rank order with the kernels' arithmetic, floats in their
// own type, 16-bit floats accumulated in float32 and rounded once,
// integers wrapping, IEEE max and min (NaN wins); Mean divides the sum by
// the number of ranks in float64 and rounds to float32 (16-bit: then to
// the type), float64 divides in float64.
func rankOrderRef(t confType, op Op, vals []uint64) uint64 {
	if t.isInt() {
		acc := vals[0]
		for _, v := range vals[1:] {
			acc = intOp(t, op, acc, v)
		}
		return intMean(t, op, acc, len(vals))
	}
	minmax := func(a, b float64) float64 {
		if op == Max {
			return ieeeMax(a, b)
		}
		return ieeeMin(a, b)
	}
	n := float64(len(vals))
	if t == tF64 {
		acc := t.float(vals[0])
		for _, v := range vals[1:] {
			switch x := t.float(v); op {
			case Sum, Mean:
				acc += x
			case Prod:
				acc *= x
			default:
				acc = minmax(acc, x)
			}
		}
		if op == Mean {
			acc /= n
		}
		return t.encode(acc)
	}
	acc := float32(t.float(vals[0]))
	for _, v := range vals[1:] {
		acc = refOp32(op, acc, float32(t.float(v)))
	}
	if op == Mean {
		acc = float32(float64(acc) / n)
	}
	return t.encode(float64(acc))
}

// refOp32 is op in float32 as the kernels compute it (Mean: the sum; IEEE
// max and min, NaN wins).
func refOp32(op Op, a, b float32) float32 {
	switch op {
	case Sum, Mean:
		return a + b
	case Prod:
		return a * b
	case Max:
		return float32(ieeeMax(float64(a), float64(b)))
	}
	return float32(ieeeMin(float64(a), float64(b)))
}

// TestConformanceFormat16 checks the conformance test's own binary16 and
// bfloat16 conversions against the library's, on every bit pattern and on
// float32 values across the range.
func TestConformanceFormat16(t *testing.T) {
	same := func(a, b float64) bool {
		return a == b && math.Signbit(a) == math.Signbit(b) || math.IsNaN(a) && math.IsNaN(b)
	}
	for v := uint64(0); v < 1<<16; v++ {
		for _, f := range []struct {
			name string
			f    format16
			lib  float64
		}{{"binary16", binary16, float64(Float16(v).Float32())}, {"bfloat16", bfloat16, float64(BFloat16(v).Float32())}} {
			x := f.f.decode(v)
			if !same(x, f.lib) {
				t.Fatalf("%s %#04x: decoded %v, the library %v", f.name, v, x, f.lib)
			}
			if !math.IsNaN(x) && f.f.encode(x) != v {
				t.Fatalf("%s %#04x: decoded %v, encoded %#04x", f.name, v, x, f.f.encode(x))
			}
		}
	}
	for i := uint64(0); i < 1<<32; i += 9973 {
		x := math.Float32frombits(uint32(i))
		if x != x {
			continue
		}
		if a, b := binary16.encode(float64(x)), uint64(Float16From(x)); a != b {
			t.Fatalf("binary16 of %v: %#04x, the library %#04x", x, a, b)
		}
		if a, b := bfloat16.encode(float64(x)), uint64(BFloat16From(x)); a != b {
			t.Fatalf("bfloat16 of %v: %#04x, the library %#04x", x, a, b)
		}
	}
}
