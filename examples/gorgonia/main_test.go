package main

import (
	"context"
	"log/slog"
	"math"
	"os"
	"sync/atomic"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

const testEpochs = 10

// backends are the backends the tests run on: host, and Vulkan where it is
// available (it must be on CI).
func backends(t *testing.T) []string {
	bks := []string{"host"}
	if b, err := backend.Lookup("vulkan"); err == nil && b.Available() == nil {
		bks = append(bks, "vulkan")
	} else if os.Getenv("CI") == "true" {
		if err == nil {
			err = b.Available()
		}
		t.Fatalf("vulkan unavailable in CI: %v", err)
	}
	return bks
}

// TestRanksMatchOneRank: 4 data-parallel ranks follow one rank on the full
// batch, each starting from rank 0's initial weights (its own draw differs:
// ddp.BroadcastParameters makes them the same). The per-row forward pass is the same either way and the loss is
// summed in float64, so the losses differ only through the float32
// gradients (a sum over 512 rows per rank, then a mean of 4, against one
// sum over 2048 rows): well below 1e-5 relative at every epoch. All
// replicas end bitwise identical.
func TestRanksMatchOneRank(t *testing.T) {
	ctx := context.Background()
	if a, b := initialWeights(1), initialWeights(2); math.Float32bits(a[0][0]) == math.Float32bits(b[0][0]) {
		t.Fatal("ranks draw the same initial weights: the broadcast is not tested")
	}
	ref, _, err := Train(ctx, 1, testEpochs, "host")
	if err != nil {
		t.Fatal(err)
	}
	if !(ref[testEpochs-1] < ref[0]*0.8) {
		t.Fatalf("one rank does not learn: %v", ref)
	}
	for _, bk := range backends(t) {
		got, params, err := Train(ctx, 4, testEpochs, bk)
		if err != nil {
			t.Fatalf("%s: %v", bk, err)
		}
		worst := 0.0
		for e := range ref {
			d := math.Abs(got[e]-ref[e]) / ref[e]
			worst = max(worst, d)
			if d > 1e-5 {
				t.Errorf("%s epoch %d: 4 ranks loss %v, 1 rank %v (rel. diff %.2g)", bk, e+1, got[e], ref[e], d)
			}
		}
		for r := 1; r < len(params); r++ {
			for i := range params[r] {
				for j := range params[r][i] {
					if math.Float32bits(params[r][i][j]) != math.Float32bits(params[0][i][j]) {
						t.Fatalf("%s: rank %d's replica differs from rank 0's (param %d[%d]: %v vs %v)",
							bk, r, i, j, params[r][i][j], params[0][i][j])
					}
				}
			}
		}
		t.Logf("%s: loss %.6f -> %.6f (1 rank: %.6f -> %.6f), max rel. diff %.2g",
			bk, got[0], got[testEpochs-1], ref[0], ref[testEpochs-1], worst)
	}
}

// TestReproducible: two runs give bitwise-identical loss curves and
// parameters (ddp's default strategies reduce in rank order).
func TestReproducible(t *testing.T) {
	ctx := context.Background()
	a, pa, err := Train(ctx, 4, testEpochs, "host")
	if err != nil {
		t.Fatal(err)
	}
	b, pb, err := Train(ctx, 4, testEpochs, "host")
	if err != nil {
		t.Fatal(err)
	}
	for e := range a {
		if math.Float64bits(a[e]) != math.Float64bits(b[e]) {
			t.Fatalf("epoch %d: loss %v, then %v", e+1, a[e], b[e])
		}
	}
	for i := range pa[0] {
		for j := range pa[0][i] {
			if math.Float32bits(pa[0][i][j]) != math.Float32bits(pb[0][i][j]) {
				t.Fatalf("param %d[%d]: %v, then %v", i, j, pa[0][i][j], pb[0][i][j])
			}
		}
	}
}

// counter is a slog.Handler that counts the records it is given.
type counter struct{ n *atomic.Int64 }

func (h counter) Enabled(context.Context, slog.Level) bool { return true }
func (h counter) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h counter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h counter) WithGroup(string) slog.Handler      { return h }

// TestQuiet: training logs nothing, through slog or the log package
// (which slog.SetDefault routes to the handler too): gocoll only logs when
// asked to, and gorgonia does not log outside its debug builds.
func TestQuiet(t *testing.T) {
	if os.Getenv("GOCOLL_DEBUG") != "" {
		t.Skip("GOCOLL_DEBUG is set: gocoll logs on purpose")
	}
	n := &atomic.Int64{}
	old := slog.Default()
	slog.SetDefault(slog.New(counter{n}))
	defer slog.SetDefault(old)
	if _, _, err := Train(context.Background(), 4, 3, ""); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("training logged %d records", got)
	}
}
