package collective

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gocoll/gocoll/internal/hang"
	"github.com/gocoll/gocoll/internal/liveness"
	"github.com/gocoll/gocoll/internal/waitfor"
	"github.com/gocoll/gocoll/internal/waitrec"
)

// Liveness (package doc, "Streams, ownership and failures"): a rank that
// is gone fails every rank waiting for it at once, a wait cycle of blocking
// point-to-point calls inside the process fails at once, and a slow but
// alive rank is waited for up to CommunicationTimeout.
//
//   - A rank is gone once its function in Group.Run returned (or panicked)
//     and the operations it started ended, or once its Comm was closed
//     (markGone). It then never makes another call, so a peer waiting for
//     it (a rendezvous it has not reached, a message or a credit it has not
//     sent, a point-to-point operation it has not posted) fails with a
//     *RankGoneError: the waits check the gone ranks when they wake, and
//     markGone wakes them all (each rank's wake channel and doorbell, its
//     lane, and the group's alert channel). Run forgets the marks when it returns.
//   - A rank blocked in a synchronous point-to-point call publishes its
//     operations (p2p.Engine.Run); the wait-for graph's edges are the unmatched
//     ones between ranks of this process. The rank that closes a cycle
//     finds it (detectDeadlock) and fails its call with a *DeadlockError,
//     which breaks the group.
//   - A rank in a blocking wait records it (waitrec.Record): Group.Pending
//     reads the records, and with a logger a watchdog logs the waits that
//     last (watch).

// Why a rank is gone (RankGoneError.Reason).
const (
	GoneReturned = "returned"          // its function in Group.Run returned nil
	GoneFailed   = "returned an error" // its function in Group.Run returned an error
	GonePanicked = "panicked"          // its function in Group.Run panicked
	GoneClosed   = "closed"            // Comm.Close
)

// markGone marks c gone (reason) and wakes every wait of the group's other
// ranks, so those waiting for it fail.
func (c *Comm) markGone(reason string, fromRun bool) {
	g := c.g
	m := &liveness.Mark{Reason: reason, Seq: c.calls.Load(), P2PSeq: c.p2pCalls.Load(), FromRun: fromRun}
	if !g.live.Go(&c.gone, m) {
		return
	}
	for _, p := range g.comms {
		if p != c {
			p.poke()
			p.lane.Poke()
		}
	}
}

// forgetRun clears the mark Run set (the rank may run again).
func (c *Comm) forgetRun() { c.g.live.Forget(&c.gone) }

// leaveRun ends c's part in Run once its function returned (why): the
// operations it started end (they fail fast if the group broke), then the
// rank is gone until Run returns.
func (c *Comm) leaveRun(why string) {
	_ = c.waitQueue(context.Background())
	_ = c.waitLane(context.Background())
	// Its comms in the sub-groups Split made are gone with it.
	for _, sc := range c.subComms() {
		_ = sc.waitQueue(context.Background())
		_ = sc.waitLane(context.Background())
		sc.markGone(why, true)
	}
	c.markGone(why, true)
}

// subComms returns the comms of c's rank in the in-process sub-groups
// Split made of c's group, and of theirs.
func (c *Comm) subComms() []*Comm {
	var out []*Comm
	for _, k := range c.g.kids.List() {
		if i := slices.Index(k.parentRanks, c.rank); i >= 0 {
			out = append(out, k.comms[i])
			out = append(out, k.comms[i].subComms()...)
		}
	}
	return out
}

// Close takes the comm's rank out of the group for good, for ranks driven
// outside Group.Run: it waits for the operations the rank started (queued
// and point-to-point), then the rank is gone. Every rank waiting for it, now
// or later, fails at once with an error naming it (ErrRankGone), and its
// own later calls fail with ErrClosed. The group's memory is freed by
// Group.Close. Call it from the rank's goroutine, once the rank is done;
// closing again does nothing.
func (c *Comm) Close() error {
	if c.commClosed() {
		return nil
	}
	c.queue.Close()
	_ = c.waitLane(context.Background())
	c.forgetRun()
	c.markGone(GoneClosed, false)
	return nil
}

// commClosed reports whether c was closed (Comm.Close).
func (c *Comm) commClosed() bool {
	gi := c.gone.Mark()
	return gi != nil && gi.Reason == GoneClosed
}

// errCommClosed is the cause of a call on a closed Comm.
var errCommClosed = fmt.Errorf("the comm was closed: %w", ErrClosed)

// goneRank returns the mark of global rank r if it is a gone rank of this
// process, else nil.
func (g *Group) goneRank(r int) *liveness.Mark {
	if !g.live.Any() || !g.isLocal(r) {
		return nil
	}
	return g.local(r).gone.Mark()
}

// goneErr is the error of c's wait in phase for rank r, which is gone.
func (c *Comm) goneErr(r int, gi *liveness.Mark, phase string) *RankGoneError {
	return &RankGoneError{Rank: r, Reason: gi.Reason, LastSeq: gi.Seq, LastP2P: gi.P2PSeq, Phase: phase}
}

// Deadlock detection among synchronous point-to-point calls.

// blockedOn returns the local index of the peer of c's published operation
// i if that operation is unmatched and the peer is a rank of this process,
// else -1.
func (c *Comm) blockedOn(i int) int {
	if q := c.lane.BlockedOn(i); q >= 0 {
		return q - c.g.base
	}
	return -1
}

// p2pWaits is the wait-for graph of the group's local ranks blocked in
// synchronous point-to-point calls.
type p2pWaits struct{ g *Group }

func (w p2pWaits) Epoch(r int) uint64 { return w.g.comms[r].lane.Epoch() }
func (w p2pWaits) On(r, i int) int    { return w.g.comms[r].blockedOn(i) }
func (w p2pWaits) Blocked(r int) bool {
	pc := w.g.comms[r]
	return pc.lane.Blocked(0) != nil || pc.lane.Blocked(1) != nil
}

// detectDeadlock fails c's call with a *DeadlockError when c closes a wait
// cycle: every rank in it is blocked in a synchronous point-to-point call
// whose unmatched operation waits for the next rank, which cannot post the
// matching operation before its own call ends.
func (c *Comm) detectDeadlock() {
	if cyc := c.dl.Find(p2pWaits{c.g}, c.g.nl, c.local); cyc != nil {
		c.failDeadlock(cyc)
	}
}

// failDeadlock fails c's unmatched operations with the cycle's error and
// breaks the group with it.
func (c *Comm) failDeadlock(cyc []waitfor.Step) {
	g := c.g
	de := &DeadlockError{}
	allSend, allRecv := true, true
	for _, f := range cyc {
		pc := g.comms[f.Rank]
		call, send, recv, ok := pc.lane.BlockedCall(f.Edge)
		if !ok {
			return
		}
		de.Ranks = append(de.Ranks, pc.rank)
		de.Calls = append(de.Calls, call)
		allSend = allSend && send
		allRecv = allRecv && recv
	}
	de.hint = waitfor.Hint(len(cyc), allSend, allRecv)
	broke := false
	for i := range 2 {
		o := c.lane.Blocked(i)
		if o == nil {
			continue
		}
		if c.lane.Fail(o, de) && !broke {
			broke = true
			c.breakP2P(o, de)
		}
	}
}

// Diagnosis of the waits.

// beginWait records that c waits in phase for peer (or waitrec.Barrier, in
// generation gen of the rendezvous; or waitrec.P2P), starts the group's
// watchdog when it logs, and returns the time (monoNow).
func (c *Comm) beginWait(phase string, peer int, gen uint64) time.Duration {
	seq := c.seq
	if c.inP2P {
		seq = c.p2pSeq
	}
	now := c.waitRec.Begin(c.op, phase, seq, c.inP2P, peer, gen)
	if c.g.log != nil && c.g.watchdog.Claim() {
		go c.g.watch()
	}
	return now
}

// endWait clears c's record.
func (c *Comm) endWait() { c.waitRec.End() }

// PendingWait describes a rank of this process blocked in a call, waiting
// for other ranks (Group.Pending).
type PendingWait struct {
	Rank  int       // the waiting rank
	Op    string    // its call
	Seq   uint64    // the call's number (among the rank's point-to-point calls when P2P)
	P2P   bool      // a point-to-point call
	Phase string    // what it waits for
	Since time.Time // when the wait began
	// Missing are the ranks it waits for: those that have not reached the
	// call, or not sent or received what it waits for. LastSeq[i] is
	// Missing[i]'s latest collective call number (0: none yet), -1 for a
	// rank of another process (not known here). Gone[i] says why Missing[i]
	// is gone (RankGoneError.Reason), or is empty.
	Missing []int
	LastSeq []int64
	Gone    []string
}

func (p PendingWait) String() string { return hang.Wait(p).String() }

// Pending returns the waits of this process's ranks that are blocked in a
// call now, by rank: which call each waits in, since when, and which ranks
// it waits for (the hang diagnosis, while the waits go on; with a logger,
// the group also logs the waits that last, see CommunicationTimeout). It
// may be called from any goroutine.
func (g *Group) Pending() []PendingWait {
	var out []PendingWait
	for _, p := range hang.Pending((*hangSource)(g)) {
		out = append(out, PendingWait(p))
	}
	return out
}

// hangSource is the group as the hang diagnosis reads it.
type hangSource Group

func (s *hangSource) Ranks() int { return s.nl }

func (s *hangSource) Record(i int) (int, *waitrec.Record) {
	return s.comms[i].rank, &s.comms[i].waitRec
}

func (s *hangSource) Absent(gen uint64, missing []int) ([]int, bool) {
	return s.bar.Absent(gen, s.base, missing)
}

func (s *hangSource) Unmatched(i int, missing []int) ([]int, string) {
	c, phase := s.comms[i], ""
	// The operations are read while the engine is pinned: they are reused
	// once their call returns.
	c.lane.Pin()
	defer c.lane.Unpin()
	for i := range 2 {
		o := c.lane.Blocked(i)
		if q := c.blockedOn(i); q >= 0 || (o != nil && o.Remote() && !o.Done()) {
			missing = append(missing, o.Peer)
			if phase == "" {
				phase = opPhase(o)
			}
		}
	}
	return missing, phase
}

func (s *hangSource) Where(r int) (int64, string) {
	g := (*Group)(s)
	if !g.isLocal(r) {
		return -1, ""
	}
	pc := g.local(r)
	if gi := pc.gone.Mark(); gi != nil {
		return int64(pc.calls.Load()), gi.Reason
	}
	return int64(pc.calls.Load()), ""
}

// watch logs the waits that lasted longer than waitrec.LogInterval (of
// CommunicationTimeout), at that interval, while any rank waits (one
// goroutine per group at a time: it ends when no rank waits, and the next
// wait starts it again).
func (g *Group) watch() {
	hang.Log(&g.watchdog, waitrec.LogInterval(g.cfg.CommunicationTimeout), g.brokenCh, (*hangSource)(g), g.log)
}
