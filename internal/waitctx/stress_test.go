package waitctx

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// TestStressDeadlines arms one Ctx many times with drawn durations, under
// drawn contexts (one long-lived, fresh ones, ones cancelled early), some
// waits disarmed early with or without asking for Done first, some polled
// through Err, the rest blocking on Done: every wait that runs to its
// deadline must end with ErrTimeout, never before its deadline and never
// far after it (a timer left by an earlier wait must neither end a later
// wait early nor make it wait for a second period).
func TestStressDeadlines(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	var w Ctx
	w.Init(make(chan struct{}))
	defer w.Release()
	long, cancelLong := context.WithCancel(context.Background())
	defer cancelLong()
	rounds := 120
	if testing.Short() {
		rounds = 30
	}
	late := 0
	for i := 0; i < rounds; i++ {
		d := time.Duration(20+rng.IntN(40)) * time.Millisecond
		parent := context.Context(long)
		var cancel context.CancelFunc = func() {}
		switch rng.IntN(4) {
		case 0:
			parent, cancel = context.WithCancel(context.Background())
		case 1:
			parent, cancel = context.WithTimeout(context.Background(), time.Hour)
		}
		start := time.Now()
		w.Arm(parent, d)
		switch mode := rng.IntN(5); mode {
		case 0, 1: // disarmed early, the timer perhaps left running
			if mode == 0 {
				w.Done()
			}
			time.Sleep(time.Duration(rng.IntN(int(d / 2))))
			// A loaded machine may oversleep past d: then the timeout is due.
			err := w.Disarm()
			el := time.Since(start)
			if err != nil && (err != ErrTimeout || el < d) {
				t.Fatalf("round %d: wait of %v disarmed after %v: %v", i, d, el, err)
			}
		case 2: // polled through Err
			for w.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			el := time.Since(start)
			if err := w.Disarm(); err != ErrTimeout || el < d {
				t.Fatalf("round %d: polled wait of %v ended after %v with %v", i, d, el, err)
			}
		default: // blocks on Done
			select {
			case <-w.Done():
			case <-time.After(10*d + 5*time.Second):
				t.Fatalf("round %d: wait of %v not ended after %v", i, d, 10*d+5*time.Second)
			}
			el := time.Since(start)
			err := w.Disarm()
			if err != ErrTimeout || el < d {
				t.Fatalf("round %d: wait of %v ended after %v with %v", i, d, el, err)
			}
			if el > d+d/2+10*time.Millisecond {
				late++
				t.Logf("round %d: wait of %v ended after %v", i, d, el)
			}
		}
		cancel()
	}
	// A loaded machine delays timers, at times many in a row; a wait that
	// lasts a second period every time is a defect.
	if late > rounds/2 {
		t.Errorf("%d of %d waits ended more than half their duration late", late, rounds)
	}
}
