// Package procsplit is one process's part of a Split of a group that spans
// processes (collective's Comm.Split over a transport): the transport
// splits, one per sub-group spanning processes; the sub-groups with ranks in
// this process opened; the agreement among the processes after each of these
// two steps; and, when a step failed in any process, the undoing of what
// this process made.
//
// A process makes its transport splits in ascending color order, one for
// each sub-group that spans processes, including those it has no members
// of, so every process makes the same collective calls on the parent's
// transport; it then opens its sub-groups in ascending color order, so
// processes that share several sub-groups open them in the same order.
// After a failure other than a timeout a process carries on with the step
// (the other splits, the other sub-groups), so the others' collective calls
// are matched and do not wait for it in vain; after a timeout (a process is
// missing) it stops. Each step ends with an Allgather of every process's
// outcome (one byte, a splitplan.Outcome), and on any failure, here or
// elsewhere, every process closes what it made and returns an error.
package procsplit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/splitplan"
)

// Env is the parent group as its process's part of a Split sees it: the
// sub-groups it opens (of type G) and the errors it reports.
type Env[G any] interface {
	// Open opens the sub-group of color col whose ranks in this process
	// are the parent ranks local (in the sub-group's order), over t (nil:
	// its members all live in this process). The sub-group owns t, failing
	// or not.
	Open(ctx context.Context, col int, local []int, t backend.Transport) (G, error)
	// Close closes a sub-group Open made.
	Close(G)
	// Broken returns the error that broke the parent, nil while it has not
	// broken.
	Broken() error
	// Failed handles err, a collective call on the parent's transport that
	// timed out, or an agreement that failed: the processes' calls on it may
	// be out of step from now on, so the parent breaks. It returns the
	// error to report.
	Failed(err error) error
	// TimedOut is the error of a collective call on the parent's transport
	// that timed out (before Failed): phase names the call, err is the
	// transport's error (which may name the processes that did not
	// arrive), ctxErr the Split's context's error.
	TimedOut(phase string, err, ctxErr error) error
	// Remote is the error of a step that failed in another process (p, the
	// first of them; timeout: it timed out there): msg says what failed.
	Remote(p int, timeout bool, msg string) error
}

// Split is one process's part of one Split.
type Split[G any] struct {
	Tr      backend.Transport // the parent's transport; a backend.Splitter when any sub-group spans processes
	Base    int               // the parent ranks of this process are Base to Base+Local-1
	Local   int
	Timeout time.Duration   // the bound of each collective call on Tr (CommunicationTimeout)
	Broke   <-chan struct{} // closed when the parent breaks: the waits end
	Invalid error           // an error class that counts as an invalid argument, besides backend.ErrInvalidArgument
	Env     Env[G]
}

// Make makes this process's part of the Split planned in l, and returns the
// sub-groups with ranks here, by color. ctx bounds it.
func (s *Split[G]) Make(ctx context.Context, l *splitplan.Layout) (map[int]G, error) {
	// The waits end with ctx, or when the parent breaks.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.Broke:
			cancel()
		case <-wctx.Done():
		}
	}()
	trs, err := s.splitAll(wctx, ctx, l) // made by the transport, not yet handed to a sub-group
	kids := map[int]G{}
	undo := func() {
		for _, t := range trs {
			t.Close()
		}
		for _, k := range kids {
			s.Env.Close(k)
		}
	}
	if len(l.Spans) > 0 && s.Env.Broken() == nil {
		err = s.agree(wctx, ctx, "splitting the transport", err)
	}
	if err != nil {
		undo()
		return nil, err
	}
	for _, col := range l.Colors {
		local := l.Local(col, s.Base, s.Local)
		if len(local) == 0 {
			continue
		}
		t := trs[col]
		delete(trs, col) // the sub-group owns it now, failing or not
		kid, e := s.Env.Open(wctx, col, local, t)
		if e != nil {
			if err == nil {
				err = fmt.Errorf("opening the sub-group of color %d: %w", col, e)
			}
			if s.outcome(e) == splitplan.Timeout {
				break
			}
			continue
		}
		kids[col] = kid
	}
	if s.Env.Broken() == nil {
		err = s.agree(wctx, ctx, "opening the sub-groups", err)
	} else if err == nil {
		err = s.Env.Broken()
	}
	if err != nil {
		undo()
		return nil, err
	}
	return kids, nil
}

// splitAll makes the transport splits, one for each color that spans
// processes, ascending: this process's transports by color, and the first
// failure.
func (s *Split[G]) splitAll(wctx, ctx context.Context, l *splitplan.Layout) (map[int]backend.Transport, error) {
	me := s.Tr.Rank()
	trs := map[int]backend.Transport{}
	var err error
	for i, col := range l.Spans {
		procs := l.Procs[col]
		idx := slices.Index(procs, me)
		sub := -1 // not a member: MPI_UNDEFINED
		if idx >= 0 {
			sub = i // any color the members alone share will do: a small one
		}
		t, e := s.split(wctx, ctx, col, sub, max(idx, 0))
		switch {
		case e != nil:
		case sub < 0 && t != nil:
			t.Close()
			e = fmt.Errorf("color %d: %s gave this process (%d) a sub-communicator it did not ask for", col, s.Tr.Name(), me)
		case sub >= 0 && (t == nil || t.Size() != len(procs) || t.Rank() != idx):
			if t != nil {
				t.Close()
			}
			e = fmt.Errorf("color %d: %s's sub-communicator does not rank process %d as %d of %d (%v)", col, s.Tr.Name(), me, idx, len(procs), procs)
		case sub >= 0:
			trs[col] = t
		}
		if err == nil {
			err = e
		}
		if s.outcome(e) == splitplan.Timeout || s.Env.Broken() != nil {
			break
		}
	}
	return trs, err
}

// split is one backend.Splitter call, under Timeout.
func (s *Split[G]) split(wctx, ctx context.Context, col, sub, key int) (backend.Transport, error) {
	sctx, cancel := context.WithTimeout(wctx, s.Timeout)
	defer cancel()
	t, err := s.Tr.(backend.Splitter).Split(sctx, sub, key)
	if err == nil {
		return t, nil
	}
	if timedOut(err) {
		return nil, s.Env.Failed(s.Env.TimedOut(fmt.Sprintf("splitting %s for color %d (%v)", s.Tr.Name(), col, err), err, ctx.Err()))
	}
	// Not a timeout: the transport made its collective call (a failure after
	// it, or before any: an argument refused, the transport closed).
	return nil, fmt.Errorf("splitting %s for color %d: %w", s.Tr.Name(), col, err)
}

// agree gathers every process's outcome of a step (an Allgather of one byte
// on the parent's transport, under Timeout) and returns this process's
// error, or, when it succeeded, the first failure elsewhere.
func (s *Split[G]) agree(wctx, ctx context.Context, step string, mine error) error {
	all := make([]byte, s.Tr.Size())
	actx, cancel := context.WithTimeout(wctx, s.Timeout)
	err := s.Tr.Allgather(actx, []byte{byte(s.outcome(mine))}, all)
	cancel()
	if err != nil {
		if timedOut(err) {
			err = s.Env.TimedOut("agreeing on the outcome of Split ("+step+") across processes ("+err.Error()+")", err, ctx.Err())
		} else {
			err = fmt.Errorf("agreeing on the outcome of Split (%s) across processes: %w", step, err)
		}
		err = s.Env.Failed(err)
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
	re := s.Env.Remote(bad[0], o == splitplan.Timeout,
		fmt.Sprintf("Split, %s: %s (failed in process(es) %v; what this process made is closed again)", step, o, bad))
	switch o {
	case splitplan.Unsupported:
		return classed{re, backend.ErrUnsupported}
	case splitplan.Invalid:
		return classed{re, backend.ErrInvalidArgument}
	case splitplan.Closed:
		return classed{re, backend.ErrClosed}
	}
	return re
}

// outcome classes err as the outcome of a step, as the processes agree on
// it.
func (s *Split[G]) outcome(err error) splitplan.Outcome {
	switch {
	case err == nil:
		return splitplan.OK
	case timedOut(err):
		return splitplan.Timeout
	case errors.Is(err, backend.ErrUnsupported):
		return splitplan.Unsupported
	case errors.Is(err, backend.ErrInvalidArgument) || s.Invalid != nil && errors.Is(err, s.Invalid):
		return splitplan.Invalid
	case errors.Is(err, backend.ErrClosed):
		return splitplan.Closed
	}
	return splitplan.Failed
}

// timedOut says whether err is a timeout: the transport's, or a context's.
func timedOut(err error) bool {
	return errors.Is(err, backend.ErrTimeout) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// classed is an error that also matches a sentinel its text already names.
type classed struct {
	error
	class error
}

func (e classed) Is(t error) bool { return t == e.class }
func (e classed) Unwrap() error   { return e.error }
