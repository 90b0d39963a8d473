// Package liveness records which ranks of a process are gone: each rank's
// mark (why it went, its last call numbers), the group's count of gone
// ranks and of marks made, the alert channel that waits sleep on (closed
// when a rank goes, and for good when the group breaks), and the watchdog
// that reports the waits that last. Whom a gone rank fails, and how, is
// the caller's.
package liveness

import (
	"sync"
	"sync/atomic"
	"time"
)

// Mark is a gone rank's mark.
type Mark struct {
	Reason  string
	Seq     uint64 // its last collective call number
	P2PSeq  uint64 // its last point-to-point call number
	FromRun bool   // set by Run, which forgets it when it returns
}

// Rank holds one rank's mark (nil: alive), read by any goroutine.
type Rank struct{ m atomic.Pointer[Mark] }

// Mark returns r's mark, or nil while r is alive.
func (r *Rank) Mark() *Mark { return r.m.Load() }

// Board is a group's liveness: how many of its ranks in this process are
// gone now, how many marks were made so far, and the alert channel.
type Board struct {
	gone   atomic.Int32
	events atomic.Uint64
	mu     sync.Mutex
	alert  atomic.Pointer[chan struct{}]
	final  bool // the group broke: alert stays closed
}

// Init prepares b, no rank gone.
func (b *Board) Init() {
	a := make(chan struct{})
	b.alert.Store(&a)
}

// Go marks r gone with m unless it is gone already, and then wakes the
// waits on the alert channel. It reports whether it marked r.
func (b *Board) Go(r *Rank, m *Mark) bool {
	if !r.m.CompareAndSwap(nil, m) {
		return false
	}
	b.gone.Add(1)
	b.events.Add(1)
	b.mu.Lock()
	if !b.final {
		old := b.alert.Load()
		a := make(chan struct{})
		b.alert.Store(&a)
		close(*old)
	}
	b.mu.Unlock()
	return true
}

// Forget clears r's mark if Run made it (the rank may run again).
func (b *Board) Forget(r *Rank) {
	if m := r.m.Load(); m != nil && m.FromRun && r.m.CompareAndSwap(m, nil) {
		b.gone.Add(-1)
	}
}

// Any reports whether a rank is gone now.
func (b *Board) Any() bool { return b.gone.Load() > 0 }

// Events counts the marks made so far: a wait that saw it unchanged saw
// no rank go meanwhile.
func (b *Board) Events() uint64 { return b.events.Load() }

// Alert returns the channel closed when the next rank goes or the group
// breaks. Take it before looking at the marks, so a rank that goes in
// between is not missed.
func (b *Board) Alert() <-chan struct{} { return *b.alert.Load() }

// Break closes the alert channel for good: the group broke.
func (b *Board) Break() {
	b.mu.Lock()
	if !b.final {
		b.final = true
		close(*b.alert.Load())
	}
	b.mu.Unlock()
}

// Watchdog runs one watch at a time: it ends when no rank waits, and the
// next wait starts it again.
type Watchdog struct{ on atomic.Bool }

// Claim reports whether no watch runs: then the caller starts one (Watch).
func (w *Watchdog) Claim() bool { return !w.on.Load() && w.on.CompareAndSwap(false, true) }

// Watch is the watch's loop: every interval it reports the waits pending
// returns (report), until broken is closed or no wait is pending.
func Watch[W any](w *Watchdog, every time.Duration, broken <-chan struct{}, pending func() []W, report func(W)) {
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-broken:
			w.on.Store(false)
			return
		}
		t.Reset(every)
		ps := pending()
		if len(ps) == 0 {
			w.on.Store(false)
			// A wait that began meanwhile saw the watchdog running.
			if len(pending()) == 0 || !w.on.CompareAndSwap(false, true) {
				return
			}
			continue
		}
		for _, p := range ps {
			report(p)
		}
	}
}
