//go:build cgo

package shimdev

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/kernels"
)

// API is what differs between the compute APIs behind the ABI: a backend
// package fills one and everything else is shared.
type API struct {
	// Name is the backend's name ("vulkan", "metal"): Info().Backend and the
	// prefix of every error.
	Name string
	// Title names the API in messages ("Vulkan", "Metal").
	Title string
	// Info converts a physical device's description, applying opts.
	Info func(c cshim.DeviceInfo, opts backend.OpenOptions) backend.DeviceInfo
	// Code returns a kernel's code for cshim.KernelDesc on the physical
	// device dev and its entry point ("" for the implementation's default):
	// SPIR-V for Vulkan, MSL for Metal. It returns an error wrapping
	// backend.ErrUnsupported for a kernel the API has no code for.
	Code func(info kernels.Info, dev cshim.DeviceInfo) (code []byte, entry string, err error)
	// ValidationLog means the implementation's messages (message_count,
	// take_message) are validation-layer reports: with the layer on, a call
	// that sees a new one fails with backend.ErrValidation.
	ValidationLog bool
	// SpinGPU is how long a fence wait polls on a GPU before it blocks
	// (0: defaultSpin); GOCOLL_SPIN_US overrides it.
	SpinGPU time.Duration
}

// Instance is the process's use of one implementation of the ABI: loaded
// and initialised once, by the first call that needs it.
type Instance struct {
	api   API
	once  sync.Once
	ready atomic.Bool // setup succeeded (so the fields below may be read)
	impl  *cshim.Impl
	info  cshim.InstanceInfo
	devs  []cshim.DeviceInfo
	err   error
	spin  time.Duration

	// msgs keeps the messages a device call took from the C side to report
	// them, so that Messages still returns them.
	msgs struct {
		sync.Mutex
		kept []string
	}
	// f32 holds each physical device's choice of float32 kernels, by index,
	// made once per process (selftest.go).
	f32 struct {
		sync.Mutex
		choice map[int]*float32Choice
		runs   atomic.Int64 // self-tests Open ran
	}
}

// NewInstance returns the Instance of an API; Setup loads it.
func NewInstance(api API) *Instance {
	in := &Instance{api: api, spin: api.SpinGPU}
	if in.spin == 0 {
		in.spin = defaultSpin()
	}
	if v, err := strconv.Atoi(os.Getenv("GOCOLL_SPIN_US")); err == nil && v >= 0 {
		in.spin = time.Duration(v) * time.Microsecond
	}
	return in
}

// defaultSpin is the GPU fence spin where the API sets none: 2 ms when
// GOMAXPROCS leaves cores to spare (8 or more; a wait for device work of up
// to 2 ms then ends within a poll of its completion, as CUDA's default
// synchronisation does when cores are spare), else 200 us. On an H200 a
// 1-element dispatch took 52 us waited for with a blocking vkWaitForFences
// and 15.5 us spinning on vkGetFenceStatus.
func defaultSpin() time.Duration {
	if runtime.GOMAXPROCS(0) >= 8 {
		return 2 * time.Millisecond
	}
	return 200 * time.Microsecond
}

// Setup loads the implementation and creates its instance (Init, Instance,
// Devices) once; load says which implementation and with which options.
// Later calls return the first one's error.
func (in *Instance) Setup(load func() (*cshim.Impl, cshim.InitOptions)) error {
	in.once.Do(func() {
		impl, opts := load()
		in.impl = impl
		if in.err = impl.Init(opts); in.err != nil {
			return
		}
		if in.info, in.err = impl.Instance(); in.err != nil {
			return
		}
		if in.devs, in.err = impl.Devices(); in.err == nil {
			in.ready.Store(true)
		}
	})
	return in.err
}

// Info describes the instance (after a successful Setup).
func (in *Instance) Info() cshim.InstanceInfo { return in.info }

// Raw returns the physical devices' descriptions (after a successful Setup).
func (in *Instance) Raw() []cshim.DeviceInfo { return in.devs }

// Unavailable wraps a setup error so it matches backend.ErrUnavailable.
func (in *Instance) Unavailable(err error) error {
	if errors.Is(err, backend.ErrUnavailable) {
		return fmt.Errorf("%s: %w", in.api.Name, err)
	}
	return fmt.Errorf("%s: %w: %w", in.api.Name, backend.ErrUnavailable, err)
}

// Available returns nil when a device can be opened, else an error wrapping
// backend.ErrUnavailable with each device's reason, or none (how the API
// found no device) when there is no device at all.
func (in *Instance) Available(none string) error {
	var why []string
	for _, d := range in.devs {
		if d.Usable {
			return nil
		}
		why = append(why, fmt.Sprintf("%s: %s", d.Name, d.UnusableReason))
	}
	if len(why) == 0 {
		return fmt.Errorf("%s: no %s device (%s): %w", in.api.Name, in.api.Title, none, backend.ErrUnavailable)
	}
	return fmt.Errorf("%s: no usable %s device (%s): %w", in.api.Name, in.api.Title, strings.Join(why, "; "), backend.ErrUnavailable)
}

// Devices lists the physical devices as they would open with default
// options; the float32 kernels of one not opened yet in the process are
// not chosen yet (DeviceInfo.Float32Reason empty: the choice may need the
// self-test, which needs a device).
func (in *Instance) Devices() []backend.DeviceInfo {
	out := make([]backend.DeviceInfo, len(in.devs))
	for i, d := range in.devs {
		out[i] = in.api.Info(d, backend.OpenOptions{})
		out[i].Kernels = kernelTypes(d, out[i].Float64)
		out[i].Float32Hardware, out[i].Float32Reason = in.listedFloat32(i, out[i])
	}
	return out
}

// CheckIndex returns an error wrapping backend.ErrInvalidArgument when there
// is no device index.
func (in *Instance) CheckIndex(index int) error {
	if index < 0 || index >= len(in.devs) {
		return fmt.Errorf("%s: no device %d (%d devices): %w", in.api.Name, index, len(in.devs), backend.ErrInvalidArgument)
	}
	return nil
}

// Messages drains the validation messages the implementation recorded since
// the last call (every device of the process); nil when the instance has no
// validation layer.
func (in *Instance) Messages() []string {
	if !in.ready.Load() || !in.info.Validation {
		return nil
	}
	in.msgs.Lock()
	defer in.msgs.Unlock()
	out := append(in.msgs.kept, in.impl.TakeMessages()...)
	in.msgs.kept = nil
	return out
}

// takeMessages moves new messages from C into msgs and returns the last
// one and how many there were.
func (in *Instance) takeMessages() (last string, n int) {
	in.msgs.Lock()
	defer in.msgs.Unlock()
	m := in.impl.TakeMessages()
	in.msgs.kept = append(in.msgs.kept, m...)
	if len(m) == 0 {
		return "", 0
	}
	return m[len(m)-1], len(m)
}

// MaxBinding is the largest range one binding covers: the device's
// maxStorageBufferRange (rounded down to whole 16-byte vectors, so pieces of
// a split keep the 16-byte kernels usable), lowered by opts.MaxBindingBytes,
// but never below what one element past an aligned-down offset needs.
func MaxBinding(c cshim.DeviceInfo, opts backend.OpenOptions) int64 {
	m := int64(min(c.MaxStorageBufferRange, 1<<62))
	if m >= 1<<16 {
		m &^= 15 // NVIDIA reports 4 GiB - 1, Metal's cap is 4 GiB - 1
	}
	if opts.MaxBindingBytes > 0 && opts.MaxBindingBytes < m {
		m = opts.MaxBindingBytes
	}
	return max(m, int64(c.MinStorageBufferOffsetAlignment), 8)
}
