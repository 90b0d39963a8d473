package collective

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gocoll/gocoll/internal/faultinject"
)

// TestShareDeviceStrategies runs every strategy, op and dtype for 3 ranks
// that share one logical Vulkan device (the default; on lavapipe also one
// queue), at a few sizes, against the float64 reference.
func TestShareDeviceStrategies(t *testing.T) {
	if !slices.Contains(backendsUnderTest(t), "vulkan") {
		t.Skip("vulkan backend not available")
	}
	const ranks = 3
	g := openGroup(t, "vulkan", ranks, func(o *Options) {
		o.ChunkBytes = 4096
		o.Config.LocalGroupSize = 2
	})
	for _, n := range []int{0, 1, ranks + 1, 4097} {
		for _, s := range allStrategies {
			for _, op := range allOps {
				inputs := make([][]float64, ranks)
				for r := range inputs {
					inputs[r] = make([]float64, n)
					for i := range inputs[r] {
						inputs[r][i] = exactInput(op, r, i)
					}
				}
				want := refReduce(inputs, op)
				maxUlps := 0.0
				if op == Mean {
					maxUlps = 1
				}
				name := fmt.Sprintf("n=%d/%s/%s", n, s, op)
				t.Run(name+"/float", func(t *testing.T) {
					checkResult(t, runWith[float32](t, g, inputs, op, s, n%2 == 0), want, op, maxUlps)
				})
				t.Run(name+"/double", func(t *testing.T) {
					checkResult(t, runWith[float64](t, g, inputs, op, s, n%2 == 1), want, op, maxUlps)
				})
			}
		}
	}
}

// TestSharedTensorFailures: a device-resident all-reduce among ranks that
// share memory (the host backend) fails on every rank with a typed error,
// promptly, when the leader's (rank 0's) device fails or hangs, or when a
// peer's context ends while the leader's device works; the group is then
// broken for every rank.
func TestSharedTensorFailures(t *testing.T) {
	fi := faultBackend(t, "host")
	const ranks, n = 3, 5000
	cases := []struct {
		name  string
		plan  faultinject.Plan
		peer  time.Duration // rank 1's context deadline (0: none)
		check func(t *testing.T, errs []error)
	}{
		{"leader fails to record", faultinject.Plan{Kind: faultinject.FailRecord, Device: 0, K: 1}, 0, func(t *testing.T, errs []error) {
			if !errors.Is(errs[0], ErrOutOfMemory) {
				t.Errorf("rank 0: %v, want ErrOutOfMemory", errs[0])
			}
			for r := 1; r < ranks; r++ {
				if !errors.Is(errs[r], ErrGroupBroken) || !errors.Is(errs[r], ErrOutOfMemory) {
					t.Errorf("rank %d: %v, want ErrGroupBroken caused by ErrOutOfMemory", r, errs[r])
				}
			}
		}},
		{"leader's submit fails", faultinject.Plan{Kind: faultinject.FailSubmit, Device: 0, K: 1}, 0, func(t *testing.T, errs []error) {
			for r := 1; r < ranks; r++ {
				if !errors.Is(errs[r], ErrGroupBroken) {
					t.Errorf("rank %d: %v, want ErrGroupBroken", r, errs[r])
				}
			}
		}},
		{"leader's device hangs", faultinject.Plan{Kind: faultinject.HangWait, Device: 0, K: 1}, 0, func(t *testing.T, errs []error) {
			// The leader times out, drains, and declares its device lost;
			// the others learn it from the broken group (they wait for the
			// leader's verdict, not on timers of their own).
			if !errors.Is(errs[0], ErrDeviceLost) {
				t.Errorf("rank 0: %v, want ErrDeviceLost", errs[0])
			}
			for r := 1; r < ranks; r++ {
				if !errors.Is(errs[r], ErrGroupBroken) || !errors.Is(errs[r], ErrTimeout) {
					t.Errorf("rank %d: %v, want ErrGroupBroken caused by the leader's ErrTimeout", r, errs[r])
				}
			}
		}},
		{"peer's context ends while the leader's device works", faultinject.Plan{Kind: faultinject.DelayWait, Device: 0, K: 1, Delay: 2 * time.Second}, 50 * time.Millisecond, func(t *testing.T, errs []error) {
			if !errors.Is(errs[1], context.DeadlineExceeded) {
				t.Errorf("rank 1: %v, want context.DeadlineExceeded", errs[1])
			}
			// The others either completed (the leader's pass is whole:
			// every tensor holds the sum) or learnt that the group broke.
			for _, r := range []int{0, 2} {
				if errs[r] != nil && !errors.Is(errs[r], ErrGroupBroken) {
					t.Errorf("rank %d: %v, want nil or ErrGroupBroken", r, errs[r])
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inj := fi.Arm(tc.plan)
			cfg := testConfig()
			cfg.CommunicationTimeout = 300 * time.Millisecond
			g, err := NewGroup(context.Background(), Options{Ranks: ranks, Backend: "faultinject-host", Config: cfg, DrainLimit: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				// A hung device is declared lost; Close says so.
				if err := g.Close(); err != nil && !errors.Is(err, ErrDeviceLost) {
					t.Errorf("Close: %v", err)
				}
			}()
			if !g.sharedMem {
				t.Fatal("host ranks do not share memory")
			}
			ts := make([]*Tensor[float32], ranks)
			for r := range ts {
				tt, err := NewTensor[float32](g.Comm(r), n)
				if err != nil {
					t.Fatal(err)
				}
				defer tt.Close()
				ts[r] = tt
			}
			start := time.Now()
			errs := onRanks(g, func(c *Comm) error {
				ctx := context.Background()
				if c.Rank() == 1 && tc.peer > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.peer)
					defer cancel()
				}
				return AllReduceTensor(ctx, c, ts[c.Rank()], Sum, Direct)
			})
			if d := time.Since(start); d > 1500*time.Millisecond {
				t.Errorf("the failing all-reduce took %v", d)
			}
			if inj.Fired() == "" {
				t.Fatalf("%v did not fire; errors %v", tc.plan, errs)
			}
			for r, err := range errs {
				var e *Error
				if err != nil && (!errors.As(err, &e) || e.Rank != r) {
					t.Errorf("rank %d: %v is not an *Error of rank %d", r, err, r)
				}
			}
			tc.check(t, errs)
			// The group is broken for every rank.
			errs = onRanks(g, func(c *Comm) error {
				return AllReduceTensor(context.Background(), c, ts[c.Rank()], Sum, Direct)
			})
			for r, err := range errs {
				if !errors.Is(err, ErrGroupBroken) {
					t.Errorf("after the failure, rank %d: %v, want ErrGroupBroken", r, err)
				}
			}
		})
	}
}
