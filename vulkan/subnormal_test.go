//go:build cgo && !novulkan

package vulkan

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/backend/backendtest"
	"github.com/gocoll/gocoll/kernels"
)

// TestSubnormalKernels runs the conformance suite's subnormal checks
// (backendtest.RunSubnormals: float32, float64, float16 and bfloat16
// subnormal inputs and results, bit for bit the host's) on device 0 with
// each set of float32 kernels: the one the device selects (the kernels using
// its arithmetic where it reports DenormPreserveFloat32 or the self-test
// found that arithmetic exact, else the _ftz ones) and, by the test hook,
// the other, so a device that keeps subnormals without promising it
// (lavapipe) checks both. The hardware kernels of a device whose self-test
// found them flushing would fail: that run is skipped. The set the device
// does not select runs float32 alone unless full (the test hook changes the
// float32 kernels only: TestConformance's Subnormals checks the other types'
// kernels).
func TestSubnormalKernels(t *testing.T) {
	arithmetic(t)
	requireVulkan(t)
	for _, hardware := range []bool{false, true} {
		name := "ftz"
		if hardware {
			name = "hardware"
		}
		t.Run(name, func(t *testing.T) {
			if !fullRun() && hardware == openDevice(t, backend.OpenOptions{}).Info().Float32Hardware {
				// The kernels the device selects itself: TestConformance's
				// Subnormals runs them (GOCOLL_TEST_FULL=1 runs them here too).
				t.Skip("the device's own float32 kernels: TestConformance/Subnormals checks them")
			}
			backendtest.RunSubnormalsOptions(t, func(t *testing.T, opts backend.OpenOptions) backend.Device {
				d := openDevice(t, opts)
				info := d.Info()
				t.Logf("%s: float controls %v, DenormPreserveFloat16/32/64 %v/%v/%v; float32 kernels: hardware %v: %s", info.Name,
					d.Raw().FloatControls, info.DenormPreserveFloat16, info.DenormPreserveFloat32, info.DenormPreserveFloat64,
					info.Float32Hardware, info.Float32Reason)
				if hardware && !info.Float32Hardware {
					t.Skipf("%s: its hardware float32 kernels may flush: %s", info.Name, info.Float32Reason)
				}
				if err := d.Float32Kernels(hardware); err != nil {
					t.Fatal(err)
				}
				return d
			}, backendtest.Options{Float32Subnormals: !fullRun()})
		})
	}
}

// TestConformanceFTZKernels runs the backend conformance suite on device 0
// with the _ftz float32 kernels, the set that a device whose float32
// arithmetic flushes runs (the H200's): lavapipe, whose self-test selects
// the hardware kernels, checks them here beyond the subnormals
// (TestSubnormalKernels). The default run leaves out the largest cases,
// the other element types and the checks around the kernels (fences,
// cancellation, allocations: TestConformance checks those).
func TestConformanceFTZKernels(t *testing.T) {
	arithmetic(t)
	requireVulkan(t)
	if !fullRun() && !openDevice(t, backend.OpenOptions{}).Info().Float32Hardware {
		t.Skip("the device's own float32 kernels: TestConformance checks them")
	}
	o := suiteOptions()
	o.Short = o.Short || !fullRun()
	o.SkipTypes = !fullRun()
	o.KernelsOnly = !fullRun()
	backendtest.RunOptions(t, func(t *testing.T, opts backend.OpenOptions) backend.Device {
		d := openDevice(t, opts)
		if err := d.Float32Kernels(false); err != nil {
			t.Fatal(err)
		}
		return d
	}, o)
}

// TestFloatControls: DeviceInfo reports the shim's float controls, and the
// float32 kernels follow them and the self-test: the hardware kernels where
// the device keeps float32 subnormals (DenormPreserveFloat32) or the
// self-test found them exact, the _ftz kernels otherwise, as
// Float32Hardware says, with a reason; reduce_f32 declares DenormPreserve
// on the device exactly where it keeps them. (That no kernel declares a
// width the device does not keep, the validation layer, under which every
// test here runs, checks for every kernel the tests create.)
func TestFloatControls(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	info, raw := d.Info(), d.Raw()
	fc := raw.KernelFloatControls()
	if info.DenormPreserveFloat16 != fc.Keeps(16) || info.DenormPreserveFloat32 != fc.Keeps(32) || info.DenormPreserveFloat64 != fc.Keeps(64) {
		t.Errorf("DeviceInfo DenormPreserveFloat16/32/64 %v/%v/%v, the shim read %+v", info.DenormPreserveFloat16,
			info.DenormPreserveFloat32, info.DenormPreserveFloat64, fc)
	}
	if !raw.FloatControls && (raw.DenormPreserveFloat16 || raw.DenormPreserveFloat32 || raw.DenormPreserveFloat64) {
		t.Error("DenormPreserve reported without float controls")
	}
	if d.FTZKernels() == info.Float32Hardware || info.Float32Reason == "" {
		t.Errorf("ftz kernels %v with Float32Hardware %v (%q)", d.FTZKernels(), info.Float32Hardware, info.Float32Reason)
	}
	if info.DenormPreserveFloat32 && !info.Float32Hardware {
		t.Errorf("DenormPreserveFloat32 but not the hardware float32 kernels: %s", info.Float32Reason)
	}
	t.Logf("%s (Vulkan %v): float controls %v, denormBehaviorIndependence %d, shaderDenormPreserveFloat16/32/64 %v/%v/%v; "+
		"DeviceInfo.DenormPreserveFloat16/32/64 %v/%v/%v, ftz kernels %v: %s", info.Name, raw.APIVersion, raw.FloatControls,
		raw.DenormIndependence, raw.DenormPreserveFloat16, raw.DenormPreserveFloat32, raw.DenormPreserveFloat64,
		info.DenormPreserveFloat16, info.DenormPreserveFloat32, info.DenormPreserveFloat64, d.FTZKernels(), info.Float32Reason)
	spv, err := kernels.SPIRV(kernels.ReduceF32)
	if err != nil {
		t.Fatal(err)
	}
	adapted, err := kernels.AdaptFloatControls(spv, fc)
	if err != nil {
		t.Fatal(err)
	}
	widths, _ := kernels.DenormPreserveWidths(adapted)
	if want := info.DenormPreserveFloat32; (len(widths) == 1 && widths[0] == 32) != want {
		t.Errorf("reduce_f32 on this device declares DenormPreserve for %v; DenormPreserveFloat32 %v", widths, want)
	}
}

// TestSubnormalsWithoutDenormPreserve: with every kernel's DenormPreserve
// removed (the test hook), as on a device that does not take it, the _ftz
// float32 kernels and the 16-bit kernels still pass the subnormal checks:
// on a GPU that flushes subnormals without the mode (an H200), this is the
// path of a device without float controls, run on flushing hardware. It
// also logs how many of backendtest.SubnormalCases the float32 hardware
// kernels get wrong there (the device's flushing: none on lavapipe). The
// kernels' arithmetic alone: the run without the race detector checks it.
func TestSubnormalsWithoutDenormPreserve(t *testing.T) {
	arithmetic(t)
	requireVulkan(t)
	backendtest.RunSubnormals(t, func(t *testing.T, opts backend.OpenOptions) backend.Device {
		d := openDevice(t, opts)
		d.DropFloatControls()
		if err := d.Float32Kernels(false); err != nil {
			t.Fatal(err)
		}
		return d
	})

	d := openDevice(t, backend.OpenOptions{})
	d.DropFloatControls()
	if err := d.Float32Kernels(true); err != nil {
		t.Fatal(err)
	}
	st := d.Stream()
	cases := backendtest.SubnormalCases
	outs := make([]backend.Buffer, len(cases))
	for c, sc := range cases {
		srcs := make([]backend.Region, len(sc.In))
		for j, v := range sc.In {
			srcs[j] = backend.Region{Buf: alloc(t, d, 4, backend.HostVisible), Len: 4}
			put(t, srcs[j].Buf, 0, []float32{v})
		}
		outs[c] = alloc(t, d, 4, backend.HostVisible)
		if err := st.Reduce(sc.Op, backend.F32, backend.Region{Buf: outs[c], Len: 4}, srcs, sc.Scale); err != nil {
			t.Fatal(err)
		}
	}
	wait(t, st)
	wrong := 0
	for c, sc := range cases {
		got := get[float32](t, outs[c], 0, 1)[0]
		if math.Float32bits(got) != math.Float32bits(sc.Want) {
			wrong++
			t.Logf("hardware kernel without DenormPreserve: %v of %v scaled by %v = %v, the host gives %v", sc.Op, sc.In, sc.Scale, got, sc.Want)
		}
	}
	t.Logf("%s: the float32 hardware kernels without DenormPreserve get %d of %d subnormal cases wrong", d.Info().Name, wrong, len(cases))
}

// TestFTZSumLoops runs the _ftz float32 sum of 2, 5 and 8 sources on one
// work group, so that each invocation reduces about a hundred elements in
// its loop, taking the fast path for some and the exact fallback for others
// in any order. Elements whose inputs include a subnormal, a small
// normal (partial sums that cancel into subnormals) or a signed zero are
// drawn at densities from none to every one, in place and not, on the
// 16-byte kernel (a length a multiple of 4) and the 4-byte one (an odd
// length), and compared bit for bit with float32 sums in source order in Go,
// which keep subnormals.
func TestFTZSumLoops(t *testing.T) {
	arithmetic(t)
	requireVulkan(t)
	d := openDevice(t, backend.OpenOptions{MaxWorkGroups: 1})
	if err := d.Float32Kernels(false); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(backendtest.RandomSeed(t, backendtest.SeedEnv), 3))
	edge := func() float32 {
		switch r.IntN(4) {
		case 0: // subnormal
			return math.Float32frombits(uint32(r.IntN(1<<23-1)+1) | uint32(r.IntN(2))<<31)
		case 1: // a small normal: sums of these cancel into subnormals
			return float32(math.Ldexp(1+r.Float64(), -126+r.IntN(4))) * float32(1-2*r.IntN(2))
		case 2:
			return float32(math.Copysign(0, float64(1-2*r.IntN(2))))
		}
		return float32(r.NormFloat64())
	}
	s, ctx := d.Stream(), context.Background()
	for _, n := range []int{98_324, 98_327} {
		for _, k := range []int{2, 5, 8} {
			for _, density := range []float64{0, 0.001, 0.05, 1} {
				for _, inPlace := range []bool{false, true} {
					in := make([][]float32, k)
					regs := make([]backend.Region, k)
					for j := range in {
						in[j] = make([]float32, n)
						for i := range in[j] {
							in[j][i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(20)-10))
						}
					}
					for i := range n {
						if r.Float64() < density {
							for j := range k {
								if j == 0 || r.IntN(2) == 0 {
									in[j][i] = edge()
								}
							}
						}
					}
					want := make([]uint32, n)
					for i := range n {
						acc := in[0][i]
						for j := 1; j < k; j++ {
							acc += in[j][i]
						}
						want[i] = math.Float32bits(acc)
					}
					for j := range in {
						regs[j] = backend.Region{Buf: alloc(t, d, 4*n, backend.DeviceLocal), Len: 4 * n}
						put(t, regs[j].Buf, 0, in[j])
					}
					dst := regs[0]
					if !inPlace {
						dst = backend.Region{Buf: alloc(t, d, 4*n, backend.DeviceLocal), Len: 4 * n}
					}
					err := s.Reduce(backend.Sum, backend.F32, dst, regs, 1)
					var f backend.Fence
					if err == nil {
						f, err = s.Submit()
					}
					if err == nil {
						err = f.Wait(ctx)
					}
					if err != nil {
						t.Fatal(err)
					}
					got := get[float32](t, dst.Buf, 0, n)
					bad := 0
					for i := range n {
						if g := math.Float32bits(got[i]); g != want[i] {
							if bad++; bad <= 5 {
								t.Errorf("n=%d k=%d density %v in place %v: element %d: %#08x (%g), want %#08x (%g)", n, k,
									density, inPlace, i, g, got[i], want[i], math.Float32frombits(want[i]))
							}
						}
					}
					for _, g := range regs {
						g.Buf.Close()
					}
					if !inPlace {
						dst.Buf.Close()
					}
				}
			}
		}
	}
}
