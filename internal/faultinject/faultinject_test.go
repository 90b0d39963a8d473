package faultinject_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/host"
	"github.com/gocoll/gocoll/internal/faultinject"
)

// open arms p and opens one wrapped host device.
func open(t *testing.T, p faultinject.Plan) (backend.Device, *faultinject.Injection) {
	t.Helper()
	fi := faultinject.New("faultinject-test", host.Backend{})
	in := fi.Arm(p)
	d, err := fi.Open(0, backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, in
}

// copyOnce records one copy between two fresh buffers and submits it.
func copyOnce(d backend.Device) (backend.Fence, error) {
	a, err := d.Alloc(64, backend.HostVisible)
	if err != nil {
		return nil, err
	}
	b, err := d.Alloc(64, backend.DeviceLocal)
	if err != nil {
		return nil, err
	}
	if err := d.Stream().Copy(backend.Region{Buf: b, Len: 64}, backend.Region{Buf: a, Len: 64}); err != nil {
		return nil, err
	}
	return d.Stream().Submit()
}

func TestFailures(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		plan faultinject.Plan
		want error
	}{
		{faultinject.Plan{Kind: faultinject.FailAlloc, K: 2}, backend.ErrOutOfMemory},
		{faultinject.Plan{Kind: faultinject.FailRecord, K: 1}, backend.ErrOutOfMemory},
		{faultinject.Plan{Kind: faultinject.FailSubmit, K: 1}, backend.ErrOutOfMemory},
		{faultinject.Plan{Kind: faultinject.FailWait, K: 1}, backend.ErrOutOfMemory},
		{faultinject.Plan{Kind: faultinject.DeviceLost, K: 3}, backend.ErrDeviceLost},
	} {
		t.Run(c.plan.String(), func(t *testing.T) {
			d, in := open(t, c.plan)
			f, err := copyOnce(d)
			if err == nil {
				err = f.Wait(ctx)
			}
			if !errors.Is(err, c.want) || !errors.Is(err, faultinject.ErrInjected) {
				t.Fatalf("got %v, want an injected %v", err, c.want)
			}
			if in.Fired() == "" {
				t.Error("Fired is empty")
			}
			if c.plan.Kind == faultinject.DeviceLost {
				if _, err := d.Alloc(8, backend.HostVisible); !errors.Is(err, backend.ErrDeviceLost) {
					t.Errorf("alloc after loss: %v", err)
				}
				if !in.Lost()[0] {
					t.Error("Lost does not report the device")
				}
			}
		})
	}
}

func TestHangAndLive(t *testing.T) {
	d, in := open(t, faultinject.Plan{Kind: faultinject.HangWait, Device: 0, K: 1})
	f, err := copyOnce(d)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := f.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung wait returned %v", err)
	}
	if time.Since(start) < 40*time.Millisecond {
		t.Error("hung wait returned early")
	}
	if got := in.Live(); got[0] != 2 {
		t.Errorf("live buffers %v, want [2]", got)
	}
	if !in.Lost()[0] {
		t.Error("a hung device is not reported")
	}
	// Later work never completes either.
	f2, err := d.Stream().Submit()
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if err := f2.Wait(ctx2); err == nil {
		t.Error("work after the hang completed")
	}
}

func TestLiveAndInFlight(t *testing.T) {
	d, in := open(t, faultinject.Plan{Kind: faultinject.SlowDevice, Device: 0, K: 1, Delay: 100 * time.Millisecond})
	mem, err := backend.AllocHostMemory(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer backend.FreeHostMemory(mem)
	imp, err := d.(backend.Importer).Import(mem)
	if err != nil {
		t.Fatal(err)
	}
	w, err := d.Alloc(4096, backend.DeviceLocal)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stream().Copy(backend.Region{Buf: imp, Len: 4096}, backend.Region{Buf: w, Len: 4096}); err != nil {
		t.Fatal(err)
	}
	f, err := d.Stream().Submit()
	if err != nil {
		t.Fatal(err)
	}
	if in.InFlight(mem[100:200]) == "" {
		t.Error("InFlight misses a slow copy into imported memory")
	}
	if err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := in.InFlight(mem); s != "" {
		t.Errorf("InFlight after the wait: %s", s)
	}
	imp.Close()
	imp.Close()
	if got := in.Live(); got[0] != 1 {
		t.Errorf("live %v, want [1]", got)
	}
	w.Close()
	if got := in.Live(); got[0] != 0 {
		t.Errorf("live %v, want [0]", got)
	}
}
