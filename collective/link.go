package collective

import (
	"context"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/channel"
	"github.com/gocoll/gocoll/internal/liveness"
	"github.com/gocoll/gocoll/internal/p2p"
	"github.com/gocoll/gocoll/internal/park"
	"github.com/gocoll/gocoll/internal/waitrec"
)

// The exchange layer: ranks in one process or across processes move data
// through links (internal/channel: the slots, their credits and the ways
// they travel). Here: the comm's side of them (its waits, the links it
// uses) and the point-to-point state a link carries.

// linkSpin is how long a rank polls a link before it parks (spinBarrier).
const linkSpin = 200 * time.Microsecond

type link struct {
	*channel.Link

	// p2p is the link's point-to-point state (internal/p2p).
	p2p p2p.Link
}

func newLink(g *Group, from, to int, remote bool) *link {
	switch {
	case remote:
		l := &link{Link: channel.NewRemote(from, to, g.slotBytes, g.tr, g.procOf(from), g.procOf(to), g.tag(from, to))}
		peer := to
		if !g.isLocal(from) {
			peer = from
		}
		l.p2p.InitRemote(g.tr, g.procOf(peer), g.p2pTag(from, to), g.slotBytes)
		return l
	case g.sharedMem:
		return &link{Link: channel.NewShared(from, to, g.slotBytes, g.local(from).bell.Ring, g.local(to).bell.Ring)}
	}
	return &link{Link: channel.NewHost(from, to, g.slotBytes, g.devs[to-g.base], g.local(from).bell.Ring, g.local(to).bell.Ring)}
}

// link returns the link from rank a to rank b (one of them c's rank),
// creating it on first use: a group holds only the links its algorithms use.
func (c *Comm) link(a, b int) *link {
	key := int64(a)*int64(c.g.n) + int64(b)
	if l, ok := c.links[key]; ok {
		return l
	}
	g := c.g
	g.linkMu.Lock()
	l, ok := g.linkMap[key]
	if !ok {
		l = newLink(g, a, b, !g.isLocal(a) || !g.isLocal(b))
		g.linkMap[key] = l
	}
	g.linkMu.Unlock()
	c.links[key] = l
	return l
}

// local returns the comm of rank r, a rank of this process.
func (g *Group) local(r int) *Comm { return g.comms[r-g.base] }

// waitOn blocks on ch (a message or a credit) with the comm's doorbell or
// timer (internal/park), the caller's context and the group's breaking;
// peer names who is awaited.
func waitOn[T any](c *Comm, ctx context.Context, ch <-chan T, peer int, phase string) (T, error) {
	// With cores to spare, poll briefly before parking (as the barrier
	// does): a parked receive costs a wake-up and, spread over many Ps, a
	// runtime allocation now and then (sudog caches are per P).
	spin := time.Duration(0)
	if spinBarrier {
		spin = linkSpin
	}
	if v, ok := park.Poll(ch, spin); ok {
		return v, nil
	}
	now := c.beginWait(phase, peer, 0)
	defer c.endWait()
	g := c.g
	w := park.Begin(&c.bell, &c.wt, useBell.Load(), now, g.cfg.CommunicationTimeout)
	for {
		// The bell's ticket and the alert channel are taken before the
		// gone ranks are looked at: a rank that goes after the look rings
		// the bell and closes the alert channel (as the group breaking
		// does).
		t := w.Ticket()
		alert := g.live.Alert()
		if gi := g.goneRank(peer); gi != nil {
			return goneOn(c, ch, peer, gi, phase)
		}
		v, ev := park.Next(&w, ctx, t, ch, alert)
		var ctxErr error
		switch ev {
		case park.Got:
			return v, nil
		case park.Woken:
			if g.Err() == nil {
				continue // a rank went (is it peer?), or the sleep's slice ended
			}
			if err := ctx.Err(); err != nil {
				return v, &TimeoutError{Seq: c.seq, Phase: phase, Missing: []int{peer}, Ctx: err}
			}
			return v, c.brokenErr()
		case park.Cancelled:
			ctxErr = ctx.Err()
		}
		te := &TimeoutError{Seq: c.seq, Phase: phase, Missing: []int{peer}, Ctx: ctxErr}
		c.breakWith(te)
		return v, te
	}
}

// monoNow is the monotonic clock of the comm's wait timer
// (internal/parktimer) and of its wait records (waitrec.Now).
func monoNow() time.Duration { return waitrec.Now() }

// goneOn ends a wait on ch for peer, which is gone: what it sent before it
// went is in ch; anything else never comes.
func goneOn[T any](c *Comm, ch <-chan T, peer int, gi *liveness.Mark, phase string) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	default:
	}
	var zero T
	ge := c.goneErr(peer, gi, phase)
	c.breakWith(ge)
	return zero, ge
}

// end is c's side of its links.
func (c *Comm) end() channel.End { return channel.End{Dev: c.dev, W: (*linkWaiter)(c)} }

// linkWaiter is a comm as its links' channel.Waiter.
type linkWaiter Comm

func (w *linkWaiter) Message(ctx context.Context, ch <-chan channel.Msg, peer int, phase string) (channel.Msg, error) {
	return waitOn((*Comm)(w), ctx, ch, peer, phase)
}

func (w *linkWaiter) Credit(ctx context.Context, ch <-chan int, peer int, phase string) (int, error) {
	return waitOn((*Comm)(w), ctx, ch, peer, phase)
}

func (w *linkWaiter) Request(ctx context.Context, r backend.Request, peer int, phase string, stage *[]byte) error {
	return (*Comm)(w).waitReq(ctx, r, peer, phase, stage)
}

func (w *linkWaiter) Fail(err error) { (*Comm)(w).breakWith(err) }

func (w *linkWaiter) Mismatch(peer int) error {
	c := (*Comm)(w)
	err := &MismatchError{Seq: c.seq, Rank: c.rank, Call: "a collective", Peer: peer, PeerCall: "a collective"}
	c.breakWith(err)
	return err
}

// stepRank is a comm as the rank its exchange steps (internal/steps) run
// on: its links and its submissions.
type stepRank Comm

// Reserve waits for a free slot on the link to peer and returns the region
// of n bytes in it. The sender's outbox is allocated on first use.
func (r *stepRank) Reserve(ctx context.Context, to, n int) (int, backend.Region, error) {
	c := (*Comm)(r)
	return c.link(c.rank, to).Reserve(ctx, c.end(), n)
}

// Post sends the reserved slot's n bytes to peer. It never blocks: credits
// bound the messages in flight.
func (r *stepRank) Post(to, slot, n int) {
	c := (*Comm)(r)
	c.link(c.rank, to).Post(c.end(), slot, n, c.seq)
}

// Take waits for the next message of this call from peer (n bytes
// expected) and returns where its bytes are for this rank's device: read
// in place (held until the device work reading it completed), or copied
// into inbox slot idx.
func (r *stepRank) Take(ctx context.Context, from, idx, n int) (backend.Region, error) {
	c := (*Comm)(r)
	reg, h, err := c.link(from, c.rank).Take(ctx, c.end(), c.inbox, idx, c.seq, n)
	if err != nil {
		return reg, err
	}
	if h != (channel.Held{}) {
		c.held = append(c.held, h)
	}
	c.recvBytes += int64(n)
	return reg, nil
}

func (r *stepRank) Flush(ctx context.Context) error { return (*Comm)(r).flush(ctx) }
func (r *stepRank) Fail(err error) error            { return (*Comm)(r).rec(err) }

// releaseHeld returns the held slots to their senders: the comm's device
// work submitted so far is complete (queues are FIFO, so any later fence
// covers the reads of earlier work).
func (c *Comm) releaseHeld() {
	for _, h := range c.held {
		h.Release()
	}
	c.held = c.held[:0]
}

// flush submits what the stream recorded and waits for it.
func (c *Comm) flush(ctx context.Context) error {
	f, err := c.submitWork()
	if err != nil {
		c.breakWith(err)
		if derr := c.drain(); derr != nil {
			return derr
		}
		return err
	}
	return c.waitFence(ctx, f)
}

// rec wraps a recording error: it breaks the group.
func (c *Comm) rec(err error) error {
	if err != nil {
		c.breakWith(err)
	}
	return err
}
