package ddp_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/ddp"
)

// train is one rank's part (called from Group.Run): a device tensor, a
// pinned host buffer and an Arena of gradients, each closed on return,
// every error returned. README.md shows this function as it is
// (TestREADMETrain keeps the two the same).
func train(ctx context.Context, comm *collective.Comm, host []float32, sizes []int, steps int) (err error) {
	t, err := collective.NewTensor[float32](comm, len(host)) // lives on the rank's device
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, t.Close()) }()
	if err := t.Upload(host); err != nil { // or compute on it through vulkan.BufferHandle
		return err
	}
	if err := collective.AllReduceTensor(ctx, comm, t, collective.Mean, collective.Auto); err != nil {
		return err
	}

	hb, err := collective.NewHostBuffer[float32](len(host)) // pinned: zero-copy direct/pipelined
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, hb.Close()) }()
	copy(hb.Data, host)
	if err := collective.AllReduce(ctx, comm, hb.Data, collective.Sum); err != nil {
		return err
	}

	arena, err := ddp.NewArena[float32](sizes...) // pinned; the framework writes arena.View(i)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, arena.Close()) }()
	gs, err := ddp.New[float32](comm, ddp.Options{}) // reproducible, quiet defaults
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, gs.Close(ctx)) }()
	for range steps {
		// The backward pass writes the gradients into arena.View(i); with
		// separate slices per layer, gs.SyncAll(ctx, layerGrads) fuses
		// them into buckets instead.
		if err := gs.Sync(ctx, arena.Flat()); err != nil { // one zero-copy all-reduce per step
			return err
		}
	}
	return nil
}

// Device tensors, pinned host buffers and a training loop over an Arena,
// with every error checked and everything closed.
func Example_train() {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 2, Backend: "host"})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	err = g.Run(ctx, func(ctx context.Context, c *collective.Comm) error {
		return train(ctx, c, []float32{1, 2, 3}, []int{4, 2}, 3)
	})
	fmt.Println(err)
	// Output: <nil>
}
