//go:build cgo && !novulkan

package vulkan

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
)

func init() { backend.Register(Backend{}) }

// Backend is the Vulkan backend. Its zero value is ready to use; the one
// Vulkan instance of the process is created by the first call that needs it.
type Backend struct{}

// The process's instance: Vulkan is loaded and the instance created once.
var inst struct {
	once      sync.Once
	impl      *cshim.Impl
	info      cshim.InstanceInfo
	devices   []cshim.DeviceInfo
	err       error
	requested bool        // validation was asked for when the instance was created
	ready     atomic.Bool // setup ran (so the fields above may be read)
}

// setup loads Vulkan and creates the instance, with the validation layer
// when validation is true or GOCOLL_VULKAN_VALIDATION=1. Only the first call
// decides.
func setup(validation bool) error {
	inst.once.Do(func() {
		inst.impl = cshim.Vulkan()
		inst.requested = validation || os.Getenv("GOCOLL_VULKAN_VALIDATION") == "1"
		if err := inst.impl.Init(cshim.InitOptions{Validation: inst.requested}); err != nil {
			inst.err = err
			return
		}
		if inst.info, inst.err = inst.impl.Instance(); inst.err != nil {
			return
		}
		inst.devices, inst.err = inst.impl.Devices()
		inst.ready.Store(true)
	})
	return inst.err
}

// Name returns "vulkan".
func (Backend) Name() string { return "vulkan" }

// Available loads Vulkan (dlopen, vkCreateInstance) and returns nil when at
// least one device can be opened, else an error wrapping
// backend.ErrUnavailable that says why (the library path that failed to
// load, no device, or each device's reason).
func (Backend) Available() error {
	if err := setup(false); err != nil {
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
		return fmt.Errorf("vulkan: no Vulkan device (vkEnumeratePhysicalDevices found none; library %s): %w",
			inst.info.Library, backend.ErrUnavailable)
	}
	return fmt.Errorf("vulkan: no usable Vulkan device (%s): %w", strings.Join(why, "; "), backend.ErrUnavailable)
}

func unavailable(err error) error {
	if errors.Is(err, backend.ErrUnavailable) {
		return fmt.Errorf("vulkan: %w", err)
	}
	return fmt.Errorf("vulkan: %w: %w", backend.ErrUnavailable, err)
}

// Devices lists the physical devices as they would open with default
// options.
func (Backend) Devices() ([]backend.DeviceInfo, error) {
	if err := setup(false); err != nil {
		return nil, unavailable(err)
	}
	out := make([]backend.DeviceInfo, len(inst.devices))
	for i, d := range inst.devices {
		out[i] = deviceInfo(d, backend.OpenOptions{})
	}
	return out, nil
}

// Open opens physical device index as a new logical device with its own
// queue (vkCreateDevice), or with opts.ShareDevice on the process's shared
// logical device of that physical device, with the next of its queues.
// opts.Validation needs the instance to have been
// created with the validation layer: set GOCOLL_VULKAN_VALIDATION=1, or make
// this the process's first use of the backend.
func (Backend) Open(index int, opts backend.OpenOptions) (backend.Device, error) {
	if err := setup(opts.Validation); err != nil {
		return nil, unavailable(err)
	}
	if index < 0 || index >= len(inst.devices) {
		return nil, fmt.Errorf("vulkan: no device %d (%d devices): %w", index, len(inst.devices), backend.ErrInvalidArgument)
	}
	if opts.Validation && !inst.info.Validation {
		return nil, fmt.Errorf("vulkan: validation requested, but the process's Vulkan instance was created without the validation layer "+
			"(it is created once; set GOCOLL_VULKAN_VALIDATION=1): %w", backend.ErrUnsupported)
	}
	return open(index, opts)
}

// ValidationMessages drains the warnings and errors the validation layer
// reported since the last call (every device of the process; nil when
// validation is off). Tests call it to fail on any message.
func ValidationMessages() []string {
	if !inst.ready.Load() || !inst.info.Validation {
		return nil
	}
	msgLog.Lock()
	defer msgLog.Unlock()
	out := append(msgLog.kept, inst.impl.TakeMessages()...)
	msgLog.kept = nil
	return out
}

// msgLog keeps the messages a device call took from the C side to report
// them, so that ValidationMessages still returns them.
var msgLog struct {
	sync.Mutex
	kept []string
}

// takeValidation moves new messages from C into msgLog and returns the last
// one, or "" when there is none.
func takeValidation() (last string, n int) {
	msgLog.Lock()
	defer msgLog.Unlock()
	m := inst.impl.TakeMessages()
	msgLog.kept = append(msgLog.kept, m...)
	if len(m) == 0 {
		return "", 0
	}
	return m[len(m)-1], len(m)
}

// deviceInfo converts a physical device's description, applying opts.
func deviceInfo(c cshim.DeviceInfo, opts backend.OpenOptions) backend.DeviceInfo {
	in := backend.DeviceInfo{
		Backend:          "vulkan",
		Index:            c.Index,
		Name:             c.Name,
		VendorID:         c.VendorID,
		DeviceID:         c.DeviceID,
		Type:             c.Type.String(),
		Driver:           strings.TrimSpace(c.DriverName + " " + c.DriverInfo),
		APIVersion:       c.APIVersion.String(),
		Float64:          c.ShaderFloat64 && !opts.DisableFloat64,
		MaxBindingBytes:  maxBinding(c, opts),
		MaxAllocBytes:    int64(c.MaxMemoryAllocationSize),
		SubgroupSize:     int(c.SubgroupSize),
		TimestampPeriod:  float64(c.TimestampPeriod),
		HostImport:       c.ExternalMemoryHost,
		Heaps:            c.Heaps,
		UnifiedMemory:    c.Type == cshim.DeviceCPU || c.Type == cshim.DeviceIntegrated,
		MaxWorkGroupSize: int(min(c.MaxComputeWorkGroupInvocations, c.MaxComputeWorkGroupSize[0])),
	}
	if in.Driver == "" {
		in.Driver = fmt.Sprintf("driver version %#x", c.DriverVersion)
	}
	switch {
	case !c.ShaderFloat64:
		in.Float64Reason = "the device lacks shaderFloat64"
	case opts.DisableFloat64:
		in.Float64Reason = "disabled by OpenOptions.DisableFloat64"
	}
	return in
}

// maxBinding is the largest range one binding covers: maxStorageBufferRange
// (rounded down to whole 16-byte vectors), lowered by opts.MaxBindingBytes,
// but never below what one element past an aligned-down offset needs.
func maxBinding(c cshim.DeviceInfo, opts backend.OpenOptions) int64 {
	m := int64(min(c.MaxStorageBufferRange, 1<<62))
	if m >= 1<<16 {
		// Whole 16-byte vectors (NVIDIA reports 4 GiB - 1), so pieces of a
		// split keep the 16-byte kernels usable.
		m &^= 15
	}
	if opts.MaxBindingBytes > 0 && opts.MaxBindingBytes < m {
		m = opts.MaxBindingBytes
	}
	return max(m, int64(c.MinStorageBufferOffsetAlignment), 8)
}
