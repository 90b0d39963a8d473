package collective

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestAllToAllV draws per-pair counts (0 and sizes around the 256-byte
// slot among them), shuffled offsets with gaps, rank counts and types at
// random (the seed is printed), and checks every received range exactly
// and that recv elements outside them keep their sentinel. AllGatherV
// likewise.
func TestAllToAllV(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	sizes := []int{0, 1, 31, 32, 33, 64, 65, 200}
	for _, bk := range backendsUnderTest(t) {
		for _, N := range []int{1, 2, 3, 5} {
			g := openGroup(t, bk, N, func(o *Options) { o.ChunkBytes = 256 })
			for tc := 0; tc < 3; tc++ {
				// cnt[i][j]: elements rank i sends rank j.
				cnt := make([][]int, N)
				for i := range cnt {
					cnt[i] = make([]int, N)
					for j := range cnt[i] {
						cnt[i][j] = sizes[rng.IntN(len(sizes))]
					}
				}
				layout := func(counts []int) ([]int, int) {
					order := rng.Perm(len(counts))
					d := make([]int, len(counts))
					off := 0
					for _, j := range order {
						off += rng.IntN(3) // gaps
						d[j] = off
						off += counts[j]
					}
					return d, off + rng.IntN(3)
				}
				type plan struct {
					sc, sd, rc, rd []int
					send, recv     []float64
				}
				ps := make([]plan, N)
				for i := range ps {
					p := &ps[i]
					p.sc = cnt[i]
					p.rc = make([]int, N)
					for j := range p.rc {
						p.rc[j] = cnt[j][i]
					}
					var sl, rl int
					p.sd, sl = layout(p.sc)
					p.rd, rl = layout(p.rc)
					p.send = make([]float64, sl)
					for e := range p.send {
						p.send[e] = float64(i*1000000 + e)
					}
					p.recv = make([]float64, rl)
					for e := range p.recv {
						p.recv[e] = -1
					}
				}
				noErrors(t, onRanks(g, func(c *Comm) error {
					p := &ps[c.Rank()]
					return AllToAllV(context.Background(), c, p.send, p.sc, p.sd, p.recv, p.rc, p.rd)
				}))
				for i := range ps {
					p := &ps[i]
					want := make([]float64, len(p.recv))
					for e := range want {
						want[e] = -1
					}
					for j := 0; j < N; j++ {
						q := &ps[j]
						copy(want[p.rd[j]:p.rd[j]+p.rc[j]], q.send[q.sd[i]:q.sd[i]+q.sc[i]])
					}
					for e := range want {
						if p.recv[e] != want[e] {
							t.Fatalf("%s N=%d case %d: rank %d recv[%d] = %v, want %v", bk, N, tc, i, e, p.recv[e], want[e])
						}
					}
				}
				// AllGatherV of each rank's first cnt[i][0] elements.
				counts := make([]int, N)
				for i := range counts {
					counts[i] = cnt[i][0]
				}
				displs, total := layout(counts)
				outs := make([][]float32, N)
				noErrors(t, onRanks(g, func(c *Comm) error {
					r := c.Rank()
					in := make([]float32, counts[r])
					for e := range in {
						in[e] = float32(r*1000 + e)
					}
					outs[r] = make([]float32, total)
					return AllGatherV(context.Background(), c, in, outs[r], counts, displs)
				}))
				for r := range outs {
					for j := 0; j < N; j++ {
						for e := 0; e < counts[j]; e++ {
							if got, want := outs[r][displs[j]+e], float32(j*1000+e); got != want {
								t.Fatalf("%s N=%d AllGatherV: rank %d block %d element %d = %v, want %v", bk, N, r, j, e, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestAllToAllVMismatch: a rank expecting another count than its peer
// sends makes every rank fail with ErrMismatch, nothing written, and the
// group works afterwards.
func TestAllToAllVMismatch(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3)
		ctx := context.Background()
		recv := make([][]float32, 3)
		errs := onRanks(g, func(c *Comm) error {
			r := c.Rank()
			send := make([]float32, 6)
			rc := []int{2, 2, 2}
			if r == 2 {
				rc[0] = 1 // rank 0 sends 2
			}
			recv[r] = make([]float32, 6)
			for e := range recv[r] {
				recv[r][e] = 7
			}
			return AllToAllV(ctx, c, send, []int{2, 2, 2}, []int{0, 2, 4}, recv[r], rc, []int{0, 2, 4})
		})
		for r, err := range errs {
			if !errors.Is(err, ErrMismatch) {
				t.Errorf("%s rank %d: %v, want ErrMismatch", bk, r, err)
			}
			for e, v := range recv[r] {
				if v != 7 {
					t.Fatalf("%s rank %d: recv[%d] written (%v) by a failed call", bk, r, e, v)
				}
			}
		}
		noErrors(t, onRanks(g, func(c *Comm) error { return AllReduce(ctx, c, make([]float32, 10), Sum) }))
		errs = onRanks(g, func(c *Comm) error {
			return AllToAllV(ctx, c, make([]float32, 2), []int{1, 1}, []int{0, 1}, make([]float32, 2), []int{1, 1}, []int{0, 1})
		})
		for r, err := range errs {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s rank %d, 2 counts for 3 ranks: %v", bk, r, err)
			}
		}
	}
}

// TestReduceScatterV: random per-rank block sizes (0 and sizes around the
// slot among them) and offsets, every op, f32 and f64, against the float64
// reference (exact inputs); a NaN in one rank's input propagates to the
// block that holds it.
func TestReduceScatterV(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	sizes := []int{0, 1, 31, 33, 65, 200}
	for _, bk := range backendsUnderTest(t) {
		for _, N := range []int{1, 2, 3, 5} {
			g := openGroup(t, bk, N, func(o *Options) { o.ChunkBytes = 256 })
			for _, op := range allOps {
				counts := make([]int, N)
				displs := make([]int, N)
				off := 0
				for j := range counts {
					counts[j] = sizes[rng.IntN(len(sizes))]
					off += rng.IntN(3)
					displs[j] = off
					off += counts[j]
				}
				L := off + rng.IntN(3)
				inputs := make([][]float64, N)
				for r := range inputs {
					inputs[r] = make([]float64, L)
					for i := range inputs[r] {
						inputs[r][i] = exactInput(op, r, i)
					}
				}
				nanAt := -1
				if op == Max && L > 0 {
					nanAt = rng.IntN(L)
					inputs[rng.IntN(N)][nanAt] = math.NaN()
				}
				want := refReduce(inputs, op)
				out32 := make([][]float32, N)
				out64 := make([][]float64, N)
				noErrors(t, onRanks(g, func(c *Comm) error {
					r := c.Rank()
					s32 := make([]float32, L)
					for i, v := range inputs[r] {
						s32[i] = float32(v)
					}
					out32[r] = make([]float32, counts[r])
					if err := ReduceScatterV(context.Background(), c, s32, out32[r], counts, displs, op); err != nil {
						return err
					}
					out64[r] = make([]float64, counts[r])
					return ReduceScatterV(context.Background(), c, inputs[r], out64[r], counts, displs, op)
				}))
				for r := 0; r < N; r++ {
					for e := 0; e < counts[r]; e++ {
						w := want[displs[r]+e]
						same := func(got, w float64) bool { return got == w || (math.IsNaN(got) && math.IsNaN(w)) }
						if !same(float64(out32[r][e]), float64(float32(w))) || !same(out64[r][e], w) {
							t.Fatalf("%s N=%d %v: rank %d element %d = %v (f32) / %v (f64), want %v", bk, N, op, r, e, out32[r][e], out64[r][e], w)
						}
					}
				}
			}
		}
	}
}
