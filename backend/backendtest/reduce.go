package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

var (
	reduceSizes = []int{0, 1, 255, 256, 257, 65537}
	reduceKs    = []int{1, 2, 3, 8, 9, 17}
	allOps      = []backend.Op{backend.Sum, backend.Prod, backend.Max, backend.Min}
	// intOps are the operators of the integer types only.
	intOps = []backend.Op{backend.BAnd, backend.BOr, backend.BXor, backend.LAnd, backend.LOr, backend.LXor}
)

// opsOf returns the operators defined on dt: allOps, and intOps too for an
// integer type.
func opsOf(dt backend.DType) []backend.Op {
	if dt.IsInt() {
		return append(append([]backend.Op(nil), allOps...), intOps...)
	}
	return allOps
}

// reduceBufs are the buffers of a reduction case: each source buffer holds
// the exact inputs at [0, stride) and the random inputs at [stride, 2*stride);
// the destinations hold one result per op, stride bytes apart. Sources
// alternate between device-local and host-visible memory, so kernels read
// both kinds; the exact results land in host-visible memory, the random ones
// in device-local memory.
type reduceBufs struct {
	srcs         []backend.Buffer
	dstE, dstR   backend.Buffer
	stride       int // bytes
	capElems, es int
}

func newReduceBufs(t *testing.T, dev backend.Device, k, n, es int) *reduceBufs {
	t.Helper()
	b := &reduceBufs{stride: n * es, capElems: n, es: es}
	for i := range k {
		b.srcs = append(b.srcs, alloc(t, dev, 2*b.stride, alternate(i)))
	}
	b.dstE = alloc(t, dev, backend.NumOps*b.stride, backend.HostVisible)
	b.dstR = alloc(t, dev, backend.NumOps*b.stride, backend.DeviceLocal)
	return b
}

// testReduceMatrix runs every op x K x size for T, with exact and random
// inputs, and checks the counters of every case.
func testReduceMatrix[T float](t *testing.T, s *suite) {
	dt := dtypeOf[T]()
	needDType(t, s.dev, dt)
	bufs := newReduceBufs(t, s.dev, reduceKs[len(reduceKs)-1], reduceSizes[len(reduceSizes)-1], dt.Size())
	r := newRand(uint64(dt) + 1)
	for _, k := range reduceKs {
		for _, n := range reduceSizes {
			if s.opts.Short && n > 4096 && k > 3 {
				continue
			}
			t.Run(fmt.Sprintf("K=%d/n=%d", k, n), func(t *testing.T) {
				reduceCase[T](t, s.dev, bufs, r, k, n, allOps)
			})
		}
	}
}

// testReduceLarge runs one case of n elements, large enough to be split
// across a device's work groups (or the host's goroutines) many times over,
// for sum and max (the other ops take the same path).
func testReduceLarge[T float](t *testing.T, s *suite, k, n int) {
	dt := dtypeOf[T]()
	needDType(t, s.dev, dt)
	reduceCase[T](t, s.dev, newReduceBufs(t, s.dev, k, n, dt.Size()), newRand(99), k, n, []backend.Op{backend.Sum, backend.Max})
}

// reduceCase writes k exact and k random sources of n elements, reduces them
// with each of ops in one submission, and checks the results and the
// counters.
func reduceCase[T float](t *testing.T, dev backend.Device, bufs *reduceBufs, r *rand.Rand, k, n int, ops []backend.Op) {
	dt := dtypeOf[T]()
	es := dt.Size()
	exact, random := make([][]T, k), make([][]T, k)
	exactR, randomR := make([]backend.Region, k), make([]backend.Region, k)
	for i := range k {
		exact[i], random[i] = make([]T, n), make([]T, n)
		fillExact(r, exact[i])
		fillRandom(r, random[i])
		writeT(t, bufs.srcs[i], 0, exact[i])
		writeT(t, bufs.srcs[i], bufs.stride, random[i])
		exactR[i] = backend.Region{Buf: bufs.srcs[i], Off: 0, Len: n * es}
		randomR[i] = backend.Region{Buf: bufs.srcs[i], Off: bufs.stride, Len: n * es}
	}

	st := dev.Stream()
	before := dev.Counters().Snapshot()
	for _, op := range ops {
		off := int(op) * bufs.stride
		must(t, st.Reduce(op, dt, backend.Region{Buf: bufs.dstE, Off: off, Len: n * es}, exactR, 1), "Reduce "+op.String())
		must(t, st.Reduce(op, dt, backend.Region{Buf: bufs.dstR, Off: off, Len: n * es}, randomR, 1), "Reduce "+op.String())
	}
	submitWait(t, st)
	delta := dev.Counters().Snapshot().Sub(before)
	reductions := int64(2 * len(ops))
	if want, extra := reductions*passes(k)*pieces(n, es, dev.Info().MaxBindingBytes), tails(reductions*passes(k), n, es); delta.Dispatches < want || delta.Dispatches > want+extra {
		t.Errorf("Dispatches: %d, want %d (%d reductions x %d passes x pieces), or up to %d more tails", delta.Dispatches, want, reductions, passes(k), extra)
	}
	if want := reductions * passes(k) * int64(n*es); delta.BytesReduced != want {
		t.Errorf("BytesReduced: %d, want %d", delta.BytesReduced, want)
	}
	if n > 0 && delta.Submits != 1 {
		t.Errorf("Submits: %d, want 1", delta.Submits)
	}

	u := unit[T]()
	for _, op := range ops {
		off := int(op) * bufs.stride
		gotE := readT[T](t, bufs.dstE, off, n)
		gotR := readT[T](t, bufs.dstR, off, n)
		me := &mismatches{t: t, what: fmt.Sprintf("%v %v exact inputs", dt, op)}
		mr := &mismatches{t: t, what: fmt.Sprintf("%v %v random inputs", dt, op)}
		for i := range n {
			// Exact inputs: the float64 result is exact and representable.
			if want := T(reduce64(op, exact, i)); !same(gotE[i], want) {
				me.add("element %d: got %v, want %v", i, gotE[i], want)
			}
			// Random inputs: bit for bit the left-to-right reduction in T...
			if want := reduceRef(op, random, i, 1); !same(gotR[i], want) {
				mr.add("element %d: got %v, want %v (left to right in %v)", i, gotR[i], want, dt)
			}
			// ...and, independently, within the rounding bound of the
			// float64 result: recursive summation and products are off by
			// at most (k-1) unit roundoffs (relative to sum |x| for sums),
			// doubled because the float64 reference rounds too; max and min
			// are exact.
			ref, got := reduce64(op, random, i), float64(gotR[i])
			bound := 0.0
			switch op {
			case backend.Sum:
				var abs float64
				for _, src := range random {
					abs += math.Abs(float64(src[i]))
				}
				bound = 2.0001 * float64(k-1) * u * abs
			case backend.Prod:
				bound = 2.0001 * float64(k-1) * u * math.Abs(ref)
			}
			if math.Abs(got-ref) > bound {
				mr.add("element %d: got %v, float64 reference %v, differs by %g > bound %g", i, got, ref, math.Abs(got-ref), bound)
			}
		}
		me.done()
		mr.done()
	}
}

// testSpecials checks NaN and infinity propagation for every op, the IEEE
// 754-2019 max/min of signed zeros and NaN, and NaN in a later pass of a
// reduction of more than 8 sources.
func testSpecials[T float](t *testing.T, s *suite) {
	dt := dtypeOf[T]()
	needDType(t, s.dev, dt)
	es := dt.Size()
	nan, inf := T(math.NaN()), T(math.Inf(1))
	negZero := T(math.Copysign(0, -1))

	// Hand-written expectations, independent of the reference combine.
	type want struct {
		op   backend.Op
		a, b T
		want T
	}
	table := []want{
		{backend.Max, negZero, 0, 0}, {backend.Max, 0, negZero, 0},
		{backend.Min, negZero, 0, negZero}, {backend.Min, 0, negZero, negZero},
		{backend.Max, negZero, negZero, negZero}, {backend.Min, 0, 0, 0},
		{backend.Max, nan, 1, nan}, {backend.Max, 1, nan, nan}, {backend.Max, nan, inf, nan},
		{backend.Min, nan, -inf, nan}, {backend.Min, -inf, nan, nan}, {backend.Min, nan, nan, nan},
		{backend.Max, -inf, 1, 1}, {backend.Min, inf, -1, -1}, {backend.Max, inf, -inf, inf}, {backend.Min, inf, -inf, -inf},
		{backend.Sum, inf, -inf, nan}, {backend.Sum, inf, 1, inf}, {backend.Sum, nan, 1, nan}, {backend.Sum, 1, nan, nan},
		{backend.Sum, negZero, negZero, negZero}, {backend.Sum, negZero, 0, 0},
		{backend.Prod, inf, 0, nan}, {backend.Prod, -inf, 2, -inf}, {backend.Prod, nan, 2, nan}, {backend.Prod, -1, 0, negZero},
	}
	// Every ordered pair and triple of special values, checked against the
	// reference combine.
	specials := []T{nan, inf, -inf, 0, negZero, 1, -1, 2.5}
	var pairs [2][]T
	for _, a := range specials {
		for _, b := range specials {
			pairs[0], pairs[1] = append(pairs[0], a), append(pairs[1], b)
		}
	}
	var triples [3][]T
	small := specials[:6]
	for _, a := range small {
		for _, b := range small {
			for _, c := range small {
				triples[0], triples[1], triples[2] = append(triples[0], a), append(triples[1], b), append(triples[2], c)
			}
		}
	}
	// K = 17, element i holding the special value in source i: the value
	// enters in the first, second or third pass.
	const k17 = 17
	var late [k17][]T
	for i := range late {
		late[i] = make([]T, 2*k17)
		for j := range late[i] {
			late[i][j] = T(1 + j%3)
		}
		late[i][i] = nan
		late[i][k17+i] = inf
	}

	st := s.dev.Stream()
	upload := func(cols [][]T) ([]backend.Region, int) {
		regs := make([]backend.Region, len(cols))
		for i, c := range cols {
			b := alloc(t, s.dev, len(c)*es, backend.DeviceLocal)
			writeT(t, b, 0, c)
			regs[i] = backend.Region{Buf: b, Len: len(c) * es}
		}
		return regs, len(cols[0])
	}
	var tableCols [2][]T
	for _, w := range table {
		tableCols[0], tableCols[1] = append(tableCols[0], w.a), append(tableCols[1], w.b)
	}
	tableR, tableN := upload(tableCols[:])
	pairR, pairN := upload(pairs[:])
	tripleR, tripleN := upload(triples[:])
	lateR, lateN := upload(late[:])

	type result struct {
		buf backend.Buffer
		n   int
	}
	record := func(op backend.Op, srcs []backend.Region, n int) result {
		b := alloc(t, s.dev, n*es, backend.HostVisible)
		must(t, st.Reduce(op, dt, backend.Region{Buf: b, Len: n * es}, srcs, 1), "Reduce")
		return result{b, n}
	}
	var tableRes [backend.NumOps]result
	var pairRes, tripleRes, lateRes [backend.NumOps]result
	for _, op := range allOps {
		tableRes[op] = record(op, tableR, tableN)
		pairRes[op] = record(op, pairR, pairN)
		tripleRes[op] = record(op, tripleR, tripleN)
		lateRes[op] = record(op, lateR, lateN)
	}
	submitWait(t, st)

	for _, op := range allOps {
		got := readT[T](t, tableRes[op].buf, 0, tableN)
		for i, w := range table {
			if w.op == op && !same(got[i], w.want) {
				t.Errorf("%v %v(%v, %v) = %v, want %v", dt, op, w.a, w.b, got[i], w.want)
			}
		}
		check := func(what string, cols [][]T, res result) {
			got := readT[T](t, res.buf, 0, res.n)
			m := &mismatches{t: t, what: fmt.Sprintf("%v %v %s", dt, op, what)}
			for i := range res.n {
				if want := reduceRef(op, cols, i, 1); !same(got[i], want) {
					args := make([]T, len(cols))
					for j := range cols {
						args[j] = cols[j][i]
					}
					m.add("inputs %v: got %v, want %v", args, got[i], want)
				}
			}
			m.done()
		}
		check("pairs", pairs[:], pairRes[op])
		check("triples", triples[:], tripleRes[op])
		check("K=17 with NaN or Inf in one source", late[:], lateRes[op])
	}
}

// testFloat64Precision checks that f64 values f32 cannot hold survive every
// path: 1+2^-40 and 1+2^-39 differ from 1 only below f32's precision.
func (s *suite) testFloat64Precision(t *testing.T) {
	needDType(t, s.dev, backend.F64)
	const (
		a = 1 + 0x1p-40
		b = 1 + 0x1p-39
	)
	dev, st := s.dev, s.dev.Stream()
	x := alloc(t, dev, 3*8, backend.DeviceLocal)
	y := alloc(t, dev, 3*8, backend.HostVisible)
	writeT(t, x, 0, []float64{a, b, 0x1p-40})
	writeT(t, y, 0, []float64{0x1p-40, a, a})
	reg := func(buf backend.Buffer, i int) backend.Region { return backend.Region{Buf: buf, Off: 8 * i, Len: 8} }
	out := alloc(t, dev, 8*8, backend.DeviceLocal)
	cases := []struct {
		name string
		rec  func(dst backend.Region) error
		want float64
	}{
		{"sum (1+2^-40) + 2^-40", func(d backend.Region) error {
			return st.Reduce(backend.Sum, backend.F64, d, []backend.Region{reg(x, 0), reg(y, 0)}, 1)
		}, b},
		{"max(1+2^-40, 1+2^-39)", func(d backend.Region) error {
			return st.Reduce(backend.Max, backend.F64, d, []backend.Region{reg(y, 1), reg(x, 1)}, 1)
		}, b},
		{"min(1+2^-39, 1+2^-40)", func(d backend.Region) error {
			return st.Reduce(backend.Min, backend.F64, d, []backend.Region{reg(x, 1), reg(y, 1)}, 1)
		}, a},
		{"prod (1+2^-40)^2, rounded to 1+2^-39", func(d backend.Region) error {
			return st.Reduce(backend.Prod, backend.F64, d, []backend.Region{reg(x, 0), reg(x, 0)}, 1)
		}, b},
		{"mean of (1+2^-40) and (1+2^-40)", func(d backend.Region) error {
			return st.Reduce(backend.Sum, backend.F64, d, []backend.Region{reg(y, 1), reg(y, 2)}, 0.5)
		}, a},
		{"single source", func(d backend.Region) error {
			return st.Reduce(backend.Sum, backend.F64, d, []backend.Region{reg(y, 1)}, 1)
		}, a},
		{"scale by 1", func(d backend.Region) error { return st.Scale(backend.F64, d, reg(x, 1), 1) }, b},
		{"copy", func(d backend.Region) error { return st.Copy(d, reg(x, 0)) }, a},
	}
	for i, c := range cases {
		must(t, c.rec(reg(out, i)), c.name)
	}
	submitWait(t, st)
	got := readT[float64](t, out, 0, len(cases))
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("%s: got %.17g, want %.17g", c.name, got[i], c.want)
		}
	}
}

// testScale checks the scale of Reduce (mean: the sum, then divided by N)
// and of Scale, for 1/4, 1/3 (divisions), 0.3 (a multiply) and 1 (a copy,
// bit for bit).
func testScale[T float](t *testing.T, s *suite) {
	dt := dtypeOf[T]()
	needDType(t, s.dev, dt)
	es := dt.Size()
	const n = 257
	dev, st := s.dev, s.dev.Stream()
	r := newRand(7 + uint64(dt))

	type reduceCase struct {
		op    backend.Op
		k     int
		scale float64
	}
	cases := []reduceCase{
		{backend.Sum, 4, 0.25}, {backend.Sum, 3, 1.0 / 3}, {backend.Sum, 1, 1.0 / 3}, {backend.Sum, 9, 1.0 / 9}, {backend.Sum, 3, 0.3},
		{backend.Prod, 3, 1.0 / 3}, {backend.Max, 3, 1.0 / 3}, {backend.Min, 17, 0.25},
	}
	srcs := make([][]T, 17)
	regs := make([]backend.Region, 17)
	for i := range srcs {
		srcs[i] = make([]T, n)
		fillRandom(r, srcs[i])
		b := alloc(t, dev, n*es, backend.DeviceLocal)
		writeT(t, b, 0, srcs[i])
		regs[i] = backend.Region{Buf: b, Len: n * es}
	}
	outs := make([]backend.Buffer, len(cases))
	for i, c := range cases {
		outs[i] = alloc(t, dev, n*es, backend.DeviceLocal)
		must(t, st.Reduce(c.op, dt, backend.Region{Buf: outs[i], Len: n * es}, regs[:c.k], c.scale), "Reduce")
	}

	// Scale: random values plus the special ones a copy must keep.
	special := []T{T(math.NaN()), T(math.Inf(1)), T(math.Inf(-1)), T(math.Copysign(0, -1)), 0, 1, -1}
	in := append(append([]T(nil), special...), srcs[0]...)
	m := len(in)
	src := alloc(t, dev, m*es, backend.HostVisible)
	writeT(t, src, 0, in)
	scales := []float64{0.25, 1.0 / 3, 0.3, 1}
	scaled := make([]backend.Buffer, len(scales))
	for i, sc := range scales {
		scaled[i] = alloc(t, dev, m*es, backend.DeviceLocal)
		must(t, st.Scale(dt, backend.Region{Buf: scaled[i], Len: m * es}, backend.Region{Buf: src, Len: m * es}, sc), "Scale")
	}
	// In place, into a copy of the input.
	inPlace := alloc(t, dev, m*es, backend.DeviceLocal)
	whole := backend.Region{Buf: inPlace, Len: m * es}
	must(t, st.Copy(whole, backend.Region{Buf: src, Len: m * es}), "Copy")
	must(t, st.Scale(dt, whole, whole, 1.0/3), "Scale in place")
	submitWait(t, st)

	for i, c := range cases {
		got := readT[T](t, outs[i], 0, n)
		mm := &mismatches{t: t, what: fmt.Sprintf("%v %v of %d sources * %.6g", dt, c.op, c.k, c.scale)}
		for j := range n {
			if want := reduceRef(c.op, srcs[:c.k], j, c.scale); !same(got[j], want) {
				mm.add("element %d: got %v, want %v", j, got[j], want)
			}
		}
		mm.done()
	}
	check := func(what string, b backend.Buffer, sc float64) {
		got := readT[T](t, b, 0, m)
		mm := &mismatches{t: t, what: fmt.Sprintf("%v %s by %.6g", dt, what, sc)}
		for j, v := range in {
			if want := scaleRef(v, sc); !same(got[j], want) {
				mm.add("element %d (%v): got %v, want %v", j, v, got[j], scaleRef(v, sc))
			}
		}
		mm.done()
	}
	for i, sc := range scales {
		check("Scale", scaled[i], sc)
	}
	check("Scale in place", inPlace, 1.0/3)
}

// testAlias checks reductions whose destination is one of the sources (the
// same region): the first source for every K, including reductions in
// several passes, and the last source for one-pass reductions.
func testAlias[T float](t *testing.T, s *suite) {
	dt := dtypeOf[T]()
	needDType(t, s.dev, dt)
	es := dt.Size()
	const n = 257
	dev, st := s.dev, s.dev.Stream()
	r := newRand(11 + uint64(dt))
	type aliasCase struct {
		k, dst int // dst is the index of the source the result replaces
		scale  float64
	}
	var cases []aliasCase
	for _, k := range reduceKs {
		cases = append(cases, aliasCase{k, 0, 1}, aliasCase{k, 0, 1.0 / 3})
		if k > 1 && k <= 8 {
			cases = append(cases, aliasCase{k, k - 1, 1})
		}
	}
	type pending struct {
		c    aliasCase
		srcs [][]T
		buf  backend.Buffer
	}
	var all []pending
	for _, c := range cases {
		srcs := make([][]T, c.k)
		regs := make([]backend.Region, c.k)
		for i := range srcs {
			srcs[i] = make([]T, n)
			fillRandom(r, srcs[i])
			b := alloc(t, dev, n*es, alternate(i))
			writeT(t, b, 0, srcs[i])
			regs[i] = backend.Region{Buf: b, Len: n * es}
		}
		must(t, st.Reduce(backend.Sum, dt, regs[c.dst], regs, c.scale), "Reduce")
		all = append(all, pending{c, srcs, regs[c.dst].Buf})
	}
	submitWait(t, st)
	for _, p := range all {
		got := readT[T](t, p.buf, 0, n)
		m := &mismatches{t: t, what: fmt.Sprintf("%v sum of %d sources into source %d * %.6g", dt, p.c.k, p.c.dst, p.c.scale)}
		for i := range n {
			if want := reduceRef(backend.Sum, p.srcs, i, p.c.scale); !same(got[i], want) {
				m.add("element %d: got %v, want %v", i, got[i], want)
			}
		}
		m.done()
	}
}

// testOffsets checks regions that start at odd element offsets, several of
// them in one buffer, for Reduce, Scale and Copy.
func testOffsets[T float](t *testing.T, s *suite) {
	dt := dtypeOf[T]()
	needDType(t, s.dev, dt)
	es := dt.Size()
	const n = 257
	const gap = n + 3 // elements between region starts; even, so every start stays odd
	dev, st := s.dev, s.dev.Stream()
	r := newRand(13 + uint64(dt))
	for _, k := range []int{1, 3, 9} {
		for _, mem := range []backend.Memory{backend.DeviceLocal, backend.HostVisible} {
			t.Run(fmt.Sprintf("K=%d/%v", k, mem), func(t *testing.T) {
				// Sources at elements 1, 1+gap, ...; the results after them.
				buf := alloc(t, dev, (k+3)*gap*es+es, mem)
				srcs := make([][]T, k)
				regs := make([]backend.Region, k)
				for i := range srcs {
					srcs[i] = make([]T, n)
					fillRandom(r, srcs[i])
					off := (1 + i*gap) * es
					writeT(t, buf, off, srcs[i])
					regs[i] = backend.Region{Buf: buf, Off: off, Len: n * es}
				}
				reg := func(j int) backend.Region { return backend.Region{Buf: buf, Off: (1 + (k+j)*gap) * es, Len: n * es} }
				must(t, st.Reduce(backend.Sum, dt, reg(0), regs, 1.0/3), "Reduce")
				must(t, st.Scale(dt, reg(1), reg(0), 0.25), "Scale")
				must(t, st.Copy(reg(2), regs[k-1]), "Copy")
				submitWait(t, st)
				sum := readT[T](t, buf, reg(0).Off, n)
				scaled := readT[T](t, buf, reg(1).Off, n)
				copied := readT[T](t, buf, reg(2).Off, n)
				m := &mismatches{t: t, what: fmt.Sprintf("%v at odd element offsets", dt)}
				for i := range n {
					want := reduceRef(backend.Sum, srcs, i, 1.0/3)
					if !same(sum[i], want) {
						m.add("reduce element %d: got %v, want %v", i, sum[i], want)
					}
					if w := T(want * T(0.25)); !same(scaled[i], w) {
						m.add("scale element %d: got %v, want %v", i, scaled[i], w)
					}
					if !same(copied[i], srcs[k-1][i]) {
						m.add("copy element %d: got %v, want %v", i, copied[i], srcs[k-1][i])
					}
				}
				// The sources are untouched.
				for i := range srcs {
					got := readT[T](t, buf, regs[i].Off, n)
					for j := range n {
						if !same(got[j], srcs[i][j]) {
							m.add("source %d element %d was overwritten: %v, was %v", i, j, got[j], srcs[i][j])
							break
						}
					}
				}
				m.done()
			})
		}
	}
}

// testSplit checks a device opened with MaxBindingBytes 4096: results are
// right, and the dispatches are the pieces a binding of at most 4096 bytes
// needs, per pass.
func testSplit[T float](t *testing.T, s *suite, dev backend.Device) {
	dt := dtypeOf[T]()
	needDType(t, dev, dt)
	es := dt.Size()
	limit := dev.Info().MaxBindingBytes
	if limit <= 0 || limit > 4096 {
		t.Fatalf("OpenOptions{MaxBindingBytes: 4096}: Info().MaxBindingBytes is %d, want 1..4096", limit)
	}
	st := dev.Stream()
	r := newRand(17 + uint64(dt))
	for _, n := range []int{1024, 1025, 3000} {
		for _, k := range []int{1, 3, 9, 17} {
			t.Run(fmt.Sprintf("K=%d/n=%d", k, n), func(t *testing.T) {
				srcs := make([][]T, k)
				regs := make([]backend.Region, k)
				for i := range srcs {
					srcs[i] = make([]T, n)
					fillRandom(r, srcs[i])
					b := alloc(t, dev, n*es, alternate(i))
					writeT(t, b, 0, srcs[i])
					regs[i] = backend.Region{Buf: b, Len: n * es}
				}
				out := alloc(t, dev, n*es, backend.DeviceLocal)
				scaled := alloc(t, dev, n*es, backend.HostVisible)
				copied := alloc(t, dev, n*es, backend.DeviceLocal)
				whole := func(b backend.Buffer) backend.Region { return backend.Region{Buf: b, Len: n * es} }

				before := dev.Counters().Snapshot()
				must(t, st.Reduce(backend.Sum, dt, whole(out), regs, 1.0/3), "Reduce")
				mid := dev.Counters().Snapshot()
				must(t, st.Scale(dt, whole(scaled), whole(out), 0.25), "Scale")
				must(t, st.Copy(whole(copied), whole(out)), "Copy")
				submitWait(t, st)
				after := dev.Counters().Snapshot()

				p := pieces(n, es, limit)
				red, rest := mid.Sub(before), after.Sub(mid)
				if want, extra := passes(k)*p, tails(passes(k), n, es); red.Dispatches < want || red.Dispatches > want+extra {
					t.Errorf("Reduce of %d sources, %d bytes per binding, limit %d: %d dispatches, want %d (%d passes x %d pieces) or up to %d more tails",
						k, n*es, limit, red.Dispatches, want, passes(k), p, extra)
				}
				if want := passes(k) * int64(n*es); red.BytesReduced != want {
					t.Errorf("Reduce: BytesReduced %d, want %d", red.BytesReduced, want)
				}
				if rest.Dispatches < p || rest.Dispatches > p+tails(1, n, es) {
					t.Errorf("Scale of %d bytes, limit %d: %d dispatches, want %d (or one more tail)", n*es, limit, rest.Dispatches, p)
				}
				if rest.Copies != 1 || rest.BytesCopied != int64(n*es) {
					t.Errorf("Copy: %d copies of %d bytes, want 1 of %d", rest.Copies, rest.BytesCopied, n*es)
				}

				gotR := readT[T](t, out, 0, n)
				gotS := readT[T](t, scaled, 0, n)
				gotC := readT[T](t, copied, 0, n)
				m := &mismatches{t: t, what: fmt.Sprintf("%v split at %d bytes", dt, limit)}
				for i := range n {
					want := reduceRef(backend.Sum, srcs, i, 1.0/3)
					if !same(gotR[i], want) {
						m.add("reduce element %d: got %v, want %v", i, gotR[i], want)
					}
					if w := T(want * T(0.25)); !same(gotS[i], w) {
						m.add("scale element %d: got %v, want %v", i, gotS[i], w)
					}
					if !same(gotC[i], want) {
						m.add("copy element %d: got %v, want %v", i, gotC[i], want)
					}
				}
				m.done()
			})
		}
	}
	// Regions that do not start on a binding boundary: results only (a GPU
	// binds from an aligned offset, which may cost it an extra piece).
	t.Run("offsets", func(t *testing.T) {
		const n, k = 3000, 3
		buf := alloc(t, dev, (k+1)*(n+1)*es+es, backend.DeviceLocal)
		srcs := make([][]T, k)
		regs := make([]backend.Region, k)
		for i := range srcs {
			srcs[i] = make([]T, n)
			fillRandom(r, srcs[i])
			regs[i] = backend.Region{Buf: buf, Off: (1 + i*(n+1)) * es, Len: n * es}
			writeT(t, buf, regs[i].Off, srcs[i])
		}
		dst := backend.Region{Buf: buf, Off: (1 + k*(n+1)) * es, Len: n * es}
		before := dev.Counters().Snapshot()
		must(t, st.Reduce(backend.Max, dt, dst, regs, 1), "Reduce")
		submitWait(t, st)
		if got, least := dev.Counters().Snapshot().Sub(before).Dispatches, pieces(n, es, limit); got < least {
			t.Errorf("%d dispatches for %d bytes per binding at limit %d, want at least %d", got, n*es, limit, least)
		}
		got := readT[T](t, buf, dst.Off, n)
		m := &mismatches{t: t, what: fmt.Sprintf("%v split at odd offsets", dt)}
		for i := range n {
			if want := reduceRef(backend.Max, srcs, i, 1); !same(got[i], want) {
				m.add("element %d: got %v, want %v", i, got[i], want)
			}
		}
		m.done()
	})
}
