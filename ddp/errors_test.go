package ddp

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// failAt runs steps steps of call on 2 ranks, rank 0's step fail bounded
// by a 50 ms deadline while rank 1 arrives 400 ms late: rank 0's step
// times out and breaks the group, rank 1's step fails on the broken
// group. It returns the errors by rank and the strategy each rank's
// Stats reported before the failing step.
func failAt(t *testing.T, bk string, o Options, fail int, call func(ctx context.Context, s *Sync[float32], r *Reducer[float32], x []float32) error) ([]error, []collective.Strategy) {
	t.Helper()
	g := openGroup(t, bk, 2)
	ss := newSyncs[float32](t, g, o)
	xs := [][]float32{make([]float32, 4096), make([]float32, 4096)}
	var rs []*Reducer[float32]
	if o.TopK == 0 {
		rs = newReducers(t, g, ss, [][][]float32{{xs[0][:2048], xs[0][2048:]}, {xs[1][:2048], xs[1][2048:]}}, ReducerOptions{BucketBytes: 16384})
	}
	before := make([]collective.Strategy, 2)
	errs := onRanks(g, func(c *collective.Comm) error {
		s := ss[c.Rank()]
		var r *Reducer[float32]
		if rs != nil {
			r = rs[c.Rank()]
		}
		for step := 1; step <= fail; step++ {
			ctx := context.Background()
			if step == fail {
				before[c.Rank()] = s.Stats().CurrentStrategy
				if c.Rank() == 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
					defer cancel()
				} else {
					time.Sleep(400 * time.Millisecond)
				}
			}
			if err := call(ctx, s, r, xs[c.Rank()]); err != nil {
				return err
			}
		}
		return nil
	})
	return errs, before
}

// TestStepErrors: a step that fails in its collective returns a
// *StepError naming the ddp call the user made, the rank, the step (as
// Stats.Steps counts them) and the strategy that ran (the one Stats
// reported, never Auto), not the collective's internal entry point; the
// collective's *collective.Error stays in the chain (errors.As), with
// what it matches (errors.Is: the deadline on the rank whose ctx ended,
// a broken group on the other).
func TestStepErrors(t *testing.T) {
	const fail = 3
	sync := func(ctx context.Context, s *Sync[float32], _ *Reducer[float32], x []float32) error {
		return s.Sync(ctx, x)
	}
	cases := []struct {
		name, call string
		o          Options
		bucket     int
		phase      [2]string // by rank
		step       func(ctx context.Context, s *Sync[float32], r *Reducer[float32], x []float32) error
	}{
		{"Sync", "Sync.Sync", Options{}, -1, [2]string{"all-reduce", "all-reduce"}, sync},
		{"Sync wire", "Sync.Sync", Options{Wire: backend.BF16}, -1, [2]string{"all-reduce, bfloat16 on the wire", "all-reduce, bfloat16 on the wire"}, sync},
		// Two fusion buckets of one size (so of one strategy: Auto picks
		// per size).
		{"SyncAll", "Sync.SyncAll", Options{FusionBytes: 8192}, -1, [2]string{"all-reduce", "all-reduce"}, func(ctx context.Context, s *Sync[float32], _ *Reducer[float32], x []float32) error {
			return s.SyncAll(ctx, [][]float32{x[:2048], x[2048:]})
		}},
		{"SyncAsync", "Sync.SyncAsync", Options{}, -1, [2]string{"all-reduce", "all-reduce"}, func(ctx context.Context, s *Sync[float32], _ *Reducer[float32], x []float32) error {
			s.SyncAsync(ctx, x)
			return s.Wait(context.Background())
		}},
		// Rank 1 finds the group broken in its top-k selection, before
		// its all-gathers: no strategy there.
		{"top-k", "Sync.Sync", Options{TopK: 0.1}, -1, [2]string{"top-k all-gather", "top-k selection"}, sync},
		{"Reducer", "Reducer.Wait", Options{}, 0, [2]string{"all-reduce", "all-reduce"}, func(ctx context.Context, _ *Sync[float32], r *Reducer[float32], _ []float32) error {
			return errors.Join(r.MarkReady(ctx, 1), r.MarkReady(ctx, 0), r.Wait(context.Background()))
		}},
	}
	for _, bk := range backendsUnderTest(t) {
		for _, tc := range cases {
			errs, before := failAt(t, bk, tc.o, fail, tc.step)
			for r, err := range errs {
				what := fmt.Sprintf("%s %s rank %d", bk, tc.name, r)
				var se *StepError
				var ce *collective.Error
				if !errors.As(err, &se) || !errors.As(err, &ce) {
					t.Errorf("%s: %v (%T), want a *StepError wrapping a *collective.Error", what, err, err)
					continue
				}
				if se.Call != tc.call || se.Rank != r || se.Step != fail || se.Bucket != tc.bucket || se.Phase != tc.phase[r] {
					t.Errorf("%s: %+v, want call %s, rank %d, step %d, bucket %d, phase %q", what, se, tc.call, r, fail, tc.bucket, tc.phase[r])
				}
				if tc.bucket >= 0 && !reflect.DeepEqual(se.Gradients, []string{"gradient 0", "gradient 1"}) {
					t.Errorf("%s: bucket gradients %q", what, se.Gradients)
				}
				msg := err.Error()
				if se.Phase == "top-k selection" {
					if se.Strategy != collective.Auto || strings.Contains(msg, "strategy") {
						t.Errorf("%s: %q names a strategy for the device's selection", what, msg)
					}
				} else if se.Strategy == collective.Auto || se.Strategy != before[r] || !strings.Contains(msg, "strategy "+se.Strategy.String()) {
					t.Errorf("%s: %q: strategy %s, want the one Stats reported (%s), never auto", what, msg, se.Strategy, before[r])
				}
				prefix := fmt.Sprintf("ddp.%s: rank %d, step %d", tc.call, r, fail)
				if !strings.HasPrefix(msg, prefix) || strings.Contains(msg, ce.Op+" (call") || strings.Contains(msg, "'s "+ce.Op) {
					t.Errorf("%s: %q, want it to start %q, naming no collective entry point", what, msg, prefix)
				}
				switch r {
				case 0:
					if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, collective.ErrTimeout) {
						t.Errorf("%s: %v, want the deadline", what, err)
					}
				case 1:
					if !errors.Is(err, collective.ErrGroupBroken) || !strings.Contains(msg, "rank 0 failed") {
						t.Errorf("%s: %v, want the group broken by rank 0", what, err)
					}
				}
				t.Logf("%s: %v", what, err)
			}
		}
	}
}

// TestOptionsMismatch: ranks whose Options differ fail their first step
// (Sync, SyncAll, SyncAsync) or NewReducer, every rank with the same
// *OptionsError naming the field and the values, before any gradient
// moved; options that only matter with another one set do not count
// without it.
func TestOptionsMismatch(t *testing.T) {
	ctx := context.Background()
	g := openGroup(t, "host", 3)
	cases := []struct {
		name          string
		o             [3]Options
		field         string
		value, peer   string
		peerRank      int
		ranks, fields []string
	}{
		{"wire", [3]Options{{}, {}, {Wire: backend.F16}}, "Wire", "0 (none)", "backend.F16", 2, []string{"2"}, []string{"Wire"}},
		{"adaptive", [3]Options{{}, {Adaptive: true}, {}}, "Adaptive", "false", "true", 1, []string{"1"}, []string{"Adaptive", "SwitchCooldown", "EvaluationWindow", "SwitchThreshold", "ProbeSteps", "Candidates", "ProbeLimit"}},
		{"cooldown", [3]Options{{Adaptive: true}, {Adaptive: true, SwitchCooldown: 10}, {Adaptive: true, SwitchCooldown: 10}}, "SwitchCooldown", "50", "10", 1, []string{"1", "2"}, []string{"SwitchCooldown"}},
		{"fusion", [3]Options{{FusionBytes: 1 << 10}, {}, {FusionBytes: 1 << 10}}, "FusionBytes", "1024", "4194304", 1, []string{"1"}, []string{"FusionBytes"}},
		{"top-k", [3]Options{{TopK: 0.5}, {TopK: 0.25, NoErrorFeedback: true}, {TopK: 0.5}}, "TopK", "0.5", "0.25", 1, []string{"1"}, []string{"TopK", "NoErrorFeedback"}},
		{"candidates", [3]Options{{Adaptive: true, Candidates: []collective.Strategy{collective.Direct, collective.Pipelined}}, {Adaptive: true}, {Adaptive: true, Candidates: []collective.Strategy{collective.Direct, collective.Pipelined}}},
			"Candidates", "[direct pipelined]", "[direct pipelined ring tree hierarchical]", 1, []string{"1"}, []string{"Candidates"}},
	}
	calls := []struct {
		name string
		call string
		f    func(s *Sync[float32], x []float32) error
	}{
		{"Sync", "Sync.Sync", func(s *Sync[float32], x []float32) error { return s.Sync(ctx, x) }},
		{"SyncAll", "Sync.SyncAll", func(s *Sync[float32], x []float32) error { return s.SyncAll(ctx, [][]float32{x[:3], x[3:]}) }},
		{"SyncAsync", "Sync.SyncAsync", func(s *Sync[float32], x []float32) error { return s.SyncAsync(ctx, x).Wait(ctx) }},
		{"NewReducer", "NewReducer", func(s *Sync[float32], x []float32) error {
			_, err := NewReducer(ctx, s, [][]float32{x[:3], x[3:]}, ReducerOptions{})
			return err
		}},
	}
	for _, tc := range cases {
		for _, cl := range calls {
			if tc.o[0].TopK > 0 && cl.name == "NewReducer" {
				continue // refused for top-k on every rank
			}
			ss := make([]*Sync[float32], 3)
			for r := range ss {
				o := tc.o[r]
				o.Logger = quiet
				s, err := New[float32](g.Comm(r), o)
				if err != nil {
					t.Fatal(err)
				}
				ss[r] = s
			}
			xs := make([][]float32, 3)
			errs := onRanks(g, func(c *collective.Comm) error {
				xs[c.Rank()] = []float32{1, 2, 3, 4, 5, float32(c.Rank())}
				return cl.f(ss[c.Rank()], xs[c.Rank()])
			})
			want := fmt.Sprintf("ddp.%s: ranks created their Syncs with different options: %s is %s on rank 0 and %s on rank %d",
				cl.call, tc.field, tc.value, tc.peer, tc.peerRank)
			for r, err := range errs {
				what := fmt.Sprintf("%s %s rank %d", tc.name, cl.name, r)
				var oe *OptionsError
				if !errors.As(err, &oe) || !errors.Is(err, collective.ErrMismatch) {
					t.Errorf("%s: %v, want an *OptionsError matching collective.ErrMismatch", what, err)
					continue
				}
				if !strings.HasPrefix(err.Error(), want) || fmt.Sprint(oe.Ranks) != "["+strings.Join(tc.ranks, " ")+"]" ||
					!reflect.DeepEqual(oe.Fields, tc.fields) {
					t.Errorf("%s: %q (ranks %v, fields %v), want %q, ranks %v, fields %v", what, err, oe.Ranks, oe.Fields, want, tc.ranks, tc.fields)
				}
				if xs[r][5] != float32(r) {
					t.Errorf("%s: the gradients moved: %v", what, xs[r])
				}
				if st := ss[r].Stats(); st.Steps != 0 || st.Operations != 0 {
					t.Errorf("%s: %d steps, %d operations counted, want none", what, st.Steps, st.Operations)
				}
			}
			if tc.name == "wire" && cl.name == "Sync" {
				t.Logf("%v", errs[0])
			}
			for _, s := range ss {
				if err := s.Close(ctx); err != nil && !errors.Is(err, collective.ErrMismatch) {
					t.Fatal(err)
				}
			}
		}
	}

	// Selector options without Adaptive, and NoErrorFeedback without
	// TopK, do not matter: the Syncs agree.
	ss := make([]*Sync[float32], 3)
	for r := range ss {
		s, err := New[float32](g.Comm(r), Options{Logger: quiet, SwitchCooldown: 10 * (r + 1), ProbeSteps: r + 1, NoErrorFeedback: r == 1})
		if err != nil {
			t.Fatal(err)
		}
		ss[r] = s
		defer s.Close(ctx)
	}
	noErrors(t, onRanks(g, func(c *collective.Comm) error { return ss[c.Rank()].Sync(ctx, make([]float32, 6)) }))
}

// TestOptionsMismatchGradientType: Syncs of different gradient types are
// an options mismatch named "gradient type".
func TestOptionsMismatchGradientType(t *testing.T) {
	ctx := context.Background()
	g := openGroup(t, "host", 2)
	errs := onRanks(g, func(c *collective.Comm) error {
		if c.Rank() == 0 {
			s, err := New[float32](c, Options{Logger: quiet})
			if err != nil {
				return err
			}
			defer s.Close(ctx)
			return s.Sync(ctx, make([]float32, 8))
		}
		s, err := New[collective.BFloat16](c, Options{Logger: quiet})
		if err != nil {
			return err
		}
		defer s.Close(ctx)
		return s.Sync(ctx, make([]collective.BFloat16, 8))
	})
	const want = "ddp.Sync.Sync: ranks created their Syncs with different options: gradient type is float32 on rank 0 and collective.BFloat16 on rank 1; nothing was reduced"
	for r, err := range errs {
		var oe *OptionsError
		if !errors.As(err, &oe) || err.Error() != want {
			t.Errorf("rank %d: %v, want %q", r, err, want)
		}
	}
}

// TestCurrentStrategyRan: Stats.CurrentStrategy is the strategy the steps
// ran, never Auto once a step ran: Auto's pick (the strategy ByStrategy
// counts), ring with a Wire format, ring with top-k (its all-gathers),
// and Auto's pick for a Reducer's buckets.
func TestCurrentStrategyRan(t *testing.T) {
	ctx := context.Background()
	for _, bk := range backendsUnderTest(t) {
		for _, tc := range []struct {
			name    string
			o       Options
			reducer bool
			want    collective.Strategy // Auto: the one ByStrategy counts
		}{
			{"dense", Options{}, false, collective.Auto},
			{"wire", Options{Wire: backend.F16}, false, collective.Ring},
			{"top-k", Options{TopK: 0.25}, false, collective.Ring},
			{"reducer", Options{}, true, collective.Auto},
		} {
			g := openGroup(t, bk, 2)
			ss := newSyncs[float32](t, g, tc.o)
			xs := [][]float32{make([]float32, 1000), make([]float32, 1000)}
			var rs []*Reducer[float32]
			if tc.reducer {
				rs = newReducers(t, g, ss, [][][]float32{{xs[0][:500], xs[0][500:]}, {xs[1][:500], xs[1][500:]}}, ReducerOptions{})
			}
			noErrors(t, onRanks(g, func(c *collective.Comm) error {
				for range 3 {
					var err error
					if tc.reducer {
						err = backward(ctx, rs[c.Rank()], []int{1, 0})
					} else {
						err = ss[c.Rank()].Sync(ctx, xs[c.Rank()])
					}
					if err != nil {
						return err
					}
				}
				return nil
			}))
			for r, s := range ss {
				st := s.Stats()
				want := tc.want
				if want == collective.Auto {
					if len(st.ByStrategy) != 1 {
						t.Errorf("%s %s rank %d: ran %v, want one strategy", bk, tc.name, r, st.ByStrategy)
					}
					for k := range st.ByStrategy {
						want = k
					}
				}
				if st.CurrentStrategy == collective.Auto || st.CurrentStrategy != want {
					t.Errorf("%s %s rank %d: CurrentStrategy %s, want %s (what ran)", bk, tc.name, r, st.CurrentStrategy, want)
				}
			}
		}
	}
}
