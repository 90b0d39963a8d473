package collective

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSharedTensorCollectives: where the ranks share device memory (the
// default layout on host and lavapipe) every fixed-size tensor collective
// and the V forms run as one pass of the leader's (shared.go): exact
// int32 results, no byte through host memory (the backend-seam counters
// stay at 0; the per-rank layout, which moves host bytes, runs the same
// calls as the control); views of one buffer in an in-place layout give
// the results of separate tensors, and views that partly overlap are
// refused on every rank. Sizes are drawn
// (seed printed), 2, 3 and 5 ranks, every root.
func TestSharedTensorCollectives(t *testing.T) {
	seed := tensorTestSeed(t)
	for _, bk := range backendsUnderTest(t) {
		for _, perRank := range []bool{false, true} {
			if perRank && bk != "vulkan" {
				continue
			}
			for _, N := range []int{2, 3, 5} {
				t.Run(fmt.Sprintf("%s/perRank=%v/%d", bk, perRank, N), func(t *testing.T) {
					g := openGroup(t, bk, N, func(o *Options) { o.DevicePerRank = perRank; o.ChunkBytes = 4096 })
					if g.sharedMem == perRank {
						t.Fatalf("sharedMem=%v with DevicePerRank=%v", g.sharedMem, perRank)
					}
					rng := rand.New(rand.NewPCG(seed, uint64(N)))
					for _, m := range []int{1, 63, 64, 65, 1000 + rng.IntN(2000)} {
						for _, shift := range []int{-1, 0, 1} {
							sharedCase(t, g, m, rng.IntN(N), shift, perRank)
						}
					}
				})
			}
		}
	}
}

// sharedCase runs every fixed-size tensor collective with chunk m and root
// root. shift < 0: separate tensors; else send and recv are views of one
// buffer per rank, recv starting shift elements after the layout that
// would put it in place.
func sharedCase(t *testing.T, g *Group, m, root, shift int, perRank bool) {
	t.Helper()
	ctx := context.Background()
	N := g.Size()
	val := func(r, i int) int32 { return int32(r*1_000_003 + i*7 + 1) }
	type tc struct {
		name   string
		sLen   int // send length per rank (the root's for Scatter)
		rLen   int // recv length per rank (the root's for Reduce and Gather)
		inSend int // element of send where recv starts in place (with shift)
		call   func(c *Comm, s, r *Tensor[int32]) error
		want   func(r, i int) int32 // recv[r][i]
		rooted int                  // 1: recv only at root; 2: send only at root
	}
	cnt, dsp := make([]int, N), make([]int, N)
	for j := range cnt {
		cnt[j], dsp[j] = m, j*m
	}
	rsWant := func(r, i int) int32 {
		var acc int32
		for p := 0; p < N; p++ {
			acc += val(p, r*m+i)
		}
		return acc
	}
	cases := []tc{
		{"ReduceScatterTensor", N * m, m, -1, func(c *Comm, s, r *Tensor[int32]) error { return ReduceScatterTensor(ctx, c, s, r, Sum) },
			rsWant, 0},
		{"AllGatherTensor", m, N * m, -2, func(c *Comm, s, r *Tensor[int32]) error { return AllGatherTensor(ctx, c, s, r) },
			func(r, i int) int32 { return val(i/m, i%m) }, 0},
		{"AllToAllTensor", N * m, N * m, 1, func(c *Comm, s, r *Tensor[int32]) error { return AllToAllTensor(ctx, c, s, r) },
			func(r, i int) int32 { return val(i/m, r*m+i%m) }, 0},
		{"ReduceTensor", N * m, N * m, 0, func(c *Comm, s, r *Tensor[int32]) error { return ReduceTensor(ctx, c, s, r, Sum, root) },
			func(r, i int) int32 {
				var acc int32
				for p := 0; p < N; p++ {
					acc += val(p, i)
				}
				return acc
			}, 1},
		{"GatherTensor", m, N * m, -2, func(c *Comm, s, r *Tensor[int32]) error { return GatherTensor(ctx, c, s, r, root) },
			func(r, i int) int32 { return val(i/m, i%m) }, 1},
		{"ScatterTensor", N * m, m, -1, func(c *Comm, s, r *Tensor[int32]) error { return ScatterTensor(ctx, c, s, r, root) },
			func(r, i int) int32 { return val(root, r*m+i) }, 2},
		// The V forms with equal counts: the same results.
		{"ReduceScatterVTensor", N * m, m, -1, func(c *Comm, s, r *Tensor[int32]) error { return ReduceScatterVTensor(ctx, c, s, r, cnt, dsp, Sum) },
			rsWant, 0},
		{"AllGatherVTensor", m, N * m, -2, func(c *Comm, s, r *Tensor[int32]) error { return AllGatherVTensor(ctx, c, s, r, cnt, dsp) },
			func(r, i int) int32 { return val(i/m, i%m) }, 0},
		{"AllToAllVTensor", N * m, N * m, 1, func(c *Comm, s, r *Tensor[int32]) error { return AllToAllVTensor(ctx, c, s, cnt, dsp, r, cnt, dsp) },
			func(r, i int) int32 { return val(i/m, r*m+i%m) }, 0},
	}
	for _, k := range cases {
		if shift >= 0 && k.inSend == 1 && shift == 0 {
			continue // AllToAll is out of place
		}
		got := make([][]int32, N)
		overlap := make([]bool, N) // the rank's views partly overlap
		errs := onRanks(g, func(c *Comm) error {
			r := c.Rank()
			useS, useR := k.rooted != 2 || r == root, k.rooted != 1 || r == root
			sLen, rLen := k.sLen, k.rLen
			if !useS {
				sLen = 0
			}
			if !useR {
				rLen = 0
			}
			// Where recv starts relative to send, in elements of one
			// buffer holding both (shift >= 0), or separate tensors.
			var st, rt *Tensor[int32]
			var err error
			if shift < 0 || !useS || !useR {
				if st, err = NewTensor[int32](c, sLen); err != nil {
					return err
				}
				defer st.Close()
				if rt, err = NewTensor[int32](c, rLen); err != nil {
					return err
				}
				defer rt.Close()
			} else {
				sAt, rAt := 0, 0
				switch k.inSend {
				case -1: // recv is chunk r of send
					rAt = r*m + shift
				case -2: // send is chunk r of recv
					sAt = r*m + shift
				case 0: // recv on send
					rAt = shift
				case 1: // separate ranges, recv overlapping send's tail
					rAt = sLen - shift
				}
				overlap[r] = sLen > 0 && rLen > 0 && sAt < rAt+rLen && rAt < sAt+sLen
				total := max(sAt+sLen, rAt+rLen)
				all, err := NewTensor[int32](c, total)
				if err != nil {
					return err
				}
				defer all.Close()
				buf, off := all.Buffer()
				if st, err = WrapTensor[int32](c, buf, off+4*sAt, sLen); err != nil {
					return err
				}
				if rt, err = WrapTensor[int32](c, buf, off+4*rAt, rLen); err != nil {
					return err
				}
			}
			in := make([]int32, sLen)
			for i := range in {
				in[i] = val(r, i)
			}
			if err := st.Upload(in); err != nil {
				return err
			}
			if err := k.call(c, st, rt); err != nil {
				return err
			}
			if !useR {
				return nil
			}
			got[r] = make([]int32, rLen)
			return rt.Download(got[r])
		})
		if slices.Contains(overlap, true) && shift == 1 {
			// A partial overlap of a rank's send and recv: refused on
			// every rank before data moves.
			for r, err := range errs {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("%s m=%d root=%d: overlapping views: rank %d: %v, want ErrInvalidArgument", k.name, m, root, r, err)
				}
			}
			continue
		}
		noErrors(t, errs)
		if shift < 0 {
			// The collective alone, on fresh tensors: nothing through host
			// memory where the ranks share it; the per-rank layout (the
			// control) moves bytes through its slots.
			moved := callHostBytes(t, g, k.call, k.sLen, k.rLen, k.rooted, root)
			if moved != 0 && !perRank {
				t.Errorf("%s m=%d: %d host bytes moved with the ranks sharing memory", k.name, m, moved)
			}
			if moved == 0 && perRank {
				t.Errorf("%s m=%d: no host bytes counted in the per-rank layout (the counters do not see the path)", k.name, m)
			}
		}
		for r := range got {
			if got[r] == nil {
				continue
			}
			want := make([]int32, len(got[r]))
			for i := range want {
				want[i] = k.want(r, i)
			}
			if !slices.Equal(got[r], want) {
				i := 0
				for i < len(want) && got[r][i] == want[i] {
					i++
				}
				t.Fatalf("%s m=%d root=%d shift=%d: rank %d element %d = %d, want %d", k.name, m, root, shift, r, i, got[r][i], want[i])
			}
		}
	}
	// BroadcastTensor, from every root in turn.
	for rt := 0; rt < N; rt++ {
		got := make([][]int32, N)
		noErrors(t, onRanks(g, func(c *Comm) error {
			r := c.Rank()
			x, err := NewTensor[int32](c, m)
			if err != nil {
				return err
			}
			defer x.Close()
			in := make([]int32, m)
			for i := range in {
				in[i] = val(r, i)
			}
			if err := x.Upload(in); err != nil {
				return err
			}
			if err := BroadcastTensor(ctx, c, x, rt); err != nil {
				return err
			}
			got[r] = make([]int32, m)
			return x.Download(got[r])
		}))
		for r := range got {
			for i, v := range got[r] {
				if v != val(rt, i) {
					t.Fatalf("BroadcastTensor m=%d root=%d: rank %d element %d = %d, want %d", m, rt, r, i, v, val(rt, i))
				}
			}
		}
	}
}

// callHostBytes runs call once more on fresh separate tensors, counting
// only the host bytes the collective moves (uploads done before the count).
func callHostBytes(t *testing.T, g *Group, call func(c *Comm, s, r *Tensor[int32]) error, sLen, rLen, rooted, root int) int64 {
	t.Helper()
	N := g.Size()
	ss, rs := make([]*Tensor[int32], N), make([]*Tensor[int32], N)
	for r := 0; r < N; r++ {
		c := g.Comm(r)
		sl, rl := sLen, rLen
		if rooted == 2 && r != root {
			sl = 0
		}
		if rooted == 1 && r != root {
			rl = 0
		}
		var err error
		if ss[r], err = NewTensor[int32](c, sl); err != nil {
			t.Fatal(err)
		}
		defer ss[r].Close()
		if rs[r], err = NewTensor[int32](c, rl); err != nil {
			t.Fatal(err)
		}
		defer rs[r].Close()
	}
	before := groupHostBytes(g)
	noErrors(t, onRanks(g, func(c *Comm) error { return call(c, ss[c.Rank()], rs[c.Rank()]) }))
	return groupHostBytes(g) - before
}

// groupHostBytes sums the host bytes the ranks' devices counted at the
// backend seam (both directions, copies and mapped reads and writes).
func groupHostBytes(g *Group) int64 {
	var s int64
	for r := 0; r < g.Size(); r++ {
		ct := g.Comm(r).Device().Counters()
		s += ct.BytesFromHost.Load() + ct.BytesToHost.Load() + ct.BytesWritten.Load() + ct.BytesRead.Load()
	}
	return s
}
