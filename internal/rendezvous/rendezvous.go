// Package rendezvous is where a process's ranks meet before a call: reusable
// generations that complete once all n ranks arrived, each arrival carrying
// the rank's fingerprint and a flag, and each generation a result its
// waiters read after it completed. A waiter spins on its generation (Spin),
// then sleeps (Wait, through internal/park) until it completes, the group
// breaks, a rank that has not arrived is gone, the deadline passes or the
// waiter's context ends; the errors each of these makes are the caller's.
// Nothing here allocates in steady state.
package rendezvous

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/internal/liveness"
	"github.com/gocoll/gocoll/internal/park"
	"github.com/gocoll/gocoll/internal/waitrec"
)

// FP is a call's fingerprint: ranks agree when theirs are equal. Invalid
// reports a rank whose own arguments failed their checks (the one a
// mismatch names first).
type FP interface {
	comparable
	Invalid() bool
}

// Barrier is a reusable rendezvous of n ranks carrying fingerprints of
// type F and results of type R. Every method but Seen requires the lock
// (Lock).
type Barrier[F FP, R any] struct {
	mu      sync.Mutex
	n       int
	arrived int
	gen     uint64
	genSeen atomic.Uint64 // gen, readable without mu (spinning waiters)
	present []bool
	fps     []F
	lastSeq []int64
	flags   []bool  // this generation's flag per rank
	results [2]*R   // per generation parity
	store   [2]R    // storage for results, per generation parity
	allFlag [2]bool // per generation parity: every rank's flag was set
	// completing is set while the last rank to arrive completes the
	// generation outside the lock (meeting other processes).
	completing bool
}

// Init makes b a rendezvous of n ranks.
func (b *Barrier[F, R]) Init(n int) {
	b.n = n
	b.present = make([]bool, n)
	b.fps = make([]F, n)
	b.lastSeq = make([]int64, n)
	for i := range b.lastSeq {
		b.lastSeq[i] = -1
	}
	b.flags = make([]bool, n)
}

// Lock locks b. poll: never park the goroutine (a parked lock waiter takes
// a runtime sudog, as a channel wait does); the critical sections are a few
// hundred nanoseconds, so it polls, yielding between polls.
func (b *Barrier[F, R]) Lock(poll bool) {
	if !poll {
		b.mu.Lock()
		return
	}
	for i := 0; !b.mu.TryLock(); i++ {
		if i >= 16 {
			runtime.Gosched()
		}
	}
}

// Unlock unlocks b.
func (b *Barrier[F, R]) Unlock() { b.mu.Unlock() }

// N is the number of ranks.
func (b *Barrier[F, R]) N() int { return b.n }

// Gen is the current generation's number.
func (b *Barrier[F, R]) Gen() uint64 { return b.gen }

// Seen is the current generation's number, read without the lock.
func (b *Barrier[F, R]) Seen() uint64 { return b.genSeen.Load() }

// Arrive enters rank r into the current generation with its fingerprint,
// flag and latest call number seq. It returns the generation, and whether
// r is the last to arrive (then r completes it: Complete).
func (b *Barrier[F, R]) Arrive(r int, fp F, flag bool, seq int64) (gen uint64, last bool) {
	b.present[r] = true
	b.flags[r] = flag
	b.fps[r] = fp
	b.lastSeq[r] = seq
	b.arrived++
	return b.gen, b.arrived == b.n
}

// Present reports whether rank r arrived in the current generation, and
// LastSeq is the call number it arrived with last (-1: never).
func (b *Barrier[F, R]) Present(r int) bool  { return b.present[r] }
func (b *Barrier[F, R]) LastSeq(r int) int64 { return b.lastSeq[r] }

// Missing returns the ranks that have not arrived in the current
// generation, numbered from base, and the call number each arrived with
// last (-1: never).
func (b *Barrier[F, R]) Missing(base int) (ranks []int, lastSeq []int64) {
	for r, here := range b.present {
		if !here {
			ranks = append(ranks, base+r)
			lastSeq = append(lastSeq, b.lastSeq[r])
		}
	}
	return ranks, lastSeq
}

// Spin polls, without the lock, until generation gen has completed (true)
// or d has passed (false): park.Spin on the generation's number, for cores
// that are spare.
func (b *Barrier[F, R]) Spin(gen uint64, d time.Duration) bool {
	return park.Spin(&b.genSeen, gen+1, d)
}

// FP is rank r's fingerprint in the generation being completed.
func (b *Barrier[F, R]) FP(r int) F { return b.fps[r] }

// Differ returns two ranks whose fingerprints differ, once all arrived:
// rank 0 and the first rank unlike it, or a rank with invalid arguments
// first when rank 0's are valid. ok is false when all agree.
func (b *Barrier[F, R]) Differ() (rank, peer int, ok bool) {
	for r := 1; r < b.n; r++ {
		if b.fps[r] == b.fps[0] {
			continue
		}
		if !b.fps[0].Invalid() {
			for q := 0; q < b.n; q++ {
				if b.fps[q].Invalid() {
					return q, 0, true
				}
			}
		}
		return 0, r, true
	}
	return 0, 0, false
}

// AllFlags reports whether every rank's flag is set.
func (b *Barrier[F, R]) AllFlags() bool {
	all := true
	for _, f := range b.flags {
		all = all && f
	}
	return all
}

// Slot is the storage for the current generation's result (reused two
// generations later, when every waiter of this one has read it).
func (b *Barrier[F, R]) Slot() *R { return &b.store[b.gen&1] }

// SetCompleting marks the generation as being completed outside the lock
// (the waiters keep waiting), and Completing reports it.
func (b *Barrier[F, R]) SetCompleting(on bool) { b.completing = on }
func (b *Barrier[F, R]) Completing() bool      { return b.completing }

// Complete ends the current generation with result res (nil: none) and
// flag all, and starts the next.
func (b *Barrier[F, R]) Complete(res *R, all bool) {
	b.results[b.gen&1] = res
	b.allFlag[b.gen&1] = all
	b.arrived = 0
	b.gen++
	b.genSeen.Store(b.gen)
	clear(b.present)
}

// Result returns generation gen's result and flag once it completed (ok).
func (b *Barrier[F, R]) Result(gen uint64) (res *R, all, ok bool) {
	if b.gen == gen {
		return nil, false, false
	}
	return b.results[gen&1], b.allFlag[gen&1], true
}

// Absent appends to missing the ranks, numbered from base, that have not
// arrived in generation gen, unless gen is over (over).
func (b *Barrier[F, R]) Absent(gen uint64, base int, missing []int) (_ []int, over bool) {
	b.Lock(false)
	defer b.Unlock()
	if b.gen != gen {
		return missing, true
	}
	for r, here := range b.present {
		if !here {
			missing = append(missing, base+r)
		}
	}
	return missing, false
}

// Env is what a waiting rank reads of its group besides the rendezvous.
type Env interface {
	// Broken reports whether the group broke.
	Broken() bool
	// Gone returns the mark of rank r (0..n-1) if it is gone, else nil.
	Gone(r int) *liveness.Mark
}

// Waiter is a rank waiting for a generation: its wake channel, and its
// group.
type Waiter struct {
	Wake <-chan struct{} // the rank's wake channel
	Live *liveness.Board // the group's gone ranks
	Env  Env             // the group
	Base int             // the number of rank 0 in Outcome.Missing
}

// End is how a wait for a generation ended.
type End int

const (
	Completed End = iota // the generation completed (Res, All)
	Broken               // the group broke, the waiter's context alive
	Gone                 // a rank that had not arrived is gone (Rank, Mark)
	TimedOut             // the deadline passed, or the context ended (Ctx; Missing, LastSeq)
)

// Outcome is how a wait for a generation ended, and what it found.
type Outcome[R any] struct {
	End     End
	Res     *R             // Completed: the generation's result (nil: none)
	All     bool           // Completed: every rank's flag was set
	Rank    int            // Gone: the rank, numbered from 0
	Mark    *liveness.Mark // Gone: its mark
	Ctx     error          // TimedOut: the context's error (nil: the deadline passed)
	Missing []int          // TimedOut: the ranks that had not arrived, numbered from Waiter.Base
	LastSeq []int64        // TimedOut: each one's latest call number (Missing)
}

// Wait sleeps through p (the wait's sleeps from its beginning to its
// deadline; it does not escape) until generation gen completes (a generation
// completed at the same moment as a deadline counts as completed), the
// group breaks, a rank that has not arrived is gone, the deadline passes
// or ctx ends; a group that broke when ctx ended too is ctx's timeout. A
// rank gone before the wait is looked for before sleeping; the sleeps end
// when one goes (it wakes every rank). A deadline that passes while the
// last rank completes the generation outside the lock (SetCompleting:
// meeting other processes under its own deadline) is renewed.
func (b *Barrier[F, R]) Wait(ctx context.Context, gen uint64, p *park.Wait, w Waiter) Outcome[R] {
	seen := w.Live.Events()
	look := w.Live.Any()
	var ctxErr error
	timedOut := false
	for {
		if !look {
			t := p.Ticket()
			if b.Seen() == gen && !w.Env.Broken() && w.Live.Events() == seen {
				switch _, ev := park.Next[struct{}](p, ctx, t, nil, w.Wake); ev {
				case park.Woken:
					continue
				case park.TimedOut:
					timedOut = true
				case park.Cancelled:
					ctxErr = ctx.Err()
				}
			}
		}
		look = false
		seen = w.Live.Events()
		b.Lock(p.OnBell())
		o, over := b.ended(ctx, gen, p, w, timedOut, ctxErr)
		b.Unlock()
		if over {
			return o
		}
		timedOut = false // renewed, if it had passed
	}
}

// ended is Wait's look, under the lock, at what ends it: generation gen
// completed (possibly at the same moment as the deadline), the group
// broke, a rank that has not arrived is gone, the deadline passed
// (timedOut) or ctx ended (ctxErr). A deadline that passed while the last
// rank completes the generation is renewed.
func (b *Barrier[F, R]) ended(ctx context.Context, gen uint64, p *park.Wait, w Waiter, timedOut bool, ctxErr error) (Outcome[R], bool) {
	if res, all, over := b.Result(gen); over {
		return Outcome[R]{End: Completed, Res: res, All: all}, true
	}
	if w.Env.Broken() {
		if ctx.Err() == nil {
			return Outcome[R]{End: Broken}, true
		}
		// Broken, and the waiter's own context ended too: its own timeout.
		ctxErr = ctx.Err()
	} else if w.Live.Any() {
		// A rank that has not arrived and is gone never will.
		for r, here := range b.present {
			if m := w.Env.Gone(r); !here && m != nil {
				return Outcome[R]{End: Gone, Rank: r, Mark: m}, true
			}
		}
	}
	if timedOut && b.completing && ctxErr == nil {
		// Every rank is here and the last one is meeting the other
		// processes, under its own deadline: keep waiting.
		p.Renew(waitrec.Now())
		return Outcome[R]{}, false
	}
	if !timedOut && ctxErr == nil {
		return Outcome[R]{}, false
	}
	o := Outcome[R]{End: TimedOut, Ctx: ctxErr}
	o.Missing, o.LastSeq = b.Missing(w.Base)
	return o, true
}
