package p2p

import (
	"context"
	"runtime"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/memory"
	"github.com/gocoll/gocoll/internal/park"
	"github.com/gocoll/gocoll/internal/parktimer"
	"github.com/gocoll/gocoll/internal/waitrec"
)

// Call is one point-to-point call of the comm an engine serves: a send of
// Send to rank To on link ToLink and a receive into Recv from rank From on
// link FromLink (a peer -1: no such operation). Its operations carry the
// call's name and number (Seq, among the comm's point-to-point calls).
type Call struct {
	Name             string
	Seq              uint64
	DT               backend.DType
	To, From         int
	Send, Recv       []byte
	ToLink, FromLink *Link
}

// remote reports whether one of c's operations is with a rank of another
// process.
func (c *Call) remote() bool {
	return (c.To >= 0 && c.ToLink.remote) || (c.From >= 0 && c.FromLink.remote)
}

// The operations a call runs on (Engine.op).
const (
	opNew    = iota // an asynchronous call's: a free record, or new
	opOwn           // a synchronous call's with ranks of this process
	opRemote        // a synchronous call's with a rank of another process
)

// ops makes c's operations (nil: none), the send first, of kind (opNew,
// opOwn, opRemote). A send and a receive of one buffer
// (MPI_Sendrecv_replace) send what it holds now, from the engine's staging
// copy, while the peer's data lands in it.
func (e *Engine) ops(ctx context.Context, c *Call, kind int) (ops [2]*Op) {
	es := c.DT.Size()
	if c.To >= 0 {
		send := c.Send
		if c.From >= 0 && memory.SameSlice(send, c.Recv) {
			send = e.Stage(len(send))
			copy(send, c.Send)
		}
		ops[0] = e.op(kind, 0)
		*ops[0] = Op{Name: c.Name, Seq: c.Seq, Send: true, Peer: c.To, Data: send, DT: c.DT, Count: int64(len(send) / es), Ctx: ctx, l: c.ToLink}
	}
	if c.From >= 0 {
		ops[1] = e.op(kind, 1)
		*ops[1] = Op{Name: c.Name, Seq: c.Seq, Peer: c.From, Data: c.Recv, DT: c.DT, Count: int64(len(c.Recv) / es), Ctx: ctx, l: c.FromLink}
	}
	return ops
}

// op returns operation i of kind: a new one, or the engine's own. One of
// rown is returned once the lane's pass that held it ended (see Op): the
// pass took it before the previous call finished, and ends soon.
func (e *Engine) op(kind, i int) *Op {
	switch kind {
	case opOwn:
		return &e.own[i]
	case opRemote:
		o := &e.rown[i]
		e.mu.Lock()
		for o.held {
			e.reuseWaits++
			e.relWait = true
			e.mu.Unlock()
			<-e.released
			e.mu.Lock()
		}
		e.mu.Unlock()
		return o
	}
	return e.newOp()
}

// Start posts the one operation of an asynchronous call for its handle w
// (Env.Complete ends it), its context watched while it can end (watch.go).
func (e *Engine) Start(ctx context.Context, c *Call, w any) {
	ops := e.ops(ctx, c, opNew)
	o := ops[0]
	if o == nil {
		o = ops[1]
	}
	o.Work = w
	e.Post(o, o.l)
}

// Run runs a synchronous call: its operations posted, published as the
// call's while its caller blocks in them (Block, then Env.Blocked), waited
// for until they complete, withdrawn (Env.Unblocked, then Unblock). It
// returns their failure, the one that caused the other first: an
// operation's own failure before one that only reports the group's break
// (Env.Broken).
//
// A call with ranks of this process only runs on the engine's own
// operations and its caller's goroutine: the caller fails them at their
// deadline, when ctx ends, when the group breaks and when a peer is gone
// (await), and the lane is not involved. A call with a rank of another
// process posts new operations for the lane, which moves them and fails
// them (once ctx ends, when Wait pokes it).
//
// Where the caller's recv was written (the receive delivered its data and
// the send failed, or the receive failed after some of it arrived), the
// failure is a *DeliveredError.
func (e *Engine) Run(ctx context.Context, c *Call) error {
	own := !c.remote()
	kind := opRemote
	if own {
		kind = opOwn
	}
	ops := e.ops(ctx, c, kind)
	if own {
		// Set before any is posted: a peer completes them from then on.
		e.ownLeft = 0
		for _, o := range ops {
			if o != nil {
				e.ownLeft++
			}
		}
	}
	for _, o := range ops {
		switch {
		case o == nil:
		case own:
			e.postOwn(o)
		default:
			e.Post(o, o.l)
		}
	}
	e.Block(&ops)
	now := e.env.Blocked()
	if own {
		e.await(ctx, &ops, now)
	} else {
		for _, o := range ops {
			if o != nil {
				e.Wait(ctx, o)
			}
		}
	}
	e.env.Unblocked()
	e.Unblock()
	err := e.cause(&ops)
	if r := ops[1]; err != nil && !Delivered(err) && r != nil && r.done && r.err == nil {
		err = &DeliveredError{Err: err}
	}
	// The engine keeps neither the caller's buffers nor its context until
	// its next call. Nothing reads its own operations now (Unblock) but the
	// lane's pass that may hold one of rown: then the pass drops them.
	if !own {
		e.mu.Lock()
	}
	for _, o := range ops {
		switch {
		case o == nil:
		case !own && o.held:
			o.drop = true
		default:
			o.Data, o.Ctx = nil, nil
		}
	}
	if !own {
		e.mu.Unlock()
	}
	return err
}

// DeliveredError is the failure of an operation (or call) that wrote the
// caller's recv: a remote receive that failed after some of its pieces
// arrived, a SendRecv whose receive delivered while its send failed.
type DeliveredError struct{ Err error }

// Delivered reports whether err is a *DeliveredError.
func Delivered(err error) bool { _, ok := err.(*DeliveredError); return ok }

func (e *DeliveredError) Error() string { return e.Err.Error() }
func (e *DeliveredError) Unwrap() error { return e.Err }

// await waits until the engine's own operations ops completed (the last
// signals ownDone), failing those still waiting for their peer as the lane
// fails its operations (expired): all of them CommunicationTimeout after
// now (when it began to wait, on waitrec.Now's clock), when ctx ends or
// the group breaks, and those whose peer is gone when a rank goes (Poke).
// It polls for Env.Spin before it parks, as a comm's other waits do, and
// yields once where it does not poll.
func (e *Engine) await(ctx context.Context, ops *[2]*Op, now time.Duration) {
	if ops[0] == nil && ops[1] == nil {
		return
	}
	spin := e.env.Spin()
	if _, ok := park.Poll(e.ownDone, spin); ok {
		return
	}
	if spin == 0 {
		// One yield, not a spin: where ranks outnumber cores the peer
		// often runs in it and completes the call, which then never
		// parks (no wake-up of a parked goroutine on either side).
		runtime.Gosched()
		select {
		case <-e.ownDone:
			return
		default:
		}
	}
	due := parktimer.DueAfter(now, e.env.CommunicationTimeout())
	e.ownTimer.Arm(now, due)
	done, broken, deadline := ctx.Done(), e.env.BrokenCh(), e.ownTimer.C()
	for {
		late := false
		select {
		case <-e.ownDone:
			return
		case <-done:
			done = nil
		case <-broken:
			broken = nil
		case <-deadline:
			if late = e.ownTimer.Fired(waitrec.Now(), due); late {
				deadline = nil
			}
		case <-e.ownWake:
		}
		for _, o := range ops {
			if o == nil || o.Done() {
				continue
			}
			if err, brk := e.expired(o, late); err != nil && e.Fail(o, err) && brk {
				e.env.Break(o, err)
			}
		}
	}
}

// cause returns the failure of ops, completed, that caused the other's: an
// operation's own failure comes before one that only reports the group's
// break (the error Env.Broken gives, told apart by identity).
func (e *Engine) cause(ops *[2]*Op) error {
	var err error
	for _, o := range ops {
		if o == nil || o.err == nil {
			continue
		}
		if err == nil || o.err != e.env.Broken() {
			err = o.err
		}
	}
	return err
}
