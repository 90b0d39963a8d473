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
