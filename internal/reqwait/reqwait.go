// Package reqwait is the wait for one transport request (a
// backend.Request: an Isend or Irecv between processes) to complete: polled
// without sleeping at first, then with a short backoff, until it completes,
// fails, its timeout passes, the caller's context ends or the group breaks.
// A request that ends its wait without completing is cancelled; when the
// transport can neither complete nor cancel it, it keeps the request's Go
// buffer, which the caller then gives up.
package reqwait

import (
	"context"
	"runtime"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// End is how a wait ended.
type End int

const (
	Done      End = iota // the request completed
	Failed               // the request failed (the error Wait returns)
	Cancelled            // the caller's context ended
	Broken               // the group broke
	TimedOut             // the timeout passed
	Hung                 // the peer stopped responding (backend.HangReporter; the error Wait returns)
)

// Wait waits for req until it completes, fails, timeout passes, ctx ends,
// broke is closed or, for a backend.HangReporter, its peer stopped
// responding. held is the Go buffer req uses: when req ends its wait
// without completing and cannot be cancelled, the transport keeps it and
// *held is set to nil (the caller allocates a new one).
func Wait(ctx context.Context, req backend.Request, timeout time.Duration, broke <-chan struct{}, held *[]byte) (End, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	hr, _ := req.(backend.HangReporter)
	var hung error
	for spins := 0; ; spins++ {
		done, err := req.Test()
		if err != nil {
			return Failed, err
		}
		if done {
			return Done, nil
		}
		end := Done
		select {
		case <-ctx.Done():
			end = Cancelled
		case <-broke:
			end = Broken
		default:
			if time.Now().After(deadline) {
				end = TimedOut
			} else if hr != nil && spins%64 == 63 {
				if hung = hr.Hung(); hung != nil {
					end = Hung
				}
			}
		}
		if end != Done {
			if req.Cancel() != nil {
				*held = nil
			}
			return end, hung
		}
		// Poll without sleeping for the first 2 ms (a Go sleep below a
		// millisecond often lasts one), then back off.
		if spins < 64 || time.Since(start) < 2*time.Millisecond {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// Phase is phase, followed by why the wait ended where err says (Hung's
// error), for the timeout error that names the peer.
func Phase(phase string, err error) string {
	if err == nil {
		return phase
	}
	return phase + " (" + err.Error() + ")"
}
