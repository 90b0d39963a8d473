//go:build cgo && !novulkan

package vulkan

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/backend/backendtest"
	"github.com/gocoll/gocoll/internal/shimdev"
	"github.com/gocoll/gocoll/kernels"
)

// TestFloat32SelfTest: a device without DenormPreserveFloat32 picks its
// float32 kernels by the self-test at its first open in the process, and
// reports the choice and why, in Info and, once made, in Devices; lavapipe,
// whose arithmetic keeps subnormals, gets the hardware kernels. The
// self-test runs every float32 kernel kind that has an _ftz variant, every
// op and the scales, with subnormal inputs in every work group, and rejects
// a device that flushes (every result as a flushing device computes it, or
// only one work group's: one thread of a CPU driver) and one where it
// fails. Concurrent first opens run it once.
func TestFloat32SelfTest(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	info := d.Info()
	lavapipe := info.Type == "cpu" && strings.HasPrefix(info.Name, "llvmpipe")
	t.Logf("%s: DenormPreserveFloat32 %v, float32 hardware kernels %v: %s", info.Name, info.DenormPreserveFloat32, info.Float32Hardware, info.Float32Reason)
	if !info.DenormPreserveFloat32 && info.Type != "cpu" && (info.Float32Hardware || !d.FTZKernels() || !strings.Contains(info.Float32Reason, "it is a GPU")) {
		t.Errorf("a GPU without DenormPreserveFloat32 runs the ftz kernels, no self-test; got hardware %v, ftz kernels %v: %q",
			info.Float32Hardware, d.FTZKernels(), info.Float32Reason)
	}
	if !info.DenormPreserveFloat32 && info.Type == "cpu" && !strings.Contains(info.Float32Reason, "self-test") {
		t.Errorf("no DenormPreserveFloat32, and the reason names no self-test: %q", info.Float32Reason)
	}
	if lavapipe && (!info.Float32Hardware || d.FTZKernels()) {
		t.Errorf("lavapipe keeps float32 subnormals, but its device runs the ftz kernels: %s", info.Float32Reason)
	}
	devs, err := Backend{}.Devices()
	if err != nil || devs[0].Float32Hardware != info.Float32Hardware || devs[0].Float32Reason != info.Float32Reason {
		t.Errorf("Devices()[0] float32 kernels %v (%q), %v; the open device's %v (%q)", devs[0].Float32Hardware, devs[0].Float32Reason, err,
			info.Float32Hardware, info.Float32Reason)
	}
	span := min(256, info.MaxWorkGroupSize) // a work group of the scalar kernels (shimdev's work-group size)

	t.Run("Exact", func(t *testing.T) {
		type call struct {
			kernel string
			op     backend.Op
			scale  float64
		}
		var calls []call
		kinds := map[string]bool{}
		var noSubnormalOut []string
		hardware, reason := inst.SelfTestFloat32(0, func(r *shimdev.SelfTestResult) error {
			calls = append(calls, call{r.Kernel, r.Op, r.Scale})
			kinds[r.Kernel] = true
			// Every work group of the scalar kernels (a quarter of one of the
			// 16-byte kernels) has subnormal inputs, and, where the device
			// keeps them, results.
			for lo := 0; lo < len(r.Got); lo += span {
				in, out := false, false
				for i := lo; i < lo+span; i++ {
					for _, src := range r.In {
						in = in || subnormal(src[i])
					}
					out = out || subnormal(r.Got[i])
				}
				if !in {
					return fmt.Errorf("%s %v scaled by %v: no subnormal input in elements [%d, %d)", r.Kernel, r.Op, r.Scale, lo, lo+span)
				}
				if !out {
					noSubnormalOut = append(noSubnormalOut, fmt.Sprintf("%s %v scaled by %v: [%d, %d)", r.Kernel, r.Op, r.Scale, lo, lo+span))
				}
			}
			return nil
		})
		t.Logf("hardware kernels %v: %s", hardware, reason)
		if lavapipe && !hardware {
			t.Errorf("lavapipe keeps float32 subnormals; the self-test: %s", reason)
		}
		if hardware && len(noSubnormalOut) > 0 {
			t.Errorf("%d work groups without a subnormal result, the first %s", len(noSubnormalOut), noSubnormalOut[0])
		}
		want := []string{kernels.ReduceF32, kernels.ScaleF32, kernels.Reduce4F32, kernels.Scale4F32, kernels.ReduceMF32, kernels.ReduceM4F32}
		if got := shimdev.SelfTestKernels(); !sameSet(got, want) || len(kinds) != len(want) {
			t.Errorf("the self-test runs %v (saw %v), want every float32 kernel with an ftz variant, %v", got, kinds, want)
		}
		for _, k := range want {
			for _, c := range []call{{k, backend.Sum, 1}, {k, backend.Sum, 1.0 / 3}, {k, backend.Sum, 0.375}, {k, backend.Prod, 1}, {k, backend.Max, 1}, {k, backend.Min, 1}} {
				if strings.HasPrefix(k, "scale") && c.op != backend.Sum {
					continue
				}
				if !slices.Contains(calls, c) {
					t.Errorf("the self-test did not run %s %v scaled by %v", c.kernel, c.op, c.scale)
				}
			}
		}
	})

	// rejects runs the self-test with results of the kernels for which
	// flush is true replaced, in elements [lo, hi) of each, by what a
	// flushing device computes, and checks that the verdict is the ftz
	// kernels.
	rejects := func(t *testing.T, flush func(kernel string) bool, lo, hi func(n int) int) {
		arithmetic(t)
		changed := 0
		hardware, reason := inst.SelfTestFloat32(0, func(r *shimdev.SelfTestResult) error {
			if !flush(r.Kernel) {
				return nil
			}
			in := make([]float32, len(r.In))
			for i := lo(len(r.Got)); i < hi(len(r.Got)); i++ {
				for p := range in {
					in[p] = r.In[p][i]
				}
				v := backendtest.FlushedFloat32(r.Op, in, r.Scale)
				if math.Float32bits(v) != math.Float32bits(r.Got[i]) {
					changed++
				}
				r.Got[i] = v
			}
			return nil
		})
		t.Logf("%d results flushed: hardware kernels %v: %s", changed, hardware, reason)
		if changed == 0 {
			t.Fatal("flushing changed no result")
		}
		if hardware || !strings.Contains(reason, "flushing") {
			t.Errorf("the self-test passed a device that flushes: %v: %s", hardware, reason)
		}
	}
	all := func(string) bool { return true }
	first := func(int) int { return 0 }
	end := func(n int) int { return n }
	t.Run("Flushing", func(t *testing.T) { rejects(t, all, first, end) })
	t.Run("OneKernelFlushes", func(t *testing.T) {
		rejects(t, func(k string) bool { return k == kernels.ReduceM4F32 }, first, end)
	})
	t.Run("OneWorkGroupFlushes", func(t *testing.T) {
		// The last work group of the 16-byte kernels' dispatches, which
		// have the fewest.
		rejects(t, func(k string) bool { return k == kernels.Reduce4F32 }, func(n int) int { return n - 4*span }, end)
	})

	t.Run("Fails", func(t *testing.T) {
		hardware, reason := inst.SelfTestFloat32(0, func(*shimdev.SelfTestResult) error { return errors.New("injected failure") })
		if hardware || !strings.Contains(reason, "injected failure") {
			t.Errorf("a self-test that failed chose the hardware kernels %v: %s", hardware, reason)
		}
	})

	t.Run("ConcurrentOpens", func(t *testing.T) {
		before := inst.ForgetFloat32()
		const n = 4
		infos := make([]backend.DeviceInfo, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				dev, err := Backend{}.Open(0, backend.OpenOptions{})
				if err != nil {
					errs[i] = err
					return
				}
				infos[i] = dev.Info()
				errs[i] = dev.Close()
			})
		}
		wg.Wait()
		checkValidation(t)
		for i := range n {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if infos[i].Float32Hardware != info.Float32Hardware || infos[i].Float32Reason != info.Float32Reason {
				t.Errorf("open %d: float32 hardware kernels %v (%q), the first open's %v (%q)", i, infos[i].Float32Hardware,
					infos[i].Float32Reason, info.Float32Hardware, info.Float32Reason)
			}
		}
		want := before
		if !info.DenormPreserveFloat32 {
			want++
		}
		if runs := inst.ForgetFloat32(); runs != want {
			t.Errorf("%d concurrent first opens ran %d self-tests, want %d", n, runs-before, want-before)
		}
	})
}

// subnormal reports whether v is a float32 subnormal.
func subnormal(v float32) bool { return v != 0 && math.Abs(float64(v)) < 0x1p-126 }

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}
