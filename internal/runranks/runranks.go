// Package runranks runs one function per rank of a process, each on its
// own goroutine, and waits for all of them (errgroup semantics): a panic is
// recovered into the rank's error, with its stack; a rank's failure is
// reported, then cancels the context the others run under; and the errors
// are collected by rank, with the order in which the failed ranks returned
// (for picking the root cause). What a failure or a rank's end means is the
// caller's.
package runranks

import (
	"context"
	"runtime/debug"
	"sync"
)

// Hooks are what Run calls besides the ranks' functions (i: the rank's
// index).
type Hooks struct {
	// Panicked makes the error of rank i's recovered panic (value v, the
	// goroutine's stack).
	Panicked func(i int, v any, stack []byte) error
	// Failed is called with rank i's failure before the context is
	// cancelled.
	Failed func(i int, err error)
	// Left is called when rank i's function ended, last on its goroutine,
	// also when it ended the goroutine (runtime.Goexit: err is nil then).
	Left func(i int, err error)
}

// Run calls fn(ctx, i) for i in [0, n), each on its own goroutine, and
// waits for all of them. It returns their errors by index, and the indexes
// of the ranks that failed in the order they returned; a rank is recorded
// before its failure cancels the others' context, so it precedes every
// failure that cancel caused.
func Run(ctx context.Context, n int, fn func(ctx context.Context, i int) error, h Hooks) (errs []error, order []int) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	errs = make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			// Deferred, so a function that ends its goroutine is left too.
			defer func() { h.Left(i, err) }()
			err = call(ctx, i, fn, h.Panicked)
			if err == nil {
				return
			}
			h.Failed(i, err)
			// Recorded before the cancel, so a rank that fails because
			// of it comes after its cause in order.
			mu.Lock()
			errs[i] = err
			order = append(order, i)
			mu.Unlock()
			cancel(err)
		}()
	}
	wg.Wait()
	return errs, order
}

// call calls fn for rank i, recovering a panic into its error.
func call(ctx context.Context, i int, fn func(ctx context.Context, i int) error, panicked func(int, any, []byte) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicked(i, p, debug.Stack())
		}
	}()
	return fn(ctx, i)
}
