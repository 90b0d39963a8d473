package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/vexchange"
)

// pairwise is the all-to-all exchange of v (algo.Rank.Pairwise). The
// ranges go from src where it names a buffer (data outside the call's
// buffer: a tensor), else from k's buffer, and the ranges received land in
// k's buffer at element at + their offset. The caller moves its own range.
func (c *Comm) pairwise(ctx context.Context, k *call, src backend.Region, at int, v vexchange.Ranges) error {
	k.xc.Src = src
	err := c.algo(k).Pairwise(ctx, c.g.all, v.Send, func(j int) (int, int) {
		lo, hi := v.Recv(j)
		return at + lo, at + hi
	})
	k.xc.Src = backend.Region{}
	return err
}

// pairwiseExchange moves chunk j of [0, n) to rank j, where it lands as
// chunk i of rank j's [n, 2n) (and chunk j of rank j's [0, n) arrives
// here as chunk j of [n, 2n)): the rank's own chunk copied by the device,
// then pairwise with chunks of m.
func (c *Comm) pairwiseExchange(ctx context.Context, k *call, n, m int) error {
	i := c.rank
	if err := c.rec(c.dev.Stream().Copy(k.region(n+i*m, n+i*m+m), k.region(i*m, i*m+m))); err != nil {
		return err
	}
	if err := c.pairwise(ctx, k, backend.Region{}, n, vexchange.Ranges{M: m}); err != nil {
		return err
	}
	return c.flush(ctx)
}
