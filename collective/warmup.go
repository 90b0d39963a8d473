package collective

import (
	"context"
	"fmt"
)

// warmupElems is the per-rank size of Warmup's all-reduces: more than a
// work group. Each runs twice, with every rank's share a whole number of
// 16-byte vectors and with a tail, so that the 16-byte kernels and the
// scalar ones are both created.
const warmupElems = 1024

// Warmup prepares the group for the calls to come, so that the first timed
// call does not pay for set-up (0.25-2.3 s on Vulkan): it measures Auto's
// cost model, and every local rank runs small Sum and Mean all-reduces of
// float32 and float64 host slices with every strategy the group can run, and
// of device tensors, which creates their kernels' pipelines and the Comms'
// pooled buffers. Pools grow again for larger calls (once, then they are
// reused), and the pipelines of Prod, Max and Min are created on their first
// use.
//
// It is a collective call: it drives every rank of this process itself
// (none may be in another call meanwhile), and in a group that spans
// processes every process calls it. A failure breaks the group, as a failed
// collective does.
func (g *Group) Warmup(ctx context.Context) error {
	if g == nil {
		return invalidArg("nil Group")
	}
	strategies := []Strategy{Direct, Pipelined, Ring, Tree, Hierarchical}
	if g.tr == nil {
		strategies = append(strategies, Host)
	}
	return g.Run(ctx, func(ctx context.Context, c *Comm) error {
		if _, err := g.measureOn(c); err != nil {
			return err
		}
		if err := warmupType[float32](ctx, c, strategies); err != nil {
			return err
		}
		return warmupType[float64](ctx, c, strategies)
	})
}

func warmupType[T Elem](ctx context.Context, c *Comm, strategies []Strategy) error {
	n := c.g.n
	buf := make([]T, (warmupElems+1)*n)
	for _, size := range []int{warmupElems * n, (warmupElems + 1) * n} {
		for _, s := range strategies {
			for _, op := range []Op{Sum, Mean} {
				if err := AllReduceWith(ctx, c, buf[:size], buf[:size], op, s); err != nil {
					return fmt.Errorf("warm-up all-reduce (%s, %s): %w", s, op, err)
				}
			}
		}
		t, err := NewTensor[T](c, size)
		if err != nil {
			return err
		}
		for _, op := range []Op{Sum, Mean} {
			if err = AllReduceTensor(ctx, c, t, op, Auto); err != nil {
				err = fmt.Errorf("warm-up tensor all-reduce (%s): %w", op, err)
				break
			}
		}
		if cerr := t.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
