//go:build cgo

package shimdev

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/internal/hostmath"
)

// The float32 self-test. A device that does not report DenormPreserveFloat32
// may flush float32 subnormals in kernels (NVIDIA's driver does), and then
// runs the ftz kernels, exact on the bits. On a GPU they cost little (a
// reduction is bound by memory: the H200 reduces 8 sources at 3.49 TB/s for a
// mean against 3.77 with the flushing hardware arithmetic), so a GPU without
// the promise runs them and no self-test. On a CPU driver they are several
// times slower (4.6-5.1x on lavapipe), and such a driver often keeps
// subnormals all the same (lavapipe's arithmetic is the CPU's), so the first
// open of a CPU driver's device in the process decides by measurement: it
// runs the hardware kernels of every float32 kind that has an ftz variant,
// on a device of its own, with every op and the scales (a mean's division
// and a multiplication) on data full of subnormals, and keeps them only when
// every result has the bits of the host's arithmetic (package hostmath). A
// mismatch, or a test that cannot run, selects the ftz kernels.
//
// A CPU driver runs a dispatch's work groups on a pool of threads, and the
// flush mode is a thread's: each dispatch has at least 4 work groups per CPU
// (lavapipe's pool has a thread per CPU) and never fewer than
// minSelfTestGroups, each holding every fixed case of its op (so one thread
// that keeps subnormals cannot pass the test for a pool that flushes).

const (
	// minSelfTestGroups is the fewest work groups of each 16-byte kernel's
	// dispatch (the scalar kernels' have 4 times as many): selfTestGroups.
	minSelfTestGroups = 32
	// selfTestSources is the sources of each reduction.
	selfTestSources = 3
	// selfTestTimeout bounds the wait for each dispatch.
	selfTestTimeout = time.Minute
	// float32PreserveReason is Float32Reason of a device that reports
	// DenormPreserveFloat32.
	float32PreserveReason = "the device keeps float32 subnormals in kernels that ask (DenormPreserveFloat32)"
	float32NoPromise      = "the device does not promise to keep float32 subnormals (no DenormPreserveFloat32)"
	// float32GPUReason is Float32Reason of a GPU that does not report
	// DenormPreserveFloat32: the ftz kernels run there without a self-test.
	float32GPUReason = float32NoPromise + ", and it is a GPU: the _ftz kernels run, exact on the bits and as fast as the " +
		"hardware's where a reduction is bound by memory (no self-test: on an H100 its extra logical device at the first " +
		"open slowed the transfers of later calls by 5-23%)"
)

// float32Choice is one physical device's float32 kernels, chosen once per
// process.
type float32Choice struct {
	once     sync.Once
	done     atomic.Bool // hardware and reason are set
	hardware bool
	reason   string
}

// float32Kernels returns whether Open's device of physical device index
// (described by info) runs the hardware float32 kernels, and why: yes
// where it reports DenormPreserveFloat32; no on a GPU that does not
// (float32GPUReason); else, on a CPU driver, the self-test's verdict, which
// the first call for index reaches (later and concurrent calls wait for it
// and share it).
func (in *Instance) float32Kernels(index int, info backend.DeviceInfo) (bool, string) {
	if info.DenormPreserveFloat32 {
		return true, float32PreserveReason
	}
	if info.Type != "cpu" {
		return false, float32GPUReason
	}
	c := in.float32Choice(index)
	c.once.Do(func() {
		in.f32.runs.Add(1)
		c.hardware, c.reason = in.selfTestFloat32(index, nil)
		c.done.Store(true)
	})
	return c.hardware, c.reason
}

// listedFloat32 is Devices' view of float32Kernels: the choice where it is
// known without a self-test or one has run, else false and "".
func (in *Instance) listedFloat32(index int, info backend.DeviceInfo) (bool, string) {
	if info.DenormPreserveFloat32 {
		return true, float32PreserveReason
	}
	if info.Type != "cpu" {
		return false, float32GPUReason
	}
	if c := in.float32Choice(index); c.done.Load() {
		return c.hardware, c.reason
	}
	return false, ""
}

func (in *Instance) float32Choice(index int) *float32Choice {
	in.f32.Lock()
	defer in.f32.Unlock()
	if in.f32.choice == nil {
		in.f32.choice = map[int]*float32Choice{}
	}
	c := in.f32.choice[index]
	if c == nil {
		c = &float32Choice{}
		in.f32.choice[index] = c
	}
	return c
}

// SelfTestResult is the results of one kernel's dispatch in the self-test,
// as a test hook sees them (Instance.SelfTestFloat32).
type SelfTestResult struct {
	Kernel string     // the kernel's name (kernels.ReduceF32, ...)
	Op     backend.Op // Sum for a Scale
	Scale  float64
	In     [][]float32 // the sources (one for a Scale)
	Got    []float32   // what the kernel wrote (to one destination)
}

// selfTamper, a test hook, sees the results of each kernel of the
// self-test before they are compared and may change them (as a device that
// flushes would have) or fail the test.
type selfTamper func(*SelfTestResult) error

// selfTestFloat32 runs the self-test on a new device of physical device
// index (default options, no validation check: the layer's messages stay
// in the instance's log) and returns its verdict and why.
func (in *Instance) selfTestFloat32(index int, tamper selfTamper) (hardware bool, reason string) {
	d, err := in.open(index, backend.OpenOptions{}, cshim.OpenOptions{})
	if err != nil {
		return false, fmt.Sprintf("%s, and the self-test of its float32 arithmetic could not run: %v", float32NoPromise, err)
	}
	d.validation = false
	var t *selfTest
	if err = d.setFloat32(true, "self-test"); err == nil {
		t, err = d.selfTest(tamper)
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return false, fmt.Sprintf("%s, and the self-test of its float32 arithmetic failed: %v", float32NoPromise, err)
	case t.wrong > 0:
		return false, fmt.Sprintf("%s, and a self-test found its float32 arithmetic flushing them: %d of %d results wrong, the first %s",
			float32NoPromise, t.wrong, t.results, t.first)
	}
	return true, fmt.Sprintf("%s, but a self-test found its float32 arithmetic keeping them: %d results on subnormal data, %d dispatches of %d or more work groups, bit for bit the host's",
		float32NoPromise, t.results, t.dispatches, selfTestGroups())
}

// selfTestGroups is the work groups of each 16-byte kernel's dispatch in
// the self-test: 4 per CPU, at least minSelfTestGroups.
func selfTestGroups() int { return max(minSelfTestGroups, 4*runtime.NumCPU()) }

// selfTest is one run of the self-test on a device with the hardware
// float32 kernels.
type selfTest struct {
	d      *Device
	n      int // elements of each region
	span   int // elements of a work group of the scalar kernels
	tamper selfTamper
	in     []float32 // the sources' elements, source p at [p*n, (p+1)*n)
	srcs   [selfTestSources]backend.Region
	dsts   [2]backend.Region
	ref    []float32

	results, wrong, dispatches int
	first                      string // the first wrong result
}

// selfTestCall is one dispatch of a kernel kind: its kernel's name, what
// the stream is asked to do, and whether it runs the 16-byte kernel.
type selfTestCall struct {
	kernel string
	multi  bool // ReduceMulti into 2 destinations
	scale  bool // Scale (else a reduction)
	vec    bool
}

// selfTestCalls lists a call for every float32 kind with an ftz variant
// (kinds and multiKinds).
func selfTestCalls() []selfTestCall {
	var calls []selfTestCall
	for k, spec := range kinds {
		if spec.ftz != "" {
			calls = append(calls, selfTestCall{kernel: spec.name, scale: spec.isScale, vec: isVecKind(k)})
		}
	}
	for mk, spec := range multiKinds {
		if spec.ftz != "" {
			vec := false
			for _, o := range multiKinds {
				vec = vec || o.vec == mk
			}
			calls = append(calls, selfTestCall{kernel: spec.name, multi: true, vec: vec})
		}
	}
	return calls
}

// isVecKind reports whether kind is the 16-byte variant of another.
func isVecKind(kind int) bool {
	for _, s := range kinds {
		if s.vec == kind {
			return true
		}
	}
	return false
}

// selfTest runs every call of selfTestCalls: each reduction with Sum (scale
// 1, a mean of 3 and 0.375), Prod, Max and Min of 3 sources, each Scale by
// 1, 1/3 and 0.375; and counts the results that differ from the host's.
func (d *Device) selfTest(tamper selfTamper) (*selfTest, error) {
	t := &selfTest{d: d, span: int(d.wg), tamper: tamper}
	t.n = selfTestGroups() * t.span * 4 // so the 16-byte kernels have selfTestGroups work groups
	bytes := t.n * 4
	for i := range t.srcs {
		b, err := d.Alloc(bytes, backend.HostVisible)
		if err != nil {
			return nil, err
		}
		t.srcs[i] = backend.Region{Buf: b, Len: bytes}
	}
	for i := range t.dsts {
		b, err := d.Alloc(bytes, backend.HostVisible)
		if err != nil {
			return nil, err
		}
		t.dsts[i] = backend.Region{Buf: b, Len: bytes}
	}
	t.in = make([]float32, selfTestSources*t.n)
	t.ref = make([]float32, t.n)
	calls := selfTestCalls()
	r := rand.New(rand.NewPCG(0x5eb, 0xf32))
	for _, op := range []backend.Op{backend.Sum, backend.Prod, backend.Max, backend.Min} {
		t.fill(op, r)
		for _, c := range calls {
			var scales []float64
			switch {
			case c.scale && op == backend.Sum:
				scales = []float64{1, 1.0 / 3, 0.375}
			case c.scale:
				continue
			case op == backend.Sum:
				scales = []float64{1, 1.0 / selfTestSources, 0.375}
			default:
				scales = []float64{1}
			}
			for _, sc := range scales {
				if err := t.run(c, op, sc); err != nil {
					return nil, err
				}
			}
		}
	}
	return t, nil
}

// run records, submits and waits for one call and compares its results.
func (t *selfTest) run(c selfTestCall, op backend.Op, scale float64) error {
	d := t.d
	st := &d.stream
	d.vec.off = !c.vec
	vecBefore := d.vec.dispatches
	k := selfTestSources
	var err error
	switch {
	case c.scale:
		k = 1
		err = st.Scale(backend.F32, t.dsts[0], t.srcs[0], scale)
	case c.multi:
		err = st.ReduceMulti(op, backend.F32, t.dsts[:], t.srcs[:], scale)
	default:
		err = st.Reduce(op, backend.F32, t.dsts[0], t.srcs[:], scale)
	}
	if err != nil {
		return err
	}
	if ran := d.vec.dispatches > vecBefore; ran != c.vec {
		return fmt.Errorf("%s: the stream ran the 16-byte kernel: %v", c.kernel, ran)
	}
	f, err := st.Submit()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), selfTestTimeout)
	defer cancel()
	if err := f.Wait(ctx); err != nil {
		return err
	}
	t.dispatches++
	hostmath.ReduceStrided(backend.F32, op, asBytes(t.ref), asBytes(t.in), t.n, 0, k, t.n, scale)
	dsts := t.dsts[:1]
	if c.multi {
		dsts = t.dsts[:]
	}
	for _, dst := range dsts {
		got := hostmath.View[float32](dst.Buf.Bytes())[:t.n]
		if t.tamper != nil {
			res := &SelfTestResult{Kernel: c.kernel, Op: op, Scale: scale, Got: got}
			for p := range k {
				res.In = append(res.In, t.in[p*t.n:(p+1)*t.n])
			}
			if err := t.tamper(res); err != nil {
				return err
			}
		}
		t.results += t.n
		for i, v := range got {
			if math.Float32bits(v) == math.Float32bits(t.ref[i]) {
				continue
			}
			if t.wrong == 0 {
				in := make([]float32, k)
				for p := range in {
					in[p] = t.in[p*t.n+i]
				}
				what := fmt.Sprintf("%v of %v scaled by %v", op, in, scale)
				if c.scale {
					what = fmt.Sprintf("%v scaled by %v", in[0], scale)
				}
				t.first = fmt.Sprintf("%s, element %d: %s = %v (%#08x), the host's %v (%#08x)", c.kernel, i, what,
					v, math.Float32bits(v), t.ref[i], math.Float32bits(t.ref[i]))
			}
			t.wrong++
		}
	}
	return nil
}

// fill writes the sources for op: in every span of elements (a work group
// of the scalar kernels; a quarter of one of the 16-byte kernels) the fixed
// cases of op first, then random values of the classes where flushing
// shows.
func (t *selfTest) fill(op backend.Op, r *rand.Rand) {
	cases := selfTestCases[op]
	for i := range t.n {
		if j := i % t.span; j < len(cases) {
			for p := range selfTestSources {
				t.in[p*t.n+i] = cases[j][p]
			}
			continue
		}
		for p := range selfTestSources {
			t.in[p*t.n+i] = drawSelfTest(r)
		}
	}
	for p, src := range t.srcs {
		copy(hostmath.View[float32](src.Buf.Bytes()), t.in[p*t.n:(p+1)*t.n])
	}
}

// drawSelfTest returns a float32 of a class where flushing shows: a
// subnormal; a normal near the least normal (sums and differences of two
// are often subnormal); a zero of either sign; one near 2^-45 (products of
// three are subnormal or near it); one near 1 (that keeps a subnormal
// subnormal in a product); either sign.
func drawSelfTest(r *rand.Rand) float32 {
	sign := uint32(r.IntN(2)) << 31
	var bits uint32
	switch c := r.IntN(20); {
	case c < 8: // subnormal
		bits = 1 + r.Uint32N(1<<23-1)
	case c < 12: // exponent 1..4
		bits = (1+r.Uint32N(4))<<23 | r.Uint32N(1<<23)
	case c < 14: // zero
	case c < 17: // 2^-50..2^-40
		bits = (127-50+r.Uint32N(11))<<23 | r.Uint32N(1<<23)
	default: // 2^-3..2^3
		bits = (127-3+r.Uint32N(7))<<23 | r.Uint32N(1<<23)
	}
	return math.Float32frombits(sign | bits)
}

// asBytes returns the memory of v as bytes.
func asBytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

var (
	negZero = float32(math.Copysign(0, -1))
	inf     = float32(math.Inf(1))
)

// selfTestCases are the fixed cases of each op, 3 sources (the op's
// identity where a case needs fewer: -0 for Sum, 1 for Prod, -Inf for Max,
// +Inf for Min): subnormals of both signs combined, normal inputs whose
// result is subnormal, subnormal inputs whose result is normal, signed
// zeros. Sum's also serve the means (a mean of 3 subnormals; a subnormal
// quotient of a normal sum) and the multiplications by 0.375.
var selfTestCases = [backend.NumOps][][selfTestSources]float32{
	backend.Sum: {
		{0x1p-140, 0x1p-140, negZero},
		{negZero, 7.25744105e-39, negZero},
		{negZero, -7.20255079e-39, negZero},
		{0x1p-126, -0x1.8p-126, negZero},
		{0x1.000002p-126, -0x1p-126, negZero},
		{0x1p-149, 0x1p-149, 0x1p-149},
		{0x1p-126, 0x1p-149, negZero},
		{0x1p-125, negZero, negZero},
		{0x1p-127, negZero, negZero},
		{0x1p-149, -0x1p-149, negZero},
		{negZero, negZero, negZero},
		{0, negZero, negZero},
		{-0x1p-127, 0x1p-130, 0x1p-149},
		{1.5, -1.5, 0x1p-140},
	},
	backend.Prod: {
		{0x1p-100, 0x1p-30, 1},
		{0x1p-149, 0x1p100, 1},
		{0x1p-140, 1, 1},
		{-0x1p-70, 0x1p-70, 1},
		{0x1p-60, 0x1p-60, 0x1p-20},
		{0x1p-149, -1, 1},
		{0x1p-126, 0.5, 1},
		{0x1.8p-126, 0x1p-1, 0x1.8p0},
		{negZero, 0x1p-149, 1},
	},
	backend.Max: {
		{-7.47825346e-39, -0.000297615363, -inf},
		{0x1p-149, 0, -inf},
		{0x1p-149, negZero, -inf},
		{negZero, 0x1p-149, -0x1p-149},
		{-0x1p-149, negZero, -inf},
		{-0x1p-149, -0x1p-126, -inf},
		{0x1p-148, 0x1p-149, -inf},
		{-0x1p-140, -0x1p-141, -inf},
		{negZero, 0, -inf},
		{0, negZero, -inf},
	},
	backend.Min: {
		{0.467424095, -4.78294835e-39, inf},
		{-0x1p-149, negZero, inf},
		{0x1p-149, negZero, inf},
		{0x1p-149, 0x1p-126, inf},
		{-0x1p-149, 0x1p-126, inf},
		{0x1p-148, 0x1p-149, inf},
		{-0x1p-140, -0x1p-141, inf},
		{negZero, 0, inf},
		{0, negZero, inf},
	},
}
