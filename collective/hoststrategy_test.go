package collective

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// Strategy Host reduces on the CPU with no device work, and its result is
// bitwise the device kernels' (strategy Direct) for every op, f32 and f64,
// with NaN, Inf and signed zeros among the inputs.
func TestHostStrategyMatchesKernels(t *testing.T) {
	arithmetic(t)
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
	_, err := NewGroup(context.Background(), Options{Ranks: 1, Backend: "host", Config: cfg, Transport: newLoopNet(2)[0]})
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("NewGroup with strategy host and a transport of 2 processes: %v, want a *ConfigError", err)
	}
}

// countTr is a transport that counts the calls made on it.
type countTr struct {
	*loopTr
	calls atomic.Int64
}

func (t *countTr) Isend(p []byte, peer, tag int) (backend.Request, error) {
	t.calls.Add(1)
	return t.loopTr.Isend(p, peer, tag)
}

func (t *countTr) Irecv(p []byte, peer, tag int) (backend.Request, error) {
	t.calls.Add(1)
	return t.loopTr.Irecv(p, peer, tag)
}

func (t *countTr) Allgather(ctx context.Context, mine, all []byte) error {
	t.calls.Add(1)
	return t.loopTr.Allgather(ctx, mine, all)
}

func (t *countTr) Dup(ctx context.Context) (backend.Transport, error) {
	t.calls.Add(1)
	return t.loopTr.Dup(ctx)
}

// A Transport of one process makes a group of one process, which works as
// one without a Transport and never calls it: strategy Host configured and
// per call, Auto, the device strategies, Split (its sub-groups in the one
// process), each result exact; the group does not close the caller's
// transport, and closes one it owns (a Split's) whatever the outcome.
func TestTransportOfOneProcess(t *testing.T) {
	ctx := context.Background()
	tr := &countTr{loopTr: newLoopNet(1)[0]}
	cfg := testConfig()
	cfg.Strategy = Host
	const n = 3
	g, err := NewGroup(ctx, Options{Ranks: n, Backend: "host", Config: cfg, Transport: tr})
	if err != nil {
		t.Fatalf("NewGroup with strategy host over a transport of one process: %v", err)
	}
	if g.Processes() != 1 || g.Size() != n || g.LocalSize() != n {
		t.Errorf("%d processes, %d ranks, %d local; want 1, %d, %d", g.Processes(), g.Size(), g.LocalSize(), n, n)
	}
	in := func(r, i int) float32 { return float32((r+1)*(i%5+1) + i) }
	want := func(ranks []int, i int) float32 {
		var s float32
		for _, r := range ranks {
			s += in(r, i)
		}
		return s
	}
	all := []int{0, 1, 2}
	for _, s := range []Strategy{Auto, Host, Direct, Pipelined, Ring, Tree, Hierarchical} {
		noErrors(t, onRanks(g, func(c *Comm) error {
			x := make([]float32, 1001)
			for i := range x {
				x[i] = in(c.Rank(), i)
			}
			if err := AllReduceWith(ctx, c, x, x, Sum, s); err != nil {
				return err
			}
			for i, v := range x {
				if v != want(all, i) {
					return fmt.Errorf("%v: element %d = %v, want %v", s, i, v, want(all, i))
				}
			}
			return nil
		}))
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		sub, err := c.Split(ctx, c.Rank()%2, -c.Rank())
		if err != nil {
			return err
		}
		members := []int{2, 0}
		if c.Rank()%2 == 1 {
			members = []int{1}
		}
		if sub.Group().Processes() != 1 || sub.Size() != len(members) || sub.Rank() != slices.Index(members, c.Rank()) {
			return fmt.Errorf("sub-group rank %d of %d in %d processes, want %d of %d in 1",
				sub.Rank(), sub.Size(), sub.Group().Processes(), slices.Index(members, c.Rank()), len(members))
		}
		x := make([]float32, 1001)
		for i := range x {
			x[i] = in(c.Rank(), i)
		}
		if err := AllReduce(ctx, sub, x, Sum); err != nil {
			return err
		}
		for i, v := range x {
			if v != want(members, i) {
				return fmt.Errorf("sub-group AllReduce: element %d = %v, want %v", i, v, want(members, i))
			}
		}
		return nil
	}))
	if err := g.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if c := tr.calls.Load(); c != 0 || tr.closed.Load() {
		t.Errorf("the group made %d calls on the transport, closed it: %v; want none, false", c, tr.closed.Load())
	}
	// A transport the group owns is closed with the group's outcome.
	for _, ranks := range []int{1, 0} {
		own := &countTr{loopTr: newLoopNet(1)[0]}
		g, err := newGroup(ctx, Options{Ranks: ranks, Backend: "host", Config: testConfig(), Transport: own}, true)
		if (err == nil) != (ranks == 1) || !own.closed.Load() || own.calls.Load() != 0 {
			t.Errorf("newGroup of %d ranks owning a transport of one process: %v; transport closed: %v, %d calls; want it closed, no calls",
				ranks, err, own.closed.Load(), own.calls.Load())
		}
		if g != nil {
			g.Close()
		}
	}
}
