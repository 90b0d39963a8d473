package collective_test

import (
	"context"
	"fmt"

	"github.com/gocoll/gocoll/collective"
)

// Sharded data parallelism on device tensors: each of 2 ranks
// reduce-scatters its gradients (rank r keeps the sum of chunk r), would
// update its shard of the weights there, and all-gathers the shards back.
// The data stays in the ranks' device tensors between the calls.
func ExampleReduceScatterTensor() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 2, Backend: "host", Config: collective.DefaultConfig()})
	if err != nil {
		panic(err)
	}
	defer g.Close()

	results := make([][]float32, g.Size())
	err = g.Run(ctx, func(ctx context.Context, c *collective.Comm) error {
		r := float32(c.Rank())
		grads, err := collective.NewTensor[float32](c, 4)
		if err != nil {
			return err
		}
		defer grads.Close()
		shard, err := collective.NewTensor[float32](c, 2)
		if err != nil {
			return err
		}
		defer shard.Close()
		if err := grads.Upload([]float32{1 + r, 2 + r, 3 + r, 4 + r}); err != nil {
			return err
		}
		if err := collective.ReduceScatterTensor(ctx, c, grads, shard, collective.Sum); err != nil {
			return err
		}
		// grads now serves as the gathered result.
		if err := collective.AllGatherTensor(ctx, c, shard, grads); err != nil {
			return err
		}
		results[c.Rank()] = make([]float32, 4)
		return grads.Download(results[c.Rank()])
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(results[0], results[1])
	// Output: [3 5 7 9] [3 5 7 9]
}

// Rank 0 gathers one value from every rank's tensor; recv is only needed
// on the root.
func ExampleGatherTensor() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 3, Backend: "host", Config: collective.DefaultConfig()})
	if err != nil {
		panic(err)
	}
	defer g.Close()

	var gathered []int32
	err = g.Run(ctx, func(ctx context.Context, c *collective.Comm) error {
		send, err := collective.NewTensor[int32](c, 1)
		if err != nil {
			return err
		}
		defer send.Close()
		if err := send.Upload([]int32{int32(10 * (c.Rank() + 1))}); err != nil {
			return err
		}
		var recv *collective.Tensor[int32]
		if c.Rank() == 0 {
			if recv, err = collective.NewTensor[int32](c, c.Size()); err != nil {
				return err
			}
			defer recv.Close()
		}
		if err := collective.GatherTensor(ctx, c, send, recv, 0); err != nil {
			return err
		}
		if c.Rank() == 0 {
			gathered = make([]int32, c.Size())
			return recv.Download(gathered)
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(gathered)
	// Output: [10 20 30]
}
