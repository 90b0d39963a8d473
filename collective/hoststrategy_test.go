package collective

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// Strategy Host reduces on the CPU with no device work, and its result is
// bitwise the device kernels' (strategy Direct) for every op, f32 and f64,
// with NaN, Inf and signed zeros among the inputs.
func TestHostStrategyMatchesKernels(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3)
		for _, n := range []int{0, 1, 2, 3, 7, 255, 256, 257, 1023, 4097} {
			for _, op := range []Op{Sum, Prod, Max, Min, Mean} {
				in := make([][]float64, 3)
				for r := range in {
					in[r] = make([]float64, n)
					for i := range in[r] {
						switch rng.IntN(20) {
						case 0:
							in[r][i] = math.NaN()
						case 1:
							in[r][i] = math.Inf(1 - 2*rng.IntN(2))
						case 2:
							in[r][i] = math.Copysign(0, float64(1-2*rng.IntN(2)))
						default:
							in[r][i] = rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20))
						}
					}
				}
				check := func(f64 bool) {
					var before []int64
					for r := 0; r < 3; r++ {
						ct := g.Comm(r).dev.Counters()
						before = append(before, ct.Dispatches.Load()+ct.Copies.Load()+ct.Submits.Load())
					}
					got := make([][]float64, 2)
					for si, s := range []Strategy{Host, Direct} {
						res := make([][]float64, 3)
						noErrors(t, onRanks(g, func(c *Comm) error {
							r := c.Rank()
							if f64 {
								x := append([]float64(nil), in[r]...)
								err := AllReduceWith(context.Background(), c, x, x, op, s)
								res[r] = x
								return err
							}
							x := make([]float32, n)
							for i, v := range in[r] {
								x[i] = float32(v)
							}
							err := AllReduceWith(context.Background(), c, x, x, op, s)
							res[r] = make([]float64, n)
							for i, v := range x {
								res[r][i] = float64(v)
							}
							return err
						}))
						for r := 1; r < 3; r++ {
							if !bitsEqual(res[r], res[0]) {
								t.Fatalf("%s %v n=%d f64=%v %v: rank %d differs from rank 0", bk, op, n, f64, s, r)
							}
						}
						got[si] = res[0]
						if s == Host {
							for r := 0; r < 3; r++ {
								ct := g.Comm(r).dev.Counters()
								if d := ct.Dispatches.Load() + ct.Copies.Load() + ct.Submits.Load() - before[r]; d != 0 {
									t.Fatalf("%s: strategy host recorded %d device commands on rank %d", bk, d, r)
								}
							}
						}
					}
					if !bitsEqual(got[0], got[1]) {
						t.Fatalf("%s %v n=%d f64=%v: host %s differs from the kernels' %s", bk, op, n, f64, firstDiff(got[0], got[1]), bk)
					}
				}
				check(false)
				check(true)
			}
		}
	}
}

// Strategy host across processes is ErrUnsupported (per call) or a
// ConfigError (configured), never a hang.
func TestHostStrategyAcrossProcesses(t *testing.T) {
	gs := openProcesses(t, "host", 2, 1)
	errs := onAllRanks(gs, func(c *Comm) error {
		return AllReduceWith(context.Background(), c, []float32{1}, []float32{1}, Sum, Host)
	})
	if len(errs) != 2 {
		t.Fatalf("errors %v, want one per rank", errs)
	}
	for _, err := range errs {
		if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrMismatch) {
			t.Errorf("%v: want ErrUnsupported (or the peer's mismatch)", err)
		}
	}
	cfg := testConfig()
	cfg.Strategy = Host
	_, err := NewGroup(context.Background(), Options{Ranks: 1, Backend: "host", Config: cfg, Transport: newLoopNet(1)[0]})
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("NewGroup with strategy host and a transport: %v, want a *ConfigError", err)
	}
}
