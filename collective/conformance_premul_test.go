package collective

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
)

// PreMulSum in TestConformance and the fault-injection sessions: a share of
// the reductions (every collective that takes an op, on every path they
// are drawn on) gets a PreMulSum op in place of its op, each rank with its
// own scalar (confCall.PreMul). The call's Op is then Sum: its inputs are
// drawn as a sum's, and its references are Sum's over the ranks' products
// (preMulInputs), computed here from the rule of PreMulSum with the test's
// own conversions.

// confPreMulPct is the percent of the reductions drawn with a PreMulSum op:
// about as many as each of the other five arithmetic ops.
const confPreMulPct = 16

// drawPreMul turns reduction c of group g into a PreMulSum call in
// confPreMulPct percent of the calls that can take one, drawn from rng (a
// source of its own, so that the sessions of fixed seeds keep their other
// draws). Per-rank scalars: integer types an integral value the type
// holds (small, zero, and its extreme: the products wrap); float32 and
// float64 powers of two and other values (3, -1.5, 0.75: the products
// round); 16-bit floats the same; fp8 +-1 (any other scalar can make a
// sum's value depend on the order of a ring, which the fp8 checks, bit for
// bit in rank order, do not allow). Calls of subnormal inputs, and 16- and
// 8-bit calls of special inputs (sums that overflow in some orders once
// the scalars' signs differ), are left as they are.
func drawPreMul(rng *rand.Rand, c *confCall, g confGroup) {
	x := rng.IntN(100)
	if !c.Coll.reduces() || x >= confPreMulPct || c.Input == inSubnormal ||
		(c.Type.is16() || c.Type.is8()) && c.Input == inSpecial {
		return
	}
	t := c.Type
	var set []float64
	switch {
	case t.isInt() && t.signed():
		lo := -math.Ldexp(1, 8*t.size()-1)
		set = []float64{-3, -2, -1, 0, 1, 2, 3, lo}
	case t.isInt():
		set = []float64{0, 1, 2, 3, 255}
		if t != tU64 {
			set = append(set, float64(t.mask())) // -1 in the type
		}
	case t.is8():
		set = []float64{1, -1}
	default:
		set = []float64{1, -1, 0.5, 2, -0.25, 3, -1.5, 0.75}
	}
	c.Op = Sum
	c.PreMul = make([]float64, g.Ranks)
	for r := range c.PreMul {
		c.PreMul[r] = set[rng.IntN(len(set))]
	}
}

// preMulScale is element v of type t multiplied by scalar s as PreMulSum's
// rule has it: integers wrap; float32 and float64 multiply in their own
// type by the scalar converted to it; the 16- and 8-bit floats widen to
// float32, multiply there and round to the type (to nearest even, fp8
// saturating); a scalar of 1 keeps the element. (drawPreMul's float scalars
// are no 1/N but powers of two, whose product and quotient agree.)
func preMulScale(t confType, v uint64, s float64) uint64 {
	switch {
	case t.isInt():
		return v * uint64(int64(s)) & t.mask()
	case s == 1:
		return v
	case t == tF64:
		return t.encode(t.float(v) * s)
	}
	return t.encode(float64(float32(t.float(v)) * float32(s)))
}

// preMulInputs returns c's inputs as its reductions see them: each rank's
// multiplied by its scalar for a PreMulSum call (in itself otherwise), and
// the call to check them with: Sum, whose exact checks hold where every
// sum of the products is exact in any order (preMulExact), else the
// bounds of inexact inputs.
func preMulInputs(c confCall, in [][]uint64) ([][]uint64, confCall) {
	if c.PreMul == nil {
		return in, c
	}
	out := make([][]uint64, len(in))
	for r := range in {
		out[r] = make([]uint64, len(in[r]))
		for i, v := range in[r] {
			out[r][i] = preMulScale(c.Type, v, c.PreMul[r])
		}
	}
	rc := c
	rc.PreMul = nil
	if !c.Type.isInt() && c.exact() && !preMulExact(c.Type, out) {
		rc.Input = inRandom // checked within the bounds of inexact sums
	}
	return out, rc
}

// preMulExact reports whether every sum of the products of every element,
// in any order and with any rounding steps, is exact in float type t: the
// finite products of an element are multiples of a power of two q at
// least t's least subnormal (they are values of t), so every partial sum
// is a multiple of q no greater in magnitude than the sum S of their
// magnitudes, which is exact in t where S <= 2^p q (p: t's precision) and
// S is within t's range. NaN and infinite products take the special
// values' checks, which hold in any order.
func preMulExact(t confType, in [][]uint64) bool {
	p := map[confType]int{tF32: 24, tF64: 53, tF16: 11, tBF16: 8, tE4M3: 4, tE5M2: 3}[t]
	for i := range in[0] {
		s, qe := 0.0, math.MaxInt
		for r := range in {
			x := t.float(in[r][i])
			if math.IsNaN(x) || math.IsInf(x, 0) {
				continue
			}
			if x != 0 {
				frac, e := math.Frexp(math.Abs(x))
				m := uint64(frac * (1 << 53))
				qe = min(qe, e-53+bits.TrailingZeros64(m))
			}
			s += math.Abs(x)
		}
		if s == 0 {
			continue
		}
		if s > confMaxFinite(t) || s > math.Ldexp(1, p+qe) {
			return false
		}
	}
	return true
}

// confMaxFinite is the largest finite value of float type t.
func confMaxFinite(t confType) float64 {
	switch t {
	case tF32:
		return math.MaxFloat32
	case tF64:
		return math.MaxFloat64
	case tF16:
		return binary16.decode(0x7bff)
	case tBF16:
		return bfloat16.decode(0x7f7f)
	}
	return t.fmt8().maxFin
}

// preMulOp is the op rank r passes for call c: c's own, or a PreMulSum op
// of r's scalar made on cm (release with cm.DestroyOp).
func preMulOp(cm *Comm, c confCall) (op Op, made bool, err error) {
	if c.PreMul == nil {
		return c.Op, false, nil
	}
	op, err = cm.PreMulSum(c.PreMul[cm.Rank()])
	if err != nil {
		return 0, false, fmt.Errorf("PreMulSum(%v): %w", c.PreMul[cm.Rank()], err)
	}
	return op, true, nil
}
