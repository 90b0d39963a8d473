package collective

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
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
			// A call still waiting after 5 s logs every goroutine: where it
			// waits (logged before the test returns: mu, over).
			var mu sync.Mutex
			over := false
			dump := time.AfterFunc(5*time.Second, func() {
				mu.Lock()
				defer mu.Unlock()
				if !over {
					buf := make([]byte, 1<<20)
					t.Logf("still waiting after 5 s; goroutines:\n%s", buf[:runtime.Stack(buf, true)])
				}
			})
			defer func() {
				dump.Stop()
				mu.Lock()
				over = true
				mu.Unlock()
			}()
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
					return fmt.Errorf("failed after %v: %v", d, err)
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
// large AllToAll, Scatter, AllGatherV, AllGather and ReduceScatter calls on lavapipe (or host) makes
// every rank return promptly, each with a defined outcome: a rank that
// returns nil holds the exact result (it got everything it needed from rank
// 1 before rank 1's deadline ended, so rank 1 failing in its own work
// afterwards cannot take that back), a rank that fails returns a typed error
// (rank 1 its context's), and rank 1's recv is untouched when it fails. The
// group's Close then returns without hanging.
func TestNewCollectivesCancel(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for _, name := range []string{"AllToAll", "Scatter", "AllGatherV", "AllGather", "ReduceScatter"} {
			t.Run(bk+"/"+name, func(t *testing.T) {
				g := openGroup(t, bk, 3, func(o *Options) {
					o.ChunkBytes = 4096
					o.Config.CommunicationTimeout = 5 * time.Second
					o.DrainLimit = 5 * time.Second
				})
				const m = 1 << 18
				const sentinel = -7
				counts, displs := []int{m, m, m}, []int{0, m, 2 * m}
				// rank r's send element i is r<<20 | i (exact in float32).
				val := func(r, i int) float32 { return float32(r<<20 | i) }
				recvs := make([][]float32, 3)
				start := time.Now()
				errs := onRanks(g, func(c *Comm) error {
					ctx := context.Background()
					if c.Rank() == 1 {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, 2*time.Millisecond)
						defer cancel()
					}
					send := make([]float32, 3*m)
					for i := range send {
						send[i] = val(c.Rank(), i)
					}
					recv := make([]float32, 3*m)
					for i := range recv {
						recv[i] = sentinel
					}
					recvs[c.Rank()] = recv
					switch name {
					case "AllToAll":
						return AllToAll(ctx, c, send, recv)
					case "Scatter":
						return Scatter(ctx, c, send, recv[:m], 0)
					case "AllGather":
						return AllGather(ctx, c, send[:m], recv)
					case "ReduceScatter":
						return ReduceScatter(ctx, c, send, recv[:m], Sum)
					}
					return AllGatherV(ctx, c, send[:m], recv, counts, displs)
				})
				if d := time.Since(start); d > 20*time.Second {
					t.Fatalf("the ranks returned after %v", d)
				}
				// want: rank r's exact result.
				want := func(r, i int) float32 {
					switch name {
					case "AllToAll": // block j of rank r's recv is block r of rank j's send
						j := i / m
						return val(j, r*m+i%m)
					case "Scatter": // block r of root 0's send, in recv[:m]
						if i >= m {
							return sentinel
						}
						return val(0, r*m+i)
					case "ReduceScatter": // block r of the ranks' sends summed, in recv[:m]
						if i >= m {
							return sentinel
						}
						return val(0, r*m+i) + val(1, r*m+i) + val(2, r*m+i)
					}
					return val(i/m, i%m) // AllGather(V): rank j's first m elements at j*m
				}
				for r, err := range errs {
					if err == nil {
						for i, v := range recvs[r] {
							if v != want(r, i) {
								t.Fatalf("rank %d returned nil, recv[%d] = %v, want %v", r, i, v, want(r, i))
							}
						}
						continue
					}
					var ce *Error
					if !errors.As(err, &ce) && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("rank %d: %v (%T), want a *collective.Error or its context's error", r, err, err)
					}
				}
				if errs[1] == nil {
					return // the call finished inside 2 ms: every result was checked above
				}
				if !errors.Is(errs[1], context.DeadlineExceeded) {
					t.Errorf("rank 1: %v, want its context's error", errs[1])
				}
				for i, v := range recvs[1] {
					if v != sentinel {
						t.Fatalf("rank 1 failed, yet its recv[%d] was written (%v)", i, v)
					}
				}
			})
		}
	}
}
