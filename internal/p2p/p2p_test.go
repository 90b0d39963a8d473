package p2p

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/waitrec"
)

// env is a group of one engine's view in tests: no rank gone, broken only
// where a test sets brk first; its errors name what they are.
type env struct {
	timeout time.Duration
	broken  chan struct{}
	mu      sync.Mutex
	breaks  []error
	done    chan error // asynchronous completions
	blocked int        // callers blocked in Engine.Run
	brk     error      // the group's break (Broken)
	gone    error      // every peer's failure once its rank is gone (Gone)
	spin    time.Duration
}

func newEnv(timeout time.Duration) *env {
	return &env{timeout: timeout, broken: make(chan struct{}), done: make(chan error, 16)}
}

var errTimeout = errors.New("timeout")

func (e *env) BrokenCh() <-chan struct{}           { return e.broken }
func (e *env) GoneEvents() uint64                  { return 0 }
func (e *env) CommunicationTimeout() time.Duration { return e.timeout }
func (e *env) Timeout(o *Op, ctxErr error) error {
	if ctxErr != nil {
		return ctxErr
	}
	return errTimeout
}
func (e *env) Mismatch(o *Op, dt backend.DType, count int64) error {
	return fmt.Errorf("mismatch: %s %d against %s %d", o.DT, o.Count, dt, count)
}
func (e *env) Broken() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.brk
}

func (e *env) Gone(*Op) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gone
}

// breakGroup breaks the group with err.
func (e *env) breakGroup(err error) {
	e.mu.Lock()
	e.brk = err
	e.mu.Unlock()
	close(e.broken)
}

// nbreaks returns the number of breaks so far.
func (e *env) nbreaks() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.breaks)
}

func (e *env) Break(o *Op, err error) {
	e.mu.Lock()
	e.breaks = append(e.breaks, err)
	e.mu.Unlock()
}
func (e *env) Complete(o *Op, err error) { e.done <- err }
func (e *env) Blocked() time.Duration {
	e.mu.Lock()
	e.blocked++
	e.mu.Unlock()
	return waitrec.Now()
}

func (e *env) Spin() time.Duration { return e.spin }
func (e *env) Unblocked() {
	e.mu.Lock()
	e.blocked--
	e.mu.Unlock()
}

func pair(timeout time.Duration) (a, b *Engine, ea, eb *env) {
	ea, eb = newEnv(timeout), newEnv(timeout)
	a, b = new(Engine), new(Engine)
	a.Init(ea)
	b.Init(eb)
	return a, b, ea, eb
}

// exchange posts send s on a's link la and receive r on b's link lb, and
// waits for both.
func exchange(a, b *Engine, s, r *Op, la, lb *Link) {
	a.Post(s, la)
	b.Post(r, lb)
	a.Wait(context.Background(), s)
	b.Wait(context.Background(), r)
}

// A send and a receive between two engines of one process meet on their
// link, whichever is posted first; the receive gets the bytes.
func TestLocalMatch(t *testing.T) {
	ctx := context.Background()
	for _, sendFirst := range []bool{true, false} {
		a, b, _, _ := pair(time.Minute)
		var l Link
		src, dst := []byte{1, 2, 3, 4}, make([]byte, 4)
		s := &Op{Name: "Send", Send: true, Peer: 1, Data: src, DT: backend.U8, Count: 4, Ctx: ctx}
		r := &Op{Name: "Recv", Peer: 0, Data: dst, DT: backend.U8, Count: 4, Ctx: ctx}
		if sendFirst {
			a.Post(s, &l)
			b.Post(r, &l)
		} else {
			b.Post(r, &l)
			a.Post(s, &l)
		}
		a.Wait(ctx, s)
		b.Wait(ctx, r)
		if s.Err() != nil || r.Err() != nil || string(dst) != string(src) {
			t.Fatalf("sendFirst %v: errors %v, %v; got %v", sendFirst, s.Err(), r.Err(), dst)
		}
		if idle := a.Idle(); idle != nil {
			<-idle
		}
	}
}

// A pair that differs in count fails on both sides, and the receiver
// breaks the group.
func TestLocalMismatch(t *testing.T) {
	ctx := context.Background()
	a, b, _, eb := pair(time.Minute)
	var l Link
	s := &Op{Name: "Send", Send: true, Peer: 1, Data: make([]byte, 4), DT: backend.U8, Count: 4, Ctx: ctx}
	r := &Op{Name: "Recv", Peer: 0, Data: make([]byte, 2), DT: backend.U8, Count: 2, Ctx: ctx}
	exchange(a, b, s, r, &l, &l)
	if s.Err() == nil || r.Err() == nil || len(eb.breaks) != 1 {
		t.Fatalf("errors %v, %v; breaks %v", s.Err(), r.Err(), eb.breaks)
	}
}

// An unmatched operation fails at its deadline, and an asynchronous one
// when its context ends; both break the group.
func TestDeadlineAndContext(t *testing.T) {
	a, _, ea, _ := pair(20 * time.Millisecond)
	var l Link
	o := &Op{Name: "Recv", Peer: 1, Data: make([]byte, 1), DT: backend.U8, Count: 1, Ctx: context.Background()}
	a.Post(o, &l)
	if !o.Unmatched() {
		t.Fatal("a posted receive without its send should be unmatched")
	}
	a.Wait(context.Background(), o)
	if !errors.Is(o.Err(), errTimeout) {
		t.Fatalf("got %v, want the timeout", o.Err())
	}

	ctx, cancel := context.WithCancel(context.Background())
	w := &Op{Name: "RecvAsync", Peer: 1, Data: make([]byte, 1), DT: backend.U8, Count: 1, Ctx: ctx, Work: 1}
	a.Post(w, &l)
	if a.Async() != 1 || a.Watches() != 1 {
		t.Fatalf("Async() = %d, Watches() = %d, want 1, 1", a.Async(), a.Watches())
	}
	cancel()
	if err := <-ea.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if idle := a.Idle(); idle != nil {
		<-idle
	}
	if len(ea.breaks) != 2 {
		t.Fatalf("breaks %v, want 2", ea.breaks)
	}
	a.Release()
	if a.Watches() != 0 {
		t.Fatalf("Watches() = %d after Release, want 0", a.Watches())
	}
}

// loop is a transport between two processes of one test: a message is
// delivered to the receive posted with its (from, to, tag).
type loop struct {
	mu    sync.Mutex
	boxes map[[3]int][][]byte
}

type loopEnd struct {
	l    *loop
	proc int
}

type sendReq struct{}

func (sendReq) Test() (bool, error) { return true, nil }
func (sendReq) Cancel() error       { return nil }

type recvReq struct {
	l    *loop
	key  [3]int
	p    []byte
	upTo bool // a shorter message is no error (upToReceiver)
}

func (r *recvReq) Test() (bool, error) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	q := r.l.boxes[r.key]
	if len(q) == 0 {
		return false, nil
	}
	if len(q[0]) > len(r.p) || len(q[0]) < len(r.p) && !r.upTo {
		return false, fmt.Errorf("truncated: %d bytes into %d", len(q[0]), len(r.p))
	}
	copy(r.p, q[0])
	r.l.boxes[r.key] = q[1:]
	return true, nil
}
func (r *recvReq) Cancel() error { return nil }

func (e loopEnd) Name() string { return "loop" }
func (e loopEnd) Rank() int    { return e.proc }
func (e loopEnd) Size() int    { return 2 }
func (e loopEnd) Isend(p []byte, peer, tag int) (backend.Request, error) {
	e.l.mu.Lock()
	defer e.l.mu.Unlock()
	k := [3]int{e.proc, peer, tag}
	e.l.boxes[k] = append(e.l.boxes[k], append([]byte(nil), p...))
	return sendReq{}, nil
}
func (e loopEnd) Irecv(p []byte, peer, tag int) (backend.Request, error) {
	return &recvReq{l: e.l, key: [3]int{peer, e.proc, tag}, p: p}, nil
}

// upToEnd is loopEnd with receives of at most the buffer's length.
type upToEnd struct{ loopEnd }

func (e upToEnd) IrecvUpTo(p []byte, peer, tag int) (backend.Request, error) {
	return &recvReq{l: e.l, key: [3]int{peer, e.proc, tag}, p: p, upTo: true}, nil
}

func (e loopEnd) Allgather(context.Context, []byte, []byte) error { return errors.New("unused") }
func (e loopEnd) Close() error                                    { return nil }

// A message to another process travels in pieces of the slot size with
// its header, in order behind the messages queued before it; a receive
// whose count differs from the message's fails with a mismatch.
func TestRemote(t *testing.T) {
	ctx := context.Background()
	tr := &loop{boxes: map[[3]int][][]byte{}}
	a, b, _, eb := pair(time.Minute)
	var la, lb Link
	const slot = 40
	la.InitRemote(loopEnd{tr, 0}, 1, 7, slot)
	lb.InitRemote(loopEnd{tr, 1}, 0, 7, slot)
	for _, n := range []int{0, 1, slot - Header, slot - Header + 1, 5*slot + 3} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + n)
		}
		dst := make([]byte, n)
		s := &Op{Name: "Send", Send: true, Peer: 1, Data: src, DT: backend.U8, Count: int64(n), Ctx: ctx}
		r := &Op{Name: "Recv", Peer: 0, Data: dst, DT: backend.U8, Count: int64(n), Ctx: ctx}
		exchange(a, b, s, r, &la, &lb)
		if s.Err() != nil || r.Err() != nil || string(src) != string(dst) {
			t.Fatalf("%d bytes: errors %v, %v", n, s.Err(), r.Err())
		}
	}
	s := &Op{Name: "Send", Send: true, Peer: 1, Data: make([]byte, 8), DT: backend.U8, Count: 8, Ctx: ctx}
	r := &Op{Name: "Recv", Peer: 0, Data: make([]byte, 8), DT: backend.I8, Count: 8, Ctx: ctx}
	exchange(a, b, s, r, &la, &lb)
	if r.Err() == nil || len(eb.breaks) != 1 {
		t.Fatalf("a receive of another type: %v, breaks %v", r.Err(), eb.breaks)
	}
}

// Through a transport that receives up to the buffer's length, a receive
// whose message is shorter, longer or of another type, in one piece or
// several, fails with a mismatch and breaks the group, its buffer
// untouched; matching messages still arrive whole.
func TestRemoteMismatch(t *testing.T) {
	ctx := context.Background()
	const slot = 40
	const first = slot - Header
	cases := []struct {
		n, m   int
		dt     backend.DType
		broken bool
	}{
		{3, 10, backend.U8, true}, {10, 3, backend.U8, true},
		{first, first - 1, backend.U8, true}, {first, first + 1, backend.U8, true},
		{5*slot + 3, 3, backend.U8, true}, {3, 5*slot + 3, backend.U8, true},
		{5*slot + 3, 2 * slot, backend.U8, true}, {5*slot + 3, 5*slot + 3, backend.I8, true},
		{first, first, backend.U8, false}, {5*slot + 3, 5*slot + 3, backend.U8, false},
	}
	for _, tc := range cases {
		tr := &loop{boxes: map[[3]int][][]byte{}}
		a, b, _, eb := pair(time.Minute)
		var la, lb Link
		la.InitRemote(upToEnd{loopEnd{tr, 0}}, 1, 7, slot)
		lb.InitRemote(upToEnd{loopEnd{tr, 1}}, 0, 7, slot)
		src := make([]byte, tc.n)
		for i := range src {
			src[i] = byte(i*7 + 1)
		}
		dst := make([]byte, tc.m)
		for i := range dst {
			dst[i] = 0xaa
		}
		s := &Op{Name: "Send", Send: true, Peer: 1, Data: src, DT: backend.U8, Count: int64(tc.n), Ctx: ctx}
		r := &Op{Name: "Recv", Peer: 0, Data: dst, DT: tc.dt, Count: int64(tc.m), Ctx: ctx}
		exchange(a, b, s, r, &la, &lb)
		want := fmt.Sprintf("mismatch: %s %d against %s %d", tc.dt, tc.m, backend.U8, tc.n)
		switch {
		case s.Err() != nil:
			t.Errorf("%+v: send: %v", tc, s.Err())
		case !tc.broken && (r.Err() != nil || string(src) != string(dst) || eb.nbreaks() != 0):
			t.Errorf("%+v: receive %v, breaks %d, bytes equal %v", tc, r.Err(), eb.nbreaks(), string(src) == string(dst))
		case tc.broken && (r.Err() == nil || r.Err().Error() != want || eb.nbreaks() != 1):
			t.Errorf("%+v: receive %v, breaks %d; want %q and 1 break", tc, r.Err(), eb.nbreaks(), want)
		}
		for i, v := range dst {
			if tc.broken && v != 0xaa {
				t.Errorf("%+v: byte %d of the receive buffer written", tc, i)
				break
			}
		}
	}
}

func TestPieces(t *testing.T) {
	const slot = 64
	for _, n := range []int{0, 1, slot - Header, slot - Header + 1, slot, 3*slot + 5} {
		k, sum := pieceCount(slot, n), 0
		for j := 0; j < k; j++ {
			off, m := pieceRange(slot, n, j)
			if off != sum || m < 0 || (j > 0 && m == 0) {
				t.Fatalf("n=%d piece %d: off %d n %d after %d bytes", n, j, off, m, sum)
			}
			sum += m
		}
		if sum != n {
			t.Fatalf("n=%d: pieces hold %d bytes", n, sum)
		}
	}
}

// A blocked call publishes its operations: an unmatched one waits for its
// peer, a matched one for nobody.
func TestBlock(t *testing.T) {
	ctx := context.Background()
	a, b, _, _ := pair(time.Minute)
	var l Link
	r := &Op{Name: "Recv", Peer: 1, Data: make([]byte, 1), DT: backend.U8, Count: 1, Ctx: ctx}
	a.Post(r, &l)
	ops := [2]*Op{nil, r}
	a.Block(&ops)
	if a.Blocked(1) != r || a.BlockedOn(0) != -1 || a.BlockedOn(1) != 1 || a.Epoch() != 1 {
		t.Fatalf("blocked: %v, on %d and %d, epoch %d", a.Blocked(1), a.BlockedOn(0), a.BlockedOn(1), a.Epoch())
	}
	s := &Op{Name: "Send", Send: true, Peer: 0, Data: make([]byte, 1), DT: backend.U8, Count: 1, Ctx: ctx}
	b.Post(s, &l)
	if a.BlockedOn(1) != -1 {
		t.Fatal("a matched operation waits for nobody")
	}
	a.Wait(ctx, r)
	b.Wait(ctx, s)
	a.Unblock()
	if a.Blocked(1) != nil || a.Epoch() != 2 {
		t.Fatalf("unblocked: %v, epoch %d", a.Blocked(1), a.Epoch())
	}
}

// hungEnd is loopEnd whose receives report their peer hung once hung is
// set (backend.HangReporter), with errHung.
type hungEnd struct {
	loopEnd
	hung *atomic.Bool
}

var errHung = fmt.Errorf("peer stopped responding: %w", backend.ErrTimeout)

type hungReq struct {
	*recvReq
	hung *atomic.Bool
}

func (r hungReq) Hung() error {
	if r.hung.Load() {
		return errHung
	}
	return nil
}

func (e hungEnd) Irecv(p []byte, peer, tag int) (backend.Request, error) {
	r, _ := e.loopEnd.Irecv(p, peer, tag)
	return hungReq{r.(*recvReq), e.hung}, nil
}

// A receive from another process whose transport reports the peer hung
// (backend.HangReporter) fails with the transport's error as soon as it
// does, long before its deadline (a minute), its buffer untouched, and
// breaks the group; before the report it waits, and a receive whose
// message arrives completes although the peer is reported hung after.
func TestRemoteHung(t *testing.T) {
	tr := &loop{boxes: map[[3]int][][]byte{}}
	a, b, _, eb := pair(time.Minute)
	var hung atomic.Bool
	var la, lb Link
	la.InitRemote(loopEnd{tr, 0}, 1, 7, 40)
	lb.InitRemote(hungEnd{loopEnd{tr, 1}, &hung}, 0, 7, 40)
	ctx := context.Background()
	s := &Op{Name: "Send", Send: true, Peer: 1, Data: []byte{1, 2, 3}, DT: backend.U8, Count: 3, Ctx: ctx}
	r := &Op{Name: "Recv", Peer: 0, Data: make([]byte, 3), DT: backend.U8, Count: 3, Ctx: ctx}
	exchange(a, b, s, r, &la, &lb)
	if s.Err() != nil || r.Err() != nil || string(r.Data) != "\x01\x02\x03" {
		t.Fatalf("a receive with the peer alive: %v, %v, % x", s.Err(), r.Err(), r.Data)
	}
	dst := []byte{0xaa, 0xaa, 0xaa}
	r = &Op{Name: "Recv", Peer: 0, Data: dst, DT: backend.U8, Count: 3, Ctx: ctx}
	b.Post(r, &lb)
	time.Sleep(20 * time.Millisecond)
	if r.Err() != nil || eb.nbreaks() != 0 {
		t.Fatalf("a receive with its peer alive failed: %v", r.Err())
	}
	start := time.Now()
	hung.Store(true)
	b.Wait(ctx, r)
	if took := time.Since(start); !errors.Is(r.Err(), errHung) || !errors.Is(r.Err(), backend.ErrTimeout) || took > 5*time.Second {
		t.Fatalf("a receive from a hung peer: %v after %v; want the transport's hung error at once", r.Err(), took)
	}
	if eb.nbreaks() != 1 || string(dst) != "\xaa\xaa\xaa" {
		t.Fatalf("breaks %d, buffer % x; want 1 break and the buffer untouched", eb.nbreaks(), dst)
	}
}

// dropEnd is loopEnd that sends only its first keep messages.
type dropEnd struct {
	loopEnd
	sent *int
	keep int
}

func (e dropEnd) Isend(p []byte, peer, tag int) (backend.Request, error) {
	if *e.sent++; *e.sent > e.keep {
		return sendReq{}, nil
	}
	return e.loopEnd.Isend(p, peer, tag)
}

// A remote receive that fails after some of its pieces reached the
// caller's buffer fails with a *DeliveredError (the buffer is written); one
// that fails before any arrived does not (the buffer is untouched).
func TestRemoteDelivered(t *testing.T) {
	const slot = 40
	for _, keep := range []int{0, 1, 2} {
		tr := &loop{boxes: map[[3]int][][]byte{}}
		a, b, _, _ := pair(time.Minute)
		var la, lb Link
		sent := 0
		la.InitRemote(dropEnd{loopEnd{tr, 0}, &sent, keep}, 1, 7, slot)
		lb.InitRemote(loopEnd{tr, 1}, 0, 7, slot)
		n := 5*slot + 3
		src, dst := make([]byte, n), make([]byte, n)
		for i := range src {
			src[i], dst[i] = byte(i%251+1), 0
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		s := &Op{Name: "Send", Send: true, Peer: 1, Data: src, DT: backend.U8, Count: int64(n), Ctx: context.Background()}
		r := &Op{Name: "Recv", Peer: 0, Data: dst, DT: backend.U8, Count: int64(n), Ctx: ctx}
		exchange(a, b, s, r, &la, &lb)
		cancel()
		wrote := dst[0] != 0
		switch {
		case r.Err() == nil:
			t.Fatalf("keep %d: the receive of a message cut short succeeded", keep)
		case !errors.Is(r.Err(), context.DeadlineExceeded):
			t.Errorf("keep %d: %v, want the context's error", keep, r.Err())
		case Delivered(r.Err()) != (keep > 0) || wrote != (keep > 0):
			t.Errorf("keep %d: Delivered %v, buffer written %v; want both %v", keep, Delivered(r.Err()), wrote, keep > 0)
		}
	}
}
