//go:build !linux

package collective

import (
	"sync/atomic"
	"time"
)

const futexAvailable = false

func futexWait(*atomic.Uint32, uint32, time.Duration) {}

func futexWake(*atomic.Uint32) {}
