package collective

import (
	"context"
	"sync"
)

// Work is a collective started asynchronously. Wait for it before reading
// or writing its buffers.
type Work struct {
	done chan struct{}
	err  error
	fn   func() error
}

// Wait blocks until the operation finished (returning its error) or ctx
// ends (returning ctx.Err(); the operation itself then still runs to its
// own end, bounded by CommunicationTimeout). Waiting again returns the same
// result.
func (w *Work) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return w.err
	default:
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done reports whether the operation has finished.
func (w *Work) Done() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func failedWork(err error) *Work {
	w := &Work{done: make(chan struct{}), err: err}
	close(w.done)
	return w
}

// asyncQueue runs one Comm's asynchronous operations in order on one
// goroutine (a Comm is used by one goroutine at a time). The goroutine
// starts with the first operation and ends when the group is closed or
// broken; operations still queued then fail with the group's error.
type asyncQueue struct {
	mu      sync.Mutex
	started bool
	q       chan *Work
	pending int
	exited  chan struct{}
}

func (c *Comm) submitAsync(fn func() error) *Work {
	g := c.g
	if err := g.Err(); err != nil {
		if err == ErrClosed {
			return failedWork(err)
		}
		return failedWork(&BrokenError{Cause: err})
	}
	a := &c.async
	w := &Work{done: make(chan struct{}), fn: fn}
	a.mu.Lock()
	if !a.started {
		a.started = true
		a.q = make(chan *Work, 1024)
		a.exited = make(chan struct{})
		go c.asyncLoop()
	}
	a.pending++
	a.mu.Unlock()
	select {
	case a.q <- w:
	case <-g.brokenCh:
		c.finishAsync(w, g.Err())
	}
	return w
}

func (c *Comm) finishAsync(w *Work, err error) {
	w.err = err
	// Not pending any more before anyone waiting on it wakes.
	c.async.mu.Lock()
	c.async.pending--
	c.async.mu.Unlock()
	close(w.done)
}

func (c *Comm) asyncLoop() {
	a := &c.async
	defer close(a.exited)
	for {
		select {
		case w := <-a.q:
			c.finishAsync(w, w.fn())
		case <-c.g.brokenCh:
			// Fail what is still queued, then end.
			for {
				select {
				case w := <-a.q:
					err := c.g.Err()
					if err != ErrClosed {
						err = &BrokenError{Cause: err}
					}
					c.finishAsync(w, err)
				default:
					return
				}
			}
		}
	}
}

// PendingAsync returns the number of asynchronous operations not finished.
func (c *Comm) PendingAsync() int {
	c.async.mu.Lock()
	defer c.async.mu.Unlock()
	return c.async.pending
}

// waitAsyncExit waits for the comm's async goroutine to end (Close).
func (c *Comm) waitAsyncExit() {
	c.async.mu.Lock()
	started := c.async.started
	c.async.mu.Unlock()
	if started {
		<-c.async.exited
	}
}

// AllReduceAsync starts AllReduce on data and returns at once; data must
// not be touched until the Work is done. Operations of one Comm run in the
// order they were started. Every rank must start the same sequence of
// collectives.
func AllReduceAsync[T Float](ctx context.Context, c *Comm, data []T, op Op) *Work {
	if c == nil {
		return failedWork(invalidArg("nil Comm"))
	}
	return c.submitAsync(func() error { return AllReduce(ctx, c, data, op) })
}

// AllReduceTensorAsync starts AllReduceTensor and returns at once.
func AllReduceTensorAsync[T Float](ctx context.Context, c *Comm, t *Tensor[T], op Op, s Strategy) *Work {
	if c == nil {
		return failedWork(invalidArg("nil Comm"))
	}
	return c.submitAsync(func() error { return AllReduceTensor(ctx, c, t, op, s) })
}

// BroadcastAsync starts Broadcast and returns at once.
func BroadcastAsync[T Float](ctx context.Context, c *Comm, data []T, root int) *Work {
	if c == nil {
		return failedWork(invalidArg("nil Comm"))
	}
	return c.submitAsync(func() error { return Broadcast(ctx, c, data, root) })
}
