package ddp

import (
	"context"
	"errors"
	"testing"

	"github.com/gocoll/gocoll/collective"
)

// wantShapeError checks that every rank failed with a *ShapeError matching
// collective.ErrMismatch whose message is want.
func wantShapeError(t *testing.T, what string, errs []error, want string) {
	t.Helper()
	for r, err := range errs {
		var se *ShapeError
		if !errors.Is(err, collective.ErrMismatch) || !errors.As(err, &se) {
			t.Fatalf("%s: rank %d: %v, want a *ShapeError matching collective.ErrMismatch", what, r, err)
		}
		if err.Error() != want {
			t.Errorf("%s: rank %d:\n got %q\nwant %q", what, r, err, want)
		}
	}
}

// TestSyncShapes: SyncAll with lengths [6 10] on rank 0 and [10 6] on
// rank 1 (which reduced without an error before: one fused bucket of 16)
// fails both ranks with a ShapeError naming the call and the lengths, and
// reduces nothing; so do different numbers of tensors, and different
// lengths in Sync and SyncAsync (top-k included, whose exchange of k
// indices went through and indexed past the shorter gradient). The same
// Syncs then step on, and the result is the mean.
func TestSyncShapes(t *testing.T) {
	ctx := context.Background()
	for _, o := range []Options{{}, {TopK: 0.5}} {
		g := openGroup(t, "host", 2)
		ss := newSyncs[float32](t, g, o)
		model := func(r int, sizes ...int) [][]float32 { return fillParams(sizes, r) }
		for _, tc := range []struct {
			name  string
			sizes [2][]int
			want  string
		}{
			{"swapped", [2][]int{{6, 10}, {10, 6}},
				"ddp.Sync.SyncAll: shapes differ across ranks: tensor 0 has 6 elements on rank 0 and 10 on rank 1 (2 of 2 tensors differ)"},
			{"count", [2][]int{{6, 10, 3}, {6, 10}},
				"ddp.Sync.SyncAll: shapes differ across ranks: rank 0 passed 3 tensors and rank 1 2"},
			{"empty", [2][]int{{}, {4}},
				"ddp.Sync.SyncAll: shapes differ across ranks: rank 0 passed 0 tensors and rank 1 1"},
		} {
			data := [2][][]float32{model(0, tc.sizes[0]...), model(1, tc.sizes[1]...)}
			errs := onRanks(g, func(c *collective.Comm) error { return ss[c.Rank()].SyncAll(ctx, data[c.Rank()]) })
			wantShapeError(t, tc.name, errs, tc.want)
			for r := range data {
				for i, p := range data[r] {
					if !bitsEqual(p, model(r, tc.sizes[r]...)[i]) {
						t.Errorf("%s: rank %d tensor %d was written", tc.name, r, i)
					}
				}
			}
		}
		n := [2]int{100, 101}
		errs := onRanks(g, func(c *collective.Comm) error {
			return ss[c.Rank()].Sync(ctx, model(c.Rank(), n[c.Rank()])[0])
		})
		wantShapeError(t, "Sync", errs, "ddp.Sync.Sync: shapes differ across ranks: tensor 0 has 100 elements on rank 0 and 101 on rank 1 (1 of 1 tensors differ)")
		errs = onRanks(g, func(c *collective.Comm) error {
			return ss[c.Rank()].SyncAsync(ctx, model(c.Rank(), n[c.Rank()])[0]).Wait(ctx)
		})
		wantShapeError(t, "SyncAsync", errs, "ddp.Sync.SyncAsync: shapes differ across ranks: tensor 0 has 100 elements on rank 0 and 101 on rank 1 (1 of 1 tensors differ)")
		// Wait reports the failed SyncAsync steps (checked above) and
		// forgets them.
		_ = onRanks(g, func(c *collective.Comm) error { return ss[c.Rank()].Wait(ctx) })

		// Matching shapes step on; the dense result is the mean.
		data := [2][][]float32{model(0, 6, 10), model(1, 6, 10)}
		noErrors(t, onRanks(g, func(c *collective.Comm) error { return ss[c.Rank()].SyncAll(ctx, data[c.Rank()]) }))
		if o.TopK == 0 {
			for i, p := range data[0] {
				for j := range p {
					want := (model(0, 6, 10)[i][j] + model(1, 6, 10)[i][j]) / 2
					if p[j] != want || data[1][i][j] != want {
						t.Fatalf("tensor %d element %d: %v and %v, want %v", i, j, p[j], data[1][i][j], want)
					}
				}
			}
		}
		if st := ss[0].Stats(); st.Steps != 1 {
			t.Errorf("%+v: %d steps counted, want 1 (the failed ones are not steps)", o, st.Steps)
		}
	}
}

// callsSoFar returns how many collectives rank 0 and rank 1 of g have run
// (the sequence number of a mismatched call, minus one; the mismatch moves
// nothing).
func callsSoFar(t *testing.T, g *collective.Group) uint64 {
	t.Helper()
	errs := onRanks(g, func(c *collective.Comm) error {
		return collective.AllReduce(context.Background(), c, make([]float32, 1+c.Rank()), collective.Sum)
	})
	var me *collective.MismatchError
	if !errors.As(errs[0], &me) {
		t.Fatalf("mismatched all-reduce: %v", errs[0])
	}
	return me.Seq - 1
}

// TestSyncShapesCheckedOnChange: the shapes are agreed on at the first step
// and when they change, not at every step: 10 steps of one model run 10
// all-reduces and one check; changing a length runs one more check.
func TestSyncShapesCheckedOnChange(t *testing.T) {
	ctx := context.Background()
	g := openGroup(t, "host", 2)
	ss := newSyncs[float32](t, g, Options{})
	steps := func(k int, sizes ...int) {
		t.Helper()
		for range k {
			noErrors(t, onRanks(g, func(c *collective.Comm) error {
				return ss[c.Rank()].SyncAll(ctx, fillParams(sizes, c.Rank()))
			}))
		}
	}
	before := callsSoFar(t, g)
	steps(10, 6, 10)
	if got := callsSoFar(t, g) - before - 1; got != 11 {
		t.Errorf("10 steps of one shape ran %d collectives, want 11 (10 + one check)", got)
	}
	before = callsSoFar(t, g)
	steps(3, 6, 11)
	if got := callsSoFar(t, g) - before - 1; got != 4 {
		t.Errorf("3 steps of a new shape ran %d collectives, want 4 (3 + one check)", got)
	}
}

// TestSyncAllAllocs: a steady-state SyncAll (fused and in-place tensors,
// its shapes checked once) allocates nothing.
func TestSyncAllAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	g := openGroup(t, "host", 2)
	ss := newSyncs[float32](t, g, Options{FusionBytes: 8 << 10})
	data := [][][]float32{fillParams([]int{100, 4096, 7}, 0), fillParams([]int{100, 4096, 7}, 1)}
	if allocs := allocsPerStep(t, func(r int) error { return ss[r].SyncAll(context.Background(), data[r]) }); allocs != 0 {
		t.Errorf("%v allocations per SyncAll, want 0", allocs)
	}
}
