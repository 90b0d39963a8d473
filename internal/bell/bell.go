// Package bell is the futex doorbell a rank's rendezvous and exchange
// waits sleep on where cores are spare and the OS offers a futex: after
// their spin they sleep in the kernel on the bell's word, which every event
// that can end the wait rings (a generation completing, a message or a
// credit arriving, the group breaking), and wake at least every Slice to
// check their context and deadline. Parking a goroutine on a channel
// instead takes runtime sudogs from a per-P cache, and with many Ps and
// waits that rarely park those caches keep refilling for millions of calls
// (an allocation every few thousand calls); a thread asleep in a futex
// allocates nothing. Elsewhere (Available is false) the waits park on
// channels, whose caches fill within the first calls on a few Ps.
package bell

import (
	"sync/atomic"
	"time"
)

// A Bell is a doorbell (see the package doc). The zero Bell is ready.
type Bell struct {
	word     atomic.Uint32
	sleepers atomic.Int32
}

// Ticket returns the bell's state: read it before checking the condition
// waited for, and sleep with it (a ring in between ends the sleep at once).
func (b *Bell) Ticket() uint32 { return b.word.Load() }

// Ring ends every sleep on the bell (and the next one of a sleeper that read
// its ticket before the ring).
func (b *Bell) Ring() {
	b.word.Add(1)
	if b.sleepers.Load() > 0 {
		futexWake(&b.word)
	}
}

// Sleep blocks until the bell rings after t was read, or for d at most
// (spurious returns are allowed: callers loop).
func (b *Bell) Sleep(t uint32, d time.Duration) {
	b.sleepers.Add(1)
	futexWait(&b.word, t, d)
	b.sleepers.Add(-1)
}

// Slice bounds a bell sleep, so a wait notices its context ending and its
// deadline passing within Slice.
const Slice = 2 * time.Millisecond
