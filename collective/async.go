package collective

import (
	"context"

	"github.com/gocoll/gocoll/internal/completion"
	"github.com/gocoll/gocoll/internal/opqueue"
)

// Work is an operation started asynchronously on a Comm. Wait for it before
// reading or writing its buffers.
type Work struct {
	end completion.C // finished once with the operation's error
	ctx context.Context
	fn  func(ctx context.Context) error
	mem memUse // the memory it resolved (resolve.go), released when done
	// posted: a point-to-point operation, posted by fn (execP2P) and
	// completed when it meets its peer's (written by the comm's worker).
	posted bool
}

// Wait blocks until the operation finished (returning its error) or ctx
// ends (returning ctx.Err()). The ctx of Wait bounds only the wait: the
// operation itself is bounded by the context it was started with and by
// CommunicationTimeout, and keeps owning its buffers until Done. Waiting
// again returns the same result.
func (w *Work) Wait(ctx context.Context) error { return w.end.Wait(ctx) }

// Done reports whether the operation has finished.
func (w *Work) Done() bool { return w.end.Done() }

// Test reports whether the operation has finished and, if so, its error
// (MPI_Test); it never blocks.
func (w *Work) Test() (done bool, err error) { return w.end.Test() }

// WaitAll waits until every one of works finished (nil entries are
// skipped) and returns their errors joined in the order of works (nil when
// all succeeded), or ctx.Err() when ctx ends first (the operations go on).
func WaitAll(ctx context.Context, works ...*Work) error {
	return completion.WaitAll(ctx, works, (*Work).completion)
}

// WaitAny waits until one of works finished and returns its index and
// error; when several have, the first in works. It returns -1 and nil when
// works holds no Work (nil entries are skipped), and -1 and ctx.Err() when
// ctx ends first.
func WaitAny(ctx context.Context, works ...*Work) (int, error) {
	return completion.WaitAny(ctx, works, (*Work).completion)
}

// completion is w's completion; nil for a nil Work.
func (w *Work) completion() *completion.C {
	if w == nil {
		return nil
	}
	return &w.end
}

func failedWork(err error) *Work { return &Work{end: completion.Finished(err)} }

// release drops what the operation held once it ended: the memory it
// resolved, its function and context.
func (w *Work) release() {
	w.mem.Release()
	w.fn, w.ctx = nil, nil
}

// workerKey marks the context of an operation that the comm's worker runs.
type workerKey struct{}

// start queues the call d (the Async forms, Batch): its memory is resolved
// now (the buffers it does not use on this rank are not), and it runs when
// the comm's earlier operations are done; a point-to-point one is then
// posted, and its Work completes when it meets its peer's. A resolution
// that failed refuses the call in its turn, as run refuses it.
func (c *Comm) start(ctx context.Context, d desc) *Work {
	if c == nil {
		return failedWork(invalidArg("nil Comm"))
	}
	d.unused(c.rank)
	d.async = true
	var u memUse
	fn := func(ctx context.Context) error { return c.run(ctx, &d) }
	if err := c.hold(&u, &d, false); err != nil {
		fn = func(ctx context.Context) error { return c.refuse(ctx, &d, err) }
	}
	return c.enqueue(ctx, d.name(), &u, fn)
}

// enqueue queues fn as the comm's next operation, holding the memory u
// resolved until the operation ends (so closing that memory waits for it).
func (c *Comm) enqueue(ctx context.Context, name string, u *memUse, fn func(ctx context.Context) error) *Work {
	if c == nil {
		u.Release()
		return failedWork(invalidArg("nil Comm"))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if !c.queue.Hold() {
		u.Release()
		return failedWork(c.wrapErr(name, 0, ErrConcurrentUse))
	}
	defer c.queue.Release()
	w := &Work{end: completion.Make(), ctx: context.WithValue(ctx, workerKey{}, c), fn: fn, mem: u.take()}
	if !c.g.closed.Load() && c.queue.Push(w) {
		return w
	}
	w.mem.Release()
	if c.commClosed() && !c.g.closed.Load() {
		return failedWork(c.wrapErr(name, 0, errCommClosed))
	}
	return failedWork(c.wrapErr(name, 0, errGroupClosed))
}

// runOp runs the queued operation w (on the comm's queue's worker, which
// runs them in the order they were started: opqueue.Queue).
func (c *Comm) runOp(w *Work) {
	c.running.Store(w)
	err := w.fn(w.ctx)
	c.running.Store(nil)
	if w.posted {
		// Its operation completes it (finish), maybe already has.
		c.queue.Done()
		return
	}
	w.release()
	c.queue.Done()
	w.end.Finish(err)
}

// waitQueue waits until every queued operation finished (ctx bounds the
// wait).
func (c *Comm) waitQueue(ctx context.Context) error { return c.queue.Wait(ctx) }

// waitIdle waits for idle to close (nil: nothing to wait for) or ctx to end.
func waitIdle(ctx context.Context, idle <-chan struct{}) error { return opqueue.WaitIdle(ctx, idle) }

// closeQueue refuses new operations and waits for the queued ones, which
// fail fast once the group is broken.
func (c *Comm) closeQueue() { c.queue.Close() }

// PendingAsync returns the number of asynchronous operations not finished.
func (c *Comm) PendingAsync() int { return c.queue.Pending() + c.lane.Async() }
