package park

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocoll/gocoll/internal/bell"
	"github.com/gocoll/gocoll/internal/parktimer"
	"github.com/gocoll/gocoll/internal/waitrec"
)

// modes runs f with the wait sleeping on a doorbell (where the OS has a
// futex) and parked on channels.
func modes(t *testing.T, f func(t *testing.T, useBell bool)) {
	for _, useBell := range []bool{false, true} {
		name := "parked"
		if useBell {
			name = "bell"
		}
		t.Run(name, func(t *testing.T) {
			if useBell && !bell.Available {
				t.Skip("no futex on this OS")
			}
			f(t, useBell)
		})
	}
}

// Each sleep ends with its event: a value (Got), a wake or a ring (Woken),
// the deadline (TimedOut), the context (Cancelled).
func TestEvents(t *testing.T) {
	modes(t, func(t *testing.T, useBell bool) {
		var b bell.Bell
		var tm parktimer.Timer
		tm.Init()
		defer tm.Stop()
		ctx := context.Background()
		w := Begin(&b, &tm, useBell, waitrec.Now(), time.Hour)

		ch := make(chan int, 1)
		ch <- 7
		if v, ev := Next(&w, ctx, w.Ticket(), ch, nil); ev != Got || v != 7 {
			t.Fatalf("with a value waiting: %v, %v; want 7, Got", v, ev)
		}
		wake := make(chan struct{})
		close(wake)
		if _, ev := Next(&w, ctx, w.Ticket(), ch, wake); ev != Woken {
			t.Fatalf("with the wake channel closed: %v, want Woken", ev)
		}
		if useBell {
			tk := w.Ticket()
			go func() {
				time.Sleep(5 * time.Millisecond)
				b.Ring()
			}()
			// A bell sleep reports Woken when rung or when its slice ends.
			if _, ev := Next(&w, ctx, tk, ch, nil); ev != Woken {
				t.Fatalf("rung: %v, want Woken", ev)
			}
		}
		go func() {
			time.Sleep(5 * time.Millisecond)
			ch <- 8
		}()
		for {
			v, ev := Next(&w, ctx, w.Ticket(), ch, nil)
			if ev == Woken {
				continue
			}
			if ev != Got || v != 8 {
				t.Fatalf("a value arriving later: %v, %v; want 8, Got", v, ev)
			}
			break
		}

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, ev := Next(&w, cctx, w.Ticket(), ch, nil); ev != Cancelled {
			t.Fatalf("with the context ended: %v, want Cancelled", ev)
		}

		w = Begin(&b, &tm, useBell, waitrec.Now(), 20*time.Millisecond)
		untilTimedOut(t, &w, ch, time.Now())
	})
}

// Receiving a value that is there allocates nothing.
func TestNoAllocs(t *testing.T) {
	modes(t, func(t *testing.T, useBell bool) {
		var b bell.Bell
		var tm parktimer.Timer
		tm.Init()
		defer tm.Stop()
		ctx := context.Background()
		ch := make(chan int, 1)
		w := Begin(&b, &tm, useBell, waitrec.Now(), time.Hour)
		if n := testing.AllocsPerRun(100, func() {
			ch <- 1
			if _, ev := Next(&w, ctx, w.Ticket(), ch, nil); ev != Got {
				t.Fatal(ev)
			}
			ch <- 1
			if _, ok := Poll(ch, 0); !ok {
				t.Fatal("Poll missed a value")
			}
		}); n != 0 {
			t.Fatalf("%v allocations per wait, want 0", n)
		}
	})
}

// Poll takes a value that is there, or one that arrives within its spin,
// and gives up after it.
func TestPoll(t *testing.T) {
	ch := make(chan int, 1)
	if _, ok := Poll(ch, 0); ok {
		t.Fatal("Poll of an empty channel got a value")
	}
	start := time.Now()
	if _, ok := Poll(ch, 5*time.Millisecond); ok || time.Since(start) < 5*time.Millisecond {
		t.Fatal("Poll did not spin for its duration")
	}
	go func() {
		time.Sleep(time.Millisecond)
		ch <- 3
	}()
	if v, ok := Poll(ch, 5*time.Second); !ok || v != 3 {
		t.Fatalf("Poll = %v, %v; want 3, true", v, ok)
	}
}

// Spin returns once the counter reaches its target, and gives up after its
// duration.
func TestSpin(t *testing.T) {
	var v atomic.Uint64
	v.Store(3)
	if !Spin(&v, 3, time.Hour) || !Spin(&v, 2, time.Hour) {
		t.Fatal("Spin missed a counter already at its target")
	}
	start := time.Now()
	if Spin(&v, 4, 5*time.Millisecond) || time.Since(start) < 5*time.Millisecond {
		t.Fatal("Spin below its target did not spin for its duration")
	}
	go func() {
		time.Sleep(time.Millisecond)
		v.Add(1)
	}()
	if !Spin(&v, 4, 5*time.Second) {
		t.Fatal("Spin missed the counter reaching its target")
	}
}

// Renew moves a wait's deadline to its timeout from then.
func TestRenew(t *testing.T) {
	modes(t, func(t *testing.T, useBell bool) {
		var b bell.Bell
		var tm parktimer.Timer
		tm.Init()
		defer tm.Stop()
		w := Begin(&b, &tm, useBell, waitrec.Now(), 20*time.Millisecond)
		if w.OnBell() != useBell {
			t.Fatalf("OnBell = %v, want %v", w.OnBell(), useBell)
		}
		time.Sleep(15 * time.Millisecond)
		start := time.Now()
		w.Renew(waitrec.Now())
		untilTimedOut(t, &w, nil, start)
	})
}

// untilTimedOut sleeps through w until its deadline, which must be 20 ms
// after start.
func untilTimedOut(t *testing.T, w *Wait, ch chan int, start time.Time) {
	t.Helper()
	for {
		_, ev := Next(w, context.Background(), w.Ticket(), ch, nil)
		if ev == Woken {
			continue
		}
		if ev != TimedOut {
			t.Fatalf("past the deadline: %v, want TimedOut", ev)
		}
		break
	}
	if d := time.Since(start); d < 15*time.Millisecond {
		t.Fatalf("a 20 ms wait timed out after %v", d)
	}
}
