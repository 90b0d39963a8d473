//go:build cgo

package shimdev

import (
	"math/rand/v2"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/kernels"
)

// Accessors for the backend packages' API-specific code (interop handles)
// and test hooks. The package is internal, so none of this is gocoll's API.

// API returns the API the device was opened with.
func (d *Device) API() *API { return &d.in.api }

// Shim returns the shim device behind d.
func (d *Device) Shim() *cshim.Device { return d.dev }

// Raw returns the physical device's description.
func (d *Device) Raw() cshim.DeviceInfo { return d.raw }

// Align returns the offset alignment of a binding.
func (d *Device) Align() int64 { return d.align }

// Validation reports whether calls fail on validation messages.
func (d *Device) Validation() bool { return d.validation }

// CheckOpen returns an error wrapping backend.ErrClosed, naming op, once
// the device is closed.
func (d *Device) CheckOpen(op string) error {
	if d.closed.Load() {
		return d.errClosed(op)
	}
	return nil
}

// Shim returns the shim buffer behind b, or an error wrapping
// backend.ErrClosed.
func (b *Buffer) Shim() (*cshim.Buffer, error) {
	if b.closed.Load() {
		return nil, b.d.errorf("buffer: %w", backend.ErrClosed)
	}
	return b.b, nil
}

// Device returns the device b belongs to.
func (b *Buffer) Device() *Device { return b.d }

// VecDispatches returns how many dispatches ran a 16-byte kernel (test hook).
func (d *Device) VecDispatches() int64 { return d.vec.dispatches }

// ScalarOnly makes the stream use only the scalar kernels while on is true
// (test hook).
func (d *Device) ScalarOnly(on bool) { d.vec.off = on }

// Recorded reports whether work was recorded since the last Submit (test
// hook).
func (s *Stream) Recorded() bool { return s.recorded }

// EveryPipeline creates every variant of the reduce and scale kernels the
// stream can ask for on this device (each op, 1..8 sources, with and
// without scale, of every type in Info().Kernels (the integers' scale a
// mean's division); those writing partial results without scale; the 16-bit kernels' copy,
// K = 0), and one of each multi-destination kernel (sum, 8 sources, 8
// destinations), so a kernel the API rejects fails by name (test hook).
// With sample non-nil it creates, of each kind and op, the kernels of 1 and
// of kernels.MaxSources sources and of one source count between drawn from
// sample (each with and without scale): 3 of the 8 counts, both ends of the
// specialization constant.
func (d *Device) EveryPipeline(sample *rand.Rand) error {
	has := func(dt backend.DType) bool { return dt == backend.F32 || d.info.Kernels.Has(dt) }
	for kind := range numKinds {
		spec := &kinds[kind]
		if !has(spec.dt) {
			continue
		}
		if isNarrowKind(kind) && !spec.in32 && !spec.out32 {
			if _, err := d.pipeline(kind, backend.Sum, 0, false); err != nil {
				return err
			}
		}
		for op := backend.Op(0); op < backend.NumOps; op++ {
			if !op.Defined(spec.dt) {
				continue
			}
			mid := 0
			if sample != nil {
				mid = 2 + sample.IntN(kernels.MaxSources-2)
			}
			for k := 1; k <= len(d.stream.passSrcs); k++ {
				if sample != nil && k != 1 && k != mid && k != kernels.MaxSources {
					continue
				}
				for _, sc := range []bool{false, true} {
					if sc && spec.scale == 0 && !spec.dt.IsInt() {
						continue
					}
					if _, err := d.pipeline(kind, op, k, sc); err != nil {
						return err
					}
				}
			}
		}
	}
	for mk := range numMultiKinds {
		if !has(multiKinds[mk].dt) {
			continue
		}
		if _, err := d.multiPipeline(mk, backend.Sum, kernels.MaxSources, kernels.MaxDestinations, false); err != nil {
			return err
		}
	}
	return nil
}

// DropKernels takes the element types of set (but f32) out of the device's
// Info().Kernels, as on a device without their features: the stream then
// refuses them with backend.ErrUnsupported, and collectives take their
// host path (test hook; call it before the device is used).
func (d *Device) DropKernels(set backend.DTypeSet) {
	d.info.Kernels &^= set &^ backend.F32.Bit()
	if set.Has(backend.F64) {
		d.info.Float64 = false
		d.info.Float64Reason = "dropped by a test (DropKernels)"
	}
}

// Float32Kernels makes the float32 reductions and scales run the kernels
// that use the device's float32 arithmetic (hardware true: reduce_f32 and
// the others, declaring DenormPreserve only where the device takes it) or
// the ftz kernels, exact on the bits (false), whatever the device reports
// and the self-test found; Info() reports the choice as the test's (test
// hook; call it before the device is used).
func (d *Device) Float32Kernels(hardware bool) error {
	for kind := range numKinds {
		if kinds[kind].ftz != "" {
			d.pipes[kind] = [backend.NumOps][kernels.MaxSources + 1][2]*cshim.Kernel{}
		}
	}
	for mk := range numMultiKinds {
		if multiKinds[mk].ftz != "" {
			d.multi.pipes[mk] = [backend.NumOps][kernels.MaxSources][kernels.MaxDestinations][2]*cshim.Kernel{}
		}
	}
	d.multi.looked = false
	return d.setFloat32(hardware, "chosen by a test (Float32Kernels)")
}

// FTZKernels reports whether the float32 reductions and scales run the ftz
// kernels (test hook).
func (d *Device) FTZKernels() bool { return d.ftz }

// SelfTestFloat32 runs the float32 self-test that Open runs for a physical
// device without DenormPreserveFloat32 (selftest.go) on a new device of
// index, again (the verdict Open uses is not changed), and returns its
// verdict and reason. tamper, when not nil, sees each kernel's results
// before they are compared and may change them (Got), as a device that
// flushes would have, or fail the test (test hook).
func (in *Instance) SelfTestFloat32(index int, tamper func(*SelfTestResult) error) (hardware bool, reason string) {
	return in.selfTestFloat32(index, tamper)
}

// ForgetFloat32 forgets every physical device's float32 kernel choice, so
// the next Open of each runs the self-test again, and returns how many
// self-tests Open has run in the process so far (test hook).
func (in *Instance) ForgetFloat32() (runs int64) {
	in.f32.Lock()
	defer in.f32.Unlock()
	in.f32.choice = nil
	return in.f32.runs.Load()
}

// SelfTestKernels lists the kernels the float32 self-test runs (test hook).
func SelfTestKernels() []string {
	var names []string
	for _, c := range selfTestCalls() {
		names = append(names, c.kernel)
	}
	return names
}

// DropFloatControls makes every kernel the device creates from now on
// declare no DenormPreserve, as on a device without float controls, while
// Info() still reports what the device has (test hook; call it before the
// device is used, then Float32Kernels to pick the float32 kernels).
func (d *Device) DropFloatControls() {
	d.raw.FloatControls = false
	d.raw.DenormPreserveFloat16, d.raw.DenormPreserveFloat32, d.raw.DenormPreserveFloat64 = false, false, false
	d.code = nil
	d.pipes = [numKinds][backend.NumOps][kernels.MaxSources + 1][2]*cshim.Kernel{}
	d.multi.pipes = [numMultiKinds][backend.NumOps][kernels.MaxSources][kernels.MaxDestinations][2]*cshim.Kernel{}
}
