//go:build cgo && !novulkan

package vulkan_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/vulkan"
)

// TestInterop: a tensor's Vulkan handles are exposed, and a VkBuffer created
// on the rank's VkDevice by someone else is adopted and reduced in place.
// Here the "framework" buffer is a second gocoll allocation, reached only
// through its VkBuffer handle: kernels see through the wrapper what was
// written through the original.
func TestInterop(t *testing.T) {
	if err := (vulkan.Backend{}).Available(); err != nil {
		t.Skip(err)
	}
	g, err := collective.NewGroup(context.Background(), collective.Options{Ranks: 2, Backend: "vulkan", Config: collective.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	h, err := vulkan.DeviceHandles(g.Comm(0).Device())
	if err != nil {
		t.Fatal(err)
	}
	if h.Instance == 0 || h.PhysicalDevice == 0 || h.Device == 0 || h.Queue == 0 || h.GetInstanceProcAddr == 0 {
		t.Fatalf("handles %+v", h)
	}
	h1, _ := vulkan.DeviceHandles(g.Comm(1).Device())
	if h1.Device != h.Device || h1.Instance != h.Instance {
		t.Errorf("rank 1's handles %+v vs rank 0's %+v: want one instance, one shared logical device", h1, h)
	}
	// A framework submits to the rank's queue under its lock.
	sentinel := errors.New("from f")
	if err := vulkan.WithQueue(g.Comm(1).Device(), func(q vulkan.Handles) error {
		if q.Queue != h1.Queue {
			t.Errorf("WithQueue handles %+v, want %+v", q, h1)
		}
		return sentinel
	}); err != sentinel {
		t.Errorf("WithQueue returned %v, want f's error", err)
	}
	const n = 1000
	var wg sync.WaitGroup
	errs := make([]error, 2)
	results := make([][]float32, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = func() error {
				c := g.Comm(r)
				fw, err := c.Device().Alloc(4*n, backend.DeviceLocal) // the framework's buffer
				if err != nil {
					return err
				}
				defer fw.Close()
				vkbuf, _, err := vulkan.BufferHandle(fw)
				if err != nil {
					return err
				}
				adopted, err := vulkan.WrapBuffer(c.Device(), vkbuf, 4*n)
				if err != nil {
					return err
				}
				defer adopted.Close()
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(r*n + i)
				}
				src, _ := collective.WrapTensor[float32](c, fw, 0, n)
				if err := src.Upload(x); err != nil {
					return err
				}
				t, err := collective.WrapTensor[float32](c, adopted, 0, n)
				if err != nil {
					return err
				}
				if err := collective.AllReduceTensor(context.Background(), c, t, collective.Sum, collective.Ring); err != nil {
					return err
				}
				results[r] = make([]float32, n)
				return src.Download(results[r])
			}()
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for i := 0; i < n; i++ {
		if want := float32(n + 2*i); results[0][i] != want || results[1][i] != want {
			t.Fatalf("element %d: %v / %v, want %v", i, results[0][i], results[1][i], want)
		}
	}
}
