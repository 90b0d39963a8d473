// Package completion is the completion of an asynchronous operation: it
// finishes once, with its error; it is waited for under a context (which
// bounds the wait, never the operation), tested without blocking, and
// waited for among several (all of them, or the first to finish).
package completion

import (
	"context"
	"errors"
	"reflect"
)

// C is one operation's completion. Make it with Make; Finish it once.
type C struct {
	done chan struct{}
	err  error
}

// Make returns a completion not finished yet.
func Make() C { return C{done: make(chan struct{})} }

// Finished returns a completion finished with err.
func Finished(err error) C {
	c := Make()
	c.Finish(err)
	return c
}

// Finish records the operation's error and wakes its waiters. It is called
// once.
func (c *C) Finish(err error) {
	c.err = err
	close(c.done)
}

// Wait blocks until the operation finished (returning its error) or ctx
// ends (returning ctx.Err()). An operation finished already wins over an
// ended ctx. Waiting again returns the same result.
func (c *C) Wait(ctx context.Context) error {
	select {
	case <-c.done:
		return c.err
	default:
	}
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done reports whether the operation has finished.
func (c *C) Done() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Test reports whether the operation has finished and, if so, its error;
// it never blocks.
func (c *C) Test() (done bool, err error) {
	if !c.Done() {
		return false, nil
	}
	return true, c.err
}

// WaitAll waits until the completion of every one of items (get returns
// it; nil: the item is skipped) finished and returns their errors joined in
// the order of items (nil when all succeeded), or ctx.Err() when ctx ends
// first (the operations go on).
func WaitAll[T any](ctx context.Context, items []T, get func(T) *C) error {
	var errs []error
	for _, it := range items {
		c := get(it)
		if c == nil {
			continue
		}
		if err := c.Wait(ctx); err != nil {
			if ctx.Err() != nil && !c.Done() {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WaitAny waits until the completion of one of items (get returns it; nil:
// the item is skipped) finished and returns the item's index and error;
// when several have, the first in items. It returns -1 and nil when no item
// has a completion, and -1 and ctx.Err() when ctx ends first.
func WaitAny[T any](ctx context.Context, items []T, get func(T) *C) (int, error) {
	n := 0
	for i, it := range items {
		c := get(it)
		if c == nil {
			continue
		}
		n++
		if done, err := c.Test(); done {
			return i, err
		}
	}
	if n == 0 {
		return -1, nil
	}
	cases := make([]reflect.SelectCase, 0, n+1)
	index := make([]int, 0, n)
	for i, it := range items {
		if c := get(it); c != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c.done)})
			index = append(index, i)
		}
	}
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	chosen, _, _ := reflect.Select(cases)
	if chosen == n {
		return -1, ctx.Err()
	}
	// The first of items that finished, as when it was already done.
	for i, it := range items {
		if c := get(it); c != nil && c.Done() {
			return i, c.err
		}
	}
	return index[chosen], get(items[index[chosen]]).err
}
