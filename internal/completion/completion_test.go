package completion

import (
	"context"
	"errors"
	"testing"
	"time"
)

var boom = errors.New("boom")

// get is the getter of a slice of completions (nil: skipped).
func get(c *C) *C { return c }

// TestWait: Wait returns the error once finished, ctx's error while not,
// and a finished completion wins over an ended ctx; Test and Done agree.
func TestWait(t *testing.T) {
	c := Make()
	if done, err := c.Test(); done || err != nil || c.Done() {
		t.Fatalf("Test of a pending completion = %v, %v", done, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with an ended ctx = %v, want Canceled", err)
	}
	go func() {
		time.Sleep(5 * time.Millisecond)
		c.Finish(boom)
	}()
	if err := c.Wait(context.Background()); err != boom {
		t.Fatalf("Wait = %v, want boom", err)
	}
	for i := 0; i < 2; i++ {
		if err := c.Wait(ctx); err != boom {
			t.Fatalf("Wait with an ended ctx after the end = %v, want boom", err)
		}
	}
	if done, err := c.Test(); !done || err != boom || !c.Done() {
		t.Fatalf("Test = %v, %v, want true, boom", done, err)
	}
	f := Finished(nil)
	if done, err := f.Test(); !done || err != nil {
		t.Fatalf("Finished(nil).Test = %v, %v", done, err)
	}
}

// TestWaitAnyAll: WaitAny returns the index of the first finished item,
// -1 with none, and ctx's error when ctx ends first; WaitAll joins the
// errors in order and honours ctx.
func TestWaitAnyAll(t *testing.T) {
	bg := context.Background()
	if i, err := WaitAny(bg, []*C{nil, nil}, get); i != -1 || err != nil {
		t.Fatalf("WaitAny of none = %d, %v", i, err)
	}
	if err := WaitAll(bg, []*C{nil}, get); err != nil {
		t.Fatalf("WaitAll of none = %v", err)
	}
	pending, ok := Make(), Finished(nil)
	failed := Finished(boom)
	if i, err := WaitAny(bg, []*C{&pending, nil, &failed, &ok}, get); i != 2 || err != boom {
		t.Fatalf("WaitAny = %d, %v, want the first finished: 2, boom", i, err)
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Millisecond)
	defer cancel()
	if i, err := WaitAny(ctx, []*C{&pending}, get); i != -1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitAny of a pending one = %d, %v", i, err)
	}
	if err := WaitAll(ctx, []*C{&failed, &pending}, get); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitAll with a pending one = %v", err)
	}
	go func() {
		time.Sleep(5 * time.Millisecond)
		pending.Finish(boom)
	}()
	if i, err := WaitAny(bg, []*C{nil, &pending}, get); i != 1 || err != boom {
		t.Fatalf("WaitAny = %d, %v, want 1, boom", i, err)
	}
	two := errors.New("two")
	second := Finished(two)
	err := WaitAll(bg, []*C{&ok, &failed, nil, &second}, get)
	if !errors.Is(err, boom) || !errors.Is(err, two) || err.Error() != "boom\ntwo" {
		t.Fatalf("WaitAll = %q, want boom and two joined in order", err)
	}
	// An item that finished while ctx ended counts with its error.
	if err := WaitAll(ctx, []*C{&failed}, get); !errors.Is(err, boom) {
		t.Fatalf("WaitAll of a finished one with an ended ctx = %v, want boom", err)
	}
}
