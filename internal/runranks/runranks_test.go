package runranks

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// Every rank runs and is left; a failure is reported, cancels the others'
// context with its cause, and is collected in the order the ranks
// returned; a panic becomes the rank's error; a rank that ends its
// goroutine is left without an error.
func TestRun(t *testing.T) {
	boom := errors.New("boom")
	var mu sync.Mutex
	var failed, left []int
	leftErr := map[int]error{}
	h := Hooks{
		Panicked: func(i int, v any, stack []byte) error {
			if len(stack) == 0 {
				t.Error("no stack")
			}
			return fmt.Errorf("rank %d panicked: %v", i, v)
		},
		Failed: func(i int, err error) {
			mu.Lock()
			failed = append(failed, i)
			mu.Unlock()
		},
		Left: func(i int, err error) {
			mu.Lock()
			left = append(left, i)
			leftErr[i] = err
			mu.Unlock()
		},
	}
	first := make(chan struct{})
	errs, order := Run(context.Background(), 4, func(ctx context.Context, i int) error {
		switch i {
		case 0:
			return nil
		case 1:
			defer close(first)
			return boom
		case 2:
			<-ctx.Done() // cancelled by rank 1's failure
			if context.Cause(ctx) != boom {
				t.Errorf("rank 2's context ended with %v, want rank 1's error", context.Cause(ctx))
			}
			panic("late")
		default:
			<-first
			runtime.Goexit()
		}
		return nil
	}, h)
	if errs[0] != nil || errs[1] != boom || errs[2] == nil || errs[3] != nil {
		t.Fatalf("errs = %v", errs)
	}
	if !slices.Equal(order, []int{1, 2}) || !slices.Equal(failed, []int{1, 2}) {
		t.Fatalf("order %v, failed %v; want [1 2] both", order, failed)
	}
	slices.Sort(left)
	if !slices.Equal(left, []int{0, 1, 2, 3}) || leftErr[3] != nil || leftErr[1] != boom {
		t.Fatalf("left %v (errors %v), want every rank, rank 3 without an error", left, leftErr)
	}
}
