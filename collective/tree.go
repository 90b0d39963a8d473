package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
)

// Binary trees over a member list: member 0 is the root, member i's
// children are 2i+1 and 2i+2. Both phases run in slices (one outbox slot
// each), so a slice travels up (or down) while the next one follows.

func treeParent(i int) int { return (i - 1) / 2 }

// treeReduce reduces n elements over members to members[0]: each member adds
// its children's slices to its own and passes the sum to its parent. Only
// the root's buffer holds the result (unscaled).
func (c *Comm) treeReduce(ctx context.Context, k *call, members []int, n int) error {
	km := len(members)
	i := c.position(members)
	slice := c.g.slotBytes / k.es
	for j := 0; j*slice < n; j++ {
		a, b := sliceRange(0, n, slice, j)
		dst := k.region(a, b)
		st := c.dev.Stream()
		ns := 1
		for ch := 2*i + 1; ch <= 2*i+2 && ch < km; ch++ {
			in, err := c.take(ctx, members[ch], ns-1, (b-a)*k.es)
			if err != nil {
				return err
			}
			c.srcs3[ns] = in
			ns++
		}
		if i == 0 {
			if ns > 1 {
				c.srcs3[0] = dst
				if err := c.rec(st.Reduce(k.op, k.dt, dst, c.srcs3[:ns], 1)); err != nil {
					return err
				}
				if err := c.flush(ctx); err != nil {
					return err
				}
			}
			continue
		}
		p := members[treeParent(i)]
		slot, out, err := c.reserve(ctx, p, (b-a)*k.es)
		if err != nil {
			return err
		}
		c.srcs3[0] = dst
		if mr, ok := c.fuse(k, st, false); ok && ns > 1 {
			// The sum goes to the buffer and to the parent's slot in one
			// pass.
			c.dsts2[0], c.dsts2[1] = dst, out
			if err := c.rec(mr.ReduceMulti(k.op, k.dt, c.dsts2[:2], c.srcs3[:ns], 1)); err != nil {
				return err
			}
		} else {
			if ns > 1 {
				if err := c.rec(st.Reduce(k.op, k.dt, dst, c.srcs3[:ns], 1)); err != nil {
					return err
				}
			}
			if err := c.rec(st.Copy(out, dst)); err != nil {
				return err
			}
		}
		if err := c.flush(ctx); err != nil {
			return err
		}
		c.post(p, slot, (b-a)*k.es)
	}
	return nil
}

// treeBroadcast copies members[0]'s n elements to every member down the tree.
func (c *Comm) treeBroadcast(ctx context.Context, k *call, members []int, n int) error {
	km := len(members)
	i := c.position(members)
	slice := c.g.slotBytes / k.es
	pend := c.pendings(2)
	for j := 0; j*slice < n; j++ {
		a, b := sliceRange(0, n, slice, j)
		dst := k.region(a, b)
		st := c.dev.Stream()
		src := dst
		var in backend.Region
		if i != 0 {
			var err error
			if in, err = c.take(ctx, members[treeParent(i)], 0, (b-a)*k.es); err != nil {
				return err
			}
			src = in
		}
		np := 0
		for ch := 2*i + 1; ch <= 2*i+2 && ch < km; ch++ {
			slot, out, err := c.reserve(ctx, members[ch], (b-a)*k.es)
			if err != nil {
				return err
			}
			c.dsts3[1+np] = out
			pend[np] = pending{to: members[ch], slot: slot, n: (b - a) * k.es}
			np++
		}
		if mr, ok := c.fuseCopy(k, st, false); ok && i != 0 && np > 0 {
			// One pass copies the parent's slot into the buffer and into
			// the children's slots.
			c.dsts3[0], c.srcs2[0] = dst, in
			if err := c.rec(mr.ReduceMulti(backend.Sum, k.dt, c.dsts3[:1+np], c.srcs2[:1], 1)); err != nil {
				return err
			}
		} else {
			if i != 0 {
				if err := c.rec(st.Copy(dst, in)); err != nil {
					return err
				}
			}
			for q := 0; q < np; q++ {
				if err := c.rec(st.Copy(c.dsts3[1+q], src)); err != nil {
					return err
				}
			}
		}
		if i != 0 || np > 0 {
			if err := c.flushPost(ctx, pend[:np]); err != nil {
				return err
			}
		}
	}
	return nil
}

// treeAllReduce is a tree reduce to the root, the final scale at the root,
// then a tree broadcast: 2 log2(k) hops, best for small tensors.
func (c *Comm) treeAllReduce(ctx context.Context, k *call, members []int, n int) error {
	if c.g.cfg.Deterministic && len(members) > 1 {
		// A tree sums subtrees, not rank 0 + rank 1 + ...: use the
		// rank-ordered reduce-scatter, then gather at the root and
		// broadcast down the tree.
		if err := c.detReduceToRoot(ctx, k, members, n); err != nil {
			return err
		}
	} else if err := c.treeReduce(ctx, k, members, n); err != nil {
		return err
	}
	if c.position(members) == 0 {
		if err := c.scaleOwned(ctx, k, 0, n); err != nil {
			return err
		}
	}
	return c.treeBroadcast(ctx, k, members, n)
}

// detReduceToRoot is the rank-ordered reduce to members[0]: the
// deterministic reduce-scatter, then every member sends its reduced chunk to
// the root.
func (c *Comm) detReduceToRoot(ctx context.Context, k *call, members []int, n int) error {
	km := len(members)
	chunkLen := ceilDiv(n, km)
	if err := c.detReduceScatter(ctx, k, members, n, chunkLen); err != nil {
		return err
	}
	return c.gatherTo(ctx, k, members, 0, n, chunkLen)
}

// gatherTo sends member i's chunk i to members[root].
func (c *Comm) gatherTo(ctx context.Context, k *call, members []int, root, n, chunkLen int) error {
	km := len(members)
	i := c.position(members)
	slice := c.g.slotBytes / k.es
	for j := 0; j*slice < chunkLen; j++ {
		if i != root {
			lo, hi := chunkRange(n, chunkLen, i)
			a, b := sliceRange(lo, hi, slice, j)
			if err := c.sendSlice(ctx, k, members[root], a, b); err != nil {
				return err
			}
			continue
		}
		st := c.dev.Stream()
		any := false
		for q := 0; q < km; q++ {
			if q == root {
				continue
			}
			lo, hi := chunkRange(n, chunkLen, q)
			a, b := sliceRange(lo, hi, slice, j)
			if b <= a {
				continue
			}
			in, err := c.take(ctx, members[q], q, (b-a)*k.es)
			if err != nil {
				return err
			}
			if err := c.rec(st.Copy(k.region(a, b), in)); err != nil {
				return err
			}
			any = true
		}
		if any {
			if err := c.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

var _ = backend.F32
