package collective

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/parktimer"
	"github.com/gocoll/gocoll/internal/waitrec"
)

// fingerprint identifies a call; every rank's must match before data moves.
type fingerprint struct {
	kind     collKind
	op       Op
	dt       backend.DType
	count    int64
	root     int32
	strategy Strategy
	path     dataPath
	noF64    bool // f64 without f64 kernels on some rank (the exact host path)
}

func (f fingerprint) String() string {
	switch f.kind {
	case collBarrier, collInvalid, collNone:
		return f.kind.String()
	}
	s := fmt.Sprintf("%s(op=%s, type=%s, count=%d, root=%d, strategy=%s, data=%s", f.kind, f.op, f.dt, f.count, f.root, f.strategy, f.path)
	if f.noF64 {
		s += ", reduced on the host"
	}
	return s + ")"
}

// barrier is a reusable rendezvous of n ranks that carries fingerprints. A
// generation completes when all n ranks arrived; waiting honours the
// caller's context, CommunicationTimeout and the group breaking. It does not
// allocate in steady state.
type barrier struct {
	mu      sync.Mutex
	n       int
	arrived int
	gen     uint64
	genSeen atomic.Uint64 // gen, readable without mu (spinning waiters)
	present []bool
	fps     []fingerprint
	lastSeq []int64
	results [2]*MismatchError // per generation parity
	mism    []MismatchError   // preallocated storage for results
	flags   []bool            // this generation's flag per rank
	allFlag [2]bool           // per generation parity: every rank's flag was set
	// completing is set while the last local rank meets the other
	// processes.
	completing bool
}

func (b *barrier) init(n int) {
	b.n = n
	b.present = make([]bool, n)
	b.fps = make([]fingerprint, n)
	b.lastSeq = make([]int64, n)
	for i := range b.lastSeq {
		b.lastSeq[i] = -1
	}
	b.mism = make([]MismatchError, 2)
	b.flags = make([]bool, n)
}

// arrive enters c's rank into the current generation with fp and waits for
// the others. phase names the wait in timeout errors. It returns a
// *MismatchError if the fingerprints differ (every rank gets one), a
// *TimeoutError (the group is then broken), or the group's failure.
func (c *Comm) arrive(ctx context.Context, fp fingerprint, phase string) error {
	_, err := c.arriveFlag(ctx, fp, phase, false)
	return err
}

// arriveFlag is arrive that also contributes a flag and returns whether
// every rank's flag was set (the same answer on every rank).
func (c *Comm) arriveFlag(ctx context.Context, fp fingerprint, phase string, flag bool) (bool, error) {
	g := c.g
	b := &g.bar
	b.lock()
	if g.Err() != nil {
		b.mu.Unlock()
		return false, c.brokenErr()
	}
	b.present[c.local] = true
	b.flags[c.local] = flag
	b.fps[c.local] = fp
	b.lastSeq[c.local] = int64(c.seq)
	b.arrived++
	gen := b.gen
	if b.arrived == b.n {
		res := b.compare(gen)
		if res != nil {
			// compare numbers this process's ranks from 0.
			res.Rank += g.base
			res.Peer += g.base
		}
		all := true
		for _, f := range b.flags {
			all = all && f
		}
		if g.tr != nil {
			// The local ranks met: now the processes. The others keep
			// waiting (their timers do not fire while this completes).
			b.completing = true
			b.mu.Unlock()
			var err error
			res, all, err = c.crossProcess(ctx, fp, res, all, phase)
			b.mu.Lock()
			b.completing = false
			if err != nil {
				b.mu.Unlock()
				return false, err
			}
		}
		b.results[gen&1] = res
		b.allFlag[gen&1] = all
		b.arrived = 0
		b.gen++
		b.genSeen.Store(b.gen)
		for r := range b.present {
			b.present[r] = false
			if r != c.local {
				g.comms[r].poke()
			}
		}
		b.mu.Unlock()
		if res != nil {
			return false, c.mismatchFor(res)
		}
		return all, nil
	}
	b.mu.Unlock()

	// Wait for the generation to complete: on a machine with cores to spare,
	// spin briefly first (a goroutine woken from a channel costs tens of
	// microseconds, a collective of a few KiB about as much), then block.
	if spinBarrier {
		// Poll the atomic in a tight loop (the cores are spare: a
		// runtime.Gosched between polls costs a trip through the
		// scheduler, which looks for work on every idle P), yielding only
		// now and then.
	spin:
		for start, k := time.Now(), 0; time.Since(start) < barrierSpin; k++ {
			for i := 0; i < 256; i++ {
				if b.genSeen.Load() != gen {
					break spin
				}
			}
			if k%64 == 63 {
				runtime.Gosched()
			}
		}
	}
	var deadline time.Time
	var due time.Duration // without doorbells: the deadline for c.wt
	bell := useBell.Load()
	// A rank gone before this wait is looked for before sleeping; the
	// sleeps end when one goes (markGone rings and pokes every rank).
	seen := g.goneEvents.Load()
	look := g.nGone.Load() > 0
	now := c.beginWait(phase, waitrec.Barrier, gen)
	if bell {
		deadline = time.Now().Add(g.cfg.CommunicationTimeout)
	} else {
		due = parktimer.DueAfter(now, g.cfg.CommunicationTimeout)
		c.wt.Arm(now, due)
	}
	var ctxErr error
	timedOut := false
	for {
		if !look {
			if bell {
				t := c.bell.Ticket()
				if b.genSeen.Load() == gen && g.Err() == nil && g.goneEvents.Load() == seen {
					if timedOut, ctxErr = c.bellWait(ctx, t, deadline); !timedOut && ctxErr == nil {
						continue
					}
				}
			} else {
				select {
				case <-c.wake:
				case <-c.wt.C():
					if !c.wt.Fired(monoNow(), due) {
						continue
					}
					timedOut = true
				case <-ctx.Done():
					ctxErr = ctx.Err()
				}
			}
		}
		look = false
		seen = g.goneEvents.Load()
		b.lock()
		if b.gen != gen {
			// Completed (possibly at the same moment as a timeout).
			res := b.results[gen&1]
			all := b.allFlag[gen&1]
			b.mu.Unlock()
			c.endWait()
			if res != nil {
				return false, c.mismatchFor(res)
			}
			return all, nil
		}
		if g.Err() != nil && ctx.Err() == nil {
			b.mu.Unlock()
			c.endWait()
			return false, c.brokenErr()
		}
		if g.Err() != nil {
			// Broken, and this rank's own context ended too: its own error.
			ctxErr = ctx.Err()
		}
		if g.nGone.Load() > 0 && g.Err() == nil {
			// A rank that has not arrived and is gone never will.
			for r, here := range b.present {
				if gi := g.comms[r].gone.Load(); !here && gi != nil {
					b.mu.Unlock()
					c.endWait()
					ge := c.goneErr(g.base+r, gi, phase)
					c.breakWith(ge)
					return false, ge
				}
			}
		}
		if timedOut && b.completing && ctxErr == nil {
			// Every local rank is here and the last one is meeting the
			// other processes, under its own deadline: keep waiting.
			timedOut = false
			if bell {
				deadline = time.Now().Add(g.cfg.CommunicationTimeout)
			} else {
				now := monoNow()
				due = parktimer.DueAfter(now, g.cfg.CommunicationTimeout)
				c.wt.Arm(now, due)
			}
			b.mu.Unlock()
			continue
		}
		if timedOut || ctxErr != nil {
			te := &TimeoutError{Seq: c.seq, Phase: phase, Ctx: ctxErr}
			for r, p := range b.present {
				if !p {
					te.Missing = append(te.Missing, g.base+r)
					te.LastSeq = append(te.LastSeq, b.lastSeq[r])
				}
			}
			b.mu.Unlock()
			c.endWait()
			c.breakWith(te)
			return false, te
		}
		b.mu.Unlock()
	}
}

// lock locks b.mu. With doorbell waits it never parks the goroutine (a
// parked lock waiter takes a runtime sudog, as a channel wait does): the
// critical sections are a few hundred nanoseconds, so it polls, yielding
// between polls.
func (b *barrier) lock() {
	if !useBell.Load() {
		b.mu.Lock()
		return
	}
	for i := 0; !b.mu.TryLock(); i++ {
		if i >= 16 {
			runtime.Gosched()
		}
	}
}

// compare checks the generation's fingerprints; called with mu held.
func (b *barrier) compare(gen uint64) *MismatchError {
	for r := 1; r < b.n; r++ {
		if b.fps[r] != b.fps[0] {
			m := &b.mism[gen&1]
			*m = MismatchError{Rank: 0, Peer: r}
			m.Call = b.fps[0].String()
			m.PeerCall = b.fps[r].String()
			m.invalid = b.fps[0].kind == collInvalid
			// A rank with invalid arguments is the one to name first.
			if b.fps[0].kind != collInvalid {
				for q := 0; q < b.n; q++ {
					if b.fps[q].kind == collInvalid {
						m.Rank, m.Peer, m.invalid = q, 0, true
						m.Call, m.PeerCall = b.fps[q].String(), b.fps[0].String()
						break
					}
				}
			}
			return m
		}
	}
	return nil
}

// mismatchFor returns a copy of m for this rank's caller.
func (c *Comm) mismatchFor(m *MismatchError) error {
	e := *m
	e.Seq = c.seq
	return &e
}

// barrierSpin is how long a rank polls a rendezvous before blocking, when
// GOMAXPROCS leaves a core per rank to spare (never on small machines,
// where spinning steals the cores the other ranks and CPU drivers need):
// as long as a device wait polls (shimdev's defaultSpin). Blocking is the
// rare path: a wake-up costs tens of microseconds (it then sleeps on the
// comm's doorbell, see internal/bell).
const barrierSpin = 2 * time.Millisecond

var spinBarrier = runtime.GOMAXPROCS(0) >= 8
