package collective

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestNewCollectivesAbsentRank: a rank that never comes makes the others'
// AllToAll, AllToAllV, Gather, Scatter, ReduceScatterV, Split and Batch
// fail with ErrTimeout within the timeout, their recv buffers untouched
// (the fingerprint rendezvous fails before data moves).
func TestNewCollectivesAbsentRank(t *testing.T) {
	const m = 300
	counts, displs := []int{m, m, m}, []int{0, m, 2 * m}
	calls := map[string]func(ctx context.Context, c *Comm, send, recv []float32) error{
		"AllToAll": func(ctx context.Context, c *Comm, send, recv []float32) error { return AllToAll(ctx, c, send, recv) },
		"AllToAllV": func(ctx context.Context, c *Comm, send, recv []float32) error {
			return AllToAllV(ctx, c, send, counts, displs, recv, counts, displs)
		},
		"Gather": func(ctx context.Context, c *Comm, send, recv []float32) error {
			return Gather(ctx, c, send[:m], recv, 0)
		},
		"Scatter": func(ctx context.Context, c *Comm, send, recv []float32) error {
			return Scatter(ctx, c, send, recv[:m], 0)
		},
		"ReduceScatterV": func(ctx context.Context, c *Comm, send, recv []float32) error {
			return ReduceScatterV(ctx, c, send, recv[:m], counts, displs, Sum)
		},
		"Split": func(ctx context.Context, c *Comm, _, _ []float32) error { _, err := c.Split(ctx, 0, 0); return err },
		"Batch": func(ctx context.Context, c *Comm, send, recv []float32) error {
			b := c.Batch()
			BatchAllReduce(b, send, Sum)
			return b.Run(ctx)
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			g := openGroup(t, "host", 3, func(o *Options) { o.Config.CommunicationTimeout = 200 * time.Millisecond })
			errs := onRanks(g, func(c *Comm) error {
				if c.Rank() == 2 {
					return nil // never comes
				}
				send := make([]float32, 3*m)
				recv := make([]float32, 3*m)
				for i := range recv {
					recv[i] = 7
				}
				start := time.Now()
				err := call(context.Background(), c, send, recv)
				if !errors.Is(err, ErrTimeout) {
					return fmt.Errorf("got %v, want ErrTimeout", err)
				}
				if d := time.Since(start); d > 5*time.Second {
					return fmt.Errorf("failed after %v", d)
				}
				for i, v := range recv {
					if v != 7 {
						return fmt.Errorf("recv[%d] written (%v) by a call that failed before data moved", i, v)
					}
				}
				return nil
			})
			noErrors(t, errs)
		})
	}
}

// TestNewCollectivesCancel: cancelling one rank's context in the middle of
// large AllToAll, Scatter and AllGatherV calls on lavapipe (or host) makes
// every rank return promptly with an error; the group's Close then returns
// without hanging.
func TestNewCollectivesCancel(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for _, name := range []string{"AllToAll", "Scatter", "AllGatherV"} {
			t.Run(bk+"/"+name, func(t *testing.T) {
				g := openGroup(t, bk, 3, func(o *Options) {
					o.ChunkBytes = 4096
					o.Config.CommunicationTimeout = 5 * time.Second
					o.DrainLimit = 5 * time.Second
				})
				const m = 1 << 18
				counts, displs := []int{m, m, m}, []int{0, m, 2 * m}
				start := time.Now()
				errs := onRanks(g, func(c *Comm) error {
					ctx := context.Background()
					if c.Rank() == 1 {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, 2*time.Millisecond)
						defer cancel()
					}
					send := make([]float32, 3*m)
					recv := make([]float32, 3*m)
					switch name {
					case "AllToAll":
						return AllToAll(ctx, c, send, recv)
					case "Scatter":
						return Scatter(ctx, c, send, recv[:m], 0)
					}
					return AllGatherV(ctx, c, send[:m], recv, counts, displs)
				})
				if d := time.Since(start); d > 20*time.Second {
					t.Fatalf("the ranks returned after %v", d)
				}
				failed := 0
				for _, err := range errs {
					if err != nil {
						failed++
					}
				}
				if errs[1] == nil {
					// The call may finish inside 2 ms on a fast machine; then
					// everything must have succeeded.
					if failed != 0 {
						t.Fatalf("rank 1 succeeded but others failed: %v", errs)
					}
					return
				}
				if !errors.Is(errs[1], context.DeadlineExceeded) {
					t.Errorf("rank 1: %v, want its context's error", errs[1])
				}
				if failed != 3 {
					t.Errorf("a rank's call failed, but only %d of 3 returned an error: %v", failed, errs)
				}
			})
		}
	}
}
