//go:build cgo && !novulkan

package vulkan

import (
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
)

// Handles are the Vulkan objects behind one rank's device, as integers
// (dispatchable handles are pointers): a framework computes on gocoll's
// buffers with them (its own pipelines on Device, submitted to its own
// queue of QueueFamily, or to Queue when it synchronises with gocoll).
type Handles = cshim.VulkanHandles

// DeviceHandles returns the Vulkan handles of a device the vulkan backend
// opened (for a collective.Comm: DeviceHandles(comm.Device())).
func DeviceHandles(dev backend.Device) (Handles, error) {
	d, ok := dev.(*device)
	if !ok {
		return Handles{}, fmt.Errorf("vulkan: %T is not a Vulkan device: %w", dev, backend.ErrInvalidArgument)
	}
	if d.closed.Load() {
		return Handles{}, d.errClosed("handles")
	}
	return d.dev.VulkanHandles()
}

// BufferHandle returns the VkBuffer behind a buffer of the vulkan backend
// (for a collective.Tensor: its Buffer(), at the tensor's byte offset) and
// its VkDeviceMemory (0 for a wrapped buffer).
func BufferHandle(buf backend.Buffer) (vkBuffer, vkMemory uint64, err error) {
	b, ok := buf.(*buffer)
	if !ok {
		return 0, 0, fmt.Errorf("vulkan: %T is not a Vulkan buffer: %w", buf, backend.ErrInvalidArgument)
	}
	if b.closed.Load() {
		return 0, 0, fmt.Errorf("vulkan: buffer handle: %w", backend.ErrClosed)
	}
	return b.b.VulkanHandles()
}

// WrapBuffer adopts a VkBuffer that a framework created on dev's VkDevice
// (DeviceHandles(dev).Device), bound to its memory, with STORAGE_BUFFER and
// TRANSFER_SRC/TRANSFER_DST usage, as a device-local backend.Buffer of size
// bytes: collective.WrapTensor then runs collectives on it in place. gocoll
// never destroys the VkBuffer; it must outlive the returned buffer.
func WrapBuffer(dev backend.Device, vkBuffer uint64, size int) (backend.Buffer, error) {
	d, ok := dev.(*device)
	if !ok {
		return nil, fmt.Errorf("vulkan: %T is not a Vulkan device: %w", dev, backend.ErrInvalidArgument)
	}
	if d.closed.Load() {
		return nil, d.errClosed("wrap buffer")
	}
	cb, err := d.dev.WrapVulkanBuffer(vkBuffer, int64(size))
	if err != nil {
		return nil, fmt.Errorf("vulkan: wrap buffer: %w", err)
	}
	b := &buffer{d: d, b: cb, n: size, mem: backend.DeviceLocal}
	d.mu.Lock()
	d.buffers[b] = struct{}{}
	d.mu.Unlock()
	return b, nil
}
