package p2p

import (
	"context"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/memory"
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

// ops makes c's operations (nil: none), the send first. A send and a
// receive of one buffer (MPI_Sendrecv_replace) send what it holds now, from
// the engine's staging copy, while the peer's data lands in it.
func (e *Engine) ops(ctx context.Context, c *Call) (ops [2]*Op) {
	es := c.DT.Size()
	if c.To >= 0 {
		send := c.Send
		if c.From >= 0 && memory.SameSlice(send, c.Recv) {
			send = e.Stage(len(send))
			copy(send, c.Send)
		}
		ops[0] = &Op{Name: c.Name, Seq: c.Seq, Send: true, Peer: c.To, Data: send, DT: c.DT, Count: int64(len(send) / es), Ctx: ctx, l: c.ToLink}
	}
	if c.From >= 0 {
		ops[1] = &Op{Name: c.Name, Seq: c.Seq, Peer: c.From, Data: c.Recv, DT: c.DT, Count: int64(len(c.Recv) / es), Ctx: ctx, l: c.FromLink}
	}
	return ops
}

// Start posts the one operation of an asynchronous call for its handle w
// (Env.Complete ends it), watched by a context watch while ctx can end.
func (e *Engine) Start(ctx context.Context, c *Call, w any) {
	ops := e.ops(ctx, c)
	o := ops[0]
	if o == nil {
		o = ops[1]
	}
	o.Work = w
	if ctx.Done() != nil {
		o.Stop = context.AfterFunc(ctx, func() { e.Attend(o) })
	}
	e.Post(o, o.l)
}

// Run runs a synchronous call: its operations posted, published as the
// call's while its caller blocks in them (Block, then Env.Blocked), waited
// for until they complete (once ctx ends the lane fails them), withdrawn
// (Env.Unblocked, then Unblock). It returns their failure, the one that
// caused the other first: an operation's own failure before one that only
// reports the group's break (Env.Broken).
func (e *Engine) Run(ctx context.Context, c *Call) error {
	ops := e.ops(ctx, c)
	for _, o := range ops {
		if o != nil {
			e.Post(o, o.l)
		}
	}
	e.Block(&ops)
	e.env.Blocked()
	for _, o := range ops {
		if o != nil {
			e.Wait(ctx, o)
		}
	}
	e.env.Unblocked()
	e.Unblock()
	return e.cause(&ops)
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
