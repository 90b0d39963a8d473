package ddp_test

import (
	"context"
	"fmt"

	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/ddp"
)

// Two ranks average a two-layer model's gradients while the backward pass
// still computes them: a Reducer holds the gradients in the order backward
// finishes them (the output layer's first), in buckets fixed at its
// creation; backward marks each gradient ready as it finishes it, a
// bucket's all-reduce starts once it and every bucket before it are ready,
// and Wait ends the step with every gradient the mean over the ranks.
func ExampleReducer() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 2, Backend: "host"})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	out := make([][][]float32, 2)
	var buckets [][2]int
	err = g.Run(ctx, func(ctx context.Context, c *collective.Comm) error {
		s, err := ddp.New[float32](c, ddp.Options{})
		if err != nil {
			return err
		}
		defer s.Close(ctx)
		w1, b1 := make([]float32, 3), make([]float32, 1) // the hidden layer's gradients
		w2, b2 := make([]float32, 2), make([]float32, 1) // the output layer's
		// At most 12 bytes a bucket: {b2, w2}, then {b1}, then {w1}.
		red, err := ddp.NewReducer(ctx, s, [][]float32{b2, w2, b1, w1},
			ddp.ReducerOptions{BucketBytes: 12, Names: []string{"b2", "w2", "b1", "w1"}})
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			buckets = red.Buckets()
		}
		r := float32(c.Rank())
		for step := range 2 {
			k := float32(step)
			// Backward, from the output layer: its gradients first, whose
			// bucket is reduced while the hidden layer's are computed.
			b2[0], w2[0], w2[1] = 1+r+k, 2*r, 4
			for _, name := range []string{"b2", "w2"} {
				if err := red.MarkReadyName(ctx, name); err != nil {
					return err
				}
			}
			b1[0], w1[0], w1[1], w1[2] = 10*r, k, r, -r
			for _, name := range []string{"b1", "w1"} {
				if err := red.MarkReadyName(ctx, name); err != nil {
					return err
				}
			}
			if err := red.Wait(ctx); err != nil {
				return err
			}
			// The optimizer would apply the averaged gradients here.
		}
		out[c.Rank()] = [][]float32{b2, w2, b1, w1}
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("buckets:", buckets)
	fmt.Println("rank 0:", out[0])
	fmt.Println("rank 1:", out[1])
	// Output:
	// buckets: [[0 2] [2 3] [3 4]]
	// rank 0: [[2.5] [1 4] [5] [1 0.5 -0.5]]
	// rank 1: [[2.5] [1 4] [5] [1 0.5 -0.5]]
}
