package ddp

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/collective"
)

// TestArenaCloseRacesSync closes rank 0's Arena at a random moment while
// every rank syncs its arena (Sync, SyncAsync, SyncAll over the views):
// each step ends waited and correct or with a typed error, never a crash.
func TestArenaCloseRacesSync(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	sizes := []int{3, 17, 5}
	forms := []struct {
		name string
		run  func(ctx context.Context, s *Sync[float32], a *Arena[float32], flat []float32, views [][]float32) error
	}{
		{"Sync", func(ctx context.Context, s *Sync[float32], a *Arena[float32], flat []float32, views [][]float32) error {
			return s.Sync(ctx, flat)
		}},
		{"SyncAsync", func(ctx context.Context, s *Sync[float32], a *Arena[float32], flat []float32, views [][]float32) error {
			return s.SyncAsync(ctx, flat).Wait(ctx)
		}},
		{"SyncAll", func(ctx context.Context, s *Sync[float32], a *Arena[float32], flat []float32, views [][]float32) error {
			return s.SyncAll(ctx, views)
		}},
	}
	for _, bk := range backendsUnderTest(t) {
		t.Run(bk, func(t *testing.T) {
			short := func(o *collective.Options) { o.Config.CommunicationTimeout = 2 * time.Second }
			for _, f := range forms {
				for try := 0; try < 4; try++ {
					g := openGroup(t, bk, 2, short)
					N := g.Size()
					arenas := make([]*Arena[float32], N)
					flats := make([][]float32, N)
					views := make([][][]float32, N)
					syncs := make([]*Sync[float32], N)
					for r := range arenas {
						a, err := NewArena[float32](sizes...)
						if err != nil {
							t.Fatal(err)
						}
						arenas[r], flats[r] = a, a.Flat()
						for i := 0; i < a.Len(); i++ {
							views[r] = append(views[r], a.View(i))
						}
						for i := range flats[r] {
							flats[r][i] = float32(r*100 + i)
						}
						if syncs[r], err = New[float32](g.Comm(r), Options{Logger: quiet}); err != nil {
							t.Fatal(err)
						}
					}
					var wg sync.WaitGroup
					var closeErr error
					if rng.IntN(4) == 0 {
						closeErr = arenas[0].Close()
					} else {
						wg.Add(1)
						go func() {
							defer wg.Done()
							time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
							closeErr = arenas[0].Close()
						}()
					}
					errs := onRanks(g, func(c *collective.Comm) error {
						r := c.Rank()
						return f.run(context.Background(), syncs[r], arenas[r], flats[r], views[r])
					})
					wg.Wait()
					if closeErr != nil {
						t.Fatalf("%s: Arena.Close: %v", f.name, closeErr)
					}
					var e *collective.Error
					for r, err := range errs {
						if err != nil && !errors.As(err, &e) && !errors.Is(err, collective.ErrClosed) {
							t.Errorf("%s: rank %d: untyped error %T: %v", f.name, r, err, err)
						}
					}
					if errs[1] == nil {
						for i, v := range flats[1] {
							// Sum of r*100+i over 2 ranks; the default Sync averages.
							if want := float32(100+2*i) / 2; v != want {
								t.Fatalf("%s: rank 1 element %d: %v, want %v (nil error)", f.name, i, v, want)
							}
						}
					}
					arenas[1].Close()
				}
			}
		})
	}
}
