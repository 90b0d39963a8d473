package collective

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/liveness"
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
// the others (across processes: meet). phase names the wait in timeout
// errors. It returns a *MismatchError if the fingerprints differ (every
// rank gets one), a *TimeoutError (the group is then broken), or the
// group's failure.
func (c *Comm) arrive(ctx context.Context, fp fingerprint, phase string) error {
	_, err := c.meet(ctx, fp, phase, false, c.g.tr != nil)
	return err
}

// meet is arrive that also contributes a flag and returns whether every
// rank's flag was set (the same answer on every rank), across processes
// when cross is set (among this process's ranks only otherwise, for a step
// that needs no agreement between processes: they met at the fingerprint).
func (c *Comm) meet(ctx context.Context, fp fingerprint, phase string, flag, cross bool) (bool, error) {
	g := c.g
	b := &g.bar
	b.Lock(useBell.Load())
	if g.Err() != nil {
		b.Unlock()
		return false, c.brokenErr()
	}
	gen, last := b.Arrive(c.local, fp, flag, int64(c.seq))
	var o rendezvous.Outcome[MismatchError]
	if last {
		var res *MismatchError
		if q, p, differ := b.Differ(); differ {
			// The barrier numbers this process's ranks from 0.
			res = b.Slot()
			*res = MismatchError{Rank: g.base + q, Call: b.FP(q).String(), Peer: g.base + p, PeerCall: b.FP(p).String(),
				invalid: b.FP(q).Invalid()}
		}
		all := b.AllFlags()
		if cross {
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
		o = rendezvous.Outcome[MismatchError]{End: rendezvous.Completed, Res: res, All: all}
	} else {
		b.Unlock()
		// Wait for the generation to complete: on a machine with cores to
		// spare, spin briefly first (a goroutine woken from a channel costs
		// tens of microseconds, a collective of a few KiB about as much),
		// then block.
		if spinBarrier {
			b.Spin(gen, barrierSpin)
		}
		w := park.Begin(&c.bell, &c.wt, useBell.Load(), c.beginWait(phase, waitrec.Barrier, gen), g.cfg.CommunicationTimeout)
		o = b.Wait(ctx, gen, &w, rendezvous.Waiter{Wake: c.wake, Live: &g.live, Env: (*barrierEnv)(g), Base: g.base})
		c.endWait()
	}
	switch o.End {
	case rendezvous.Completed:
		if o.Res != nil {
			return false, c.mismatchFor(o.Res)
		}
		return o.All, nil
	case rendezvous.Broken:
		return false, c.brokenErr()
	case rendezvous.Gone:
		ge := c.goneErr(g.base+o.Rank, o.Mark, phase)
		c.breakWith(ge)
		return false, ge
	}
	te := &TimeoutError{Seq: c.seq, Phase: phase, Ctx: o.Ctx, Missing: o.Missing, LastSeq: o.LastSeq}
	c.breakWith(te)
	return false, te
}

// barrierEnv is the group as its rendezvous waits read it.
type barrierEnv Group

func (e *barrierEnv) Broken() bool              { return (*Group)(e).Err() != nil }
func (e *barrierEnv) Gone(r int) *liveness.Mark { return e.comms[r].gone.Mark() }

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
