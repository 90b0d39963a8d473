//go:build !linux

package bell

import (
	"sync/atomic"
	"time"
)

// Available says whether the OS offers a futex: here it does not, and
// Sleep returns at once.
const Available = false

func futexWait(*atomic.Uint32, uint32, time.Duration) {}

func futexWake(*atomic.Uint32) {}
