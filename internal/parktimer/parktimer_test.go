package parktimer

import (
	"math"
	"testing"
	"time"
)

var base = time.Now()

func now() time.Duration { return time.Since(base) }

// receive waits for the timer's firing, for 5 s at most.
func receive(t *testing.T, w *Timer) {
	t.Helper()
	select {
	case <-w.C():
	case <-time.After(5 * time.Second):
		t.Fatal("the timer did not fire")
	}
}

// TestRearm: an armed timer fires by the deadline; a running timer
// serves a later deadline as it is (firing early, Fired re-arms it for the
// rest) and is set again for an earlier one.
func TestRearm(t *testing.T) {
	var w Timer
	w.Init()
	defer w.Stop()
	n := now()
	w.Arm(n, DueAfter(n, time.Hour))
	// An earlier deadline sets it again; it fires by then, and Fired
	// reports the deadline passed.
	n = now()
	early := DueAfter(n, 20*time.Millisecond)
	w.Arm(n, early)
	receive(t, &w)
	if !w.Fired(now(), early) {
		t.Fatal("the earlier deadline did not pass")
	}

	// A wait that left the timer due soon; the next wait's deadline is
	// later: the early firing re-arms it, and it fires again by the later
	// deadline.
	n = now()
	w.Arm(n, DueAfter(n, 10*time.Millisecond))
	n = now()
	late := DueAfter(n, 80*time.Millisecond)
	w.Arm(n, late)
	receive(t, &w)
	if w.Fired(now(), late) {
		t.Fatal("the early firing ended the later wait")
	}
	receive(t, &w)
	if got := now(); !w.Fired(got, late) || got < late {
		t.Fatalf("fired again at %v, before the deadline %v", got, late)
	}
}

// TestStop: a stopped timer does not fire, and the next Arm sets it.
func TestStop(t *testing.T) {
	var w Timer
	w.Init()
	n := now()
	w.Arm(n, DueAfter(n, 10*time.Millisecond))
	w.Stop()
	select {
	case <-w.C():
		t.Fatal("a stopped timer fired")
	case <-time.After(30 * time.Millisecond):
	}
	n = now()
	due := DueAfter(n, 10*time.Millisecond)
	w.Arm(n, due)
	receive(t, &w)
	w.Stop()
}

func TestDueAfterSaturates(t *testing.T) {
	if got := DueAfter(time.Second, time.Duration(math.MaxInt64)); got != math.MaxInt64 {
		t.Errorf("DueAfter overflowing: %v, want MaxInt64", got)
	}
	if got := DueAfter(time.Second, time.Second); got != 2*time.Second {
		t.Errorf("DueAfter(1s, 1s) = %v", got)
	}
}
