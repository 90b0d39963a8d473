package collective

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/internal/bell"
	"github.com/gocoll/gocoll/internal/park"
)

// Rendezvous and exchange waits sleep on the comm's doorbell (internal/bell)
// where cores are spare (spinBarrier) and the OS offers a futex; elsewhere
// they park on channels (the comm's wake channel and the link channels).

// futexAvailable says whether the OS offers a futex (bell.Available).
const futexAvailable = bell.Available

// useBell says whether waits sleep on doorbells (see internal/bell); tests
// switch it on to run the doorbell waits on small machines too.
var useBell atomic.Bool

func init() { useBell.Store(spinBarrier && futexAvailable) }

// poke wakes c's waits: its wake channel and its doorbell.
func (c *Comm) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
	c.bell.Ring()
}

// bellWait sleeps on c's doorbell with ticket t until it rings, ctx ends,
// or deadline passes; it reports which of the latter two happened (neither:
// the caller checks its condition again).
func (c *Comm) bellWait(ctx context.Context, t uint32, deadline time.Time) (timedOut bool, ctxErr error) {
	switch park.Sleep(&c.bell, ctx, t, deadline) {
	case park.TimedOut:
		return true, nil
	case park.Cancelled:
		return false, ctx.Err()
	}
	return false, nil
}
