package collective_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/gocoll/gocoll/collective"
)

// Four ranks average their gradients: each rank calls AllReduce from its own
// goroutine, as with NCCL, and every rank ends with the same result.
func Example() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{
		Ranks:   4,
		Backend: "host", // omit to pick Metal, Vulkan or host automatically
		Config:  collective.DefaultConfig(),
	})
	if err != nil {
		panic(err)
	}
	defer g.Close()

	grads := make([][]float32, g.Size())
	var wg sync.WaitGroup
	for r := 0; r < g.Size(); r++ {
		grads[r] = []float32{float32(r), 1, 2 * float32(r)}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			if err := collective.AllReduce(ctx, g.Comm(r), grads[r], collective.Mean); err != nil {
				panic(err)
			}
		}(r)
	}
	wg.Wait()
	fmt.Println(grads[0], grads[3])
	// Output: [1.5 1 3] [1.5 1 3]
}
