//go:build cgo && !novulkan

package vulkan

import (
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/internal/shimdev"
)

// Handles are the Vulkan objects behind one rank's device, as integers
// (dispatchable handles are pointers): a framework computes on gocoll's
// buffers with them (its own pipelines on Device, submitted to its own
// queue of QueueFamily, or to Queue when it synchronises with gocoll).
type Handles = cshim.VulkanHandles

// vulkanDevice returns dev as a device of this backend.
func vulkanDevice(dev backend.Device, op string) (*shimdev.Device, error) {
	d, ok := dev.(*shimdev.Device)
	if !ok || d.API().Name != "vulkan" {
		return nil, fmt.Errorf("vulkan: %T is not a Vulkan device: %w", dev, backend.ErrInvalidArgument)
	}
	return d, d.CheckOpen(op)
}

// DeviceHandles returns the Vulkan handles of a device the vulkan backend
// opened (for a collective.Comm: DeviceHandles(comm.Device())).
func DeviceHandles(dev backend.Device) (Handles, error) {
	d, err := vulkanDevice(dev, "handles")
	if err != nil {
		return Handles{}, err
	}
	return d.Shim().VulkanHandles()
}

// WithQueue runs f with dev's Vulkan handles while holding the lock of its
// VkQueue. Ranks of a group share one logical device by default and may
// share a queue (when the family has fewer queues than ranks), so a
// framework that submits to Handles.Queue does it inside f; f must not call
// gocoll on the same device.
func WithQueue(dev backend.Device, f func(h Handles) error) error {
	d, err := vulkanDevice(dev, "with queue")
	if err != nil {
		return err
	}
	return d.Shim().WithQueue(f)
}

// BufferHandle returns the VkBuffer behind a buffer of the vulkan backend
// (for a collective.Tensor: its Buffer(), at the tensor's byte offset) and
// its VkDeviceMemory (0 for a wrapped buffer).
func BufferHandle(buf backend.Buffer) (vkBuffer, vkMemory uint64, err error) {
	b, ok := buf.(*shimdev.Buffer)
	if !ok || b.Device().API().Name != "vulkan" {
		return 0, 0, fmt.Errorf("vulkan: %T is not a Vulkan buffer: %w", buf, backend.ErrInvalidArgument)
	}
	cb, err := b.Shim()
	if err != nil {
		return 0, 0, err
	}
	return cb.VulkanHandles()
}

// WrapBuffer adopts a VkBuffer that a framework created on dev's VkDevice
// (DeviceHandles(dev).Device), bound to its memory, with STORAGE_BUFFER and
// TRANSFER_SRC/TRANSFER_DST usage, as a device-local backend.Buffer of size
// bytes: collective.WrapTensor then runs collectives on it in place. gocoll
// never destroys the VkBuffer; it must outlive the returned buffer.
func WrapBuffer(dev backend.Device, vkBuffer uint64, size int) (backend.Buffer, error) {
	d, err := vulkanDevice(dev, "wrap buffer")
	if err != nil {
		return nil, err
	}
	cb, err := d.Shim().WrapVulkanBuffer(vkBuffer, int64(size))
	if err != nil {
		return nil, fmt.Errorf("vulkan: wrap buffer: %w", err)
	}
	return d.Adopt(cb, size, backend.DeviceLocal), nil
}
