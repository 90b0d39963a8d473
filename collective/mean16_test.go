package collective

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

var mean16SeedFlag = flag.Uint64("mean16.seed", 0, "seed of TestMean16OneRounding (0: a random one, logged)")

// TestMean16OneRounding: Mean of Float16 and BFloat16 in deterministic mode
// rounds once, bit for bit the rank-order reference (rankOrderRef: the
// float32 sum in rank order, divided by N, rounded once to the type), on
// ReduceScatter, ReduceScatterV with equal counts, AllReduce with the
// Ring, Tree and Direct strategies, Reduce, and the tensor forms
// (ReduceScatterTensor, AllReduceTensor, ReduceTensor), for 1, 2, 3, 5, 9
// and 10 ranks (more than 8 sources take the reduce kernel's _out32 and
// _in32 passes), sizes drawn at random (odd lengths, slices of 128
// elements with tails). Every third element is drawn so that rounding the
// sum and then the quotient gives other bits than one rounding, and the
// test checks that its data has such elements wherever N is not a power
// of two (GPU backends: 9 ranks in full runs only). A failure names the
// seed; -mean16.seed=S repeats it.
func TestMean16OneRounding(t *testing.T) {
	arithmetic(t)
	seed := *mean16SeedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) & (1<<40 - 1)
	}
	t.Logf("seed %d (repeat with -mean16.seed=%d)", seed, seed)
	for _, bk := range backendsUnderTest(t) {
		for _, ranks := range []int{1, 2, 3, 5, 9, 10} {
			if ranks == 9 && bk != "host" && !fullRun() {
				continue // 10 takes the same two passes
			}
			// 256-byte slots: 128 16-bit elements a slice.
			g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 256; o.Config.Deterministic = true })
			if !g.kernels.Has(backend.Half) || !g.kernels.Has(backend.BFloat16) {
				t.Logf("%s: no 16-bit kernels: the host paths run", bk)
			}
			rng := rand.New(rand.NewPCG(seed, uint64(ranks)))
			t.Run(fmt.Sprintf("%s/ranks=%d/f16", bk, ranks), func(t *testing.T) {
				mean16Case[Float16](t, g, tF16, rng, seed)
			})
			t.Run(fmt.Sprintf("%s/ranks=%d/bf16", bk, ranks), func(t *testing.T) {
				mean16Case[BFloat16](t, g, tBF16, rng, seed)
			})
		}
	}
}

// mean16Case runs the collectives of TestMean16OneRounding on g with data
// of type T (confType ct) drawn from rng.
func mean16Case[T Float16 | BFloat16](t *testing.T, g *Group, ct confType, rng *rand.Rand, seed uint64) {
	ctx := context.Background()
	N := g.Size()
	m := 1 + rng.IntN(400) // ReduceScatter's recv length
	if rng.IntN(2) == 0 {
		m |= 1
	}
	n := 1 + 2*rng.IntN(700) // AllReduce's and Reduce's length, odd
	root := rng.IntN(N)
	in, want, twice := mean16Inputs(ct, rng, N, max(m*N, n))
	if N&(N-1) != 0 && twice == 0 {
		t.Fatalf("seed %d: no element of the data tells one rounding from two", seed)
	}
	t.Logf("m=%d n=%d root=%d: %d of %d elements round differently twice", m, n, root, twice, len(want))
	send := make([][]T, N)
	for r := range send {
		send[r] = make([]T, len(in[r]))
		for i, v := range in[r] {
			send[r][i] = T(v)
		}
	}
	// check compares got with want[lo:lo+len(got)].
	check := func(what string, r, lo int, got []T) {
		t.Helper()
		bad := 0
		for i, v := range got {
			if uint64(v) == want[lo+i] {
				continue
			}
			if bad < 4 {
				t.Errorf("seed %d: %s: rank %d, element %d: got %s, want %s (one rounding)",
					seed, what, r, lo+i, ct.format(uint64(v)), ct.format(want[lo+i]))
			}
			bad++
		}
		if bad > 0 {
			t.Fatalf("seed %d: %s: rank %d: %d of %d elements wrong", seed, what, r, bad, len(got))
		}
	}
	recvs := func(k int) [][]T {
		out := make([][]T, N)
		for r := range out {
			out[r] = make([]T, k)
		}
		return out
	}

	recv := recvs(m)
	noErrors(t, onRanks(g, func(c *Comm) error {
		return ReduceScatter(ctx, c, send[c.Rank()][:m*N], recv[c.Rank()], Mean)
	}))
	for r := range N {
		check("ReduceScatter", r, r*m, recv[r])
	}

	recv = recvs(m)
	counts, displs := make([]int, N), make([]int, N)
	for q := range N {
		counts[q], displs[q] = m, q*m
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		return ReduceScatterV(ctx, c, send[c.Rank()][:m*N], recv[c.Rank()], counts, displs, Mean)
	}))
	for r := range N {
		check("ReduceScatterV", r, r*m, recv[r])
	}

	for _, s := range []Strategy{Ring, Tree, Direct} {
		recv = recvs(n)
		noErrors(t, onRanks(g, func(c *Comm) error {
			return AllReduceWith(ctx, c, send[c.Rank()][:n], recv[c.Rank()], Mean, s)
		}))
		for r := range N {
			check("AllReduce "+s.String(), r, 0, recv[r])
		}
	}

	recv = recvs(n)
	noErrors(t, onRanks(g, func(c *Comm) error {
		return Reduce(ctx, c, send[c.Rank()][:n], recv[c.Rank()], Mean, root)
	}))
	check("Reduce", root, 0, recv[root])

	// The tensor forms.
	recv = recvs(max(m, n))
	noErrors(t, onRanks(g, func(c *Comm) error {
		r := c.Rank()
		st, err := NewTensor[T](c, m*N)
		if err != nil {
			return err
		}
		defer st.Close()
		rt, err := NewTensor[T](c, m)
		if err != nil {
			return err
		}
		defer rt.Close()
		if err := st.Upload(send[r][:m*N]); err != nil {
			return err
		}
		if err := ReduceScatterTensor(ctx, c, st, rt, Mean); err != nil {
			return err
		}
		return rt.Download(recv[r][:m])
	}))
	for r := range N {
		check("ReduceScatterTensor", r, r*m, recv[r][:m])
	}
	for _, s := range []Strategy{Ring, Direct} {
		noErrors(t, onRanks(g, func(c *Comm) error {
			r := c.Rank()
			tt, err := NewTensor[T](c, n)
			if err != nil {
				return err
			}
			defer tt.Close()
			if err := tt.Upload(send[r][:n]); err != nil {
				return err
			}
			if err := AllReduceTensor(ctx, c, tt, Mean, s); err != nil {
				return err
			}
			return tt.Download(recv[r][:n])
		}))
		for r := range N {
			check("AllReduceTensor "+s.String(), r, 0, recv[r][:n])
		}
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		r := c.Rank()
		st, err := NewTensor[T](c, n)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := st.Upload(send[r][:n]); err != nil {
			return err
		}
		var rt *Tensor[T]
		if r == root {
			if rt, err = NewTensor[T](c, n); err != nil {
				return err
			}
			defer rt.Close()
		}
		if err := ReduceTensor(ctx, c, st, rt, Mean, root); err != nil {
			return err
		}
		if r == root {
			return rt.Download(recv[r][:n])
		}
		return nil
	}))
	check("ReduceTensor", root, 0, recv[root][:n])
}

// mean16Inputs draws ranks inputs of length l of type ct (bit patterns,
// normal values of magnitude 2^-4 to 2^5 and either sign, so no sum leaves
// the type's range) and returns them with want, the rank-order Mean of
// every element with one rounding (rankOrderRef), and twice, the number of
// elements for which rounding the float32 sum to the type and then the
// quotient gives other bits. Every third element is drawn again, up to 64
// times, until it is such an element (possible only where N is not a power
// of two: a division by a power of two is exact in the normal range).
func mean16Inputs(ct confType, rng *rand.Rand, ranks, l int) (in [][]uint64, want []uint64, twice int) {
	in = make([][]uint64, ranks)
	for r := range in {
		in[r] = make([]uint64, l)
	}
	want = make([]uint64, l)
	vals := make([]uint64, ranks)
	div := float64(ranks)
	for i := range l {
		tries := 1
		if i%3 == 0 {
			tries = 64
		}
		for try := 0; try < tries; try++ {
			for r := range vals {
				x := (1 + rng.Float64()) * float64(int(1)<<(rng.IntN(10))) / 16
				if rng.IntN(2) == 0 {
					x = -x
				}
				vals[r] = ct.encode(x)
			}
			want[i] = rankOrderRef(ct, Mean, vals)
			sum := rankOrderRef(ct, Sum, vals) // the sum rounded to the type
			if ct.encode(float64(float32(ct.float(sum)/div))) != want[i] {
				twice++
				break
			}
		}
		for r := range vals {
			in[r][i] = vals[r]
		}
	}
	return in, want, twice
}
