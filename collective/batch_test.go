package collective

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBatch: on 3 ranks every rank sends to the next and receives from the
// previous (a ring shift of more than one slot), with an all-reduce added
// before the point-to-point operations on odd ranks and after them on even
// ones (so the ranks add them in different orders); the batch completes
// and every result is exact, twice with fresh batches. A bad peer fails that rank's batch and breaks
// the group naming the refused send: every rank's batch fails with ErrInvalidArgument, and so does
// the next call.
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
		for r, err := range onRanks(g, func(c *Comm) error { return AllReduce(ctx, c, make([]float32, 4), Sum) }) {
			var be *BrokenError
			if !errors.As(err, &be) || be.Op != "SendAsync" || !be.P2P || !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s rank %d: AllReduce after a refused BatchSend: %v, want the group broken by a SendAsync", bk, r, err)
			}
		}
	}
}

// TestBatchBroadcast: a batch's Broadcast (after an all-reduce) gives every
// rank the root's data, for every root, on 1 to 4 ranks: exact int32
// values.
func TestBatchBroadcast(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for ranks := 1; ranks <= 4; ranks++ {
			g := openGroup(t, bk, ranks)
			const n = 1001
			for root := range ranks {
				bufs := make([][]int32, ranks)
				sums := make([][]int32, ranks)
				noErrors(t, onRanks(g, func(c *Comm) error {
					r := c.Rank()
					bufs[r] = make([]int32, n)
					for i := range bufs[r] {
						bufs[r][i] = int32(r*1000003 + i)
					}
					sums[r] = []int32{int32(r)}
					b := c.Batch()
					BatchAllReduce(b, sums[r], Sum)
					BatchBroadcast(b, bufs[r], root)
					return b.Run(context.Background())
				}))
				for r := range ranks {
					if want := int32(ranks * (ranks - 1) / 2); sums[r][0] != want {
						t.Fatalf("%s %d ranks root %d: rank %d all-reduce %d, want %d", bk, ranks, root, r, sums[r][0], want)
					}
					for i, v := range bufs[r] {
						if want := int32(root*1000003 + i); v != want {
							t.Fatalf("%s %d ranks root %d: rank %d element %d = %d, want %d", bk, ranks, root, r, i, v, want)
						}
					}
				}
			}
		}
	}
}

// A Batch.Run whose ctx ends (a receive no rank sends, an all-reduce the
// other rank skips) returns the failed operation's *Error, naming the rank
// and the operation with its number: ErrTimeout and
// context.DeadlineExceeded after a deadline, context.Canceled and not
// ErrTimeout after a cancellation.
func TestBatchRunErrorTyped(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for _, cancelled := range []bool{false, true} {
			g := openGroup(t, bk, 2)
			c := g.Comm(0)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			if cancelled {
				ctx, cancel = context.WithCancel(context.Background())
				time.AfterFunc(100*time.Millisecond, cancel)
			}
			b := c.Batch()
			BatchRecv(b, make([]float32, 3), 1)
			BatchAllReduce(b, []float32{1}, Sum)
			err := b.Run(ctx)
			cancel()
			var e *Error
			if !errors.As(err, &e) || e.Rank != 0 || e.Op != "RecvAsync" || e.Seq != 1 || !e.P2P {
				t.Errorf("%s, cancelled %v: %v, want an *Error of rank 0's RecvAsync, point-to-point call #1", bk, cancelled, err)
			}
			if cancelled && (!errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout)) {
				t.Errorf("%s: cancelled Run: %v, want context.Canceled and not ErrTimeout", bk, err)
			}
			if !cancelled && (!errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded)) {
				t.Errorf("%s: Run past its deadline: %v, want ErrTimeout and context.DeadlineExceeded", bk, err)
			}
		}
	}
}
