package main

import (
	"context"
	"math"
	"os"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// TestRanksMatchOneRank: 4 data-parallel ranks reach the loss of one rank on
// the full batch (relative difference below 1e-5 at every epoch: the two
// differ only by float32 rounding of the gradient sums), on the host backend
// and, where available, on Vulkan, with the gradients averaged during
// backward (a Reducer) and after it (a Sync). All replicas end bitwise
// identical, and the two ways give bitwise the same model.
func TestRanksMatchOneRank(t *testing.T) {
	bks := []string{"host"}
	if b, err := backend.Lookup("vulkan"); err == nil && b.Available() == nil {
		bks = append(bks, "vulkan")
	} else if os.Getenv("CI") != "" && err == nil {
		t.Fatalf("vulkan unavailable in CI: %v", b.Available())
	}
	const epochs = 15
	ref, _, err := Train(context.Background(), 1, epochs, "host", false)
	if err != nil {
		t.Fatal(err)
	}
	if !(ref[epochs-1] < ref[0]*0.8) {
		t.Fatalf("one rank does not learn: %v", ref)
	}
	for _, bk := range bks {
		var after [][][]float32
		for _, overlap := range []bool{false, true} {
			got, params, err := Train(context.Background(), 4, epochs, bk, overlap)
			if err != nil {
				t.Fatal(err)
			}
			for e := range ref {
				if d := math.Abs(got[e]-ref[e]) / ref[e]; d > 1e-5 {
					t.Errorf("%s overlap=%v epoch %d: 4 ranks loss %v, 1 rank %v (rel. diff %.2g)", bk, overlap, e+1, got[e], ref[e], d)
				}
			}
			for r := 1; r < 4; r++ {
				if !sameBits(params[r], params[0]) {
					t.Fatalf("%s overlap=%v: rank %d's replica differs from rank 0's", bk, overlap, r)
				}
			}
			if !overlap {
				after = params
			} else if !sameBits(params[0], after[0]) {
				t.Errorf("%s: the model averaged during backward differs from the one averaged after it", bk)
			}
			t.Logf("%s overlap=%v: loss %.5f -> %.5f (1 rank: %.5f -> %.5f)", bk, overlap, got[0], got[epochs-1], ref[0], ref[epochs-1])
		}
	}
}

func sameBits(a, b [][]float32) bool {
	for i := range a {
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				return false
			}
		}
	}
	return true
}
