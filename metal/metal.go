//go:build darwin && cgo && !nometal

package metal

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
)

func init() { backend.Register(Backend{}) }

// Backend is the Metal backend. Its zero value is ready to use; the devices
// are enumerated (MTLCopyAllDevices) and probed once per process, by the
// first call that needs them.
type Backend struct{}

// The process's view of Metal, set up once.
var inst struct {
	once    sync.Once
	impl    *cshim.Impl
	info    cshim.InstanceInfo
	devices []cshim.DeviceInfo
	err     error
}

// float64Reason is why no Metal device reduces f64 in a kernel.
const float64Reason = "Metal has no double type (MSL has no 64-bit float); f64 is reduced exactly on the host path"

func setup() error {
	inst.once.Do(func() {
		inst.impl = cshim.Metal()
		if inst.err = inst.impl.Init(cshim.InitOptions{}); inst.err != nil {
			return
		}
		if inst.info, inst.err = inst.impl.Instance(); inst.err != nil {
			return
		}
		inst.devices, inst.err = inst.impl.Devices()
	})
	return inst.err
}

// Name returns "metal".
func (Backend) Name() string { return "metal" }

// Available enumerates the Metal devices and returns nil when one can be
// opened, else an error wrapping backend.ErrUnavailable that says why (no
// device, or each device's reason: a GPU that cannot compile or run the
// probe kernel is not usable).
func (Backend) Available() error {
	if err := setup(); err != nil {
		return unavailable(err)
	}
	var why []string
	for _, d := range inst.devices {
		if d.Usable {
			return nil
		}
		why = append(why, fmt.Sprintf("%s: %s", d.Name, d.UnusableReason))
	}
	if len(why) == 0 {
		return fmt.Errorf("metal: no Metal device (MTLCopyAllDevices found none): %w", backend.ErrUnavailable)
	}
	return fmt.Errorf("metal: no usable Metal device (%s): %w", strings.Join(why, "; "), backend.ErrUnavailable)
}

func unavailable(err error) error {
	if errors.Is(err, backend.ErrUnavailable) {
		return fmt.Errorf("metal: %w", err)
	}
	return fmt.Errorf("metal: %w: %w", backend.ErrUnavailable, err)
}

// Devices lists the Metal devices as they would open with default options.
func (Backend) Devices() ([]backend.DeviceInfo, error) {
	if err := setup(); err != nil {
		return nil, unavailable(err)
	}
	out := make([]backend.DeviceInfo, len(inst.devices))
	for i, d := range inst.devices {
		out[i] = deviceInfo(d, backend.OpenOptions{})
	}
	return out, nil
}

// Open opens device index with a command queue of its own
// (newCommandQueueWithMaxCommandBufferCount). opts.Validation needs Metal's
// API validation, which Metal switches on for the whole process at launch:
// run with MTL_DEBUG_LAYER=1.
func (Backend) Open(index int, opts backend.OpenOptions) (backend.Device, error) {
	if err := setup(); err != nil {
		return nil, unavailable(err)
	}
	if index < 0 || index >= len(inst.devices) {
		return nil, fmt.Errorf("metal: no device %d (%d devices): %w", index, len(inst.devices), backend.ErrInvalidArgument)
	}
	if d := inst.devices[index]; !d.Usable {
		return nil, fmt.Errorf("metal: device %d (%s) is not usable: %s: %w", index, d.Name, d.UnusableReason, backend.ErrUnavailable)
	}
	if opts.Validation && !inst.info.Validation {
		return nil, fmt.Errorf("metal: validation requested, but Metal's API validation is chosen when the process starts: "+
			"run with MTL_DEBUG_LAYER=1 (MTL_DEBUG_LAYER is %q): %w", os.Getenv("MTL_DEBUG_LAYER"), backend.ErrUnsupported)
	}
	return open(index, opts)
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
		MaxBindingBytes:  maxBinding(c, opts),
		MaxAllocBytes:    int64(min(c.MaxMemoryAllocationSize, 1<<62)),
		SubgroupSize:     int(c.SubgroupSize),
		TimestampPeriod:  float64(c.TimestampPeriod),
		HostImport:       c.ExternalMemoryHost,
		Heaps:            c.Heaps,
		UnifiedMemory:    c.Type == cshim.DeviceIntegrated,
		MaxWorkGroupSize: int(min(c.MaxComputeWorkGroupInvocations, c.MaxComputeWorkGroupSize[0])),
	}
}

// maxBinding is the largest range one binding covers: the device's limit
// (maxBufferLength, capped where the kernels' 32-bit indices end), lowered by
// opts.MaxBindingBytes, but never below what one element past an
// aligned-down offset needs.
func maxBinding(c cshim.DeviceInfo, opts backend.OpenOptions) int64 {
	m := int64(min(c.MaxStorageBufferRange, 1<<62))
	if opts.MaxBindingBytes > 0 && opts.MaxBindingBytes < m {
		m = opts.MaxBindingBytes
	}
	return max(m, int64(c.MinStorageBufferOffsetAlignment), 8)
}
