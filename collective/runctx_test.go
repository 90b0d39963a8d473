package collective

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestRunCtxZeroAllocs: steady-state collectives allocate nothing under
// the ctx Group.Run passes, nor under a ctx with a deadline made once
// before the loop (every wait of a call is bounded by that ctx, with no
// per-call registration on it).
func TestRunCtxZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const ranks = 4
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, ranks)
		for _, size := range []int{16 << 10, 1 << 20} {
			n := size / 4
			send := make([][]float32, ranks)
			recv := make([][]float32, ranks)
			for r := range send {
				send[r] = make([]float32, n)
				recv[r] = make([]float32, n*ranks)
			}
			for _, cl := range ctxColls {
				for _, kind := range []string{"run", "deadline"} {
					name := fmt.Sprintf("%s/%s/%dKiB/%s", bk, cl.name, size>>10, kind)
					a := runCtxAllocs(t, g, kind, func(ctx context.Context, c *Comm) error {
						return cl.call(ctx, c, send[c.Rank()], recv[c.Rank()])
					})
					if a != 0 {
						t.Errorf("%s: %v allocations per call, want 0", name, a)
					}
				}
			}
		}
	}
}

// ctxColls are the collectives whose allocations per call the ctx tests
// count, on float32 slices: recv holds a rank's send from every rank.
var ctxColls = []struct {
	name string
	call func(ctx context.Context, c *Comm, send, recv []float32) error
}{
	{"AllReduce", func(ctx context.Context, c *Comm, send, _ []float32) error {
		return AllReduce(ctx, c, send, Sum)
	}},
	{"AllGather", func(ctx context.Context, c *Comm, send, recv []float32) error {
		return AllGather(ctx, c, send, recv)
	}},
	{"ReduceScatter", func(ctx context.Context, c *Comm, send, recv []float32) error {
		return ReduceScatter(ctx, c, recv, send, Sum)
	}},
	{"Broadcast", func(ctx context.Context, c *Comm, send, _ []float32) error {
		return Broadcast(ctx, c, send, 1)
	}},
}

// runCtxAllocs measures the allocations of one call of every rank inside
// g.Run: rank 0 measures while the others make the same calls. kind "run"
// uses Run's ctx, "deadline" a ctx with a timeout each rank makes once
// before its loop, "background" context.Background.
func runCtxAllocs(t *testing.T, g *Group, kind string, call func(ctx context.Context, c *Comm) error) float64 {
	t.Helper()
	return groupsCtxAllocs(t, []*Group{g}, kind, call)
}

// groupsCtxAllocs is runCtxAllocs over the groups gs of one group's
// processes (each process's Run at once; global rank 0 measures):
// testing.AllocsPerRun counts the whole OS process's allocations, every
// simulated process's among them.
func groupsCtxAllocs(t *testing.T, gs []*Group, kind string, call func(ctx context.Context, c *Comm) error) float64 {
	t.Helper()
	const warm, runs = 3, 20
	var allocs float64
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for p, g := range gs {
		wg.Go(func() {
			errs[p] = g.Run(context.Background(), func(ctx context.Context, c *Comm) error {
				switch kind {
				case "background":
					ctx = context.Background()
				case "deadline":
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Minute)
					defer cancel()
				}
				for i := 0; i < warm; i++ {
					if err := call(ctx, c); err != nil {
						return err
					}
				}
				if c.Rank() != 0 {
					for i := 0; i < runs+1; i++ { // AllocsPerRun's warm-up, then runs
						if err := call(ctx, c); err != nil {
							return err
						}
					}
					return nil
				}
				var err error
				allocs = testing.AllocsPerRun(runs, func() {
					if e := call(ctx, c); e != nil && err == nil {
						err = e
					}
				})
				return err
			})
		})
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", p, err)
		}
	}
	return allocs
}

// TestCloseReleasesCtxWatch: after Group.Close no comm keeps a
// registration on the context its calls ran under (it would keep the group
// reachable from a long-lived context).
func TestCloseReleasesCtxWatch(t *testing.T) {
	g, err := NewGroup(context.Background(), Options{Ranks: 2, Backend: "host", Config: testConfig()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	noErrors(t, onRanks(g, func(c *Comm) error {
		x := make([]float32, 64<<10)
		if err := AllReduce(ctx, c, x, Sum); err != nil {
			return err
		}
		// The point-to-point operations' shared watch of ctx.
		ws, wr := SendAsync(ctx, c, x, 1-c.Rank()), RecvAsync(ctx, c, make([]float32, len(x)), 1-c.Rank())
		return WaitAll(ctx, ws, wr)
	}))
	for _, c := range g.comms {
		if c.lane.Watches() != 1 {
			t.Errorf("rank %d: %d registrations on the point-to-point operations' contexts, want 1", c.rank, c.lane.Watches())
		}
		if !c.wctx.Registered() {
			// The calls' device waits did not block: arm as one does.
			c.wctx.Arm(ctx, time.Hour)
			c.wctx.Disarm()
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range g.comms {
		if c.wctx.Registered() || c.lane.Watches() != 0 {
			t.Errorf("rank %d keeps a registration on its context after Close", c.rank)
		}
	}
}
