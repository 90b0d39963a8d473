package collective

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// NoColor passed to Split leaves the rank out of every sub-group (Split
// returns a nil Comm for it), as MPI_UNDEFINED does.
const NoColor = -1

// splitEntry is one sub-group being created by a Split call.
type splitEntry struct {
	done  chan struct{}
	sub   *Group
	err   error
	users int // members that have not picked up their Comm yet
}

type splitKey struct {
	seq   uint64
	color int
}

// Split partitions the ranks of c's group by color into sub-groups
// (ncclCommSplit, MPI_Comm_split): every rank of the group calls it, and
// each gets its Comm in the sub-group of the ranks that passed the same
// color, ranked by key, then by rank in the parent. A rank passing NoColor
// gets a nil Comm. The sub-groups are Groups of their own (same backend,
// devices and Options as the parent, their own streams and logical
// devices), so a rank's parent and child Comms are separate streams and
// sub-groups run concurrently without interfering. They close with the
// parent, or earlier with their own Close. Within one process only:
// across processes Split is ErrUnsupported.
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	if c == nil {
		return nil, invalidArg("nil Comm")
	}
	g := c.g
	if g.tr != nil {
		return nil, c.invalidCall(ctx, "Split", fmt.Errorf("Split across processes: %w", ErrUnsupported))
	}
	if color < NoColor {
		return nil, c.invalidCall(ctx, "Split", invalidArg("color %d (want >= 0, or NoColor)", color))
	}
	N := g.n
	all := make([]float64, 2*N)
	if err := AllGather(ctx, c, []float64{float64(color), float64(key)}, all); err != nil {
		return nil, err
	}
	seq := c.seq // the AllGather's number, the same on every rank
	if color == NoColor {
		return nil, nil
	}
	var members []int
	for r := 0; r < N; r++ {
		if int(all[2*r]) == color {
			members = append(members, r)
		}
	}
	sort.SliceStable(members, func(a, b int) bool { return all[2*members[a]+1] < all[2*members[b]+1] })
	me := -1
	for i, r := range members {
		if r == c.rank {
			me = i
		}
	}
	k := splitKey{seq, color}
	g.splitMu.Lock()
	e := g.splits[k]
	if e == nil {
		e = &splitEntry{done: make(chan struct{}), users: len(members)}
		if g.splits == nil {
			g.splits = map[splitKey]*splitEntry{}
		}
		g.splits[k] = e
		g.splitMu.Unlock()
		// The first member here opens the sub-group for all.
		o := g.opts
		o.Ranks = len(members)
		o.Transport = nil
		o.Devices = make([]int, len(members))
		for i, r := range members {
			o.Devices[i] = g.placement[r]
		}
		o.Config = g.cfg
		e.sub, e.err = NewGroup(ctx, o)
		if e.err == nil {
			g.splitMu.Lock()
			g.children = append(g.children, e.sub)
			g.splitMu.Unlock()
		}
		close(e.done)
	} else {
		g.splitMu.Unlock()
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	g.splitMu.Lock()
	if e.users--; e.users == 0 {
		delete(g.splits, k)
	}
	g.splitMu.Unlock()
	if e.err != nil {
		return nil, fmt.Errorf("collective: Split: opening the sub-group of color %d: %w", color, e.err)
	}
	return e.sub.Comm(me), nil
}

// closeChildren closes the sub-groups Split made.
func (g *Group) closeChildren() []error {
	g.splitMu.Lock()
	kids := g.children
	g.children = nil
	g.splitMu.Unlock()
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, k := range kids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := k.Close(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}
