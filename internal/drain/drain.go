// Package drain bounds how long a failing call waits for device work that
// may still use a caller's memory: the fences of what a comm submitted,
// waited for up to the drain limit, and the count of ranks still reading
// or writing peers' memory, waited down to zero up to a deadline. Past
// either, the caller declares the device lost (its memory is then leaked,
// never freed under it).
package drain

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// Fences waits for each of fs (nil ones are skipped), up to limit for them
// all. It reports false when the limit passed first; a fence that reports
// another failure counts as ended (the device reported an error: the work
// ended).
func Fences(limit time.Duration, fs ...backend.Fence) bool {
	var ctx context.Context
	for _, f := range fs {
		if f == nil {
			continue
		}
		if ctx == nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.Background(), limit)
			defer cancel()
		}
		if err := f.Wait(ctx); err != nil && errors.Is(err, context.DeadlineExceeded) {
			return false
		}
	}
	return true
}

// Poll is how often Zero looks at its count.
const Poll = 20 * time.Microsecond

// Zero waits until n is zero, for up to d; it reports false when d passed
// first.
func Zero(n *atomic.Int64, d time.Duration) bool {
	if n.Load() == 0 {
		return true
	}
	deadline := time.Now().Add(d)
	for n.Load() != 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(Poll)
	}
	return true
}
