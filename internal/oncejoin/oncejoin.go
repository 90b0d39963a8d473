// Package oncejoin does a piece of work once for the several callers that
// join it by key: the first to join does it, every one of them picks up
// its outcome, and the last to leave drops the entry. collective's Split
// makes each sub-group this way (in one process, by the Split's call
// number and color; across processes, this process's part of a Split, by
// its call number).
//
// The table is a map the caller owns and guards with its own lock (which
// usually guards more state that the join decides on); Join and Leave run
// under that lock, Do and Wait outside it.
package oncejoin

import "context"

// Entry is the work joined under one key, with its outcome once done.
type Entry[V any] struct {
	done  chan struct{}
	users int // joiners that have not left yet

	// Val and Err are the outcome, to read once Wait returned nil.
	Val V
	Err error
}

// Join returns key's entry in *m, made (with *m made where nil) when
// absent for users joiners, and whether this call made it: that caller
// then does the work and records its outcome with Do.
func Join[K comparable, V any](m *map[K]*Entry[V], key K, users int) (e *Entry[V], first bool) {
	if e = (*m)[key]; e != nil {
		return e, false
	}
	if *m == nil {
		*m = map[K]*Entry[V]{}
	}
	e = &Entry[V]{done: make(chan struct{}), users: users}
	(*m)[key] = e
	return e, true
}

// Do records the outcome of the work and wakes the waiters.
func (e *Entry[V]) Do(v V, err error) {
	e.Val, e.Err = v, err
	close(e.done)
}

// Wait waits until the work is done (nil) or ctx ends first (its error).
// An outcome already there wins over an ended ctx.
func (e *Entry[V]) Wait(ctx context.Context) error {
	select {
	case <-e.done:
		return nil
	default:
	}
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Leave counts a joiner out of key's entry e and drops it from m once the
// last has left.
func Leave[K comparable, V any](m map[K]*Entry[V], key K, e *Entry[V]) {
	if e.users--; e.users == 0 {
		delete(m, key)
	}
}
