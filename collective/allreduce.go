package collective

import (
	"context"
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/algo"
	"github.com/gocoll/gocoll/internal/calllog"
	"github.com/gocoll/gocoll/internal/direct"
	"github.com/gocoll/gocoll/internal/memory"
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
func Barrier(ctx context.Context, c *Comm) error { return c.run(ctx, &desc{kind: collBarrier}) }

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

// kernelOps maps each collective op onto the kernels' operator (Mean: the
// sum, scaled once).
var kernelOps = [...]backend.Op{Sum: backend.Sum, Mean: backend.Sum, Max: backend.Max, Min: backend.Min, Prod: backend.Prod,
	BAnd: backend.BAnd, BOr: backend.BOr, BXor: backend.BXor, LAnd: backend.LAnd, LOr: backend.LOr, LXor: backend.LXor}

// kernelOp maps a collective op onto the kernels' operator.
func kernelOp(op Op) backend.Op {
	if op.Valid() {
		return kernelOps[op]
	}
	return backend.Sum
}

// dataPath says how a caller's data is held; ranks must agree on it.
type dataPath uint8

const (
	pathSlice  dataPath = iota + 1 // Go memory
	pathPinned                     // memory of a HostBuffer
	pathTensor                     // a device tensor
)

var dataPathNames = [...]string{"none", pathSlice: "slice", pathPinned: "pinned", pathTensor: "tensor"}

func (p dataPath) String() string {
	if int(p) < len(dataPathNames) {
		return dataPathNames[p]
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

// allReduce is the execution stage of an all-reduce (run checked d): the
// strategy (the call's, the group's, or Auto's choice), then on tensors
// allReduceTensor; on host slices the fingerprint, then the one-process
// direct paths through the ranks' host memory, or the strategy on the
// device buffer.
func (c *Comm) allReduce(ctx context.Context, d *desc) (err error) {
	name, send, recv, dt, op := d.name(), d.send, d.recv, d.dt, d.op
	es := dt.Size()
	n, _ := d.lens()
	if d.tensor && c.noKernels(dt) {
		return c.unsupportedType(ctx, name, dt)
	}
	owned, err := c.enter(ctx, name, true)
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	g := c.g
	strat, why := c.allReduceStrategy(d, n*es)
	c.strat = strat
	if d.tensor {
		return c.preMulBack(ctx, d, c.allReduceTensor(ctx, d, strat, why))
	}
	path := slicePath(send[:n*es], recv[:n*es])
	hostF64 := c.noKernels(dt) // reduced exactly on the host
	// A large plain slice is imported in place (goimport.go).
	imported := false
	if path == pathSlice && n > 0 && g.n > 1 && !hostF64 && strat != Host && strat != Native {
		imported = c.goImp.AdoptPair(send[:n*es], recv[:n*es]) // until releaseAdopted
		defer c.releaseAdopted()
	}
	fp := fingerprint{kind: collAllReduce, op: op, dt: dt, count: int64(n), strategy: strat, path: path, noF64: hostF64}
	// Direct and pipelined exchange through every rank's own buffers; they
	// run zero-copy when every rank's buffers are host memory its device
	// imported (HostBuffers, imported Go slices): publish them, and learn
	// at the rendezvous whether every rank can.
	peers := g.tr == nil && g.n > 1 && n > 0 && (strat == Direct || strat == Pipelined || strat == Host || hostF64)
	peers = peers || (strat == Native && n > 0) // Native: the leader reads its process's slices
	zc := (strat == Direct || strat == Pipelined) && !hostF64 && (path == pathPinned || imported)
	allPinned, err := c.meetPeers(ctx, fp, "AllReduce fingerprint check", send[:n*es], recv[:n*es], peers, zc)
	if err != nil {
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
	if strat == Native {
		return c.nativeAllReduce(ctx, dt, op, send, recv, n)
	}
	if peers {
		depth := 1
		if strat == Pipelined && !hostF64 {
			depth = g.cfg.PipelineDepth
		}
		// One process: direct and pipelined exchange through shared host
		// memory (and f64 without f64 kernels is reduced there exactly).
		return c.direct(ctx, send, recv, n, dt, op, depth, allPinned)
	}
	if hostF64 {
		return c.fail(fmt.Errorf("%s across processes needs %s kernels on every device: %w", dt, dt, ErrUnsupported), false, send, recv)
	}
	k := &c.k
	if err := c.prepare(k, dt, op, n, send[:n*es], 0); err != nil {
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
		return g.hier.AllReduce(ctx, c.algo(k), n)
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

// logCall logs a call of c (internal/calllog).
func (c *Comm) logCall(ctx context.Context, name string, n int, dt backend.DType, op Op, s Strategy, why string) {
	calllog.Log(ctx, c.g.log, calllog.Call{Name: name, Rank: c.rank, Seq: c.seq, Count: n, Type: dt.String(), Op: op.String(),
		Strategy: s.String(), Why: why, HostReduce: c.noKernels(dt)})
}

// meetPeers is the fingerprint rendezvous (fp, phase) of a call whose
// ranks reach each other's host memory (peers; else the plain rendezvous):
// this rank's send and recv published (g.pub) and the rank counted in
// g.access first. It reports whether every rank's send and recv are host
// memory its device imported, where zc asks this rank's. A rank that
// fails leaves and waits for the others to (waitAccess).
func (c *Comm) meetPeers(ctx context.Context, fp fingerprint, phase string, send, recv []byte, peers, zc bool) (bool, error) {
	if peers {
		c.g.pub.Send[c.rank], c.g.pub.Recv[c.rank] = send, recv
		c.enterAccess()
		if zc {
			_, s1 := c.pinnedRegion(send)
			_, s2 := c.pinnedRegion(recv)
			zc = s1 && s2
		}
	}
	all, err := c.meet(ctx, fp, phase, peers && zc, c.g.tr != nil)
	if err != nil && peers {
		c.leaveAccess()
		err = c.afterAccess(err)
	}
	return all, err
}

// completed is the end of a call whose rank reached its peers' memory
// (meetPeers, nativeRun): the rank leaves g.access, then the completion
// rendezvous (fp, phase; among this process's ranks) keeps every rank in the call until all are done. What
// is left of every rank's part is its own copies and device work, bounded
// (a device's by its drain limit), so the rendezvous waits for them
// whatever the caller's ctx (the group's timeout still holds): a ctx ending now
// neither fails a call whose data moved nor breaks the group. own: the
// rank's recv holds its whole result now (AllGather, AllGatherV, the
// host's ReduceScatter, Native's calls), whatever a peer does after; else
// peers write into its recv too (AllReduce, Scan: their callers report a
// failure as undefined).
func (c *Comm) completed(fp fingerprint, phase string, own bool) error {
	c.leaveAccess()
	_, err := c.meet(context.Background(), fp, phase, false, false)
	if err != nil {
		err = c.afterAccess(err)
	}
	if _, lost := err.(*lostError); own && !lost {
		return nil // the rank's own result is whole whatever its peers did
	}
	return err
}

// direct runs the one-process direct or pipelined exchange (internal/direct)
// through every rank's send and receive slices, published at the
// fingerprint rendezvous: zero-copy where every rank's buffers are host
// memory its device imported, else staged through host memory. A
// completion rendezvous keeps every rank in the call until all slices are
// written.
//
// Ranks touch each other's memory here, so every rank is counted in
// g.access until its own copies and device work are done; a rank that fails
// drains its own work, leaves, and waits for the others to leave before it
// returns (waitAccess), so no peer writes its buffers after it returned.
func (c *Comm) direct(ctx context.Context, send, recv []byte, n int, dt backend.DType, op Op, depth int, zeroCopy bool) error {
	g := c.g
	k := &direct.Call{DT: dt, Op: kernelOp(op), Scale: scaleFor(op, g.n), N: n, Me: c.rank, Sends: g.pub.Send, Recvs: g.pub.Recv,
		Depth: depth, Host: c.noKernels(dt) || c.strat == Host, CPU: g.bk == "host"}
	var err error
	if zeroCopy {
		err = c.dx.ZeroCopy(ctx, (*directRank)(c), k)
	} else {
		err = c.dx.Staged(ctx, (*directRank)(c), k)
	}
	if err != nil {
		return c.failDirect(err, send, recv)
	}
	return c.undefined(c.completed(fingerprint{kind: collAllReduce}, "AllReduce completion", false), send, recv)
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
	return c.undefined(c.afterAccess(err), send, recv)
}

// undefined is err of a call in which peers may have written the rank's
// buffers (or it theirs): a *DataError with Touched, whatever its cause (a
// peer's failure or timeout, the rank's context), but a mismatch (found
// before any data moved) and the rank's lost device; nil stays nil.
func (c *Comm) undefined(err error, send, recv []byte) error {
	switch err.(type) {
	case nil, *MismatchError, *lostError:
		return err
	}
	return &DataError{Rank: c.rank, InPlace: memory.SameSlice(send, recv), Cause: err, Touched: true, Strategy: c.strat}
}

// directRank is the comm as the direct exchange's direct.Rank.
type directRank Comm

func (r *directRank) Stream() backend.Stream { return r.dev.Stream() }

func (r *directRank) Buffer(which, n int) (backend.Buffer, error) {
	b, where := &r.stage, backend.HostVisible
	switch which {
	case direct.Gather:
		b = &r.gather
	case direct.Work:
		b, where = &r.work, backend.DeviceLocal
	}
	err := (*Comm)(r).ensureMem(b, n, where)
	return *b, err
}

func (r *directRank) CopyIn(buf backend.Buffer, off int, p []byte)  { (*Comm)(r).copyIn(buf, off, p) }
func (r *directRank) CopyOut(buf backend.Buffer, off int, p []byte) { (*Comm)(r).copyOut(buf, off, p) }
func (r *directRank) CopyWait() error                               { return (*Comm)(r).copyWait() }
func (r *directRank) Submit() (backend.Fence, error)                { return (*Comm)(r).submitWork() }

func (r *directRank) Wait(ctx context.Context, f backend.Fence) error {
	return (*Comm)(r).waitFence(ctx, f)
}

func (r *directRank) Broken() error {
	if !r.g.isBroken.Load() {
		return nil // the steady state: no lock
	}
	return (*Comm)(r).brokenErr()
}

func (r *directRank) Import(p []byte) (backend.Region, bool, error) {
	return (*Comm)(r).importRegion(p)
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
// comm's own work, and wraps the failure (touched: data may have moved
// into the caller's memory; a *DataError says so whatever the cause).
func (c *Comm) fail(err error, touched bool, send, recv []byte) error {
	if c.g.Err() == nil {
		c.breakWith(err)
	}
	if derr := c.drain(); derr != nil {
		err = derr
	}
	if _, ok := err.(*BrokenError); ok && !touched {
		return err
	}
	return &DataError{Rank: c.rank, InPlace: memory.SameSlice(send, recv), Cause: err, Touched: touched, Strategy: c.strat}
}

// failInPlace is fail for an algorithm that ran in the caller's tensor
// (AllReduceTensor, BroadcastTensor): the tensor is undefined.
func (c *Comm) failInPlace(err error) error {
	de := c.fail(err, true, nil, nil).(*DataError) // touched: always one
	de.InPlace = true
	return de
}
