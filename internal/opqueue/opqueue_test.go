package opqueue

import (
	"context"
	"errors"
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

// A claim waits for the queued operations, then holds the comm: a second
// claim, a hold and a claim while an operation is queued are refused;
// Release hands the comm back.
func TestClaim(t *testing.T) {
	var q Queue[chan struct{}]
	q.Init(func(c chan struct{}) {
		<-c
		q.Done()
	})
	op := make(chan struct{})
	if !q.Hold() {
		t.Fatal("Hold of a free comm refused")
	}
	if !q.Push(op) {
		t.Fatal("Push refused")
	}
	q.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := q.Claim(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Claim with an operation running = %v, want the ctx's error", err)
	}
	close(op)
	if err := q.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	q.Hold()
	if err := q.Claim(context.Background()); err != ErrHeld {
		t.Fatalf("Claim while held = %v, want ErrHeld", err)
	}
	q.Release()
	if err := q.Claim(context.Background()); err != nil {
		t.Fatalf("Claim once the queue emptied = %v", err)
	}
	if !q.Held() {
		t.Fatal("not Held after Claim")
	}
	if q.Hold() {
		t.Fatal("Hold while claimed succeeded")
	}
	if err := q.Claim(context.Background()); err != ErrHeld {
		t.Fatalf("a second Claim = %v, want ErrHeld", err)
	}
	q.Release()
	if q.Held() {
		t.Fatal("Held after Release")
	}
}

// An operation queued between a claim's wait and its hold makes it fail
// with ErrQueued, leaving the comm free.
func TestClaimQueuedMeanwhile(t *testing.T) {
	var q Queue[chan struct{}]
	q.Init(func(c chan struct{}) { <-c })
	// The worker exits once the queue is empty, while the operation stays
	// pending (not Done): the claim's wait ends, the count refuses it.
	op := make(chan struct{})
	q.Push(op)
	close(op)
	if err := q.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := q.Claim(context.Background()); err != ErrQueued {
		t.Fatalf("Claim with an operation pending = %v, want ErrQueued", err)
	}
	if q.Held() {
		t.Fatal("a refused Claim holds the comm")
	}
	q.Done()
	if err := q.Claim(context.Background()); err != nil {
		t.Fatalf("Claim = %v", err)
	}
}

// Take waits for the holder to release the comm, then holds it.
func TestTake(t *testing.T) {
	var q Queue[int]
	q.Init(func(int) { q.Done() })
	if err := q.Claim(context.Background()); err != nil {
		t.Fatal(err)
	}
	taken := make(chan struct{})
	go func() {
		q.Take()
		close(taken)
	}()
	select {
	case <-taken:
		t.Fatal("Take returned while the comm was claimed")
	case <-time.After(20 * time.Millisecond):
	}
	q.Release()
	<-taken
	if !q.Held() || q.Hold() {
		t.Fatal("the comm is not held after Take")
	}
	if err := q.Claim(context.Background()); err != ErrHeld {
		t.Fatalf("Claim after Take = %v, want ErrHeld", err)
	}
}

// TestWaitIdleWinsOverEndedContext: an idle channel closed already wins over
// a context that ended already, every time (a select of both picks at
// random).
func TestWaitIdleWinsOverEndedContext(t *testing.T) {
	idle := make(chan struct{})
	close(idle)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 1000 {
		if err := WaitIdle(ctx, idle); err != nil {
			t.Fatalf("try %d: WaitIdle of a closed idle channel with an ended context: %v, want nil", i, err)
		}
	}
	if err := WaitIdle(ctx, make(chan struct{})); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitIdle of an open channel with an ended context: %v, want context.Canceled", err)
	}
}
