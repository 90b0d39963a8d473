package backendtest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// MultiBindingBytes is the MaxBindingBytes RunMulti opens its device with,
// so that its larger cases are split across dispatches.
const MultiBindingBytes = 4096

// multiSizes are the element counts RunMulti cycles through: empty, one, odd,
// around a work group of 256, and past MultiBindingBytes (split; 1024 f32
// elements fill one binding exactly, in 16-byte vectors where aligned).
var multiSizes = []int{0, 1, 7, 255, 256, 257, 1024, 1031}

// multiMaxN is the largest of multiSizes.
const multiMaxN = 1031

// multiCase is one op and scale of RunMulti.
type multiCase struct {
	name  string
	op    backend.Op
	scale func(k int) float64
}

func one(int) float64 { return 1 }

// meanScale is a mean's scale 1/K (for K = 1 that of 3, so it still
// divides).
func meanScale(k int) float64 {
	if k < 2 {
		return 1.0 / 3
	}
	return 1 / float64(k)
}

var multiCases = []multiCase{
	{"sum", backend.Sum, one},
	{"prod", backend.Prod, one},
	{"max", backend.Max, one},
	{"min", backend.Min, one},
	{"mean", backend.Sum, meanScale},
	{"prod*0.3", backend.Prod, func(int) float64 { return 0.3 }},
}

// RunMulti checks a stream's backend.MultiReducer (skipping when the
// device's stream has none) against Stream.Reduce on the same device and
// against references in Go: every op and the mean scale, f32 and f64, M =
// 1..9 destinations and K = 1..9 sources, sizes cycling through multiSizes on
// a device whose bindings hold MultiBindingBytes (so larger cases split),
// regions aligned (16-byte kernels where the backend has them) or not, every
// other case in place (dsts[j] == srcs[j]), inputs mixing exact values,
// random values, NaN, infinities, signed zeros and subnormals. Results must
// equal Reduce's bitwise (NaN payloads aside), the left-to-right reduction
// in the element type (subnormals included: a device that flushes them
// fails), and the float64
// reduction on the exact inputs (go test -short: M and K in 1..3 and 8..9
// only). Counters: BytesReduced, the host traffic,
// and one dispatch per pass where nothing splits. Then the steady state:
// repeated ReduceMulti+Submit+Wait creates no API object and allocates
// nothing.
func RunMulti(t *testing.T, open OpenFunc) {
	RunMultiOptions(t, open, Options{Short: testing.Short(), Sample: testing.Short()})
}

// RunMultiOptions runs RunMulti's checks with explicit options (Sample: M
// and K in 1..3 and 8..9 only).
func RunMultiOptions(t *testing.T, open OpenFunc, o Options) {
	dev := open(t, backend.OpenOptions{MaxBindingBytes: MultiBindingBytes})
	if _, ok := dev.Stream().(backend.MultiReducer); !ok {
		t.Skipf("%s streams have no ReduceMulti", dev.Info().Backend)
	}
	t.Run("f32", func(t *testing.T) { testMulti[float32](t, dev, o.Sample) })
	t.Run("f64", func(t *testing.T) { testMulti[float64](t, dev, o.Sample) })
	t.Run("Errors", func(t *testing.T) { testMultiErrors(t, dev) })
	t.Run("SteadyState", func(t *testing.T) { testMultiSteady(t, dev) })
}

// testMultiErrors checks that bad arguments fail with errors wrapping
// backend.ErrInvalidArgument, never a panic.
func testMultiErrors(t *testing.T, dev backend.Device) {
	b := alloc(t, dev, 4096, backend.DeviceLocal)
	reg := func(off, n int) backend.Region { return backend.Region{Buf: b, Off: off, Len: n} }
	a, c, e := reg(0, 256), reg(256, 256), reg(512, 256)
	mr := dev.Stream().(backend.MultiReducer)
	for _, tc := range []struct {
		name       string
		op         backend.Op
		dsts, srcs []backend.Region
	}{
		{"no destinations", backend.Sum, nil, []backend.Region{a}},
		{"no sources", backend.Sum, []backend.Region{a}, nil},
		{"unknown op", backend.NumOps, []backend.Region{a}, []backend.Region{c}},
		{"destination lengths differ", backend.Sum, []backend.Region{a, reg(256, 128)}, []backend.Region{e}},
		{"source length differs", backend.Sum, []backend.Region{a}, []backend.Region{reg(256, 128)}},
		{"a destination twice", backend.Sum, []backend.Region{a, a}, []backend.Region{c}},
		{"destinations overlap", backend.Sum, []backend.Region{a, reg(128, 256)}, []backend.Region{e}},
		{"source partly overlaps a destination", backend.Sum, []backend.Region{a, c}, []backend.Region{reg(384, 256)}},
		{"outside the buffer", backend.Sum, []backend.Region{reg(4000, 256)}, []backend.Region{a}},
		{"not whole elements", backend.Sum, []backend.Region{reg(2, 256)}, []backend.Region{c}},
	} {
		err := noPanic(t, tc.name, func() error { return mr.ReduceMulti(tc.op, backend.F32, tc.dsts, tc.srcs, 1) })
		isErr(t, err, backend.ErrInvalidArgument, tc.name)
	}
	err := noPanic(t, "unknown dtype", func() error {
		return mr.ReduceMulti(backend.Sum, backend.DType(99), []backend.Region{a}, []backend.Region{c}, 1)
	})
	isErr(t, err, backend.ErrInvalidArgument, "unknown dtype")
	submitWait(t, dev.Stream())
}

// multiBufs holds 9 source and 9 destination buffers and one for Reduce's
// result, each multiMaxN elements plus 16 bytes for offsets.
type multiBufs struct {
	srcs, dsts [9]backend.Buffer
	ref        backend.Buffer
}

func testMulti[T float](t *testing.T, dev backend.Device, sample bool) {
	dt := dtypeOf[T]()
	needDType(t, dev, dt)
	es := dt.Size()
	size := multiMaxN*es + 16
	var bufs multiBufs
	for i := range bufs.srcs {
		bufs.srcs[i] = alloc(t, dev, size, alternate(i))
		bufs.dsts[i] = alloc(t, dev, size, alternate(i+1))
	}
	bufs.ref = alloc(t, dev, size, backend.HostVisible)
	r := newRand(uint64(dt) + 7)
	c := 0
	for _, mc := range multiCases {
		for m := 1; m <= 9; m++ {
			for k := 1; k <= 9; k++ {
				c++
				if sample && (m > 3 && m < 8 || k > 3 && k < 8) {
					continue
				}
				n := multiSizes[c%len(multiSizes)]
				inPlace, aligned := c%2 == 0, c%3 != 0
				name := fmt.Sprintf("%s/M=%d/K=%d/n=%d", mc.name, m, k, n)
				if inPlace {
					name += "/in-place"
				}
				if !aligned {
					name += "/unaligned"
				}
				t.Run(name, func(t *testing.T) {
					multiCaseRun[T](t, dev, &bufs, r, mc.op, mc.scale(k), m, k, n, inPlace, aligned)
				})
			}
		}
	}
}

// multiCaseRun writes k sources of n elements, records Reduce into the
// reference buffer and then ReduceMulti into m destinations (in place: dsts[j]
// is srcs[j] for j < min(m, k)), and checks results and counters.
func multiCaseRun[T float](t *testing.T, dev backend.Device, bufs *multiBufs, r *rand.Rand, op backend.Op, scale float64, m, k, n int, inPlace, aligned bool) {
	dt := dtypeOf[T]()
	es := dt.Size()
	off := func(i int) int {
		if aligned {
			return 16 * (i % 2)
		}
		return es * (i % 3)
	}
	in := make([][]T, k)
	srcs := make([]backend.Region, k)
	for i := range k {
		in[i] = make([]T, n)
		fillMulti(r, in[i])
		srcs[i] = backend.Region{Buf: bufs.srcs[i], Off: off(i), Len: n * es}
		writeT(t, bufs.srcs[i], srcs[i].Off, in[i])
	}
	dsts := make([]backend.Region, m)
	for j := range m {
		if inPlace && j < k {
			dsts[j] = srcs[j]
		} else {
			dsts[j] = backend.Region{Buf: bufs.dsts[j], Off: off(j + 1), Len: n * es}
		}
	}
	ref := backend.Region{Buf: bufs.ref, Off: off(0), Len: n * es}
	st := dev.Stream()
	must(t, st.Reduce(op, dt, ref, srcs, scale), "Reduce")
	before := dev.Counters().Snapshot()
	must(t, st.(backend.MultiReducer).ReduceMulti(op, dt, dsts, srcs, scale), "ReduceMulti")
	got := dev.Counters().Snapshot().Sub(before)
	submitWait(t, st)

	want := readT[T](t, bufs.ref, ref.Off, n)
	mis := mismatches{t: t, what: "ReduceMulti"}
	for j, d := range dsts {
		out := readT[T](t, d.Buf, d.Off, n)
		for i := range n {
			if !same(out[i], want[i]) {
				mis.add("dsts[%d][%d] = %v (%#x), Reduce gives %v (%#x)", j, i, out[i], bitsOf(out[i]), want[i], bitsOf(want[i]))
			}
		}
	}
	mis.done()
	mis = mismatches{t: t, what: "Reduce vs Go"}
	for i := range n {
		if ref := reduceRef(op, in, i, scale); !same(want[i], ref) {
			mis.add("element %d = %v, Go's left-to-right reduction %v", i, want[i], ref)
		}
		if exactAt(i) {
			if ref := scaleRef(T(reduce64(op, in, i)), scale); !same(want[i], ref) {
				mis.add("exact element %d = %v, float64 reference %v", i, want[i], ref)
			}
		}
	}
	mis.done()

	if n == 0 {
		if got != (backend.CounterSnapshot{}) {
			t.Errorf("empty ReduceMulti counted %+v", got)
		}
		return
	}
	bytes := int64(n * es)
	if want := (passes(k) - 1 + int64(m)) * bytes; got.BytesReduced != want {
		t.Errorf("BytesReduced %d, want %d ((passes-1+M) x %d bytes)", got.BytesReduced, want, bytes)
	}
	var from, to int64
	for _, s := range srcs {
		if s.Buf.Memory() == backend.HostVisible {
			from += bytes
		}
	}
	for _, d := range dsts {
		if d.Buf.Memory() == backend.HostVisible {
			to += bytes
		}
	}
	if got.BytesFromHost != from || got.BytesToHost != to {
		t.Errorf("host traffic %d from, %d to; want %d, %d", got.BytesFromHost, got.BytesToHost, from, to)
	}
	copies := int64((m - 1) / 8)
	if p := passes(k) + copies; n*es+16 <= MultiBindingBytes && (got.Dispatches < p || got.Dispatches > p+tails(p, n, es)) {
		t.Errorf("%d dispatches, want %d (one per pass) or up to %d more tails", got.Dispatches, p, tails(p, n, es))
	} else if got.Dispatches < p {
		t.Errorf("%d dispatches, want at least %d", got.Dispatches, p)
	}
}

// exactAt reports whether fillMulti puts exact values at element i.
func exactAt(i int) bool { return i%4 == 0 }

// fillMulti fills v: exact values at every fourth element (exactAt), else
// random values, with NaN, infinities, signed zeros, subnormals, the least
// normal and -1.5 times it (whose sum is subnormal) and the largest finite
// values sprinkled in.
func fillMulti[T float](r *rand.Rand, v []T) {
	inf := math.Inf(1)
	sub, least := float64(math.SmallestNonzeroFloat32), 0x1p-126
	big := float64(math.MaxFloat32)
	if dtypeOf[T]() == backend.F64 {
		sub, least, big = math.SmallestNonzeroFloat64, 0x1p-1022, math.MaxFloat64
	}
	specials := [...]float64{math.NaN(), inf, -inf, 0, math.Copysign(0, -1), sub, -sub, 1e3 * sub, least, -1.5 * least, big, -big}
	for i := range v {
		switch {
		case exactAt(i):
			v[i] = T(exactValues[r.IntN(len(exactValues))])
		case r.IntN(4) == 0:
			v[i] = T(specials[r.IntN(len(specials))])
		default:
			x := 0.5 + 1.5*r.Float64()
			if r.IntN(2) == 0 {
				x = -x
			}
			v[i] = T(x)
		}
	}
}

func bitsOf[T float](x T) uint64 {
	if dtypeOf[T]() == backend.F64 {
		return math.Float64bits(float64(x))
	}
	return uint64(math.Float32bits(float32(x)))
}

// testMultiSteady checks that once its pipelines exist, an all-reduce in
// place of 9 split f32 regions (more than one pass, more than 8
// destinations) creates no API object and allocates no Go memory.
func testMultiSteady(t *testing.T, dev backend.Device) {
	const n, k = 3000, 9
	regs := make([]backend.Region, k)
	for i := range regs {
		regs[i] = backend.Region{Buf: alloc(t, dev, 4*n+4, alternate(i)), Off: 4 * (i % 2), Len: 4 * n}
	}
	st := dev.Stream()
	mr := st.(backend.MultiReducer)
	var err error
	step := func() {
		if err != nil {
			return
		}
		if err = mr.ReduceMulti(backend.Sum, backend.F32, regs, regs, 1/float64(k)); err != nil {
			return
		}
		if err = mr.ReduceMulti(backend.Max, backend.F32, regs[:3], regs[1:3], 1); err != nil {
			return
		}
		var f backend.Fence
		if f, err = st.Submit(); err != nil {
			return
		}
		err = f.Wait(context.Background())
	}
	for range 3 {
		step()
	}
	before := dev.Counters().Snapshot()
	allocs := testing.AllocsPerRun(20, step)
	must(t, err, "ReduceMulti+Submit+Wait")
	if d := dev.Counters().Snapshot().Sub(before); d.ObjectsCreated != 0 {
		t.Errorf("%d API objects created in steady state, want 0", d.ObjectsCreated)
	}
	if allocs != 0 && !raceEnabled && !asanEnabled {
		t.Errorf("%v allocations per ReduceMulti+Submit+Wait, want 0", allocs)
	}
}
