package collective

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/oncejoin"
	"github.com/gocoll/gocoll/internal/splitplan"
)

// NoColor passed to Split leaves the rank out of every sub-group (Split
// returns a nil Comm for it), as MPI_UNDEFINED does.
const NoColor = -1 // splitplan.NoColor

// splitEntry is one sub-group being created by a Split call, joined by
// its members.
type splitEntry = oncejoin.Entry[*Group]

type splitKey struct {
	seq   uint64
	color int
}

// procSplit is the work of one Split call in one process of a group that
// spans processes: the transport splits and every sub-group with ranks in
// this process (by color), done once, by the first local rank to get
// there.
type procSplit = oncejoin.Entry[map[int]*Group]

// Split partitions the ranks of c's group by color into sub-groups
// (ncclCommSplit, MPI_Comm_split): every rank of the group calls it, and
// each gets its Comm in the sub-group of the ranks that passed the same
// color, ranked by key, then by rank in the parent. A rank passing NoColor
// gets a nil Comm. The sub-groups are Groups of their own (same backend,
// devices and Options as the parent, their own streams and logical
// devices), so a rank's parent and child Comms are separate streams and
// sub-groups run concurrently without interfering. They close with the
// parent, or earlier with their own Close. A Split racing the parent's
// Close either makes its sub-group before Close takes the children (Close
// then waits for it and closes it with the others) or fails with ErrClosed:
// no sub-group outlives its parent's Close.
//
// Every error is a *Error of this rank naming Split and the call's number
// (that of its exchange of colors and keys): it matches ErrInvalidArgument
// for a bad color, the context's error (and ErrTimeout for a deadline) when
// ctx ended, ErrClosed or ErrGroupBroken, and the cause when the sub-group
// could not be opened.
//
// In a group that spans processes (Options.Transport), a sub-group whose
// members all live in one process is a Group of that process alone, with no
// transport. A sub-group whose members live in several processes is
// supported when every process that has members of it has the same number
// k of them, and each process's members are contiguous in the sub-group's
// order: its processes are then ranked by their first member, and each of
// them holds a Group with k local ranks (Group.LocalSize) over a transport
// of its own, made by the parent's transport's backend.Splitter (the mpi
// package's World: MPI_Comm_split), which the sub-group closes with itself.
// Any other layout, or a transport that cannot split, makes Split fail on
// every rank with an error that matches ErrUnsupported and names the color,
// before anything is created: the parent stays usable. A process makes its
// transport splits in ascending color order, one for each sub-group that
// spans processes, including those it has no members of, so every process
// makes the same collective calls on the parent's transport. The processes
// then agree on the outcome: when anything failed in any process, every
// rank gets an error and the sub-groups made meanwhile are closed again.
// Each step is bounded by Config.CommunicationTimeout. A collective call on
// the parent's transport that times out (a process did not arrive) leaves
// the processes' calls on it out of step, since MPI cannot cancel one: the
// parent then breaks, as after any timeout across processes, and every rank
// gets an error matching ErrTimeout (or ErrGroupBroken, with the cause, in
// the processes told of it).
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	if c == nil {
		return nil, invalidArg("nil Comm")
	}
	g := c.g
	if color < NoColor {
		return nil, c.refuse(ctx, &desc{kind: collSplit}, invalidArg("color %d (want >= 0, or NoColor)", color))
	}
	// Every rank's color, key, and whether its process's transport splits.
	splits := int64(0)
	if _, ok := g.tr.(backend.Splitter); ok {
		splits = 1
	}
	all := make([]int64, 3*g.n)
	// An AllGather of its own kind: a peer calling something else (an
	// AllGather of the same size included) is a mismatch, and errors name
	// Split.
	mine := []int64{int64(color), int64(key), splits}
	if err := c.run(ctx, &desc{kind: collSplit, dt: backend.I64, send: asBytes(mine), recv: asBytes(all)}); err != nil {
		return nil, c.splitErr(0, err)
	}
	seq := c.seq // the exchange's number, the same on every rank
	l, err := g.splitLayout(all)
	if err != nil {
		return nil, c.splitErr(seq, err)
	}
	if g.tr != nil {
		return c.splitProcesses(ctx, seq, color, l)
	}
	if color == NoColor {
		return nil, nil
	}
	members := l.Members[color]
	me := slices.Index(members, c.rank)
	k := splitKey{seq, color}
	g.splitMu.Lock()
	if g.closingKids {
		g.splitMu.Unlock()
		return nil, c.splitErr(seq, errGroupClosed)
	}
	e, first := oncejoin.Join(&g.splits, k, len(members))
	if first {
		g.makingKids.Add(1)
	}
	g.splitMu.Unlock()
	// The first member here opens the sub-group for all, unless the group
	// broke (a member may have failed the exchange: it would not pick up
	// its Comm).
	if first && g.isBroken.Load() {
		g.makingKids.Done()
		e.Do(nil, c.brokenErr())
	} else if first {
		e.Do(g.openChild(ctx, members))
	}
	ctxErr := e.Wait(ctx)
	g.splitMu.Lock()
	oncejoin.Leave(g.splits, k, e)
	g.splitMu.Unlock()
	switch {
	case ctxErr != nil:
		return nil, c.splitErr(seq, &TimeoutError{Seq: seq, Phase: fmt.Sprintf("Split, waiting for the sub-group of color %d to open", color), Ctx: ctxErr})
	case errors.Is(e.Err, ErrGroupBroken):
		return nil, c.splitErr(seq, e.Err)
	case isCtxErr(e.Err):
		return nil, c.splitErr(seq, &TimeoutError{Seq: seq, Phase: fmt.Sprintf("Split, opening the sub-group of color %d", color), Ctx: e.Err})
	case e.Err != nil:
		return nil, c.splitErr(seq, fmt.Errorf("opening the sub-group of color %d: %w", color, e.Err))
	}
	return e.Val.Comm(me), nil
}

// splitErr makes err an *Error of this rank's Split call number seq. An
// error of the Split's exchange keeps its cause and call number.
func (c *Comm) splitErr(seq uint64, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Rank == c.rank {
		err = e.Err
		if seq == 0 {
			seq = e.Seq
		}
	}
	return &Error{Rank: c.rank, Op: "Split", Seq: seq, Err: err}
}

// splitOpenHook, when set (tests), runs before Split opens an in-process
// sub-group; an error fails the opening.
var splitOpenHook func(ctx context.Context) error

// openChild opens the in-process sub-group of members (counted in
// makingKids) and adds it to the group's children.
func (g *Group) openChild(ctx context.Context, members []int) (*Group, error) {
	defer g.makingKids.Done()
	if h := splitOpenHook; h != nil {
		if err := h(ctx); err != nil {
			return nil, err
		}
	}
	sub, err := NewGroup(ctx, g.childOptions(members, nil))
	if err != nil {
		return nil, err
	}
	sub.parentRanks = members
	g.splitMu.Lock()
	g.children = append(g.children, sub)
	g.splitMu.Unlock()
	return sub, nil
}

// childOptions are the Options of a sub-group whose ranks in this process
// are the parent ranks local (in the sub-group's order), over tr.
func (g *Group) childOptions(local []int, tr backend.Transport) Options {
	o := g.opts
	o.Ranks = len(local)
	o.Transport = tr
	o.Devices = make([]int, len(local))
	for i, r := range local {
		o.Devices[i] = g.placement[r-g.base]
	}
	o.Config = g.cfg
	o.parent = g
	return o
}

// splitLayout is splitplan.Plan for the group: the sub-groups worked out
// alike on every rank from the gathered colors and keys, and the check that
// each sub-group spanning processes has a supported layout.
func (g *Group) splitLayout(all []int64) (*splitplan.Layout, error) {
	if g.tr == nil {
		return splitplan.Plan(all, g.n, g.n, "")
	}
	return splitplan.Plan(all, g.n, g.nl, g.tr.Name())
}

// splitProcesses is Split in a group that spans processes: the first local
// rank to get here makes this process's part for all of them.
func (c *Comm) splitProcesses(ctx context.Context, seq uint64, color int, l *splitplan.Layout) (*Comm, error) {
	g := c.g
	g.splitMu.Lock()
	if g.closingKids {
		g.splitMu.Unlock()
		return nil, c.splitErr(seq, errGroupClosed)
	}
	e, first := oncejoin.Join(&g.procSplits, seq, g.nl)
	if first {
		g.makingKids.Add(1)
	}
	g.splitMu.Unlock()
	if first {
		e.Do(g.makeChildren(ctx, l))
	}
	ctxErr := e.Wait(ctx)
	g.splitMu.Lock()
	oncejoin.Leave(g.procSplits, seq, e)
	g.splitMu.Unlock()
	switch {
	case ctxErr != nil:
		return nil, &Error{Rank: c.rank, Op: "Split", Seq: seq, Err: &TimeoutError{Seq: seq, Phase: "Split, waiting for this process's sub-groups", Ctx: ctxErr}}
	case e.Err != nil:
		return nil, &Error{Rank: c.rank, Op: "Split", Seq: seq, Err: e.Err}
	case color == NoColor:
		return nil, nil
	}
	local := l.Local(color, g.base, g.nl)
	return e.Val[color].Comm(slices.Index(local, c.rank)), nil
}

// splitOutcome classes err as the outcome of one process's part of a Split,
// as the processes agree on it.
func splitOutcome(err error) splitplan.Outcome {
	switch {
	case err == nil:
		return splitplan.OK
	case errors.Is(err, ErrTimeout) || isCtxErr(err):
		return splitplan.Timeout
	case errors.Is(err, ErrUnsupported):
		return splitplan.Unsupported
	case errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrInvalidConfig):
		return splitplan.Invalid
	case errors.Is(err, ErrClosed):
		return splitplan.Closed
	}
	return splitplan.Failed
}

// makeChildren makes this process's part of a Split, in two steps that end
// with an agreement among the processes: the transport splits (one per
// spanning color, ascending, on every process), then the sub-groups with
// ranks here (ascending colors, so processes that share several sub-groups
// open them in the same order). After a failure other than a timeout a
// process carries on with the step (the other splits, the other
// sub-groups), so the others' collective calls are matched and do not wait
// for it in vain; after a timeout (a process is missing) it stops. On
// any failure, in this process or another, it closes what it made and every
// process returns an error.
func (g *Group) makeChildren(ctx context.Context, l *splitplan.Layout) (map[int]*Group, error) {
	defer g.makingKids.Done() // counted by splitProcesses
	// The waits end with ctx, or when the parent breaks.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-g.brokenCh:
			cancel()
		case <-wctx.Done():
		}
	}()
	me := g.tr.Rank()
	trs := map[int]backend.Transport{} // made by the transport, not yet handed to a sub-group
	kids := map[int]*Group{}
	undo := func() {
		for _, t := range trs {
			t.Close()
		}
		for _, k := range kids {
			k.Close()
		}
	}
	var err error
	for i, col := range l.Spans {
		procs := l.Procs[col]
		idx := slices.Index(procs, me)
		sub := -1 // not a member: MPI_UNDEFINED
		if idx >= 0 {
			sub = i // any color the members alone share will do: a small one
		}
		t, e := g.splitTransport(wctx, ctx, col, sub, max(idx, 0))
		switch {
		case e != nil:
		case sub < 0 && t != nil:
			t.Close()
			e = fmt.Errorf("color %d: %s gave this process (%d) a sub-communicator it did not ask for", col, g.tr.Name(), me)
		case sub >= 0 && (t == nil || t.Size() != len(procs) || t.Rank() != idx):
			if t != nil {
				t.Close()
			}
			e = fmt.Errorf("color %d: %s's sub-communicator does not rank process %d as %d of %d (%v)", col, g.tr.Name(), me, idx, len(procs), procs)
		case sub >= 0:
			trs[col] = t
		}
		if err == nil {
			err = e
		}
		if splitOutcome(e) == splitplan.Timeout || g.isBroken.Load() {
			break
		}
	}
	if len(l.Spans) > 0 && !g.isBroken.Load() {
		err = g.agreeSplit(wctx, ctx, "splitting the transport", err)
	}
	if err != nil {
		undo()
		return nil, err
	}
	for _, col := range l.Colors {
		local := l.Local(col, g.base, g.nl)
		if len(local) == 0 {
			continue
		}
		t := trs[col]
		delete(trs, col) // the sub-group owns it now, failing or not
		kid, e := newGroup(wctx, g.childOptions(local, t), t != nil)
		if e != nil {
			if err == nil {
				err = fmt.Errorf("opening the sub-group of color %d: %w", col, e)
			}
			if splitOutcome(e) == splitplan.Timeout {
				break
			}
			continue
		}
		kids[col] = kid
	}
	if !g.isBroken.Load() {
		err = g.agreeSplit(wctx, ctx, "opening the sub-groups", err)
	} else if err == nil {
		err = g.brokenCause()
	}
	if err != nil {
		undo()
		return nil, err
	}
	g.splitMu.Lock()
	for _, col := range l.Colors {
		if k := kids[col]; k != nil {
			g.children = append(g.children, k)
		}
	}
	g.splitMu.Unlock()
	return kids, nil
}

// splitTransport is one backend.Splitter call, under CommunicationTimeout.
func (g *Group) splitTransport(wctx, ctx context.Context, col, sub, key int) (backend.Transport, error) {
	sctx, cancel := context.WithTimeout(wctx, g.cfg.CommunicationTimeout)
	defer cancel()
	t, err := g.tr.(backend.Splitter).Split(sctx, sub, key)
	if err == nil {
		return t, nil
	}
	if isCtxErr(err) || errors.Is(err, backend.ErrTimeout) {
		te := &TimeoutError{Phase: fmt.Sprintf("splitting %s for color %d (%v)", g.tr.Name(), col, err), Ctx: ctx.Err()}
		te.Missing = g.ranksOf(err)
		return nil, g.transportFailed(te)
	}
	// Not a timeout: the transport made its collective call (a failure after
	// it, or before any: an argument refused, the transport closed).
	return nil, fmt.Errorf("splitting %s for color %d: %w", g.tr.Name(), col, err)
}

// transportFailed handles a collective call on the parent's transport
// during Split that timed out, or an agreement that failed. MPI cannot
// cancel a collective, so the processes' calls on that transport may be out
// of step from now on (and the processes may disagree on the outcome): the
// parent breaks, and tells the other processes, whose Split then fails at
// once too, as a collective that times out across processes breaks its
// group. When the parent had broken already (Abort, a failure in another
// process), which ended the call, that is the error.
func (g *Group) transportFailed(err error) error {
	if g.isBroken.Load() {
		return g.brokenCause()
	}
	g.breakGroup(&BrokenError{Rank: -1, Op: "Split", Cause: err, hideCtx: true})
	return err
}

// brokenCause returns the error that broke the group.
func (g *Group) brokenCause() error {
	g.brokenMu.Lock()
	defer g.brokenMu.Unlock()
	if g.brokenBy == nil {
		return ErrGroupBroken
	}
	return g.brokenBy
}

// ranksOf returns the ranks of the processes a transport error says did not
// arrive.
func (g *Group) ranksOf(err error) []int {
	var mp backend.MissingProcesses
	if !errors.As(err, &mp) {
		return nil
	}
	var ranks []int
	for _, p := range mp.MissingProcesses() {
		for r := p * g.nl; r < (p+1)*g.nl; r++ {
			ranks = append(ranks, r)
		}
	}
	return ranks
}

// agreeSplit gathers every process's outcome of a step of Split (an
// Allgather of one byte on the parent's transport, under
// CommunicationTimeout) and returns this process's error, or, when it
// succeeded, the first failure elsewhere.
func (g *Group) agreeSplit(wctx, ctx context.Context, step string, mine error) error {
	all := make([]byte, g.nproc)
	actx, cancel := context.WithTimeout(wctx, g.cfg.CommunicationTimeout)
	err := g.tr.Allgather(actx, []byte{byte(splitOutcome(mine))}, all)
	cancel()
	if err != nil {
		if isCtxErr(err) || errors.Is(err, backend.ErrTimeout) {
			err = g.transportFailed(&TimeoutError{Phase: "agreeing on the outcome of Split (" + step + ") across processes (" + err.Error() + ")",
				Ctx: ctx.Err(), Missing: g.ranksOf(err)})
		} else {
			err = g.transportFailed(fmt.Errorf("agreeing on the outcome of Split (%s) across processes: %w", step, err))
		}
		if mine != nil {
			return errors.Join(mine, err)
		}
		return err
	}
	if mine != nil {
		return mine
	}
	bad := splitplan.Failures(all)
	if len(bad) == 0 {
		return nil
	}
	o := splitplan.Outcome(all[bad[0]])
	re := &RemoteError{Process: bad[0], Rank: -1, Timeout: o == splitplan.Timeout,
		Msg: fmt.Sprintf("Split, %s: %s (failed in process(es) %v; what this process made is closed again)", step, o, bad)}
	switch o {
	case splitplan.Unsupported:
		return classed{re, ErrUnsupported}
	case splitplan.Invalid:
		return classed{re, ErrInvalidArgument}
	case splitplan.Closed:
		return classed{re, ErrClosed}
	}
	return re
}

// classed is an error that also matches a sentinel its text already names.
type classed struct {
	error
	class error
}

func (e classed) Is(t error) bool { return t == e.class }
func (e classed) Unwrap() error   { return e.error }

// stopChildren makes every later Split of the group fail with ErrClosed
// (Close, first).
func (g *Group) stopChildren() {
	g.splitMu.Lock()
	g.closingKids = true
	g.splitMu.Unlock()
}

// closeChildren closes the sub-groups Split made, once the ones being made
// (before stopChildren) are done.
func (g *Group) closeChildren() []error {
	g.makingKids.Wait()
	g.splitMu.Lock()
	kids := g.children
	g.children = nil
	// Entries of Splits some members never reached (they failed the
	// exchange, which broke the group).
	g.splits, g.procSplits = nil, nil
	g.splitMu.Unlock()
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, k := range kids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := k.Close(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}
