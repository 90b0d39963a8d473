package ddp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/diag"
)

// adaptiveRun runs steps Syncs of n float32 on every rank of g and returns
// each rank's decisions and final Stats, after checking that the ranks
// agree on them. between, if set, runs on each rank after each step.
func adaptiveRun(t *testing.T, g *collective.Group, ss []*Sync[float32], steps, n int, between func(c *collective.Comm, s *Sync[float32])) ([]Decision, Stats) {
	t.Helper()
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		x := make([]float32, n)
		for s := 0; s < steps; s++ {
			for i := range x {
				x[i] = float32(c.Rank() + i%7)
			}
			if err := ss[c.Rank()].Sync(context.Background(), x); err != nil {
				return fmt.Errorf("step %d: %w", s+1, err)
			}
			for i, v := range x {
				if want := float32(i%7) + float32(g.Size()-1)/2; v != want {
					return fmt.Errorf("step %d element %d: %v, want %v", s+1, i, v, want)
				}
			}
			if between != nil {
				between(c, ss[c.Rank()])
			}
		}
		return nil
	}))
	ds := ss[0].Decisions()
	st := ss[0].Stats()
	for r := 1; r < len(ss); r++ {
		if got := ss[r].Decisions(); fmt.Sprint(got) != fmt.Sprint(ds) {
			t.Fatalf("rank %d decided %+v, rank 0 %+v", r, got, ds)
		}
		if got := ss[r].Stats(); got.Switches != st.Switches || got.LastSwitchStep != st.LastSwitchStep || got.CurrentStrategy != st.CurrentStrategy {
			t.Fatalf("rank %d: %+v, rank 0: %+v", r, got, st)
		}
	}
	for _, d := range ds {
		t.Logf("step %d (%d bytes) check=%v: %s %v, %s %v, switched=%v", d.Step, d.Bytes, d.Check, d.Current, d.CurrentTime, d.Other, d.OtherTime, d.Switched)
	}
	return ds, st
}

// checkDecisions checks the selector's decisions against the times it
// recorded: a probe round compares a measured current strategy (Auto
// included) and switches exactly when a candidate beats it by threshold; a
// switch is checked once the new strategy has run window steps, and
// switched back exactly when it measured slower than the strategy it left.
// It returns the strategy the selector ends on, starting from start.
func checkDecisions(t *testing.T, ds []Decision, start collective.Strategy, threshold float64, window, steps int) collective.Strategy {
	t.Helper()
	cur := start
	for i, d := range ds {
		if d.Current != cur {
			t.Errorf("decision %d: compares %s, but the selector ran %s", i, d.Current, cur)
		}
		if d.CurrentTime <= 0 || d.OtherTime <= 0 {
			t.Errorf("decision %d: %+v: a time was not measured", i, d)
			continue
		}
		ratio := float64(d.CurrentTime) / float64(d.OtherTime)
		if d.Check {
			if d.Switched != (d.CurrentTime > d.OtherTime) {
				t.Errorf("decision %d: %+v: switched=%v, but %s measured %v against %v for the %s it left", i, d, d.Switched, d.Current, d.CurrentTime, d.OtherTime, d.Other)
			}
		} else {
			const eps = 1e-6 // the times are rounded to nanoseconds
			if d.Switched && ratio < threshold-eps || !d.Switched && ratio > threshold+eps {
				t.Errorf("decision %d: %+v: switched=%v at a speed-up of %.3f (threshold %v)", i, d, d.Switched, ratio, threshold)
			}
			if d.Switched && int(d.Step)+window <= steps {
				// The switch must be checked window steps later.
				if i+1 >= len(ds) || !ds[i+1].Check || ds[i+1].Step != d.Step+int64(window) || ds[i+1].Current != d.Other || ds[i+1].Other != d.Current {
					t.Errorf("decision %d: switch %+v not checked %d steps later (next: %+v)", i, d, window, ds[min(i+1, len(ds)-1)])
				}
			}
		}
		if d.Switched {
			cur = d.Other
		}
	}
	return cur
}

// TestAdaptiveKeepsAuto: 4 ranks, 120 steps of 19,204 float32 with the
// default Options and Adaptive, on the group's Auto. Auto's own steps are
// measured and compared with the candidates (the comparison is never
// skipped); a switch happens only when a candidate beat Auto's measured
// time by SwitchThreshold, and is reverted when the new strategy then
// measures slower than Auto over its window. The selector never ends on a
// strategy whose window time exceeds that of the one it left.
func TestAdaptiveKeepsAuto(t *testing.T) {
	const ranks, steps, n = 4, 120, 19204
	for _, bk := range backendsUnderTest(t) {
		t.Run(bk, func(t *testing.T) {
			g := openGroup(t, bk, ranks)
			ss := newSyncs[float32](t, g, Options{Adaptive: true})
			ds, st := adaptiveRun(t, g, ss, steps, n, nil)
			// Candidates direct and pipelined, then Auto: a round of 9 steps,
			// the cooldown raised to 81; compared at step 90.
			if len(ds) == 0 || ds[0].Step != 90 || ds[0].Check || ds[0].Current != collective.Auto || ds[0].Bytes != n*4 {
				t.Fatalf("decisions %+v: want Auto compared with the candidates at step 90", ds)
			}
			end := checkDecisions(t, ds, collective.Auto, 1.2, 20, steps)
			if end != collective.Auto {
				last := ds[len(ds)-1]
				if !last.Check || last.Current != end || last.CurrentTime > last.OtherTime {
					t.Errorf("ends on %s without a check that it is not slower than the %s it left: %+v", end, ds[0].Current, ds)
				}
			}
			if st.CurrentStrategy == collective.Auto || st.ByStrategy[collective.Auto] != 0 {
				t.Errorf("stats %+v: want the strategies that ran, not auto", st)
			}
			ran := int64(0)
			for _, k := range st.ByStrategy {
				ran += k
			}
			if ran != steps || st.Operations != steps {
				t.Errorf("stats %+v: want %d all-reduces by strategy", st, steps)
			}
		})
	}
}

// TestAdaptiveLeavesSlowStart: a group configured with the ring, which
// the cost model rates more than twice slower than direct for the step's
// size (on the host backend: slowed down before the model is measured, a
// delay before each of the ring's 2(N-1) submissions), switches to direct
// after its first probe round, on every rank at the same step, and the
// check a window later keeps direct.
func TestAdaptiveLeavesSlowStart(t *testing.T) {
	const ranks, n = 4, 1024
	// Five probe steps: direct's first runs on a device are slower (its
	// pipelines are built, its memory imported); the median of five leaves
	// two of them out.
	const cooldown, probe, window = 1, 5, 4
	for _, bk := range backendsUnderTest(t) {
		t.Run(bk, func(t *testing.T) {
			g := openGroup(t, bk, ranks, func(o *collective.Options) { o.Config.Strategy = collective.Ring })
			if bk == "host" {
				setDelay(t, g, time.Millisecond)
			}
			ss := newSyncs[float32](t, g, Options{Adaptive: true, SwitchCooldown: cooldown, ProbeSteps: probe, EvaluationWindow: window,
				Candidates: []collective.Strategy{collective.Ring, collective.Direct}})
			_, est := diag.AutoChoice(g.Comm(0), n*4, backend.F32)
			if !(est[collective.Ring] >= 2*est[collective.Direct]) {
				t.Fatalf("the cost model rates ring %v and direct %v: want ring at least twice slower", est[collective.Ring], est[collective.Direct])
			}
			switchAt := effectiveCooldown(cooldown, 2, probe) + 2*probe
			steps := switchAt + window + 1
			ds, st := adaptiveRun(t, g, ss, steps, n, nil)
			end := checkDecisions(t, ds, collective.Ring, 1.2, window, steps)
			if len(ds) != 2 || !ds[0].Switched || ds[0].Step != int64(switchAt) || end != collective.Direct ||
				st.CurrentStrategy != collective.Direct || st.Switches != 1 {
				t.Fatalf("after %d steps: %+v, decisions %+v: want a switch from ring to direct at step %d, kept", steps, st, ds, switchAt)
			}
		})
	}
}

// TestAdaptiveSwitchesBack: a switch to a strategy that then measures
// slower than the one it left is reverted when it is checked. The ring is
// slowed down (host backend), the selector switches to direct; then rank 0
// arrives 30 ms late at every step (the host backend's direct runs on the
// CPU, which a device delay does not slow), so direct's window after the
// switch is slower than the ring's before it on the other ranks, and all
// ranks switch back to the ring at the check.
func TestAdaptiveSwitchesBack(t *testing.T) {
	const ranks, n = 4, 4096
	const cooldown, probe, window = 1, 2, 4
	g := openGroup(t, "host", ranks, func(o *collective.Options) { o.Config.Strategy = collective.Ring })
	setDelay(t, g, time.Millisecond)
	ss := newSyncs[float32](t, g, Options{Adaptive: true, AnyOrder: true, SwitchCooldown: cooldown, ProbeSteps: probe,
		EvaluationWindow: window, Candidates: []collective.Strategy{collective.Ring, collective.Direct}})
	switchAt := effectiveCooldown(cooldown, 2, probe) + 2*probe
	steps := switchAt + window + 1
	ds, st := adaptiveRun(t, g, ss, steps, n, func(c *collective.Comm, s *Sync[float32]) {
		if st := s.Stats(); st.Switches == 1 && c.Rank() == 0 {
			time.Sleep(30 * time.Millisecond)
		}
	})
	end := checkDecisions(t, ds, collective.Ring, 1.2, window, steps)
	if len(ds) != 2 || !ds[0].Switched || ds[0].Other != collective.Direct || !ds[1].Check || !ds[1].Switched ||
		ds[1].Step != int64(switchAt+window) || end != collective.Ring {
		t.Fatalf("decisions %+v: want a switch to direct at step %d and back to ring at step %d", ds, switchAt, switchAt+window)
	}
	if st.Switches != 2 || st.LastSwitchStep != int64(switchAt+window) || st.CurrentStrategy != collective.Ring {
		t.Fatalf("stats %+v: want two switches, the last at step %d, and the ring running", st, switchAt+window)
	}
}
