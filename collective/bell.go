package collective

import (
	"sync/atomic"

	"github.com/gocoll/gocoll/internal/bell"
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
