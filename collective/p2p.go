package collective

import (
	"context"
	"fmt"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/memory"
	"github.com/gocoll/gocoll/internal/p2p"
	"github.com/gocoll/gocoll/internal/waitrec"
)

// Point-to-point: Send, Recv, SendRecv and their asynchronous forms are
// operations posted to the comm's engine (internal/p2p: matching, the
// transfers with other processes, deadlines, completion) and completed when
// they meet their peer's matching operation. Here: the entry points, the
// call around the operations, and the errors the engine reports (p2pEnv).
//
// Point-to-point calls are numbered in their own sequence per comm
// (p2pSeq: a synchronous call when it starts, an asynchronous one when it
// is posted, which is call order), apart from the collectives' numbers; a
// failed operation's error, and the group's break, name its number.
//
// Posting never blocks, so asynchronous operations started back to back
// (SendAsync then RecvAsync on both ranks of a pair) always meet. Stream
// order: a point-to-point operation is posted after the comm's earlier
// operations ran; any other operation waits for the earlier point-to-point
// operations to complete.

// Send sends data to rank peer, which must call Recv (or SendRecv, or
// RecvAsync) with the same length and type, and returns once the peer
// received it. Point-to-point calls are not numbered with the collectives:
// they pair on the direction between the two ranks, in call order. Two
// ranks that both Send to each other and then Recv deadlock (in one
// process the Sends fail at once with ErrDeadlock, naming the pattern;
// across processes after CommunicationTimeout): use SendRecv, or SendAsync
// and RecvAsync. A blocking Send to this rank itself would wait for itself
// and is refused at once (ErrInvalidArgument): a rank sends to itself
// through SendRecv, SendAsync and RecvAsync, or a Batch.
//
// A receiver that expects another length or type fails with a
// *MismatchError and breaks the group. In one process the Send fails with
// a *MismatchError too. Across processes Send does not wait for the
// receiver's check (that would be a round trip on every Send): it returns
// nil once its message left, or the break if the message was still in
// flight, and the sender's later calls fail with ErrGroupBroken matching
// ErrMismatch once the break arrives from the receiver's process (a
// *RemoteError cause naming both calls).
func Send[T Elem](ctx context.Context, c *Comm, data []T, peer int) error {
	d := p2pDesc(collSend, "", data, peer)
	return c.run(ctx, &d)
}

// Recv receives into data what rank peer sends with Send (or SendRecv, or
// SendAsync). A length or type that differs from the sender's is a
// *MismatchError naming both calls, data left untouched, and breaks the
// group; in one process the sender gets a *MismatchError as well, across
// processes the break (see Send). Like Send, it is refused with peer set
// to this rank itself. A receive from another process that fails after
// part of the message arrived (the sender's process died, the context
// ended) is a *DataError with Touched: data holds part of it; any other
// failure leaves data untouched. So is a SendRecv whose receive delivered
// its data before its send failed.
func Recv[T Elem](ctx context.Context, c *Comm, data []T, peer int) error {
	d := p2pDesc(collRecv, "", data, peer)
	return c.run(ctx, &d)
}

// SendRecv sends send to rank to and receives recv from rank from in one
// call: both are posted before either is waited for, so pairwise exchanges
// (to == from) and shifts along a ring (every rank sends to r+1 and
// receives from r-1) never deadlock, whatever the sizes. to or from may be
// -1 to only receive or only send. The peer sending to this rank must call
// Send, SendRecv or SendAsync with the same length and type; the one
// receiving, Recv, SendRecv or RecvAsync. send and recv may be the same
// slice (MPI_Sendrecv_replace: what it holds when the call starts is
// sent); any other overlap is refused. to and from may both be this rank
// itself (the message is copied in the process, as nccl-tests' sendrecv on
// one rank), not one of them alone.
func SendRecv[T Elem](ctx context.Context, c *Comm, send []T, to int, recv []T, from int) error {
	return c.run(ctx, &desc{kind: collSendRecv, dt: dtypeOf[T](), send: asBytes(send), recv: asBytes(recv), to: to, from: from})
}

// SendAsync starts Send and returns at once; data must not be modified
// until the Work is done. Point-to-point operations started back to back
// are all posted before any is waited for, so a pairwise exchange of
// SendAsync and RecvAsync on both ranks (in any order) never deadlocks, nor
// does a SendAsync and a RecvAsync to this rank itself. ctx bounds the
// operation; CommunicationTimeout bounds its wait for the peer.
func SendAsync[T Elem](ctx context.Context, c *Comm, data []T, peer int) Work {
	return c.start(ctx, p2pDesc(collSend, "SendAsync", data, peer))
}

// RecvAsync starts Recv and returns at once; data must not be read or
// modified until the Work is done.
func RecvAsync[T Elem](ctx context.Context, c *Comm, data []T, peer int) Work {
	return c.start(ctx, p2pDesc(collRecv, "RecvAsync", data, peer))
}

// p2pDesc describes a Send (kind collSend) or a Recv (collRecv) of data
// with peer, through entry point entry ("": the kind's).
func p2pDesc[T Elem](kind collKind, entry string, data []T, peer int) desc {
	d := desc{kind: kind, entry: entry, dt: dtypeOf[T](), to: -1, from: -1}
	if kind == collSend {
		d.send, d.to = asBytes(data), peer
	} else {
		d.recv, d.from = asBytes(data), peer
	}
	return d
}

// execP2P runs the point-to-point call d, checked: numbered, its
// operations (a send to d.to, a receive from d.from) run on the comm's
// engine (p2p.Engine.Run); an asynchronous one (d.async, run by the comm's
// worker for its Work) posts its operation, which completes the Work.
func (c *Comm) execP2P(ctx context.Context, d *desc) (err error) {
	name := d.name()
	owned, err := c.enterOp(ctx, name, false, true)
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	call := p2p.Call{Name: name, Seq: c.p2pSeq, DT: d.dt, To: d.to, From: d.from, Send: d.send, Recv: d.recv}
	if d.to >= 0 {
		call.ToLink = &c.link(c.rank, d.to).p2p
	}
	if d.from >= 0 {
		call.FromLink = &c.link(d.from, c.rank).p2p
	}
	if d.async {
		// Posted for the Work the worker runs (start: one operation),
		// under its caller's ctx (the engine keeps it, not the record's).
		w := c.running.Load()
		w.posted = true
		c.lane.Start(w.ctx.Context, &call, w)
		return nil
	}
	if err = c.lane.Run(ctx, &call); p2p.Delivered(err) {
		return &DataError{Rank: c.rank, InPlace: memory.SameSlice(d.send, d.recv), Cause: err, Touched: true}
	}
	return err
}

// refuseP2P fails point-to-point call name, refused on this rank with err
// before it posted anything, on the comm its caller claimed (claimErr: the
// claim failed): the call is numbered, and breaks the group naming itself,
// so the peers waiting for its operations fail at once (there is no
// rendezvous to tell them, as invalidCall tells a collective's peers).
func (c *Comm) refuseP2P(ctx context.Context, name string, err, claimErr error) error {
	owned, e := false, claimErr
	if e == nil {
		owned, e = c.enterOp(ctx, name, false, true)
	}
	switch {
	case e != nil && ctx.Err() != nil:
		return e // the call's context ended: claim or enterOp broke the group naming it
	case e != nil:
		// Not started (the group closed or broke, the comm in use, the
		// context ended): the peers are told all the same.
		c.g.breakGroup(&BrokenError{Rank: c.rank, Op: name, P2P: true, Cause: err, hideCtx: true})
		return c.wrapP2P(name, 0, err)
	}
	c.breakWith(err)
	c.leave(owned, &err)
	return err
}

// opCall names o as a call (its kind, type and count), as the
// fingerprints do.
func opCall(send bool, dt backend.DType, count int64) string {
	k := collRecv
	if send {
		k = collSend
	}
	return fingerprint{kind: k, dt: dt, count: count}.String()
}

// opPhase is what o waits for, in errors and Group.Pending.
func opPhase(o *p2p.Op) string {
	dir, match := "from", "Send"
	if o.Send {
		dir, match = "to", "Recv"
	}
	return fmt.Sprintf("%s %s rank %d (%s): no matching %s", o.Name, dir, o.Peer, opCall(o.Send, o.DT, o.Count), match)
}

// breakP2P breaks the group with o's failure, naming o.
func (c *Comm) breakP2P(o *p2p.Op, err error) {
	c.g.breakGroup(&BrokenError{Rank: c.rank, Op: o.Name, Seq: o.Seq, P2P: true, Cause: err, hideCtx: true})
}

// deadlockHint names the pattern when o is a blocking Send whose peer is
// itself blocked in a Send to this rank: both ranks Send before they Recv.
func (c *Comm) deadlockHint(o *p2p.Op) string {
	if !o.Send || o.Work != nil || o.Remote() {
		return ""
	}
	g := c.g
	g.linkMu.Lock()
	back := g.linkMap[int64(o.Peer)*int64(g.n)+int64(c.rank)]
	g.linkMu.Unlock()
	if back == nil || !back.p2p.SyncSendQueued() {
		return ""
	}
	return fmt.Sprintf("; rank %d is itself blocked in a Send to rank %d: both ranks Send before they Recv "+
		"(use SendRecv, or SendAsync and RecvAsync)", o.Peer, c.rank)
}

func (c *Comm) initLane() { c.lane.Init((*p2pEnv)(c)) }

// p2pEnv is the comm as its point-to-point engine sees it (p2p.Env): the
// group's state and the errors of this package.
type p2pEnv Comm

func (e *p2pEnv) Broken() error {
	c := (*Comm)(e)
	if c.g.Err() == nil {
		return nil
	}
	return c.brokenErr()
}

func (e *p2pEnv) BrokenCh() <-chan struct{}           { return e.g.brokenCh }
func (e *p2pEnv) GoneEvents() uint64                  { return e.g.live.Events() }
func (e *p2pEnv) CommunicationTimeout() time.Duration { return e.g.cfg.CommunicationTimeout }

func (e *p2pEnv) Gone(o *p2p.Op) error {
	if gi := e.g.goneRank(o.Peer); gi != nil {
		return (*Comm)(e).goneErr(o.Peer, gi, opPhase(o))
	}
	return nil
}

func (e *p2pEnv) Timeout(o *p2p.Op, ctxErr error) error {
	if ctxErr != nil {
		return &TimeoutError{Phase: opPhase(o), Missing: []int{o.Peer}, Ctx: ctxErr}
	}
	return &TimeoutError{Phase: opPhase(o) + (*Comm)(e).deadlockHint(o), Missing: []int{o.Peer}}
}

func (e *p2pEnv) Mismatch(o *p2p.Op, dt backend.DType, count int64) error {
	return &MismatchError{Rank: e.rank, Call: opCall(o.Send, o.DT, o.Count), Peer: o.Peer, PeerCall: opCall(!o.Send, dt, count)}
}

func (e *p2pEnv) Break(o *p2p.Op, err error) { (*Comm)(e).breakP2P(o, err) }

// Blocked: a wait cycle among blocked ranks fails the call at once
// (detectDeadlock), and Group.Pending reports the wait.
func (e *p2pEnv) Blocked() time.Duration {
	c := (*Comm)(e)
	c.detectDeadlock()
	return c.beginWait("", waitrec.P2P, 0)
}

// Spin: with cores to spare, a blocked call polls before it parks, as a
// link's wait does (waitOn).
func (e *p2pEnv) Spin() time.Duration {
	if spinBarrier {
		return linkSpin
	}
	return 0
}

func (e *p2pEnv) Unblocked() { (*Comm)(e).endWait() }

func (e *p2pEnv) Complete(o *p2p.Op, err error) {
	w := o.Work.(*workRec)
	if err != nil {
		if p2p.Delivered(err) {
			err = &DataError{Rank: e.rank, Cause: err, Touched: true}
		}
		err = (*Comm)(e).wrapP2P(o.Name, o.Seq, err)
	}
	w.mem.Release()
	w.end.Finish(err)
}

// p2pTag is the transport tag of point-to-point messages from global rank
// a to b (collective traffic uses tag, the group's control messages
// ctrlTag).
func (g *Group) p2pTag(a, b int) int { return g.nl*g.nl + g.tag(a, b) }
