package p2p

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// A SendRecv of one buffer between two engines (MPI_Sendrecv_replace on
// both sides) sends what the buffer held and receives the peer's into it;
// each caller is reported blocked, then unblocked, around its wait.
func TestRunSendRecvReplace(t *testing.T) {
	ctx := context.Background()
	a, b, ea, eb := pair(time.Minute)
	var l01, l10 Link
	bufA, bufB := []byte{1, 2, 3, 4}, []byte{5, 6, 7, 8}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs[0] = a.Run(ctx, &Call{Name: "SendRecv", Seq: 1, DT: backend.U8, To: 1, From: 1, Send: bufA, Recv: bufA, ToLink: &l01, FromLink: &l10})
	}()
	go func() {
		defer wg.Done()
		errs[1] = b.Run(ctx, &Call{Name: "SendRecv", Seq: 1, DT: backend.U8, To: 0, From: 0, Send: bufB, Recv: bufB, ToLink: &l10, FromLink: &l01})
	}()
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("errors %v", errs)
	}
	if string(bufA) != string([]byte{5, 6, 7, 8}) || string(bufB) != string([]byte{1, 2, 3, 4}) {
		t.Fatalf("got %v and %v", bufA, bufB)
	}
	if ea.blocked != 0 || eb.blocked != 0 {
		t.Fatalf("still blocked: %d, %d", ea.blocked, eb.blocked)
	}
	if a.Blocked(0) != nil || a.Blocked(1) != nil || a.Epoch() != 2 {
		t.Fatalf("published after Run: %v %v, epoch %d", a.Blocked(0), a.Blocked(1), a.Epoch())
	}
}

// An asynchronous call posts its one operation for its handle, completed
// through the Env; its send has no peer and fails once its context ends.
func TestStart(t *testing.T) {
	a, b, ea, eb := pair(time.Minute)
	var l Link
	src, dst := []byte{1, 2}, make([]byte, 2)
	a.Start(context.Background(), &Call{Name: "SendAsync", DT: backend.U8, To: 1, From: -1, Send: src, ToLink: &l}, "w")
	b.Start(context.Background(), &Call{Name: "RecvAsync", DT: backend.U8, To: -1, From: 0, Recv: dst, FromLink: &l}, "w")
	if err, err2 := <-ea.done, <-eb.done; err != nil || err2 != nil || string(dst) != string(src) {
		t.Fatalf("errors %v, %v; got %v", err, err2, dst)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var l2 Link
	a.Start(ctx, &Call{Name: "SendAsync", DT: backend.U8, To: 1, From: -1, Send: src, ToLink: &l2}, "w")
	cancel()
	if err := <-ea.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want the context's error", err)
	}
}

// A call's error is its operations' own failure before one that only
// reports the group's break, whichever operation had it.
func TestCause(t *testing.T) {
	errBroken, errOwn := errors.New("broken"), errors.New("own")
	e := new(Engine)
	e.Init(&env{brk: errBroken, broken: make(chan struct{})})
	cases := []struct {
		send, recv error
		want       error
	}{
		{nil, nil, nil},
		{errBroken, nil, errBroken},
		{nil, errOwn, errOwn},
		{errBroken, errOwn, errOwn},
		{errOwn, errBroken, errOwn},
		{errBroken, errBroken, errBroken},
	}
	for _, c := range cases {
		ops := [2]*Op{{err: c.send}, {err: c.recv}}
		if got := e.cause(&ops); got != c.want {
			t.Errorf("send %v, recv %v: got %v, want %v", c.send, c.recv, got, c.want)
		}
	}
	if got := e.cause(&[2]*Op{nil, {err: errOwn}}); got != errOwn {
		t.Errorf("receive only: got %v", got)
	}
}

// A synchronous call with ranks of this process whose peer never posts is
// failed by its caller, with no lane: at its deadline, when its context
// ends and when the peer is gone (each breaking the group), and when the
// group breaks (with the break's error, breaking nothing more); so too
// when it polls before it parks. Its operation leaves its link's queue.
func TestRunOwnFailures(t *testing.T) {
	for _, spin := range []time.Duration{0, 5 * time.Millisecond} {
		runOwnFailures(t, spin)
	}
}

func runOwnFailures(t *testing.T, spin time.Duration) {
	errGone, errBroken := errors.New("gone"), errors.New("broken")
	cases := []struct {
		name    string
		timeout time.Duration
		act     func(e *Engine, ev *env, cancel context.CancelFunc)
		want    error
		breaks  int
	}{
		{"deadline", 20 * time.Millisecond, func(*Engine, *env, context.CancelFunc) {}, errTimeout, 1},
		{"context", time.Minute, func(_ *Engine, _ *env, cancel context.CancelFunc) { cancel() }, context.Canceled, 1},
		{"gone", time.Minute, func(e *Engine, ev *env, _ context.CancelFunc) {
			ev.mu.Lock()
			ev.gone = errGone
			ev.mu.Unlock()
			e.Poke()
		}, errGone, 1},
		{"broken", time.Minute, func(_ *Engine, ev *env, _ context.CancelFunc) { ev.breakGroup(errBroken) }, errBroken, 0},
	}
	for _, tc := range cases {
		a, _, ea, _ := pair(tc.timeout)
		ea.spin = spin
		var l Link
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			errc <- a.Run(ctx, &Call{Name: "Recv", DT: backend.U8, To: -1, From: 1, Recv: make([]byte, 1), FromLink: &l})
		}()
		// Once it blocks, its operation is published and unmatched.
		for a.BlockedOn(1) != 1 {
			time.Sleep(time.Millisecond)
		}
		tc.act(a, ea, cancel)
		err := <-errc
		cancel()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s (spin %v): got %v, want %v", tc.name, spin, err, tc.want)
		}
		if n := ea.nbreaks(); n != tc.breaks {
			t.Errorf("%s (spin %v): %d breaks, want %d", tc.name, spin, n, tc.breaks)
		}
		if l.recv.Head() != nil || a.Blocked(1) != nil {
			t.Errorf("%s (spin %v): the operation is still queued or published", tc.name, spin)
		}
		if _, passes := a.Work(); passes != 0 || a.Idle() != nil {
			t.Errorf("%s (spin %v): the lane ran %d passes", tc.name, spin, passes)
		}
	}
}

// A synchronous call with ranks of this process runs on the engine's own
// operations, the same from one call to the next; its Unblock waits for a
// reader that pinned the engine, so a published operation is not reused
// while it is read.
func TestRunOwnReuse(t *testing.T) {
	ctx := context.Background()
	a, b, _, _ := pair(time.Minute)
	var l01, l10 Link
	var seen [2]*Op
	for k := range 2 {
		done := make(chan error, 1)
		go func() {
			done <- b.Run(ctx, &Call{Name: "Recv", DT: backend.U8, To: -1, From: 0, Recv: make([]byte, 2), FromLink: &l01})
		}()
		for b.BlockedOn(1) != 0 {
			time.Sleep(time.Millisecond)
		}
		seen[k] = b.Blocked(1)
		if err := a.Run(ctx, &Call{Name: "Send", DT: backend.U8, To: 1, From: -1, Send: []byte{1, 2}, ToLink: &l01}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if seen[0] != &b.own[1] || seen[1] != seen[0] {
		t.Fatalf("the calls ran on %p and %p, want the engine's own %p", seen[0], seen[1], &b.own[1])
	}
	if o := &b.own[1]; o.Data != nil || o.Ctx != nil {
		t.Fatal("the engine keeps the buffer or the context of a call that returned")
	}

	// A pinned reader holds the call's end back.
	done := make(chan error, 1)
	go func() {
		done <- b.Run(ctx, &Call{Name: "SendRecv", DT: backend.U8, To: 0, From: 0, Send: []byte{3}, Recv: make([]byte, 1), ToLink: &l10, FromLink: &l01})
	}()
	for b.BlockedOn(1) != 0 {
		time.Sleep(time.Millisecond)
	}
	b.Pin()
	o := b.Blocked(1)
	if err := a.Run(ctx, &Call{Name: "SendRecv", DT: backend.U8, To: 1, From: 1, Send: []byte{4}, Recv: make([]byte, 1), ToLink: &l01, FromLink: &l10}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the call returned (%v) while a reader pinned its operations", err)
	case <-time.After(20 * time.Millisecond):
	}
	if o.Name != "SendRecv" || o.Peer != 0 || !o.Done() {
		t.Fatalf("the pinned operation changed: %s from %d, done %v", o.Name, o.Peer, o.Done())
	}
	b.Unpin()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
