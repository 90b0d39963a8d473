package collective

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestSplit: 8 ranks split into 2 x 4 (color r/4) and 4 x 2 (color r%4,
// keys reversing the order); the sub-groups of each split run different
// collectives at the same time and every result is exact; ranks are
// ordered by key; NoColor gets a nil Comm; the parent keeps working.
func TestSplit(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 8)
		ctx := context.Background()
		type res struct {
			sub      *Comm
			rank     int
			size     int
			got      []float32
			gathered []float32
		}
		for _, mode := range []string{"2x4", "4x2"} {
			out := make([]res, 8)
			noErrors(t, onRanks(g, func(c *Comm) error {
				r := c.Rank()
				color, key := r/4, r
				if mode == "4x2" {
					color, key = r%4, -r // reversed order inside each pair
				}
				sub, err := c.Split(ctx, color, key)
				if err != nil {
					return err
				}
				o := &out[r]
				o.sub, o.rank, o.size = sub, sub.Rank(), sub.Size()
				// Color 0 all-reduces, the others all-gather, concurrently.
				if color == 0 {
					o.got = []float32{float32(r), 1}
					return AllReduce(ctx, sub, o.got, Sum)
				}
				o.gathered = make([]float32, sub.Size())
				return AllGather(ctx, sub, []float32{float32(r)}, o.gathered)
			}))
			for r, o := range out {
				color := r / 4
				members := []int{color * 4, color*4 + 1, color*4 + 2, color*4 + 3}
				if mode == "4x2" {
					color = r % 4
					members = []int{color + 4, color} // key -r: the higher parent rank first
				}
				want := -1
				for i, m := range members {
					if m == r {
						want = i
					}
				}
				if o.rank != want || o.size != len(members) {
					t.Fatalf("%s %s: rank %d is %d of %d in its sub-group, want %d of %d", bk, mode, r, o.rank, o.size, want, len(members))
				}
				if color == 0 {
					s := float32(0)
					for _, m := range members {
						s += float32(m)
					}
					if o.got[0] != s || o.got[1] != float32(len(members)) {
						t.Fatalf("%s %s: rank %d all-reduce = %v, want [%v %d]", bk, mode, r, o.got, s, len(members))
					}
				} else {
					for i, m := range members {
						if o.gathered[i] != float32(m) {
							t.Fatalf("%s %s: rank %d all-gather = %v, want members %v", bk, mode, r, o.gathered, members)
						}
					}
				}
			}
		}
		// NoColor, and the parent still works.
		noErrors(t, onRanks(g, func(c *Comm) error {
			color := 0
			if c.Rank()%2 == 1 {
				color = NoColor
			}
			sub, err := c.Split(ctx, color, 0)
			if err != nil {
				return err
			}
			if (sub == nil) != (color == NoColor) {
				return fmt.Errorf("color %d: sub-group %v", color, sub)
			}
			if sub != nil {
				if err := Barrier(ctx, sub); err != nil {
					return err
				}
			}
			return AllReduce(ctx, c, make([]float32, 3), Sum)
		}))
		errs := onRanks(g, func(c *Comm) error { _, err := c.Split(ctx, -5, 0); return err })
		for r, err := range errs {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s rank %d, color -5: %v", bk, r, err)
			}
		}
	}
}
