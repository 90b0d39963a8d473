//go:build cgo && !novulkan

package cshim

/*
#include <stdlib.h>
#include "shim.h"

typedef struct cs_wrap_ret {
	int32_t status;
	int32_t native;
	char *msg;
	gc_buffer buf;
} cs_wrap_ret;

static cs_wrap_ret cs_vk_test_stall(gc_device d) {
	gc_error e = {0, NULL};
	cs_wrap_ret r = {0};
	r.status = gc_vk_test_stall(d, &e);
	r.native = e.native;
	r.msg = e.msg;
	return r;
}

// cs_vk_test_release returns a value: cgo's wrapper of a void function
// without arguments leaves its parameter unused (-Wunused-parameter).
static int cs_vk_test_release(void) {
	gc_vk_test_release();
	return 0;
}

static cs_wrap_ret cs_vk_wrap_buffer(gc_device d, uint64_t vkbuffer, uint64_t size) {
	gc_error e = {0, NULL};
	cs_wrap_ret r = {0};
	r.status = gc_vk_wrap_buffer(d, vkbuffer, size, &r.buf, &e);
	r.native = e.native;
	r.msg = e.msg;
	return r;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// VulkanHandles are the Vulkan objects behind a device opened through the
// Vulkan implementation, as integers (dispatchable handles are pointers).
type VulkanHandles struct {
	Instance, PhysicalDevice, Device, Queue uint64
	QueueFamily                             uint32
	APIVersion                              uint32
	// GetInstanceProcAddr is the PFN_vkGetInstanceProcAddr of the library
	// gocoll loaded: a framework resolves its functions through it so both
	// use one loader.
	GetInstanceProcAddr uint64
}

func (d *Device) isVulkan() bool { return d.impl == Vulkan() }

// WithQueue runs f with the device's handles while holding the lock that
// externally synchronizes its VkQueue (gc_vk_queue_lock): ranks that share
// a logical device may share a queue, so a framework calls vkQueueSubmit on
// Queue only inside f. f must not call back into gocoll on this device.
func (d *Device) WithQueue(f func(VulkanHandles) error) error {
	h, err := d.VulkanHandles()
	if err != nil {
		return err
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return errClosed
	}
	C.gc_vk_queue_lock(d.h)
	defer C.gc_vk_queue_unlock(d.h)
	return f(h)
}

// shareIdentity is the VkDevice of a Vulkan device (0 for others).
func shareIdentity(d *Device) uint64 {
	if !d.isVulkan() {
		return 0
	}
	h, err := d.VulkanHandles()
	if err != nil {
		return 0
	}
	return h.Device
}

// VulkanHandles returns the device's Vulkan handles (gc_vk_device_handles).
func (d *Device) VulkanHandles() (VulkanHandles, error) {
	if !d.isVulkan() {
		return VulkanHandles{}, fmt.Errorf("cshim: %s device has no Vulkan handles: %w", d.impl.name, backend.ErrUnsupported)
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return VulkanHandles{}, errClosed
	}
	var h C.gc_vk_handles
	if st := C.gc_vk_device_handles(d.h, &h); st != C.GC_OK {
		return VulkanHandles{}, fmt.Errorf("cshim: gc_vk_device_handles: status %d: %w", int(st), backend.ErrInvalidArgument)
	}
	return VulkanHandles{Instance: uint64(h.instance), PhysicalDevice: uint64(h.physical_device), Device: uint64(h.device),
		Queue: uint64(h.queue), QueueFamily: uint32(h.queue_family), APIVersion: uint32(h.api_version),
		GetInstanceProcAddr: uint64(h.get_instance_proc_addr)}, nil
}

// VulkanHandles returns the buffer's VkBuffer and VkDeviceMemory (0 for a
// wrapped buffer) (gc_vk_buffer_handles).
func (b *Buffer) VulkanHandles() (buffer, memory uint64, err error) {
	if !b.d.isVulkan() {
		return 0, 0, fmt.Errorf("cshim: %s buffer has no Vulkan handles: %w", b.d.impl.name, backend.ErrUnsupported)
	}
	if b.closed.Load() {
		return 0, 0, errClosed
	}
	var vb, vm C.uint64_t
	if st := C.gc_vk_buffer_handles(b.h, &vb, &vm); st != C.GC_OK {
		return 0, 0, fmt.Errorf("cshim: gc_vk_buffer_handles: status %d: %w", int(st), backend.ErrInvalidArgument)
	}
	return uint64(vb), uint64(vm), nil
}

// failWrap turns a failed Vulkan-only call's result into an *Error.
func (d *Device) failWrap(op string, status, native C.int32_t, msg *C.char) error {
	e := &Error{Op: d.impl.name + "." + op, Status: Status(status), Native: int32(native)}
	if msg != nil {
		e.Msg = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	}
	return e
}

// WrapVulkanBuffer adopts a VkBuffer that the caller created on this
// device's VkDevice (bound to device memory, with storage and transfer
// usage) as a device-local Buffer (gc_vk_wrap_buffer). Closing the Buffer
// does not destroy the VkBuffer, which must outlive it.
func (d *Device) WrapVulkanBuffer(vkBuffer uint64, size int64) (*Buffer, error) {
	if !d.isVulkan() {
		return nil, fmt.Errorf("cshim: %s device cannot wrap Vulkan buffers: %w", d.impl.name, backend.ErrUnsupported)
	}
	if size <= 0 || vkBuffer == 0 {
		return nil, invalid("vulkan.wrap_buffer", "wrap_buffer: buffer %#x of %d bytes", vkBuffer, size)
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return nil, errClosed
	}
	r := C.cs_vk_wrap_buffer(d.h, C.uint64_t(vkBuffer), C.uint64_t(size))
	if r.status != C.GC_OK {
		return nil, d.failWrap("wrap_buffer", r.status, r.native, r.msg)
	}
	return d.track(&Buffer{d: d, h: r.buf, size: size, mem: backend.DeviceLocal}), nil
}

// TestStall is a test hook (gc_vk_test_stall): the device's next submission
// does not complete, as on a GPU that hangs, until TestReleaseStalls. Without
// timeline semaphores the error wraps backend.ErrUnsupported.
func (d *Device) TestStall() error {
	if !d.isVulkan() {
		return fmt.Errorf("cshim: %s device has no stall hook: %w", d.impl.name, backend.ErrUnsupported)
	}
	d.state.RLock()
	defer d.state.RUnlock()
	if d.closed {
		return errClosed
	}
	if r := C.cs_vk_test_stall(d.h); r.status != C.GC_OK {
		return d.failWrap("test_stall", r.status, r.native, r.msg)
	}
	return nil
}

// TestReleaseStalls is a test hook (gc_vk_test_release): every submission
// TestStall stalled, on any device of the process, open, closed or declared
// lost, may complete now.
func TestReleaseStalls() { C.cs_vk_test_release() }
