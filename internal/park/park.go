// Package park is how a rank's blocking waits spin (Spin, Poll) and then
// sleep, until their deadline: on the rank's doorbell (internal/bell) where
// waits use doorbells, else parked on channels under the rank's lazily armed
// timer (internal/parktimer). Each sleep ends with one event: a value
// arrived on the wait's channel, the rank was woken (its bell rang, or the
// wake channel fired), the deadline passed, or the caller's context ended.
// What a wait waits for, and what each event means to it, is the caller's.
package park

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/internal/bell"
	"github.com/gocoll/gocoll/internal/parktimer"
	"github.com/gocoll/gocoll/internal/waitrec"
)

// Event is how one sleep ended.
type Event int

const (
	Got       Event = iota // a value arrived on the wait's channel
	Woken                  // woken: the caller looks at what it waits for again
	TimedOut               // the wait's deadline passed
	Cancelled              // the caller's context ended
)

// Wait is one blocking wait of a rank, from Begin to its deadline. Its
// parked sleeps keep time on waitrec.Now's clock.
type Wait struct {
	bell    *bell.Bell // nil: the sleeps park on channels under timer
	timer   *parktimer.Timer
	timeout time.Duration
	at      time.Time     // the deadline of bell sleeps
	due     time.Duration // the timer's deadline (parked sleeps)
}

// Begin starts a wait of timeout from now (waitrec.Now): with doorbells
// (useBell) it sleeps on b, else it parks on channels under t, which it
// arms.
func Begin(b *bell.Bell, t *parktimer.Timer, useBell bool, now, timeout time.Duration) Wait {
	w := Wait{timer: t, timeout: timeout}
	if useBell {
		w.bell = b
	}
	w.Renew(now)
	return w
}

// Renew moves the wait's deadline to its timeout from now (waitrec.Now).
func (w *Wait) Renew(now time.Duration) {
	if w.bell != nil {
		w.at = time.Now().Add(w.timeout)
		return
	}
	w.due = parktimer.DueAfter(now, w.timeout)
	w.timer.Arm(now, w.due)
}

// OnBell reports whether the wait sleeps on a doorbell (else it parks).
func (w *Wait) OnBell() bool { return w.bell != nil }

// Ticket returns the ticket of the next bell sleep (0 when the wait
// parks): take it before looking at what the wait waits for, so a ring
// after the look ends the sleep.
func (w *Wait) Ticket() uint32 {
	if w.bell == nil {
		return 0
	}
	return w.bell.Ticket()
}

// Next sleeps until a value arrives on ch (Got, with the value), wake fires
// or the bell rings (Woken), the deadline passes (TimedOut) or ctx ends
// (Cancelled). t is the ticket taken before the caller's look. A nil ch or
// wake never fires.
func Next[T any](w *Wait, ctx context.Context, t uint32, ch <-chan T, wake <-chan struct{}) (T, Event) {
	var zero T
	if w.bell != nil {
		select {
		case v := <-ch:
			return v, Got
		case <-wake:
			return zero, Woken
		default:
		}
		return zero, Sleep(w.bell, ctx, t, w.at)
	}
	for {
		select {
		case v := <-ch:
			return v, Got
		case <-wake:
			return zero, Woken
		case <-w.timer.C():
			if w.timer.Fired(waitrec.Now(), w.due) {
				return zero, TimedOut
			}
		case <-ctx.Done():
			return zero, Cancelled
		}
	}
}

// Sleep sleeps on b with ticket t until it rings (Woken), ctx ends
// (Cancelled) or deadline passes (TimedOut). A sleep lasts at most
// bell.Slice, and then reports Woken: the caller looks again.
func Sleep(b *bell.Bell, ctx context.Context, t uint32, deadline time.Time) Event {
	if ctx.Err() != nil {
		return Cancelled
	}
	d := time.Until(deadline)
	if d <= 0 {
		return TimedOut
	}
	b.Sleep(t, min(d, bell.Slice))
	if ctx.Err() != nil {
		return Cancelled
	}
	return Woken
}

// Poll receives from ch without parking: once, then, for up to spin,
// yielding the processor between tries. It reports whether a value came.
func Poll[T any](ch <-chan T, spin time.Duration) (T, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
	}
	for start := time.Now(); time.Since(start) < spin; {
		select {
		case v := <-ch:
			return v, true
		default:
		}
		runtime.Gosched()
	}
	var zero T
	return zero, false
}

// Spin polls v, without parking, until it reaches want (true) or d has
// passed (false). It polls in a tight loop (a runtime.Gosched between polls
// costs a trip through the scheduler, which looks for work on every idle
// P), yielding only now and then: for cores that are spare.
func Spin(v *atomic.Uint64, want uint64, d time.Duration) bool {
	for start, k := time.Now(), 0; time.Since(start) < d; k++ {
		for i := 0; i < 256; i++ {
			if v.Load() >= want {
				return true
			}
		}
		if k%64 == 63 {
			runtime.Gosched()
		}
	}
	return false
}
