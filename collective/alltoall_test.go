package collective

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestAllToAllGatherScatter draws rank counts, chunk lengths around the
// exchange slot (ChunkBytes 256: 64 f32 or 32 f64 elements per slice),
// roots and element types at random (the seed is printed) and checks
// AllToAll, Gather and Scatter against a plain loop, exactly (distinct
// integers per rank and element).
func TestAllToAllGatherScatter(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, bk := range backendsUnderTest(t) {
		for _, ranks := range []int{1, 2, 3, 5} {
			g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 256 })
			cases := 6
			if bk != "host" {
				cases = 3
			}
			for tc := 0; tc < cases; tc++ {
				m := []int{0, 1, 31, 32, 33, 63, 64, 65, 129, 1000}[rng.IntN(10)]
				root := rng.IntN(ranks)
				f64 := rng.IntN(2) == 0
				name := fmt.Sprintf("%s/ranks=%d/m=%d/root=%d/f64=%v", bk, ranks, m, root, f64)
				t.Log(name)
				if f64 {
					checkTranspose[float64](t, g, name, m, root)
				} else {
					checkTranspose[float32](t, g, name, m, root)
				}
			}
		}
	}
}

func checkTranspose[T Float](t *testing.T, g *Group, name string, m, root int) {
	t.Helper()
	N := g.Size()
	val := func(r, i int) T { return T(r*100000 + i) }
	send := make([][]T, N)
	for r := range send {
		send[r] = make([]T, N*m)
		for i := range send[r] {
			send[r][i] = val(r, i)
		}
	}
	// AllToAll: recv[r][q*m+e] = send[q][r*m+e].
	recv := make([][]T, N)
	for r := range recv {
		recv[r] = make([]T, N*m)
	}
	noErrors(t, onRanks(g, func(c *Comm) error { return AllToAll(context.Background(), c, send[c.Rank()], recv[c.Rank()]) }))
	for r := 0; r < N; r++ {
		for q := 0; q < N; q++ {
			for e := 0; e < m; e++ {
				if got, want := recv[r][q*m+e], send[q][r*m+e]; got != want {
					t.Fatalf("%s AllToAll: rank %d element %d = %v, want %v", name, r, q*m+e, got, want)
				}
			}
		}
	}
	// Gather of every rank's first m elements.
	gath := make([]T, N*m)
	noErrors(t, onRanks(g, func(c *Comm) error {
		var out []T
		if c.Rank() == root {
			out = gath
		}
		return Gather(context.Background(), c, send[c.Rank()][:m], out, root)
	}))
	for q := 0; q < N; q++ {
		for e := 0; e < m; e++ {
			if got, want := gath[q*m+e], val(q, e); got != want {
				t.Fatalf("%s Gather: element %d = %v, want %v", name, q*m+e, got, want)
			}
		}
	}
	// Scatter of root's send.
	scat := make([][]T, N)
	noErrors(t, onRanks(g, func(c *Comm) error {
		scat[c.Rank()] = make([]T, m)
		var in []T
		if c.Rank() == root {
			in = send[root]
		}
		return Scatter(context.Background(), c, in, scat[c.Rank()], root)
	}))
	for r := 0; r < N; r++ {
		for e := 0; e < m; e++ {
			if got, want := scat[r][e], val(root, r*m+e); got != want {
				t.Fatalf("%s Scatter: rank %d element %d = %v, want %v", name, r, e, got, want)
			}
		}
	}
}

// TestAllToAllErrors: bad arguments are typed errors on the caller and
// leave the group usable; ranks that disagree on the chunk length or the
// root fail with a MismatchError before data moves.
func TestAllToAllErrors(t *testing.T) {
	g := openGroup(t, "host", 2)
	ctx := context.Background()
	a := make([]float32, 4)
	errs := onRanks(g, func(c *Comm) error { return AllToAll(ctx, c, a[:3], make([]float32, 3)) })
	for r, err := range errs {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("rank %d, length not a multiple of N: %v", r, err)
		}
	}
	errs = onRanks(g, func(c *Comm) error {
		b := make([]float32, 5)
		return AllToAll(ctx, c, b[:4], b[1:])
	})
	for r, err := range errs {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("rank %d, send and recv partly overlap: %v", r, err)
		}
	}
	errs = onRanks(g, func(c *Comm) error { return Gather(ctx, c, a, make([]float32, 4), 7) })
	for r, err := range errs {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("rank %d, root out of range: %v", r, err)
		}
	}
	errs = onRanks(g, func(c *Comm) error {
		return Scatter(ctx, c, make([]float32, 4), make([]float32, 2), c.Rank()) // roots differ
	})
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("rank %d, roots differ: %v", r, err)
		}
	}
}

// TestAllToAllGatherScatterZeroAllocs: the steady state of each of the
// newer collectives (the V forms included) allocates nothing.
func TestAllToAllGatherScatterZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const ranks, m = 4, 1001
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 4096 })
		send := make([][]float32, ranks)
		recv := make([][]float32, ranks)
		for r := range send {
			send[r] = make([]float32, ranks*m)
			recv[r] = make([]float32, ranks*m)
		}
		counts, displs := []int{m, m, m, m}, []int{0, m, 2 * m, 3 * m}
		for _, coll := range []string{"AllToAll", "Gather", "Scatter", "ReduceScatterV", "AllGatherV", "AllToAllV", "GatherV", "ScatterV"} {
			run := func(c *Comm) error {
				ctx, r := context.Background(), c.Rank()
				switch coll {
				case "AllToAll":
					return AllToAll(ctx, c, send[r], recv[r])
				case "Gather":
					return Gather(ctx, c, send[r][:m], recv[r], 1)
				case "ReduceScatterV":
					return ReduceScatterV(ctx, c, send[r], recv[r][:m], counts, displs, Sum)
				case "AllGatherV":
					return AllGatherV(ctx, c, send[r][:m], recv[r], counts, displs)
				case "AllToAllV":
					return AllToAllV(ctx, c, send[r], counts, displs, recv[r], counts, displs)
				case "GatherV":
					return GatherV(ctx, c, send[r][:m], recv[r], counts, displs, 3)
				case "ScatterV":
					return ScatterV(ctx, c, send[r], recv[r][:m], counts, displs, 0)
				}
				return Scatter(ctx, c, send[r], recv[r][:m], 2)
			}
			l := &rankLoop{g: g, done: make(chan error, ranks)}
			for r := 1; r < ranks; r++ {
				ch := make(chan struct{})
				l.go_ = append(l.go_, ch)
				go func(r int, ch chan struct{}) {
					for range ch {
						l.done <- run(g.Comm(r))
					}
				}(r, ch)
			}
			call := func() error { return run(g.Comm(0)) }
			for i := 0; i < 3; i++ {
				if err := l.step(call); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			a := testing.AllocsPerRun(20, func() {
				if e := l.step(call); e != nil {
					err = e
				}
			})
			l.stop()
			if err != nil {
				t.Fatal(err)
			}
			if a != 0 {
				t.Errorf("%s %s: %v allocations per call, want 0", bk, coll, a)
			}
		}
	}
}
