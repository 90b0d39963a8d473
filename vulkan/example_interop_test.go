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
// VkDevice to reduce in place. The ranks of a group on one GPU share one
// VkDevice and may share a queue, so the framework submits to the rank's
// queue inside vulkan.WithQueue. (Not run: it needs a Vulkan device.)
func Example_interop() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 2, Backend: "vulkan", Config: collective.DefaultConfig()})
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
	// The framework's own submission to the rank's queue, under its lock.
	_ = vulkan.WithQueue(c.Device(), func(q vulkan.Handles) error {
		// vkQueueSubmit(q.Queue, ...) with the framework's command buffer.
		return nil
	})

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
	// Every rank calls the collective (rank 1 with its own tensor; both on
	// one VkDevice, reduced in device memory).
	err = g.Run(ctx, func(ctx context.Context, c *collective.Comm) error {
		t := grads
		if c.Rank() == 1 {
			t, _ = collective.NewTensor[float32](c, 1<<20)
			defer t.Close()
		}
		return collective.AllReduceTensor(ctx, c, t, collective.Mean, collective.Auto)
	})
	if err != nil {
		fmt.Println(err)
	}
}
