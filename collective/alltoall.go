package collective

import (
	"context"

	"github.com/gocoll/gocoll/internal/algo"
)

// pairwiseExchange moves chunk j of [0, n) to rank j, where it lands as
// chunk i of rank j's [n, 2n) (and chunk j of rank j's [0, n) arrives
// here as chunk j of [n, 2n)): N-1 shift steps of chunk length m, slice by slice.
func (c *Comm) pairwiseExchange(ctx context.Context, k *call, n, m int) error {
	N := c.g.n
	i := c.rank
	slice := c.g.slotBytes / k.es
	st := c.dev.Stream()
	for s := 1; s < N; s++ {
		to, from := algo.Mod(i+s, N), algo.Mod(i-s, N)
		for j := 0; j*slice < m; j++ {
			a, b := algo.SliceRange(to*m, to*m+m, slice, j)
			if err := c.sendSlice(ctx, k, to, a, b); err != nil {
				return err
			}
			a, b = algo.SliceRange(from*m, from*m+m, slice, j)
			if b <= a {
				continue
			}
			in, err := c.take(ctx, from, 0, (b-a)*k.es)
			if err != nil {
				return err
			}
			if err := c.rec(st.Copy(k.region(n+a, n+b), in)); err != nil {
				return err
			}
			if err := c.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// scatterFrom sends chunk q of root's [0, n) to rank q, into the same place
// of its buffer, slice by slice.
func (c *Comm) scatterFrom(ctx context.Context, k *call, root, n, m int) error {
	N := c.g.n
	slice := c.g.slotBytes / k.es
	for j := 0; j*slice < m; j++ {
		if c.rank == root {
			for q := 0; q < N; q++ {
				if q == root {
					continue
				}
				lo, hi := algo.ChunkRange(n, m, q)
				a, b := algo.SliceRange(lo, hi, slice, j)
				if err := c.sendSlice(ctx, k, q, a, b); err != nil {
					return err
				}
			}
			continue
		}
		lo, hi := algo.ChunkRange(n, m, c.rank)
		a, b := algo.SliceRange(lo, hi, slice, j)
		if b <= a {
			continue
		}
		in, err := c.take(ctx, root, 0, (b-a)*k.es)
		if err != nil {
			return err
		}
		if err := c.rec(c.dev.Stream().Copy(k.region(a, b), in)); err != nil {
			return err
		}
		if err := c.flush(ctx); err != nil {
			return err
		}
	}
	return nil
}
