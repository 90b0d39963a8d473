//go:build mpi && cgo

package mpi

import (
	"context"
	"sync"
	"time"
	"unsafe"
)

// A blocking collective call (MPI_Comm_split: MPI has no nonblocking form)
// holds the thread that makes it until every process of the communicator
// made it too. Where the process has one thread for MPI (funneled) or one
// call at a time (serialized), two such calls on different communicators
// that share processes deadlock when the processes make them in different
// orders: each process's one MPI thread waits in the call the other has not
// reached (two sub-groups splitting at once). So before a blocking call,
// the processes of its communicator agree that each of them holds its turn
// for it (takeTurn): one nonblocking round after another, each process
// contributes whether it holds the turn for this World, and the call is
// made when all do. A process gives its turn to the waiting World of the
// lowest id, which is the same World on every process, so the rounds end.

// turns is a process's turn for blocking collective calls.
type turns struct {
	mu      sync.Mutex
	holder  *World
	waiting map[*World]struct{}
	changed chan struct{} // closed when the holder or the waiting set changes
}

// join adds w to the Worlds waiting for a turn.
func (t *turns) join(w *World) {
	t.mu.Lock()
	if t.waiting == nil {
		t.waiting = map[*World]struct{}{}
	}
	t.waiting[w] = struct{}{}
	t.signal()
	t.mu.Unlock()
}

// take gives the turn to w if nobody holds it and w has the lowest id of
// the waiting Worlds. It returns the channel that is closed at the next
// change.
func (t *turns) take(w *World) (bool, chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	if t.holder != nil {
		return t.holder == w, t.changed
	}
	for o := range t.waiting {
		if o.id < w.id {
			return false, t.changed
		}
	}
	t.holder = w
	return true, t.changed
}

// give gives w's turn back (its round failed).
func (t *turns) give(w *World) {
	t.mu.Lock()
	if t.holder == w {
		t.holder = nil
		t.signal()
	}
	t.mu.Unlock()
}

// end ends w's wait and turn: its call returned (or it stopped waiting).
func (t *turns) end(w *World) {
	t.mu.Lock()
	delete(t.waiting, w)
	if t.holder == w {
		t.holder = nil
	}
	t.signal()
	t.mu.Unlock()
}

// signal wakes the waits for a change (t.mu held).
func (t *turns) signal() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// takeTurn returns once every process of w holds its turn for w's
// blocking collective call of collective #seq, which every process of w
// is about to make (they all arrived at it); the caller makes the call,
// then ends the turn (turns.end). With MPI_THREAD_MULTIPLE the calls need
// no turn. It reports false when w closed meanwhile (the turn is ended).
func (w *World) takeTurn(seq uint64) bool {
	if w.mode == modeConcurrent {
		return true
	}
	t := &w.exec.turns
	t.join(w)
	for {
		mine, changed := t.take(w)
		all, ok := w.turnRound(seq, mine)
		if !ok {
			t.end(w)
			return false
		}
		if all {
			return true
		}
		if mine {
			t.give(w)
		}
		// Wait for a change here (a turn given back, a World joining or
		// leaving), briefly: the other processes' turns change too.
		select {
		case <-changed:
		case <-time.After(time.Millisecond):
		}
	}
}

// turnRound is one round of takeTurn: an MPI_Iallgather of one byte on w
// (whether the process holds its turn); it reports whether every process
// does, and false for ok when w closed.
func (w *World) turnRound(seq uint64, mine bool) (all, ok bool) {
	r := w.getRequest(kindCollective, "MPI_Iallgather", -1, 0)
	r.seq, r.n = seq, 1
	r.cmem = cMalloc(1 + w.size)
	r.buf = r.cmem
	b := unsafe.Slice((*byte)(r.cmem), 1+w.size)
	b[0] = 0
	if mine {
		b[0] = 1
	}
	r.setSubs(1)
	if err := w.collective(context.Background(), r, postAllgather); err != nil {
		return false, false
	}
	all = true
	for _, v := range b[1:] {
		all = all && v == 1
	}
	r.release()
	return all, true
}
