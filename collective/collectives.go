package collective

import (
	"context"
	"fmt"

	"github.com/gocoll/gocoll/backend"
)

// The collectives other than all-reduce, on the same exchange layer. Each
// checks its arguments locally, then compares fingerprints across ranks
// before any data moves; host slices are uploaded into the rank's device
// buffer, the algorithm runs there, and the result is downloaded.

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

// ReduceScatter reduces send (len(recv) * N elements on every rank) with op
// and leaves chunk r of the result (elements [r*len(recv), (r+1)*len(recv)))
// in rank r's recv. Ring: N-1 steps; in deterministic mode (or with the
// Direct strategy) each chunk is reduced at its owner in rank order.
func ReduceScatter[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op) (err error) {
	if c == nil {
		return invalidArg("nil Comm")
	}
	u := c.uses(ctx)
	defer u.release()
	if err := u.slices(asBytes(send), asBytes(recv)); err != nil {
		return c.invalidCall(ctx, "ReduceScatter", err)
	}
	if len(send) != len(recv)*c.g.n {
		return c.invalidCall(ctx, "ReduceScatter", invalidArg("len(send)=%d, want len(recv)*%d=%d", len(send), c.g.n, len(recv)*c.g.n))
	}
	dt := dtypeOf[T]()
	if err := checkSliceAlias("ReduceScatter", asBytes(send), asBytes(recv), recvInSend, c.rank*len(recv)*dt.Size()); err != nil {
		return c.invalidCall(ctx, "ReduceScatter", err)
	}
	if err := checkOp(op, dt); err != nil {
		return c.invalidCall(ctx, "ReduceScatter", err)
	}
	if c.noKernels(dt) {
		// No kernels for the type on some device: the blocks travel as in
		// ReduceScatterV and each rank reduces its own on the CPU, exactly,
		// in rank order.
		cnt, dsp := c.eqScratch(c.g.n, len(recv))
		return reduceScatterV(ctx, c, send, recv, cnt, dsp, op)
	}
	s := c.collStrategy("ReduceScatter")
	owned, err := c.begin(ctx, "ReduceScatter", fingerprint{kind: collReduceScatter, op: op, dt: dt, count: int64(len(recv)), strategy: s}, "ReduceScatter fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	c.adoptCall(asBytes(send), asBytes(recv))
	defer c.releaseAdopted()
	m := len(recv)
	if m == 0 {
		return nil
	}
	n := m * c.g.n
	k := &c.k
	if err := c.prepare(k, dt, op, n, asBytes(send), 0); err != nil {
		return c.fail(err, false, nil, nil)
	}
	if c.g.n > 1 {
		if c.g.cfg.Deterministic || s == Direct {
			err = c.detReduceScatter(ctx, k, c.g.all, n, m)
		} else {
			err = c.ringReduceScatter(ctx, k, c.g.all, n, m, 0, 0)
		}
		if err != nil {
			return c.failAfter(err, nil, nil)
		}
	}
	if err := c.scaleOwned(ctx, k, c.rank*m, (c.rank+1)*m); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.download(ctx, k, c.rank*m, asBytes(recv)); err != nil {
		return c.fail(err, true, nil, nil)
	}
	return nil
}

// AllGather concatenates every rank's send (len(recv)/N elements each) in
// rank order into every rank's recv, with a ring of N-1 steps.
func AllGather[T Elem](ctx context.Context, c *Comm, send, recv []T) (err error) {
	if c == nil {
		return invalidArg("nil Comm")
	}
	u := c.uses(ctx)
	defer u.release()
	if err := u.slices(asBytes(send), asBytes(recv)); err != nil {
		return c.invalidCall(ctx, "AllGather", err)
	}
	if len(recv) != len(send)*c.g.n {
		return c.invalidCall(ctx, "AllGather", invalidArg("len(recv)=%d, want len(send)*%d=%d", len(recv), c.g.n, len(send)*c.g.n))
	}
	dt := dtypeOf[T]()
	if err := checkSliceAlias("AllGather", asBytes(send), asBytes(recv), sendInRecv, c.rank*len(send)*dt.Size()); err != nil {
		return c.invalidCall(ctx, "AllGather", err)
	}
	owned, err := c.begin(ctx, "AllGather", fingerprint{kind: collAllGather, dt: dt, count: int64(len(send)), strategy: Ring}, "AllGather fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	c.adoptCall(asBytes(send), asBytes(recv))
	defer c.releaseAdopted()
	m := len(send)
	if m == 0 {
		return nil
	}
	n := m * c.g.n
	k := &c.k
	if err := c.prepare(k, dt, Sum, n, asBytes(send), c.rank*m); err != nil {
		return c.fail(err, false, nil, nil)
	}
	if c.g.n > 1 {
		if err := c.ringAllGather(ctx, k, c.g.all, n, m, 0); err != nil {
			return c.failAfter(err, nil, nil)
		}
	}
	if err := c.download(ctx, k, 0, asBytes(recv)); err != nil {
		return c.fail(err, true, nil, nil)
	}
	return nil
}

// Broadcast copies root's data to every rank's data, down a binary tree
// rooted at root, in slices.
func Broadcast[T Elem](ctx context.Context, c *Comm, data []T, root int) (err error) {
	if c == nil {
		return invalidArg("nil Comm")
	}
	u := c.uses(ctx)
	defer u.release()
	if err := u.slice(asBytes(data)); err != nil {
		return c.invalidCall(ctx, "Broadcast", err)
	}
	if root < 0 || root >= c.g.n {
		return c.invalidCall(ctx, "Broadcast", invalidArg("root %d out of range [0, %d)", root, c.g.n))
	}
	dt := dtypeOf[T]()
	owned, err := c.begin(ctx, "Broadcast", fingerprint{kind: collBroadcast, dt: dt, count: int64(len(data)), root: int32(root), strategy: Tree}, "Broadcast fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	c.adoptCall(asBytes(data), nil)
	defer c.releaseAdopted()
	n := len(data)
	if n == 0 || c.g.n == 1 {
		return nil
	}
	k := &c.k
	var src []byte
	if c.rank == root {
		src = asBytes(data)
	}
	if err := c.prepare(k, dt, Sum, n, src, 0); err != nil {
		return c.fail(err, false, nil, nil)
	}
	if err := c.treeBroadcast(ctx, k, c.rotated(root), n); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if c.rank != root {
		if err := c.download(ctx, k, 0, asBytes(data)); err != nil {
			return c.fail(err, true, nil, nil)
		}
	}
	return nil
}

// Reduce reduces every rank's send with op into root's recv (len(send)
// elements; other ranks' recv is not used and may be nil), along a binary
// tree rooted at root. In deterministic mode the reduction is in rank order.
func Reduce[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op, root int) (err error) {
	if c == nil {
		return invalidArg("nil Comm")
	}
	if root < 0 || root >= c.g.n {
		return c.invalidCall(ctx, "Reduce", invalidArg("root %d out of range [0, %d)", root, c.g.n))
	}
	if c.rank != root {
		recv = nil // not used
	}
	u := c.uses(ctx)
	defer u.release()
	if err := u.slices(asBytes(send), asBytes(recv)); err != nil {
		return c.invalidCall(ctx, "Reduce", err)
	}
	if c.rank == root && len(recv) != len(send) {
		return c.invalidCall(ctx, "Reduce", invalidArg("root's len(recv)=%d != len(send)=%d", len(recv), len(send)))
	}
	if err := checkSliceAlias("Reduce", asBytes(send), asBytes(recv), sameMem, 0); err != nil {
		return c.invalidCall(ctx, "Reduce", err)
	}
	dt := dtypeOf[T]()
	if err := checkOp(op, dt); err != nil {
		return c.invalidCall(ctx, "Reduce", err)
	}
	if c.noKernels(dt) {
		return reduceGather(ctx, c, send, recv, op, root)
	}
	owned, err := c.begin(ctx, "Reduce", fingerprint{kind: collReduce, op: op, dt: dt, count: int64(len(send)), root: int32(root), strategy: Tree}, "Reduce fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	c.adoptCall(asBytes(send), asBytes(recv))
	defer c.releaseAdopted()
	n := len(send)
	if n == 0 {
		return nil
	}
	if c.g.n == 1 {
		copy(recv, send)
		return nil
	}
	k := &c.k
	if err := c.prepare(k, dt, op, n, asBytes(send), 0); err != nil {
		return c.fail(err, false, nil, nil)
	}
	if c.g.cfg.Deterministic {
		chunkLen := ceilDiv(n, c.g.n)
		if err = c.detReduceScatter(ctx, k, c.g.all, n, chunkLen); err == nil {
			err = c.gatherTo(ctx, k, c.g.all, root, n, chunkLen)
		}
	} else {
		err = c.treeReduce(ctx, k, c.rotated(root), n)
	}
	if err != nil {
		return c.failAfter(err, nil, nil)
	}
	if c.rank == root {
		if err := c.scaleOwned(ctx, k, 0, n); err != nil {
			return c.failAfter(err, nil, nil)
		}
		if err := c.download(ctx, k, 0, asBytes(recv)); err != nil {
			return c.fail(err, true, nil, nil)
		}
	}
	return nil
}

// Send sends data to rank peer, which must call Recv (or SendRecv, or
// RecvAsync) with the same length and type, and returns once the peer
// received it. Point-to-point calls are not numbered with the collectives:
// they pair on the direction between the two ranks, in call order. Two
// ranks that both Send to each other and then Recv deadlock (the Sends fail
// after CommunicationTimeout, naming the pattern): use SendRecv, or
// SendAsync and RecvAsync.
func Send[T Elem](ctx context.Context, c *Comm, data []T, peer int) error {
	if c == nil {
		return invalidArg("nil Comm")
	}
	if peer < 0 || peer >= c.g.n || peer == c.rank {
		return c.wrapErr("Send", 0, invalidArg("bad peer %d", peer))
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
		return c.wrapErr("Recv", 0, invalidArg("bad peer %d", peer))
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
		return c.wrapErr("SendRecv", 0, invalidArg("bad peers: to %d, from %d", to, from))
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
		return c.wrapErr(name, 0, err)
	}
	if err := checkSliceAlias(name, asBytes(send), asBytes(recv), sameMem, 0); err != nil {
		return c.wrapErr(name, 0, err)
	}
	owned, err := c.enterOp(ctx, name, false, true)
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	dt := dtypeOf[T]()
	if sameSlice(asBytes(send), asBytes(recv)) {
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

// reduceGather is Reduce for a type some device has no kernels for: every
// rank's send is gathered at root, which reduces the N copies on the CPU in
// rank order with the kernels' arithmetic (exact: bitwise what a
// deterministic Reduce gives).
func reduceGather[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op, root int) error {
	N, n := c.g.n, len(send)
	var blocks []T
	if c.rank == root {
		es := dtypeOf[T]().Size()
		if cap(c.vBlocks) < N*n*es {
			c.vBlocks = make([]byte, N*n*es)
		}
		blocks = viewAs[T](c.vBlocks[:N*n*es])
	}
	fp := fingerprint{kind: collReduce, op: op, dt: dtypeOf[T](), count: int64(n), root: int32(root), strategy: Direct, noF64: true}
	if err := gather(ctx, c, "Reduce", "Reduce fingerprint check", fp, send, blocks, root); err != nil {
		return err
	}
	if c.rank == root && n > 0 {
		reduceHost(dtypeOf[T](), asBytes(recv), asBytes(blocks), n, 0, N, n, op, scaleFor(op, N))
	}
	return nil
}
