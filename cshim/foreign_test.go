//go:build cgo && !novulkan && unix

package cshim

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// Foreign uses: opens of one shared logical device use each other's buffers
// (SharesMemory). A buffer is destroyed, and imported memory released, only
// once the work of every open that used it completed, not only its owner's:
// each open counts its own tickets, so the owner's cannot say when another
// open's work is done.

// foreignKey gives every test its own shared device, so one declared lost
// does not take the others' with it.
var foreignKey atomic.Uint64

// openForeign opens two opens of one shared logical device: owner, and
// user, with the drain limit given, whose next submission stalls until
// TestReleaseStalls when stall is set (see openStalled).
func openForeign(t *testing.T, drain time.Duration, stall bool) (owner, user *Device) {
	t.Helper()
	key := 0xf0e1<<16 + foreignKey.Add(1)
	opts := OpenOptions{ShareDevice: true, ShareKey: key, DrainLimit: drain}
	if stall {
		user = openStalled(t, opts)
	} else {
		user = open(t, opts)
	}
	owner, err := Vulkan().Open(0, OpenOptions{ShareDevice: true, ShareKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() }) // the tests check Close themselves
	if !owner.SharesMemory(user) {
		t.Fatal("two opens with ShareDevice and one key do not share memory")
	}
	return owner, user
}

// pattern fills b with bytes that depend on seed.
func pattern(b []byte, seed int) {
	for i := range b {
		b[i] = byte(i*7 + seed)
	}
}

// isPattern reports whether b holds pattern's bytes of seed.
func isPattern(b []byte, seed int) bool {
	want := make([]byte, len(b))
	pattern(want, seed)
	return bytes.Equal(b, want)
}

// waitDone fails the test unless ticket tk of d completes within timeout
// (0: is done already).
func waitDone(t *testing.T, d *Device, tk uint64, timeout time.Duration, what string) {
	t.Helper()
	if done, err := d.Wait(tk, timeout); !done || err != nil {
		t.Errorf("%s: Wait = %v, %v", what, done, err)
	}
}

// closeAll closes the devices in order, failing the test on an error.
func closeAll(t *testing.T, devs ...*Device) {
	t.Helper()
	for _, d := range devs {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	}
}

// returnsAfter runs f in a goroutine and fails the test when it returns
// before TestReleaseStalls is called 300 ms later; it returns f's error.
func returnsAfter(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		t.Errorf("%s returned (%v) while another open's work that uses the buffer was still pending", what, err)
		TestReleaseStalls()
		return err
	case <-time.After(300 * time.Millisecond):
	}
	TestReleaseStalls()
	return <-done
}

// stalledRead opens owner and user (openForeign, stalled) and submits a
// copy on user, which stalls, from src, owner's buffer of 4 KiB filled with
// pattern seed, into dst, user's; tk is its ticket.
func stalledRead(t *testing.T, seed int) (owner, user *Device, src, dst *Buffer, tk uint64) {
	t.Helper()
	const n = 4096
	owner, user = openForeign(t, 0, true)
	src = newBuffer(t, owner, n, backend.HostVisible)
	pattern(src.Bytes(), seed)
	dst = newBuffer(t, user, n, backend.HostVisible)
	return owner, user, src, dst, submitCopy(t, user, dst, src, n)
}

// TestForeignUseDeferredFree: a device-memory buffer that another open's
// pending work reads is freed neither when its owner destroys it (which
// returns at once) nor before that work completed, and is freed once it did.
func TestForeignUseDeferredFree(t *testing.T) {
	owner, user, src, dst, tk := stalledRead(t, 3)
	destroyed := owner.Counters().ObjectsDestroyed
	if err := within(t, "Close of a device buffer another open's work uses", time.Second, src.Close); err != nil {
		t.Fatal(err)
	}
	if got := owner.Counters().ObjectsDestroyed - destroyed; got != 0 {
		t.Fatalf("%d objects destroyed while another open's pending work used the buffer", got)
	}
	TestReleaseStalls()
	waitDone(t, user, tk, 10*time.Second, "the copy from the destroyed buffer")
	if !isPattern(dst.Bytes(), 3) {
		t.Error("the copy from the destroyed buffer read other bytes")
	}
	// The user's completed ticket frees it (buffer and memory).
	if got := owner.Counters().ObjectsDestroyed - destroyed; got != 2 {
		t.Errorf("%d objects destroyed once the work using the buffer completed, want 2", got)
	}
	closeAll(t, user, owner)
}

// foreignImport opens owner and user (openForeign) and imports a page on
// owner that user copies src, its buffer filled with pattern seed, into.
func foreignImport(t *testing.T, stall bool, seed int) (owner, user *Device, mem []byte, imp, src *Buffer) {
	t.Helper()
	owner, user = openForeign(t, 0, stall)
	mem, imp, _ = importPages(t, owner, 1)
	src = newBuffer(t, user, int64(len(mem)), backend.HostVisible)
	pattern(src.Bytes(), seed)
	return owner, user, mem, imp, src
}

// TestForeignUseImportedCloseWaits: closing an imported buffer that another
// open's submitted copy writes returns only once that copy completed, so the
// host memory may be unmapped when Close returns.
func TestForeignUseImportedCloseWaits(t *testing.T) {
	owner, user, mem, imp, src := foreignImport(t, true, 5)
	tk := submitCopy(t, user, imp, src, int64(len(mem))) // stalled
	if err := returnsAfter(t, "Close of the imported buffer", imp.Close); err != nil {
		t.Fatal(err)
	}
	waitDone(t, user, tk, 0, "the copy into the imported buffer, after its Close")
	if !bytes.Equal(mem, src.Bytes()) {
		t.Error("the copy into the imported memory had not landed when its Close returned")
	}
	closeAll(t, user, owner)
}

// TestForeignUseImportedCloseSubmitsRecording: closing an imported buffer
// that another open's recording (not yet submitted) writes submits that
// recording and waits for it, so the write lands before Close returns.
func TestForeignUseImportedCloseSubmitsRecording(t *testing.T) {
	owner, user, mem, imp, src := foreignImport(t, false, 9)
	if err := user.CmdCopy(imp, 0, src, 0, int64(len(mem))); err != nil {
		t.Fatal(err)
	}
	if err := within(t, "Close of the imported buffer", 5*time.Second, imp.Close); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem, src.Bytes()) {
		t.Error("the recorded copy into the imported memory did not run before its Close returned")
	}
	tk, err := user.Submit()
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, user, tk, -1, "the ticket Close submitted")
	closeAll(t, user, owner)
}

// TestForeignUseOwnerClose: closing the device that owns a buffer another
// open's pending work reads waits for that work before it frees the buffer.
func TestForeignUseOwnerClose(t *testing.T) {
	owner, user, _, dst, tk := stalledRead(t, 11)
	if err := returnsAfter(t, "Close of the owning device", owner.Close); err != nil {
		t.Fatal(err)
	}
	waitDone(t, user, tk, 0, "the copy from the owner's buffer, after the owner's Close")
	if !isPattern(dst.Bytes(), 11) {
		t.Error("the copy from the closed device's buffer read other bytes")
	}
	closeAll(t, user)
}

// TestForeignUseAfterUserClosed: once the open that used a buffer closed
// (draining its work), its uses are over: the owner frees the buffer, and
// releases imported memory, at once.
func TestForeignUseAfterUserClosed(t *testing.T) {
	owner, user := openForeign(t, 0, false)
	mem, imp, _ := importPages(t, owner, 1)
	src := newBuffer(t, owner, int64(len(mem)), backend.DeviceLocal)
	dst := newBuffer(t, user, int64(len(mem)), backend.HostVisible)
	submitCopy(t, user, dst, src, int64(len(mem)))
	submitCopy(t, user, imp, dst, int64(len(mem)))
	if err := user.CmdCopy(dst, 0, imp, 0, int64(len(mem))); err != nil { // recorded, never submitted
		t.Fatal(err)
	}
	if err := user.Close(); err != nil {
		t.Fatal(err)
	}
	destroyed := owner.Counters().ObjectsDestroyed
	for _, b := range []*Buffer{imp, src} {
		if err := within(t, "Close of a buffer a closed open used", time.Second, b.Close); err != nil {
			t.Fatal(err)
		}
	}
	if got := owner.Counters().ObjectsDestroyed - destroyed; got != 4 {
		t.Errorf("%d objects destroyed, want 4 (two buffers and their memory)", got)
	}
	closeAll(t, owner)
}

// TestForeignUseDeclaredLost: when the other open's work that uses a buffer
// does not complete within its drain limit, that open is declared lost and
// the buffer is leaked, never freed: closing imported memory returns
// ErrDeviceLost (the memory must be leaked), so does closing device memory,
// and the owner's Close, which frees everything else, says so too.
func TestForeignUseDeclaredLost(t *testing.T) {
	owner, user := openForeign(t, 300*time.Millisecond, true)
	mem, imp, leak := importPages(t, owner, 1)
	*leak = true
	other := newBuffer(t, owner, int64(len(mem)), backend.HostVisible)
	src := newBuffer(t, user, int64(len(mem)), backend.HostVisible)
	if err := user.CmdCopy(other, 0, src, 0, int64(len(mem))); err != nil {
		t.Fatal(err)
	}
	submitCopy(t, user, imp, src, int64(len(mem))) // stalled
	destroyed := owner.Counters().ObjectsDestroyed
	err := within(t, "Close of the imported buffer", 3*time.Second, imp.Close)
	if !errors.Is(err, backend.ErrDeviceLost) {
		t.Errorf("Close of imported memory a hung open writes: %v, want ErrDeviceLost", err)
	}
	if _, err := user.Submit(); !errors.Is(err, backend.ErrDeviceLost) {
		t.Errorf("Submit on the open whose work hung: %v, want ErrDeviceLost (declared lost)", err)
	}
	if err := other.Close(); !errors.Is(err, backend.ErrDeviceLost) {
		t.Errorf("Close of device memory a hung open uses: %v, want ErrDeviceLost (leaked)", err)
	}
	if got := owner.Counters().ObjectsDestroyed - destroyed; got != 0 {
		t.Errorf("%d objects destroyed that a hung open may still use", got)
	}
	if err := owner.Close(); !errors.Is(err, backend.ErrDeviceLost) {
		t.Errorf("owner Close with buffers a hung open uses: %v, want ErrDeviceLost (they are leaked)", err)
	}
}

// TestForeignUseConcurrent: ranks on one shared device each copy from the
// next rank's buffer and destroy their own while the previous rank's copy
// from it may still be pending, concurrently; every copy reads what was
// written, and the devices close in any order.
func TestForeignUseConcurrent(t *testing.T) {
	const ranks, n, rounds = 4, 4096, 20
	key := 0xf0e1<<16 + foreignKey.Add(1)
	devs := make([]*Device, ranks)
	for i := range devs {
		devs[i] = open(t, OpenOptions{ShareDevice: true, ShareKey: key})
	}
	for it := 0; it < rounds; it++ {
		srcs := make([]*Buffer, ranks)
		for r, d := range devs {
			srcs[r] = newBuffer(t, d, n, backend.HostVisible)
			pattern(srcs[r].Bytes(), it*ranks+r)
		}
		errs := make(chan error, ranks)
		var recorded sync.WaitGroup // every rank submitted its copy
		recorded.Add(ranks)
		for r, d := range devs {
			go func() {
				errs <- func() error {
					arrived := false
					defer func() {
						if !arrived {
							recorded.Done()
						}
					}()
					dst, err := d.NewBuffer(n, backend.HostVisible)
					if err != nil {
						return err
					}
					defer dst.Close()
					next := (r + 1) % ranks
					if err := d.CmdCopy(dst, 0, srcs[next], 0, n); err != nil {
						return err
					}
					tk, err := d.Submit()
					if err != nil {
						return err
					}
					arrived = true
					recorded.Done()
					recorded.Wait()
					if err := srcs[r].Close(); err != nil { // the previous rank's copy may still read it
						return err
					}
					if done, err := d.Wait(tk, 10*time.Second); !done || err != nil {
						return errors.Join(errors.New("wait"), err)
					}
					if !isPattern(dst.Bytes(), it*ranks+next) {
						return errors.New("a copy from another rank's buffer read other bytes")
					}
					return nil
				}()
			}()
		}
		for range devs {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", it, err)
			}
		}
	}
	closeAll(t, devs[2], devs[0], devs[3], devs[1])
}
