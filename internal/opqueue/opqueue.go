// Package opqueue is a comm's queue of asynchronous operations: they run one
// at a time, in the order they were queued, on a worker goroutine that lives
// while the queue is not empty. A caller can wait for the queue to empty
// (a synchronous call does, so synchronous and asynchronous calls on one
// comm run in call order), and closing the queue refuses new operations and
// waits for the queued ones. What an operation does, and how its end is
// reported, is the caller's: the queue only orders and counts them.
//
// One operation at a time holds the comm: a synchronous call (Claim, once
// the queued operations ended and none was queued meanwhile), the queuing of
// an asynchronous one (Hold around Push), or the comm's closing (Take, which
// waits for the holder); a second one at the same time is refused.
//
// A worker's life allocates nothing (its idle channel is made only for a
// caller that waits for it), and an operation runs under a Ctx: its
// caller's context marked as the worker's.
package opqueue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Claim's errors.
var (
	ErrHeld   = errors.New("opqueue: another operation holds the comm")
	ErrQueued = errors.New("opqueue: an operation was queued while the claim waited")
)

// Queue is a queue of operations of type T, run by the function given to
// Init. The zero Queue needs Init before its first Push.
type Queue[T any] struct {
	mu    sync.Mutex
	run   func(T)
	items []T
	head  int
	// pending (queued or running, until Done) and running (a worker runs)
	// change under mu; Wait and Pending read them without it.
	pending atomic.Int64
	running atomic.Bool
	// idle is closed when the current worker exits: made only when a
	// caller waits for it, so that a worker's life allocates nothing.
	idle   chan struct{}
	worker func() // the worker (made once: starting it allocates nothing)
	closed bool
	held   atomic.Bool // an operation holds the comm (Claim, Hold, Take)
}

// Init sets the function the worker runs each operation with. run must
// call Done once the operation counts as finished (it may call it before
// returning, or leave it to whoever finishes the operation later).
func (q *Queue[T]) Init(run func(T)) { q.run, q.worker = run, q.work }

// Push queues op as the next operation and starts a worker when none runs;
// it reports false, queuing nothing, when the queue is closed.
func (q *Queue[T]) Push(op T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.items = append(q.items, op)
	q.pending.Add(1)
	if !q.running.Load() {
		q.running.Store(true)
		go q.worker()
	}
	return true
}

// work runs queued operations until the queue is empty, then closes idle
// (if a caller made it).
func (q *Queue[T]) work() {
	var zero T
	for {
		q.mu.Lock()
		if q.head == len(q.items) {
			clear(q.items)
			q.items, q.head = q.items[:0], 0
			idle := q.idle
			q.idle = nil
			q.running.Store(false)
			q.mu.Unlock()
			if idle != nil {
				close(idle)
			}
			return
		}
		op := q.items[q.head]
		q.items[q.head] = zero
		q.head++
		q.mu.Unlock()
		q.run(op)
	}
}

// Done counts one operation as finished.
func (q *Queue[T]) Done() {
	q.mu.Lock()
	q.pending.Add(-1)
	q.mu.Unlock()
}

// Pending returns the number of operations queued or running and not Done.
func (q *Queue[T]) Pending() int { return int(q.pending.Load()) }

// Wait waits until the queue is empty (its worker exited) or ctx ends
// (returning ctx.Err()).
func (q *Queue[T]) Wait(ctx context.Context) error {
	if !q.running.Load() {
		return nil // no worker (what idleCh would have said under mu)
	}
	q.mu.Lock()
	idle := q.idleCh()
	q.mu.Unlock()
	return WaitIdle(ctx, idle)
}

// idleCh returns the channel closed when the running worker exits (nil
// when none runs); q.mu held.
func (q *Queue[T]) idleCh() chan struct{} {
	if q.running.Load() && q.idle == nil {
		q.idle = make(chan struct{})
	}
	return q.idle
}

// Close refuses new operations and waits for the queued ones.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closed = true
	idle := q.idleCh()
	q.mu.Unlock()
	if idle != nil {
		<-idle
	}
}

// WaitIdle waits for idle to close (nil: nothing to wait for) or ctx to end
// (returning ctx.Err()).
func WaitIdle(ctx context.Context, idle <-chan struct{}) error {
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil // idle already wins over an ended ctx (select picks at random)
	default:
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Claim takes the comm for a synchronous call once the queued operations
// ended (ctx bounds that wait; its error is returned): ErrHeld when another
// operation holds the comm, ErrQueued when one was queued meanwhile.
// Release ends the claim.
func (q *Queue[T]) Claim(ctx context.Context) error {
	if err := q.Wait(ctx); err != nil {
		return err
	}
	if !q.held.CompareAndSwap(false, true) {
		return ErrHeld
	}
	if q.Pending() > 0 {
		q.held.Store(false)
		return ErrQueued
	}
	return nil
}

// Hold takes the comm at once, to queue an operation (Push): false when
// another operation holds it. Release ends the hold.
func (q *Queue[T]) Hold() bool { return q.held.CompareAndSwap(false, true) }

// Release ends a claim, a hold or a take.
func (q *Queue[T]) Release() { q.held.Store(false) }

// Held reports whether an operation holds the comm.
func (q *Queue[T]) Held() bool { return q.held.Load() }

// Take takes the comm for its closing, waiting until the operation that
// holds it released it. Release hands it back.
func (q *Queue[T]) Take() {
	for !q.held.CompareAndSwap(false, true) {
		time.Sleep(100 * time.Microsecond)
	}
}

// Ctx is the context an operation runs under on the worker: its caller's
// (Context), marked as the worker's by Value(Key) returning Val.
type Ctx struct {
	context.Context
	Key, Val any
}

func (c *Ctx) Value(k any) any {
	if k == c.Key {
		return c.Val
	}
	return c.Context.Value(k)
}
