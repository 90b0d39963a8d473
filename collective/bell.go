package collective

import (
	"context"
	"sync/atomic"
	"time"
)

// A doorbell is how a rank's rendezvous and exchange waits sleep where
// cores are spare (spinBarrier) and the OS offers a futex: after their spin
// they sleep in the kernel on the bell's word, which every event that can end
// the wait rings (a generation completing, a message or a credit arriving,
// the group breaking), and wake at least every bellSlice to check their
// context and deadline. Parking a goroutine on a channel instead takes
// runtime sudogs from a per-P cache, and with many Ps and waits that rarely
// park those caches keep refilling for millions of calls (an allocation
// every few thousand calls); a thread asleep in a futex allocates nothing.
// Elsewhere the waits park on channels (the comm's wake channel and the link
// channels), whose caches fill within the first calls on a few Ps.
type doorbell struct {
	word     atomic.Uint32
	sleepers atomic.Int32
}

// ticket returns the bell's state: read it before checking the condition
// waited for, and sleep with it (a ring in between ends the sleep at once).
func (b *doorbell) ticket() uint32 { return b.word.Load() }

// ring ends every sleep on the bell (and the next one of a sleeper that read
// its ticket before the ring).
func (b *doorbell) ring() {
	b.word.Add(1)
	if b.sleepers.Load() > 0 {
		futexWake(&b.word)
	}
}

// sleep blocks until the bell rings after t was read, or for d at most
// (spurious returns are allowed: callers loop).
func (b *doorbell) sleep(t uint32, d time.Duration) {
	b.sleepers.Add(1)
	futexWait(&b.word, t, d)
	b.sleepers.Add(-1)
}

// bellSlice bounds a doorbell sleep, so a wait notices its context ending
// and its deadline passing within bellSlice.
const bellSlice = 2 * time.Millisecond

// useBell says whether waits sleep on doorbells (see doorbell); tests
// switch it on to run the doorbell waits on small machines too.
var useBell atomic.Bool

func init() { useBell.Store(spinBarrier && futexAvailable) }

// poke wakes c's waits: its wake channel and its doorbell.
func (c *Comm) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
	c.bell.ring()
}

// bellWait sleeps on c's doorbell with ticket t until it rings, ctx ends,
// or deadline passes; it reports which of the latter two happened (neither:
// the caller checks its condition again).
func (c *Comm) bellWait(ctx context.Context, t uint32, deadline time.Time) (timedOut bool, ctxErr error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	d := time.Until(deadline)
	if d <= 0 {
		return true, nil
	}
	c.bell.sleep(t, min(d, bellSlice))
	return false, ctx.Err()
}
