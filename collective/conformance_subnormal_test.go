package collective

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// Subnormal inputs of the conformance test (inSubnormal): float32, float16
// and bfloat16 data where subnormals are common, in inputs and in results,
// alone, mixed with normals and with signed zeros, chosen so that every
// reduction is exact whatever the order and the roundings, and so checked
// bit for bit: a device that flushes subnormals to zero, in its inputs,
// partial results or results, fails.

// confSubnormalPct is the share (percent) of TestConformance's float32,
// float16 and bfloat16 calls drawn with subnormal inputs.
const confSubnormalPct = 25

// subFormat is the binary format of a float type: p bits of precision, the
// least and greatest normal exponents.
type subFormat struct{ p, emin, emax int }

func subFormatOf(t confType) subFormat {
	switch t {
	case tF16:
		return subFormat{11, -14, 15}
	case tBF16:
		return subFormat{8, -126, 127}
	}
	return subFormat{24, -126, 127}
}

// minSub is the least subnormal, the grid of the subnormals.
func (f subFormat) minSub() float64 { return math.Ldexp(1, f.emin-(f.p-1)) }

// subnormalInputs draws each rank's inputs of call c (ls: the ranks'
// lengths) as bits of c's float type, element by element (every rank's
// value of an element at once: ranks share an element's pattern).
//
// Sum and Mean: multiples k of the least subnormal 2^(emin-p+1) with |k| <=
// 2^p/ranks, so every partial sum over any subset of ranks is a multiple
// of the grid below 2^p grid steps, exact in the type (and in float32, where
// the 16-bit types accumulate); the mean is then the exact sum divided by
// the ranks, rounded once (float32: in float64, then to float32; 16-bit: to
// float32, then to the type), as every backend computes it. An element's
// ranks hold small k (many cancellations to +0), k spread over every
// magnitude, large k of one sign (the sum is normal: the smallest normal is
// 2^(p-1) steps), or signed zeros only (-0 where every rank holds -0);
// signed zeros are mixed into the others.
//
// Max and Min (any magnitude: extrema are exact): subnormals only (of any
// size, or the least few, one sign), subnormals mixed with normals near the
// least normal, normals of any exponent and signed zeros, or signed zeros
// with at most one subnormal (IEEE 754-2019: -0 < +0).
//
// Prod: one rank of each element (drawn per element) holds a subnormal, a
// signed zero or a normal of moderate size, the others +-1 or +-2: every
// partial product is that value times a power of two, exact and below
// overflow.
//
// Data movement draws what Max and Min draw.
func subnormalInputs(c confCall, ls []int) [][]uint64 {
	t := c.Type
	f := subFormatOf(t)
	ranks := len(ls)
	rng := rand.New(rand.NewPCG(c.DataSeed, 0x696e70))
	erng := rand.New(rand.NewPCG(c.DataSeed, 0x7375626e)) // per element: shared by the ranks
	maxL := 0
	for _, l := range ls {
		maxL = max(maxL, l)
	}
	grid := f.minSub()
	kmax := int64(1) << f.p / int64(ranks)
	sign := func(x float64) float64 {
		if rng.IntN(2) == 0 {
			return -x
		}
		return x
	}
	zero := func() float64 { return sign(0) }
	// spread: a multiple of the grid in [1, limit], log-uniform.
	spread := func(limit int64) float64 {
		b := 1 + rng.IntN(bits.Len64(uint64(limit)))
		k := int64(1)<<(b-1) + rng.Int64N(int64(1)<<(b-1))
		return float64(min(k, limit)) * grid
	}
	sub := func() float64 { // any subnormal: the least few a third of the time
		if rng.IntN(3) == 0 {
			return sign(float64(1+rng.IntN(4)) * grid)
		}
		return sign(spread(int64(1)<<(f.p-1) - 1))
	}
	// normal: a random significand times 2^e, e in [lo, hi].
	normal := func(lo, hi int) float64 {
		m := 1 + float64(rng.Int64N(int64(1)<<(f.p-1)))*math.Ldexp(1, 1-f.p)
		v := sign(math.Ldexp(m, lo+rng.IntN(hi-lo+1)))
		if t.encode(v) == t.poison() {
			v = -v
		}
		return v
	}
	red := c.Coll.reduces()
	vals := make([]float64, ranks)
	in := make([][]uint64, ranks)
	for r := range in {
		in[r] = make([]uint64, ls[r])
	}
	for i := 0; i < maxL; i++ {
		mode := erng.IntN(20)
		switch {
		case red && (c.Op == Sum || c.Op == Mean):
			s := 1 - 2*float64(erng.IntN(2))
			tiny := int64(1) << erng.IntN(5)
			for r := range vals {
				switch {
				case mode < 2: // signed zeros only, -0 on every rank half the time
					vals[r] = zero()
					if mode == 0 {
						vals[r] = math.Copysign(0, -1)
					}
				case rng.IntN(8) == 0:
					vals[r] = zero()
				case mode < 8: // small: sums cancel, or stay at the bottom of the subnormals
					vals[r] = float64(rng.Int64N(2*tiny+1)-tiny) * grid
				case mode < 15: // every magnitude
					vals[r] = sign(spread(kmax))
				default: // one sign, large: the sum is normal on two ranks or more
					vals[r] = s * float64(kmax/2+rng.Int64N(kmax/2+1)) * grid
				}
			}
		case red && c.Op == Prod:
			h := erng.IntN(ranks)
			for r := range vals {
				if r != h {
					vals[r] = sign([...]float64{1, 1, 1, 2}[rng.IntN(4)])
					continue
				}
				switch x := rng.IntN(20); {
				case x < 11:
					vals[r] = sub()
				case x < 14:
					vals[r] = zero()
				default:
					vals[r] = normal(f.emin, min(f.emax-8, f.emin+f.p))
				}
			}
		default: // Max, Min and data movement
			s := 1 - 2*float64(erng.IntN(2))
			one := erng.IntN(ranks)
			for r := range vals {
				switch {
				case mode < 6: // subnormals only
					vals[r] = sub()
				case mode < 9: // the least few subnormals, of one sign
					vals[r] = s * float64(1+rng.IntN(4)) * grid
				case mode < 12: // signed zeros, and one subnormal
					vals[r] = zero()
					if r == one && mode < 11 {
						vals[r] = sub()
					}
				default: // mixed
					switch x := rng.IntN(10); {
					case x < 4:
						vals[r] = sub()
					case x < 6:
						vals[r] = zero()
					case x < 8:
						vals[r] = normal(f.emin, f.emin+3)
					default:
						vals[r] = normal(f.emin, f.emax-1)
					}
				}
			}
		}
		for r := range in {
			if i < ls[r] {
				in[r][i] = t.encode(vals[r])
			}
		}
	}
	return in
}

// subnormalWant is the result of a reduction of c's subnormal inputs
// (inSubnormal), elements [lo, hi) of refs on ranks ranks, as bits of the
// element type: the exact result (refs.f, exact in float64), Mean's exact
// sum divided by ranks and rounded once to float32 (in float64 first: an
// innocuous double rounding), then to a 16-bit type. checkReduction
// compares float32 results with it; for the 16-bit types it is what
// checkReduced16 requires of exact inputs.
func subnormalWant(c confCall, ranks int, refs *confRefs, lo, hi int) []uint64 {
	want := make([]uint64, hi-lo)
	for i := range want {
		w := refs.f[lo+i]
		if c.Op == Mean {
			w = float64(float32(w / float64(ranks)))
		}
		want[i] = c.Type.encode(w)
	}
	return want
}

// isSubnormal reports whether bits v of float type t are subnormal.
func isSubnormal(t confType, v uint64) bool {
	x := math.Abs(t.float(v))
	return x != 0 && x < math.Ldexp(1, subFormatOf(t).emin)
}

// flushedReduce reduces vals (bits of t, one per rank) in rank order on a
// device that flushes subnormals of t to zeros of their sign: in every
// input, partial result and result (float32 accumulation for the 16-bit
// types, rounded to the type at each step).
func flushedReduce(t confType, op Op, vals []uint64) uint64 {
	ftz := func(x float64) float64 {
		x = t.float(t.encode(x))
		if x != 0 && math.Abs(x) < math.Ldexp(1, subFormatOf(t).emin) {
			return math.Copysign(0, x)
		}
		return x
	}
	acc := ftz(t.float(vals[0]))
	for _, v := range vals[1:] {
		acc = ftz(float64(refOp32(op, float32(acc), float32(ftz(t.float(v))))))
	}
	if op == Mean {
		acc = ftz(float64(float32(acc / float64(len(vals)))))
	}
	return t.encode(acc)
}

// shuffledReduce reduces vals (bits of t) as a ring or tree may: pairs of
// partial results merged in a random order, each merge accumulated in
// float32 and rounded to t (Mean: the sum rounded, then the quotient).
func shuffledReduce(t confType, op Op, vals []uint64, rng *rand.Rand) uint64 {
	part := make([]float64, len(vals))
	for i, v := range vals {
		part[i] = t.float(v)
	}
	for len(part) > 1 {
		i := rng.IntN(len(part))
		j := rng.IntN(len(part) - 1)
		if j >= i {
			j++
		}
		part[i] = t.float(t.encode(float64(refOp32(op, float32(part[i]), float32(part[j])))))
		part = append(part[:j], part[j+1:]...)
	}
	acc := part[0]
	if op == Mean {
		acc = float64(float32(acc / float64(len(vals))))
	}
	return t.encode(acc)
}

// TestConformanceSubnormalData checks the subnormal inputs (inSubnormal) of
// every float type, op and rank count: the reference the conformance test
// compares with (subnormalWant, checkReduced16's exact results) is the
// result of the rank-order reduction (rankOrderRef, the host's arithmetic,
// which deterministic mode gives) and of reductions in random orders that
// round every partial result to the type (rings and trees); a good share of
// inputs and results is subnormal; and a device that flushes subnormals
// would get a good share of the results wrong.
func TestConformanceSubnormalData(t *testing.T) {
	arithmetic(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, ct := range []confType{tF32, tF16, tBF16} {
		for _, op := range []Op{Sum, Mean, Max, Min, Prod} {
			var inN, inSub, outN, outSub, flushed int
			for ranks := 1; ranks <= 8; ranks++ {
				for seed := range uint64(4) {
					c := confCall{Coll: cAllReduce, Type: ct, Op: op, N: 600, Input: inSubnormal, DataSeed: seed<<8 | uint64(ranks)}
					in := confInputs(c, ranks)
					refs := refsOf(c, in)
					want := subnormalWant(c, ranks, refs, 0, c.N)
					vals := make([]uint64, ranks)
					for i := range want {
						for r := range vals {
							vals[r] = in[r][i]
							inN++
							if isSubnormal(ct, vals[r]) {
								inSub++
							}
						}
						if got := rankOrderRef(ct, op, vals); got != want[i] {
							t.Fatalf("%v %v ranks=%d element %d of %s: the rank-order reduction gives %s, the reference %s", ct, op, ranks, i, c, ct.format(got), ct.format(want[i]))
						}
						for range 3 {
							if got := shuffledReduce(ct, op, vals, rng); got != want[i] {
								t.Fatalf("%v %v ranks=%d element %d of %s: a reduction in another order gives %s, the reference %s (inputs %v)", ct, op, ranks, i, c, ct.format(got), ct.format(want[i]), vals)
							}
						}
						if ranks == 1 {
							continue
						}
						outN++
						if isSubnormal(ct, want[i]) {
							outSub++
						}
						if flushedReduce(ct, op, vals) != want[i] {
							flushed++
						}
					}
				}
			}
			si, so, fl := float64(inSub)/float64(inN), float64(outSub)/float64(outN), float64(flushed)/float64(outN)
			t.Logf("%v %v: %.0f%% of the inputs subnormal, %.0f%% of the results (2-8 ranks); %.0f%% wrong where subnormals flush", ct, op, 100*si, 100*so, 100*fl)
			// Prod: one rank of an element holds the subnormal.
			minIn := 0.3
			if op == Prod {
				minIn = 0.08
			}
			if si < minIn || so < 0.2 || fl < 0.3 {
				t.Errorf("%v %v: the data does not test subnormals: %.1f%% of the inputs subnormal, %.1f%% of the results, %.1f%% wrong where subnormals flush (want %.0f%%, 20%%, 30%%)",
					ct, op, 100*si, 100*so, 100*fl, 100*minIn)
			}
		}
	}
}

// TestConformanceSubnormalDraws: TestConformance's CI sessions (the CI
// seed and budget, without the race detector) draw reductions of float32
// subnormal inputs on host and on vulkan sessions, and reductions of
// float16 and bfloat16 subnormal inputs.
func TestConformanceSubnormalDraws(t *testing.T) {
	lim := confLimitsFor()
	lim.vulkanPct = 20 // the default, whatever -conformance.vulkan says
	lim.maxLen = 300000
	counts := map[string]int{}
	for i := range uint64(confCIBudget) {
		s := drawSession(confCISeed+i, lim)
		for _, c := range s.Calls {
			if c.Input == inSubnormal {
				kind := "moves"
				if c.Coll.reduces() {
					kind = "reduces"
				}
				counts[fmt.Sprintf("%s/%v/%s", s.G.Backend, c.Type, kind)]++
			}
		}
	}
	t.Logf("calls of subnormal inputs in TestConformance's CI sessions: %v", counts)
	for _, k := range []string{"host/f32/reduces", "vulkan/f32/reduces", "host/f16/reduces", "host/bf16/reduces"} {
		if counts[k] == 0 {
			t.Errorf("TestConformance's CI sessions draw no %s call of subnormal inputs", k)
		}
	}
	if counts["vulkan/f16/reduces"]+counts["vulkan/bf16/reduces"] == 0 {
		t.Errorf("TestConformance's CI sessions draw no vulkan reduction of 16-bit subnormal inputs")
	}
}

// confSubnormalCount counts a conformance run's calls of subnormal inputs
// (by backend, type, and whether they reduce) and the elements of their
// reductions' results, all and subnormal.
type confSubnormalCount struct {
	calls                 map[string]int
	results, subnormalRes int
}

// add counts session s's calls.
func (n *confSubnormalCount) add(s *confSession) {
	for _, c := range s.Calls {
		if c.Input != inSubnormal {
			continue
		}
		kind := "moves"
		if c.Coll.reduces() {
			kind = "reduces"
		}
		n.calls[fmt.Sprintf("%s/%v/%s", s.G.Backend, c.Type, kind)]++
		if !c.Coll.reduces() || s.G.Ranks < 2 {
			continue
		}
		in := confInputs(c, s.G.Ranks)
		for _, v := range subnormalWant(c, s.G.Ranks, refsOf(c, in), 0, len(in[0])) {
			n.results++
			if isSubnormal(c.Type, v) {
				n.subnormalRes++
			}
		}
	}
}

func (n *confSubnormalCount) String() string {
	total := 0
	for _, k := range n.calls {
		total += k
	}
	return fmt.Sprintf("%d calls %v; %d of %d reduced elements (2 ranks or more) subnormal", total, n.calls, n.subnormalRes, n.results)
}
