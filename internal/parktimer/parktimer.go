// Package parktimer is the lazily armed timer of a goroutine's parked
// waits (a comm's exchanges, rendezvous and shared calls blocked in a
// select): it times those waits out while touching the runtime's timers
// seldom. It is a package of its own, not part of bell: the bell is how
// waits sleep where a futex is, this timer is how waits that park on
// channels instead end at their deadline; the two serve different waits
// and share nothing.
//
// Times are durations on a monotonic clock of the caller's (any origin, the
// same for every call on one Timer).
package parktimer

import (
	"math"
	"time"
)

// Timer is the timer of a comm's parked waits, armed lazily: a wait arms
// it only when it is stopped or would fire after the wait's deadline, and
// leaves it running when it ends; when it fires before the deadline of the
// wait that receives it, that wait arms it for the rest. A wait thus
// seldom touches the runtime's timers (a Reset and a Stop per wait did).
// Only one goroutine uses it.
type Timer struct {
	t  *time.Timer
	at time.Duration // when it fires (the caller's clock); 0: stopped or fired
}

// Init makes the timer, stopped.
func (w *Timer) Init() {
	w.t = time.NewTimer(time.Hour)
	w.t.Stop()
}

// C is the channel the timer's firings arrive on: a wait that receives
// from it calls Fired.
func (w *Timer) C() <-chan time.Time { return w.t.C }

// Stop stops the timer.
func (w *Timer) Stop() {
	w.t.Stop()
	w.at = 0
}

// DueAfter is the deadline d after now, saturated.
func DueAfter(now, d time.Duration) time.Duration {
	if due := now + d; due >= now {
		return due
	}
	return math.MaxInt64
}

// Arm makes the timer fire by due; now is the time.
func (w *Timer) Arm(now, due time.Duration) {
	if w.at == 0 || w.at > due {
		w.t.Reset(due - now)
		w.at = due
	}
}

// Fired takes the timer's firing, at now, in a wait whose deadline is due:
// it reports whether the deadline passed, and arms the timer for the rest
// if not.
func (w *Timer) Fired(now, due time.Duration) bool {
	w.at = 0
	if now >= due {
		return true
	}
	w.Arm(now, due)
	return false
}
