package oncejoin

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestJoinDoesOnceAndDropsAfterLast(t *testing.T) {
	var mu sync.Mutex
	var m map[int]*Entry[string]
	const users = 5
	made := 0
	var wg sync.WaitGroup
	got := make([]string, users)
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			e, first := Join(&m, 7, users)
			if first {
				made++
			}
			mu.Unlock()
			if first {
				e.Do("made", nil)
			}
			if err := e.Wait(context.Background()); err != nil {
				t.Errorf("Wait: %v", err)
			}
			got[i] = e.Val
			mu.Lock()
			Leave(m, 7, e)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if made != 1 {
		t.Fatalf("the work was done %d times, want once", made)
	}
	for i, v := range got {
		if v != "made" {
			t.Errorf("joiner %d got %q", i, v)
		}
	}
	if len(m) != 0 {
		t.Errorf("%d entries left after every joiner left", len(m))
	}
}

func TestWaitEndsWithContextUnlessDone(t *testing.T) {
	var m map[string]*Entry[int]
	e, _ := Join(&m, "k", 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with an ended ctx before Do: %v, want context.Canceled", err)
	}
	boom := errors.New("boom")
	e.Do(3, boom)
	for range 100 { // the outcome wins over the ended ctx every time
		if err := e.Wait(ctx); err != nil {
			t.Fatalf("Wait after Do: %v", err)
		}
	}
	if e.Val != 3 || e.Err != boom {
		t.Errorf("outcome %d, %v", e.Val, e.Err)
	}
	if e2, first := Join(&m, "k", 2); e2 != e || first {
		t.Errorf("a second Join made a new entry")
	}
	Leave(m, "k", e)
	if len(m) != 1 {
		t.Fatalf("dropped before the last joiner left")
	}
	Leave(m, "k", e)
	if len(m) != 0 {
		t.Fatalf("not dropped after the last joiner left")
	}
}
