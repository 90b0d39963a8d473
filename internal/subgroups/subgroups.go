// Package subgroups keeps the sub-groups a group's Split makes: each one is
// made once, by the first of its members to get there, the others joining
// it (internal/oncejoin); none is made once the group closes (Stop); every
// one made is closed with the group (Close), after those being made.
//
// A Split in one process makes one sub-group per color (Join, by the
// Split's call number and color); a Split across processes makes this
// process's part of it, every sub-group with ranks here, at once
// (JoinProcess, by the Split's call number).
package subgroups

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/gocoll/gocoll/internal/oncejoin"
)

// Group is a sub-group: a group of its own, closed with its parent.
type Group interface {
	comparable
	Close() error
}

// Set is a group's sub-groups. The zero Set is ready.
type Set[G Group] struct {
	mu      sync.Mutex
	local   map[key]*oncejoin.Entry[G]            // in one process
	procs   map[uint64]*oncejoin.Entry[map[int]G] // across processes
	kids    []G
	closing bool           // Stop was called: nothing is made from then on
	making  sync.WaitGroup // the sub-groups being made
}

// key is a sub-group of a Split in one process: the Split's call number,
// and the color.
type key struct {
	seq   uint64
	color int
}

// Join joins the sub-group of color of the Split numbered seq, which users
// members join: the first to join makes it with open, and each waits for
// the outcome (e) until ctx ends (ctxErr). A sub-group made is added to the
// set. ok is false, with nothing made or joined, once the set stopped.
func (s *Set[G]) Join(ctx context.Context, seq uint64, color, users int, open func() (G, error)) (e *oncejoin.Entry[G], ctxErr error, ok bool) {
	return join(ctx, s, &s.local, key{seq, color}, users, open, func(g G) { s.kids = append(s.kids, g) })
}

// JoinProcess joins this process's part of the Split across processes
// numbered seq, which users ranks of this process join: the first makes it
// with part (the sub-groups with ranks here, by color), as Join does. The
// sub-groups made are added to the set, in ascending color order.
func (s *Set[G]) JoinProcess(ctx context.Context, seq uint64, users int, part func() (map[int]G, error)) (e *oncejoin.Entry[map[int]G], ctxErr error, ok bool) {
	return join(ctx, s, &s.procs, seq, users, part, func(m map[int]G) {
		var zero G
		for _, col := range slices.Sorted(maps.Keys(m)) {
			if m[col] != zero {
				s.kids = append(s.kids, m[col])
			}
		}
	})
}

// join joins the work under k in table m with its users: the first to join
// does it, counted in making, and adds what it made (add, under mu) on
// success.
func join[K comparable, V any, G Group](ctx context.Context, s *Set[G], m *map[K]*oncejoin.Entry[V], k K, users int, work func() (V, error), add func(V)) (e *oncejoin.Entry[V], ctxErr error, ok bool) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, nil, false
	}
	e, first := oncejoin.Join(m, k, users)
	if first {
		s.making.Add(1)
	}
	s.mu.Unlock()
	if first {
		v, err := work()
		if err == nil {
			s.mu.Lock()
			add(v)
			s.mu.Unlock()
		}
		s.making.Done()
		e.Do(v, err)
	}
	ctxErr = e.Wait(ctx)
	s.mu.Lock()
	oncejoin.Leave(*m, k, e)
	s.mu.Unlock()
	return e, ctxErr, true
}

// List returns the sub-groups made so far.
func (s *Set[G]) List() []G {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.kids)
}

// Entries returns the number of Splits the set keeps state for: those some
// member has not left yet.
func (s *Set[G]) Entries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.local) + len(s.procs)
}

// Stop makes every later join fail (ok false): the group closes.
func (s *Set[G]) Stop() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
}

// Close closes the sub-groups made, once the ones being made (joined before
// Stop) are done, concurrently, and returns their errors. It drops the
// entries of Splits some members never reached (they failed before, which
// broke the group).
func (s *Set[G]) Close() []error {
	s.making.Wait()
	s.mu.Lock()
	kids := s.kids
	s.kids = nil
	s.local, s.procs = nil, nil
	s.mu.Unlock()
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, k := range kids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := k.Close(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}
