package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
)

// vCounts are the ranges of a V exchange: send's [sdispls[j],
// +scounts[j]) go to rank j, and rank j's land at [rdispls[j],
// +rcounts[j]) of the receive space. Without scounts, the
// ranges are the equal chunks of m elements: chunk j goes to rank j, and
// rank j's lands as chunk j.
type vCounts struct {
	scounts, sdispls []int
	rcounts, rdispls []int
	m                int
}

// sendRange and recvRange are the ranges of send to rank j and received
// from rank j.
func (v *vCounts) sendRange(j int) (int, int) {
	if v.scounts == nil {
		return j * v.m, j*v.m + v.m
	}
	return v.sdispls[j], v.sdispls[j] + v.scounts[j]
}

func (v *vCounts) recvRange(j int) (int, int) {
	if v.scounts == nil {
		return j * v.m, j*v.m + v.m
	}
	return v.rdispls[j], v.rdispls[j] + v.rcounts[j]
}

// pairwise is the all-to-all exchange of v (algo.Rank.Pairwise). The
// ranges go from src where it names a buffer (data outside the call's
// buffer: a tensor), else from k's buffer, and the ranges received land in
// k's buffer at element at + their offset. The caller moves its own range.
func (c *Comm) pairwise(ctx context.Context, k *call, src backend.Region, at int, v vCounts) error {
	k.xc.Src = src
	err := c.algo(k).Pairwise(ctx, c.g.all, v.sendRange, func(j int) (int, int) {
		lo, hi := v.recvRange(j)
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
	if err := c.pairwise(ctx, k, backend.Region{}, n, vCounts{m: m}); err != nil {
		return err
	}
	return c.flush(ctx)
}
