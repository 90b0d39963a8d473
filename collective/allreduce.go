package collective

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/algo"
)

// AllReduce reduces data across all ranks with op, in place: on return every
// rank's data holds the same, bitwise identical result. Every rank of the
// group must call it with the same length and op, each from its own
// goroutine. On an error before data moved (validation, a mismatch between
// ranks, a timeout waiting for peers) data is untouched.
func AllReduce[T Elem](ctx context.Context, c *Comm, data []T, op Op) error {
	b := asBytes(data)
	return c.run(ctx, &desc{kind: collAllReduce, dt: dtypeOf[T](), op: op, send: b, recv: b})
}

// AllReduceWith is AllReduceInto with the strategy chosen for this call
// (Auto: the group's Config.Strategy, and if that is Auto too, the cost
// model). Every rank must pass the same strategy.
func AllReduceWith[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op, s Strategy) error {
	return c.run(ctx, &desc{kind: collAllReduce, entry: "AllReduceWith", dt: dtypeOf[T](), op: op, send: asBytes(send), recv: asBytes(recv), strategy: s})
}

// AllReduceInto reduces send across all ranks into recv (out of place); send
// is never written. len(send) must equal len(recv); they may be the same
// slice but must not partly overlap.
func AllReduceInto[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	return c.run(ctx, &desc{kind: collAllReduce, entry: "AllReduceInto", dt: dtypeOf[T](), op: op, send: asBytes(send), recv: asBytes(recv)})
}

// Barrier returns once every rank has called it.
func Barrier(ctx context.Context, c *Comm) error {
	return c.run(ctx, &desc{kind: collBarrier})
}

// invalidCall reports a local argument error to the peers too (through the
// fingerprint rendezvous), so they fail with a MismatchError instead of
// waiting for the timeout, and returns err to the caller.
func (c *Comm) invalidCall(ctx context.Context, name string, err error) error {
	owned, e := c.enter(ctx, name, true)
	if e != nil {
		return c.wrapErr(name, 0, err)
	}
	_ = c.arrive(ctx, fingerprint{kind: collInvalid}, "argument check")
	c.leave(owned, &err)
	return err
}

// scaleFor returns the final multiplier of op on n ranks.
func scaleFor(op Op, n int) float64 {
	if op == Mean {
		return 1 / float64(n)
	}
	return 1
}

// kernelOp maps a collective op onto the kernels' operator.
func kernelOp(op Op) backend.Op {
	switch op {
	case Prod:
		return backend.Prod
	case Max:
		return backend.Max
	case Min:
		return backend.Min
	case BAnd:
		return backend.BAnd
	case BOr:
		return backend.BOr
	case BXor:
		return backend.BXor
	case LAnd:
		return backend.LAnd
	case LOr:
		return backend.LOr
	case LXor:
		return backend.LXor
	}
	return backend.Sum
}

// sliceOf returns rank r's share [lo, hi) of n elements among size ranks.
func sliceOf(n, size, r int) (lo, hi int) {
	return n * r / size, n * (r + 1) / size
}

// dataPath says how a caller's data is held; ranks must agree on it.
type dataPath uint8

const (
	pathSlice  dataPath = iota + 1 // Go memory
	pathPinned                     // memory of a HostBuffer
	pathTensor                     // a device tensor
)

func (p dataPath) String() string {
	switch p {
	case pathSlice:
		return "slice"
	case pathPinned:
		return "pinned"
	case pathTensor:
		return "tensor"
	}
	return "none"
}

// slicePath returns the data path of a host-slice call.
func slicePath(send, recv []byte) dataPath {
	if len(send) > 0 && lookupPinned(send) != nil && lookupPinned(recv) != nil {
		return pathPinned
	}
	return pathSlice
}

// allReduce is the execution stage of an all-reduce of host slices (run
// checked d): the strategy (the call's, the group's, or Auto's choice),
// the fingerprint, then the one-process direct paths through the ranks'
// host memory, or the strategy on the device buffer.
func (c *Comm) allReduce(ctx context.Context, d *desc) (err error) {
	name, send, recv, dt, op, strat := d.name(), d.send, d.recv, d.dt, d.op, d.strategy
	n := len(send) / dt.Size()
	owned, err := c.enter(ctx, name, true)
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	g := c.g
	es := dt.Size()
	if strat == Auto {
		strat = g.cfg.Strategy
	}
	why := "configured"
	if strat == Auto {
		strat, why = c.autoStrategy(n*es, dt, true)
	}
	c.strat = strat
	path := slicePath(send[:n*es], recv[:n*es])
	hostF64 := c.noKernels(dt) // reduced exactly on the host
	// A large plain slice is imported in place (goimport.go).
	imported := false
	if path == pathSlice && n > 0 && g.n > 1 && !hostF64 && strat != Host {
		imported = c.adoptPair(send[:n*es], recv[:n*es])
		defer c.releaseAdopted()
	}
	fp := fingerprint{kind: collAllReduce, op: op, dt: dt, count: int64(n), strategy: strat, path: path, noF64: hostF64}
	// Direct and pipelined exchange through every rank's own buffers; they
	// run zero-copy when every rank's buffers are host memory its device
	// imported (HostBuffers, imported Go slices): publish them, and learn
	// at the rendezvous whether every rank can.
	peers := g.tr == nil && g.n > 1 && n > 0 && (strat == Direct || strat == Pipelined || strat == Host || hostF64)
	zc := false
	if peers && (strat == Direct || strat == Pipelined) && !hostF64 && (path == pathPinned || imported) {
		_, s1 := c.pinnedRegion(send[:n*es])
		_, s2 := c.pinnedRegion(recv[:n*es])
		zc = s1 && s2
	}
	if peers {
		g.sendOf[c.rank], g.recvOf[c.rank] = send, recv
		c.enterAccess()
	}
	allPinned, err := c.arriveFlag(ctx, fp, "AllReduce fingerprint check", zc)
	if err != nil {
		if peers {
			c.leaveAccess()
			if werr := c.waitAccess(); werr != nil {
				return werr
			}
		}
		return err
	}
	if g.logCalls {
		c.logCall(ctx, name, n, dt, op, strat, why)
	}
	if n == 0 {
		return nil
	}
	if g.n == 1 {
		if &recv[0] != &send[0] {
			copy(recv, send)
		}
		return nil
	}
	if peers {
		depth := 1
		if strat == Pipelined && !hostF64 {
			depth = g.cfg.PipelineDepth
		}
		if allPinned {
			return c.directPinned(ctx, send, recv, n, es, dt, op, depth)
		}
		// One process: direct and pipelined exchange through shared host
		// memory (and f64 without f64 kernels is reduced there exactly).
		return c.direct(ctx, send, recv, n, es, dt, op, depth)
	}
	if hostF64 {
		return c.fail(fmt.Errorf("%s across processes needs %s kernels on every device: %w", dt, dt, ErrUnsupported), false, send, recv)
	}
	if err := c.ensureWork(n*es, dt); err != nil {
		return c.fail(err, false, send, recv)
	}
	k := &c.k
	*k = call{dt: dt, es: es, op: kernelOp(op), scale: scaleFor(op, g.n), work: c.work}
	if err := c.upload(k, 0, send[:n*es]); err != nil {
		return c.fail(err, false, send, recv)
	}
	if err := c.runAllReduce(ctx, k, strat, n); err != nil {
		return c.failAfter(err, send, recv)
	}
	if err := c.download(ctx, k, 0, recv[:n*es]); err != nil {
		return c.fail(err, true, send, recv)
	}
	return nil
}

// runAllReduce runs strategy s on the call's device buffer.
func (c *Comm) runAllReduce(ctx context.Context, k *call, s Strategy, n int) error {
	g := c.g
	switch s {
	case Ring:
		return c.algo(k).RingAllReduce(ctx, g.all, n)
	case Tree:
		return c.algo(k).TreeAllReduce(ctx, g.all, n)
	case Hierarchical:
		return c.algo(k).HierAllReduce(ctx, g.groups[g.groupOf[c.rank]], g.leaders, g.all, n)
	}
	// Direct and Pipelined on a device buffer: the rank-ordered
	// reduce-scatter, then a ring all-gather.
	chunkLen := algo.CeilDiv(n, g.n)
	if err := c.algo(k).DetReduceScatter(ctx, g.all, n, chunkLen); err != nil {
		return err
	}
	lo, hi := algo.ChunkRange(n, chunkLen, c.rank)
	if err := c.scaleOwned(ctx, k, lo, hi); err != nil {
		return err
	}
	return c.algo(k).RingAllGather(ctx, g.all, n, chunkLen, 0)
}

func (c *Comm) logCall(ctx context.Context, name string, n int, dt backend.DType, op Op, s Strategy, why string) {
	g := c.g
	if g.log.Enabled(ctx, LevelTrace) {
		g.log.Log(ctx, LevelTrace, "gocoll: "+name, "rank", c.rank, "seq", c.seq, "count", n, "type", dt.String(),
			"op", op.String(), "strategy", s.String(), "why", why, "hostReduce", c.noKernels(dt))
	} else if c.rank == 0 && g.log.Enabled(ctx, slog.LevelInfo) {
		g.log.Info("gocoll: "+name, "seq", c.seq, "count", n, "type", dt.String(), "op", op.String(), "strategy", s.String(), "why", why)
	}
}

// direct is the one-shot all-reduce through host memory: every rank's
// send and receive slices were published at the fingerprint rendezvous;
// rank r gathers slice r of every rank's input into its own host-visible
// buffer, reduces it with one kernel (in rank order, so the result is
// deterministic), and copies the reduced slice into slice r of every rank's
// output. A completion rendezvous keeps every rank in the call until all
// slices are written. With depth > 1 (the pipelined strategy) the slice is
// cut into depth chunks: each chunk's kernel is submitted without waiting
// while the next chunk is gathered, and chunk d's result is copied out while
// chunk d+1 runs. Large copies are spread over the cores.
//
// In place is safe: rank r writes only slice r of each output, after it
// has read slice r of each input, and no other rank reads slice r.
//
// Ranks touch each other's memory here, so every rank is counted in
// g.access until its own copies and device work are done; a rank that fails
// drains its own work, leaves, and waits for the others to leave before it
// returns (waitAccess), so no peer writes its buffers after it returned.
func (c *Comm) direct(ctx context.Context, send, recv []byte, n, es int, dt backend.DType, op Op, depth int) error {
	if err := c.directSlice(ctx, send, recv, n, es, dt, op, depth); err != nil {
		return c.failDirect(err, send, recv)
	}
	c.leaveAccess()
	if err := c.arrive(ctx, fingerprint{kind: collAllReduce}, "AllReduce completion"); err != nil {
		if werr := c.waitAccess(); werr != nil {
			return werr
		}
		return err
	}
	return nil
}

// failDirect ends a failed direct exchange: the group is broken, this
// rank's work drained; it leaves the exchange and waits for its peers to.
func (c *Comm) failDirect(err error, send, recv []byte) error {
	if c.g.Err() == nil {
		c.breakWith(err)
	}
	if derr := c.drain(); derr != nil {
		err = derr
	}
	c.leaveAccess()
	if werr := c.waitAccess(); werr != nil {
		err = werr
	}
	switch err.(type) {
	case *BrokenError, *TimeoutError, *MismatchError, *lostError:
		return err
	}
	inPlace := len(send) > 0 && len(recv) > 0 && &send[0] == &recv[0]
	return &DataError{Rank: c.rank, InPlace: inPlace, Cause: err, Touched: true, Strategy: c.strat}
}

// broken reports whether the group broke (cheap: no lock).
func (c *Comm) broken() bool {
	select {
	case <-c.g.brokenCh:
		return true
	default:
		return false
	}
}

// directSlice is direct's exchange; the caller handles failures.
func (c *Comm) directSlice(ctx context.Context, send, recv []byte, n, es int, dt backend.DType, op Op, depth int) error {
	g := c.g
	lo, hi := sliceOf(n, g.n, c.rank)
	cnt := hi - lo
	if cnt == 0 {
		return nil
	}
	if err := c.ensure(&c.stage, cnt*es); err != nil {
		return err
	}
	// Rank p's inputs go to slot p of the gather buffer; slots and chunk
	// boundaries sit on 16-byte boundaries so kernels can use 16-byte
	// accesses.
	stride := (cnt*es + 15) &^ 15
	if err := c.ensure(&c.gather, g.n*stride); err != nil {
		return err
	}
	host := c.noKernels(dt) || c.strat == Host
	depth = max(1, min(depth, cnt, MaxPipelineDepth))
	if host {
		depth = 1
	}
	gb := c.gather.Bytes()
	s := c.dev.Stream()
	srcs := c.regions(g.n)
	for d := 0; d < depth; d++ {
		if c.broken() {
			return c.brokenErr()
		}
		a, b := chunkBounds(lo, cnt, d, depth)
		m := b - a
		c.fences[d] = nil
		if m > 0 {
			for p := 0; p < g.n; p++ {
				// Buffer.Write: the exchange is counted at the backend seam.
				c.copyIn(c.gather, p*stride+(a-lo)*es, g.sendOf[p][a*es:b*es])
			}
			if err := c.copyWait(); err != nil {
				return err
			}
			res := c.stage.Bytes()[(a-lo)*es : (b-lo)*es]
			if host {
				reduceHost(dt, res, gb, stride/es, (a - lo), g.n, m, op, scaleFor(op, g.n))
				if err := c.scatter(d, lo, a, b, es); err != nil {
					return err
				}
				continue
			}
			for p := 0; p < g.n; p++ {
				srcs[p] = backend.Region{Buf: c.gather, Off: p*stride + (a-lo)*es, Len: m * es}
			}
			dst := backend.Region{Buf: c.stage, Off: (a - lo) * es, Len: m * es}
			if err := s.Reduce(kernelOp(op), dt, dst, srcs, scaleFor(op, g.n)); err != nil {
				return err
			}
			f, err := c.submitWork()
			if err != nil {
				return err
			}
			c.fences[d] = f
		}
		// Copy out the previous chunk while this one runs (an empty chunk
		// still lets the one before it finish).
		if d > 0 {
			if err := c.finishChunk(ctx, d-1, depth, lo, cnt, es); err != nil {
				return err
			}
		}
	}
	if !host {
		return c.finishChunk(ctx, depth-1, depth, lo, cnt, es)
	}
	return nil
}

// finishChunk waits for chunk d's kernel and copies its result into every
// rank's output.
func (c *Comm) finishChunk(ctx context.Context, d, depth, lo, cnt, es int) error {
	a, b := chunkBounds(lo, cnt, d, depth)
	if a == b || c.fences[d] == nil {
		return nil
	}
	if err := c.waitFence(ctx, c.fences[d]); err != nil {
		return err
	}
	c.fences[d] = nil
	if c.broken() {
		return c.brokenErr()
	}
	return c.scatter(d, lo, a, b, es)
}

// chunkBounds returns chunk d of depth chunks of [lo, lo+cnt); inner
// boundaries are multiples of 4 elements from lo (16-byte aligned).
func chunkBounds(lo, cnt, d, depth int) (int, int) {
	a, b := (cnt*d/depth)&^3, (cnt*(d+1)/depth)&^3
	if d == depth-1 {
		b = cnt
	}
	if a > b {
		a = b
	}
	return lo + a, lo + b
}

// scatter copies reduced elements [a, b) (at their place in the stage
// buffer) into every rank's output.
func (c *Comm) scatter(d, lo, a, b, es int) error {
	for p := 0; p < c.g.n; p++ {
		c.copyOut(c.stage, (a-lo)*es, c.g.recvOf[p][a*es:b*es])
	}
	return c.copyWait()
}

// directPinned is the direct algorithm without a single host copy, for
// pinned host buffers (NewHostBuffer) on devices that import host memory:
// rank r's kernel reads slice r of every rank's send buffer straight from
// host memory, reduces it in rank order into device memory, and its device
// copies the result into slice r of every rank's receive buffer. The slice
// is cut into depth chunks, each submitted without waiting; one fence (the
// last: queues are FIFO) covers the batch. A final rendezvous keeps every
// rank in the call until all ranks have written their slices. Failures are
// handled as in direct.
func (c *Comm) directPinned(ctx context.Context, send, recv []byte, n, es int, dt backend.DType, op Op, depth int) error {
	if err := c.directPinnedSlice(ctx, n, es, dt, op, depth); err != nil {
		return c.failDirect(err, send, recv)
	}
	c.leaveAccess()
	if err := c.arrive(ctx, fingerprint{kind: collAllReduce}, "AllReduce pinned completion"); err != nil {
		if werr := c.waitAccess(); werr != nil {
			return werr
		}
		return err
	}
	return nil
}

func (c *Comm) directPinnedSlice(ctx context.Context, n, es int, dt backend.DType, op Op, depth int) error {
	g := c.g
	lo, hi := sliceOf(n, g.n, c.rank)
	cnt := hi - lo
	if cnt == 0 {
		return nil
	}
	depth = max(1, min(depth, cnt))
	s := c.dev.Stream()
	mr, multi := s.(backend.MultiReducer)
	if !multi {
		if err := c.ensureMem(&c.work, cnt*es, backend.DeviceLocal); err != nil {
			return err
		}
	}
	srcs := c.regions(g.n)
	dsts := c.dstRegions(g.n)
	var last backend.Fence
	for d := 0; d < depth; d++ {
		a, b := lo+cnt*d/depth, lo+cnt*(d+1)/depth
		if a == b {
			continue
		}
		for p := 0; p < g.n; p++ {
			r, ok, err := c.importRegion(g.sendOf[p][a*es : b*es])
			if !ok {
				return importFailed(p, err)
			}
			srcs[p] = r
			if r, ok, err = c.importRegion(g.recvOf[p][a*es : b*es]); !ok {
				return importFailed(p, err)
			}
			dsts[p] = r
		}
		if multi && multiSafe(dsts, srcs) {
			// One pass reads every rank's pinned input and writes every
			// rank's pinned output: host-to-device and device-to-host
			// traffic in the same dispatch, both PCIe directions at once.
			if err := mr.ReduceMulti(kernelOp(op), dt, dsts, srcs, scaleFor(op, g.n)); err != nil {
				return err
			}
		} else {
			if err := c.ensureMem(&c.work, cnt*es, backend.DeviceLocal); err != nil {
				return err
			}
			w := backend.Region{Buf: c.work, Off: (a - lo) * es, Len: (b - a) * es}
			if err := s.Reduce(kernelOp(op), dt, w, srcs, scaleFor(op, g.n)); err != nil {
				return err
			}
			for _, r := range dsts {
				if err := s.Copy(r, w); err != nil {
					return err
				}
			}
		}
		f, err := c.submitWork()
		if err != nil {
			return err
		}
		last = f
	}
	if last != nil {
		return c.waitFence(ctx, last)
	}
	return nil
}

// multiSafe reports whether one ReduceMulti may write dsts from srcs: the
// destinations pairwise disjoint, and every source either exactly a
// destination (in place) or apart from all of them. (Within one comm a
// host allocation is imported once, so regions of one memory share a
// Buffer.) Ranks passing overlapping buffers take the staged path instead.
func multiSafe(dsts, srcs []backend.Region) bool {
	overlap := func(a, b backend.Region) bool {
		return a.Buf == b.Buf && a.Off < b.Off+b.Len && b.Off < a.Off+a.Len
	}
	for j, r := range dsts {
		for _, o := range dsts[:j] {
			if overlap(r, o) {
				return false
			}
		}
	}
	for _, r := range srcs {
		for _, d := range dsts {
			if overlap(r, d) && r != d {
				return false
			}
		}
	}
	return true
}

// importFailed is the error of a failed import of rank p's pinned buffer
// during a zero-copy exchange (every rank's own import had succeeded).
func importFailed(p int, err error) error {
	if err == nil {
		err = ErrUnsupported
	}
	return fmt.Errorf("importing rank %d's pinned buffer: %w", p, err)
}

// failAfter wraps an error from an algorithm that worked on the device
// buffer: the caller's buffers were not written yet.
func (c *Comm) failAfter(err error, send, recv []byte) error {
	switch err.(type) {
	case *TimeoutError, *MismatchError, *BrokenError, *lostError:
		if derr := c.drain(); derr != nil {
			return derr
		}
		return err
	}
	return c.fail(err, false, send, recv)
}

// fail breaks the group after a failure inside a collective, drains the
// comm's own work, and wraps the failure.
func (c *Comm) fail(err error, touched bool, send, recv []byte) error {
	if _, ok := err.(*BrokenError); ok {
		if derr := c.drain(); derr != nil {
			return derr
		}
		return err
	}
	if c.g.Err() == nil {
		c.breakWith(err)
	}
	if derr := c.drain(); derr != nil {
		err = derr
	}
	inPlace := len(send) > 0 && len(recv) > 0 && &send[0] == &recv[0]
	return &DataError{Rank: c.rank, InPlace: inPlace, Cause: err, Touched: touched, Strategy: c.strat}
}
