// Package completion is the completion of an asynchronous operation: it
// finishes once, with its error; it is waited for under a context (which
// bounds the wait, never the operation), tested without blocking, and
// waited for among several (all of them, or the first to finish).
//
// A completion is a record (Rec) reached through handles (H) that carry
// the record's generation: a record may be reused for a later operation
// once its result was reported (by Wait, Test, WaitAll or WaitAny) and
// nothing holds it, and a handle of an earlier generation then reports
// ErrStale, never the later operation's result. Nothing is allocated per
// operation on a reused record: a finished record wakes its waiters through
// one token on a channel of one slot, which each waiter woken passes on to
// the next.
package completion

import (
	"context"
	"errors"
	"reflect"
	"sync"
)

// ErrStale is the error of a handle whose operation's result was reported
// already and whose record was reused by a later operation (or of the zero
// handle, which has no operation).
var ErrStale = errors.New("stale Work: its result was reported and its record reused by a later operation")

// Rec is one operation's completion at a time. Init it once; Start each
// operation on it.
type Rec struct {
	mu      sync.Mutex
	gen     uint64
	done    bool
	spent   bool // the result was reported once
	running bool // the runner holds it (Start until Let)
	freed   bool // handed to free for reuse
	waiters int  // blocked in Wait or WaitAny
	err     error
	sig     chan struct{} // the token of a finished record
	free    func()        // hands the record back for reuse (nil: never reused)
}

// H is a handle to the operation of one generation of a record.
type H struct {
	r   *Rec
	gen uint64
}

// Init prepares r; free (nil: r is never reused) is called once r may be
// reused: its result was reported, its runner let go (Let) and no waiter
// is left.
func (r *Rec) Init(free func()) {
	r.sig = make(chan struct{}, 1)
	r.free = free
}

// Start begins an operation on r (a new record, or one handed to free) and
// returns its handle; the caller is its runner until Let.
func (r *Rec) Start() H {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	r.done, r.spent, r.freed, r.running, r.err = false, false, false, true, nil
	select {
	case <-r.sig: // a token left by a waiter that left on its ctx
	default:
	}
	return H{r, r.gen}
}

// Finished returns the handle of a new record, never reused, finished with
// err.
func Finished(err error) H {
	r := new(Rec)
	r.Init(nil)
	h := r.Start()
	r.Finish(err)
	r.Let()
	return h
}

// Finish records the operation's error and wakes its waiters. It is called
// once per operation.
func (r *Rec) Finish(err error) {
	r.mu.Lock()
	r.done, r.err = true, err
	r.post()
	r.mu.Unlock()
}

// post leaves the token for a waiter (r.mu held).
func (r *Rec) post() {
	select {
	case r.sig <- struct{}{}:
	default:
	}
}

// Let ends the runner's hold on r.
func (r *Rec) Let() {
	r.mu.Lock()
	r.running = false
	reuse := r.reusable()
	r.mu.Unlock()
	if reuse {
		r.free()
	}
}

// reusable reports, once, that r may be reused (r.mu held).
func (r *Rec) reusable() bool {
	if r.free == nil || r.freed || !r.spent || r.running || r.waiters > 0 {
		return false
	}
	r.freed = true
	return true
}

// Gen returns the generation of h's record now (tests).
func (h H) Gen() uint64 { return h.gen }

// result returns (true, its error) when h's operation finished or h is
// stale, and marks the result reported (spend); r.mu held. reuse: r may be
// reused now.
func (h H) result(spend bool) (done bool, err error, reuse bool) {
	r := h.r
	if r.gen != h.gen {
		return true, ErrStale, false
	}
	if !r.done {
		return false, nil, false
	}
	if spend {
		r.spent = true
	}
	return true, r.err, r.reusable()
}

// Wait blocks until the operation finished (returning its error) or ctx
// ends (returning ctx.Err()). An operation finished already wins over an
// ended ctx. Waiting again returns the same result until the record is
// reused, then ErrStale.
func (h H) Wait(ctx context.Context) error {
	r := h.r
	if r == nil {
		return ErrStale
	}
	r.mu.Lock()
	for {
		if done, err, reuse := h.result(true); done {
			r.mu.Unlock()
			if reuse {
				r.free()
			}
			return err
		}
		r.waiters++
		r.mu.Unlock()
		woke := false
		select {
		case <-r.sig:
			woke = true
		case <-ctx.Done():
		}
		r.mu.Lock()
		r.waiters--
		if woke && r.waiters > 0 {
			r.post() // for the next waiter
		}
		if !woke && !r.done {
			r.mu.Unlock()
			return ctx.Err()
		}
	}
}

// Done reports whether the operation has finished (a stale handle's has);
// it does not report the result.
func (h H) Done() bool {
	if h.r == nil {
		return true
	}
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	done, _, _ := h.result(false)
	return done
}

// Test reports whether the operation has finished and, if so, its error;
// it never blocks.
func (h H) Test() (done bool, err error) {
	if h.r == nil {
		return true, ErrStale
	}
	h.r.mu.Lock()
	done, err, reuse := h.result(true)
	h.r.mu.Unlock()
	if reuse {
		h.r.free()
	}
	return done, err
}

// Zero reports whether h is the zero handle.
func (h H) Zero() bool { return h.r == nil }

// WaitAll waits until the operation of every one of items (get returns its
// handle; the zero handle: the item is skipped) finished and returns their
// errors joined in the order of items (nil when all succeeded), or
// ctx.Err() when ctx ends first (the operations go on).
func WaitAll[T any](ctx context.Context, items []T, get func(T) H) error {
	var errs []error
	for _, it := range items {
		h := get(it)
		if h.r == nil {
			continue
		}
		if err := h.Wait(ctx); err != nil {
			if ctx.Err() != nil && !h.Done() {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WaitAny waits until the operation of one of items (get returns its
// handle; the zero handle: the item is skipped) finished and returns the
// item's index and error; when several have, the first in items. It
// returns -1 and nil when no item has an operation, and -1 and ctx.Err()
// when ctx ends first.
func WaitAny[T any](ctx context.Context, items []T, get func(T) H) (int, error) {
	first := func() (int, error) {
		for i, it := range items {
			if h := get(it); h.r != nil && h.Done() {
				// Those before i may have finished since they were asked
				// (on one comm a later operation finishes after the
				// earlier ones): the first of them that has, now.
				for j, jt := range items[:i] {
					if hj := get(jt); hj.r != nil && hj.Done() {
						return j, hj.Wait(ctx)
					}
				}
				return i, h.Wait(ctx)
			}
		}
		return -1, nil
	}
	n := 0
	for _, it := range items {
		if get(it).r != nil {
			n++
		}
	}
	if n == 0 {
		return -1, nil
	}
	if i, err := first(); i >= 0 {
		return i, err
	}
	// Blocked as a waiter of each record (none is reused meanwhile).
	cases := make([]reflect.SelectCase, 0, n+1)
	recs := make([]*Rec, 0, n)
	for _, it := range items {
		if h := get(it); h.r != nil {
			h.r.mu.Lock()
			h.r.waiters++
			h.r.mu.Unlock()
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(h.r.sig)})
			recs = append(recs, h.r)
		}
	}
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	chosen, _, _ := reflect.Select(cases)
	var reused []*Rec
	for k, r := range recs {
		r.mu.Lock()
		r.waiters--
		if k == chosen && r.waiters > 0 {
			r.post()
		}
		if r.reusable() {
			reused = append(reused, r)
		}
		r.mu.Unlock()
	}
	for _, r := range reused {
		r.free()
	}
	if i, err := first(); i >= 0 {
		return i, err
	}
	return -1, ctx.Err()
}

// Pool holds records of type T (each holding a Rec) free for reuse.
type Pool[T any] struct {
	mu   sync.Mutex
	free []*T
}

// New returns a record: when reuse, a free one of p or a new one that goes
// back to p once it may be reused (reset first drops what it holds), else
// a new one never reused. rec returns a record's Rec.
func (p *Pool[T]) New(reuse bool, rec func(*T) *Rec, reset func(*T)) *T {
	if reuse {
		if r := p.Get(); r != nil {
			return r
		}
	}
	r := new(T)
	var free func()
	if reuse {
		free = func() { reset(r); p.Put(r) }
	}
	rec(r).Init(free)
	return r
}

// Get returns a free record, or nil.
func (p *Pool[T]) Get() *T {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := len(p.free)
	if k == 0 {
		return nil
	}
	r := p.free[k-1]
	p.free[k-1] = nil
	p.free = p.free[:k-1]
	return r
}

// Put frees r for reuse.
func (p *Pool[T]) Put(r *T) {
	p.mu.Lock()
	p.free = append(p.free, r)
	p.mu.Unlock()
}

// Len returns the number of free records (tests).
func (p *Pool[T]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}
