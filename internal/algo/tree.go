package algo

import "context"

// Binary trees over a member list: member 0 is the root, member i's
// children are 2i+1 and 2i+2. Both phases run in slices (one message
// each), so a slice travels up (or down) while the next one follows.

// family returns member i's parent (-1 for the root) and children.
func (r *Rank) family(members []int, i int) (parent int, children []int) {
	parent = -1
	if i > 0 {
		parent = members[(i-1)/2]
	}
	children = r.kids[:0]
	for ch := 2*i + 1; ch <= 2*i+2 && ch < len(members); ch++ {
		children = append(children, members[ch])
	}
	return parent, children
}

// TreeReduce reduces n elements over members to members[0]: each member
// adds its children's slices to its own and passes the sum to its parent.
// Only the root's buffer holds the result (unscaled).
func (r *Rank) TreeReduce(ctx context.Context, members []int, n int) error {
	parent, children := r.family(members, Position(members, r.S.Me()))
	slice := r.S.Slice()
	for j := 0; j*slice < n; j++ {
		a, b := SliceRange(0, n, slice, j)
		if err := r.S.Reduce(ctx, children, parent, a, b); err != nil {
			return err
		}
	}
	return nil
}

// TreeBroadcast copies members[0]'s n elements to every member down the
// tree.
func (r *Rank) TreeBroadcast(ctx context.Context, members []int, n int) error {
	parent, children := r.family(members, Position(members, r.S.Me()))
	slice := r.S.Slice()
	for j := 0; j*slice < n; j++ {
		a, b := SliceRange(0, n, slice, j)
		if err := r.S.Copy(ctx, parent, children, a, b); err != nil {
			return err
		}
	}
	return nil
}

// TreeAllReduce is a tree reduce to the root, the final scale at the root,
// then a tree broadcast: 2 log2(k) hops, best for small tensors.
func (r *Rank) TreeAllReduce(ctx context.Context, members []int, n int) error {
	if r.Det && len(members) > 1 {
		// A tree sums subtrees, not rank 0 + rank 1 + ...: use the
		// rank-ordered reduce-scatter, then gather at the root and
		// broadcast down the tree.
		chunkLen := CeilDiv(n, len(members))
		if err := r.DetReduceScatter(ctx, members, n, chunkLen); err != nil {
			return err
		}
		if err := r.GatherTo(ctx, members, 0, n, chunkLen); err != nil {
			return err
		}
	} else if err := r.TreeReduce(ctx, members, n); err != nil {
		return err
	}
	if Position(members, r.S.Me()) == 0 {
		if err := r.S.Scale(ctx, 0, n); err != nil {
			return err
		}
	}
	return r.TreeBroadcast(ctx, members, n)
}

// HierAllReduce reduces inside groups of consecutive ranks (grp, this
// rank's: a tree to its first rank, the group's leader), all-reduces among
// the leaders with a ring, and broadcasts inside the groups: the shape
// that spans machines, where groups are hosts. Rank-ordered, it is the
// ring over all.
func (r *Rank) HierAllReduce(ctx context.Context, grp, leaders, all []int, n int) error {
	if r.Det {
		// Sums inside groups first would not be rank 0 + rank 1 + ...
		return r.RingAllReduce(ctx, all, n)
	}
	if err := r.TreeReduce(ctx, grp, n); err != nil {
		return err
	}
	if grp[0] == r.S.Me() {
		if err := r.RingAllReduce(ctx, leaders, n); err != nil {
			return err
		}
	}
	return r.TreeBroadcast(ctx, grp, n)
}

// Hierarchy is how HierAllReduce groups ranks 0..n-1: consecutive ranks in
// groups of a given size (the last one may be smaller), each group led by
// its first rank.
type Hierarchy struct {
	All     []int   // 0..n-1
	Groups  [][]int // each group's ranks
	GroupOf []int   // each rank's group
	Leaders []int   // each group's first rank
}

// NewHierarchy groups ranks 0..n-1 by size (>= 1) consecutive ranks.
func NewHierarchy(n, size int) Hierarchy {
	h := Hierarchy{All: make([]int, n), GroupOf: make([]int, n)}
	for r := range h.All {
		h.All[r] = r
		gi := r / size
		if gi == len(h.Groups) {
			h.Groups = append(h.Groups, nil)
			h.Leaders = append(h.Leaders, r)
		}
		h.Groups[gi] = append(h.Groups[gi], r)
		h.GroupOf[r] = gi
	}
	return h
}

// AllReduce is HierAllReduce of rank r's group on h.
func (h *Hierarchy) AllReduce(ctx context.Context, r *Rank, n int) error {
	return r.HierAllReduce(ctx, h.Groups[h.GroupOf[r.S.Me()]], h.Leaders, h.All, n)
}
