//go:build cgo && !novulkan

package vulkan

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/backend/backendtest"
)

var shareOpts = backend.OpenOptions{ShareDevice: true}

// vkDevice returns the VkDevice behind d.
func vkDevice(t testing.TB, d backend.Device) uint64 {
	t.Helper()
	h, err := d.(*device).Shim().VulkanHandles()
	if err != nil {
		t.Fatal(err)
	}
	return h.Device
}

// TestShareDevice opens 4 ranks on one shared logical device (lavapipe has
// one compute queue, so they share it too) and runs Reduce, Copy, Submit
// and Wait from 4 goroutines at once, then closes them in another order
// than they opened and reopens.
func TestShareDevice(t *testing.T) {
	requireVulkan(t)
	t.Cleanup(func() { checkValidation(t) })
	const ranks, n, rounds = 4, 65537, 6
	devs := make([]backend.Device, ranks)
	for i := range devs {
		d, err := Backend{}.Open(0, shareOpts)
		if err != nil {
			t.Fatal(err)
		}
		devs[i] = d
		defer d.Close()
	}
	for i := 1; i < ranks; i++ {
		if vkDevice(t, devs[i]) != vkDevice(t, devs[0]) {
			t.Fatalf("rank %d has its own VkDevice", i)
		}
	}
	// A rank's own objects: what an unshared device creates, less the device.
	own := openDevice(t, backend.OpenOptions{})
	ownObjects := own.Counters().ObjectsCreated.Load()
	for i, d := range devs {
		if got := d.Counters().ObjectsCreated.Load(); got != ownObjects-1 {
			t.Errorf("rank %d: %d objects created at open, want %d (unshared: %d)", i, got, ownObjects-1, ownObjects)
		}
	}

	var wg sync.WaitGroup
	errs := make([]error, ranks)
	for r, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = sharedRankWork(d, r, n, rounds)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	checkValidation(t)

	// Close out of order; the survivors keep working.
	for _, i := range []int{2, 0} {
		if err := devs[i].Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := sharedRankWork(devs[3], 3, 1000, 2); err != nil {
		t.Fatal(err)
	}
	again, err := Backend{}.Open(0, shareOpts)
	if err != nil {
		t.Fatal(err)
	}
	if vkDevice(t, again) != vkDevice(t, devs[1]) {
		t.Error("an open while the shared device lives got another VkDevice")
	}
	if err := sharedRankWork(again, 5, 1000, 2); err != nil {
		t.Fatal(err)
	}
	for _, d := range []backend.Device{devs[3], again, devs[1]} {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Every rank closed: a new open creates a new shared device.
	fresh := openDevice(t, shareOpts)
	if err := sharedRankWork(fresh, 7, 1000, 2); err != nil {
		t.Fatal(err)
	}
}

// sharedRankWork reduces, copies and reads back on d, checking the results.
func sharedRankWork(dev backend.Device, rank, n, rounds int) error {
	rng := rand.New(rand.NewPCG(uint64(rank), 17))
	const k = 3
	srcs := sources(k, n, func(i, j int) float32 { return float32(rng.IntN(100)) })
	regs := make([]backend.Region, k)
	var bufs []backend.Buffer
	defer func() {
		for _, b := range bufs {
			b.Close()
		}
	}()
	for i := range regs {
		b, err := dev.Alloc(n*4, backend.DeviceLocal)
		if err != nil {
			return err
		}
		bufs = append(bufs, b)
		if err := b.Write(0, asBytes(srcs[i])); err != nil {
			return err
		}
		regs[i] = backend.Region{Buf: b, Len: n * 4}
	}
	mid, err := dev.Alloc(n*4, backend.DeviceLocal)
	if err != nil {
		return err
	}
	out, err := dev.Alloc(n*4, backend.HostVisible)
	if err != nil {
		return err
	}
	bufs = append(bufs, mid, out)
	s := dev.Stream()
	for r := 0; r < rounds; r++ {
		op := ops[(rank+r)%len(ops)]
		if err := s.Reduce(op, backend.F32, backend.Region{Buf: mid, Len: n * 4}, regs, 1); err != nil {
			return err
		}
		if err := s.Copy(backend.Region{Buf: out, Len: n * 4}, backend.Region{Buf: mid, Len: n * 4}); err != nil {
			return err
		}
		f, err := s.Submit()
		if err != nil {
			return err
		}
		if err := f.Wait(context.Background()); err != nil {
			return err
		}
		want := reduceRef(op, srcs, 1)
		got := make([]float32, n)
		if err := out.Read(0, asBytes(got)); err != nil {
			return err
		}
		for i := range want {
			if !sameBits(got[i], want[i]) {
				return fmt.Errorf("round %d %v: element %d = %v, want %v", r, op, i, got[i], want[i])
			}
		}
		// A staged read of device-local memory goes through copy_now.
		if err := mid.Read(0, asBytes(got)); err != nil {
			return err
		}
		if !sameBits(got[n-1], want[n-1]) {
			return fmt.Errorf("round %d: staged read %v, want %v", r, got[n-1], want[n-1])
		}
	}
	return nil
}

// TestShareDeviceConformance runs the conformance suite on devices that
// share one logical device with another open rank (without its largest
// cases, which TestConformance runs, unless full).
func TestShareDeviceConformance(t *testing.T) {
	arithmetic(t)
	requireVulkan(t)
	other := openDevice(t, shareOpts)
	o := suiteOptions()
	o.Short = o.Short || !fullRun()
	o.SkipTypes = !fullRun() // TestConformance runs them on the device alone
	backendtest.RunOptions(t, func(t *testing.T, opts backend.OpenOptions) backend.Device {
		opts.ShareDevice = true
		d := openDevice(t, opts)
		if !opts.DisableFloat64 && vkDevice(t, d) != vkDevice(t, other) {
			t.Error("conformance device does not share the VkDevice")
		}
		return d
	}, o)
}
