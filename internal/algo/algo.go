// Package algo holds the collective algorithms as schedules: which slice
// of the buffer a rank sends to which rank, receives from which, and in
// which order, for the ring, the binary tree, the hierarchical all-reduce,
// the rank-ordered (deterministic) reduce-scatter, the rooted gather and
// scatter, and the pairwise all-to-all exchange. A schedule is
// written once over the exchange steps of Steps (reduce, copy, scatter,
// gather, the ordered reduction, the final scale), which the rank
// implements on its device and its links; an algorithm never touches a
// device, a buffer or a transport.
//
// Buffers are cut into chunks (one per member) and chunks into slices of
// at most Steps.Slice elements (one message each), processed in rounds, so
// that the exchange and the reduction of different slices overlap across
// ranks.
package algo

import "context"

// Steps are the exchange steps of one rank in one call, over the call's
// buffer of elements. Each step records its device work, submits it, waits
// for it and posts what it sends; a step that fails has broken the group.
type Steps interface {
	// Me returns the rank (global) that runs the steps.
	Me() int
	// Slice returns the most elements one message carries.
	Slice() int
	// Reduce receives elements [a, b) from each rank of from, reduces them
	// with the buffer's into the buffer, and sends the result on to rank
	// to (nothing when to < 0).
	Reduce(ctx context.Context, from []int, to, a, b int) error
	// Copy receives elements [a, b) from rank from into the buffer (from <
	// 0: the buffer's own) and sends them on to each rank of to.
	Copy(ctx context.Context, from int, to []int, a, b int) error
	// Scatter sends each part's elements of the buffer to its rank.
	Scatter(ctx context.Context, parts []Part) error
	// Gather receives each part's elements from its rank into the buffer.
	Gather(ctx context.Context, parts []Part) error
	// Ordered starts a rank-ordered reduction (ReduceOrdered), before its
	// Slice is asked (its messages may be shorter): its last pass may apply
	// the call's final scale, which Scale then leaves out.
	Ordered()
	// ReduceOrdered receives elements [a, b) from every rank of members
	// but this one and reduces them with its own in member order, so the
	// result has the same bits on any layout.
	ReduceOrdered(ctx context.Context, members []int, a, b int) error
	// Scale applies the call's final scale (a mean's) to elements [lo,
	// hi), unless the reduction applied it already, and ends a rank-ordered
	// reduction.
	Scale(ctx context.Context, lo, hi int) error
}

// Part is elements [A, B) of the buffer, to or from Rank.
type Part struct{ Rank, A, B int }

// Rank runs the algorithms over its steps; its scratch is reused across
// calls. Det asks for the rank-ordered reductions (Config.Deterministic).
type Rank struct {
	S     Steps
	Det   bool
	parts []Part
	to    [1]int
	from  [1]int
	kids  [2]int
}

// ChunkRange returns chunk c of n elements cut into chunks of chunkLen
// elements (the last ones shorter or empty).
func ChunkRange(n, chunkLen, c int) (lo, hi int) {
	return min(c*chunkLen, n), min(c*chunkLen+chunkLen, n)
}

// SliceRange returns slice j (of at most slice elements) of [lo, hi).
func SliceRange(lo, hi, slice, j int) (int, int) {
	a := lo + j*slice
	return min(a, hi), min(a+slice, hi)
}

// CeilDiv returns a/b rounded up.
func CeilDiv(a, b int) int { return (a + b - 1) / b }

// Mod returns a modulo k, in [0, k).
func Mod(a, k int) int { return ((a % k) + k) % k }

// Position returns rank's index in members, or -1.
func Position(members []int, rank int) int {
	for i, r := range members {
		if r == rank {
			return i
		}
	}
	return -1
}

// Send sends elements [a, b) of the buffer to rank to (nothing when the
// slice is empty).
func (r *Rank) Send(ctx context.Context, to, a, b int) error {
	if b <= a {
		return nil
	}
	r.to[0] = to
	return r.S.Copy(ctx, -1, r.to[:1], a, b)
}

// Recv receives elements [a, b) of the buffer from rank from (nothing when
// the slice is empty).
func (r *Rank) Recv(ctx context.Context, from, a, b int) error {
	if b <= a {
		return nil
	}
	return r.S.Copy(ctx, from, nil, a, b)
}

// RingAllReduce is reduce-scatter then all-gather over members: 2(k-1)
// steps, each member sending 2(k-1)/k of the buffer.
func (r *Rank) RingAllReduce(ctx context.Context, members []int, n int) error {
	km := len(members)
	if km == 1 {
		return r.S.Scale(ctx, 0, n)
	}
	chunkLen := CeilDiv(n, km)
	i := Position(members, r.S.Me())
	off := 1
	if r.Det {
		off = 0
		if err := r.DetReduceScatter(ctx, members, n, chunkLen); err != nil {
			return err
		}
	} else if err := r.RingReduceScatter(ctx, members, n, chunkLen, off); err != nil {
		return err
	}
	lo, hi := ChunkRange(n, chunkLen, Mod(i+off, km))
	if err := r.S.Scale(ctx, lo, hi); err != nil {
		return err
	}
	return r.RingAllGather(ctx, members, n, chunkLen, off)
}

// RingReduceScatter reduces n elements over members with a ring, the
// buffer cut into len(members) chunks of chunkLen elements: member i ends
// owning chunk (i+off) mod k, fully reduced (without the final scale).
func (r *Rank) RingReduceScatter(ctx context.Context, members []int, n, chunkLen, off int) error {
	km := len(members)
	i := Position(members, r.S.Me())
	right, left := members[Mod(i+1, km)], members[Mod(i-1, km)]
	slice := r.S.Slice()
	r.from[0] = left
	for j := 0; j*slice < chunkLen; j++ {
		// Step 0: send the slice of chunk (i+off-1).
		lo, hi := ChunkRange(n, chunkLen, Mod(i+off-1, km))
		a, b := SliceRange(lo, hi, slice, j)
		if err := r.Send(ctx, right, a, b); err != nil {
			return err
		}
		for s := 0; s < km-1; s++ {
			lo, hi := ChunkRange(n, chunkLen, Mod(i+off-2-s, km))
			a, b := SliceRange(lo, hi, slice, j)
			if b <= a {
				continue
			}
			to := right
			if s == km-2 {
				to = -1
			}
			if err := r.S.Reduce(ctx, r.from[:1], to, a, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// RingAllGather circulates the chunks: member i starts owning chunk
// (i+off) mod k and ends with all of them.
func (r *Rank) RingAllGather(ctx context.Context, members []int, n, chunkLen, off int) error {
	km := len(members)
	i := Position(members, r.S.Me())
	right, left := members[Mod(i+1, km)], members[Mod(i-1, km)]
	slice := r.S.Slice()
	for j := 0; j*slice < chunkLen; j++ {
		lo, hi := ChunkRange(n, chunkLen, Mod(i+off, km))
		a, b := SliceRange(lo, hi, slice, j)
		if err := r.Send(ctx, right, a, b); err != nil {
			return err
		}
		for s := 0; s < km-1; s++ {
			lo, hi := ChunkRange(n, chunkLen, Mod(i+off-1-s, km))
			a, b := SliceRange(lo, hi, slice, j)
			if b <= a {
				continue
			}
			r.to[0] = right
			to := r.to[:1]
			if s == km-2 {
				to = nil
			}
			if err := r.S.Copy(ctx, left, to, a, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// DetReduceScatter is the rank-ordered reduce-scatter: for each round,
// every member sends its slice of chunk c to member c, which reduces the k
// slices in member order. Member i ends owning chunk i.
func (r *Rank) DetReduceScatter(ctx context.Context, members []int, n, chunkLen int) error {
	i := Position(members, r.S.Me())
	r.S.Ordered()
	slice := r.S.Slice()
	for j := 0; j*slice < chunkLen; j++ {
		// Send my slice of every other member's chunk.
		if parts := r.others(members, i, n, chunkLen, slice, j); len(parts) > 0 {
			if err := r.S.Scatter(ctx, parts); err != nil {
				return err
			}
		}
		// Reduce my chunk's slice from everyone, in member order.
		lo, hi := ChunkRange(n, chunkLen, i)
		if a, b := SliceRange(lo, hi, slice, j); b > a {
			if err := r.S.ReduceOrdered(ctx, members, a, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// GatherTo sends member i's chunk i (of chunkLen elements) to
// members[root].
func (r *Rank) GatherTo(ctx context.Context, members []int, root, n, chunkLen int) error {
	return r.rooted(ctx, members, root, n, chunkLen, true)
}

// ScatterFrom sends chunk q (of chunkLen elements) of members[root]'s
// buffer to member q, into the same place of its buffer.
func (r *Rank) ScatterFrom(ctx context.Context, members []int, root, n, chunkLen int) error {
	return r.rooted(ctx, members, root, n, chunkLen, false)
}

// rooted is GatherTo (gather) or ScatterFrom, slice by slice: each member
// sends its chunk's slice to root or receives it from root, and root
// receives or sends each round's slices together.
func (r *Rank) rooted(ctx context.Context, members []int, root, n, chunkLen int, gather bool) error {
	i := Position(members, r.S.Me())
	slice := r.S.Slice()
	for j := 0; j*slice < chunkLen; j++ {
		var err error
		if i != root {
			lo, hi := ChunkRange(n, chunkLen, i)
			a, b := SliceRange(lo, hi, slice, j)
			if gather {
				err = r.Send(ctx, members[root], a, b)
			} else {
				err = r.Recv(ctx, members[root], a, b)
			}
		} else if parts := r.others(members, root, n, chunkLen, slice, j); len(parts) > 0 {
			if gather {
				err = r.S.Gather(ctx, parts)
			} else {
				err = r.S.Scatter(ctx, parts)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Pairwise is the all-to-all exchange over members: k-1 shift steps (to
// member i+s, from member i-s), slice by slice, one message per link at a
// time. send(j) is the range of the buffer that goes to member j, recv(j)
// the range where member j's lands. The caller moves its own range.
func (r *Rank) Pairwise(ctx context.Context, members []int, send, recv func(j int) (lo, hi int)) error {
	km := len(members)
	i := Position(members, r.S.Me())
	slice := r.S.Slice()
	for s := 1; s < km; s++ {
		to, from := Mod(i+s, km), Mod(i-s, km)
		slo, shi := send(to)
		rlo, rhi := recv(from)
		for j := 0; j*slice < max(shi-slo, rhi-rlo); j++ {
			a, b := SliceRange(slo, shi, slice, j)
			if err := r.Send(ctx, members[to], a, b); err != nil {
				return err
			}
			a, b = SliceRange(rlo, rhi, slice, j)
			if err := r.Recv(ctx, members[from], a, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// others returns slice j of the chunk of every member but member i (the
// non-empty ones), in member order, in the rank's scratch.
func (r *Rank) others(members []int, i, n, chunkLen, slice, j int) []Part {
	parts := r.parts[:0]
	for q, m := range members {
		lo, hi := ChunkRange(n, chunkLen, q)
		if a, b := SliceRange(lo, hi, slice, j); q != i && b > a {
			parts = append(parts, Part{Rank: m, A: a, B: b})
		}
	}
	r.parts = parts
	return parts
}
