//go:build cgo && !novulkan && unix

package cshim

import (
	"errors"
	"golang.org/x/sys/unix"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// The drain limit and the waits that no caller bounds (shim.h, "Drain
// limit"), on a GPU that hangs: gc_vk_test_stall makes a submission wait for
// the host, gc_vk_test_release lets it run.

// releaseAfter is how long a test lets a stalled submission hang before it
// releases it anyway, so that a wait that ignores the drain limit ends (and
// the test fails on the time it took) instead of hanging.
const releaseAfter = 5 * time.Second

// openStalled opens device 0 with opts, arms its stall hook (skipping the
// test without timeline semaphores) and, when the test ends, releases every
// stall and closes the device, whose Close error the test checks itself.
func openStalled(t *testing.T, opts OpenOptions) *Device {
	t.Helper()
	d := open(t, OpenOptions{}) // skips without Vulkan; a device the cleanup may close
	d.Close()
	d, err := Vulkan().Open(0, opts)
	if err != nil {
		t.Fatal(err)
	}
	watchdog := time.AfterFunc(releaseAfter, TestReleaseStalls)
	t.Cleanup(func() {
		watchdog.Stop()
		TestReleaseStalls()
		d.Close()
		if msgs := Vulkan().TakeMessages(); len(msgs) > 0 {
			t.Errorf("validation layer:\n%s", strings.Join(msgs, "\n"))
		}
	})
	if err := d.TestStall(); errors.Is(err, backend.ErrUnsupported) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	return d
}

// submitCopy records a copy of n bytes from src to dst and submits it.
func submitCopy(t *testing.T, d *Device, dst, src *Buffer, n int64) uint64 {
	t.Helper()
	if err := d.CmdCopy(dst, 0, src, 0, n); err != nil {
		t.Fatal(err)
	}
	tk, err := d.Submit()
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// within fails the test when f takes longer than limit, and returns its error.
func within(t *testing.T, what string, limit time.Duration, f func() error) error {
	t.Helper()
	start := time.Now()
	err := f()
	if took := time.Since(start); took > limit {
		t.Errorf("%s took %v, want at most %v", what, took.Round(time.Millisecond), limit)
	}
	return err
}

// TestWaitIdleUnlocked: while WaitIdle waits for a submission that does not
// complete, other goroutines' calls on the device (a Wait with a timeout,
// buffer creation) still run and honour their timeouts: no device lock is
// held across the GPU wait.
func TestWaitIdleUnlocked(t *testing.T) {
	d := openStalled(t, OpenOptions{})
	a := newBuffer(t, d, 256, backend.HostVisible)
	b := newBuffer(t, d, 256, backend.HostVisible)
	tk := submitCopy(t, d, b, a, 256)
	idle := make(chan error, 1)
	go func() { idle <- d.WaitIdle() }()
	time.Sleep(100 * time.Millisecond) // let WaitIdle block
	err := within(t, "Wait(10ms) and NewBuffer while WaitIdle waits", time.Second, func() error {
		done, err := d.Wait(tk, 10*time.Millisecond)
		if err == nil && done {
			err = errors.New("the stalled ticket is done")
		}
		if err == nil {
			var nb *Buffer
			if nb, err = d.NewBuffer(64, backend.HostVisible); err == nil {
				err = nb.Close()
			}
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
	select {
	case err := <-idle:
		t.Errorf("WaitIdle returned (%v) before the stalled submission completed", err)
	default:
	}
	TestReleaseStalls()
	if err := <-idle; err != nil {
		t.Errorf("WaitIdle after the release: %v", err)
	}
}

// TestRecordingBounded: recording into the ring slot of a submission that
// never completes fails with ErrDeviceLost once the drain limit passes,
// instead of waiting forever; the device stays lost, and its Close leaks
// rather than frees what the hung work may use.
func TestRecordingBounded(t *testing.T) {
	d := openStalled(t, OpenOptions{RingSize: 2, DrainLimit: 300 * time.Millisecond})
	a := newBuffer(t, d, 256, backend.HostVisible)
	b := newBuffer(t, d, 256, backend.HostVisible)
	submitCopy(t, d, b, a, 256) // ticket 1, slot 1: stalled
	submitCopy(t, d, a, b, 256) // ticket 2, slot 0
	err := within(t, "recording into the stalled slot", 3*time.Second, func() error { return d.CmdCopy(b, 0, a, 0, 256) })
	if !errors.Is(err, backend.ErrDeviceLost) || !strings.Contains(err.Error(), "drain limit") {
		t.Fatalf("recording into the slot of a hung submission: %v, want ErrDeviceLost naming the drain limit", err)
	}
	if _, err := d.Submit(); !errors.Is(err, backend.ErrDeviceLost) {
		t.Errorf("Submit after the device was declared lost: %v, want ErrDeviceLost", err)
	}
	if _, err := d.NewBuffer(64, backend.DeviceLocal); !errors.Is(err, backend.ErrDeviceLost) {
		t.Errorf("NewBuffer after the device was declared lost: %v, want ErrDeviceLost", err)
	}
	destroyed := d.Counters().ObjectsDestroyed
	if err := b.Close(); !errors.Is(err, backend.ErrDeviceLost) {
		t.Errorf("buffer Close on a device declared lost: %v, want ErrDeviceLost (the buffer is leaked)", err)
	}
	if got := d.Counters().ObjectsDestroyed; got != destroyed {
		t.Errorf("%d objects destroyed on a device declared lost", got-destroyed)
	}
	TestReleaseStalls() // the work completes; the device stays lost
	if err := d.Close(); !errors.Is(err, backend.ErrDeviceLost) {
		t.Errorf("Close of a device declared lost: %v, want ErrDeviceLost (its memory leaked)", err)
	}
}

// TestCloseDrainLimit: Close of a device whose work does not complete
// returns ErrDeviceLost after the drain limit instead of waiting forever.
func TestCloseDrainLimit(t *testing.T) {
	d := openStalled(t, OpenOptions{DrainLimit: 300 * time.Millisecond})
	a := newBuffer(t, d, 256, backend.HostVisible)
	b := newBuffer(t, d, 256, backend.HostVisible)
	submitCopy(t, d, b, a, 256)
	if err := within(t, "Close", 3*time.Second, d.Close); !errors.Is(err, backend.ErrDeviceLost) {
		t.Errorf("Close with hung work: %v, want ErrDeviceLost", err)
	}
}

// importPages maps n pages to import; they are unmapped at the end of the
// test unless leak is set by then (the device may still use them).
func importPages(t *testing.T, d *Device, n int) (mem []byte, buf *Buffer, leak *bool) {
	t.Helper()
	if !d.Info().ExternalMemoryHost {
		t.Skip("no VK_EXT_external_memory_host")
	}
	mem, err := unix.Mmap(-1, 0, n*unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	leak = new(bool)
	t.Cleanup(func() {
		if !*leak {
			unix.Munmap(mem)
		}
	})
	if buf, err = d.ImportHost(mem); err != nil {
		t.Fatal(err)
	}
	return mem, buf, leak
}

// TestImportedCloseWaits: closing an imported buffer that a submitted copy
// still writes returns only once that copy completed, so the host memory
// may be unmapped when Close returns.
func TestImportedCloseWaits(t *testing.T) {
	d := openStalled(t, OpenOptions{})
	mem, imp, _ := importPages(t, d, 1)
	src := newBuffer(t, d, int64(len(mem)), backend.HostVisible)
	tk := submitCopy(t, d, imp, src, int64(len(mem)))
	closed := make(chan error, 1)
	go func() { closed <- imp.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close of an imported buffer returned (%v) while a copy into it was still pending", err)
	case <-time.After(300 * time.Millisecond):
	}
	TestReleaseStalls()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if done, err := d.Wait(tk, 0); !done || err != nil {
		t.Errorf("the copy into the imported buffer is not done after its Close (%v, %v)", done, err)
	}
}

// TestImportedCloseDrainLimit: when the work using an imported buffer does
// not complete within the drain limit, its Close returns ErrDeviceLost: the
// buffer stays imported and the memory must be leaked.
func TestImportedCloseDrainLimit(t *testing.T) {
	d := openStalled(t, OpenOptions{DrainLimit: 300 * time.Millisecond})
	mem, imp, leak := importPages(t, d, 1)
	*leak = true
	src := newBuffer(t, d, int64(len(mem)), backend.HostVisible)
	submitCopy(t, d, imp, src, int64(len(mem)))
	if err := within(t, "Close of the imported buffer", 3*time.Second, imp.Close); !errors.Is(err, backend.ErrDeviceLost) {
		t.Errorf("Close of an imported buffer hung work uses: %v, want ErrDeviceLost", err)
	}
}

// TestImportedCloseSubmitsRecording: closing an imported buffer that the
// recording (not yet submitted) writes submits the recording and waits for
// it, so the write lands before Close returns, never after.
func TestImportedCloseSubmitsRecording(t *testing.T) {
	d := open(t, OpenOptions{})
	mem, imp, _ := importPages(t, d, 1)
	src := newBuffer(t, d, int64(len(mem)), backend.HostVisible)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i*7 + 1)
	}
	if err := d.CmdCopy(imp, 0, src, 0, int64(len(mem))); err != nil {
		t.Fatal(err)
	}
	if err := imp.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range mem {
		if mem[i] != byte(i*7+1) {
			t.Fatalf("imported memory at %d = %d after Close, want %d: the recorded copy did not run before Close returned", i, mem[i], byte(i*7+1))
		}
	}
	tk, err := d.Submit()
	if err != nil {
		t.Fatal(err)
	}
	if done, err := d.Wait(tk, -1); !done || err != nil {
		t.Errorf("Wait for the ticket Close submitted: %v, %v", done, err)
	}
}

// TestImportNonCoherent: host memory is imported only into a HOST_COHERENT
// memory type (Go reads and writes it with no flush or invalidate); with the
// test hook that hides the coherent types, import fails with ErrUnsupported
// instead of falling back to a non-coherent type.
func TestImportNonCoherent(t *testing.T) {
	t.Setenv("GOCOLL_VULKAN_TEST_NONCOHERENT_IMPORT", "1")
	d := open(t, OpenOptions{})
	if !d.Info().ExternalMemoryHost {
		t.Skip("no VK_EXT_external_memory_host")
	}
	mem, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if b, err := d.ImportHost(mem); !errors.Is(err, backend.ErrUnsupported) {
		if err == nil {
			b.Close()
		}
		t.Errorf("ImportHost with no coherent memory type: %v, want ErrUnsupported", err)
	}
}
