//go:build cgo && !novulkan

package vulkan_test

import (
	"context"
	"fmt"

	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/vulkan"
)

// A framework that computes with Vulkan shares buffers with gocoll both
// ways: it reads the handles of gocoll's device and tensors to record its
// own work on them, and it hands gocoll a VkBuffer it created on the rank's
// VkDevice to reduce in place. (Not run: it needs a Vulkan device.)
func Example_interop() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 1, Backend: "vulkan", Config: collective.DefaultConfig()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	c := g.Comm(0)

	// gocoll -> framework: the rank's VkDevice and a tensor's VkBuffer.
	h, _ := vulkan.DeviceHandles(c.Device())
	t, _ := collective.NewTensor[float32](c, 1<<20)
	defer t.Close()
	buf, off := t.Buffer()
	vkBuffer, _, _ := vulkan.BufferHandle(buf)
	fmt.Printf("record on VkDevice %#x, queue family %d: VkBuffer %#x at byte %d\n", h.Device, h.QueueFamily, vkBuffer, off)

	// framework -> gocoll: a VkBuffer the framework created on h.Device
	// (frameworkBuffer stands for its handle), reduced in place.
	var frameworkBuffer uint64 = vkBuffer
	adopted, err := vulkan.WrapBuffer(c.Device(), frameworkBuffer, 4<<20)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer adopted.Close()
	grads, _ := collective.WrapTensor[float32](c, adopted, 0, 1<<20)
	if err := collective.AllReduceTensor(ctx, c, grads, collective.Mean, collective.Auto); err != nil {
		fmt.Println(err)
	}
}
