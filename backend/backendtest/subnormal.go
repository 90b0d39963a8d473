package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// Subnormals. Vulkan lets a device flush subnormal inputs and results of
// float instructions to zero unless a kernel asks otherwise, and NVIDIA's
// driver does; the host backend keeps them (Go's arithmetic is IEEE 754's).
// Every backend must give the host's bits for subnormal inputs and results
// too, so these checks draw data where they are common and compare bit for
// bit: a device, or a kernel, that flushes fails.

// subnormalTypes are the element types the subnormal checks draw: float32
// and float64 (the latter where the device has f64 kernels), and the 16-bit
// floats, whose kernels compute in float32 (bfloat16 subnormals are float32
// subnormals; binary16 ones round to subnormals of their own).
var subnormalTypes = []backend.DType{backend.F32, backend.F64, backend.Half, backend.BFloat16}

// SubnormalCase is one hand-written float32 reduction whose inputs or
// result are subnormal, with the host's result.
type SubnormalCase struct {
	Op    backend.Op
	In    []float32
	Scale float64
	Want  float32
}

// SubnormalCases are float32 reductions a device that flushes subnormals
// gets wrong (the first four came back 0 or -0 from an H200 whose kernels
// did not ask to keep subnormals).
var SubnormalCases = []SubnormalCase{
	{backend.Sum, []float32{float32(math.Copysign(0, -1)), 7.25744105e-39}, 1, 7.25744105e-39},
	{backend.Sum, []float32{float32(math.Copysign(0, -1)), -7.20255079e-39, float32(math.Copysign(0, -1))}, 1, -7.20255079e-39},
	{backend.Max, []float32{-7.47825346e-39, -0.000297615363}, 1, -7.47825346e-39},
	{backend.Min, []float32{0.467424095, -4.78294835e-39}, 1, -4.78294835e-39},
	{backend.Sum, []float32{0x1p-140, 0x1p-140}, 1, 0x1p-139},
	{backend.Sum, []float32{0x1p-126, -0x1.8p-126}, 1, -0x1p-127},
	{backend.Prod, []float32{0x1p-100, 0x1p-30}, 1, 0x1p-130},
	{backend.Prod, []float32{0x1p-149, 0x1p100}, 1, 0x1p-49},
	{backend.Max, []float32{0x1p-149, 0}, 1, 0x1p-149},
	{backend.Min, []float32{-0x1p-149, float32(math.Copysign(0, -1))}, 1, -0x1p-149},
	{backend.Max, []float32{float32(math.Copysign(0, -1)), 0x1p-149, -0x1p-149}, 1, 0x1p-149},
	{backend.Sum, []float32{0x1p-149, 0x1p-149, 0x1p-149}, 1.0 / 3, 0x1p-149},
	{backend.Sum, []float32{0x1p-126, 0}, 0.5, 0x1p-127},
	{backend.Sum, []float32{0x1.4p-147, 0}, 0.5, 0x1p-148},
	{backend.Sum, []float32{0x1.8p-148, 0}, 0.5, 0x1p-148},
	{backend.Sum, []float32{0x1p-127}, 0.375, 0x1.8p-129},
}

// RunSubnormals runs the subnormal checks (part of Run) on a device open
// returns: a backend runs them again on a device whose kernels a test hook
// changed.
func RunSubnormals(t *testing.T, open OpenFunc) {
	t.Helper()
	testSubnormals(t, open(t, backend.OpenOptions{}), false)
}

// RunSubnormalsOptions is RunSubnormals with o's Float32Subnormals (the
// other options do not apply).
func RunSubnormalsOptions(t *testing.T, open OpenFunc, o Options) {
	t.Helper()
	testSubnormals(t, open(t, backend.OpenOptions{}), o.Float32Subnormals)
}

func (s *suite) testSubnormals(t *testing.T) { testSubnormals(t, s.dev, false) }

// testSubnormals checks SubnormalCases, then Reduce of random data (K = 1,
// 2, 3, 8 and 9 sources: one pass and two; every op; a mean's 1/K and a
// multiply by 0.375 for Sum, the multiply for Prod), ReduceMulti of the
// same into two destinations where the stream has it, and Scale (by 1/3,
// 1/1000 and 0.375, and by 1, a copy) of every type in subnormalTypes the
// device reduces, on 1024 elements at offset 0 (the 16-byte kernels where a
// backend has them) and 1021 at an offset of one element (the scalar ones),
// bit for bit against the host's arithmetic (ref.go's combine and scaleRef
// in the element type; refElem for the 16-bit types). The data (drawSubnormal)
// makes a good share of the inputs and results subnormal; the test checks
// that a device that flushed them would fail it (FlushedShare).
func testSubnormals(t *testing.T, dev backend.Device, f32Only bool) {
	t.Run("Cases", func(t *testing.T) { testSubnormalCases(t, dev) })
	t.Run("SumEdges", func(t *testing.T) { testSumEdges(t, dev, newRand(0x5ed6e)) })
	for _, dt := range subnormalTypes {
		t.Run(dt.String(), func(t *testing.T) {
			if raceEnabled && testing.Short() && dt != backend.F32 {
				t.Skip("-short under the race detector: float only (the race detector checks synchronisation)")
			}
			if f32Only && dt != backend.F32 {
				t.Skip("Options.Float32Subnormals: float only")
			}
			needDType(t, dev, dt)
			testSubnormalType(t, dev, dt, newRand(0x5ab+uint64(dt)))
		})
	}
}

func testSubnormalCases(t *testing.T, dev backend.Device) {
	st := dev.Stream()
	outs := make([]backend.Buffer, len(SubnormalCases))
	for c, sc := range SubnormalCases {
		srcs := make([]backend.Region, len(sc.In))
		for j, v := range sc.In {
			b := alloc(t, dev, 4, alternate(j))
			writeT(t, b, 0, []float32{v})
			srcs[j] = backend.Region{Buf: b, Len: 4}
		}
		outs[c] = alloc(t, dev, 4, backend.HostVisible)
		must(t, st.Reduce(sc.Op, backend.F32, backend.Region{Buf: outs[c], Len: 4}, srcs, sc.Scale), "Reduce")
	}
	submitWait(t, st)
	for c, sc := range SubnormalCases {
		got := readT[float32](t, outs[c], 0, 1)[0]
		if math.Float32bits(got) != math.Float32bits(sc.Want) {
			t.Errorf("%v of %v scaled by %v = %v (%#08x), want %v (%#08x)", sc.Op, sc.In, sc.Scale, got, math.Float32bits(got), sc.Want, math.Float32bits(sc.Want))
		}
	}
}

// subnormalCall is one recorded call of testSubnormalType and its result.
type subnormalCall struct {
	what  string
	op    backend.Op
	k     int
	scale float64
	outs  []backend.Region
}

func testSubnormalType(t *testing.T, dev backend.Device, dt backend.DType, r *rand.Rand) {
	es := dt.Size()
	st := dev.Stream()
	mr, multi := st.(backend.MultiReducer)
	const maxK = 9
	for _, layout := range []struct{ n, off int }{{1024, 0}, {1021, 1}} {
		n, off := layout.n, layout.off
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			in := DrawInputs(r, dt, maxK, n, drawSubnormal)
			srcs := make([]backend.Region, maxK)
			for j := range srcs {
				b := alloc(t, dev, (off+n)*es, alternate(j))
				srcs[j] = backend.Region{Buf: b, Off: off * es, Len: n * es}
				writeElems(t, b, srcs[j].Off, dt, in[j])
			}
			out := func() backend.Region {
				return backend.Region{Buf: alloc(t, dev, (off+n)*es, backend.HostVisible), Off: off * es, Len: n * es}
			}
			var calls []subnormalCall
			for _, k := range []int{1, 2, 3, 8, 9} {
				for _, op := range allOps {
					scales := []float64{1}
					switch op {
					case backend.Sum:
						scales = append(scales, 0.375)
						if k > 1 {
							scales = append(scales, 1/float64(k))
						}
					case backend.Prod:
						scales = append(scales, 0.375)
					}
					for _, scale := range scales {
						c := subnormalCall{what: "Reduce", op: op, k: k, scale: scale, outs: []backend.Region{out()}}
						must(t, st.Reduce(op, dt, c.outs[0], srcs[:k], scale), "Reduce")
						calls = append(calls, c)
						if multi {
							c := subnormalCall{what: "ReduceMulti", op: op, k: k, scale: scale, outs: []backend.Region{out(), out()}}
							must(t, mr.ReduceMulti(op, dt, c.outs, srcs[:k], scale), "ReduceMulti")
							calls = append(calls, c)
						}
					}
				}
			}
			for _, scale := range []float64{1, 1.0 / 3, 1.0 / 1000, 0.375} {
				c := subnormalCall{what: "Scale", op: backend.Sum, k: 1, scale: scale, outs: []backend.Region{out()}}
				must(t, st.Scale(dt, c.outs[0], srcs[0], scale), "Scale")
				calls = append(calls, c)
			}
			submitWait(t, st)

			var results, flushedDiffer, subnormal int
			for _, c := range calls {
				mis := mismatches{t: t, what: fmt.Sprintf("%v %s %v of %d sources, scale %.4g", dt, c.what, c.op, c.k, c.scale)}
				want := make([]uint64, n)
				for i := range want {
					want[i] = refSubnormal(dt, c.op, in[:c.k], i, c.scale)
					results++
					if isSubnormal(dt, want[i]) {
						subnormal++
					}
					if !sameElem(dt, flushedRef(dt, c.op, in[:c.k], i, c.scale), want[i]) {
						flushedDiffer++
					}
				}
				for j, o := range c.outs {
					got := readElems(t, o, dt)
					for i := range got {
						if !sameElem(dt, got[i], want[i]) {
							args := make([]uint64, c.k)
							for s := range args {
								args[s] = in[s][i]
							}
							mis.add("out %d element %d = %s, the host gives %s, from %s", j, i, fmtSub(dt, got[i]), fmtSub(dt, want[i]), fmtSubs(dt, args))
						}
					}
				}
				mis.done()
			}
			// A device that flushed float32 (float64) subnormal inputs and
			// results would get this share of the results wrong: the data
			// must make it large, and many results subnormal.
			flushed, sub := float64(flushedDiffer)/float64(results), float64(subnormal)/float64(results)
			t.Logf("%d results: %.1f%% subnormal, %.1f%% wrong where subnormals are flushed", results, 100*sub, 100*flushed)
			if want := minFlushedShare[dt]; flushed < want {
				t.Errorf("only %.1f%% of the results differ where subnormals are flushed, want %.0f%%: the data does not test flushing", 100*flushed, 100*want)
			}
			if sub < 0.05 {
				t.Errorf("only %.1f%% of the results are subnormal: the data does not test them", 100*sub)
			}
		})
	}
}

// minFlushedShare is the least share of testSubnormalType's results that
// flushedRef must get wrong. Binary16 values, subnormals included, are
// normal in float32, so flushing float32 changes no binary16 result: its
// check is the share of subnormal results alone.
var minFlushedShare = map[backend.DType]float64{backend.F32: 0.1, backend.F64: 0.1, backend.BFloat16: 0.1, backend.Half: 0}

// isSubnormal reports whether the element bits x of the float type dt are
// a subnormal.
func isSubnormal(dt backend.DType, x uint64) bool {
	switch dt {
	case backend.F32:
		return x&0x7F800000 == 0 && x&0x7FFFFF != 0
	case backend.F64:
		return x&0x7FF0000000000000 == 0 && x&0xFFFFFFFFFFFFF != 0
	case backend.Half:
		return x&0x7C00 == 0 && x&0x3FF != 0
	}
	return x&0x7F80 == 0 && x&0x7F != 0
}

// drawSubnormal returns the bits of a random element of the float type dt
// for the subnormal checks: a third subnormals (a third of those the least
// few), a sixth signed zeros, a sixth normals within a factor 8 of the least
// normal (whose differences and halves are subnormal), a sixth in the binades
// whose products of two are subnormal (float32 2^-80..2^-66, float64
// 2^-560..2^-520; binary16 and bfloat16: those near the top of their range
// and below 1), and a sixth of magnitude 2^-8..2^8.
func drawSubnormal(r *rand.Rand, dt backend.DType) uint64 {
	var mant, bias, emax int // significand bits, exponent bias, largest biased exponent
	switch dt {
	case backend.F32:
		mant, bias, emax = 23, 127, 254
	case backend.F64:
		mant, bias, emax = 52, 1023, 2046
	case backend.Half:
		mant, bias, emax = 10, 15, 30
	case backend.BFloat16:
		mant, bias, emax = 7, 127, 254
	default:
		panic("drawSubnormal: not a float type")
	}
	sign := uint64(r.IntN(2)) << (8*dt.Size() - 1)
	frac := func() uint64 { return r.Uint64N(1 << mant) }
	field := func(e int) uint64 { return uint64(min(max(e, 1), emax)) << mant }
	switch r.IntN(6) {
	case 0, 1:
		if r.IntN(3) == 0 {
			return sign | uint64(1+r.IntN(4))
		}
		return sign | 1 + r.Uint64N(1<<mant-1)
	case 2:
		return sign
	case 3:
		return sign | field(1+r.IntN(3)) | frac()
	case 4:
		e := -73 + r.IntN(15) // float32
		switch dt {
		case backend.F64:
			e = -540 + r.IntN(41)
		case backend.Half:
			e = -8 + r.IntN(8)
		}
		return sign | field(e+bias) | frac()
	}
	return sign | field(bias-8+r.IntN(17)) | frac()
}

// refSubnormal is the host's element i of the reduction of in by op, scaled
// by scale: float32 and float64 left to right in the type (ref.go), the
// 16-bit types through float32 (refElem).
func refSubnormal(dt backend.DType, op backend.Op, in [][]uint64, i int, scale float64) uint64 {
	switch dt {
	case backend.F32:
		acc := math.Float32frombits(uint32(in[0][i]))
		for _, s := range in[1:] {
			acc = combine(op, acc, math.Float32frombits(uint32(s[i])))
		}
		return uint64(math.Float32bits(scaleRef(acc, scale)))
	case backend.F64:
		acc := math.Float64frombits(in[0][i])
		for _, s := range in[1:] {
			acc = combine(op, acc, math.Float64frombits(s[i]))
		}
		return math.Float64bits(scaleRef(acc, scale))
	}
	return refElem(dt, op, in, i, scale)
}

// flushedRef is refSubnormal on a device that flushes float32 (or float64)
// subnormals, inputs and results of every operation, to zeros of their
// sign: for the 16-bit types the float32 arithmetic their kernels would do
// with the hardware's operations.
func flushedRef(dt backend.DType, op backend.Op, in [][]uint64, i int, scale float64) uint64 {
	switch dt {
	case backend.F64:
		ftz := func(x float64) float64 {
			if x != 0 && math.Abs(x) < 0x1p-1022 {
				return math.Copysign(0, x)
			}
			return x
		}
		acc := ftz(math.Float64frombits(in[0][i]))
		for _, s := range in[1:] {
			acc = ftz(combine(op, acc, ftz(math.Float64frombits(s[i]))))
		}
		return math.Float64bits(ftz(scaleRef(acc, scale)))
	case backend.F32, backend.Half, backend.BFloat16:
		x := func(j int) float32 {
			if dt == backend.F32 {
				return ftz32(math.Float32frombits(uint32(in[j][i])))
			}
			return ftz32(to32(dt, uint16(in[j][i])))
		}
		acc := x(0)
		for j := 1; j < len(in); j++ {
			acc = ftz32(combine(op, acc, x(j)))
		}
		acc = ftz32(scaleRef(acc, scale))
		if dt == backend.F32 {
			return uint64(math.Float32bits(acc))
		}
		return uint64(from32(dt, acc))
	}
	panic("flushedRef: not a float type")
}

// FlushedFloat32 is the float32 reduction of in by op, in order, scaled by
// scale, as a device that flushes subnormal inputs and results of every
// operation to zeros of their sign computes it (flushedRef): what a
// flushing device's float32 kernels give.
func FlushedFloat32(op backend.Op, in []float32, scale float64) float32 {
	u := make([][]uint64, len(in))
	for j, v := range in {
		u[j] = []uint64{uint64(math.Float32bits(v))}
	}
	return math.Float32frombits(uint32(flushedRef(backend.F32, op, u, 0, scale)))
}

func ftz32(x float32) float32 {
	if x != 0 && math.Abs(float64(x)) < 0x1p-126 {
		return float32(math.Copysign(0, float64(x)))
	}
	return x
}

// fmtSub formats element bits x of a float type dt, with the bits.
func fmtSub(dt backend.DType, x uint64) string {
	switch dt {
	case backend.F32:
		return fmt.Sprintf("%v (%#08x)", math.Float32frombits(uint32(x)), x)
	case backend.F64:
		return fmt.Sprintf("%v (%#016x)", math.Float64frombits(x), x)
	}
	return FmtElem(dt, x)
}

func fmtSubs(dt backend.DType, v []uint64) string {
	s := "["
	for i, x := range v {
		if i > 0 {
			s += ", "
		}
		s += fmtSub(dt, x)
	}
	return s + "]"
}

// testSumEdges checks float32 sums (K = 1, 2, 3, 8 and 9 sources; a plain
// sum and a mean; Reduce and ReduceMulti) where the inputs sit at the edges
// of the range in which a kernel may add on hardware that flushes
// subnormals, whole 16-byte groups at once (reduce.comp's sum_fast): biased
// exponents 24, 25 and 26, partial sums that cancel down to 2^-125, sums that
// overflow on the way (and come back, or not), the largest finite values,
// zeros of both signs (every source, or some); a quarter of the groups of 4
// elements also hold one edge value (a zero, a subnormal, Inf, a quiet NaN,
// exponent 24) somewhere among their sources.
// Bit for bit against the host (refSubnormal).
func testSumEdges(t *testing.T, dev backend.Device, r *rand.Rand) {
	const dt, maxK = backend.F32, 9
	needDType(t, dev, dt)
	st := dev.Stream()
	mr, multi := st.(backend.MultiReducer)
	frac := func() uint32 { return uint32(r.Uint64N(1 << 23)) }
	sign := func() uint32 { return uint32(r.IntN(2)) << 31 }
	fast := func() uint32 { // finite, biased exponent 25..254
		var e uint32
		switch r.IntN(5) {
		case 0:
			e = 25 + uint32(r.IntN(3))
		case 1:
			e = 250 + uint32(r.IntN(5))
		case 2:
			e = 25 + uint32(r.IntN(230))
		default:
			e = 120 + uint32(r.IntN(16))
		}
		return sign() | e<<23 | frac()
	}
	edges := []uint32{0, 0x80000000, 1, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC01234, 24 << 23, 0x80000000 | 24<<23 | 0x1234}
	for _, layout := range []struct{ n, off int }{{1024, 0}, {1021, 1}} {
		n, off := layout.n, layout.off
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			in := make([][]uint64, maxK)
			for j := range in {
				in[j] = make([]uint64, n)
			}
			for i := 0; i < n; i++ {
				zeros := r.IntN(8) // 0: every source a zero (1: every one -0), 2: some sources zeros
				for j := range in {
					switch {
					case zeros == 0, zeros == 2 && r.IntN(3) == 0:
						in[j][i] = uint64(sign())
					case zeros == 1:
						in[j][i] = 0x80000000
					default:
						in[j][i] = uint64(fast())
					}
				}
				if r.IntN(4) == 0 { // cancel: the next source is minus the partial sum, give or take an ulp
					j := 1 + r.IntN(maxK-1)
					acc := math.Float32frombits(uint32(in[0][i]))
					for s := 1; s < j; s++ {
						acc += math.Float32frombits(uint32(in[s][i]))
					}
					if b := math.Float32bits(-acc); b&0x7F800000 != 0x7F800000 && (b>>23)&0xFF >= 25 {
						in[j][i] = uint64(b + uint32(r.IntN(3)) - 1)
					}
				}
			}
			for g := 0; g < n; g += 4 {
				if r.IntN(4) == 0 {
					i := min(g+r.IntN(4), n-1)
					in[r.IntN(maxK)][i] = uint64(edges[r.IntN(len(edges))])
				}
			}
			srcs := make([]backend.Region, maxK)
			for j := range srcs {
				b := alloc(t, dev, (off+n)*4, alternate(j))
				srcs[j] = backend.Region{Buf: b, Off: off * 4, Len: n * 4}
				writeElems(t, b, srcs[j].Off, dt, in[j])
			}
			out := func() backend.Region {
				return backend.Region{Buf: alloc(t, dev, (off+n)*4, backend.HostVisible), Off: off * 4, Len: n * 4}
			}
			var calls []subnormalCall
			for _, k := range []int{1, 2, 3, 8, 9} {
				for _, scale := range []float64{1, 1 / float64(k)} {
					c := subnormalCall{what: "Reduce", op: backend.Sum, k: k, scale: scale, outs: []backend.Region{out()}}
					must(t, st.Reduce(backend.Sum, dt, c.outs[0], srcs[:k], scale), "Reduce")
					calls = append(calls, c)
					if multi {
						c := subnormalCall{what: "ReduceMulti", op: backend.Sum, k: k, scale: scale, outs: []backend.Region{out(), out()}}
						must(t, mr.ReduceMulti(backend.Sum, dt, c.outs, srcs[:k], scale), "ReduceMulti")
						calls = append(calls, c)
					}
				}
			}
			submitWait(t, st)
			for _, c := range calls {
				mis := mismatches{t: t, what: fmt.Sprintf("%v %s sum of %d sources, scale %.4g", dt, c.what, c.k, c.scale)}
				for j, o := range c.outs {
					got := readElems(t, o, dt)
					for i := range got {
						if want := refSubnormal(dt, c.op, in[:c.k], i, c.scale); got[i] != want {
							args := make([]uint64, c.k)
							for s := range args {
								args[s] = in[s][i]
							}
							mis.add("out %d element %d = %s, the host gives %s, from %s", j, i, fmtSub(dt, got[i]), fmtSub(dt, want), fmtSubs(dt, args))
						}
					}
				}
				mis.done()
			}
		})
	}
}
