package ddp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"go.uber.org/goleak"
)

// effectiveCooldown is the selector's cooldown for a probe round of cands
// candidates (the current strategy among them): SwitchCooldown raised so
// that probing takes at most a tenth of the steps.
func effectiveCooldown(cooldown, cands, probeSteps int) int {
	return max(cooldown, 9*cands*probeSteps)
}

// TestSyncStats: the counters are the counts of what was done.
func TestSyncStats(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3, func(o *collective.Options) { o.Config.Strategy = collective.Ring })
		ss := newSyncs[float32](t, g, Options{})
		const steps, n = 7, 1001
		grads := make([][]float32, 3)
		noErrors(t, onRanks(g, func(c *collective.Comm) error {
			grads[c.Rank()] = make([]float32, n)
			for s := 0; s < steps; s++ {
				for i := range grads[c.Rank()] {
					grads[c.Rank()][i] = float32(c.Rank() + i%5)
				}
				if err := ss[c.Rank()].Sync(context.Background(), grads[c.Rank()]); err != nil {
					return err
				}
			}
			return nil
		}))
		for r, s := range ss {
			st := s.Stats()
			if st.Steps != steps || st.Operations != steps || st.BytesMoved != steps*n*4 || st.CurrentStrategy != collective.Ring ||
				st.ProbeSteps != 0 || st.Switches != 0 || len(st.ByStrategy) != 1 || st.ByStrategy[collective.Ring] != steps {
				t.Errorf("%s rank %d: stats %+v", bk, r, st)
			}
			if p := g.Comm(r).PendingAsync(); p != 0 {
				t.Errorf("%s rank %d: %d asynchronous operations pending", bk, r, p)
			}
			if !(st.AverageBandwidth > 0) {
				t.Errorf("%s rank %d: average bandwidth %v", bk, r, st.AverageBandwidth)
			}
			for i, v := range grads[r] {
				if want := float32(1 + i%5); v != want {
					t.Fatalf("%s rank %d element %d: %v, want mean %v", bk, r, i, v, want)
				}
			}
		}
	}
}

// TestAdaptiveSwitchAgreed slows the device down for real (a delay before
// every submission, at the backend seam): the ring, which submits 2(N-1)
// times per slice, becomes several times slower than the one-submission
// direct strategy. The selector must not switch inside the cooldown (raised
// so that probing is at most a tenth of the steps), then switch, on every
// rank at the same step, to the same strategy.
func TestAdaptiveSwitchAgreed(t *testing.T) {
	g := openGroup(t, "host", 4, func(o *collective.Options) { o.Config.Strategy = collective.Ring })
	setDelay(t, g, 2*time.Millisecond)
	const cooldown, probe = 10, 2
	ss := newSyncs[float32](t, g, Options{Adaptive: true, AnyOrder: true, SwitchCooldown: cooldown, EvaluationWindow: 4,
		ProbeSteps: probe, Candidates: []collective.Strategy{collective.Ring, collective.Direct}})
	eff := effectiveCooldown(cooldown, 2, probe)
	switchAt := int64(eff + 2*probe) // the probe round (direct, then ring) is compared at its last step
	steps := int(switchAt) + 4
	type obs struct {
		step     int64
		strategy collective.Strategy
		switches int
	}
	seen := make([][]obs, 4)
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		grads := make([]float32, 4096)
		for s := 0; s < steps; s++ {
			if err := ss[c.Rank()].Sync(context.Background(), grads); err != nil {
				return err
			}
			st := ss[c.Rank()].Stats()
			seen[c.Rank()] = append(seen[c.Rank()], obs{st.Steps, st.CurrentStrategy, st.Switches})
		}
		return nil
	}))
	for r := 1; r < 4; r++ {
		for i := range seen[0] {
			if seen[r][i] != seen[0][i] {
				t.Fatalf("rank %d disagrees with rank 0 at step %d: %+v vs %+v", r, i+1, seen[r][i], seen[0][i])
			}
		}
	}
	for _, o := range seen[0] {
		if o.step < int64(eff) && o.switches != 0 {
			t.Fatalf("switched at step %d, inside the %d-step cooldown", o.step, eff)
		}
	}
	last := seen[0][len(seen[0])-1]
	st := ss[0].Stats()
	if last.switches != 1 || last.strategy != collective.Direct || st.LastSwitchStep != switchAt {
		t.Fatalf("after %d steps: %+v (switched at step %d), want one switch to direct at step %d", steps, last, st.LastSwitchStep, switchAt)
	}
	if st.ProbeSteps != 2*probe || 10*st.ProbeSteps > st.Steps {
		t.Errorf("%d probe steps in %d steps, want %d and at most a tenth", st.ProbeSteps, st.Steps, 2*probe)
	}
	cls := sizeClass(4096 * 4)
	ring, _ := ss[0].mon.secsPerByte(collective.Ring, cls)
	direct, _ := ss[0].mon.secsPerByte(collective.Direct, cls)
	t.Logf("measured: ring %.0f us, direct %.0f us per call; switched at step %d", ring*4096*4*1e6, direct*4096*4*1e6, st.LastSwitchStep)
}

// TestAdaptiveNoSwitchWithoutGain: equal strategies do not switch (after a
// probe round that did run).
func TestAdaptiveNoSwitchWithoutGain(t *testing.T) {
	g := openGroup(t, "host", 2, func(o *collective.Options) { o.Config.Strategy = collective.Direct })
	const cooldown, probe = 3, 1
	ss := newSyncs[float32](t, g, Options{Adaptive: true, SwitchCooldown: cooldown, ProbeSteps: probe, SwitchThreshold: 1e6,
		ProbeLimit: 1e9, Candidates: []collective.Strategy{collective.Direct, collective.Pipelined}})
	steps := 2 * (effectiveCooldown(cooldown, 2, probe) + 2*probe)
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		for s := 0; s < steps; s++ {
			if err := ss[c.Rank()].Sync(context.Background(), make([]float32, 100)); err != nil {
				return err
			}
		}
		return nil
	}))
	st := ss[0].Stats()
	if st.Switches != 0 || st.CurrentStrategy != collective.Direct {
		t.Errorf("switched without a gain: %+v", st)
	}
	if st.ProbeSteps == 0 {
		t.Errorf("no probe round in %d steps: %+v", steps, st)
	}
}

// TestAdaptiveRankOrderOnly: without AnyOrder the selector probes only
// rank-order strategies, even when slower ones are listed.
func TestAdaptiveRankOrderOnly(t *testing.T) {
	g := openGroup(t, "host", 3, func(o *collective.Options) { o.Config.Strategy = collective.Direct })
	ss := newSyncs[float32](t, g, Options{Adaptive: true, SwitchCooldown: 1, ProbeSteps: 1, ProbeLimit: 1e9})
	const steps = 120
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		x := make([]float32, 513)
		for s := 0; s < steps; s++ {
			for i := range x {
				x[i] = float32(c.Rank() + i%9)
			}
			if err := ss[c.Rank()].Sync(context.Background(), x); err != nil {
				return err
			}
			for i, v := range x {
				if want := float32(1 + i%9); v != want {
					return fmt.Errorf("step %d element %d: %v, want %v", s, i, v, want)
				}
			}
		}
		return nil
	}))
	for r, s := range ss {
		st := s.Stats()
		if st.ProbeSteps == 0 || 10*st.ProbeSteps > st.Steps {
			t.Errorf("rank %d: %d probe steps in %d steps: want some, at most a tenth", r, st.ProbeSteps, st.Steps)
		}
		if !s.rankOrder(st.CurrentStrategy) {
			t.Errorf("rank %d: switched to %s", r, st.CurrentStrategy)
		}
		for key := range s.mon.perClass {
			if st := collective.Strategy(key[0]); st != collective.Direct && st != collective.Pipelined {
				t.Errorf("rank %d: ran %s, not a rank-order strategy", r, st)
			}
		}
	}
}

// TestAsyncAndWait: asynchronous steps overlap the caller and give the same
// results.
func TestAsyncAndWait(t *testing.T) {
	defer goleak.VerifyNone(t, leakOpts...)
	for _, bk := range backendsUnderTest(t) {
		func() {
			g, err := collective.NewGroup(context.Background(), collective.Options{Ranks: 3, Backend: bk, Config: testConfig(),
				Validation: wantValidation(bk)})
			if err != nil {
				t.Fatal(err)
			}
			defer checkValidation(t)
			defer g.Close()
			ss := newSyncs[float64](t, g, Options{})
			const steps = 5
			bufs := make([][][]float64, 3)
			noErrors(t, onRanks(g, func(c *collective.Comm) error {
				for s := 0; s < steps; s++ {
					b := make([]float64, 777)
					for i := range b {
						b[i] = float64(c.Rank()*s + i)
					}
					bufs[c.Rank()] = append(bufs[c.Rank()], b)
					ss[c.Rank()].SyncAsync(context.Background(), b)
				}
				return ss[c.Rank()].Wait(context.Background())
			}))
			for r := range bufs {
				for s, b := range bufs[r] {
					for i, v := range b {
						if want := float64(s) + float64(i); v != want {
							t.Fatalf("%s rank %d step %d element %d: %v, want %v", bk, r, s, i, v, want)
						}
					}
				}
				if st := ss[r].Stats(); st.Steps != steps {
					t.Errorf("%s rank %d: %+v", bk, r, st)
				}
				if p := g.Comm(r).PendingAsync(); p != 0 {
					t.Errorf("%s rank %d: %d asynchronous operations pending", bk, r, p)
				}
			}
			// AllReduceAsync on plain slices, on the same comms.
			noErrors(t, onRanks(g, func(c *collective.Comm) error {
				d := []float32{float32(c.Rank()), 1}
				w := collective.AllReduceAsync(context.Background(), c, d, collective.Sum)
				if err := w.Wait(context.Background()); err != nil {
					return err
				}
				if !w.Done() || d[0] != 3 || d[1] != 3 {
					return fmt.Errorf("async result %v", d)
				}
				return nil
			}))
			for r, s := range ss {
				if err := s.Close(context.Background()); err != nil {
					t.Errorf("%s rank %d: Close: %v", bk, r, err)
				}
			}
		}()
	}
}

// TestAsyncTimeoutNoLeak: one rank withholds its step; every other rank's
// SyncAsync Work fails with ErrTimeout within the timeout plus max(10%,
// 250 ms), the group is broken, and no goroutine outlives Close.
func TestAsyncTimeoutNoLeak(t *testing.T) {
	defer goleak.VerifyNone(t, leakOpts...)
	const timeout = 400 * time.Millisecond
	g, err := collective.NewGroup(context.Background(), collective.Options{Ranks: 4, Backend: "host", Config: func() collective.Config {
		c := testConfig()
		c.CommunicationTimeout = timeout
		c.Strategy = collective.Ring // Auto would first measure its cost model
		return c
	}()})
	if err != nil {
		t.Fatal(err)
	}
	ss := make([]*Sync[float32], 4)
	for r := range ss {
		if ss[r], err = New[float32](g.Comm(r), Options{Logger: quiet}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var works []collective.Work
	for r := 0; r < 3; r++ { // rank 3 never calls
		works = append(works, ss[r].SyncAsync(context.Background(), make([]float32, 100)))
	}
	for r, w := range works {
		err := w.Wait(context.Background())
		el := time.Since(start)
		if !errors.Is(err, collective.ErrTimeout) {
			t.Fatalf("rank %d: %v, want ErrTimeout", r, err)
		}
		if el > timeout+max(timeout/10, 250*time.Millisecond) {
			t.Errorf("rank %d: returned after %v, want <= %v + 250ms", r, el, timeout)
		}
	}
	if err := ss[0].Wait(context.Background()); !errors.Is(err, collective.ErrTimeout) {
		t.Errorf("Wait after the timeout: %v, want ErrTimeout", err)
	}
	if err := ss[0].Sync(context.Background(), []float32{1}); !errors.Is(err, collective.ErrGroupBroken) || !errors.Is(err, collective.ErrTimeout) {
		t.Errorf("after the timeout: %v, want a broken group carrying the timeout", err)
	}
	w := ss[1].SyncAsync(context.Background(), []float32{1})
	if err := w.Wait(context.Background()); !errors.Is(err, collective.ErrGroupBroken) {
		t.Errorf("async on a broken group: %v", err)
	}
	for r, s := range ss {
		_ = s.Close(context.Background()) // the failed steps' errors
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("rank %d: second Close: %v", r, err)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTopKErrorFeedback: over many steps, what top-k delivers plus what is
// still in the residuals equals what dense all-reduce would have delivered.
func TestTopKErrorFeedback(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		const ranks, n, steps = 3, 1000, 25
		g := openGroup(t, bk, ranks)
		ss := newSyncs[float64](t, g, Options{TopK: 0.05})
		sparse := make([][]float64, ranks)
		dense := make([]float64, n)
		rngs := make([]*rand.Rand, ranks)
		for r := range rngs {
			rngs[r] = rand.New(rand.NewPCG(uint64(r), 7))
			sparse[r] = make([]float64, n)
		}
		grads := make([][][]float64, steps)
		for s := range grads {
			grads[s] = make([][]float64, ranks)
			for r := range grads[s] {
				grads[s][r] = make([]float64, n)
				for i := range grads[s][r] {
					grads[s][r][i] = math.Round(rngs[r].NormFloat64() * 64)
					dense[i] += grads[s][r][i] / ranks
				}
			}
		}
		noErrors(t, onRanks(g, func(c *collective.Comm) error {
			for s := 0; s < steps; s++ {
				b := append([]float64(nil), grads[s][c.Rank()]...)
				if err := ss[c.Rank()].Sync(context.Background(), b); err != nil {
					return err
				}
				for i, v := range b {
					sparse[c.Rank()][i] += v
				}
			}
			return nil
		}))
		resid := make([]float64, n)
		for r := 0; r < ranks; r++ {
			for i, v := range ss[r].Residual() {
				resid[i] += v / ranks
			}
			if !bitsEqual(sparse[r], sparse[0]) {
				t.Fatalf("%s: rank %d's compressed results differ from rank 0's", bk, r)
			}
		}
		for i := range dense {
			if d := math.Abs(sparse[0][i] + resid[i] - dense[i]); d > 1e-9*math.Max(1, math.Abs(dense[i])) {
				t.Fatalf("%s element %d: delivered %v + residual %v != dense %v", bk, i, sparse[0][i], resid[i], dense[i])
			}
		}
		if st := ss[0].Stats(); st.Steps != steps || st.Operations != 2*steps {
			t.Errorf("%s: %+v, want %d steps of two all-gathers", bk, st, steps)
		}
	}
}

// TestTopKNoErrorFeedback: with NoErrorFeedback, what top-k did not send
// is dropped: no residual, and each step is the top-k of that step alone.
func TestTopKNoErrorFeedback(t *testing.T) {
	g := openGroup(t, "host", 2)
	ss := newSyncs[float32](t, g, Options{TopK: 0.25, NoErrorFeedback: true})
	res := make([][]float32, 2)
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		for s := 0; s < 3; s++ {
			b := []float32{1, -8, 2, 3, 0, 0, 0, 4}
			if c.Rank() == 1 {
				b = []float32{0, 1, 0, 0, 6, 0, -2, 1}
			}
			if err := ss[c.Rank()].Sync(context.Background(), b); err != nil {
				return err
			}
			res[c.Rank()] = b
		}
		return nil
	}))
	// k = 2: rank 0 sends -8 and 4, rank 1 sends 6 and -2, every step.
	want := []float32{0, -4, 0, 0, 3, 0, -1, 2}
	for r := range res {
		if !bitsEqual(res[r], want) {
			t.Errorf("rank %d: %v, want %v", r, res[r], want)
		}
		if rs := ss[r].Residual(); rs != nil {
			t.Errorf("rank %d: residual %v without error feedback", r, rs)
		}
	}
}

func TestTopKEdgeCases(t *testing.T) {
	g := openGroup(t, "host", 2)
	ss := newSyncs[float32](t, g, Options{TopK: 1e-6}) // k would round to 0: it is 1
	res := make([][]float32, 2)
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		b := []float32{1, -9, 3, float32(math.NaN())}
		if c.Rank() == 1 {
			b = []float32{0, 2, -4, 1}
		}
		res[c.Rank()] = b
		return ss[c.Rank()].Sync(context.Background(), b)
	}))
	// Rank 0 sends its NaN (the largest magnitude), rank 1 its -4.
	if !math.IsNaN(float64(res[0][3])) || res[0][2] != -2 || res[0][0] != 0 || res[0][1] != 0 {
		t.Errorf("got %v", res[0])
	}
	// selectTopK against a sort.
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(300)
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.IntN(21) - 10) // many ties
		}
		k := 1 + rng.IntN(n)
		order := make([]int, n)
		selectTopK(x, order, k)
		ref := make([]int, n)
		for i := range ref {
			ref[i] = i
		}
		sort.SliceStable(ref, func(a, b int) bool { return math.Abs(float64(x[ref[a]])) > math.Abs(float64(x[ref[b]])) })
		want := append([]int(nil), ref[:k]...)
		sort.Ints(want)
		got := append([]int(nil), order[:k]...)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("n=%d k=%d: top-k %v, want %v", n, k, got, want)
			}
		}
	}
}

// TestFusion: 100 tensors reduce to the same result as per-tensor calls with
// a few collectives.
func TestFusion(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3)
		ss := newSyncs[float32](t, g, Options{FusionBytes: 64 << 10})
		sizes := make([]int, 100)
		for i := range sizes {
			sizes[i] = 1 + (i*37)%900
		}
		sizes[50] = 40000 // larger than a bucket: reduced on its own
		fused := make([][][]float32, 3)
		single := make([][][]float32, 3)
		for r := range fused {
			for i, n := range sizes {
				a := make([]float32, n)
				for j := range a {
					a[j] = float32((r+1)*(i+j)%13) - 6
				}
				fused[r] = append(fused[r], a)
				single[r] = append(single[r], append([]float32(nil), a...))
			}
		}
		noErrors(t, onRanks(g, func(c *collective.Comm) error {
			if err := ss[c.Rank()].SyncAll(context.Background(), fused[c.Rank()]); err != nil {
				return err
			}
			for _, a := range single[c.Rank()] {
				if err := collective.AllReduce(context.Background(), c, a, collective.Mean); err != nil {
					return err
				}
			}
			return nil
		}))
		for r := range fused {
			for i := range fused[r] {
				if !bitsEqual(fused[r][i], single[r][i]) {
					t.Fatalf("%s rank %d tensor %d: fused result differs", bk, r, i)
				}
			}
		}
		st := ss[0].Stats()
		if st.Operations > 6 || st.Steps != 1 {
			t.Errorf("%s: 100 tensors took %d collectives in %d steps", bk, st.Operations, st.Steps)
		}
		// Every bucket is counted under the strategy Auto picked for it.
		ran := int64(0)
		for x, n := range st.ByStrategy {
			if x == collective.Auto {
				t.Errorf("%s: %d buckets counted under auto, not the strategy that ran", bk, n)
			}
			ran += n
		}
		if ran != st.Operations {
			t.Errorf("%s: %d buckets by strategy (%v), %d collectives", bk, ran, st.ByStrategy, st.Operations)
		}
		t.Logf("%s: 100 tensors in %d collectives", bk, st.Operations)
	}
}

// TestSyncWire: f16 and bf16 wire compression through Options.
func TestSyncWire(t *testing.T) {
	g := openGroup(t, "host", 3)
	for _, f := range []backend.WireFormat{backend.F16, backend.BF16} {
		ss := newSyncs[float32](t, g, Options{Wire: f})
		res := make([][]float32, 3)
		noErrors(t, onRanks(g, func(c *collective.Comm) error {
			b := make([]float32, 500)
			for i := range b {
				b[i] = float32(i%17) * 0.37 * float32(c.Rank()+1)
			}
			res[c.Rank()] = b
			return ss[c.Rank()].Sync(context.Background(), b)
		}))
		for i, v := range res[0] {
			exact := float64(float32(i%17)*0.37) * 2 // mean of 1x, 2x, 3x
			if d := math.Abs(float64(v) - exact); d > collective.WireErrorBound(f, 3, 6*math.Abs(exact)) {
				t.Fatalf("%s element %d: %v, want %v", f, i, v, exact)
			}
		}
		for r := 1; r < 3; r++ {
			if !bitsEqual(res[r], res[0]) {
				t.Fatalf("%s: rank %d differs from rank 0", f, r)
			}
		}
	}
	if _, err := New[float64](g.Comm(0), Options{Wire: backend.F16}); !errors.Is(err, collective.ErrInvalidConfig) {
		t.Errorf("f64 with wire compression: %v", err)
	}
}

// TestOptionsValidation: every invalid Options is refused by New with an
// error satisfying errors.Is(err, collective.ErrInvalidConfig) that names
// the field; the zero Options and the limits are accepted.
func TestOptionsValidation(t *testing.T) {
	g := openGroup(t, "host", 2)
	c := g.Comm(0)
	nan := math.NaN()
	bad := []struct {
		field string
		o     Options
		f64   bool
	}{
		{"TopK", Options{TopK: -0.1}, false},
		{"TopK", Options{TopK: 1.5}, false},
		{"TopK", Options{TopK: float32(nan)}, false},
		{"TopK", Options{TopK: float32(math.Inf(1))}, false},
		{"Wire", Options{Wire: backend.F16, TopK: 0.1}, false},
		{"Wire", Options{Wire: backend.BF16, TopK: 1}, false},
		{"Wire", Options{Wire: backend.F16}, true},
		{"Wire", Options{Wire: backend.BF16}, true},
		{"Wire", Options{Wire: backend.WireFormat(99)}, false},
		{"SwitchThreshold", Options{SwitchThreshold: 0.5}, false},
		{"SwitchThreshold", Options{SwitchThreshold: -1}, false},
		{"SwitchThreshold", Options{SwitchThreshold: nan}, false},
		{"SwitchThreshold", Options{SwitchThreshold: math.Inf(1)}, false},
		{"ProbeLimit", Options{ProbeLimit: 0.5}, false},
		{"ProbeLimit", Options{ProbeLimit: -2}, false},
		{"ProbeLimit", Options{ProbeLimit: nan}, false},
		{"ProbeSteps", Options{ProbeSteps: -1}, false},
		{"FusionBytes", Options{FusionBytes: -1}, false},
		{"FusionBytes", Options{FusionBytes: 3}, false},
		{"FusionBytes", Options{FusionBytes: 7}, true},
		{"LogEvery", Options{LogEvery: -1}, false},
		{"SwitchCooldown", Options{SwitchCooldown: -1}, false},
		{"EvaluationWindow", Options{EvaluationWindow: -5}, false},
		{"Candidates", Options{Candidates: []collective.Strategy{collective.Auto}}, false},
		{"Candidates", Options{Candidates: []collective.Strategy{collective.Direct, collective.Strategy(42)}}, false},
	}
	for _, b := range bad {
		var err error
		if b.f64 {
			_, err = New[float64](c, b.o)
		} else {
			_, err = New[float32](c, b.o)
		}
		var ce *collective.ConfigError
		if !errors.Is(err, collective.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != b.field {
			t.Errorf("New(%+v, f64=%v): %v, want a ConfigError on %s", b.o, b.f64, err, b.field)
		}
	}
	good := []Options{{}, {TopK: 1}, {TopK: 1e-9}, {Wire: backend.BF16}, {SwitchThreshold: 1}, {ProbeLimit: 1},
		{ProbeLimit: math.Inf(1)}, {FusionBytes: 4}, {LogEvery: 1}, {ProbeSteps: 1}}
	for _, o := range good {
		s, err := New[float32](c, o)
		if err != nil {
			t.Errorf("New(%+v): %v", o, err)
			continue
		}
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if _, err := New[float32](nil, Options{}); !errors.Is(err, collective.ErrInvalidArgument) {
		t.Errorf("New(nil Comm): %v, want ErrInvalidArgument", err)
	}
}

// TestSyncAllAdaptiveSizeClass: SyncAll's measurements are compared at the
// size class they were recorded at. The model (8 tensors of 4 KiB, 32 KiB)
// is fused into 4 KiB buckets, a smaller size class than the model's; the
// ring is made slow for real (a delay before each submission), so the
// selector must switch to direct, on every rank at the same step.
func TestSyncAllAdaptiveSizeClass(t *testing.T) {
	const ranks, tensors, elems = 4, 8, 1024
	g := openGroup(t, "host", ranks, func(o *collective.Options) { o.Config.Strategy = collective.Ring })
	setDelay(t, g, time.Millisecond)
	const cooldown, probe = 2, 2
	ss := newSyncs[float32](t, g, Options{Adaptive: true, AnyOrder: true, SwitchCooldown: cooldown, EvaluationWindow: 4,
		ProbeSteps: probe, Candidates: []collective.Strategy{collective.Ring, collective.Direct}, FusionBytes: 4 * elems})
	steps := effectiveCooldown(cooldown, 2, probe) + 2*probe // the probe round ends, and is compared, at the last step
	seen := make([][]Stats, ranks)
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		model := make([][]float32, tensors)
		for s := 0; s < steps; s++ {
			for i := range model {
				model[i] = make([]float32, elems)
				for j := range model[i] {
					model[i][j] = float32(c.Rank() + i + j%7)
				}
			}
			if err := ss[c.Rank()].SyncAll(context.Background(), model); err != nil {
				return err
			}
			for i := range model {
				for j, v := range model[i] {
					if want := float32(i+j%7) + 1.5; v != want {
						return fmt.Errorf("step %d tensor %d element %d: %v, want %v", s, i, j, v, want)
					}
				}
			}
			seen[c.Rank()] = append(seen[c.Rank()], ss[c.Rank()].Stats())
		}
		return nil
	}))
	for r := 1; r < ranks; r++ {
		for i := range seen[0] {
			a, b := seen[r][i], seen[0][i]
			if a.CurrentStrategy != b.CurrentStrategy || a.Switches != b.Switches || a.LastSwitchStep != b.LastSwitchStep {
				t.Fatalf("rank %d disagrees with rank 0 at step %d: %+v vs %+v", r, i+1, a, b)
			}
		}
	}
	last := seen[0][len(seen[0])-1]
	ds := ss[0].Decisions()
	if last.Switches != 1 || last.LastSwitchStep != int64(steps) || last.Operations != int64(steps*tensors) ||
		len(ds) != 1 || !ds[0].Switched || ds[0].Other != collective.Direct || ds[0].Bytes != tensors*elems*4 {
		t.Fatalf("after %d steps: %+v, decisions %+v: want one switch to direct at the last step, at the model's size, and %d collectives",
			steps, last, ds, steps*tensors)
	}
	if _, n := ss[0].mon.secsPerByte(collective.Direct, sizeClass(tensors*elems*4)); n != probe {
		t.Errorf("direct has %d samples at the model's size, want one per probe step (%d)", n, probe)
	}
}

// TestSyncAllTopK: with TopK, SyncAll compresses: it is Sync on the tensors
// concatenated in order (one top-k over the model, one error-feedback
// residual), bitwise, over several steps.
func TestSyncAllTopK(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		const ranks, steps = 3, 4
		g := openGroup(t, bk, ranks)
		all := newSyncs[float32](t, g, Options{TopK: 0.1, FusionBytes: 256})
		flat := newSyncs[float32](t, g, Options{TopK: 0.1, FusionBytes: 256})
		sizes := []int{5, 100, 1, 64, 300, 17}
		noErrors(t, onRanks(g, func(c *collective.Comm) error {
			rng := rand.New(rand.NewPCG(uint64(c.Rank()), 11))
			for s := 0; s < steps; s++ {
				var model [][]float32
				var cat []float32
				for _, n := range sizes {
					x := make([]float32, n)
					for i := range x {
						x[i] = float32(math.Round(rng.NormFloat64() * 64))
					}
					model = append(model, x)
					cat = append(cat, x...)
				}
				dense := append([]float32(nil), cat...)
				if err := all[c.Rank()].SyncAll(context.Background(), model); err != nil {
					return err
				}
				if err := flat[c.Rank()].Sync(context.Background(), cat); err != nil {
					return err
				}
				if err := collective.AllReduce(context.Background(), c, dense, collective.Mean); err != nil {
					return err
				}
				var got []float32
				for _, x := range model {
					got = append(got, x...)
				}
				if !bitsEqual(got, cat) {
					return fmt.Errorf("step %d: SyncAll differs from Sync of the concatenation", s)
				}
				if bitsEqual(got, dense) {
					return fmt.Errorf("step %d: SyncAll's result is the dense mean: not compressed", s)
				}
			}
			if !bitsEqual(all[c.Rank()].Residual(), flat[c.Rank()].Residual()) {
				return fmt.Errorf("residuals differ")
			}
			return nil
		}))
	}
}

// TestSyncAllWire: SyncAll with a wire format compresses every bucket and
// every tensor larger than a bucket: with one bucket it is AllReduceWire of
// the small tensors concatenated, and AllReduceWire of the large one.
func TestSyncAllWire(t *testing.T) {
	g := openGroup(t, "host", 3)
	ss := newSyncs[float32](t, g, Options{Wire: backend.BF16, FusionBytes: 4096})
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		model := [][]float32{make([]float32, 10), make([]float32, 2000), make([]float32, 33)}
		for i, x := range model {
			for j := range x {
				x[j] = float32(j%17)*0.37*float32(c.Rank()+1) + float32(i)
			}
		}
		small := append(append([]float32(nil), model[0]...), model[2]...)
		large := append([]float32(nil), model[1]...)
		if err := ss[c.Rank()].SyncAll(context.Background(), model); err != nil {
			return err
		}
		if err := collective.AllReduceWire(context.Background(), c, large, collective.Mean, backend.BF16); err != nil {
			return err
		}
		if err := collective.AllReduceWire(context.Background(), c, small, collective.Mean, backend.BF16); err != nil {
			return err
		}
		if !bitsEqual(model[1], large) || !bitsEqual(append(append([]float32(nil), model[0]...), model[2]...), small) {
			return fmt.Errorf("SyncAll with a wire format differs from AllReduceWire")
		}
		return nil
	}))
}

// countHandler counts the records it is given.
type countHandler struct {
	mu sync.Mutex
	n  int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(context.Context, slog.Record) error {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

func (h *countHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// countDefault installs a counting slog.Default for the test's duration.
func countDefault(t *testing.T) *countHandler {
	def := &countHandler{}
	old := slog.Default()
	slog.SetDefault(slog.New(def))
	t.Cleanup(func() { slog.SetDefault(old) })
	return def
}

// TestSyncNilLoggerQuiet: a Sync without a Logger logs nothing (not to
// slog.Default), even when LogEvery passes and the selector switches; with
// a Logger it logs there.
func TestSyncNilLoggerQuiet(t *testing.T) {
	t.Setenv("GOCOLL_DEBUG", "")
	def := countDefault(t)
	// The ring, slowed down (two submissions per call at 2 ranks, direct
	// one), is left for direct after the first probe round. The delay is
	// large and the probe takes the median of three steps, so a loaded
	// machine's noise (milliseconds a step under a parallel go test) does
	// not decide.
	g := openGroup(t, "host", 2, func(o *collective.Options) { o.Config.Strategy = collective.Ring })
	setDelay(t, g, 2*time.Millisecond)
	const probe = 3
	own := &countHandler{}
	ss := make([]*Sync[float32], 2)
	for r := range ss {
		o := Options{Adaptive: true, AnyOrder: true, LogEvery: 1, SwitchCooldown: 1, ProbeSteps: probe, ProbeLimit: 1e9,
			Candidates: []collective.Strategy{collective.Direct, collective.Ring}}
		if r == 1 {
			o.Logger = slog.New(own)
		}
		s, err := New[float32](g.Comm(r), o)
		if err != nil {
			t.Fatal(err)
		}
		ss[r] = s
	}
	// Past the cooldown and a probe round: a switch from the ring.
	steps := effectiveCooldown(1, 2, probe) + 2*probe + 4
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		for s := 0; s < steps; s++ {
			if err := ss[c.Rank()].Sync(context.Background(), make([]float32, 64)); err != nil {
				return err
			}
		}
		return nil
	}))
	if n := def.count(); n != 0 {
		t.Errorf("a nil Logger logged %d records to slog.Default", n)
	}
	if st := ss[1].Stats(); st.Switches != 1 {
		t.Errorf("no switch from the ring after a probe round: %+v, decisions %+v", st, ss[1].Decisions())
	}
	if n := own.count(); n < steps+1 {
		t.Errorf("a set Logger got %d records, want one a step and one for the switch (%d)", n, steps+1)
	}
}

// TestSyncAsyncThenSync: Sync and SyncAll after SyncAsync steps run after
// them, in call order, on every rank (they are collectives on the same
// Comm, and advance the selector's probes), with adaptive probes switching
// strategies in between, whether or not the caller waited for the
// asynchronous steps.
func TestSyncAsyncThenSync(t *testing.T) {
	g := openGroup(t, "host", 2, func(o *collective.Options) { o.Config.Strategy = collective.Ring })
	setDelay(t, g, 200*time.Microsecond)
	ss := newSyncs[float32](t, g, Options{Adaptive: true, AnyOrder: true, SwitchCooldown: 1, ProbeSteps: 1, ProbeLimit: 1e9,
		Candidates: []collective.Strategy{collective.Ring, collective.Direct, collective.Tree}})
	const rounds = 10 // 40 steps: past the raised cooldown (27) and a probe round
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		s := ss[c.Rank()]
		fill := func(n, step int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(c.Rank() + step + i%3)
			}
			return x
		}
		check := func(x []float32, step int) error {
			for i, v := range x {
				if want := float32(step+i%3) + 0.5; v != want {
					return fmt.Errorf("step %d element %d: %v, want %v", step, i, v, want)
				}
			}
			return nil
		}
		for round := 0; round < rounds; round++ {
			a, b := fill(300, 4*round), fill(50, 4*round+1)
			wa, wb := s.SyncAsync(context.Background(), a), s.SyncAsync(context.Background(), b)
			if c.Rank() == 1 {
				// Rank 1 lets its steps finish first, rank 0 calls Sync
				// while they are queued: both must run the same steps.
				if err := errors.Join(wa.Wait(context.Background()), wb.Wait(context.Background())); err != nil {
					return fmt.Errorf("round %d: async: %w", round, err)
				}
			}
			d := fill(70, 4*round+2)
			if err := s.Sync(context.Background(), d); err != nil {
				return fmt.Errorf("round %d: Sync: %w", round, err)
			}
			e := fill(20, 4*round+3)
			if err := s.SyncAll(context.Background(), [][]float32{e}); err != nil {
				return fmt.Errorf("round %d: SyncAll: %w", round, err)
			}
			if err := errors.Join(wa.Wait(context.Background()), wb.Wait(context.Background())); err != nil {
				return fmt.Errorf("round %d: async: %w", round, err)
			}
			for i, x := range [][]float32{a, b, d, e} {
				if err := check(x, 4*round+i); err != nil {
					return err
				}
			}
		}
		if err := s.Wait(context.Background()); err != nil {
			return err
		}
		if st := s.Stats(); st.Steps != 4*rounds {
			return fmt.Errorf("%d steps, want %d", st.Steps, 4*rounds)
		}
		return nil
	}))
	a, b := ss[0].Stats(), ss[1].Stats()
	if a.CurrentStrategy != b.CurrentStrategy || a.Switches != b.Switches || a.ProbeSteps != b.ProbeSteps || a.LastSwitchStep != b.LastSwitchStep {
		t.Errorf("ranks disagree: %+v vs %+v", a, b)
	}
	if a.ProbeSteps == 0 {
		t.Errorf("no probe ran: %+v", a)
	}
}

// TestSyncProbesSmallPipelined: the selector's probes run every candidate
// on the step's tensor, however small: a pipelined probe with more chunks
// than elements still gives the exact mean.
func TestSyncProbesSmallPipelined(t *testing.T) {
	g := openGroup(t, "host", 2, func(o *collective.Options) {
		o.Config.Strategy = collective.Direct
		o.Config.PipelineDepth = 4
	})
	ss := newSyncs[float32](t, g, Options{Adaptive: true, SwitchCooldown: 1, ProbeSteps: 2, ProbeLimit: 1e9,
		Candidates: []collective.Strategy{collective.Direct, collective.Pipelined}})
	const iters = 25 // 50 steps: past the raised cooldown (36) and a probe round
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		for s := 0; s < iters; s++ {
			for _, n := range []int{16, 3} {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(2*c.Rank() + i)
				}
				if err := ss[c.Rank()].Sync(context.Background(), x); err != nil {
					return err
				}
				for i, v := range x {
					if want := float32(i + 1); v != want {
						return fmt.Errorf("step %d n=%d element %d: %v, want %v (strategy %s)", s, n, i, v, want, ss[c.Rank()].Stats().CurrentStrategy)
					}
				}
			}
		}
		return nil
	}))
	if st := ss[0].Stats(); st.ProbeSteps == 0 {
		t.Errorf("no probe ran: %+v", st)
	}
	if n := func() int { _, n := ss[0].mon.secsPerByte(collective.Pipelined, sizeClass(16*4)); return n }() +
		func() int { _, n := ss[0].mon.secsPerByte(collective.Pipelined, sizeClass(3*4)); return n }(); n == 0 {
		t.Errorf("pipelined never ran")
	}
}
