package collective

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Run's error is the root cause: with Run's ctx cancelled while the ranks
// loop over AllReduce, it is the *Error of the rank whose own wait noticed
// the cancellation first (it matches context.Canceled), never another
// rank's *BrokenError, in every run.
func TestRunRootCauseCancelled(t *testing.T) {
	runs := map[string]int{"host": 100, "vulkan": 30}
	if raceEnabled {
		runs = map[string]int{"host": 30, "vulkan": 10}
	}
	for _, bk := range backendsUnderTest(t) {
		for i := 0; i < runs[bk]; i++ {
			g, err := NewGroup(context.Background(), Options{Ranks: 4, Backend: bk, Config: testConfig()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			tm := time.AfterFunc(time.Duration(10+i%20)*time.Millisecond, cancel)
			err = g.Run(ctx, func(ctx context.Context, c *Comm) error {
				data := make([]float32, 1024)
				for {
					if err := AllReduce(ctx, c, data, Sum); err != nil {
						return err
					}
				}
			})
			tm.Stop()
			cancel()
			g.Close()
			var e *Error
			var be *BrokenError
			if !errors.Is(err, context.Canceled) || !errors.As(err, &e) || errors.As(err, &be) || errors.Is(err, ErrGroupBroken) {
				t.Fatalf("%s, run %d: Run = %v; want the cancelled rank's own *Error (context.Canceled), not another rank's failure", bk, i, err)
			}
		}
	}
}

// A panic inside a rank's function: Run recovers it into a *PanicError
// with the rank, the value and the stack where it happened, the other ranks
// fail promptly naming that rank, and a panic with an error unwraps to it.
func TestRunPanic(t *testing.T) {
	g := openGroup(t, "host", 3)
	start := time.Now()
	err := g.Run(context.Background(), func(ctx context.Context, c *Comm) error {
		data := make([]float32, 16)
		for i := 0; ; i++ {
			if c.Rank() == 2 && i == 3 {
				panicInRank("boom")
			}
			if err := AllReduce(ctx, c, data, Sum); err != nil {
				return err
			}
		}
	})
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Run returned after %v", el)
	}
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Rank != 2 || pe.Value != "boom" {
		t.Fatalf("Run = %v (%T); want a *PanicError of rank 2 with value boom", err, err)
	}
	if !strings.Contains(string(pe.Stack), "panicInRank") || !strings.Contains(err.Error(), "rank 2") {
		t.Errorf("the stack does not show where rank 2 panicked:\n%s", pe.Stack)
	}
	err = Barrier(context.Background(), g.Comm(0))
	var be *BrokenError
	if !errors.As(err, &be) || be.Rank != 2 || !errors.As(err, &pe) || !strings.Contains(err.Error(), "panic: boom") {
		t.Errorf("after the panic: %v; want the group broken by rank 2's panic", err)
	}

	g2 := openGroup(t, "host", 2)
	sentinel := errors.New("a bad batch")
	err = g2.Run(context.Background(), func(ctx context.Context, c *Comm) error {
		if c.Rank() == 1 {
			panic(fmt.Errorf("loading: %w", sentinel))
		}
		return Barrier(ctx, c)
	})
	if !errors.Is(err, sentinel) || !errors.As(err, &pe) || pe.Rank != 1 {
		t.Errorf("Run = %v; want rank 1's *PanicError unwrapping to its error", err)
	}
}

//go:noinline
func panicInRank(v any) { panic(v) }
