//go:build cgo

package cshim

/*
#cgo CFLAGS: -Wall -Wextra -O2
#cgo linux freebsd LDFLAGS: -ldl

#include <stdlib.h>
#include <string.h>
#include "shim.h"

// cgo cannot call through C function pointers: these wrappers do, and return
// the status, the error and up to three results by value, so the Go side
// passes no pointer to Go memory on the hot path (which would make it escape
// to the heap).
typedef struct cs_ret {
	int32_t status;
	int32_t native;
	char *msg;
	uint64_t u64;
	void *p0;
	void *p1;
} cs_ret;

static cs_ret cs_make(gc_status st, gc_error e) {
	cs_ret r = {.status = st, .native = e.native, .msg = e.msg};
	return r;
}

static cs_ret cs_init(const gc_backend *b, const char *library, int32_t validation) {
	gc_error e = {0, NULL};
	gc_init_options o = {.library = library, .validation = validation};
	return cs_make(b->init(&o, &e), e);
}

static cs_ret cs_instance_info(const gc_backend *b, gc_instance_info *out) {
	gc_error e = {0, NULL};
	return cs_make(b->instance_info(out, &e), e);
}

static cs_ret cs_device_count(const gc_backend *b) {
	gc_error e = {0, NULL};
	uint32_t n = 0;
	cs_ret r = cs_make(b->device_count(&n, &e), e);
	r.u64 = n;
	return r;
}

static cs_ret cs_device_info(const gc_backend *b, uint32_t index, gc_device_info *out) {
	gc_error e = {0, NULL};
	return cs_make(b->device_info(index, out, &e), e);
}

static cs_ret cs_message_count(const gc_backend *b) {
	gc_error e = {0, NULL};
	uint64_t n = 0;
	cs_ret r = cs_make(b->message_count(&n, &e), e);
	r.u64 = n;
	return r;
}

static cs_ret cs_take_message(const gc_backend *b) {
	gc_error e = {0, NULL};
	char *m = NULL;
	cs_ret r = cs_make(b->take_message(&m, &e), e);
	r.p0 = m;
	return r;
}

static cs_ret cs_open(const gc_backend *b, uint32_t index, int32_t disable_float64, uint32_t ring, uint32_t queries, int32_t share,
		      uint64_t drain_ns, uint64_t share_key) {
	gc_error e = {0, NULL};
	gc_open_options o = {.disable_float64 = disable_float64, .ring_size = ring, .timestamp_queries = queries, .share_device = share,
			     .drain_timeout_ns = drain_ns, .share_key = share_key};
	gc_device d = NULL;
	cs_ret r = cs_make(b->open(index, &o, &d, &e), e);
	r.p0 = d;
	return r;
}

static cs_ret cs_close(const gc_backend *b, gc_device d) {
	gc_error e = {0, NULL};
	return cs_make(b->close(d, &e), e);
}

static cs_ret cs_counters(const gc_backend *b, gc_device d, gc_counters *out) {
	gc_error e = {0, NULL};
	return cs_make(b->counters(d, out, &e), e);
}

static cs_ret cs_buffer_create(const gc_backend *b, gc_device d, uint64_t size, int32_t memory) {
	gc_error e = {0, NULL};
	gc_buffer buf = NULL;
	void *mapped = NULL;
	cs_ret r = cs_make(b->buffer_create(d, size, memory, &buf, &mapped, &e), e);
	r.p0 = buf;
	r.p1 = mapped;
	return r;
}

static cs_ret cs_buffer_import(const gc_backend *b, gc_device d, void *host, uint64_t size) {
	gc_error e = {0, NULL};
	gc_buffer buf = NULL;
	cs_ret r = cs_make(b->buffer_import(d, host, size, &buf, &e), e);
	r.p0 = buf;
	return r;
}

static cs_ret cs_buffer_destroy(const gc_backend *b, gc_buffer buf) {
	gc_error e = {0, NULL};
	return cs_make(b->buffer_destroy(buf, &e), e);
}

static cs_ret cs_kernel_create(const gc_backend *b, gc_device d, const void *code, size_t size, const char *entry,
			       uint32_t nspec, const uint32_t *ids, const uint32_t *values, uint32_t push, uint32_t bindings) {
	gc_error e = {0, NULL};
	gc_kernel_desc desc = {
		.code = code,
		.code_size = size,
		.entry = entry,
		.spec_count = nspec,
		.spec_ids = ids,
		.spec_values = values,
		.push_size = push,
		.binding_count = bindings,
	};
	gc_kernel k = NULL;
	cs_ret r = cs_make(b->kernel_create(d, &desc, &k, &e), e);
	r.p0 = k;
	return r;
}

static cs_ret cs_kernel_destroy(const gc_backend *b, gc_kernel k) {
	gc_error e = {0, NULL};
	return cs_make(b->kernel_destroy(k, &e), e);
}

static cs_ret cs_cmd_copy(const gc_backend *b, gc_device d, gc_buffer dst, uint64_t dst_off, gc_buffer src, uint64_t src_off,
			  uint64_t size) {
	gc_error e = {0, NULL};
	return cs_make(b->cmd_copy(d, dst, dst_off, src, src_off, size, &e), e);
}

static cs_ret cs_cmd_dispatch(const gc_backend *b, gc_device d, const gc_dispatch *x) {
	gc_error e = {0, NULL};
	return cs_make(b->cmd_dispatch(d, x, &e), e);
}

static cs_ret cs_cmd_timestamp(const gc_backend *b, gc_device d, uint32_t query) {
	gc_error e = {0, NULL};
	return cs_make(b->cmd_timestamp(d, query, &e), e);
}

static cs_ret cs_submit(const gc_backend *b, gc_device d) {
	gc_error e = {0, NULL};
	uint64_t t = 0;
	cs_ret r = cs_make(b->submit(d, &t, &e), e);
	r.u64 = t;
	return r;
}

static cs_ret cs_wait(const gc_backend *b, gc_device d, uint64_t ticket, uint64_t timeout_ns) {
	gc_error e = {0, NULL};
	return cs_make(b->wait(d, ticket, timeout_ns, &e), e);
}

static cs_ret cs_wait_idle(const gc_backend *b, gc_device d) {
	gc_error e = {0, NULL};
	return cs_make(b->wait_idle(d, &e), e);
}

static cs_ret cs_copy_now(const gc_backend *b, gc_device d, gc_buffer dst, uint64_t dst_off, gc_buffer src, uint64_t src_off,
			  uint64_t size) {
	gc_error e = {0, NULL};
	return cs_make(b->copy_now(d, dst, dst_off, src, src_off, size, &e), e);
}

static cs_ret cs_read_timestamps(const gc_backend *b, gc_device d, uint32_t first, uint32_t count, uint64_t *out) {
	gc_error e = {0, NULL};
	return cs_make(b->read_timestamps(d, first, count, out, &e), e);
}

// cs_missing returns the number of table entries that are NULL.
static int cs_missing(const gc_backend *b) {
	int n = 0;
	n += b->name == NULL;
	n += b->init == NULL;
	n += b->instance_info == NULL;
	n += b->device_count == NULL;
	n += b->device_info == NULL;
	n += b->message_count == NULL;
	n += b->take_message == NULL;
	n += b->open == NULL;
	n += b->close == NULL;
	n += b->counters == NULL;
	n += b->buffer_create == NULL;
	n += b->buffer_import == NULL;
	n += b->buffer_destroy == NULL;
	n += b->kernel_create == NULL;
	n += b->kernel_destroy == NULL;
	n += b->cmd_copy == NULL;
	n += b->cmd_dispatch == NULL;
	n += b->cmd_timestamp == NULL;
	n += b->submit == NULL;
	n += b->wait == NULL;
	n += b->wait_idle == NULL;
	n += b->copy_now == NULL;
	n += b->read_timestamps == NULL;
	return n;
}
*/
import "C"

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/kernels"
)

// Limits of the ABI (shim.h; a test keeps them in step).
const (
	MaxBindings  = 16  // GC_MAX_BINDINGS: bindings one kernel may have
	MaxPushBytes = 128 // GC_MAX_PUSH_BYTES: push-constant bytes one kernel may have
	ABIVersion   = 6   // GC_ABI_VERSION
)

// errClosed is returned by every call on a closed Device, Buffer or Kernel.
var errClosed = fmt.Errorf("cshim: use after Close: %w", backend.ErrClosed)

// Impl is one implementation of the ABI (one compute API).
type Impl struct {
	c    *C.gc_backend
	name string
}

func newImpl(c *C.gc_backend) *Impl {
	return &Impl{c: c, name: C.GoString(c.name)}
}

// Name returns the implementation's name ("vulkan").
func (i *Impl) Name() string { return i.name }

// missingEntries returns the number of NULL entries in the table (tests).
func (i *Impl) missingEntries() int { return int(C.cs_missing(i.c)) }

// abiVersion returns the table's ABI version (tests).
func (i *Impl) abiVersion() uint32 { return uint32(i.c.abi_version) }

func (i *Impl) fail(op string, r C.cs_ret) error {
	e := &Error{Op: i.name + "." + op, Status: Status(r.status), Native: int32(r.native)}
	if r.msg != nil {
		e.Msg = C.GoString(r.msg)
		C.free(unsafe.Pointer(r.msg))
	}
	return e
}

// InitOptions are the settings of Impl.Init.
type InitOptions struct {
	// Library is the path of the API library to load. Empty means
	// $GOCOLL_VULKAN_LIB when set, else the platform's default
	// (libvulkan.so.1, libvulkan.1.dylib).
	Library string
	// Validation enables the validation layer (VK_LAYER_KHRONOS_validation)
	// and a VK_EXT_debug_utils messenger that records every warning and
	// error; $GOCOLL_VULKAN_VALIDATION=1 enables it too. Init fails with
	// backend.ErrUnsupported when the layer is not installed.
	Validation bool
}

// Init loads the API library and creates the process's one instance
// (dlopen, vkCreateInstance, vkEnumeratePhysicalDevices). The first call in
// the process decides; later calls return its result and ignore opts. A
// library that cannot be loaded gives an error wrapping
// backend.ErrUnavailable that names the path.
func (i *Impl) Init(opts InitOptions) error {
	var lib *C.char
	if opts.Library != "" {
		lib = C.CString(opts.Library)
		defer C.free(unsafe.Pointer(lib))
	}
	v := C.int32_t(0)
	if opts.Validation {
		v = 1
	}
	if r := C.cs_init(i.c, lib, v); r.status != C.GC_OK {
		return i.fail("init", r)
	}
	return nil
}

// InstanceInfo describes the instance Init created.
type InstanceInfo struct {
	APIVersion    Version // the API version the instance uses
	LoaderVersion Version
	Validation    bool   // the validation layer and messenger are active
	Library       string // the library loaded
}

// Instance describes the instance (after a successful Init).
func (i *Impl) Instance() (InstanceInfo, error) {
	var c C.gc_instance_info
	if r := C.cs_instance_info(i.c, &c); r.status != C.GC_OK {
		return InstanceInfo{}, i.fail("instance_info", r)
	}
	return InstanceInfo{
		APIVersion:    Version(c.api_version),
		LoaderVersion: Version(c.loader_version),
		Validation:    c.validation != 0,
		Library:       C.GoString(&c.library[0]),
	}, nil
}

// Version is a Vulkan-style packed version number (VK_MAKE_API_VERSION).
type Version uint32

func (v Version) String() string {
	return fmt.Sprintf("%d.%d.%d", v>>22&0x7f, v>>12&0x3ff, v&0xfff)
}

// DeviceType is a physical device's type (VkPhysicalDeviceType).
type DeviceType int32

// Device types, with the values of VkPhysicalDeviceType (GC_DEVICE_*).
const (
	DeviceOther      DeviceType = 0
	DeviceIntegrated DeviceType = 1
	DeviceDiscrete   DeviceType = 2
	DeviceVirtual    DeviceType = 3
	DeviceCPU        DeviceType = 4
)

func (t DeviceType) String() string {
	switch t {
	case DeviceIntegrated:
		return "integrated"
	case DeviceDiscrete:
		return "discrete"
	case DeviceVirtual:
		return "virtual"
	case DeviceCPU:
		return "cpu"
	}
	return "other"
}

// DeviceInfo describes a physical device (vkGetPhysicalDeviceProperties2,
// vkGetPhysicalDeviceFeatures, vkGetPhysicalDeviceQueueFamilyProperties,
// vkGetPhysicalDeviceMemoryProperties).
type DeviceInfo struct {
	Index         int
	Name          string
	DriverName    string // VkPhysicalDeviceDriverProperties; empty before Vulkan 1.2 without the extension
	DriverInfo    string
	VendorID      uint32
	DeviceID      uint32
	Type          DeviceType
	APIVersion    Version
	DriverVersion uint32 // vendor-specific encoding
	ShaderFloat64 bool
	// ShaderInt64, StorageBuffer8Bit and StorageBuffer16Bit report the
	// features the int64/uint64, int8/uint8 and 16-bit kernels need
	// (shaderInt64; storageBuffer8BitAccess, Vulkan 1.2 or VK_KHR_8bit_storage;
	// storageBuffer16BitAccess), which Open enables wherever the device has
	// them. Metal reports none.
	ShaderInt64        bool
	StorageBuffer8Bit  bool
	StorageBuffer16Bit bool
	PushDescriptor     bool // VK_KHR_push_descriptor
	// ExternalMemoryHost reports VK_EXT_external_memory_host (ImportHost).
	ExternalMemoryHost bool
	// FloatControls reports VkPhysicalDeviceFloatControlsProperties
	// (Vulkan 1.2 or VK_KHR_shader_float_controls, which Open enables where
	// needed); DenormIndependence is its denormBehaviorIndependence
	// (VkShaderFloatControlsIndependence: 0 32-bit only, 1 all, 2 none) and
	// DenormPreserveFloat16/32/64 its shaderDenormPreserveFloat16/32/64: a
	// kernel declaring the SPIR-V execution mode DenormPreserve for that
	// width keeps subnormals. All zero on Metal. The kernels' view of them
	// is KernelFloatControls.
	FloatControls         bool
	DenormIndependence    uint32
	DenormPreserveFloat16 bool
	DenormPreserveFloat32 bool
	DenormPreserveFloat64 bool
	// Usable is false when Open cannot succeed; UnusableReason says why.
	Usable         bool
	UnusableReason string

	MaxStorageBufferRange           uint64
	MaxMemoryAllocationSize         uint64 // Vulkan 1.1 maintenance3
	MinStorageBufferOffsetAlignment uint64
	MinImportedHostPointerAlignment uint64
	SubgroupSize                    uint32
	TimestampPeriod                 float32 // nanoseconds per tick
	TimestampValidBits              uint32  // of the compute queue; 0: no timestamps
	ComputeQueueFamily              uint32
	MaxComputeWorkGroupCount        [3]uint32
	MaxComputeWorkGroupSize         [3]uint32
	MaxComputeWorkGroupInvocations  uint32
	MaxPushConstantsSize            uint32
	MaxPushDescriptors              uint32
	Heaps                           []backend.Heap
}

// KernelFloatControls returns the device's float controls as the kernels take
// them (kernels.AdaptFloatControls): none where it reports none.
func (i DeviceInfo) KernelFloatControls() kernels.FloatControls {
	if !i.FloatControls {
		return kernels.FloatControls{}
	}
	fc := kernels.FloatControls{DenormPreserve16: i.DenormPreserveFloat16, DenormPreserve32: i.DenormPreserveFloat32,
		DenormPreserve64: i.DenormPreserveFloat64}
	switch i.DenormIndependence {
	case 0: // VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_32_BIT_ONLY
		fc.Independence = kernels.Independence32BitOnly
	case 1: // VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_ALL
		fc.Independence = kernels.IndependenceAll
	default: // VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_NONE
		fc.Independence = kernels.IndependenceNone
	}
	return fc
}

func deviceInfo(index int, c *C.gc_device_info) DeviceInfo {
	in := DeviceInfo{
		Index:                           index,
		Name:                            C.GoString(&c.name[0]),
		DriverName:                      C.GoString(&c.driver_name[0]),
		DriverInfo:                      C.GoString(&c.driver_info[0]),
		VendorID:                        uint32(c.vendor_id),
		DeviceID:                        uint32(c.device_id),
		Type:                            DeviceType(c._type),
		APIVersion:                      Version(c.api_version),
		DriverVersion:                   uint32(c.driver_version),
		ShaderFloat64:                   c.shader_float64 != 0,
		ShaderInt64:                     c.shader_int64 != 0,
		StorageBuffer8Bit:               c.storage_buffer_8bit != 0,
		StorageBuffer16Bit:              c.storage_buffer_16bit != 0,
		PushDescriptor:                  c.push_descriptor != 0,
		ExternalMemoryHost:              c.external_memory_host != 0,
		FloatControls:                   c.float_controls != 0,
		DenormIndependence:              uint32(c.denorm_independence),
		DenormPreserveFloat16:           c.denorm_preserve_float16 != 0,
		DenormPreserveFloat32:           c.denorm_preserve_float32 != 0,
		DenormPreserveFloat64:           c.denorm_preserve_float64 != 0,
		Usable:                          c.usable != 0,
		UnusableReason:                  C.GoString(&c.unusable_reason[0]),
		MaxStorageBufferRange:           uint64(c.max_storage_buffer_range),
		MaxMemoryAllocationSize:         uint64(c.max_memory_allocation_size),
		MinStorageBufferOffsetAlignment: uint64(c.min_storage_buffer_offset_alignment),
		MinImportedHostPointerAlignment: uint64(c.min_imported_host_pointer_alignment),
		SubgroupSize:                    uint32(c.subgroup_size),
		TimestampPeriod:                 float32(c.timestamp_period),
		TimestampValidBits:              uint32(c.timestamp_valid_bits),
		ComputeQueueFamily:              uint32(c.compute_queue_family),
		MaxComputeWorkGroupInvocations:  uint32(c.max_compute_work_group_invocations),
		MaxPushConstantsSize:            uint32(c.max_push_constants_size),
		MaxPushDescriptors:              uint32(c.max_push_descriptors),
	}
	for k := 0; k < 3; k++ {
		in.MaxComputeWorkGroupCount[k] = uint32(c.max_compute_work_group_count[k])
		in.MaxComputeWorkGroupSize[k] = uint32(c.max_compute_work_group_size[k])
	}
	for k := 0; k < int(c.heap_count); k++ {
		in.Heaps = append(in.Heaps, backend.Heap{Size: uint64(c.heaps[k].size), DeviceLocal: c.heaps[k].device_local != 0})
	}
	return in
}

// Devices lists the physical devices (after a successful Init).
func (i *Impl) Devices() ([]DeviceInfo, error) {
	r := C.cs_device_count(i.c)
	if r.status != C.GC_OK {
		return nil, i.fail("device_count", r)
	}
	n := int(r.u64)
	out := make([]DeviceInfo, 0, n)
	var c C.gc_device_info
	for k := 0; k < n; k++ {
		if r := C.cs_device_info(i.c, C.uint32_t(k), &c); r.status != C.GC_OK {
			return nil, i.fail("device_info", r)
		}
		out = append(out, deviceInfo(k, &c))
	}
	return out, nil
}

// MessageCount returns how many validation messages the debug messenger has
// recorded since Init (drained or not).
func (i *Impl) MessageCount() uint64 {
	r := C.cs_message_count(i.c)
	if r.status != C.GC_OK {
		C.free(unsafe.Pointer(r.msg))
		return 0
	}
	return uint64(r.u64)
}

// TakeMessages drains the validation messages recorded so far, oldest first.
func (i *Impl) TakeMessages() []string {
	var out []string
	for {
		r := C.cs_take_message(i.c)
		if r.status != C.GC_OK {
			C.free(unsafe.Pointer(r.msg))
			return out
		}
		if r.p0 == nil {
			return out
		}
		out = append(out, C.GoString((*C.char)(r.p0)))
		C.free(r.p0)
	}
}

// OpenOptions are the settings of Impl.Open.
type OpenOptions struct {
	// DisableFloat64 leaves shaderFloat64 off even where the device has it.
	DisableFloat64 bool
	// RingSize is the number of submission slots (command buffer + fence);
	// 0 means 16. More slots let more submissions be in flight at once.
	RingSize int
	// TimestampQueries is the number of timestamp query slots (CmdTimestamp);
	// 0 means none.
	TimestampQueries int
	// ShareDevice opens the device on a logical device shared by every
	// Open with ShareDevice of the same physical device (and DisableFloat64
	// setting) in the process: one logical device, one GPU context, instead
	// of one per Device. Each Device takes the compute family's next queue
	// (devices share a queue, serialized by a lock, where the family has
	// fewer queues than opens) and keeps its own command pools, ring,
	// fences, buffers and kernels; buffers still belong to one Device. The
	// shared logical device is destroyed when its last Device closes.
	// Implementations without the notion (Metal) ignore it.
	ShareDevice bool
	// ShareKey separates shared logical devices: only opens with
	// ShareDevice and the same key share one.
	ShareKey uint64
	// DrainLimit bounds every wait that no caller bounds (recording into a
	// busy ring slot, WaitIdle, Close, CopyNow, closing an imported buffer);
	// 0 means DefaultDrainLimit. Work that does not complete within it
	// declares the device lost: errors then wrap backend.ErrDeviceLost, and
	// what the GPU may still use is leaked, never freed (shim.h, "Drain
	// limit").
	DrainLimit time.Duration
}

// DefaultDrainLimit is the drain limit of a device opened with DrainLimit 0
// (GC_DEFAULT_DRAIN_NS).
const DefaultDrainLimit = 10 * time.Second

// Device is a logical device with its own compute queue (vkCreateDevice).
//
// The recording methods (CmdCopy, CmdDispatch, CmdTimestamp, Submit) are
// serialized by the Device; they are meant for one goroutine, the device's
// stream. Wait, WaitIdle, CopyNow and the buffer and kernel methods may be
// called from any goroutine.
type Device struct {
	impl *Impl
	h    C.gc_device
	// shareID identifies the shared logical device (its VkDevice) of an
	// open with ShareDevice; 0 otherwise. Devices with the same shareID use
	// each other's buffers.
	shareID uint64
	info    DeviceInfo
	float64 bool

	// state is held shared by every call and exclusively by Close, so Close
	// never frees what a call is using.
	state  sync.RWMutex
	closed bool

	rec  sync.Mutex     // serializes recording; guards disp
	disp *C.gc_dispatch // C memory, refilled per dispatch

	mu       sync.Mutex // guards the fields below
	buffers  map[*Buffer]struct{}
	kernels  map[*Kernel]struct{}
	counters *C.gc_counters // C memory
}

// Open opens physical device index as a new logical device with its own
// queue (vkCreateDevice, vkGetDeviceQueue, command pools, a ring of command
// buffers and fences, a timestamp query pool).
// With opts.ShareDevice it takes a queue of the process's shared logical
// device of that physical device instead of creating one.
func (i *Impl) Open(index int, opts OpenOptions) (*Device, error) {
	if index < 0 || opts.RingSize < 0 || opts.TimestampQueries < 0 || opts.DrainLimit < 0 {
		return nil, &Error{Op: i.name + ".open", Status: InvalidArgument, Msg: "open: negative argument"}
	}
	var c C.gc_device_info
	if r := C.cs_device_info(i.c, C.uint32_t(index), &c); r.status != C.GC_OK {
		return nil, i.fail("device_info", r)
	}
	f64 := C.int32_t(0)
	if opts.DisableFloat64 {
		f64 = 1
	}
	share := C.int32_t(0)
	if opts.ShareDevice {
		share = 1
	}
	r := C.cs_open(i.c, C.uint32_t(index), f64, C.uint32_t(opts.RingSize), C.uint32_t(opts.TimestampQueries), share,
		C.uint64_t(opts.DrainLimit), C.uint64_t(opts.ShareKey))
	if r.status != C.GC_OK {
		return nil, i.fail("open", r)
	}
	d := &Device{
		impl:     i,
		h:        C.gc_device(r.p0),
		info:     deviceInfo(index, &c),
		disp:     (*C.gc_dispatch)(C.calloc(1, C.sizeof_gc_dispatch)),
		counters: (*C.gc_counters)(C.calloc(1, C.sizeof_gc_counters)),
		buffers:  map[*Buffer]struct{}{},
		kernels:  map[*Kernel]struct{}{},
	}
	d.float64 = d.info.ShaderFloat64 && !opts.DisableFloat64
	if opts.ShareDevice {
		d.shareID = shareIdentity(d)
	}
	return d, nil
}

// Info describes the device's physical device.
func (d *Device) Info() DeviceInfo { return d.info }

// Float64 reports whether shaderFloat64 was enabled on the device.
func (d *Device) Float64() bool { return d.float64 }

// Counters are a device's running totals, counted by the C side.
type Counters struct {
	ObjectsCreated   uint64 // API objects created (device, pools, command buffers, fences, buffers, memory, pipelines...)
	ObjectsDestroyed uint64
	Submits          uint64 // queue submissions (Submit and CopyNow)
	Dispatches       uint64
	Copies           uint64
	BlockingWaits    uint64 // waits that blocked in the driver
	Replays          uint64 // submissions that resubmitted a recorded command buffer (Vulkan: a repeated one-dispatch submission)
}

// Counters reads the device's counters.
func (d *Device) Counters() Counters {
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return Counters{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := C.cs_counters(d.impl.c, d.h, d.counters); r.status != C.GC_OK {
		C.free(unsafe.Pointer(r.msg))
		return Counters{}
	}
	c := d.counters
	return Counters{
		ObjectsCreated:   uint64(c.objects_created),
		ObjectsDestroyed: uint64(c.objects_destroyed),
		Submits:          uint64(c.submits),
		Dispatches:       uint64(c.dispatches),
		Copies:           uint64(c.copies),
		BlockingWaits:    uint64(c.blocking_waits),
		Replays:          uint64(c.replays),
	}
}

// Close waits, within the drain limit, for the device's submissions to
// complete, and for those of devices sharing its memory that use its
// buffers, and destroys everything it owns, buffers and kernels not yet
// closed included, in reverse order of creation (vkWaitForFences,
// vkDestroy*, vkDestroyDevice). Work that does not complete within the drain
// limit declares its device lost: Close then frees nothing the GPU may still
// use and returns an error wrapping backend.ErrDeviceLost. It is idempotent.
func (d *Device) Close() error {
	// Drain first with the device shared, so other goroutines' calls (a
	// Wait with its own timeout) run meanwhile; the close proper then finds
	// the work done.
	d.state.RLock()
	if !d.closed {
		C.free(unsafe.Pointer(C.cs_wait_idle(d.impl.c, d.h).msg))
	}
	d.state.RUnlock()
	d.state.Lock()
	defer d.state.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.mu.Lock()
	for b := range d.buffers {
		b.closed.Store(true)
	}
	for k := range d.kernels {
		k.closed.Store(true)
	}
	d.buffers, d.kernels = nil, nil
	d.mu.Unlock()
	r := C.cs_close(d.impl.c, d.h)
	C.free(unsafe.Pointer(d.disp))
	C.free(unsafe.Pointer(d.counters))
	d.disp, d.counters, d.h = nil, nil, nil
	if r.status != C.GC_OK {
		return d.impl.fail("close", r)
	}
	return nil
}

func (d *Device) fail(op string, r C.cs_ret) error { return d.impl.fail(op, r) }

func invalid(op, format string, args ...any) error {
	return &Error{Op: op, Status: InvalidArgument, Msg: fmt.Sprintf(format, args...)}
}

// Buffer is device memory (vkCreateBuffer + vkAllocateMemory), or imported
// host memory.
type Buffer struct {
	d      *Device
	h      C.gc_buffer
	size   int64
	mem    backend.Memory
	mapped unsafe.Pointer
	// host is the address of imported host memory (ImportHost), held as a
	// number, not a pointer: an import does not keep the Go object the
	// memory may belong to reachable (the importer keeps it alive while the
	// device uses it).
	host   uintptr
	closed atomic.Bool
}

// NewBuffer allocates size bytes (0 allowed) of device-local or host-visible
// memory. Host-visible memory is coherent and persistently mapped (Bytes).
func (d *Device) NewBuffer(size int64, mem backend.Memory) (*Buffer, error) {
	if size < 0 {
		return nil, invalid(d.impl.name+".buffer_create", "buffer_create: negative size %d", size)
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return nil, errClosed
	}
	r := C.cs_buffer_create(d.impl.c, d.h, C.uint64_t(size), C.int32_t(mem))
	if r.status != C.GC_OK {
		return nil, d.fail("buffer_create", r)
	}
	return d.track(&Buffer{d: d, h: C.gc_buffer(r.p0), size: size, mem: mem, mapped: r.p1}), nil
}

// ImportHost wraps host memory as a buffer without copying
// (VK_EXT_external_memory_host). mem must start and end at multiples of
// DeviceInfo.MinImportedHostPointerAlignment and must outlive the buffer,
// at the same pages: memory from mmap, or Go heap memory pinned with a
// runtime.Pinner for the buffer's life (the device keeps the pointer, which
// cgo allows only for pinned Go memory). Without the extension the error
// wraps backend.ErrUnsupported.
func (d *Device) ImportHost(mem []byte) (*Buffer, error) {
	if len(mem) == 0 {
		return nil, invalid(d.impl.name+".buffer_import", "buffer_import: empty memory")
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return nil, errClosed
	}
	p := unsafe.Pointer(unsafe.SliceData(mem))
	r := C.cs_buffer_import(d.impl.c, d.h, p, C.uint64_t(len(mem)))
	if r.status != C.GC_OK {
		return nil, d.fail("buffer_import", r)
	}
	return d.track(&Buffer{d: d, h: C.gc_buffer(r.p0), size: int64(len(mem)), mem: backend.HostVisible, host: uintptr(p)}), nil
}

func (d *Device) track(b *Buffer) *Buffer {
	d.mu.Lock()
	d.buffers[b] = struct{}{}
	d.mu.Unlock()
	return b
}

// Size returns the buffer's size in bytes.
func (b *Buffer) Size() int64 { return b.size }

// Memory returns where the buffer lives.
func (b *Buffer) Memory() backend.Memory { return b.mem }

// Bytes returns the host mapping of a host-visible or imported buffer, nil
// for device-local memory. It is valid until Close.
func (b *Buffer) Bytes() []byte {
	if b.size == 0 {
		return nil
	}
	if b.host != 0 {
		// Built by hand from the address (see host).
		var s []byte
		h := (*struct {
			data     uintptr
			len, cap int
		})(unsafe.Pointer(&s))
		h.data, h.len, h.cap = b.host, int(b.size), int(b.size)
		return s
	}
	if b.mapped == nil {
		return nil
	}
	return unsafe.Slice((*byte)(b.mapped), b.size)
}

// Close frees the buffer once every submission that may use it has
// completed (vkDestroyBuffer, vkFreeMemory), those of every device that
// shares memory with its own and used it included: device memory later,
// without waiting; imported host memory before Close returns (a recording
// that uses the buffer is submitted first), so the caller may free the
// memory then. When that work does not complete within the drain limit its
// device is declared lost, the buffer is leaked (still importing the
// memory, which must then be leaked too) and the error wraps
// backend.ErrDeviceLost. It is idempotent.
func (b *Buffer) Close() error {
	d := b.d
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed || b.closed.Swap(true) {
		return nil
	}
	d.mu.Lock()
	delete(d.buffers, b)
	d.mu.Unlock()
	if r := C.cs_buffer_destroy(d.impl.c, b.h); r.status != C.GC_OK {
		return d.fail("buffer_destroy", r)
	}
	return nil
}

// SpecConstant is a 32-bit specialization constant (VkSpecializationMapEntry).
type SpecConstant struct {
	ID, Value uint32
}

// KernelDesc describes a compute pipeline.
type KernelDesc struct {
	SPIRV     []byte // SPIR-V module
	Entry     string // entry point; "" means "main"
	Spec      []SpecConstant
	PushBytes int // push-constant block size, a multiple of 4
	Bindings  int // storage buffers at bindings 0..Bindings-1 of set 0
}

// Kernel is a compute pipeline with its push-descriptor set layout and
// pipeline layout.
type Kernel struct {
	d         *Device
	h         C.gc_kernel
	pushBytes int
	bindings  int
	closed    atomic.Bool
}

// NewKernel creates a compute pipeline (vkCreateShaderModule,
// vkCreateDescriptorSetLayout with the push-descriptor flag,
// vkCreatePipelineLayout, vkCreateComputePipelines). Callers cache kernels:
// creating one is slow.
func (d *Device) NewKernel(desc KernelDesc) (*Kernel, error) {
	op := d.impl.name + ".kernel_create"
	if len(desc.SPIRV) == 0 || len(desc.SPIRV)%4 != 0 {
		return nil, invalid(op, "kernel_create: SPIR-V of %d bytes", len(desc.SPIRV))
	}
	if desc.PushBytes < 0 || desc.PushBytes > MaxPushBytes || desc.Bindings <= 0 || desc.Bindings > MaxBindings {
		return nil, invalid(op, "kernel_create: %d push-constant bytes, %d bindings", desc.PushBytes, desc.Bindings)
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return nil, errClosed
	}
	// SPIR-V must be word-aligned: copy it into C memory.
	code := C.CBytes(desc.SPIRV)
	defer C.free(code)
	var entry *C.char
	if desc.Entry != "" {
		entry = C.CString(desc.Entry)
		defer C.free(unsafe.Pointer(entry))
	}
	var ids, vals *C.uint32_t
	if n := len(desc.Spec); n > 0 {
		ids = (*C.uint32_t)(C.malloc(C.size_t(4 * n)))
		vals = (*C.uint32_t)(C.malloc(C.size_t(4 * n)))
		defer C.free(unsafe.Pointer(ids))
		defer C.free(unsafe.Pointer(vals))
		is, vs := unsafe.Slice(ids, n), unsafe.Slice(vals, n)
		for k, s := range desc.Spec {
			is[k], vs[k] = C.uint32_t(s.ID), C.uint32_t(s.Value)
		}
	}
	r := C.cs_kernel_create(d.impl.c, d.h, code, C.size_t(len(desc.SPIRV)), entry, C.uint32_t(len(desc.Spec)), ids, vals,
		C.uint32_t(desc.PushBytes), C.uint32_t(desc.Bindings))
	if r.status != C.GC_OK {
		return nil, d.fail("kernel_create", r)
	}
	k := &Kernel{d: d, h: C.gc_kernel(r.p0), pushBytes: desc.PushBytes, bindings: desc.Bindings}
	d.mu.Lock()
	d.kernels[k] = struct{}{}
	d.mu.Unlock()
	return k, nil
}

// Close destroys the pipeline once every submission that may use it has
// completed. It is idempotent.
func (k *Kernel) Close() error {
	d := k.d
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed || k.closed.Swap(true) {
		return nil
	}
	d.mu.Lock()
	delete(d.kernels, k)
	d.mu.Unlock()
	if r := C.cs_kernel_destroy(d.impl.c, k.h); r.status != C.GC_OK {
		return d.fail("kernel_destroy", r)
	}
	return nil
}

// Binding binds [Offset, Offset+Range) of a buffer to one kernel binding
// (a VkDescriptorBufferInfo). Offset should be a multiple of
// MinStorageBufferOffsetAlignment and Range at most MaxStorageBufferRange;
// only the buffer's bounds are checked here, the validation layer reports
// the rest.
type Binding struct {
	Buffer *Buffer
	Offset int64
	Range  int64
}

// SharesMemory reports whether o's buffers can be used in d's commands:
// o is d, or both are opens of one shared logical device.
func (d *Device) SharesMemory(o *Device) bool {
	return o == d || o != nil && d.shareID != 0 && o.shareID == d.shareID
}

func (d *Device) buffer(op string, b *Buffer) (C.gc_buffer, error) {
	if b == nil || !d.SharesMemory(b.d) {
		return nil, invalid(op, "%s: buffer is nil or belongs to another device", op)
	}
	if b.closed.Load() {
		return nil, errClosed
	}
	return b.h, nil
}

// CmdCopy records a copy of size bytes (vkCmdCopyBuffer) followed by a
// memory barrier. The ranges must not overlap.
func (d *Device) CmdCopy(dst *Buffer, dstOff int64, src *Buffer, srcOff int64, size int64) error {
	const op = "cmd_copy"
	if dstOff < 0 || srcOff < 0 || size < 0 {
		return invalid(op, "cmd_copy: negative offset or size")
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return errClosed
	}
	dh, err := d.buffer(op, dst)
	if err != nil {
		return err
	}
	sh, err := d.buffer(op, src)
	if err != nil {
		return err
	}
	d.rec.Lock()
	defer d.rec.Unlock()
	if r := C.cs_cmd_copy(d.impl.c, d.h, dh, C.uint64_t(dstOff), sh, C.uint64_t(srcOff), C.uint64_t(size)); r.status != C.GC_OK {
		return d.fail(op, r)
	}
	return nil
}

// CmdDispatch records a dispatch of k over groups work groups
// (vkCmdBindPipeline, vkCmdPushDescriptorSetKHR, vkCmdPushConstants,
// vkCmdDispatch) followed by a memory barrier. bindings and push must match
// the kernel's binding count and push-constant size. Neither is retained:
// callers may reuse them at once.
func (d *Device) CmdDispatch(k *Kernel, groups [3]uint32, bindings []Binding, push []byte) error {
	const op = "cmd_dispatch"
	if k == nil || k.d != d {
		return invalid(op, "cmd_dispatch: kernel is nil or belongs to another device")
	}
	if len(bindings) != k.bindings || len(push) != k.pushBytes {
		return invalid(op, "cmd_dispatch: %d bindings and %d push-constant bytes given, the kernel has %d and %d",
			len(bindings), len(push), k.bindings, k.pushBytes)
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed || k.closed.Load() {
		return errClosed
	}
	d.rec.Lock()
	defer d.rec.Unlock()
	x := d.disp
	x.kernel = k.h
	x.groups[0], x.groups[1], x.groups[2] = C.uint32_t(groups[0]), C.uint32_t(groups[1]), C.uint32_t(groups[2])
	x.binding_count = C.uint32_t(len(bindings))
	x.push_size = C.uint32_t(len(push))
	for i := range bindings {
		b := &bindings[i]
		h, err := d.buffer(op, b.Buffer)
		if err != nil {
			return err
		}
		if b.Offset < 0 || b.Range < 0 {
			return invalid(op, "cmd_dispatch: binding %d has a negative offset or range", i)
		}
		x.bindings[i] = C.gc_binding{buffer: h, offset: C.uint64_t(b.Offset), _range: C.uint64_t(b.Range)}
	}
	if len(push) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&x.push[0])), len(push)), push)
	}
	if r := C.cs_cmd_dispatch(d.impl.c, d.h, x); r.status != C.GC_OK {
		return d.fail(op, r)
	}
	return nil
}

// CmdTimestamp records a timestamp into query slot query after the work
// recorded before it (vkCmdResetQueryPool, vkCmdWriteTimestamp). The device
// must have been opened with OpenOptions.TimestampQueries > query.
func (d *Device) CmdTimestamp(query int) error {
	if query < 0 {
		return invalid("cmd_timestamp", "cmd_timestamp: negative query %d", query)
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return errClosed
	}
	d.rec.Lock()
	defer d.rec.Unlock()
	if r := C.cs_cmd_timestamp(d.impl.c, d.h, C.uint32_t(query)); r.status != C.GC_OK {
		return d.fail("cmd_timestamp", r)
	}
	return nil
}

// Submit submits what was recorded since the last Submit (vkQueueSubmit)
// without waiting, and returns its ticket. Tickets count up from 1; with
// nothing recorded Submit submits nothing and returns the last ticket.
func (d *Device) Submit() (uint64, error) {
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return 0, errClosed
	}
	d.rec.Lock()
	defer d.rec.Unlock()
	r := C.cs_submit(d.impl.c, d.h)
	if r.status != C.GC_OK {
		return 0, d.fail("submit", r)
	}
	return uint64(r.u64), nil
}

// Wait waits up to timeout for ticket (and every earlier one) to complete
// (vkGetFenceStatus when timeout is 0, else vkWaitForFences). It returns
// true when done, false when the timeout expired; a negative timeout waits
// forever. A ticket older than the ring is done. A lost device gives an
// error wrapping backend.ErrDeviceLost.
func (d *Device) Wait(ticket uint64, timeout time.Duration) (bool, error) {
	ns := C.uint64_t(math.MaxUint64)
	if timeout >= 0 {
		ns = C.uint64_t(timeout)
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return false, errClosed
	}
	r := C.cs_wait(d.impl.c, d.h, C.uint64_t(ticket), ns)
	switch r.status {
	case C.GC_OK:
		return true, nil
	case C.GC_NOT_READY, C.GC_TIMEOUT:
		if r.msg != nil {
			C.free(unsafe.Pointer(r.msg))
		}
		return false, nil
	}
	return false, d.fail("wait", r)
}

// WaitIdle waits until everything submitted has completed (vkWaitForFences
// on the last submission), within the drain limit: work that does not
// complete within it declares the device lost (an error wrapping
// backend.ErrDeviceLost). No lock is held while it blocks.
func (d *Device) WaitIdle() error {
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return errClosed
	}
	if r := C.cs_wait_idle(d.impl.c, d.h); r.status != C.GC_OK {
		return d.fail("wait_idle", r)
	}
	return nil
}

// CopyNow copies size bytes at once through the device's own transfer
// command buffer and waits for it (vkCmdCopyBuffer, vkQueueSubmit,
// vkWaitForFences). It runs after everything submitted before it and does
// not touch what the stream is recording.
func (d *Device) CopyNow(dst *Buffer, dstOff int64, src *Buffer, srcOff int64, size int64) error {
	const op = "copy_now"
	if dstOff < 0 || srcOff < 0 || size < 0 {
		return invalid(op, "copy_now: negative offset or size")
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return errClosed
	}
	dh, err := d.buffer(op, dst)
	if err != nil {
		return err
	}
	sh, err := d.buffer(op, src)
	if err != nil {
		return err
	}
	if r := C.cs_copy_now(d.impl.c, d.h, dh, C.uint64_t(dstOff), sh, C.uint64_t(srcOff), C.uint64_t(size)); r.status != C.GC_OK {
		return d.fail(op, r)
	}
	return nil
}

// ReadTimestamps reads len(out) timestamp query slots from first, in ticks
// (DeviceInfo.TimestampPeriod nanoseconds each) (vkGetQueryPoolResults). It
// returns false when one of them is not written yet. Read only slots written
// by submissions that completed.
func (d *Device) ReadTimestamps(first int, out []uint64) (bool, error) {
	if first < 0 {
		return false, invalid("read_timestamps", "read_timestamps: negative first %d", first)
	}
	if len(out) == 0 {
		return true, nil
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return false, errClosed
	}
	// C writes into Go memory only for the duration of the call.
	r := C.cs_read_timestamps(d.impl.c, d.h, C.uint32_t(first), C.uint32_t(len(out)), (*C.uint64_t)(unsafe.Pointer(&out[0])))
	switch r.status {
	case C.GC_OK:
		return true, nil
	case C.GC_NOT_READY:
		if r.msg != nil {
			C.free(unsafe.Pointer(r.msg))
		}
		return false, nil
	}
	return false, d.fail("read_timestamps", r)
}

// cStatuses returns the C values of the status codes, for the test that
// keeps errors.go in step with shim.h.
func cStatuses() map[Status]int32 {
	return map[Status]int32{
		OK: C.GC_OK, InvalidArgument: C.GC_INVALID_ARGUMENT, OutOfMemory: C.GC_OUT_OF_MEMORY,
		DeviceLost: C.GC_DEVICE_LOST, Unsupported: C.GC_UNSUPPORTED, Timeout: C.GC_TIMEOUT,
		Backend: C.GC_BACKEND, NotReady: C.GC_NOT_READY, Unavailable: C.GC_UNAVAILABLE,
	}
}

// cConstants returns Go constants and the C values they mirror (tests).
func cConstants() map[string][2]int64 {
	return map[string][2]int64{
		"MaxBindings":       {MaxBindings, C.GC_MAX_BINDINGS},
		"MaxPushBytes":      {MaxPushBytes, C.GC_MAX_PUSH_BYTES},
		"ABIVersion":        {ABIVersion, C.GC_ABI_VERSION},
		"DefaultDrainLimit": {int64(DefaultDrainLimit), C.GC_DEFAULT_DRAIN_NS},
		"DeviceOther":       {int64(DeviceOther), C.GC_DEVICE_OTHER},
		"DeviceIntegrated":  {int64(DeviceIntegrated), C.GC_DEVICE_INTEGRATED},
		"DeviceDiscrete":    {int64(DeviceDiscrete), C.GC_DEVICE_DISCRETE},
		"DeviceVirtual":     {int64(DeviceVirtual), C.GC_DEVICE_VIRTUAL},
		"DeviceCPU":         {int64(DeviceCPU), C.GC_DEVICE_CPU},
	}
}

// cMemoryKinds returns the C values of the memory kinds (tests).
func cMemoryKinds() map[backend.Memory]int32 {
	return map[backend.Memory]int32{backend.DeviceLocal: C.GC_MEMORY_DEVICE_LOCAL, backend.HostVisible: C.GC_MEMORY_HOST_VISIBLE}
}
