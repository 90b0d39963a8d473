package ctrl

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/gocoll/gocoll/backend"
)

func TestEncodeDecode(t *testing.T) {
	for _, m := range []Msg{
		{Rank: -1, Abort: true, Text: "stop"},
		{Rank: 3, Timeout: true, Text: "rank 3: timed out"},
		{Rank: 0, Invalid: true, Closed: true},
		{Rank: 2, Mismatch: true, Text: "rank 2 called Recv but rank 0 called Send"},
		{Rank: 1<<31 - 1, Text: "é ü"},
	} {
		b := make([]byte, Bytes)
		Encode(b, m)
		got, err := Decode(b)
		if err != nil || got != m {
			t.Errorf("Decode(Encode(%+v)) = %+v, %v", m, got, err)
		}
	}
}

func TestEncodeCutsText(t *testing.T) {
	b := make([]byte, Bytes)
	for i := range b {
		b[i] = 0xff // Encode clears what it reuses
	}
	Encode(b, Msg{Rank: 2, Text: strings.Repeat("x", 2*Bytes)})
	m, err := Decode(b)
	if err != nil || m.Rank != 2 || m.Abort || m.Timeout || m.Invalid || m.Closed || m.Text != strings.Repeat("x", Bytes-header) {
		t.Errorf("long text: %+v, %v", m, err)
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, n := range []int{0, 1, header - 1} {
		if _, err := Decode(make([]byte, n)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode of %d bytes: %v, want ErrMalformed", n, err)
		}
	}
	// A length beyond the buffer is cut to it; unknown flags are ignored.
	b := []byte{0xe0 | flagTimeout, 5, 0, 0, 0, 0xff, 0xff, 'a', 'b'}
	m, err := Decode(b)
	if err != nil || m != (Msg{Rank: 5, Timeout: true, Text: "ab"}) {
		t.Errorf("over-long length: %+v, %v", m, err)
	}
	if m, err := Decode(b[:header]); err != nil || m.Text != "" {
		t.Errorf("header only: %+v, %v", m, err)
	}
}

// net is an in-memory transport between size processes: a send completes
// a posted receive of the same peers and tag, or waits for one.
type net struct {
	mu    sync.Mutex
	recvs []*req // posted, not matched
	sends []*req
}

type req struct {
	n         *net
	from, to  int
	tag       int
	buf       []byte
	done      bool
	err       error
	cancelled bool
}

func (r *req) Test() (bool, error) {
	r.n.mu.Lock()
	defer r.n.mu.Unlock()
	return r.done, r.err
}

func (r *req) Cancel() error {
	r.n.mu.Lock()
	defer r.n.mu.Unlock()
	r.cancelled = true
	r.n.recvs = remove(r.n.recvs, r)
	r.n.sends = remove(r.n.sends, r)
	return nil
}

func remove(rs []*req, r *req) []*req {
	for i, x := range rs {
		if x == r {
			return append(rs[:i], rs[i+1:]...)
		}
	}
	return rs
}

// fail fails the pending receive of to from from.
func (n *net) fail(from, to int, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range n.recvs {
		if r.from == from && r.to == to {
			r.err = err
			n.recvs = remove(n.recvs, r)
			return
		}
	}
}

func (n *net) match() {
	for _, s := range n.sends {
		for _, r := range n.recvs {
			if s.from == r.from && s.to == r.to && s.tag == r.tag {
				copy(r.buf, s.buf)
				s.done, r.done = true, true
				n.sends = remove(n.sends, s)
				n.recvs = remove(n.recvs, r)
				n.match()
				return
			}
		}
	}
}

func (n *net) pending() (recvs, sends int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.recvs), len(n.sends)
}

type endpoint struct {
	n      *net
	rank   int
	size   int
	closed atomic.Bool
}

func (e *endpoint) Name() string { return "mem" }
func (e *endpoint) Rank() int    { return e.rank }
func (e *endpoint) Size() int    { return e.size }
func (e *endpoint) Close() error { e.closed.Store(true); return nil }
func (e *endpoint) Allgather(context.Context, []byte, []byte) error {
	return errors.New("not used")
}

func (e *endpoint) Isend(p []byte, peer, tag int) (backend.Request, error) {
	e.n.mu.Lock()
	defer e.n.mu.Unlock()
	r := &req{n: e.n, from: e.rank, to: peer, tag: tag, buf: p}
	e.n.sends = append(e.n.sends, r)
	e.n.match()
	return r, nil
}

func (e *endpoint) Irecv(p []byte, peer, tag int) (backend.Request, error) {
	e.n.mu.Lock()
	defer e.n.mu.Unlock()
	r := &req{n: e.n, from: peer, to: e.rank, tag: tag, buf: p}
	e.n.recvs = append(e.n.recvs, r)
	e.n.match()
	return r, nil
}

func endpoints(size int) []*endpoint {
	n := &net{}
	es := make([]*endpoint, size)
	for i := range es {
		es[i] = &endpoint{n: n, rank: i, size: size}
	}
	return es
}

type owner struct {
	got chan got
}

type got struct {
	p   int
	m   Msg
	err error
}

func record(o *owner, p int, m Msg, err error) { o.got <- got{p, m, err} }

func start(t *testing.T, e *endpoint, o *owner) *Poller[owner] {
	t.Helper()
	k, err := Post(e, true, 7, e.size, o, record)
	if err != nil {
		t.Fatal(err)
	}
	k.Start()
	return k
}

func TestPollerDelivers(t *testing.T) {
	es := endpoints(3)
	os := make([]*owner, 3)
	ks := make([]*Poller[owner], 3)
	for i, e := range es {
		os[i] = &owner{got: make(chan got, 4)}
		ks[i] = start(t, e, os[i])
	}
	want := Msg{Rank: 4, Timeout: true, Text: "rank 4 timed out"}
	ks[1].Broadcast(want)
	ks[1].Broadcast(Msg{Rank: 9, Text: "a second broadcast is dropped"})
	for _, i := range []int{0, 2} {
		select {
		case g := <-os[i].got:
			if g.p != 1 || g.m != want || g.err != nil {
				t.Errorf("process %d got %+v, want %+v from process 1", i, g, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("process %d got nothing", i)
		}
	}
	// A failed receive reaches the handler as an error naming the process.
	boom := errors.New("peer died")
	es[0].n.fail(2, 0, boom)
	select {
	case g := <-os[0].got:
		if g.p != 2 || !errors.Is(g.err, boom) || !strings.Contains(g.err.Error(), "process 2") {
			t.Errorf("failed receive: %+v", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the failed receive was not reported")
	}
	for i, k := range ks {
		if err := k.Close(); err != nil || !es[i].closed.Load() {
			t.Errorf("Close %d: %v, transport closed %v", i, err, es[i].closed.Load())
		}
		if err := k.Close(); err != nil {
			t.Errorf("second Close %d: %v", i, err)
		}
	}
	if r, s := es[0].n.pending(); r != 0 || s != 0 {
		t.Errorf("after Close: %d receives and %d sends pending", r, s)
	}
	for i := range os {
		select {
		case g := <-os[i].got:
			t.Errorf("process %d: a second message %+v", i, g)
		default:
		}
	}
}

func TestCloseStopsPoller(t *testing.T) {
	es := endpoints(2)
	o := &owner{got: make(chan got, 1)}
	k, err := Post(es[0], false, 7, 2, o, record)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil { // never started
		t.Fatal(err)
	}
	if k, err = Post(es[0], false, 7, 2, o, record); err != nil {
		t.Fatal(err)
	}
	k.Start()
	if err := k.Close(); err != nil || es[0].closed.Load() {
		t.Fatalf("Close: %v; transport closed %v though not owned", err, es[0].closed.Load())
	}
	select {
	case <-k.done:
	default:
		t.Fatal("the poller still runs after Close")
	}
	k.Broadcast(Msg{Text: "after Close"}) // does nothing
	if r, s := es[0].n.pending(); r != 0 || s != 0 {
		t.Errorf("after Close: %d receives and %d sends pending", r, s)
	}
}

func TestPostFailureCancels(t *testing.T) {
	es := endpoints(3)
	bad := &failing{endpoint: es[0], at: 2}
	if _, err := Post(bad, true, 7, 3, &owner{}, record); err == nil || !strings.Contains(err.Error(), "process 2") {
		t.Fatalf("Post: %v", err)
	}
	if r, _ := es[0].n.pending(); r != 0 || es[0].closed.Load() {
		t.Errorf("after a failed Post: %d receives pending, transport closed %v", r, es[0].closed.Load())
	}
}

type failing struct {
	*endpoint
	at int
}

func (f *failing) Irecv(p []byte, peer, tag int) (backend.Request, error) {
	if peer == f.at {
		return nil, errors.New("no")
	}
	return f.endpoint.Irecv(p, peer, tag)
}

// An owner dropped without Close is collected though its poller runs; its
// cleanup closes the poller.
func TestDroppedOwnerCollected(t *testing.T) {
	es := endpoints(2)
	o := &owner{got: make(chan got, 1)}
	k := start(t, es[0], o)
	runtime.AddCleanup(o, func(k *Poller[owner]) { k.Close() }, k)
	wo := weak.Make(o)
	o = nil
	deadline := time.Now().Add(10 * time.Second)
	for wo.Value() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the owner was not collected")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	for !es[0].closed.Load() { // Close ends with the owned transport
		if time.Now().After(deadline) {
			t.Fatal("the cleanup did not close the poller")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	select {
	case <-k.done:
	default:
		t.Fatal("the poller still runs after the cleanup's Close")
	}
}
