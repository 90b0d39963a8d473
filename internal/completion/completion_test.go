package completion

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

var boom = errors.New("boom")

// get is the getter of a slice of handles (the zero handle: skipped).
func get(h H) H { return h }

// pending returns the handle of a new record, not finished, its runner let
// go, never reused.
func pending() (*Rec, H) {
	r := new(Rec)
	r.Init(nil)
	h := r.Start()
	r.Let()
	return r, h
}

// TestWait: Wait returns the error once finished, ctx's error while not,
// and a finished completion wins over an ended ctx; Test and Done agree.
func TestWait(t *testing.T) {
	r, c := pending()
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
		r.Finish(boom)
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
	var zero H
	if err := zero.Wait(context.Background()); err != ErrStale || !zero.Done() {
		t.Fatalf("the zero handle's Wait = %v, want ErrStale", err)
	}
}

// TestWaiters: every goroutine waiting for one operation wakes when it
// finishes (the token passed from waiter to waiter), with its error.
func TestWaiters(t *testing.T) {
	r, h := pending()
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = h.Wait(context.Background()) })
	}
	time.Sleep(5 * time.Millisecond)
	r.Finish(boom)
	wg.Wait()
	for i, err := range errs {
		if err != boom {
			t.Fatalf("waiter %d: %v, want boom", i, err)
		}
	}
}

// TestReuse: a record is handed back (free) only once its result was
// reported and its runner let go; a handle of an earlier generation then
// reports ErrStale, never the later operation's result; Done does not
// report the result.
func TestReuse(t *testing.T) {
	freed := 0
	r := new(Rec)
	r.Init(func() { freed++ })
	h := r.Start()
	r.Finish(boom)
	if !h.Done() || freed != 0 {
		t.Fatalf("Done = %v, freed %d", h.Done(), freed)
	}
	if err := h.Wait(context.Background()); err != boom || freed != 0 {
		t.Fatalf("Wait = %v, freed %d: want boom, not freed while its runner holds it", err, freed)
	}
	r.Let()
	if freed != 1 {
		t.Fatalf("freed %d after Let, want 1", freed)
	}
	if err := h.Wait(context.Background()); err != boom || freed != 1 {
		t.Fatalf("Wait again before reuse = %v, freed %d: want boom, freed once", err, freed)
	}
	h2 := r.Start()
	for _, f := range []func() error{
		func() error { return h.Wait(context.Background()) },
		func() error { _, err := h.Test(); return err },
	} {
		if err := f(); err != ErrStale {
			t.Fatalf("the stale handle: %v, want ErrStale", err)
		}
	}
	if !h.Done() || h2.Done() {
		t.Fatalf("Done: stale %v, new %v; want true, false", h.Done(), h2.Done())
	}
	r.Finish(nil)
	if err := h.Wait(context.Background()); err != ErrStale {
		t.Fatalf("the stale handle after the new operation finished: %v, want ErrStale", err)
	}
	r.Let()
	if done, err := h2.Test(); !done || err != nil || freed != 2 {
		t.Fatalf("Test = %v, %v, freed %d; want true, nil, 2", done, err, freed)
	}
	if i, err := WaitAny(context.Background(), []H{h}, get); i != 0 || err != ErrStale {
		t.Fatalf("WaitAny of a stale handle = %d, %v", i, err)
	}
}

// TestWaitAnyAll: WaitAny returns the index of the first finished item,
// -1 with none, and ctx's error when ctx ends first; WaitAll joins the
// errors in order and honours ctx.
func TestWaitAnyAll(t *testing.T) {
	bg := context.Background()
	if i, err := WaitAny(bg, []H{{}, {}}, get); i != -1 || err != nil {
		t.Fatalf("WaitAny of none = %d, %v", i, err)
	}
	if err := WaitAll(bg, []H{{}}, get); err != nil {
		t.Fatalf("WaitAll of none = %v", err)
	}
	pr, pend := pending()
	ok := Finished(nil)
	failed := Finished(boom)
	if i, err := WaitAny(bg, []H{pend, {}, failed, ok}, get); i != 2 || err != boom {
		t.Fatalf("WaitAny = %d, %v, want the first finished: 2, boom", i, err)
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Millisecond)
	defer cancel()
	if i, err := WaitAny(ctx, []H{pend}, get); i != -1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitAny of a pending one = %d, %v", i, err)
	}
	if err := WaitAll(ctx, []H{failed, pend}, get); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitAll with a pending one = %v", err)
	}
	go func() {
		time.Sleep(5 * time.Millisecond)
		pr.Finish(boom)
	}()
	if i, err := WaitAny(bg, []H{{}, pend}, get); i != 1 || err != boom {
		t.Fatalf("WaitAny = %d, %v, want 1, boom", i, err)
	}
	two := errors.New("two")
	second := Finished(two)
	err := WaitAll(bg, []H{ok, failed, {}, second}, get)
	if !errors.Is(err, boom) || !errors.Is(err, two) || err.Error() != "boom\ntwo" {
		t.Fatalf("WaitAll = %q, want boom and two joined in order", err)
	}
	// An item that finished while ctx ended counts with its error.
	if err := WaitAll(ctx, []H{failed}, get); !errors.Is(err, boom) {
		t.Fatalf("WaitAll of a finished one with an ended ctx = %v, want boom", err)
	}
	// The first item finishes after WaitAny asked it and before it asked
	// the second, finished already (operations of one comm finish in
	// order): both have finished when WaitAny returns, so the first.
	r0, h0 := pending()
	_, h1 := pending()
	asked := 0 // times WaitAny got the second item's handle: once to count, then to look
	racing := func(h H) H {
		if h == h1 {
			if asked++; asked == 2 {
				r0.Finish(nil)
			}
		}
		return h
	}
	h1.r.Finish(two)
	if i, err := WaitAny(bg, []H{h0, h1}, racing); i != 0 || err != nil {
		t.Fatalf("WaitAny = %d, %v after the first finished while asked, want 0, nil", i, err)
	}
}
