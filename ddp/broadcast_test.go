package ddp

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/collective"
)

// fillParams returns tensors of the given lengths whose values depend on
// rank r (so that a broadcast is visible).
func fillParams(sizes []int, r int) [][]float32 {
	out := make([][]float32, len(sizes))
	for i, n := range sizes {
		out[i] = make([]float32, n)
		for j := range out[i] {
			out[i][j] = float32(r*1000+i) + float32(j%97)/7
		}
	}
	return out
}

// TestBroadcastParameters: every rank ends with root's tensors, bit for
// bit, whatever their sizes (empty, fused into buckets, larger than a
// bucket), for float32, Float16 and an Arena.
func TestBroadcastParameters(t *testing.T) {
	sizes := []int{3, 0, 1000, 1<<20 + 5, 7, 2000}
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3)
		const root = 1
		params := make([][][]float32, 3)
		halves := make([][][]collective.Float16, 3)
		for r := range params {
			params[r] = fillParams(sizes, r)
			for _, p := range params[r][:3] {
				h := make([]collective.Float16, len(p))
				for j, v := range p {
					h[j] = collective.Float16From(v)
				}
				halves[r] = append(halves[r], h)
			}
		}
		want := fillParams(sizes, root)
		wantHalf := make([][]collective.Float16, 3)
		for i := range wantHalf {
			wantHalf[i] = append([]collective.Float16(nil), halves[2][i]...)
		}
		arenas := make([]*Arena[float64], 3)
		for r := range arenas {
			a, err := NewArena[float64](5, 9)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			for j := range a.Flat() {
				a.Flat()[j] = float64(r*100 + j)
			}
			arenas[r] = a
		}
		noErrors(t, onRanks(g, func(c *collective.Comm) error {
			ctx := context.Background()
			if err := BroadcastParameters(ctx, c, root, params[c.Rank()]); err != nil {
				return err
			}
			if err := BroadcastParameters(ctx, c, 2, halves[c.Rank()]); err != nil {
				return err
			}
			return BroadcastParameters(ctx, c, 0, [][]float64{arenas[c.Rank()].Flat()})
		}))
		for r := range params {
			for i := range sizes {
				if !bitsEqual(params[r][i], want[i]) {
					t.Fatalf("%s rank %d tensor %d (%d elements): not root's", bk, r, i, sizes[i])
				}
			}
			for i := range halves[r] {
				for j := range halves[r][i] {
					if halves[r][i][j] != wantHalf[i][j] {
						t.Fatalf("%s rank %d Float16 tensor %d element %d: %v, root 2 has %v", bk, r, i, j, halves[r][i][j], wantHalf[i][j])
					}
				}
			}
			for j, v := range arenas[r].Flat() {
				if v != float64(j) {
					t.Fatalf("%s rank %d arena element %d: %v, want rank 0's %v", bk, r, j, v, float64(j))
				}
			}
		}
	}
}

// TestBroadcastParametersShapes: lengths [6 10] on rank 0 and [10 6] on
// rank 1 (the same total) fail both ranks with the same ShapeError naming
// the call, the tensor and both lengths, before anything moved; so do
// different numbers of tensors; the group stays usable.
func TestBroadcastParametersShapes(t *testing.T) {
	g := openGroup(t, "host", 3)
	cases := []struct {
		name  string
		sizes [3][]int
		want  string
	}{
		{"swapped", [3][]int{{6, 10}, {10, 6}, {6, 10}},
			"ddp.BroadcastParameters: shapes differ across ranks: tensor 0 has 6 elements on rank 0 and 10 on rank 1 (2 of 2 tensors differ)"},
		{"count", [3][]int{{6, 10}, {6, 10}, {6, 10, 1}},
			"ddp.BroadcastParameters: shapes differ across ranks: rank 0 passed 2 tensors and rank 2 3"},
		{"two ranks", [3][]int{{6}, {7}, {8}},
			"ddp.BroadcastParameters: shapes differ across ranks: tensor 0 has 6 elements on rank 0 and 7 on rank 1 (1 of 1 tensors differ); ranks [1 2] differ from rank 0"},
	}
	for _, tc := range cases {
		params := make([][][]float32, 3)
		for r := range params {
			params[r] = fillParams(tc.sizes[r], r)
		}
		errs := onRanks(g, func(c *collective.Comm) error {
			return BroadcastParameters(context.Background(), c, 0, params[c.Rank()])
		})
		for r, err := range errs {
			var se *ShapeError
			if !errors.Is(err, collective.ErrMismatch) || !errors.As(err, &se) {
				t.Fatalf("%s: rank %d: %v, want a *ShapeError matching collective.ErrMismatch", tc.name, r, err)
			}
			if err.Error() != tc.want {
				t.Errorf("%s: rank %d:\n got %q\nwant %q", tc.name, r, err, tc.want)
			}
			for i, p := range params[r] {
				if !bitsEqual(p, fillParams(tc.sizes[r], r)[i]) {
					t.Errorf("%s: rank %d tensor %d was written", tc.name, r, i)
				}
			}
		}
	}
	// The group is still usable.
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		return BroadcastParameters(context.Background(), c, 2, fillParams([]int{4, 5}, c.Rank()))
	}))
}

// TestBroadcastParametersBadRoot: different roots fail every rank with
// collective.ErrMismatch, a root outside the group with
// collective.ErrInvalidArgument, a nil Comm at once; each names the call.
func TestBroadcastParametersBadRoot(t *testing.T) {
	g := openGroup(t, "host", 2)
	for _, tc := range []struct {
		roots [2]int
		want  error
		msg   string
	}{
		{[2]int{0, 1}, collective.ErrMismatch, "ranks name different roots (0 and 1)"},
		{[2]int{2, 2}, collective.ErrInvalidArgument, "root 2 is not a rank of the group of 2"},
		{[2]int{-1, -1}, collective.ErrInvalidArgument, "root -1 is not a rank"},
		{[2]int{-1, 0}, collective.ErrMismatch, "ranks name different roots (-1 and 0)"},
	} {
		errs := onRanks(g, func(c *collective.Comm) error {
			return BroadcastParameters(context.Background(), c, tc.roots[c.Rank()], fillParams([]int{3}, c.Rank()))
		})
		for r, err := range errs {
			if !errors.Is(err, tc.want) || !strings.HasPrefix(errString(err), "ddp.BroadcastParameters: ") || !strings.Contains(errString(err), tc.msg) {
				t.Errorf("roots %v: rank %d: %v, want %v with %q", tc.roots, r, err, tc.want, tc.msg)
			}
		}
	}
	err := BroadcastParameters[float32](context.Background(), nil, 0, nil)
	if !errors.Is(err, collective.ErrInvalidArgument) || !strings.Contains(errString(err), "BroadcastParameters") {
		t.Errorf("nil Comm: %v", err)
	}
}
