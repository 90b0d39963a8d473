// Package waitrec records what a rank waits for now, while it waits: one
// goroutine (the rank's) writes its Record at the start and the end of each
// blocking wait, and any goroutine may read a consistent copy of it
// (Snapshot), for the hang diagnosis, without locks and without allocating.
package waitrec

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// The peer values of a wait that awaits more than one rank.
const (
	Barrier = -1 // a rendezvous: its missing ranks, in generation Gen
	P2P     = -2 // blocked point-to-point operations: their peers
)

// base is the origin of Record.since and of Now: time.Since(base) reads
// the monotonic clock only.
var base = time.Now()

// Base returns the origin of Now.
func Base() time.Time { return base }

// Now is the monotonic clock, from Base.
func Now() time.Duration { return time.Since(base) }

// LogInterval is how often a group with a logger logs each wait that
// lasts: every 30 s, or every quarter of the communication timeout when
// that is shorter.
func LogInterval(timeout time.Duration) time.Duration {
	return max(min(30*time.Second, timeout/4), 10*time.Millisecond)
}

// Record is what a rank waits for now, while it waits. Only the rank's
// goroutine writes it (Begin, End); Snapshot reads it from any goroutine.
// Its fields are atomics under a sequence count, so a wait costs a few
// atomic stores and a monotonic clock read, and a reader never sees the
// fields of two waits mixed: ver is 4k+1 while Begin writes, 4k+2 while
// the wait goes on, a multiple of 4 when the rank does not wait.
type Record struct {
	ver   atomic.Uint64
	op    atomicString
	phase atomicString
	seq   atomic.Uint64
	p2p   atomic.Bool
	peer  atomic.Int64  // the rank awaited; Barrier: the rendezvous' missing ranks; P2P: the blocked operations' peers
	gen   atomic.Uint64 // Barrier: the rendezvous' generation (once it completed, the wait is over)
	since atomic.Int64  // when the wait began, in nanoseconds since Base
}

// atomicString is a string read and written atomically (its data pointer
// and its length, each atomic; a reader pairs them under a sequence count).
type atomicString struct {
	p atomic.Pointer[byte]
	n atomic.Int64
}

// store sets s to v; it stores nothing when s already holds v.
func (s *atomicString) store(v string) {
	if p := unsafe.StringData(v); s.p.Load() != p {
		s.p.Store(p)
	}
	if n := int64(len(v)); s.n.Load() != n {
		s.n.Store(n)
	}
}

// load returns s's data pointer and length. A pair loaded while the writer
// stores may belong to two strings: the reader makes it a string only once
// the sequence count says it is one (checkptr, under -race, rejects a
// string that straddles two allocations).
func (s *atomicString) load() (*byte, int) { return s.p.Load(), int(s.n.Load()) }

// Begin records that the rank waits in call op (its number seq, among the
// point-to-point calls when p2p) in phase for peer (or Barrier, in
// generation gen of the rendezvous; or P2P), and returns the time (Now)
// the wait began. Only the rank's goroutine calls it.
func (w *Record) Begin(op, phase string, seq uint64, p2p bool, peer int, gen uint64) time.Duration {
	now := Now()
	since := int64(now)
	v := (w.ver.Load() | 3) + 1
	w.ver.Store(v + 1)
	// Only what changed since the rank's previous wait is stored (loads
	// of the rank's own stores cost next to nothing).
	w.op.store(op)
	w.phase.store(phase)
	if w.seq.Load() != seq {
		w.seq.Store(seq)
	}
	if w.p2p.Load() != p2p {
		w.p2p.Store(p2p)
	}
	if w.peer.Load() != int64(peer) {
		w.peer.Store(int64(peer))
	}
	if w.gen.Load() != gen {
		w.gen.Store(gen)
	}
	w.since.Store(since)
	w.ver.Store(v + 2)
	return now
}

// End clears the record: the rank no longer waits.
func (w *Record) End() {
	if v := w.ver.Load(); v%4 == 2 {
		w.ver.Store(v + 2)
	}
}

// Snap is a consistent copy of a Record.
type Snap struct {
	Op, Phase string
	Seq       uint64
	P2P       bool
	Peer      int
	Gen       uint64
	Since     time.Time
}

// Snapshot returns the wait w records, and false when the rank does not
// wait now.
func (w *Record) Snapshot() (Snap, bool) {
	for tries := 0; ; tries++ {
		v := w.ver.Load()
		switch v % 4 {
		case 0:
			return Snap{}, false
		case 1:
			// Begin is writing (a few stores): read again.
			if tries > 100 {
				return Snap{}, false
			}
			runtime.Gosched()
			continue
		}
		op, opN := w.op.load()
		phase, phaseN := w.phase.load()
		s := Snap{Seq: w.seq.Load(), P2P: w.p2p.Load(),
			Peer: int(w.peer.Load()), Gen: w.gen.Load(), Since: base.Add(time.Duration(w.since.Load()))}
		if w.ver.Load() == v {
			s.Op, s.Phase = unsafe.String(op, opN), unsafe.String(phase, phaseN)
			return s, true
		}
	}
}
