//go:build darwin && cgo && !nometal

package metal

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/internal/shimdev"
	"github.com/gocoll/gocoll/kernels"
)

// inst is the process's view of Metal, set up once. Metal's messages are
// compiler warnings, not validation reports, so they fail no call.
var inst = shimdev.NewInstance(shimdev.API{
	Name:    "metal",
	Title:   "Metal",
	Info:    deviceInfo,
	Code:    kernelCode,
	SpinGPU: 50 * time.Microsecond,
})

// float64Reason is why no Metal device reduces f64 in a kernel.
const float64Reason = "Metal has no double type (MSL has no 64-bit float); f64 is reduced exactly on the host path"

func init() { backend.Register(Backend{}) }

// Backend is the Metal backend. Its zero value is ready to use; the devices
// are enumerated (MTLCopyAllDevices) and probed once per process, by the
// first call that needs them.
type Backend struct{}

func setup() error {
	return inst.Setup(func() (*cshim.Impl, cshim.InitOptions) { return cshim.Metal(), cshim.InitOptions{} })
}

// kernelCode returns a kernel's MSL (kernels.MSL) as metal.m's kernel_create
// takes it (cshim.MetalKernel), compiled by Metal at run time, once per
// device (newLibraryWithSource). MSL carries no float controls: Metal
// reports no DenormPreserveFloat32, so a device's first open runs the
// self-test of its float32 arithmetic (shimdev), and its float32
// reductions run the kernels that use it only where every result was the
// host's, else the _ftz kernels, exact whatever the GPU does with
// subnormals.
func kernelCode(info kernels.Info, _ cshim.DeviceInfo) ([]byte, string, error) {
	msl, err := kernels.MSL(info.Name)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", err, backend.ErrUnsupported)
	}
	return cshim.MetalKernel(msl, info.Bindings)
}

// Name returns "metal".
func (Backend) Name() string { return "metal" }

// Priority returns backend.PriorityMetal: on macOS the first choice.
func (Backend) Priority() int { return backend.PriorityMetal }

// Available enumerates the Metal devices and returns nil when one can be
// opened, else an error wrapping backend.ErrUnavailable that says why (no
// device, or each device's reason: a GPU that cannot compile or run the
// probe kernel is not usable).
func (Backend) Available() error {
	if err := setup(); err != nil {
		return inst.Unavailable(err)
	}
	return inst.Available("MTLCopyAllDevices found none")
}

// Devices lists the Metal devices as they would open with default options.
func (Backend) Devices() ([]backend.DeviceInfo, error) {
	if err := setup(); err != nil {
		return nil, inst.Unavailable(err)
	}
	return inst.Devices(), nil
}

// Open opens device index with a command queue of its own
// (newCommandQueueWithMaxCommandBufferCount). opts.Validation needs Metal's
// API validation, which Metal switches on for the whole process at launch:
// run with MTL_DEBUG_LAYER=1.
func (Backend) Open(index int, opts backend.OpenOptions) (backend.Device, error) {
	if err := setup(); err != nil {
		return nil, inst.Unavailable(err)
	}
	if err := inst.CheckIndex(index); err != nil {
		return nil, err
	}
	if d := inst.Raw()[index]; !d.Usable {
		return nil, fmt.Errorf("metal: device %d (%s) is not usable: %s: %w", index, d.Name, d.UnusableReason, backend.ErrUnavailable)
	}
	if opts.Validation && !inst.Info().Validation {
		return nil, fmt.Errorf("metal: validation requested, but Metal's API validation is chosen when the process starts: "+
			"run with MTL_DEBUG_LAYER=1 (MTL_DEBUG_LAYER is %q): %w", os.Getenv("MTL_DEBUG_LAYER"), backend.ErrUnsupported)
	}
	return inst.Open(index, opts, cshim.OpenOptions{})
}

// deviceInfo converts a device's description, applying opts.
func deviceInfo(c cshim.DeviceInfo, opts backend.OpenOptions) backend.DeviceInfo {
	return backend.DeviceInfo{
		Backend:          "metal",
		Index:            c.Index,
		Name:             c.Name,
		VendorID:         c.VendorID,
		DeviceID:         c.DeviceID,
		Type:             c.Type.String(),
		Driver:           strings.TrimSpace(c.DriverName + " (" + c.DriverInfo + ")"),
		APIVersion:       fmt.Sprintf("MSL %d.%d", c.APIVersion>>22&0x7f, c.APIVersion>>12&0x3ff),
		Float64:          false,
		Float64Reason:    float64Reason,
		MaxBindingBytes:  shimdev.MaxBinding(c, opts),
		MaxAllocBytes:    int64(min(c.MaxMemoryAllocationSize, 1<<62)),
		SubgroupSize:     int(c.SubgroupSize),
		TimestampPeriod:  float64(c.TimestampPeriod),
		HostImport:       c.ExternalMemoryHost,
		Heaps:            c.Heaps,
		UnifiedMemory:    c.Type == cshim.DeviceIntegrated,
		MaxWorkGroupSize: int(min(c.MaxComputeWorkGroupInvocations, c.MaxComputeWorkGroupSize[0])),
	}
}
