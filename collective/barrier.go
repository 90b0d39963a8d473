package collective

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/park"
	"github.com/gocoll/gocoll/internal/rendezvous"
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

func (f fingerprint) Invalid() bool { return f.kind == collInvalid }

// barrier is the rendezvous of the group's local ranks (internal/rendezvous):
// it carries fingerprints, and a generation's mismatch. Waiting honours the
// caller's context, CommunicationTimeout and the group breaking.
type barrier = rendezvous.Barrier[fingerprint, MismatchError]

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
	b.Lock(useBell.Load())
	if g.Err() != nil {
		b.Unlock()
		return false, c.brokenErr()
	}
	gen, last := b.Arrive(c.local, fp, flag, int64(c.seq))
	if last {
		var res *MismatchError
		if q, p, differ := b.Differ(); differ {
			// The barrier numbers this process's ranks from 0.
			res = b.Slot()
			*res = MismatchError{Rank: g.base + q, Call: b.FP(q).String(), Peer: g.base + p, PeerCall: b.FP(p).String(),
				invalid: b.FP(q).Invalid()}
		}
		all := b.AllFlags()
		if g.tr != nil {
			// The local ranks met: now the processes. The others keep
			// waiting (their timers do not fire while this completes).
			b.SetCompleting(true)
			b.Unlock()
			var err error
			res, all, err = c.crossProcess(ctx, fp, res, all, phase)
			b.Lock(false)
			b.SetCompleting(false)
			if err != nil {
				b.Unlock()
				return false, err
			}
		}
		b.Complete(res, all)
		for r, p := range g.comms {
			if r != c.local {
				p.poke()
			}
		}
		b.Unlock()
		if res != nil {
			return false, c.mismatchFor(res)
		}
		return all, nil
	}
	b.Unlock()

	// Wait for the generation to complete: on a machine with cores to spare,
	// spin briefly first (a goroutine woken from a channel costs tens of
	// microseconds, a collective of a few KiB about as much), then block.
	if spinBarrier {
		b.Spin(gen, barrierSpin)
	}
	// A rank gone before this wait is looked for before sleeping; the
	// sleeps end when one goes (markGone rings and pokes every rank).
	seen := g.live.Events()
	look := g.live.Any()
	bell := useBell.Load()
	w := park.Begin(&c.bell, &c.wt, bell, c.beginWait(phase, waitrec.Barrier, gen), g.cfg.CommunicationTimeout)
	var ctxErr error
	timedOut := false
	for {
		if !look {
			t := w.Ticket()
			if b.Seen() == gen && g.Err() == nil && g.live.Events() == seen {
				switch _, ev := park.Next[struct{}](&w, ctx, t, nil, c.wake); ev {
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
		seen = g.live.Events()
		b.Lock(useBell.Load())
		if res, all, over := b.Result(gen); over {
			// Completed (possibly at the same moment as a timeout).
			b.Unlock()
			c.endWait()
			if res != nil {
				return false, c.mismatchFor(res)
			}
			return all, nil
		}
		if g.Err() != nil && ctx.Err() == nil {
			b.Unlock()
			c.endWait()
			return false, c.brokenErr()
		}
		if g.Err() != nil {
			// Broken, and this rank's own context ended too: its own error.
			ctxErr = ctx.Err()
		}
		if g.live.Any() && g.Err() == nil {
			// A rank that has not arrived and is gone never will.
			for r := range b.N() {
				if gi := g.comms[r].gone.Mark(); !b.Present(r) && gi != nil {
					b.Unlock()
					c.endWait()
					ge := c.goneErr(g.base+r, gi, phase)
					c.breakWith(ge)
					return false, ge
				}
			}
		}
		if timedOut && b.Completing() && ctxErr == nil {
			// Every local rank is here and the last one is meeting the
			// other processes, under its own deadline: keep waiting.
			timedOut = false
			w = park.Begin(&c.bell, &c.wt, bell, monoNow(), g.cfg.CommunicationTimeout)
			b.Unlock()
			continue
		}
		if timedOut || ctxErr != nil {
			te := &TimeoutError{Seq: c.seq, Phase: phase, Ctx: ctxErr}
			te.Missing, te.LastSeq = b.Missing(g.base)
			b.Unlock()
			c.endWait()
			c.breakWith(te)
			return false, te
		}
		b.Unlock()
	}
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
