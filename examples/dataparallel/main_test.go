package main

import (
	"context"
	"math"
	"os"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// TestRanksMatchOneRank: 4 data-parallel ranks reach the loss of one rank on
// the full batch (relative difference below 1e-4 at every epoch: the two
// differ only by float32 rounding of the gradient sums), on the host backend
// and, where available, on Vulkan. All replicas end bitwise identical.
func TestRanksMatchOneRank(t *testing.T) {
	bks := []string{"host"}
	if b, err := backend.Lookup("vulkan"); err == nil && b.Available() == nil {
		bks = append(bks, "vulkan")
	} else if os.Getenv("CI") != "" && err == nil {
		t.Fatalf("vulkan unavailable in CI: %v", b.Available())
	}
	const epochs = 15
	ref, _, err := Train(context.Background(), 1, epochs, "host")
	if err != nil {
		t.Fatal(err)
	}
	if !(ref[epochs-1] < ref[0]*0.8) {
		t.Fatalf("one rank does not learn: %v", ref)
	}
	for _, bk := range bks {
		got, params, err := Train(context.Background(), 4, epochs, bk)
		if err != nil {
			t.Fatal(err)
		}
		for e := range ref {
			if d := math.Abs(got[e]-ref[e]) / ref[e]; d > 1e-4 {
				t.Errorf("%s epoch %d: 4 ranks loss %v, 1 rank %v (rel. diff %.2g)", bk, e+1, got[e], ref[e], d)
			}
		}
		for r := 1; r < 4; r++ {
			for i := range params[r] {
				for j := range params[r][i] {
					if params[r][i][j] != params[0][i][j] {
						t.Fatalf("%s: rank %d's replica differs from rank 0's", bk, r)
					}
				}
			}
		}
		t.Logf("%s: loss %.5f -> %.5f (1 rank: %.5f -> %.5f)", bk, got[0], got[epochs-1], ref[0], ref[epochs-1])
	}
}

var _ = collective.Sum
