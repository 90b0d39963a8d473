// Package backendtest is the conformance suite every gocoll backend runs.
//
// Run checks a backend.Device against references computed independently in
// plain Go loops: exact float64 arithmetic on small integers and powers of
// two, float64 with a stated error bound, and left-to-right reductions in the
// element type that kernels/reduce.comp and kernels/scale.comp must match bit
// for bit. The integer and 16-bit element types a device takes
// (DeviceInfo.Kernels) are checked against references of their own: exact,
// wrapping integer arithmetic, and for Half and BFloat16 a reduction in
// float32 rounded once to the 16-bit type, bit for bit; the types it does
// not take must be refused. Subnormal inputs and results of float32,
// float64, float16 and bfloat16 must come out as the host's bits too
// (RunSubnormals): a device or kernel that flushes them to zero fails. It also checks memory (allocation, Write/Read,
// Bytes, Copy between memory kinds), the split of kernels under a lowered MaxBindingBytes and the
// counters that report it, fences (several submissions in flight, waits in
// any order, cancellation), argument checking (errors that wrap
// backend.ErrInvalidArgument, never a panic), use after Close
// (backend.ErrClosed) and allocation-free steady-state submission.
//
// A backend's test calls it with a function that opens a fresh device:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T, opts backend.OpenOptions) backend.Device {
//			d, err := host.Open(opts)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { d.Close() })
//			return d
//		})
//	}
//
// The suite takes a few seconds on the host backend and is sized for a
// CPU Vulkan driver (lavapipe) to finish in well under a minute; with
// go test -short it leaves out its largest cases.
package backendtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// OpenFunc opens a fresh device with opts, registers its Close with
// t.Cleanup, and fails (or skips) t when it cannot.
type OpenFunc func(t *testing.T, opts backend.OpenOptions) backend.Device

// Options tune the suite.
type Options struct {
	// Short leaves out the largest cases: the reduction of 1M+3 elements and
	// the 65537-element reductions of more than three sources. Run sets it
	// from testing.Short(). (The 1M+3 case is also left out under the race
	// detector, and with Short there the element types beyond float32 and
	// float64 are checked for int32 and half only, the subnormals for
	// float only: the race detector checks synchronisation.)
	Short bool
	// Sample runs a fixed sample of the source and destination counts of
	// the multi-destination reductions (M and K in 1..3 and 8..9: 25 of the
	// 81 pairs) instead of all of them, and half the random reductions of
	// each element type beyond float32 and float64 (every size and op
	// among them). Run sets it from testing.Short(); a
	// backend's tests may also set it for their default run and leave the
	// whole matrix to a longer one.
	Sample bool
	// SkipTypes leaves out the element-type matrices beyond float32 and
	// float64 and the subnormal matrix: for a second run of the suite on
	// another configuration of a device whose first run covers them.
	SkipTypes bool
	// CoveredTypes are element types (beyond float32 and float64) whose
	// random reductions, multi-destination reductions and scales the
	// backend's own tests check bit for bit against the host backend (the
	// vulkan package's TestDTypeKernels): the suite leaves those three out
	// for them; their tables, refusals, steady state and split still run.
	CoveredTypes []backend.DType
	// KernelsOnly leaves out the checks of what a device does around its
	// kernels (fences, cancellation, use after close, allocations per call
	// and the allocation rate): for a second run of the suite on a device
	// whose configuration changes only the kernels it runs (a test hook's
	// other float32 kernel set), the first run checking the rest.
	KernelsOnly bool
	// Float32Subnormals limits RunSubnormalsOptions to float32 (the cases,
	// the sum edges and the float32 matrix): for a second run on a device
	// whose float32 kernels a test hook changed, the other types' kernels
	// being those the first run checked.
	Float32Subnormals bool
}

// Run runs the conformance suite on the devices open returns, with Short set
// from testing.Short().
func Run(t *testing.T, open OpenFunc) {
	t.Helper()
	RunOptions(t, open, Options{Short: testing.Short(), Sample: testing.Short()})
}

// RunOptions runs the conformance suite with explicit options. Subtests run
// one after another: most share one device, whose stream is used by one
// goroutine at a time.
func RunOptions(t *testing.T, open OpenFunc, o Options) {
	t.Helper()
	dev := open(t, backend.OpenOptions{})
	s := &suite{open: open, opts: o, dev: dev, info: dev.Info()}
	t.Logf("device: %s %q (%s), f64 %v %s, max binding %d bytes", s.info.Backend, s.info.Name, s.info.Type,
		s.info.Float64, s.info.Float64Reason, s.info.MaxBindingBytes)

	t.Run("Info", s.testInfo)
	t.Run("Alloc", s.testAlloc)
	t.Run("WriteRead", s.testWriteRead)
	t.Run("Bytes", s.testBytes)
	t.Run("Copy", s.testCopy)
	t.Run("Reduce", func(t *testing.T) {
		t.Run("f32", func(t *testing.T) { testReduceMatrix[float32](t, s) })
		t.Run("f64", func(t *testing.T) { testReduceMatrix[float64](t, s) })
		t.Run("f32/K=3/n=1048579", func(t *testing.T) {
			if s.opts.Short {
				t.Skip("short mode: leaving out the 1M+3 element reduction")
			}
			if raceEnabled {
				// The 65537-element cases already split across work groups or
				// goroutines; under the race detector this one costs seconds.
				t.Skip("race detector on: leaving out the 1M+3 element reduction")
			}
			testReduceLarge[float32](t, s, 3, 1<<20+3)
		})
	})
	t.Run("Specials", func(t *testing.T) {
		t.Run("f32", func(t *testing.T) { testSpecials[float32](t, s) })
		t.Run("f64", func(t *testing.T) { testSpecials[float64](t, s) })
	})
	t.Run("Float64Precision", s.testFloat64Precision)
	t.Run("Scale", func(t *testing.T) {
		t.Run("f32", func(t *testing.T) { testScale[float32](t, s) })
		t.Run("f64", func(t *testing.T) { testScale[float64](t, s) })
	})
	t.Run("Mean", func(t *testing.T) {
		t.Run("f32", func(t *testing.T) { testMean[float32](t, s) })
		t.Run("f64", func(t *testing.T) { testMean[float64](t, s) })
	})
	t.Run("Subnormals", func(t *testing.T) {
		if s.opts.SkipTypes {
			t.Skip("Options.SkipTypes")
		}
		s.testSubnormals(t)
	})
	t.Run("Alias", func(t *testing.T) {
		t.Run("f32", func(t *testing.T) { testAlias[float32](t, s) })
		t.Run("f64", func(t *testing.T) { testAlias[float64](t, s) })
	})
	t.Run("Offsets", func(t *testing.T) {
		t.Run("f32", func(t *testing.T) { testOffsets[float32](t, s) })
		t.Run("f64", func(t *testing.T) { testOffsets[float64](t, s) })
	})
	t.Run("Split", func(t *testing.T) {
		d := open(t, backend.OpenOptions{MaxBindingBytes: 4096})
		t.Run("f32", func(t *testing.T) { testSplit[float32](t, s, d) })
		t.Run("f64", func(t *testing.T) { testSplit[float64](t, s, d) })
	})
	t.Run("DisableFloat64", s.testDisableFloat64)
	t.Run("DTypes", func(t *testing.T) {
		if s.opts.SkipTypes {
			t.Skip("Options.SkipTypes")
		}
		s.testDTypes(t)
	})
	t.Run("InvalidArguments", s.testInvalid)
	if o.KernelsOnly {
		return
	}
	t.Run("Fences", s.testFences)
	t.Run("Cancel", s.testCancel)
	t.Run("Closed", s.testClosed)
	t.Run("Allocations", s.testAllocations)
	t.Run("AllocationRate", s.testAllocationRate)
}

// suite is the state the subtests share.
type suite struct {
	open OpenFunc
	opts Options
	dev  backend.Device // shared by most subtests
	info backend.DeviceInfo
}

// waitTimeout bounds every wait, so that a hung device fails the test rather
// than the whole binary.
const waitTimeout = 2 * time.Minute

// alloc allocates a buffer on dev and closes it when t ends.
func alloc(t *testing.T, dev backend.Device, n int, mem backend.Memory) backend.Buffer {
	t.Helper()
	b, err := dev.Alloc(n, mem)
	if err != nil {
		t.Fatalf("Alloc(%d, %v): %v", n, mem, err)
	}
	if b == nil {
		t.Fatalf("Alloc(%d, %v) returned a nil buffer", n, mem)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// submitWait submits what st recorded and waits for it.
func submitWait(t *testing.T, st backend.Stream) {
	t.Helper()
	f, err := st.Submit()
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	wait(t, f)
}

// wait waits for f, failing t on an error or after waitTimeout.
func wait(t *testing.T, f backend.Fence) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := f.Wait(ctx); err != nil {
		t.Fatalf("Fence.Wait: %v", err)
	}
}

// must fails t when err is not nil.
func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// needDType skips t when dev has no kernels for dt (hasKernels).
func needDType(t *testing.T, dev backend.Device, dt backend.DType) {
	t.Helper()
	info := dev.Info()
	switch {
	case hasKernels(info, dt):
	case dt == backend.F64:
		t.Skipf("device reports no f64 kernels (%s)", info.Float64Reason)
	default:
		t.Skipf("device has no %v kernels (Info().Kernels %#x)", dt, uint32(info.Kernels))
	}
}

// hasKernels reports whether a device described by info reduces and scales
// dt: f32 always; else whether dt is in info.Kernels, or, for a device that
// leaves Kernels empty (written before it existed), f64 when Float64.
func hasKernels(info backend.DeviceInfo, dt backend.DType) bool {
	switch {
	case dt == backend.F32:
		return true
	case info.Kernels == 0:
		return dt == backend.F64 && info.Float64
	}
	return info.Kernels.Has(dt)
}

// passes is how many dispatches of reduce.comp (at most 8 sources each, the
// partial result first among the next pass's sources) reduce k sources.
func passes(k int) int64 {
	if k <= 8 {
		return 1
	}
	return 1 + int64((k-8+6)/7)
}

// tails is how many more dispatches than passes x pieces a backend may
// record for passes passes over n elements of size es: one running 16-byte
// kernels splits a pass over aligned regions whose length is not a whole
// number of 16-byte vectors into the vectors and a scalar tail.
func tails(passes int64, n, es int) int64 {
	if b := n * es; b%16 == 0 || b < 16 {
		return 0
	}
	return passes
}

// pieces is how many dispatches cover n elements of size es when one binding
// covers at most limit bytes: ceil(n*es / limit), limit rounded down to whole
// elements.
func pieces(n, es int, limit int64) int64 {
	if n == 0 {
		return 0
	}
	per := limit / int64(es)
	return (int64(n)-1)/per + 1
}

// isErr fails t unless err wraps target.
func isErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one wrapping %v", what, target)
	} else if !errors.Is(err, target) {
		t.Errorf("%s: error %q does not wrap %v", what, err, target)
	}
}

// noPanic calls f and turns a panic into a test failure.
func noPanic(t *testing.T, what string, f func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

func (s *suite) testInfo(t *testing.T) {
	i := s.info
	if i.Backend == "" || i.Name == "" || i.Type == "" {
		t.Errorf("Info() leaves Backend %q, Name %q or Type %q empty", i.Backend, i.Name, i.Type)
	}
	if i.MaxBindingBytes <= 0 || i.MaxAllocBytes <= 0 {
		t.Errorf("Info() limits: MaxBindingBytes %d, MaxAllocBytes %d, want > 0", i.MaxBindingBytes, i.MaxAllocBytes)
	}
	if !i.Float64 && i.Float64Reason == "" {
		t.Errorf("Info() reports no f64 without a Float64Reason")
	}
	if k := i.Kernels; k != 0 {
		if !k.Has(backend.F32) {
			t.Errorf("Info().Kernels %#x lacks f32", uint32(k))
		}
		if k.Has(backend.F64) != i.Float64 {
			t.Errorf("Info().Kernels %#x has f64 %v, but Float64 is %v", uint32(k), k.Has(backend.F64), i.Float64)
		}
		if k&^backend.AllDTypes != 0 {
			t.Errorf("Info().Kernels %#x has bits of no element type", uint32(k))
		}
	}
	if s.dev.Counters() == nil {
		t.Errorf("Counters() is nil")
	}
	if s.dev.Stream() == nil {
		t.Errorf("Stream() is nil")
	}
}

// testDisableFloat64 checks the OpenOptions hook that makes a device report
// no f64 support: f64 kernels are then refused with ErrUnsupported (so the
// collectives' exact host path runs) and f32 still works.
func (s *suite) testDisableFloat64(t *testing.T) {
	d := s.open(t, backend.OpenOptions{DisableFloat64: true})
	info := d.Info()
	if info.Float64 {
		t.Fatalf("OpenOptions.DisableFloat64: Info().Float64 is still true")
	}
	if info.Float64Reason == "" {
		t.Errorf("OpenOptions.DisableFloat64: Info().Float64Reason is empty")
	}
	if info.Kernels.Has(backend.F64) {
		t.Errorf("OpenOptions.DisableFloat64: Info().Kernels %#x still has f64", uint32(info.Kernels))
	}
	a := alloc(t, d, 64, backend.DeviceLocal)
	b := alloc(t, d, 64, backend.DeviceLocal)
	st := d.Stream()
	r := func(buf backend.Buffer) backend.Region { return backend.Region{Buf: buf, Len: 64} }
	isErr(t, noPanic(t, "f64 Reduce", func() error {
		return st.Reduce(backend.Sum, backend.F64, r(a), []backend.Region{r(b)}, 1)
	}), backend.ErrUnsupported, "f64 Reduce on a device without f64")
	isErr(t, noPanic(t, "f64 Scale", func() error {
		return st.Scale(backend.F64, r(a), r(b), 2)
	}), backend.ErrUnsupported, "f64 Scale on a device without f64")

	in := []float32{1, 2, 3, 4}
	writeT(t, b, 0, in)
	must(t, st.Reduce(backend.Sum, backend.F32, backend.Region{Buf: a, Len: 16}, []backend.Region{{Buf: b, Len: 16}, {Buf: b, Len: 16}}, 1), "f32 Reduce")
	submitWait(t, st)
	got := readT[float32](t, a, 0, 4)
	for i := range in {
		if got[i] != 2*in[i] {
			t.Fatalf("f32 sum on a device without f64: got %v, want %v", got, []float32{2, 4, 6, 8})
		}
	}
}
