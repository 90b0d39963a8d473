package opqueue

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// Operations run one at a time in the order they were pushed; Wait returns
// once the queue is empty, and Pending counts those not Done.
func TestOrder(t *testing.T) {
	var q Queue[int]
	var got []int
	var running sync.Mutex
	q.Init(func(i int) {
		if !running.TryLock() {
			t.Error("two operations ran at once")
			return
		}
		got = append(got, i)
		running.Unlock()
		q.Done()
	})
	for i := range 100 {
		if !q.Push(i) {
			t.Fatal("an open queue refused an operation")
		}
	}
	if err := q.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := q.Pending(); n != 0 {
		t.Fatalf("Pending = %d after Wait, want 0", n)
	}
	want := make([]int, 100)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
}

// An operation that is not Done when it returns stays pending; Wait bounded
// by a context that ends returns its error while the worker runs.
func TestPendingAndWaitCtx(t *testing.T) {
	var q Queue[chan struct{}]
	q.Init(func(c chan struct{}) { <-c })
	block := make(chan struct{})
	q.Push(block)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := q.Wait(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Wait = %v, want the context's deadline", err)
	}
	if n := q.Pending(); n != 1 {
		t.Fatalf("Pending = %d, want 1", n)
	}
	close(block)
	if err := q.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := q.Pending(); n != 1 {
		t.Fatalf("Pending = %d before Done, want 1", n)
	}
	q.Done()
	if n := q.Pending(); n != 0 {
		t.Fatalf("Pending = %d after Done, want 0", n)
	}
}

// Close waits for the queued operations and refuses new ones; a worker
// starts again for operations pushed after the queue emptied.
func TestClose(t *testing.T) {
	var q Queue[int]
	var mu sync.Mutex
	ran := 0
	q.Init(func(int) {
		time.Sleep(time.Millisecond)
		mu.Lock()
		ran++
		mu.Unlock()
		q.Done()
	})
	q.Push(1)
	_ = q.Wait(context.Background())
	q.Push(2)
	q.Push(3)
	q.Close()
	mu.Lock()
	defer mu.Unlock()
	if ran != 3 {
		t.Fatalf("%d operations ran before Close returned, want 3", ran)
	}
	if q.Push(4) {
		t.Fatal("a closed queue took an operation")
	}
	if err := WaitIdle(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}
