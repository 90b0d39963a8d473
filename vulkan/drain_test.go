//go:build cgo && !novulkan

package vulkan

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
)

// The ownership rules at the device seam on a GPU that hangs (the shim's
// stall hook): a device whose work does not drain within
// OpenOptions.DrainLimit is declared lost and leaks what the work may use;
// closing imported host memory waits for the work that uses it.

// openHung opens device 0 with drainLimit and makes its next submission
// hang until the test ends (or 5 s pass, so that a wait that ignores the
// limit ends and the test fails on its time). The test closes the device.
func openHung(t *testing.T, drainLimit time.Duration) *device {
	t.Helper()
	requireVulkan(t)
	t.Cleanup(func() { checkValidation(t) })
	bd, err := Backend{}.Open(0, backend.OpenOptions{DrainLimit: drainLimit})
	if err != nil {
		t.Fatal(err)
	}
	d := bd.(*device)
	watchdog := time.AfterFunc(5*time.Second, cshim.TestReleaseStalls)
	t.Cleanup(func() {
		watchdog.Stop()
		cshim.TestReleaseStalls()
		d.Close()
	})
	if err := d.Shim().TestStall(); errors.Is(err, backend.ErrUnsupported) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	return d
}

// copyAndSubmit records dst = src and submits it.
func copyAndSubmit(t *testing.T, d backend.Device, dst, src backend.Buffer) backend.Fence {
	t.Helper()
	s := d.Stream()
	if err := s.Copy(backend.Region{Buf: dst, Len: dst.Len()}, backend.Region{Buf: src, Len: src.Len()}); err != nil {
		t.Fatal(err)
	}
	f, err := s.Submit()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCloseDeclaresLost: Close of a device whose work hangs returns an error
// matching ErrDeviceLost once the drain limit passed, the fence of that work
// then fails with it too (it never reports work done that is not), and so
// does Close of the imported buffer that work writes (its memory must be
// leaked).
func TestCloseDeclaresLost(t *testing.T) {
	d := openHung(t, 300*time.Millisecond)
	a := alloc(t, d, 4096, backend.HostVisible)
	var b backend.Buffer
	if d.Info().HostImport {
		mem, err := backend.AllocHostMemory(4096) // leaked: the hung work writes it
		if err != nil {
			t.Fatal(err)
		}
		if b, err = d.Import(mem); err != nil {
			t.Fatal(err)
		}
	} else {
		b = alloc(t, d, 4096, backend.HostVisible)
	}
	f := copyAndSubmit(t, d, b, a)
	start := time.Now()
	err := d.Close()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Close took %v with a drain limit of 300ms", took.Round(time.Millisecond))
	}
	if !errors.Is(err, backend.ErrDeviceLost) {
		t.Fatalf("Close with hung work: %v, want ErrDeviceLost", err)
	}
	if err := f.Wait(context.Background()); !errors.Is(err, backend.ErrDeviceLost) {
		t.Errorf("Wait for the hung work after Close: %v, want ErrDeviceLost", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := b.Close(); d.Info().HostImport && !errors.Is(err, backend.ErrDeviceLost) {
		t.Errorf("Close of an imported buffer after its device was declared lost: %v, want ErrDeviceLost (its memory leaked)", err)
	}
}

// TestImportCloseWaits: Close of an imported host buffer that submitted work
// still writes returns only after that work completed, so freeing the
// memory then is safe; past the drain limit it returns ErrDeviceLost instead
// and the memory must be leaked.
func TestImportCloseWaits(t *testing.T) {
	for _, c := range []struct {
		name  string
		drain time.Duration
	}{{"completes", 0}, {"drain limit", 300 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			d := openHung(t, c.drain)
			if !d.Info().HostImport {
				t.Skip("no host import")
			}
			mem, err := backend.AllocHostMemory(backend.PageSize())
			if err != nil {
				t.Fatal(err)
			}
			imp, err := d.Import(mem)
			if err != nil {
				t.Fatal(err)
			}
			src := alloc(t, d, len(mem), backend.HostVisible)
			f := copyAndSubmit(t, d, imp, src)
			closed := make(chan error, 1)
			go func() { closed <- imp.Close() }()
			if c.drain > 0 {
				var err error
				select {
				case err = <-closed:
				case <-time.After(3 * time.Second):
					t.Fatal("Close of an imported buffer did not return within 3s with a drain limit of 300ms")
				}
				if !errors.Is(err, backend.ErrDeviceLost) {
					t.Errorf("Close of an imported buffer hung work writes: %v, want ErrDeviceLost", err)
				}
				return // mem leaked: the device may still write it
			}
			select {
			case err := <-closed:
				t.Fatalf("Close of an imported buffer returned (%v) while a copy into it was pending", err)
			case <-time.After(300 * time.Millisecond):
			}
			cshim.TestReleaseStalls()
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			if err := f.Wait(ctx); err != nil {
				t.Errorf("the copy is not done after Close returned: %v", err)
			}
			if err := backend.FreeHostMemory(mem); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestImportCoherentOnly: Import uses only HOST_COHERENT memory (Go reads
// and writes it with no flush): with the test hook that hides the coherent
// types it fails with ErrUnsupported.
func TestImportCoherentOnly(t *testing.T) {
	t.Setenv("GOCOLL_VULKAN_TEST_NONCOHERENT_IMPORT", "1")
	d := openDevice(t, backend.OpenOptions{})
	if !d.Info().HostImport {
		t.Skip("no host import")
	}
	mem, err := backend.AllocHostMemory(backend.PageSize())
	if err != nil {
		t.Fatal(err)
	}
	defer backend.FreeHostMemory(mem)
	if b, err := d.Import(mem); !errors.Is(err, backend.ErrUnsupported) {
		if err == nil {
			b.Close()
		}
		t.Errorf("Import with no coherent memory type: %v, want ErrUnsupported", err)
	}
}

// TestFenceDoneWinsOverEndedContext: a fence whose submission completed
// returns nil from Wait even with a context that ended already, though no
// one waited for it before (its completion not yet recorded).
func TestFenceDoneWinsOverEndedContext(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	a := alloc(t, d, 4096, backend.HostVisible)
	b := alloc(t, d, 4096, backend.HostVisible)
	f := copyAndSubmit(t, d, b, a)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		err := f.Wait(ended)
		if err == nil {
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait with an ended context: %v, want nil or context.Canceled", err)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("Wait with an ended context still returns its error 10s after a 4 KiB copy was submitted: a completed submission must win")
		}
	}
	if err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}
