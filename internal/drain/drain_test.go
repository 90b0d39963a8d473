package drain

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// fence is a backend.Fence that completes when done closes, or reports err.
type fence struct {
	done chan struct{}
	err  error
}

func (f *fence) Wait(ctx context.Context) error {
	if f.err != nil {
		return f.err
	}
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Fences waits for the fences that complete, counts a failed one as ended,
// and gives up on one that does not complete within the limit.
func TestFences(t *testing.T) {
	done := &fence{done: make(chan struct{})}
	close(done.done)
	failed := &fence{err: errors.New("device error")}
	hung := &fence{done: make(chan struct{})}
	if !Fences(time.Second, done, nil, failed) {
		t.Fatal("completed and failed fences did not drain")
	}
	if !Fences(time.Second) {
		t.Fatal("no fences did not drain")
	}
	start := time.Now()
	if Fences(20*time.Millisecond, done, hung) {
		t.Fatal("a hung fence drained")
	}
	if d := time.Since(start); d < 15*time.Millisecond {
		t.Fatalf("gave up after %v, before the 20 ms limit", d)
	}
}

// Zero returns once the count falls to zero, and gives up at its deadline.
func TestZero(t *testing.T) {
	var n atomic.Int64
	if !Zero(&n, 0) {
		t.Fatal("a zero count did not drain")
	}
	n.Store(1)
	go func() {
		time.Sleep(5 * time.Millisecond)
		n.Add(-1)
	}()
	if !Zero(&n, 5*time.Second) {
		t.Fatal("a count that fell to zero did not drain")
	}
	n.Store(1)
	if Zero(&n, 10*time.Millisecond) {
		t.Fatal("a count that stays did not time out")
	}
}

var _ backend.Fence = (*fence)(nil)
