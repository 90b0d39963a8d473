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
		// Once it blocks, its operation is published and unmatched. A
		// short deadline may pass before a loaded machine sees it blocked:
		// then the call already returned.
		var err error
		returned := false
		for !returned && a.BlockedOn(1) != 1 {
			select {
			case err = <-errc:
				returned = true
			case <-time.After(time.Millisecond):
			}
		}
		if !returned {
			tc.act(a, ea, cancel)
			err = <-errc
		}
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

// A synchronous call with a rank of another process runs on the engine's
// own operations for such calls, the same from one call to the next, and
// reuses one only once the lane's pass that held it ended: a ring of three
// engines in two processes (a and c in one, b in the other; a's and c's
// calls have one operation with each kind of peer, b's both with the other
// process) runs thousands of SendRecv calls back to back, each caller
// reusing its operations while its lane may still be in the pass that
// finished them, and every call receives exactly what its peer sent in
// that call (under -race: no access to a reused operation races with the
// lane's pass). After the calls, once the lanes end, the operations keep no
// buffer or context.
func TestRunRemoteReuse(t *testing.T) {
	ctx := context.Background()
	tr := &loop{boxes: map[[3]int][][]byte{}}
	engines := make([]*Engine, 3) // a, b, c
	for i := range engines {
		engines[i] = new(Engine)
		engines[i].Init(newEnv(time.Minute))
	}
	const slot = 40
	var lac Link // a -> c, in one process
	var lcb, lbc, lba, lab Link
	lcb.InitRemote(loopEnd{tr, 0}, 1, 1, slot) // c sends to b
	lbc.InitRemote(loopEnd{tr, 1}, 0, 1, slot) // b receives from c
	lba.InitRemote(loopEnd{tr, 1}, 0, 2, slot) // b sends to a
	lab.InitRemote(loopEnd{tr, 0}, 1, 2, slot) // a receives from b
	// rank i sends to next[i] on to[i] and receives from prev[i] on from[i].
	next, prev := [3]int{2, 0, 1}, [3]int{1, 2, 0}
	to, from := [3]*Link{&lac, &lba, &lcb}, [3]*Link{&lab, &lbc, &lac}
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	msg := func(r, k int) []byte {
		p := make([]byte, 2*slot+7) // three pieces
		for i := range p {
			p[i] = byte(r*31 + k*7 + i)
		}
		return p
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for r, e := range engines {
		wg.Go(func() {
			send, recv := make([]byte, 2*slot+7), make([]byte, 2*slot+7)
			for k := range rounds {
				copy(send, msg(r, k))
				c := &Call{Name: "SendRecv", Seq: uint64(k), DT: backend.U8, To: next[r], From: prev[r],
					Send: send, Recv: recv, ToLink: to[r], FromLink: from[r]}
				if err := e.Run(ctx, c); err != nil {
					errs <- err
					return
				}
				if string(recv) != string(msg(prev[r], k)) {
					errs <- errors.New("a call received other bytes than its peer sent in that call")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, e := range engines {
		if idle := e.Idle(); idle != nil {
			<-idle
		}
		e.mu.Lock()
		for j := range e.rown {
			if o := &e.rown[j]; o.Data != nil || o.Ctx != nil || o.held {
				t.Errorf("engine %d: operation %d keeps a buffer or a context, or is held, after the calls", i, j)
			}
		}
		if o := &e.rown[0]; o.Seq != uint64(rounds-1) || !o.done {
			t.Errorf("engine %d: the last call's send is not the engine's own operation (seq %d, done %v)", i, o.Seq, o.done)
		}
		t.Logf("engine %d: %d calls waited for the lane's pass to reuse an operation", i, e.reuseWaits)
		e.mu.Unlock()
	}
}

// A synchronous call with another process whose context ended before it
// began fails at once, and its caller reuses the operations for the next
// call while the lane's pass that failed them may still visit them (it
// takes each twice: as the call's, whose context ended, and as the head of
// its link's queue): thousands of such calls back to back each fail with
// the context's error alone, and under -race no reuse races with the pass.
func TestRunRemoteReuseFailed(t *testing.T) {
	tr := &loop{boxes: map[[3]int][][]byte{}}
	e := new(Engine)
	env := newEnv(time.Minute)
	e.Init(env)
	var l01, l10 Link
	l01.InitRemote(loopEnd{tr, 0}, 1, 1, 40)
	l10.InitRemote(loopEnd{tr, 0}, 1, 2, 40)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	buf := make([]byte, 8)
	for k := range rounds {
		c := &Call{Name: "SendRecv", Seq: uint64(k), DT: backend.U8, To: 1, From: 1, Send: buf, Recv: make([]byte, 8), ToLink: &l01, FromLink: &l10}
		if err := e.Run(ctx, c); !errors.Is(err, context.Canceled) {
			t.Fatalf("call %d: %v, want the context's error", k, err)
		}
	}
	if idle := e.Idle(); idle != nil {
		<-idle
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending != 0 || l01.pq.Head() != nil || l10.pq.Head() != nil {
		t.Fatalf("%d operations pending after the calls", e.pending)
	}
	t.Logf("%d calls waited for the lane's pass to reuse an operation", e.reuseWaits)
}
