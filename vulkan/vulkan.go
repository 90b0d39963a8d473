//go:build cgo && !novulkan

package vulkan

import (
	"fmt"
	"os"
	"strings"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/internal/shimdev"
	"github.com/gocoll/gocoll/kernels"
)

func init() { backend.Register(Backend{}) }

// Backend is the Vulkan backend. Its zero value is ready to use; the one
// Vulkan instance of the process is created by the first call that needs it.
type Backend struct{}

// inst is the process's Vulkan: loaded and the instance created once.
var inst = shimdev.NewInstance(shimdev.API{
	Name:  "vulkan",
	Title: "Vulkan",
	Info:  deviceInfo,
	Code: func(info kernels.Info, dev cshim.DeviceInfo) ([]byte, string, error) {
		spirv, err := kernels.SPIRV(info.Name)
		if err != nil {
			return nil, "", err
		}
		// DenormPreserve only for the widths the device takes.
		spirv, err = kernels.AdaptFloatControls(spirv, dev.KernelFloatControls())
		return spirv, "", err
	},
	ValidationLog: true, // and the default SpinGPU
})

// setup loads Vulkan and creates the instance, with the validation layer
// when validation is true or GOCOLL_VULKAN_VALIDATION=1. Only the first call
// decides.
func setup(validation bool) error {
	return inst.Setup(func() (*cshim.Impl, cshim.InitOptions) {
		v := validation || os.Getenv("GOCOLL_VULKAN_VALIDATION") == "1"
		return cshim.Vulkan(), cshim.InitOptions{Validation: v}
	})
}

// Name returns "vulkan".
func (Backend) Name() string { return "vulkan" }

// Priority returns backend.PriorityVulkan: chosen before host, after Metal.
func (Backend) Priority() int { return backend.PriorityVulkan }

// Available loads Vulkan (dlopen, vkCreateInstance) and returns nil when at
// least one device can be opened, else an error wrapping
// backend.ErrUnavailable that says why (the library path that failed to
// load, no device, or each device's reason).
func (Backend) Available() error {
	if err := setup(false); err != nil {
		return inst.Unavailable(err)
	}
	return inst.Available(fmt.Sprintf("vkEnumeratePhysicalDevices found none; library %s", inst.Info().Library))
}

// Devices lists the physical devices as they would open with default
// options.
func (Backend) Devices() ([]backend.DeviceInfo, error) {
	if err := setup(false); err != nil {
		return nil, inst.Unavailable(err)
	}
	return inst.Devices(), nil
}

// Open opens physical device index as a new logical device with its own
// queue (vkCreateDevice), or with opts.ShareDevice on the process's shared
// logical device of that physical device, with the next of its queues.
// opts.Validation needs the instance to have been
// created with the validation layer: set GOCOLL_VULKAN_VALIDATION=1, or make
// this the process's first use of the backend.
func (Backend) Open(index int, opts backend.OpenOptions) (backend.Device, error) {
	if err := setup(opts.Validation); err != nil {
		return nil, inst.Unavailable(err)
	}
	if opts.Validation && !inst.Info().Validation {
		return nil, fmt.Errorf("vulkan: validation requested, but the process's Vulkan instance was created without the validation layer "+
			"(it is created once; set GOCOLL_VULKAN_VALIDATION=1): %w", backend.ErrUnsupported)
	}
	return inst.Open(index, opts, cshim.OpenOptions{DisableFloat64: opts.DisableFloat64, ShareDevice: opts.ShareDevice, ShareKey: opts.ShareKey})
}

// ValidationMessages drains the warnings and errors the validation layer
// reported since the last call (every device of the process; nil when
// validation is off). Tests call it to fail on any message.
func ValidationMessages() []string { return inst.Messages() }

// deviceInfo converts a physical device's description, applying opts.
func deviceInfo(c cshim.DeviceInfo, opts backend.OpenOptions) backend.DeviceInfo {
	in := backend.DeviceInfo{
		Backend:               "vulkan",
		Index:                 c.Index,
		Name:                  c.Name,
		VendorID:              c.VendorID,
		DeviceID:              c.DeviceID,
		Type:                  c.Type.String(),
		Driver:                strings.TrimSpace(c.DriverName + " " + c.DriverInfo),
		APIVersion:            c.APIVersion.String(),
		Float64:               c.ShaderFloat64 && !opts.DisableFloat64,
		DenormPreserveFloat16: c.KernelFloatControls().Keeps(16),
		DenormPreserveFloat32: c.KernelFloatControls().Keeps(32),
		DenormPreserveFloat64: c.KernelFloatControls().Keeps(64),
		MaxBindingBytes:       shimdev.MaxBinding(c, opts),
		MaxAllocBytes:         int64(c.MaxMemoryAllocationSize),
		SubgroupSize:          int(c.SubgroupSize),
		TimestampPeriod:       float64(c.TimestampPeriod),
		HostImport:            c.ExternalMemoryHost,
		Heaps:                 c.Heaps,
		UnifiedMemory:         c.Type == cshim.DeviceCPU || c.Type == cshim.DeviceIntegrated,
		MaxWorkGroupSize:      int(min(c.MaxComputeWorkGroupInvocations, c.MaxComputeWorkGroupSize[0])),
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
