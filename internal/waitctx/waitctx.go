// Package waitctx is the context a comm's device waits run under: it ends
// when the operation's context ends, a deadline passes, or the group
// breaks, and arming it again for the next wait allocates nothing in the
// steady state.
package waitctx

import (
	"context"
	"errors"
	"sync"
	"time"
	"weak"
)

// Reasons a Ctx ended.
var (
	ErrTimeout = errors.New("device wait timed out")
	ErrBroken  = errors.New("group broken")
)

// Ctx is the context device waits run under: it ends when the
// operation's context ends, its timeout passes, or the group breaks. One
// per comm, reused: arming it allocates nothing in the steady state. Its
// timer starts only when a wait first asks for Done (a fence wait polls
// before it blocks): a short wait touches no timer at all (a timer's Reset
// moves it into the current P's heap, which grows now and then). It
// watches the operation's context through one registration
// (context.AfterFunc) that outlives the wait: a comm's calls usually run
// under one context (Group.Run's, or one a caller made before its loop),
// so arming with a context of the same Done channel as the last registers
// nothing. The registration ends when a context with another Done channel
// is armed, when the context ends, or when the group closes (Release).
type Ctx struct {
	mu       sync.Mutex
	ch       chan struct{}
	err      error
	armed    bool
	timed    bool   // the timer runs for this arming
	arming   uint64 // armings so far: a late callback of an earlier one fires nothing
	parent   context.Context
	done     <-chan struct{} // parent's Done
	deadline time.Time
	timer    *time.Timer
	timerAt  time.Time // when timer fires; zero: stopped (see Done)
	brokenCh chan struct{}
	// The registration on a context's end, kept between waits.
	watched <-chan struct{} // the Done channel it watches
	stop    func() bool
}

// Init prepares w; brokenCh is closed when the group breaks (an armed
// wait then ends with ErrBroken).
func (w *Ctx) Init(brokenCh chan struct{}) {
	w.ch = make(chan struct{})
	w.brokenCh = brokenCh
	// The timer reaches the comm through a weak pointer: running between
	// waits (see Done), it must not keep a group dropped without Close
	// alive.
	wp := weak.Make(w)
	w.timer = time.AfterFunc(time.Hour, func() {
		if w := wp.Value(); w != nil {
			w.timeout()
		}
	})
	w.timer.Stop()
}

func (w *Ctx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (w *Ctx) Value(any) any               { return nil }

func (w *Ctx) Done() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed && !w.timed && w.err == nil {
		w.timed = true
		// The timer outlives the wait (Disarm leaves it running): it is
		// set again only when stopped or due after this deadline; firing
		// before it, it is set for the rest (timeout).
		if w.timerAt.IsZero() || w.timerAt.After(w.deadline) {
			w.timer.Reset(max(time.Until(w.deadline), 0))
			w.timerAt = w.deadline
		}
	}
	return w.ch
}

func (w *Ctx) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed && w.err == nil && !w.timed && time.Now().After(w.deadline) {
		// A poller that never asked for Done: no timer runs for it.
		w.err = ErrTimeout
		close(w.ch)
	}
	return w.err
}

// Arm starts a wait under parent that times out after d.
func (w *Ctx) Arm(parent context.Context, d time.Duration) {
	done := parent.Done()
	w.mu.Lock()
	if w.err != nil {
		w.ch, w.err = make(chan struct{}), nil
	}
	w.arming++
	w.armed, w.parent, w.done, w.timed = true, parent, done, false
	w.deadline = time.Now().Add(d)
	var old func() bool
	rewatch := done != nil && done != w.watched
	if rewatch {
		old, w.stop, w.watched = w.stop, nil, done
	}
	w.mu.Unlock()
	if old != nil {
		old()
	}
	if rewatch {
		// The context reaches the comm only through a weak pointer: a
		// long-lived context must not keep a group dropped without Close
		// alive (its cleanup closes what it holds).
		wp := weak.Make(w)
		stop := context.AfterFunc(parent, func() {
			if w := wp.Value(); w != nil {
				w.parentDone(done)
			}
		})
		w.mu.Lock()
		if w.watched == done && w.stop == nil {
			w.stop, stop = stop, nil
		}
		w.mu.Unlock()
		if stop != nil { // released meanwhile
			stop()
		}
	}
	select {
	case <-w.brokenCh:
		w.Fire(ErrBroken)
		return
	default:
	}
	if err := parent.Err(); err != nil {
		w.Fire(err)
	}
}

// parentDone ends the armed wait whose context has Done channel done,
// which was closed.
func (w *Ctx) parentDone(done <-chan struct{}) {
	w.mu.Lock()
	p, n := w.parent, w.arming
	ours := w.armed && w.done == done
	w.mu.Unlock()
	if !ours {
		return
	}
	err := p.Err()
	if err == nil {
		err = context.Canceled // a Context whose Done closes before its Err reports
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed && w.arming == n && w.err == nil {
		w.err = err
		close(w.ch)
	}
}

// Release ends the registration on the last context armed (the group
// closes; the wait must be disarmed).
func (w *Ctx) Release() {
	w.mu.Lock()
	stop := w.stop
	w.stop, w.watched = nil, nil
	w.timer.Stop()
	w.timerAt = time.Time{}
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Registered reports whether w holds a registration on a context's end.
func (w *Ctx) Registered() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stop != nil
}

// Disarm ends the wait and returns why the context ended (nil: it did not).
// The timer keeps running (see Done).
func (w *Ctx) Disarm() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timed = false
	w.armed, w.parent, w.done = false, nil, nil
	return w.err
}

// timeout is the timer's firing: it ends the armed wait whose deadline
// passed, and sets the timer again for the rest of a timed wait's.
func (w *Ctx) timeout() {
	w.mu.Lock()
	w.timerAt = time.Time{}
	now := time.Now()
	late := !w.armed || now.Before(w.deadline)
	if w.armed && w.timed && late {
		w.timer.Reset(w.deadline.Sub(now))
		w.timerAt = w.deadline
	}
	w.mu.Unlock()
	if !late {
		w.Fire(ErrTimeout)
	}
}

// Fire ends the armed wait with err.
func (w *Ctx) Fire(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed && w.err == nil {
		w.err = err
		close(w.ch)
	}
}
