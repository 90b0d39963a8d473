package ddp

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/collective"
)

// stepGrads returns rank r's gradients at step k (a model of two tensors).
func stepGrads(r, k int) [][]float32 {
	g := [][]float32{make([]float32, 300), make([]float32, 57)}
	for i, t := range g {
		for j := range t {
			t[j] = float32(math.Sin(float64(j*(r+2)+k*31+i*7))) * float32(1+j%5)
		}
	}
	return g
}

// runSteps runs steps [from, to) on every rank (SyncAll on even steps,
// Sync of the concatenation on odd ones, the first of each pair with
// SyncAsync) and returns each step's averaged gradients by rank, after
// waiting for the last SyncAsync step if wait.
func runSteps(t *testing.T, g *collective.Group, ss []*Sync[float32], from, to int, wait bool) [][][][]float32 {
	t.Helper()
	out := make([][][][]float32, to-from)
	for k := from; k < to; k++ {
		res := make([][][]float32, g.Size())
		noErrors(t, onRanks(g, func(c *collective.Comm) error {
			r := c.Rank()
			grads := stepGrads(r, k)
			res[r] = grads
			if k%2 == 0 {
				return ss[r].SyncAll(context.Background(), grads)
			}
			flat := append(append([]float32(nil), grads[0]...), grads[1]...)
			res[r] = [][]float32{flat}
			if k%4 == 1 {
				ss[r].SyncAsync(context.Background(), flat) // State and the next step wait for it
				return nil
			}
			return ss[r].Sync(context.Background(), flat)
		}))
		out[k-from] = res
	}
	if wait {
		noErrors(t, onRanks(g, func(c *collective.Comm) error { return ss[c.Rank()].Wait(context.Background()) }))
	}
	return out
}

// TestStateRestore: a job that saves every rank's State after 6 of 10
// steps (through encoding/gob), stops, and resumes in a new group with new
// Syncs restored from it gives bitwise the gradients of the uninterrupted
// job at every later step, ends with the same residuals, and counts the
// same: with top-k and error feedback (whose residual carries over) and
// dense.
func TestStateRestore(t *testing.T) {
	const ranks, steps, cut = 3, 10, 6 // step 5, a SyncAsync, is under way at the cut
	for _, o := range []Options{{TopK: 0.1}, {}} {
		g := openGroup(t, "host", ranks)
		whole := newSyncs[float32](t, g, o)
		want := runSteps(t, g, whole, 0, steps, true)

		g1 := openGroup(t, "host", ranks)
		first := newSyncs[float32](t, g1, o)
		runSteps(t, g1, first, 0, cut, false) // State waits for the last step
		saved := make([][]byte, ranks)
		for r, s := range first {
			st, err := s.State(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if o.TopK > 0 && len(st.Residual) != 357 {
				t.Fatalf("%+v rank %d: a residual of %d elements saved, want 357", o, r, len(st.Residual))
			}
			var b bytes.Buffer
			if err := gob.NewEncoder(&b).Encode(st); err != nil {
				t.Fatal(err)
			}
			saved[r] = b.Bytes()
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}

		g2 := openGroup(t, "host", ranks)
		resumed := newSyncs[float32](t, g2, o)
		for r, s := range resumed {
			var st State[float32]
			if err := gob.NewDecoder(bytes.NewReader(saved[r])).Decode(&st); err != nil {
				t.Fatal(err)
			}
			if err := s.Restore(context.Background(), st); err != nil {
				t.Fatalf("rank %d: Restore: %v", r, err)
			}
		}
		got := runSteps(t, g2, resumed, cut, steps, true)
		for k := cut; k < steps; k++ {
			for r := range ranks {
				for i := range want[k][r] {
					if !bitsEqual(got[k-cut][r][i], want[k][r][i]) {
						t.Fatalf("%+v step %d rank %d tensor %d: the resumed job differs from the uninterrupted one", o, k, r, i)
					}
				}
			}
		}
		for r := range ranks {
			if !bitsEqual(resumed[r].Residual(), whole[r].Residual()) {
				t.Errorf("%+v rank %d: residuals differ at the end", o, r)
			}
			// Auto picks each all-reduce's strategy from the group's
			// measured cost model, so the three groups may pick different
			// (rank-order, bitwise equal) strategies: the counts of calls
			// carry over, not which strategy ran them.
			a, b := resumed[r].Stats(), whole[r].Stats()
			if a.Steps != steps || a.Steps != b.Steps || a.Operations != b.Operations || a.BytesMoved != b.BytesMoved ||
				total(a.ByStrategy) != total(b.ByStrategy) {
				t.Errorf("%+v rank %d: resumed stats %+v, uninterrupted %+v", o, r, a, b)
			}
		}
	}
}

// TestRestoreRefusals: a residual restored into a Sync that keeps none is
// refused; one that does not fit the next step's gradients fails that step
// on every rank, naming the rank (and the next, until a fitting state is
// restored); negative counters and a closed Sync are refused. Every error
// names the call.
func TestRestoreRefusals(t *testing.T) {
	ctx := context.Background()
	g := openGroup(t, "host", 2)
	dense := newSyncs[float32](t, g, Options{})
	err := dense[0].Restore(ctx, State[float32]{Residual: make([]float32, 3)})
	if !errors.Is(err, collective.ErrInvalidArgument) || !strings.Contains(errString(err), "ddp.Sync.Restore: a residual of 3 elements, but this Sync keeps none") {
		t.Errorf("residual into a dense Sync: %v", err)
	}
	nofb := newSyncs[float32](t, g, Options{TopK: 0.5, NoErrorFeedback: true})
	if err := nofb[0].Restore(ctx, State[float32]{Residual: make([]float32, 3)}); !errors.Is(err, collective.ErrInvalidArgument) {
		t.Errorf("residual into a Sync without error feedback: %v", err)
	}
	err = dense[1].Restore(ctx, State[float32]{Stats: Stats{Steps: -1}})
	if !errors.Is(err, collective.ErrInvalidArgument) || !strings.Contains(errString(err), "ddp.Sync.Restore: negative counters") {
		t.Errorf("negative counters: %v", err)
	}

	ss := newSyncs[float32](t, g, Options{TopK: 0.5})
	if err := ss[1].Restore(ctx, State[float32]{Residual: make([]float32, 10)}); err != nil {
		t.Fatal(err)
	}
	step := func() []error {
		return onRanks(g, func(c *collective.Comm) error {
			return ss[c.Rank()].SyncAll(ctx, fillParams([]int{6, 10}, c.Rank()))
		})
	}
	for range 2 {
		errs := step()
		for r, msg := range []string{
			"ddp.Sync.SyncAll: the residual restored on rank 1 does not fit the step's gradients",
			"ddp.Sync.SyncAll: the residual restored on rank 1 has 10 elements, the step's gradients 16",
		} {
			if !errors.Is(errs[r], collective.ErrInvalidArgument) || !strings.HasPrefix(errString(errs[r]), msg) {
				t.Errorf("rank %d: %v, want %q", r, errs[r], msg)
			}
		}
	}
	if err := ss[1].Restore(ctx, State[float32]{Residual: make([]float32, 16)}); err != nil {
		t.Fatal(err)
	}
	noErrors(t, step())
	if st := ss[0].Stats(); st.Steps != 1 {
		t.Errorf("%d steps counted, want 1 (the refused ones are not steps)", st.Steps)
	}

	if err := ss[0].Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ss[0].Restore(ctx, State[float32]{}); !errors.Is(err, ErrClosed) || !strings.HasPrefix(errString(err), "ddp.Sync.Restore") {
		t.Errorf("Restore after Close: %v", err)
	}
	if st, err := ss[0].State(ctx); err != nil || st.Stats.Steps != 1 || len(st.Residual) != 16 {
		t.Errorf("State after Close: %+v, %v", st, err)
	}
}

// total is the sum of a ByStrategy's counts.
func total(m map[collective.Strategy]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}
