package collective

import (
	"context"
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/callcheck"
	"github.com/gocoll/gocoll/internal/memory"
	"github.com/gocoll/gocoll/internal/native"
	"github.com/gocoll/gocoll/internal/shareddev"
)

// The call pipeline of the collectives, Barrier and the point-to-point
// calls. Every public entry point (api.go, p2p.go's Send, Recv and
// SendRecv, their Async and Batch forms) describes its call as a desc and
// hands it to run, the one path every call takes, stage by stage:
//
//  1. what one rank can check alone: the root or the peers, the lengths,
//     counts and offsets the collective's kind requires (shape: the
//     kind's rule, internal/callcheck), the op for the type;
//  2. memory: the owners of the slices are counted as users and the
//     overlap of send and recv is checked against the kind's one in-place
//     layout (resolve.go, internal/memory);
//  3. the comm claimed (claim: a synchronous call waits for the comm's
//     queued operations; a second goroutine's call is refused), before
//     anything the comm owns is written, and held until the call returns;
//     then the algorithm: the strategy the algorithm table gives the kind
//     (algorithms.go), or the exact host path of a type some device has no
//     kernels for;
//  4. the fingerprint: every rank's call is compared before data moves
//     (begin), the counts of the V kinds agreed (agreeCounts);
//  5. execution over the exchange layer (the kind's exec below; a
//     point-to-point call posts its operations instead, execP2P);
//  6. drain and release (leave, releaseAdopted, the claim, the owners), the error
//     wrapped once as an *Error naming the entry point the user called.
//
// A rank whose own arguments fail stage 1 or 2 tells its peers (refuse):
// a collective's through the rendezvous (invalidCall), a point-to-point
// call by breaking the group naming itself (refuseP2P), so they fail at
// once instead of waiting. The asynchronous form of each call queues the
// same desc on the comm (start): its memory resolved when it is started,
// run when its turn comes (a point-to-point operation is then posted, and
// its Work completes when it meets its peer's).
//
// Adding a collective: its collKind and callSpecs entry (its shape rule
// among them) and its exec case here, its entry points in api.go, its
// algorithms in the table (algorithms.go).

// collKind names a collective: the kind of a desc, and in fingerprints.
type collKind uint8

const (
	collNone collKind = iota
	collAllReduce
	collBarrier
	collInvalid // a rank whose own arguments were invalid
	collReduceScatter
	collAllGather
	collBroadcast
	collReduce
	collSend
	collRecv
	collAllToAll
	collGather
	collScatter
	collAllToAllV
	collAllGatherV
	collReduceScatterV
	collGatherV
	collScatterV
	collSplit // Comm.Split's exchange of colors and keys: an AllGather
	collScan
	collExscan
	collBroadcastInto // Broadcast out of place; fingerprinted as Broadcast
	collSendRecv      // a send and a receive posted together (SendRecv)
	collAllReduceWire // AllReduce with a compressed exchange
	numCollKinds
)

func (k collKind) String() string {
	if k < numCollKinds && callSpecs[k].name != "" {
		return callSpecs[k].name
	}
	return "nothing"
}

// rootOnly says which buffer of a rooted collective only the root uses.
type rootOnly uint8

const (
	bothBuffers rootOnly = iota
	rootSend             // send is used on the root only (Scatter)
	rootRecv             // recv is used on the root only (Reduce, Gather)
	oneBuffer            // a tensor form takes one tensor, in place (Broadcast, AllReduce)
)

// callSpec is what the pipeline knows of a kind.
type callSpec struct {
	name    string    // the entry point, in errors and logs
	phases  [5]string // rendezvous: fingerprint check, counts check, counts exchange, shared data, completion
	tname   string    // the tensor form's entry point
	tphases [5]string // its rendezvous
	shared  shareddev.Kind
	rooted  bool
	only    rootOnly
	reduces bool            // takes an op
	p2p     bool            // a point-to-point call: posted, numbered apart
	layout  memory.Layout   // the in-place layout allowed
	shape   callcheck.Rule  // what shape checks of a call's lengths, counts and offsets
	move    native.MoveKind // a move between ranks: strategy Native's Move
}

func phases(name string) [5]string {
	return [5]string{name + " fingerprint check", name + " counts check", name + " counts exchange", name + " shared data", name + " completion"}
}

// withTensor fills sp's tensor form (the entry point's name + "Tensor"),
// run in shared device memory as shared where the ranks share it.
func withTensor(sp callSpec, shared shareddev.Kind) callSpec {
	sp.tname = sp.name + "Tensor"
	sp.tphases = phases(sp.tname)
	sp.shared = shared
	return sp
}

var callSpecs = [numCollKinds]callSpec{
	collAllReduce:      withTensor(callSpec{name: "AllReduce", phases: phases("AllReduce"), only: oneBuffer, reduces: true, layout: memory.SameMem, shape: callcheck.Rule{Size: callcheck.Equal}}, shareddev.AllReduce),
	collBarrier:        {name: "Barrier", phases: [5]string{"Barrier"}},
	collInvalid:        {name: "a call with invalid arguments"},
	collSend:           {name: "Send", p2p: true},
	collRecv:           {name: "Recv", p2p: true},
	collSendRecv:       {name: "SendRecv", p2p: true, layout: memory.SameMem}, // one buffer: staged
	collAllReduceWire:  {name: "AllReduceWire", phases: phases("AllReduceWire"), reduces: true, layout: memory.SameMem},
	collReduceScatter:  withTensor(callSpec{name: "ReduceScatter", phases: phases("ReduceScatter"), reduces: true, layout: memory.RecvInSend, shape: callcheck.Rule{Size: callcheck.Times, At: callcheck.AtRank}}, shareddev.ReduceScatter),
	collAllGather:      withTensor(callSpec{name: "AllGather", phases: phases("AllGather"), layout: memory.SendInRecv, shape: callcheck.Rule{Size: callcheck.Times, Checked: callcheck.Recv, At: callcheck.AtRank}}, shareddev.AllGather),
	collBroadcast:      withTensor(callSpec{name: "Broadcast", phases: phases("Broadcast"), rooted: true, only: oneBuffer}, shareddev.Broadcast),
	collReduce:         withTensor(callSpec{name: "Reduce", phases: phases("Reduce"), rooted: true, only: rootRecv, reduces: true, layout: memory.SameMem, shape: callcheck.Rule{Size: callcheck.Equal, Checked: callcheck.Recv}}, shareddev.Reduce),
	collAllToAll:       withTensor(callSpec{name: "AllToAll", phases: phases("AllToAll"), layout: memory.SameMem, shape: callcheck.Rule{Size: callcheck.Multiples}, move: native.AllToAll}, shareddev.AllToAll),
	collGather:         withTensor(callSpec{name: "Gather", phases: phases("Gather"), rooted: true, only: rootRecv, layout: memory.SendInRecv, shape: callcheck.Rule{Size: callcheck.Times, Checked: callcheck.Recv, At: callcheck.AtRoot}, move: native.Gather}, shareddev.Gather),
	collScatter:        withTensor(callSpec{name: "Scatter", phases: phases("Scatter"), rooted: true, only: rootSend, layout: memory.RecvInSend, shape: callcheck.Rule{Size: callcheck.Times, At: callcheck.AtRoot}, move: native.Scatter}, shareddev.Scatter),
	collAllToAllV:      withTensor(callSpec{name: "AllToAllV", phases: phases("AllToAllV"), layout: memory.SameMem, shape: callcheck.Rule{Ranges: callcheck.BothRanges}, move: native.AllToAllV}, shareddev.AllToAllV),
	collAllGatherV:     withTensor(callSpec{name: "AllGatherV", phases: phases("AllGatherV"), layout: memory.SendInRecv, shape: callcheck.Rule{Ranges: callcheck.RecvRanges, At: callcheck.AtDispl}, move: native.AllGatherV}, shareddev.AllToAllV),
	collReduceScatterV: withTensor(callSpec{name: "ReduceScatterV", phases: phases("ReduceScatterV"), reduces: true, layout: memory.RecvInSend, shape: callcheck.Rule{Ranges: callcheck.SendOwnRecv, At: callcheck.AtDispl}, move: native.ReduceScatterV}, shareddev.ReduceScatterV),
	collGatherV:        {name: "GatherV", phases: phases("GatherV"), rooted: true, only: rootRecv, layout: memory.SendInRecv, shape: callcheck.Rule{Ranges: callcheck.RecvRanges, At: callcheck.AtDispl}, move: native.GatherV},
	collScatterV:       {name: "ScatterV", phases: phases("ScatterV"), rooted: true, only: rootSend, layout: memory.RecvInSend, shape: callcheck.Rule{Ranges: callcheck.SendRanges, At: callcheck.AtDispl}, move: native.ScatterV},
	collSplit:          {name: "Split", phases: phases("Split"), layout: memory.SendInRecv, shape: callcheck.Rule{Size: callcheck.Times, Checked: callcheck.Recv, At: callcheck.AtRank}},
	collScan:           withTensor(callSpec{name: "Scan", phases: phases("Scan"), reduces: true, layout: memory.SameMem, shape: callcheck.Rule{Size: callcheck.Equal}}, shareddev.Scan),
	collExscan:         withTensor(callSpec{name: "Exscan", phases: phases("Exscan"), reduces: true, layout: memory.SameMem, shape: callcheck.Rule{Size: callcheck.Equal}}, shareddev.Exscan),
	collBroadcastInto:  {name: "BroadcastInto", phases: phases("Broadcast"), tname: "BroadcastIntoTensor", tphases: phases("BroadcastTensor"), rooted: true, only: rootSend, layout: memory.SameMem, shape: callcheck.Rule{Size: callcheck.Equal}},
}

// desc describes one call of a collective: on host slices (send, recv),
// or on device tensors (tensor: st, rt).
type desc struct {
	kind       collKind
	dt         backend.DType
	op         Op
	root       int
	send, recv []byte
	tensor     bool
	st, rt     *tcore
	strategy   Strategy // the call's own (AllReduceWith, AllReduceTensor); Auto: the group's
	entry      string   // the entry point, where a kind has several (AllReduceInto, AllReduceWith)
	// The point-to-point kinds: the rank send goes to and the one recv
	// comes from (-1: none); async: posted for the Work the comm's worker
	// runs (start), not waited for.
	to, from int
	async    bool
	wire     backend.WireFormat // AllReduceWire's exchange format
	scalar   float64            // a PreMulSum op's (premulsum.go)
	// The V kinds: AllToAllV's four; AllGatherV's, ReduceScatterV's,
	// GatherV's and ScatterV's counts and displs are counts and displs.
	scounts, sdispls []int
	counts, displs   []int
}

// used reports which of its buffers d uses on rank r: a rooted kind's
// root-only one on the root only, a point-to-point call's with a peer, a
// one-tensor form's send only.
func (d *desc) used(r int) (send, recv bool) {
	sp := &callSpecs[d.kind]
	if sp.p2p {
		return d.to >= 0, d.from >= 0
	}
	notRoot := sp.rooted && r != d.root
	return !(notRoot && sp.only == rootSend), !(notRoot && sp.only == rootRecv) && !(d.tensor && sp.only == oneBuffer)
}

// unused drops the buffers d does not use on rank r.
func (d *desc) unused(r int) {
	send, recv := d.used(r)
	if !send {
		d.send, d.st = nil, nil
	}
	if !recv {
		d.recv, d.rt = nil, nil
	}
}

// name is the entry point d's call came through.
func (d *desc) name() string {
	if d.entry != "" {
		return d.entry
	}
	if d.tensor {
		return callSpecs[d.kind].tname
	}
	return callSpecs[d.kind].name
}

// phase is rendezvous i of d's entry point (callSpec.phases).
func (d *desc) phase(i int) string {
	if d.tensor {
		return callSpecs[d.kind].tphases[i]
	}
	return callSpecs[d.kind].phases[i]
}

// lens returns the element counts of d's send and recv.
func (d *desc) lens() (ns, nr int) {
	if !d.tensor {
		es := d.dt.Size()
		return len(d.send) / es, len(d.recv) / es
	}
	if d.st != nil {
		ns = d.st.n
	}
	if d.rt != nil {
		nr = d.rt.n
	}
	return ns, nr
}

// areas returns the memory of d's send and recv, for checkAlias.
func (d *desc) areas() (s, r memory.Area) {
	if !d.tensor {
		return memory.HostArea(d.send), memory.HostArea(d.recv)
	}
	return memory.RegionArea(d.st.whole(true)), memory.RegionArea(d.rt.whole(true))
}

// hold counts d's memory as used by the call (u), and checks its tensors
// belong to c: the second stage of run, and what an Async form resolves
// when it is started.
func (c *Comm) hold(u *memUse, d *desc, check bool) error {
	if !d.tensor {
		return u.slices(d.send, d.recv)
	}
	sp := &callSpecs[d.kind]
	needS, needR := d.used(c.rank)
	var err error
	if needS {
		err = u.tensor(d.st.life())
	}
	if err == nil && needR {
		err = u.tensor(d.rt.life())
	}
	if check && err == nil && needS {
		err = d.st.check(c, sp.tname)
	}
	if check && err == nil && needR {
		err = d.rt.check(c, sp.tname)
	}
	return err
}

// run is the one path of a call described by d (the stages above).
func (c *Comm) run(ctx context.Context, d *desc) (err error) {
	if c == nil {
		return invalidArg("nil Comm")
	}
	sp := &callSpecs[d.kind]
	name := d.name()
	if sp.rooted {
		if err := argErr(callcheck.Root(d.root, c.g.n)); err != nil {
			return c.refuse(ctx, d, err)
		}
	}
	d.unused(c.rank)
	u := c.uses(ctx)
	defer u.Release()
	if err := c.hold(&u, d, true); err != nil {
		return c.refuse(ctx, d, err)
	}
	at, err := c.shape(d)
	if err == nil {
		s, r := d.areas()
		err = checkAlias(name, s, r, sp.layout, at)
	}
	if err == nil && sp.reduces {
		err = c.reduceOp(d)
	}
	if err != nil {
		return c.refuse(ctx, d, err)
	}
	// The comm is claimed before the execution stage writes anything it
	// owns (the V kinds' pooled counts, the call state): a synchronous
	// call waits here for the comm's queued operations, and a second
	// goroutine's call is refused here, before it touched them.
	owned, err := c.claim(ctx, name)
	if err != nil {
		return err
	}
	defer c.release(owned)
	if d.op == opPreMulSum {
		if err := c.preScale(ctx, d); err != nil {
			return c.invalidCall(ctx, name, err)
		}
	}
	switch {
	case sp.p2p:
		return c.execP2P(ctx, d)
	case d.kind == collAllReduceWire:
		return c.allReduceWire(ctx, d)
	case d.kind == collAllReduce:
		return c.allReduce(ctx, d)
	}
	return c.exec(ctx, d)
}

// refuse fails d, refused on this rank with err before anything moved,
// telling its peers: a collective's through the rendezvous, a
// point-to-point call's by breaking the group. It claims the comm for the
// refusal (run has not yet).
func (c *Comm) refuse(ctx context.Context, d *desc, err error) error {
	name := d.name()
	owned, e := c.claim(ctx, name)
	defer c.release(owned)
	switch {
	case callSpecs[d.kind].p2p:
		return c.refuseP2P(ctx, name, err, e)
	case e != nil:
		return c.wrapErr(name, 0, err)
	}
	return c.invalidCall(ctx, name, err)
}

// shape checks d's root or peers, lengths, counts and offsets against its
// kind (its callSpec's rule, internal/callcheck), then what the kind
// requires of its op, strategy or format; it returns the byte offset of
// the in-place block the kind's layout allows.
func (c *Comm) shape(d *desc) (at int, err error) {
	sp := &callSpecs[d.kind]
	N, r := c.g.n, c.rank
	switch d.kind {
	case collSend:
		return 0, argErr(callcheck.Peer(d.to, r, N, !d.async, d.name()))
	case collRecv:
		return 0, argErr(callcheck.Peer(d.from, r, N, !d.async, d.name()))
	case collSendRecv:
		return 0, argErr(callcheck.Peers(d.to, d.from, r, N))
	}
	ns, nr := d.lens()
	if d.tensor && sp.only == oneBuffer {
		nr = ns // one tensor, in place
	}
	rule := sp.shape
	rule.RootOnly = sp.rooted
	at, err = callcheck.Check(rule, &callcheck.Call{N: N, Rank: r, Root: d.root, NSend: ns, NRecv: nr, Tensor: d.tensor,
		SCounts: d.scounts, SDispls: d.sdispls, Counts: d.counts, Displs: d.displs})
	if err != nil {
		return 0, argErr(err)
	}
	switch d.kind {
	case collAllReduceWire:
		if d.wire != backend.F16 && d.wire != backend.BF16 {
			return 0, invalidArg("unknown wire format %d", int(d.wire))
		}
		if _, ok := c.dev.Stream().(backend.Compressor); !ok {
			return 0, fmt.Errorf("the %s backend has no compression kernels: %w", c.g.bk, ErrUnsupported)
		}
	case collAllReduce:
		if !d.strategy.valid() {
			return 0, invalidArg("unknown strategy %d", int(d.strategy))
		}
		if !d.tensor && d.strategy == Host && c.g.tr != nil {
			return 0, fmt.Errorf("strategy host reduces in one process; this group runs over a Transport (%s): %w", plural(c.g.nproc, "process", "processes"), ErrUnsupported)
		}
	case collScan, collExscan:
		if d.op == Mean {
			return 0, invalidArg("Mean is not defined for a prefix reduction (divide rank r's Sum by r+1)")
		}
	}
	return at * d.dt.Size(), nil
}

// argErr is an error of internal/callcheck as an argument error.
func argErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", err, ErrInvalidArgument)
}

// exec runs d, checked: the fingerprint, the kind's algorithm (or its
// exact host path), drain and release; a tensor call's algorithm is
// execTensor's.
func (c *Comm) exec(ctx context.Context, d *desc) (err error) {
	sp := &callSpecs[d.kind]
	N, r := c.g.n, c.rank
	ns, nr := d.lens()
	s := strategyFor(sp.name, c.g.cfg.Strategy)
	fp := fingerprint{kind: d.kind, op: d.op, dt: d.dt, root: int32(d.root), strategy: s, path: d.path()}
	if !sp.rooted {
		fp.root = 0
	}
	if !sp.reduces {
		fp.op = 0
	}
	mc := native.Call{Kind: sp.move, N: N, L: c.g.nl, Rank: r, Root: d.root, NSend: ns, NRecv: nr, Counts: d.counts, Displs: d.displs,
		SCounts: d.scounts, SDispls: d.sdispls}
	if mc.Kind != native.NoMove {
		n, count := mc.Block()
		s = c.nativeStrategy(d, n, s)
		fp.strategy = s
		if s == Native || mc.Kind.V() {
			// The ranges by global rank (one side's given, on the root if
			// rooted, the other one block of the rank's whole buffer): the
			// V exchange's, or the process's leader's (native.Leader.Move).
			sc, sd, rc, rd := c.vScratch(N)
			mc.Ranges(sc, sd, rc, rd)
			if s != Native {
				return c.vRun(ctx, d, fp, sc, sd, rc, rd, mc.Kind == native.ReduceScatterV)
			}
			c.g.pub.SCounts[r], c.g.pub.SDispls[r], c.g.pub.RCounts[r], c.g.pub.RDispls[r] = sc, sd, rc, rd
			fp.count = int64(count)
			return c.execNative(ctx, d, fp)
		}
	}
	switch d.kind {
	case collReduceScatter:
		s = c.nativeStrategy(d, c.g.nl*nr, s)
		if fp.strategy = s; s == Native {
			fp.count = int64(nr)
			return c.execNative(ctx, d, fp)
		}
		if c.noKernels(d.dt) {
			// No kernels for the type on some device: the blocks travel
			// as in ReduceScatterV and each rank reduces its own on the
			// CPU, exactly, in rank order.
			cnt, dsp := c.eqScratch(N, nr)
			fp.strategy = Direct
			return c.vRun(ctx, d, fp, cnt, dsp, nil, nil, true)
		}
		// On the host backend in one process, Auto is Direct: one CPU pass.
		if fp.count = int64(nr); (s == Direct || c.g.cfg.Strategy == Auto) && c.g.tr == nil && !d.tensor && c.g.bk == "host" {
			fp.strategy = Direct
			return c.peerCall(ctx, d, fp)
		}
	case collAllGather, collReduce, collGather, collSplit:
		fp.count = int64(ns)
		if d.kind == collAllGather || d.kind == collReduce {
			k := ns // Reduce: the elements
			if d.kind == collAllGather {
				k = c.g.nl * ns // the process's blocks
			}
			s = c.nativeStrategy(d, k, s)
			if fp.strategy = s; s == Native {
				return c.execNative(ctx, d, fp)
			} else if s == Direct && c.g.tr == nil && !d.tensor {
				return c.peerCall(ctx, d, fp)
			}
		}
		if d.kind == collReduce && c.noKernels(d.dt) {
			fp.strategy, fp.noF64 = Direct, true
		}
	case collBroadcast:
		fp.count = int64(ns)
		s = c.nativeStrategy(d, 0, s)
		if fp.strategy = s; s == Native {
			return c.execNative(ctx, d, fp)
		}
	case collBroadcastInto:
		// A Broadcast on every rank's recv (root's send copied into it
		// once the data moved): it matches peers calling Broadcast.
		fp.kind, fp.count, fp.strategy = collBroadcast, int64(nr), c.nativeStrategy(d, 0, strategyFor("Broadcast", c.g.cfg.Strategy))
		if s = fp.strategy; s == Native {
			return c.execNative(ctx, d, fp)
		}
	case collScan, collExscan:
		fp.count, fp.strategy, fp.noF64 = int64(ns), Direct, d.tensor && c.noKernels(d.dt)
		if !d.tensor {
			return c.scan(ctx, d, fp)
		}
	case collScatter:
		fp.count = int64(nr)
	case collAllToAll:
		fp.count = int64(ns / N)
	}
	if d.tensor {
		return c.execTensor(ctx, d, fp, s)
	}
	owned, err := c.begin(ctx, sp.name, fp, sp.phases[0])
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	c.adoptCall(d.send, d.recv)
	defer c.releaseAdopted()
	if fp.count == 0 || (d.kind == collBroadcast && N == 1) {
		return nil
	}
	if d.kind == collBroadcastInto && N == 1 {
		copy(d.recv, d.send)
		return nil
	}
	switch d.kind {
	case collReduceScatter:
		return c.execReduceScatter(ctx, d, s)
	case collAllGather, collSplit:
		return c.execAllGather(ctx, d)
	case collBroadcast, collBroadcastInto:
		return c.execBroadcast(ctx, d)
	case collReduce:
		return c.execReduce(ctx, d)
	case collGather:
		return c.execGather(ctx, d)
	case collScatter:
		return c.execScatter(ctx, d)
	case collAllToAll:
		return c.execAllToAll(ctx, d)
	}
	return fmt.Errorf("collective: no algorithm for %s", sp.name)
}

// vScratch returns the comm's four pooled count and offset slices of n
// entries for the V kinds (one goroutine per Comm uses them).
func (c *Comm) vScratch(n int) (sc, sd, rc, rd []int) { return c.vxState.Ints(n) }
