// Package hang is the hang diagnosis of a process's ranks, while their
// waits go on: for each rank blocked in a call, which call it waits in,
// since when, and which ranks it waits for (those that have not reached the
// call, or not sent or received what it waits for), each with where it is:
// its latest call, or why it is gone. The ranks, their rendezvous and their
// point-to-point operations are read through a Source. With a logger, the
// waits that last are logged while they go on (Log). A wait that ended
// without the ranks it waited for is described by Ended and Gone (the
// messages of collective's TimeoutError and RankGoneError).
package hang

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gocoll/gocoll/internal/liveness"
	"github.com/gocoll/gocoll/internal/waitrec"
)

// Wait describes a rank blocked in a call, waiting for other ranks.
type Wait struct {
	Rank  int       // the waiting rank
	Op    string    // its call
	Seq   uint64    // the call's number (among the rank's point-to-point calls when P2P)
	P2P   bool      // a point-to-point call
	Phase string    // what it waits for
	Since time.Time // when the wait began
	// Missing are the ranks it waits for. LastSeq[i] is Missing[i]'s
	// latest collective call number (0: none yet), -1 for a rank of another
	// process (not known here). Gone[i] says why Missing[i] is gone, or is
	// empty.
	Missing []int
	LastSeq []int64
	Gone    []string
}

func (p Wait) String() string {
	var b strings.Builder
	kind := "call"
	if p.P2P {
		kind = "point-to-point call"
	}
	fmt.Fprintf(&b, "rank %d has waited %v in %s (%s #%d), %s", p.Rank, time.Since(p.Since).Round(time.Millisecond), p.Op,
		kind, p.Seq, p.Phase)
	if len(p.Missing) > 0 {
		b.WriteString(", for")
		for i, r := range p.Missing {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " rank %d", r)
			switch {
			case p.Gone[i] != "":
				fmt.Fprintf(&b, " (gone: %s)", p.Gone[i])
			case p.LastSeq[i] > 0:
				fmt.Fprintf(&b, " (at call #%d)", p.LastSeq[i])
			case p.LastSeq[i] == 0:
				b.WriteString(" (no call yet)")
			}
		}
	}
	return b.String()
}

// Source is what the diagnosis reads of a process's ranks (by local index
// i, or by global rank r).
type Source interface {
	// Ranks returns the number of the process's ranks.
	Ranks() int
	// Record returns rank i's global rank and its wait record.
	Record(i int) (int, *waitrec.Record)
	// Absent appends to missing the ranks that have not reached the
	// rendezvous's generation gen; over: gen has completed.
	Absent(gen uint64, missing []int) (_ []int, over bool)
	// Unmatched appends to missing the peers of rank i's unmatched
	// point-to-point operations, and returns the phase of the first.
	Unmatched(i int, missing []int) (_ []int, phase string)
	// Where returns rank r's latest collective call number (-1: not
	// known here) and why it is gone (empty: it is not).
	Where(r int) (last int64, gone string)
}

// Pending returns the waits of the ranks blocked in a call now, by rank.
func Pending(s Source) []Wait {
	var out []Wait
	for i := range s.Ranks() {
		rank, rec := s.Record(i)
		w, on := rec.Snapshot()
		if !on {
			continue
		}
		p := Wait{Rank: rank, Op: w.Op, Seq: w.Seq, P2P: w.P2P, Phase: w.Phase, Since: w.Since}
		switch w.Peer {
		case waitrec.Barrier:
			var over bool
			if p.Missing, over = s.Absent(w.Gen, p.Missing); over {
				continue // the rendezvous completed; the rank is on its way out
			}
		case waitrec.P2P:
			var phase string
			if p.Missing, phase = s.Unmatched(i, p.Missing); len(p.Missing) == 0 {
				continue // matched: the rank is on its way out
			}
			if p.Phase == "" {
				p.Phase = phase
			}
		default:
			p.Missing = append(p.Missing, w.Peer)
		}
		for _, r := range p.Missing {
			last, why := s.Where(r)
			p.LastSeq = append(p.LastSeq, last)
			p.Gone = append(p.Gone, why)
		}
		out = append(out, p)
	}
	return out
}

// Log logs, at Warn, the waits of s that lasted every or longer, at that
// interval, while any rank waits (liveness.Watch: one goroutine per
// watchdog at a time, which ends when no rank waits and broken is closed).
func Log(w *liveness.Watchdog, every time.Duration, broken <-chan struct{}, s Source, l *slog.Logger) {
	liveness.Watch(w, every, broken, func() []Wait { return Pending(s) }, func(p Wait) {
		if waited := time.Since(p.Since); waited >= every {
			l.Warn("gocoll: rank waiting", "rank", p.Rank, "op", p.Op, "seq", p.Seq, "p2p", p.P2P, "phase", p.Phase,
				"missing", p.Missing, "lastSeq", p.LastSeq, "waited", waited.Round(time.Millisecond), "diagnosis", p.String())
		}
	})
}

// Ended describes a wait that ended before the ranks it waited for came
// (a collective's TimeoutError): where it was, the ranks missing and
// their last call numbers (-1: none), and the context's error when the
// caller's context ended first.
func Ended(phase string, missing []int, lastSeq []int64, ctxErr error) string {
	var b strings.Builder
	verb := "timed out"
	if ctxErr == context.Canceled {
		verb = "cancelled"
	}
	fmt.Fprintf(&b, "%s in %s", verb, phase)
	if len(missing) > 0 {
		fmt.Fprintf(&b, " waiting for rank(s) %v", missing)
	}
	if len(lastSeq) == len(missing) && len(missing) > 0 {
		b.WriteString(" (their last call numbers:")
		for _, s := range lastSeq {
			if s < 0 {
				b.WriteString(" none")
			} else {
				fmt.Fprintf(&b, " #%d", s)
			}
		}
		b.WriteString(")")
	}
	if ctxErr != nil && ctxErr != context.Canceled {
		fmt.Fprintf(&b, ": %v", ctxErr)
	}
	return b.String()
}

// Gone describes a rank that is gone while another waited for it in phase
// (a collective's RankGoneError): why (its function in Group.Run returned,
// failed or panicked: reason; its Comm was closed: closed) and its last
// collective and point-to-point call numbers.
func Gone(rank int, reason string, closed bool, lastSeq, lastP2P uint64, phase string) string {
	how := "its function in Group.Run " + reason
	if closed {
		how = "its Comm was closed"
	}
	return fmt.Sprintf("rank %d is gone (%s after its call #%d and point-to-point call #%d) while this rank waited in %s",
		rank, how, lastSeq, lastP2P, phase)
}
