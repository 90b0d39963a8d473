package waitctx

import (
	"context"
	"testing"
	"time"
)

// ended waits for w's Done to close, for 5 s at most, and checks that the
// wait ended with want.
func ended(t *testing.T, w *Ctx, what string, want error) {
	t.Helper()
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: Done did not close", what)
	}
	if err := w.Disarm(); err != want {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

// A Ctx times out whether the wait blocks on Done (its timer starts then)
// or only polls Err, and a wait disarmed in time reports nothing.
func TestLazyTimer(t *testing.T) {
	var w Ctx
	broken := make(chan struct{})
	w.Init(broken)

	w.Arm(context.Background(), 20*time.Millisecond)
	ended(t, &w, "blocking wait", ErrTimeout)

	w.Arm(context.Background(), 20*time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	if err := w.Err(); err != ErrTimeout {
		t.Errorf("polling wait past the deadline: %v, want ErrTimeout", err)
	}
	w.Disarm()

	w.Arm(context.Background(), time.Hour)
	if err := w.Err(); err != nil {
		t.Errorf("fresh wait: %v", err)
	}
	if err := w.Disarm(); err != nil {
		t.Errorf("disarmed in time: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	w.Arm(ctx, time.Hour)
	cancel()
	ended(t, &w, "cancelled parent", context.Canceled)
}

// TestRearm: the timer a wait left running serves the next wait: one
// with an earlier deadline sets it again, one with a later deadline is
// not ended by its early firing (it is set again for the rest).
func TestRearm(t *testing.T) {
	var w Ctx
	w.Init(make(chan struct{}))
	defer w.Release()

	// A long wait leaves the timer running an hour out.
	w.Arm(context.Background(), time.Hour)
	w.Done()
	if err := w.Disarm(); err != nil {
		t.Fatalf("long wait: %v", err)
	}
	// A shorter one must still time out on time.
	w.Arm(context.Background(), 30*time.Millisecond)
	start := time.Now()
	ended(t, &w, "a wait shorter than the running timer", ErrTimeout)
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Errorf("short wait ended after %v, before its deadline", d)
	}

	// A short wait leaves the timer due soon; the next, longer wait
	// outlives that firing.
	w.Arm(context.Background(), 20*time.Millisecond)
	w.Done()
	if err := w.Disarm(); err != nil {
		t.Fatalf("short wait disarmed in time: %v", err)
	}
	w.Arm(context.Background(), 200*time.Millisecond)
	start = time.Now()
	ended(t, &w, "longer wait", ErrTimeout)
	if d := time.Since(start); d < 190*time.Millisecond {
		t.Errorf("a longer wait ended after %v, at the earlier wait's firing", d)
	}
}

// TestBroken: closing the broken channel ends a wait armed afterwards with
// ErrBroken at once, and Fire ends an armed wait with its error.
func TestBroken(t *testing.T) {
	var w Ctx
	broken := make(chan struct{})
	w.Init(broken)
	defer w.Release()

	w.Arm(context.Background(), time.Hour)
	w.Fire(ErrBroken)
	select {
	case <-w.Done():
	default:
		t.Fatal("Fire did not close Done")
	}
	if err := w.Disarm(); err != ErrBroken {
		t.Errorf("fired wait: %v, want ErrBroken", err)
	}
	// Fire on a disarmed Ctx does nothing.
	w.Fire(ErrBroken)
	w.Arm(context.Background(), time.Hour)
	if err := w.Err(); err != nil {
		t.Errorf("a Fire while disarmed reached the next wait: %v", err)
	}
	w.Disarm()

	close(broken)
	w.Arm(context.Background(), time.Hour)
	if err := w.Err(); err != ErrBroken {
		t.Errorf("armed after the group broke: %v, want ErrBroken", err)
	}
	if err := w.Disarm(); err != ErrBroken {
		t.Errorf("disarm after the group broke: %v, want ErrBroken", err)
	}
}

// TestWatch: a Ctx registers once on a context and keeps the registration
// across waits under contexts with the same Done channel; the context's
// end ends only a wait armed under it, and Release ends the registration.
func TestWatch(t *testing.T) {
	var w Ctx
	w.Init(make(chan struct{}))
	open := func(what string) {
		t.Helper()
		if err := w.Err(); err != nil {
			t.Errorf("%s: the wait ended: %v", what, err)
		}
		if err := w.Disarm(); err != nil {
			t.Errorf("%s: disarm: %v", what, err)
		}
	}

	a, cancelA := context.WithCancel(context.Background())
	w.Arm(a, time.Hour)
	open("a")
	if w.watched != a.Done() || !w.Registered() {
		t.Fatal("no registration on a")
	}
	// The same context again, and one deriving from it with only a value:
	// no new registration.
	if !raceEnabled {
		type key struct{}
		av := context.WithValue(a, key{}, 1)
		if n := testing.AllocsPerRun(100, func() {
			w.Arm(a, time.Hour)
			w.Disarm()
			w.Arm(av, time.Hour)
			w.Disarm()
		}); n != 0 {
			t.Errorf("re-arming under the same context: %v allocations, want 0", n)
		}
	}
	w.Arm(a, time.Hour)
	cancelA()
	ended(t, &w, "a cancelled while armed", context.Canceled)
	w.Arm(a, time.Hour)
	if err := w.Err(); err != context.Canceled {
		t.Errorf("armed under a cancelled context: %v", err)
	}
	w.Disarm()

	// A context with another Done channel replaces the registration; the
	// old context's end no longer reaches the wait.
	b, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	c, cancelC := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancelC()
	w.Arm(b, time.Hour)
	open("b")
	w.Arm(c, time.Hour)
	cancelB()
	time.Sleep(10 * time.Millisecond)
	if err := w.Err(); err != nil {
		t.Errorf("b's end reached a wait under c: %v", err)
	}
	ended(t, &w, "c's deadline", context.DeadlineExceeded)

	// A wait under a context that cannot end keeps the last registration,
	// but that context's end does not reach it.
	d, cancelD := context.WithCancel(context.Background())
	w.Arm(d, time.Hour)
	open("d")
	w.Arm(context.Background(), time.Hour)
	cancelD()
	time.Sleep(10 * time.Millisecond)
	open("background after d ended")

	e, cancelE := context.WithCancel(context.Background())
	defer cancelE()
	w.Arm(e, time.Hour)
	open("e")
	w.Release()
	if w.Registered() || w.watched != nil {
		t.Error("Release kept the registration")
	}
	// Armed again after the release: registered again.
	w.Arm(e, time.Hour)
	cancelE()
	ended(t, &w, "e after release", context.Canceled)
}
