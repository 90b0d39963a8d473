package collective

import (
	"context"
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/memory"
)

// begin enters a collective: argument checks done by the caller, it marks
// the comm busy, numbers the call and compares fingerprints.
func (c *Comm) begin(ctx context.Context, name string, fp fingerprint, phase string) (bool, error) {
	owned, err := c.enter(ctx, name, true)
	if err != nil {
		return false, err
	}
	c.strat = fp.strategy
	if err := c.arrive(ctx, fp, phase); err != nil {
		c.leave(owned, &err)
		return false, err
	}
	if c.g.logCalls {
		c.logCall(ctx, name, int(fp.count), fp.dt, fp.op, fp.strategy, "")
	}
	return owned, nil
}

// noKernels reports a call of an element type some rank's device cannot
// reduce in kernels (f64 without f64 kernels; the integer and 16-bit types
// on GPU backends).
func (c *Comm) noKernels(dt backend.DType) bool { return !c.g.kernels.Has(dt) }

func (c *Comm) unsupportedType(ctx context.Context, name string, dt backend.DType) error {
	why := "no " + dt.String() + " kernels"
	if dt == backend.F64 && c.info.Float64Reason != "" {
		why = c.info.Float64Reason
	}
	return c.invalidCall(ctx, name, fmt.Errorf("%s of %s needs %s kernels on every rank's device (%s: %s); AllReduce, AllGather, Broadcast and the exchanges work: %w",
		name, dt, dt, c.info.Name, why, ErrUnsupported))
}

// prepare sizes the device buffer for n elements and uploads src at element
// offset at (src may be empty).
func (c *Comm) prepare(k *call, dt backend.DType, op Op, n int, src []byte, at int) error {
	es := dt.Size()
	if err := c.ensureWork(n*es, dt); err != nil {
		return err
	}
	*k = call{dt: dt, es: es, op: kernelOp(op), scale: scaleFor(op, c.g.n), work: c.work}
	if len(src) > 0 {
		return c.upload(k, at, src)
	}
	return nil
}

// collStrategy returns the strategy collective runs under the group's
// Config.Strategy (the algorithm table: the configured one where the table
// lists it for the collective, else the collective's default).
func (c *Comm) collStrategy(collective string) Strategy {
	return strategyFor(collective, c.g.cfg.Strategy)
}

// Send sends data to rank peer, which must call Recv (or SendRecv, or
// RecvAsync) with the same length and type, and returns once the peer
// received it. Point-to-point calls are not numbered with the collectives:
// they pair on the direction between the two ranks, in call order. Two
// ranks that both Send to each other and then Recv deadlock (in one
// process the Sends fail at once with ErrDeadlock, naming the pattern;
// across processes after CommunicationTimeout): use SendRecv, or SendAsync
// and RecvAsync.
func Send[T Elem](ctx context.Context, c *Comm, data []T, peer int) error {
	if c == nil {
		return invalidArg("nil Comm")
	}
	if peer < 0 || peer >= c.g.n || peer == c.rank {
		return c.refuseP2P(ctx, "Send", invalidArg("bad peer %d", peer))
	}
	return sendRecv(ctx, c, "Send", data, peer, nil, -1)
}

// Recv receives into data what rank peer sends with Send (or SendRecv, or
// SendAsync). A length or type that differs from the sender's is a
// *MismatchError on both ranks.
func Recv[T Elem](ctx context.Context, c *Comm, data []T, peer int) error {
	if c == nil {
		return invalidArg("nil Comm")
	}
	if peer < 0 || peer >= c.g.n || peer == c.rank {
		return c.refuseP2P(ctx, "Recv", invalidArg("bad peer %d", peer))
	}
	return sendRecv(ctx, c, "Recv", nil, -1, data, peer)
}

// SendRecv sends send to rank to and receives recv from rank from in one
// call: both are posted before either is waited for, so pairwise exchanges
// (to == from) and shifts along a ring (every rank sends to r+1 and
// receives from r-1) never deadlock, whatever the sizes. to or from may be
// -1 to only receive or only send. The peer sending to this rank must call
// Send, SendRecv or SendAsync with the same length and type; the one
// receiving, Recv, SendRecv or RecvAsync.
func SendRecv[T Elem](ctx context.Context, c *Comm, send []T, to int, recv []T, from int) (err error) {
	if c == nil {
		return invalidArg("nil Comm")
	}
	bad := func(p int) bool { return p < -1 || p >= c.g.n || p == c.rank }
	if bad(to) || bad(from) || (to < 0 && from < 0) {
		return c.refuseP2P(ctx, "SendRecv", invalidArg("bad peers: to %d, from %d", to, from))
	}
	if to < 0 {
		send = nil
	}
	if from < 0 {
		recv = nil
	}
	return sendRecv(ctx, c, "SendRecv", send, to, recv, from)
}

// sendRecv is Send, Recv and SendRecv: peers checked by the caller, -1 for
// no peer. It posts the operations and waits for them.
func sendRecv[T Elem](ctx context.Context, c *Comm, name string, send []T, to int, recv []T, from int) (err error) {
	u := c.uses(ctx)
	defer u.release()
	if err := u.slices(asBytes(send), asBytes(recv)); err != nil {
		return c.refuseP2P(ctx, name, err)
	}
	if err := checkAlias(name, memory.HostArea(asBytes(send)), memory.HostArea(asBytes(recv)), memory.SameMem, 0); err != nil {
		return c.refuseP2P(ctx, name, err)
	}
	owned, err := c.enterOp(ctx, name, false, true)
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	dt := dtypeOf[T]()
	if memory.SameSlice(asBytes(send), asBytes(recv)) {
		// One buffer (MPI_Sendrecv_replace): send what it holds now, from
		// the comm's pooled copy, while the peer's data lands in it.
		b := asBytes(send)
		if cap(c.p2pStage) < len(b) {
			c.p2pStage = make([]byte, len(b))
		}
		copy(c.p2pStage[:len(b)], b)
		send = viewAs[T](c.p2pStage[:len(b)])
	}
	var ops [2]*p2pOp
	if to >= 0 {
		ops[0] = &p2pOp{name: name, send: true, peer: to, data: asBytes(send), dt: dt, count: int64(len(send)), ctx: ctx, sig: c.sigs[0]}
	}
	if from >= 0 {
		ops[1] = &p2pOp{name: name, peer: from, data: asBytes(recv), dt: dt, count: int64(len(recv)), ctx: ctx, sig: c.sigs[1]}
	}
	for _, o := range ops {
		if o != nil {
			c.postP2P(o)
		}
	}
	// Blocked until the peers post theirs: a wait cycle among blocked
	// ranks fails at once (blockP2P), and Group.Pending reports the wait.
	c.blockP2P(&ops)
	c.beginWait("", waitP2P, 0)
	for _, o := range ops {
		if o == nil {
			continue
		}
		select {
		case <-o.sig:
		case <-ctx.Done():
			c.pokeLane()
			<-o.sig
		}
	}
	c.endWait()
	c.unblockP2P()
	// The failure that caused the other one, if any, comes first.
	for _, o := range ops {
		if o != nil && o.err != nil {
			if _, broken := o.err.(*BrokenError); !broken || err == nil {
				err = o.err
			}
		}
	}
	return err
}

// refuseP2P fails point-to-point call name, refused on this rank with err
// before it posted anything: the call is numbered, and breaks the group
// naming itself, so the peers waiting for its operations fail at once
// (there is no rendezvous to tell them, as invalidCall tells a
// collective's peers).
func (c *Comm) refuseP2P(ctx context.Context, name string, err error) error {
	owned, e := c.enterOp(ctx, name, false, true)
	if e != nil && ctx.Err() != nil {
		return e // the call's context ended: enterOp broke the group naming it
	}
	if e != nil {
		// Not started (the group closed or broke, the comm in use, the
		// context ended): the peers are told all the same.
		c.g.breakGroup(&BrokenError{Rank: c.rank, Op: name, P2P: true, Cause: err, hideCtx: true})
		return c.wrapP2P(name, 0, err)
	}
	c.breakWith(err)
	c.leave(owned, &err)
	return err
}

// eqScratch returns the comm's counts and offsets of n equal blocks of m.
func (c *Comm) eqScratch(n, m int) ([]int, []int) {
	if cap(c.eqCnt) < n {
		c.eqCnt, c.eqDsp = make([]int, n), make([]int, n)
	}
	cnt, dsp := c.eqCnt[:n], c.eqDsp[:n]
	for q := range cnt {
		cnt[q], dsp[q] = m, q*m
	}
	return cnt, dsp
}
