//go:build cgo && !novulkan

package cshim

import (
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// TestShareDevice opens several devices on one shared logical device and
// checks that they share the VkDevice, count only their own objects, run
// concurrently (on lavapipe they also share the one queue), and close in
// any order, the last one destroying the shared device.
func TestShareDevice(t *testing.T) {
	own := open(t, OpenOptions{})
	ownObjects := own.Counters().ObjectsCreated
	ownH, err := own.VulkanHandles()
	if err != nil {
		t.Fatal(err)
	}
	const ranks = 4
	devs := make([]*Device, ranks)
	handles := make([]VulkanHandles, ranks)
	for i := range devs {
		d, err := Vulkan().Open(0, OpenOptions{ShareDevice: true})
		if err != nil {
			t.Fatal(err)
		}
		devs[i] = d
		if handles[i], err = d.VulkanHandles(); err != nil {
			t.Fatal(err)
		}
		// The VkDevice is not the rank's object.
		if c := d.Counters(); c.ObjectsCreated != ownObjects-1 || c.ObjectsDestroyed != 0 {
			t.Errorf("shared device %d: counters %+v, want %d objects created (own device: %d)", i, c, ownObjects-1, ownObjects)
		}
	}
	closed := make([]bool, ranks)
	defer func() {
		for i, d := range devs {
			if !closed[i] {
				d.Close()
			}
		}
	}()
	for i := 1; i < ranks; i++ {
		if handles[i].Device != handles[0].Device {
			t.Errorf("device %d: VkDevice %#x, device 0: %#x", i, handles[i].Device, handles[0].Device)
		}
	}
	if ownH.Device == handles[0].Device {
		t.Error("an unshared open got the shared VkDevice")
	}
	t.Logf("%d ranks on one VkDevice, queues %#x", ranks, []uint64{handles[0].Queue, handles[1].Queue, handles[2].Queue, handles[3].Queue})

	// Concurrent recording, submits, waits, CopyNow and WaitIdle.
	const n = 4096
	var wg sync.WaitGroup
	for r, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := scaleKernel(t, d, true)
			src := newBuffer(t, d, 4*n, backend.HostVisible)
			mid := newBuffer(t, d, 4*n, backend.DeviceLocal)
			dst := newBuffer(t, d, 4*n, backend.HostVisible)
			back := newBuffer(t, d, 4*n, backend.HostVisible)
			var push [MaxPushBytes]byte
			for it := 0; it < 20; it++ {
				in := make([]float32, n)
				for i := range in {
					in[i] = float32(r*1000 + it + i%7)
				}
				putFloats(src.Bytes(), in)
				if err := d.CopyNow(mid, 0, src, 0, 4*n); err != nil {
					t.Error(err)
					return
				}
				if err := d.CmdDispatch(k, [3]uint32{n / 64, 1, 1},
					[]Binding{{Buffer: dst, Range: 4 * n}, {Buffer: mid, Range: 4 * n}}, scalePush(push[:], n, 0, 0, float32(r+2))); err != nil {
					t.Error(err)
					return
				}
				if err := d.CmdCopy(back, 0, dst, 0, 4*n); err != nil {
					t.Error(err)
					return
				}
				tk, err := d.Submit()
				if err != nil {
					t.Error(err)
					return
				}
				if it%2 == 0 {
					if ok, err := d.Wait(tk, 10*time.Second); !ok || err != nil {
						t.Errorf("rank %d: Wait = %v, %v", r, ok, err)
						return
					}
				} else if err := d.WaitIdle(); err != nil {
					t.Error(err)
					return
				}
				got := floats(back.Bytes())
				for i := range in {
					if got[i] != float32(r+2)*in[i] {
						t.Errorf("rank %d iteration %d: element %d = %v, want %v", r, it, i, got[i], float32(r+2)*in[i])
						return
					}
				}
			}
			for _, b := range []*Buffer{src, mid, dst, back} {
				if err := b.Close(); err != nil {
					t.Error(err)
				}
			}
			if err := k.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i, d := range devs {
		if c := d.Counters(); c.ObjectsCreated != c.ObjectsDestroyed+ownObjects-1 {
			t.Errorf("device %d: %d objects created, %d destroyed; want %d alive", i, c.ObjectsCreated, c.ObjectsDestroyed, ownObjects-1)
		}
	}

	// Close in another order, with work in flight on the last.
	for _, i := range []int{2, 0} {
		if err := devs[i].Close(); err != nil {
			t.Fatal(err)
		}
		closed[i] = true
	}
	a := newBuffer(t, devs[3], 1<<20, backend.DeviceLocal)
	b := newBuffer(t, devs[3], 1<<20, backend.DeviceLocal)
	for range 4 {
		if err := devs[3].CmdCopy(b, 0, a, 0, 1<<20); err != nil {
			t.Fatal(err)
		}
		if _, err := devs[3].Submit(); err != nil {
			t.Fatal(err)
		}
	}
	// A new open joins the live shared device.
	again, err := Vulkan().Open(0, OpenOptions{ShareDevice: true})
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := again.VulkanHandles(); h.Device != handles[0].Device {
		t.Errorf("reopen: VkDevice %#x, want the live shared %#x", h.Device, handles[0].Device)
	}
	for _, d := range []*Device{devs[3], again, devs[1]} {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	closed[1], closed[3] = true, true
	// All closed: the next shared open creates a new device, and works.
	fresh := open(t, OpenOptions{ShareDevice: true})
	k := scaleKernel(t, fresh, false)
	src := newBuffer(t, fresh, 256, backend.HostVisible)
	dst := newBuffer(t, fresh, 256, backend.HostVisible)
	putFloats(src.Bytes(), []float32{1, 2, 3})
	var push [MaxPushBytes]byte
	if err := fresh.CmdDispatch(k, [3]uint32{1, 1, 1}, []Binding{{Buffer: dst, Range: 256}, {Buffer: src, Range: 256}},
		scalePush(push[:], 64, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := fresh.WaitIdle(); err != nil { // nothing submitted yet
		t.Fatal(err)
	}
	tk, err := fresh.Submit()
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := fresh.Wait(tk, -1); !ok || err != nil {
		t.Fatalf("Wait = %v, %v", ok, err)
	}
	if got := floats(dst.Bytes())[:3]; got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Errorf("copy kernel: %v", got)
	}
}

// TestShareDeviceFloat64 checks that DisableFloat64 opens get their own
// shared device, with the feature as asked.
func TestShareDeviceFloat64(t *testing.T) {
	a := open(t, OpenOptions{ShareDevice: true})
	b := open(t, OpenOptions{ShareDevice: true, DisableFloat64: true})
	ha, _ := a.VulkanHandles()
	hb, _ := b.VulkanHandles()
	if a.Info().ShaderFloat64 && ha.Device == hb.Device {
		t.Error("float64 and no-float64 opens share a VkDevice")
	}
	if b.Float64() {
		t.Error("DisableFloat64 open reports Float64")
	}
}
