package ddp

import (
	"context"
	"fmt"
	"time"

	"github.com/gocoll/gocoll/collective"
)

// State is what a training checkpoint keeps of one rank's Sync, so that a
// job resumed from it continues as the uninterrupted job would have: the
// top-k error-feedback residual (the part of earlier gradients not sent
// yet) and the counters. Its fields are exported, for encoding/gob and
// the like.
type State[T Grad] struct {
	// Residual is the error-feedback residual, as Residual returns it (nil
	// without TopK, with NoErrorFeedback, or before the first compressed
	// step).
	Residual []T
	// Stats are the counters, as Stats returns them.
	Stats Stats
}

// State returns a copy of the Sync's state, after waiting for the
// SyncAsync steps started before (within ctx; a failed step's error is
// returned). It works on a closed Sync too, so a job may save it after
// its last step.
func (s *Sync[T]) State(ctx context.Context) (State[T], error) {
	if err := s.waitPending(ctx); err != nil {
		return State[T]{}, fmt.Errorf("ddp.Sync.State: %w", err)
	}
	return State[T]{Residual: s.Residual(), Stats: s.Stats()}, nil
}

// Restore sets the Sync's state to st, saved by State on the same rank
// (of a job with the same Options and gradients), after waiting for the
// SyncAsync steps started before: the next steps then continue bitwise as
// the steps after State continued. Every rank restores its own state
// before the same step: the next step checks, on every rank, that the
// residual fits its gradients (when it does not on some rank, every rank's
// step fails with collective.ErrInvalidArgument naming that rank, until
// a fitting state is restored). Restore(ctx, State[T]{}) clears the
// residual and the counters.
//
// A residual is refused (collective.ErrInvalidArgument) by a Sync that
// keeps none (TopK 0, or NoErrorFeedback). The selector's current
// strategy is not part of the state: a restored adaptive Sync starts from
// the group's strategy and probes again a SwitchCooldown after the
// restored step.
func (s *Sync[T]) Restore(ctx context.Context, st State[T]) error {
	if err := s.settle(ctx); err != nil {
		return fmt.Errorf("ddp.Sync.Restore: %w", err)
	}
	if len(st.Residual) > 0 && (s.opts.TopK == 0 || s.opts.NoErrorFeedback) {
		return fmt.Errorf("ddp.Sync.Restore: a residual of %d elements, but this Sync keeps none (TopK 0 or NoErrorFeedback): %w",
			len(st.Residual), collective.ErrInvalidArgument)
	}
	c := st.Stats
	if c.Steps < 0 || c.Operations < 0 || c.BytesMoved < 0 || c.ProbeSteps < 0 || c.Switches < 0 || c.AverageBandwidth < 0 {
		return fmt.Errorf("ddp.Sync.Restore: negative counters in %+v: %w", c, collective.ErrInvalidArgument)
	}
	s.residual = append([]T(nil), st.Residual...)
	s.restored = len(st.Residual) > 0 // none: the first compressed step starts one
	s.shape.ok = false                // the next step checks the residual on every rank
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step, s.probed, s.switches, s.lastSw = c.Steps, c.ProbeSteps, c.Switches, c.LastSwitchStep
	s.lastEval = c.Steps
	s.mon.ops, s.mon.totalBytes, s.mon.totalTime = c.Operations, c.BytesMoved, 0
	if c.AverageBandwidth > 0 {
		s.mon.totalTime = time.Duration(float64(c.BytesMoved) / c.AverageBandwidth * 1e9)
	}
	clear(s.byStrat)
	for k, v := range c.ByStrategy {
		s.byStrat[k] = v
	}
	if c.Steps > 0 {
		s.ran = c.CurrentStrategy
	}
	return nil
}

// waitPending waits for the SyncAsync steps started so far and returns the
// first error among them (keeping them, as settle does, for Wait).
func (s *Sync[T]) waitPending(ctx context.Context) error {
	s.pendMu.Lock()
	ws := s.pending
	s.pendMu.Unlock()
	for _, w := range ws {
		if err := w.Wait(ctx); err != nil {
			return err
		}
	}
	s.pendMu.Lock()
	s.pending = pruneDone(s.pending)
	s.pendMu.Unlock()
	return nil
}
