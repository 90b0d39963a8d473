package collective

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/procsplit"
	"github.com/gocoll/gocoll/internal/splitplan"
)

// NoColor passed to Split leaves the rank out of every sub-group (Split
// returns a nil Comm for it), as MPI_UNDEFINED does.
const NoColor = -1 // splitplan.NoColor

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
	// The first member here opens the sub-group for all, unless the group
	// broke (a member may have failed the exchange: it would not pick up
	// its Comm).
	e, ctxErr, ok := g.kids.Join(ctx, seq, color, len(members), func() (*Group, error) {
		if g.isBroken.Load() {
			return nil, c.brokenErr()
		}
		return g.openChild(ctx, members)
	})
	if !ok {
		return nil, c.splitErr(seq, errGroupClosed)
	}
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

// openChild opens the in-process sub-group of members.
func (g *Group) openChild(ctx context.Context, members []int) (*Group, error) {
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
	e, ctxErr, ok := g.kids.JoinProcess(ctx, seq, g.nl, func() (map[int]*Group, error) { return g.makeChildren(ctx, l) })
	if !ok {
		return nil, c.splitErr(seq, errGroupClosed)
	}
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

// makeChildren makes this process's part of a Split (internal/procsplit):
// the sub-groups with ranks here, by color.
func (g *Group) makeChildren(ctx context.Context, l *splitplan.Layout) (map[int]*Group, error) {
	s := procsplit.Split[*Group]{Tr: g.tr, Base: g.base, Local: g.nl, Timeout: g.cfg.CommunicationTimeout,
		Broke: g.brokenCh, Invalid: ErrInvalidConfig, Env: (*splitEnv)(g)}
	return s.Make(ctx, l)
}

// splitEnv is the group as its process's part of a Split sees it
// (procsplit.Env).
type splitEnv Group

func (e *splitEnv) Open(ctx context.Context, col int, local []int, t backend.Transport) (*Group, error) {
	return newGroup(ctx, (*Group)(e).childOptions(local, t), t != nil)
}

func (e *splitEnv) Close(k *Group) { k.Close() }

func (e *splitEnv) Broken() error {
	if !e.isBroken.Load() {
		return nil
	}
	return (*Group)(e).brokenCause()
}

func (e *splitEnv) Failed(err error) error { return (*Group)(e).transportFailed(err) }

func (e *splitEnv) TimedOut(phase string, err, ctxErr error) error {
	return &TimeoutError{Phase: phase, Ctx: ctxErr, Missing: (*Group)(e).ranksOf(err)}
}

func (e *splitEnv) Remote(p int, timeout bool, msg string) error {
	return &RemoteError{Process: p, Rank: -1, Timeout: timeout, Msg: msg}
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
