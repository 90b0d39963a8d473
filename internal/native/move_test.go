package native

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/waitctx"
)

// TestMoveOneProcess: a Move among the L ranks of one process (random
// counts, 0 included, and scattered offsets, seed logged; in one call, and
// split into rounds of 5 and 17 bytes) delivers every
// range where a plain loop puts it and leaves the rest of each recv alone;
// with Reduce each rank's blocks are summed in rank order (exact int32,
// wrapping); with Check a count that differs from the sender's is named in
// the Outcome and nothing moves.
func TestMoveOneProcess(t *testing.T) {
	const L = 3
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	var w waitctx.Ctx
	w.Init(make(chan struct{}))
	defer w.Release()
	ints := func() [][]int {
		v := make([][]int, L)
		for i := range v {
			v[i] = make([]int, L)
		}
		return v
	}
	// Limits of 5 and 17 bytes split every exchange into rounds of 5 and
	// 17 bytes (one process: W = the limit), cutting pieces anywhere.
	defer SetMaxMoveForTest(0)
	for round := range 60 {
		limit := []int{0, 5, 17}[round%3]
		SetMaxMoveForTest(limit)
		mv := &Move{SC: ints(), SD: ints(), RC: ints(), RD: ints(), Recvs: make([][]byte, L), ES: 4, Check: true}
		sends := make([][]byte, L)
		for i := range L { // rank i sends SC[i][j] to j, from offsets spread out with gaps
			at := 0
			for j := range L {
				at += rng.IntN(3)
				mv.SC[i][j], mv.SD[i][j] = rng.IntN(6), at
				mv.RC[j][i] = mv.SC[i][j]
				at += mv.SC[i][j]
			}
			v := make([]int32, at+rng.IntN(2))
			for k := range v {
				v[k] = rng.Int32()
			}
			sends[i] = bytesOf(v)
		}
		for j := range L { // rank j receives from i in reverse order
			at := 0
			for i := L - 1; i >= 0; i-- {
				mv.RD[j][i] = at
				at += mv.RC[j][i] + rng.IntN(2)
			}
			mv.Recvs[j] = bytesOf(slices.Repeat([]int32{-7}, at))
		}
		want := make([][]int32, L)
		for j := range L {
			want[j] = i32s(mv.Recvs[j])
			for i := range L {
				copy(want[j][mv.RD[j][i]:], i32s(sends[i])[mv.SD[i][j]:][:mv.SC[i][j]])
			}
		}
		tr := &one{calls: map[string]int{}}
		var pools Pools
		l := Leader{NC: tr, Tr: tr, P: 1, L: L, N: L, Sends: sends, Pools: &pools, W: &w, Timeout: time.Minute}
		bad := round%4 == 3
		total := 0
		for i := range L {
			for j := range L {
				total += mv.SC[i][j] * 4
			}
		}
		if bad {
			mv.RC[1][2]++
		}
		if err := l.Move(context.Background(), mv); err != nil {
			t.Fatal(err)
		}
		out, _ := pools.MoveOutcome(0)
		if bad {
			if !out.Disagree || out.Bad[1] != (Mismatch{Peer: 2, Want: mv.RC[1][2], Got: mv.RC[1][2] - 1}) || out.Bad[0].Peer != -1 || tr.calls["alltoallv"] != 0 {
				t.Fatalf("round %d: a disagreeing count: outcome %+v, calls %v; want rank 1's mismatch with rank 2, nothing moved", round, *out, tr.calls)
			}
			continue
		}
		for j := range L {
			if got := i32s(mv.Recvs[j]); out.Disagree || !slices.Equal(got, want[j]) {
				t.Fatalf("round %d (limit %d): rank %d received %v, want %v (outcome %+v)", round, limit, j, got, want[j], *out)
			}
		}
		if rounds := tr.calls["alltoallv"]; limit > 0 && rounds != max(1, (total+limit-1)/limit) {
			t.Fatalf("round %d: %d bytes in %d Alltoallv calls with a limit of %d", round, total, rounds, limit)
		}
		// ReduceScatterV: rank j's block is the least SC[i][j] of every i.
		for j := range L {
			m := mv.SC[0][j]
			for i := range L {
				m = min(m, mv.SC[i][j])
			}
			for i := range L {
				mv.SC[i][j] = m
				mv.RC[j][i] = m
			}
			mv.Recvs[j] = make([]byte, 4*m)
		}
		mv.Reduce, mv.DT, mv.Op, mv.Scale = true, backend.I32, backend.Sum, 1
		if err := l.Move(context.Background(), mv); err != nil {
			t.Fatal(err)
		}
		for j := range L {
			sum := make([]int32, mv.SC[0][j])
			for i := range L {
				for k, x := range i32s(sends[i])[mv.SD[i][j]:][:len(sum)] {
					sum[k] += x
				}
			}
			if got := i32s(mv.Recvs[j]); !slices.Equal(got, sum) {
				t.Fatalf("round %d (limit %d): reduced block of rank %d: %v, want %v", round, limit, j, got, sum)
			}
		}
	}
}
