package ddp_test

import (
	"context"
	"fmt"

	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/ddp"
)

// Two ranks keep their model's gradients in an Arena (one pinned
// allocation, a view per tensor) and average them with one Sync per step.
func Example() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 2, Backend: "host", Config: collective.DefaultConfig()})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	out := make([][]float32, 2)
	err = g.Run(ctx, func(ctx context.Context, c *collective.Comm) error {
		s, err := ddp.New[float32](c, ddp.Options{}) // reproducible, quiet defaults
		if err != nil {
			return err
		}
		defer s.Close(ctx)
		arena, err := ddp.NewArena[float32](2, 1) // a weight of 2 elements, a bias of 1
		if err != nil {
			return err
		}
		defer arena.Close()
		w, b := arena.View(0), arena.View(1)
		r := float32(c.Rank())
		w[0], w[1], b[0] = 1+r, 2+r, 10*r // this rank's backward pass
		if err := s.Sync(ctx, arena.Flat()); err != nil {
			return err
		}
		out[c.Rank()] = append([]float32(nil), arena.Flat()...)
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(out[0], out[1])
	// Output: [1.5 2.5 5] [1.5 2.5 5]
}
