package collective_test

import (
	"context"
	"errors"
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

// Group.Run runs one function per rank; the first error aborts the group, so
// the other ranks return promptly instead of waiting for their timeout.
func ExampleGroup_Run() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 3, Backend: "host", Config: collective.DefaultConfig()})
	if err != nil {
		panic(err)
	}
	defer g.Close()

	errBatch := errors.New("rank 2: no batch")
	err = g.Run(ctx, func(ctx context.Context, c *collective.Comm) error {
		if c.Rank() == 2 {
			return errBatch
		}
		return collective.AllReduce(ctx, c, []float32{1, 2, 3}, collective.Sum)
	})
	fmt.Println(errors.Is(err, errBatch))
	// Every later call fails at once, naming the cause.
	err = collective.Barrier(ctx, g.Comm(0))
	fmt.Println(errors.Is(err, collective.ErrGroupBroken), errors.Is(err, errBatch))
	// Output:
	// true
	// true true
}

// A Comm is an ordered stream: an asynchronous all-reduce and a synchronous
// one started after it run in that order on every rank.
func ExampleAllReduceAsync() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 2, Backend: "host", Config: collective.DefaultConfig()})
	if err != nil {
		panic(err)
	}
	defer g.Close()

	a := [][]float64{{1}, {2}}
	b := [][]float64{{10}, {20}}
	err = g.Run(ctx, func(ctx context.Context, c *collective.Comm) error {
		r := c.Rank()
		w := collective.AllReduceAsync(ctx, c, a[r], collective.Sum)
		if err := collective.AllReduce(ctx, c, b[r], collective.Max); err != nil {
			return err
		}
		return w.Wait(ctx) // a[r] may be read only after this
	})
	fmt.Println(err, a[0], b[1])
	// Output: <nil> [3] [20]
}

// Warmup builds the kernels, pools and cost model before the first timed
// call (on Vulkan the first call would otherwise pay up to seconds of
// pipeline creation).
func ExampleGroup_Warmup() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 2, Backend: "host", Config: collective.DefaultConfig()})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	if err := g.Warmup(ctx); err != nil {
		panic(err)
	}
	err = g.Run(ctx, func(ctx context.Context, c *collective.Comm) error {
		x := []float64{float64(c.Rank() + 1)}
		if err := collective.AllReduce(ctx, c, x, collective.Sum); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println(x[0])
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output: 3
}

// AllToAll transposes the ranks' chunks: chunk j of rank i's send becomes
// chunk i of rank j's recv.
func ExampleAllToAll() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 3, Backend: "host", Config: collective.DefaultConfig()})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	recv := make([][]float32, 3)
	err = g.Run(ctx, func(ctx context.Context, c *collective.Comm) error {
		r := float32(c.Rank())
		send := []float32{10*r + 0, 10*r + 1, 10*r + 2} // chunk j (one element) goes to rank j
		recv[c.Rank()] = make([]float32, 3)
		return collective.AllToAll(ctx, c, send, recv[c.Rank()])
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(recv[0], recv[1], recv[2])
	// Output: [0 10 20] [1 11 21] [2 12 22]
}

// Split makes sub-groups: here the even and the odd ranks of 4, each of
// which then all-reduces among its own members.
func ExampleComm_Split() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 4, Backend: "host", Config: collective.DefaultConfig()})
	if err != nil {
		panic(err)
	}
	defer g.Close() // closes the sub-groups too
	sums := make([]float32, 4)
	err = g.Run(ctx, func(ctx context.Context, c *collective.Comm) error {
		sub, err := c.Split(ctx, c.Rank()%2, c.Rank())
		if err != nil {
			return err
		}
		x := []float32{float32(c.Rank())}
		if err := collective.AllReduce(ctx, sub, x, collective.Sum); err != nil {
			return err
		}
		sums[c.Rank()] = x[0]
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(sums)
	// Output: [2 4 2 4]
}
