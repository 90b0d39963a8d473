package collective

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/gocoll/gocoll/internal/steps"
)

// The fused ring and tree steps (one ReduceMulti pass that reduces or
// copies and sends) move every bit: Broadcast and AllGather of random bit
// patterns (NaN payloads, subnormals, -0, Inf) arrive unchanged, and the
// all-reduce suites pass, with the fused copies forced on.
func TestFusedSteps(t *testing.T) {
	was := steps.FuseCopyAlways
	steps.FuseCopyAlways = true
	defer func() { steps.FuseCopyAlways = was }()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, bk := range backendsUnderTest(t) {
		for _, perRank := range []bool{false, true} {
			g := openGroup(t, bk, 4, func(o *Options) { o.ChunkBytes = 1024; o.DevicePerRank = perRank })
			for _, n := range []int{1, 7, 255, 256, 257, 1000, 4099} {
				fusedBits[uint32, float32](t, g, rng, n, func(b uint32) float32 { return math.Float32frombits(b) })
				fusedBits[uint64, float64](t, g, rng, n, func(b uint64) float64 { return math.Float64frombits(b) })
			}
		}
	}
	t.Run("AllReduceRandom", TestAllReduceRandom)
	t.Run("AllReduceNaNInf", TestAllReduceNaNInf)
}

func fusedBits[B uint32 | uint64, F float32 | float64](t *testing.T, g *Group, rng *rand.Rand, n int, from func(B) F) {
	t.Helper()
	N := g.Size()
	var zero B
	special := []B{0, B(1) << (8*unsafe.Sizeof(zero) - 1), 1, 3} // +0, -0, the smallest subnormals
	gen := func() B {
		if rng.IntN(8) == 0 {
			return special[rng.IntN(len(special))]
		}
		return B(rng.Uint64())
	}
	part := make([][]F, N)
	full := make([][]F, N)
	bcast := make([][]F, N)
	want := make([]B, N*n)
	wantB := make([]B, N*n)
	for r := range part {
		part[r] = make([]F, n)
		full[r] = make([]F, N*n)
		bcast[r] = make([]F, N*n)
		for i := range part[r] {
			b := gen()
			want[r*n+i] = b
			part[r][i] = from(b)
		}
	}
	for i := range wantB {
		wantB[i] = gen()
		bcast[1][i] = from(wantB[i])
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		if err := AllGather(context.Background(), c, part[c.Rank()], full[c.Rank()]); err != nil {
			return err
		}
		return Broadcast(context.Background(), c, bcast[c.Rank()], 1)
	}))
	for r := 0; r < N; r++ {
		for i := range want {
			if got := bitsOf[B, F](full[r][i]); got != want[i] {
				t.Fatalf("%s n=%d: AllGather rank %d element %d: bits %#x, want %#x", g.bk, n, r, i, got, want[i])
			}
			if got := bitsOf[B, F](bcast[r][i]); got != wantB[i] {
				t.Fatalf("%s n=%d: Broadcast rank %d element %d: bits %#x, want %#x", g.bk, n, r, i, got, wantB[i])
			}
		}
	}
}

func bitsOf[B uint32 | uint64, F float32 | float64](f F) B {
	switch v := any(f).(type) {
	case float32:
		return B(math.Float32bits(v))
	case float64:
		return B(math.Float64bits(v))
	}
	return 0
}
