package collective

import (
	"context"
	"errors"
	"testing"
)

// TestBatch: on 3 ranks every rank sends to the next and receives from the
// previous (a ring shift of more than one slot), with an all-reduce added
// before the point-to-point operations on odd ranks and after them on even
// ones (so the ranks add them in different orders); the batch completes
// and every result is exact, twice with fresh batches. A bad peer fails that rank's batch; the group
// keeps working.
func TestBatch(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3, func(o *Options) { o.ChunkBytes = 256 })
		ctx := context.Background()
		const n = 1000
		got := make([][]float32, 3)
		sums := make([][]float64, 3)
		for round := 0; round < 2; round++ {
			noErrors(t, onRanks(g, func(c *Comm) error {
				r, N := c.Rank(), c.Size()
				send := make([]float32, n)
				for i := range send {
					send[i] = float32(r*10000 + i)
				}
				got[r] = make([]float32, n)
				sums[r] = []float64{float64(r + round)}
				b := c.Batch()
				if r%2 == 1 {
					BatchAllReduce(b, sums[r], Sum)
				}
				BatchSend(b, send, (r+1)%N)
				BatchRecv(b, got[r], (r+N-1)%N)
				if r%2 == 0 {
					BatchAllReduce(b, sums[r], Sum)
				}
				return b.Run(ctx)
			}))
			for r := 0; r < 3; r++ {
				from := (r + 2) % 3
				for i, v := range got[r] {
					if v != float32(from*10000+i) {
						t.Fatalf("%s round %d: rank %d element %d = %v, want %v", bk, round, r, i, v, float32(from*10000+i))
					}
				}
				if sums[r][0] != float64(3+3*round) {
					t.Fatalf("%s round %d: rank %d all-reduce = %v", bk, round, r, sums[r][0])
				}
			}
		}
		errs := onRanks(g, func(c *Comm) error {
			b := c.Batch()
			BatchSend(b, []float32{1}, 9)
			return b.Run(ctx)
		})
		for r, err := range errs {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s rank %d, peer 9: %v", bk, r, err)
			}
		}
		noErrors(t, onRanks(g, func(c *Comm) error { return AllReduce(ctx, c, make([]float32, 4), Sum) }))
	}
}
