package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/algo"
	"github.com/gocoll/gocoll/internal/direct"
)

// The algorithms of the collectives on host slices other than all-reduce,
// the execution stage of run (call.go): each is entered with d checked,
// the fingerprint matched, the comm owned and d's counts non-zero. Host
// slices are uploaded into the rank's device buffer, the algorithm runs
// there over the exchange layer, and the result is downloaded. Those that
// run in the work buffer (ReduceScatter, AllGather, Reduce) serve the
// tensor forms as well (tensorcoll.go): move then copies on the device.

// move is the execution stage of a collective that runs in the comm's
// work buffer: n elements of d's type there, src (host slices) or d's send
// tensor copied in at element at, the algorithm's steps over the exchange
// layer, then elements [from, +len(dst)) downloaded into dst (none when
// dst is nil), or delivered into d's recv tensor (none when it has none).
// A failure before that last step leaves the caller's memory untouched.
func (c *Comm) move(ctx context.Context, d *desc, op Op, n int, src []byte, at int, steps func(k *call) error, dst []byte, from int) error {
	k := &c.k
	if d.tensor {
		src = nil
	}
	if err := c.prepare(k, d.dt, op, n, src, at); err != nil {
		return c.fail(err, false, nil, nil)
	}
	if d.st != nil {
		if err := c.record(k.region(at, at+d.st.n), d.st.region(0, d.st.n)); err != nil {
			return c.failAfter(err, nil, nil)
		}
	}
	if err := steps(k); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if d.tensor {
		if d.rt == nil {
			return nil
		}
		return c.deliver(ctx, d.rt.region(0, d.rt.n), k.region(from, from+d.rt.n))
	}
	if dst != nil {
		if err := c.download(ctx, k, from, dst); err != nil {
			return c.fail(err, true, nil, nil)
		}
	}
	return nil
}

// atRoot returns b on d's root, nil elsewhere.
func (c *Comm) atRoot(d *desc, b []byte) []byte {
	if c.rank == d.root {
		return b
	}
	return nil
}

// execReduceScatter: ring, N-1 steps; in deterministic mode (or with the
// Direct strategy) each chunk is reduced at its owner in rank order.
func (c *Comm) execReduceScatter(ctx context.Context, d *desc, s Strategy) error {
	N, r := c.g.n, c.rank
	_, m := d.lens()
	return c.move(ctx, d, d.op, N*m, d.send, 0, func(k *call) error {
		if N > 1 {
			var err error
			if c.g.cfg.Deterministic || s == Direct {
				err = c.algo(k).DetReduceScatter(ctx, c.g.all, N*m, m)
			} else {
				err = c.algo(k).RingReduceScatter(ctx, c.g.all, N*m, m, 0)
			}
			if err != nil {
				return err
			}
		}
		return c.scaleOwned(ctx, k, r*m, (r+1)*m)
	}, d.recv, r*m)
}

// execAllGather: a ring of N-1 steps.
func (c *Comm) execAllGather(ctx context.Context, d *desc) error {
	N := c.g.n
	m, _ := d.lens()
	return c.move(ctx, d, Sum, N*m, d.send, c.rank*m, func(k *call) error {
		if N == 1 {
			return nil
		}
		return c.algo(k).RingAllGather(ctx, c.g.all, N*m, m, 0)
	}, d.recv, 0)
}

// execBroadcast: down a binary tree rooted at root, in slices, from root's
// send into the other ranks' recv (Broadcast: one buffer, send). Out of
// place (BroadcastInto), root's send is copied into its recv once the
// data moved.
func (c *Comm) execBroadcast(ctx context.Context, d *desc) error {
	out := d.recv
	if d.kind == collBroadcast {
		out = d.send
	}
	n := len(out) / d.dt.Size()
	var dst []byte
	if c.rank != d.root {
		dst = out
	}
	if err := c.move(ctx, d, Sum, n, c.atRoot(d, d.send), 0, func(k *call) error {
		return c.algo(k).TreeBroadcast(ctx, c.rotated(d.root), n)
	}, dst, 0); err != nil {
		return err
	}
	if c.rank == d.root && d.kind == collBroadcastInto {
		copy(d.recv, d.send)
	}
	return nil
}

// scan is Scan and Exscan. In one process, on a device backend with
// kernels for the type, each rank computes the prefixes of its slice of
// the elements on its device (peerCall); elsewhere (the host backend,
// a type without kernels, a group over a Transport) every rank's send is
// gathered (a ring, as AllGather's) into the comm's pooled host memory,
// and rank r reduces the inputs of ranks 0..r (Exscan: 0..r-1) on the CPU
// in rank order with the kernels' arithmetic, rounded once; the memory a
// rank needs is then N times its input. Both give the same bits. Exscan
// leaves rank 0's recv untouched.
func (c *Comm) scan(ctx context.Context, d *desc, fp fingerprint) (err error) {
	if c.scanOnDevice(d.dt) {
		return c.peerCall(ctx, d, fp)
	}
	sp := &callSpecs[d.kind]
	owned, err := c.begin(ctx, sp.name, fp, sp.phases[0])
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	if len(d.send) == 0 {
		return nil
	}
	k := c.rank + 1
	if d.kind == collExscan {
		k = c.rank
	}
	return c.gatherReduce(ctx, d, true, k, 1)
}

// scanOnDevice reports whether Scan and Exscan of dt run on the devices
// (peerCall): one process of several ranks, a backend other than the
// host's, kernels for dt on every device. It is the same on every rank.
func (c *Comm) scanOnDevice(dt backend.DType) bool {
	return c.g.tr == nil && c.g.n > 1 && c.g.bk != "host" && !c.noKernels(dt)
}

// peerCall runs a one-process call through every rank's send and recv
// slices, published at the fingerprint rendezvous: AllGather (strategy
// Direct: each rank copies every block into its recv on the CPU),
// ReduceScatter on the host backend (Direct: each rank reduces its block of
// every send into its recv on the CPU in rank order), and Scan and Exscan
// on devices (internal/direct's Scan: rank r gathers its slice of the
// elements of the ranks' inputs, reduces every prefix of them on its device
// in rank order, and writes prefix q into its slice of rank q's recv;
// where every rank's send and recv are HostBuffers its device imported, and
// the prefixes a chain of kernels, its device reads and writes them in
// place instead: ScanZeroCopy). A completion rendezvous keeps every rank in
// the call until all are done; g.access counts the ranks that may still
// touch a peer's memory, as in direct.
func (c *Comm) peerCall(ctx context.Context, d *desc, fp fingerprint) (err error) {
	g, sp, es := c.g, &callSpecs[d.kind], d.dt.Size()
	owned, err := c.enter(ctx, sp.name, true)
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	c.strat = fp.strategy
	ns, nr := d.lens()
	send, recv, scan := d.send[:ns*es], d.recv[:nr*es], d.kind == collScan || d.kind == collExscan
	// Zero-copy where every rank's send and recv are HostBuffers its
	// device imported and the prefixes are a chain of kernels: learnt at
	// the rendezvous.
	zc := scan && direct.Chained(d.dt, kernelOp(d.op)) && slicePath(send, recv) == pathPinned
	allPinned, err := c.meetPeers(ctx, fp, sp.phases[0], send, recv, ns > 0, zc)
	if err != nil || ns == 0 {
		return err
	}
	if g.logCalls {
		c.logCall(ctx, sp.name, ns, fp.dt, fp.op, fp.strategy, "through the ranks' memory")
	}
	switch d.kind {
	case collAllGather:
		direct.AllGather(c.rank, g.pub.Send, recv, len(send))
	case collReduceScatter:
		c.dx.ReduceScatter(d.dt, kernelOp(d.op), scaleFor(d.op, g.n), c.rank, g.pub.Send, recv, nr)
	default:
		k := &direct.Call{DT: d.dt, Op: kernelOp(d.op), Scale: 1, N: ns, Me: c.rank, Sends: g.pub.Send, Recvs: g.pub.Recv,
			Depth: 1, Prefix: direct.Inclusive}
		if d.kind == collExscan {
			k.Prefix = direct.Exclusive
		}
		if err := c.dx.ScanAny(ctx, (*directRank)(c), k, allPinned); err != nil {
			return c.failDirect(err, d.send, d.recv)
		}
	}
	return c.undefined(c.completed(fingerprint{kind: d.kind}, sp.phases[4], !scan), d.send, d.recv)
}

// execReduce: along a binary tree rooted at root; in deterministic mode a
// reduce-scatter in rank order, then the chunks gathered at root (a
// tensor's result then copied into root's recv).
func (c *Comm) execReduce(ctx context.Context, d *desc) error {
	n, _ := d.lens()
	if c.g.n == 1 && !d.tensor {
		copy(d.recv, d.send)
		return nil
	}
	if c.noKernels(d.dt) {
		return c.reduceGather(ctx, d)
	}
	return c.move(ctx, d, d.op, n, d.send, 0, func(k *call) error {
		var err error
		switch {
		case c.g.n == 1: // a tensor: send is in the work buffer
		case c.g.cfg.Deterministic:
			chunkLen := algo.CeilDiv(n, c.g.n)
			if err = c.algo(k).DetReduceScatter(ctx, c.g.all, n, chunkLen); err == nil {
				err = c.algo(k).GatherTo(ctx, c.g.all, d.root, n, chunkLen)
			}
		default:
			err = c.algo(k).TreeReduce(ctx, c.rotated(d.root), n)
		}
		switch {
		case err != nil:
			return err
		case c.rank == d.root:
			return c.scaleOwned(ctx, k, 0, n)
		case d.tensor:
			// The copy of send ran with the first slice sent (flushed);
			// settle makes sure before send is the caller's again.
			return c.settle(ctx)
		}
		return nil
	}, c.atRoot(d, d.recv), 0)
}

// execGather: every rank's block straight to root.
func (c *Comm) execGather(ctx context.Context, d *desc) error {
	N := c.g.n
	m := len(d.send) / d.dt.Size()
	return c.move(ctx, d, Sum, N*m, d.send, c.rank*m, func(k *call) error {
		return c.algo(k).GatherTo(ctx, c.g.all, d.root, N*m, m)
	}, c.atRoot(d, d.recv), 0)
}

// reduceGather is Reduce for a type some device has no kernels for: every
// rank's send is gathered at root, which reduces the N copies on the CPU in
// rank order with the kernels' arithmetic (exact: bitwise what a
// deterministic Reduce gives). A tensor's go, slice by slice and straight
// from the tensor, to root's pooled host-visible buffer, and the result is
// copied into recv.
func (c *Comm) reduceGather(ctx context.Context, d *desc) error {
	N := c.g.n
	if !d.tensor {
		return c.gatherReduce(ctx, d, c.rank == d.root, N, scaleFor(d.op, N))
	}
	if root, err := c.gatherAt(ctx, d, &c.gather); !root || err != nil {
		return err
	}
	return c.reduceBlocks(ctx, d, N, true, scaleFor(d.op, N))
}

// gatherReduce gathers every rank's send (Reduce: a Gather at the root;
// Scan and Exscan: an AllGather) into the comm's pooled host memory where
// here holds (elsewhere into nothing), then there reduces the first k
// ranks' blocks into d.recv on the CPU in rank order with the kernels'
// arithmetic, scaled by scale and rounded once.
func (c *Comm) gatherReduce(ctx context.Context, d *desc, here bool, k int, scale float64) (err error) {
	n := len(d.send) / d.dt.Size()
	g := *d
	g.recv = nil
	if here {
		g.recv = c.vxState.Blocks(c.g.n * len(d.send))
	}
	if d.kind == collReduce {
		err = c.execGather(ctx, &g)
	} else {
		err = c.execAllGather(ctx, &g)
	}
	if err != nil {
		return err
	}
	if here && k > 0 {
		reduceHost(d.dt, d.recv, g.recv, n, 0, k, n, d.op, scale)
	}
	return nil
}

// execScatter: root's blocks straight to their ranks.
func (c *Comm) execScatter(ctx context.Context, d *desc) error {
	N := c.g.n
	m := len(d.recv) / d.dt.Size()
	return c.move(ctx, d, Sum, N*m, c.atRoot(d, d.send), 0, func(k *call) error {
		return c.algo(k).ScatterFrom(ctx, c.g.all, d.root, N*m, m)
	}, d.recv, c.rank*m)
}

// execAllToAll: a pairwise exchange of N-1 shift steps; the work buffer
// holds send in [0, n) and recv in [n, 2n). In place (send == recv,
// MPI_IN_PLACE) works as it is: send is copied into the device buffer
// before recv is written.
func (c *Comm) execAllToAll(ctx context.Context, d *desc) error {
	N := c.g.n
	m := len(d.send) / d.dt.Size() / N
	n := N * m
	return c.move(ctx, d, Sum, 2*n, d.send, 0, func(k *call) error {
		return c.pairwiseExchange(ctx, k, n, m)
	}, d.recv, n)
}

// exchangeCounts sends scounts[j] to rank j through the devices (a pairwise
// exchange of one float64 each, as the data moves) and leaves what each
// rank j sends this one in cnt[N+j].
func (c *Comm) exchangeCounts(ctx context.Context, k *call, scounts []int, cnt []float64) error {
	N := c.g.n
	if err := c.prepare(k, backend.F64, Sum, 2*N, nil, 0); err != nil {
		return c.fail(err, false, nil, nil)
	}
	for j := 0; j < N; j++ {
		cnt[j] = float64(scounts[j])
	}
	if err := c.upload(k, 0, asBytes(cnt[:N])); err != nil {
		return c.fail(err, false, nil, nil)
	}
	if err := c.pairwiseExchange(ctx, k, N, 1); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.download(ctx, k, N, asBytes(cnt[N:2*N])); err != nil {
		return c.fail(err, false, nil, nil)
	}
	return nil
}
