package collective

import "context"

// hierAllReduce reduces inside groups of LocalGroupSize consecutive ranks
// (a tree to each group's first rank, its leader), all-reduces among the
// leaders with a ring, and broadcasts inside the groups: the shape that
// spans machines, where groups are hosts.
func (c *Comm) hierAllReduce(ctx context.Context, k *call, n int) error {
	g := c.g
	if g.cfg.Deterministic {
		// Sums inside groups first would not be rank 0 + rank 1 + ...
		return c.ringAllReduce(ctx, k, g.all, n)
	}
	grp := g.groups[g.groupOf[c.rank]]
	if err := c.treeReduce(ctx, k, grp, n); err != nil {
		return err
	}
	if grp[0] == c.rank {
		if err := c.ringAllReduce(ctx, k, g.leaders, n); err != nil {
			return err
		}
	}
	return c.treeBroadcast(ctx, k, grp, n)
}
