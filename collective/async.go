package collective

import (
	"context"

	"github.com/gocoll/gocoll/internal/completion"
	"github.com/gocoll/gocoll/internal/opqueue"
)

// Work is an operation started asynchronously on a Comm, a handle passed
// by value. Wait for it before reading or writing its buffers.
//
// The record behind the Work of a point-to-point operation (SendAsync,
// RecvAsync, a Batch's sends and receives) is reused by a later operation
// of the comm once its result was reported (by Wait, Test, WaitAll or
// WaitAny; as MPI_Wait frees a request) and nothing waits for it: until
// then waiting again returns the same result, and from then on the Work
// and its copies report ErrStaleWork (Done reports true), never the later
// operation's result. Such a Work is waited for once; the steady state of
// SendAsync and RecvAsync allocates nothing. The Work of any other form is
// never reused. The zero Work has no operation (ErrStaleWork).
type Work struct{ h completion.H }

// ErrStaleWork: a Work whose result was reported already (Wait, Test,
// WaitAll, WaitAny) and whose record a later point-to-point operation
// reuses, or the zero Work (see Work).
var ErrStaleWork error = completion.ErrStale

// workRec is the record of a queued operation (its Work's): its call (d,
// refused by its own checks when it was queued: refused) or its function
// (Comm.Go), the memory it resolved, released when it ends.
type workRec struct {
	end     completion.Rec
	ctx     opqueue.Ctx // what it runs under: its caller's ctx marked as the comm's worker's
	d       desc
	refused error
	fn      func(ctx context.Context) error
	mem     memUse
	// posted: a point-to-point operation, posted by the run (execP2P)
	// and completed when it meets its peer's (written by the comm's worker).
	posted bool
}

// Wait blocks until the operation finished (returning its error) or ctx
// ends (returning ctx.Err()). The ctx of Wait bounds only the wait: the
// operation itself is bounded by the context it was started with and by
// CommunicationTimeout, and keeps owning its buffers until Done.
func (w Work) Wait(ctx context.Context) error { return w.h.Wait(ctx) }

// Done reports whether the operation has finished; it does not report its
// result (the record is not reused for it).
func (w Work) Done() bool { return w.h.Done() }

// Test reports whether the operation has finished and, if so, its error
// (MPI_Test); it never blocks.
func (w Work) Test() (done bool, err error) { return w.h.Test() }

// WaitAll waits until every one of works finished (zero entries are
// skipped) and returns their errors joined in the order of works (nil when
// all succeeded), or ctx.Err() when ctx ends first (the operations go on).
func WaitAll(ctx context.Context, works ...Work) error {
	return completion.WaitAll(ctx, works, Work.handle)
}

// WaitAny waits until one of works finished and returns its index and
// error; when several have, the first in works. It returns -1 and nil when
// works holds no Work (zero entries are skipped), and -1 and ctx.Err()
// when ctx ends first.
func WaitAny(ctx context.Context, works ...Work) (int, error) {
	return completion.WaitAny(ctx, works, Work.handle)
}

func (w Work) handle() completion.H { return w.h }

func failedWork(err error) Work { return Work{completion.Finished(err)} }

// workerKey marks the context of an operation that the comm's worker runs.
type workerKey struct{}

// newRec returns a record for a queued operation: a point-to-point one's
// (p2p) reused (see Work).
func (c *Comm) newRec(p2p bool) *workRec {
	return c.recs.New(p2p, func(w *workRec) *completion.Rec { return &w.end }, func(w *workRec) { w.ctx = opqueue.Ctx{} })
}

// start queues the call d (the Async forms, Batch): its memory is resolved
// now (the buffers it does not use on this rank are not), and it runs when
// the comm's earlier operations are done; a point-to-point one is then
// posted, and its Work completes when it meets its peer's. A resolution
// that failed refuses the call in its turn, as run refuses it.
func (c *Comm) start(ctx context.Context, d desc) Work {
	if c == nil {
		return failedWork(invalidArg("nil Comm"))
	}
	d.unused(c.rank)
	d.async = true
	w := c.newRec(callSpecs[d.kind].p2p)
	w.d = d
	w.refused = c.hold(&w.mem, &w.d, false)
	return c.enqueue(ctx, d.name(), w)
}

// enqueue queues w as the comm's next operation, holding the memory it
// resolved until the operation ends (so closing that memory waits for it).
func (c *Comm) enqueue(ctx context.Context, name string, w *workRec) Work {
	if ctx == nil {
		ctx = context.Background()
	}
	if !c.queue.Hold() {
		w.mem.Release()
		return failedWork(c.wrapErr(name, 0, ErrConcurrentUse))
	}
	defer c.queue.Release()
	w.ctx = opqueue.Ctx{Context: ctx, Key: workerKey{}, Val: c}
	h := Work{w.end.Start()}
	if !c.g.closed.Load() && c.queue.Push(w) {
		return h
	}
	w.mem.Release()
	if c.commClosed() && !c.g.closed.Load() {
		return failedWork(c.wrapErr(name, 0, errCommClosed))
	}
	return failedWork(c.wrapErr(name, 0, errGroupClosed))
}

// runOp runs the queued operation w (on the comm's queue's worker, which
// runs them in the order they were started: opqueue.Queue).
func (c *Comm) runOp(w *workRec) {
	c.running.Store(w)
	var err error
	switch ctx := &w.ctx; {
	case w.fn != nil:
		err = w.fn(ctx)
	case w.refused != nil:
		err = c.refuse(ctx, &w.d, w.refused)
	default:
		err = c.run(ctx, &w.d)
	}
	c.running.Store(nil)
	if w.posted {
		c.queue.Done() // its operation completes it (p2pEnv.Complete), maybe already has
	} else {
		w.mem.Release()
		c.queue.Done()
		w.end.Finish(err)
	}
	w.d, w.refused, w.fn, w.posted = desc{}, nil, nil, false
	w.end.Let()
}

// waitQueue waits until every queued operation finished (ctx bounds the
// wait).
func (c *Comm) waitQueue(ctx context.Context) error { return c.queue.Wait(ctx) }

// waitLane waits until the comm has no pending point-to-point operation.
func (c *Comm) waitLane(ctx context.Context) error { return opqueue.WaitIdle(ctx, c.lane.Idle()) }

// PendingAsync returns the number of asynchronous operations not finished.
func (c *Comm) PendingAsync() int { return c.queue.Pending() + c.lane.Async() }
