package channel_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/host"
	"github.com/gocoll/gocoll/internal/channel"
)

const slotBytes = 64

// waiter waits on the channels with the context only, and records what the
// link reported.
type waiter struct {
	mu         sync.Mutex
	fails      []error
	mismatches []int
}

func (w *waiter) Message(ctx context.Context, ch <-chan channel.Msg, peer int, phase string) (channel.Msg, error) {
	return wait(ctx, ch)
}

func (w *waiter) Credit(ctx context.Context, ch <-chan int, peer int, phase string) (int, error) {
	return wait(ctx, ch)
}

func wait[T any](ctx context.Context, ch <-chan T) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func (w *waiter) Request(ctx context.Context, r backend.Request, peer int, phase string, stage *[]byte) error {
	for {
		done, err := r.Test()
		if err != nil || done {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

func (w *waiter) Fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fails = append(w.fails, err)
}

var errMismatch = errors.New("mismatch")

func (w *waiter) Mismatch(peer int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mismatches = append(w.mismatches, peer)
	return errMismatch
}

// plain hides a device's import of host memory.
type plain struct{ backend.Device }

func open(t *testing.T) backend.Device {
	t.Helper()
	d, err := host.Open(backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func inbox(t *testing.T, d backend.Device) backend.Buffer {
	t.Helper()
	b, err := d.Alloc(2*slotBytes, backend.HostVisible)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// send reserves a slot on l, writes p into it and posts it.
func send(t *testing.T, ctx context.Context, l *channel.Link, e channel.End, p []byte, seq uint64) {
	t.Helper()
	slot, r, err := l.Reserve(ctx, e, len(p))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Buf.Write(r.Off, p); err != nil {
		t.Fatal(err)
	}
	l.Post(e, slot, len(p), seq)
}

func read(t *testing.T, r backend.Region) []byte {
	t.Helper()
	p := make([]byte, r.Len)
	if err := r.Buf.Read(r.Off, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLocalWays(t *testing.T) {
	type result struct {
		Data    [][]byte
		Held    []bool
		InPlace bool
	}
	for _, tc := range []struct {
		name string
		make func(from, to backend.Device) *channel.Link
		recv func(d backend.Device) backend.Device
		want result
	}{
		{"host-imported", func(from, to backend.Device) *channel.Link {
			return channel.NewHost(0, 1, slotBytes, to, func() {}, func() {})
		}, nil, result{Held: []bool{true, true, true}, InPlace: true}},
		{"host-copied", func(from, to backend.Device) *channel.Link {
			return channel.NewHost(0, 1, slotBytes, plain{to}, func() {}, func() {})
		}, func(d backend.Device) backend.Device { return plain{d} }, result{Held: []bool{false, false, false}}},
		{"shared", func(from, to backend.Device) *channel.Link {
			return channel.NewShared(0, 1, slotBytes, func() {}, func() {})
		}, nil, result{Held: []bool{true, true, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			d0, d1 := open(t), open(t)
			recv := d1
			if tc.recv != nil {
				recv = tc.recv(d1)
			}
			l := tc.make(d0, d1)
			w0, w1 := &waiter{}, &waiter{}
			e0, e1 := channel.End{Dev: d0, W: w0}, channel.End{Dev: recv, W: w1}
			in := inbox(t, d1)
			var got result
			msgs := [][]byte{[]byte("first"), []byte("second message"), []byte("third")}
			for i, p := range msgs {
				send(t, ctx, l, e0, p, 7)
				r, h, err := l.Take(ctx, e1, in, i%2, 7, len(p))
				if err != nil {
					t.Fatal(err)
				}
				got.Data = append(got.Data, read(t, r))
				got.Held = append(got.Held, h != channel.Held{})
				// The credit comes back only with the release of a slot
				// read in place.
				h.Release()
			}
			_, got.InPlace = l.InPlace()
			tc.want.Data = msgs
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if errs := l.Close(false, false); len(errs) > 0 {
				t.Errorf("Close: %v", errs)
			}
			if len(w0.fails)+len(w1.fails) > 0 {
				t.Errorf("failures: %v %v", w0.fails, w1.fails)
			}
		})
	}
}

// TestCredits: a sender runs at most Slots messages ahead of its receiver.
func TestCredits(t *testing.T) {
	d0, d1 := open(t), open(t)
	var rings [2]int
	l := channel.NewShared(0, 1, slotBytes, func() { rings[0]++ }, func() { rings[1]++ })
	e0, e1 := channel.End{Dev: d0, W: &waiter{}}, channel.End{Dev: d1, W: &waiter{}}
	ctx := context.Background()
	for i := 0; i < channel.Slots; i++ {
		send(t, ctx, l, e0, []byte{byte(i)}, 1)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, _, err := l.Reserve(short, e0, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reserve with every slot in flight: %v, want a timeout", err)
	}
	_, h, err := l.Take(ctx, e1, nil, 0, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	if _, _, err := l.Reserve(ctx, e0, 1); err != nil {
		t.Fatalf("Reserve after a release: %v", err)
	}
	if diff := cmp.Diff([2]int{1, channel.Slots}, rings); diff != "" {
		t.Errorf("doorbells rung (sender, receiver) (-want +got):\n%s", diff)
	}
}

// TestMismatch: a message of another call or size is refused and its slot
// returned.
func TestMismatch(t *testing.T) {
	d0, d1 := open(t), open(t)
	l := channel.NewShared(0, 1, slotBytes, func() {}, func() {})
	w1 := &waiter{}
	e0, e1 := channel.End{Dev: d0, W: &waiter{}}, channel.End{Dev: d1, W: w1}
	ctx := context.Background()
	send(t, ctx, l, e0, []byte("abc"), 3)
	send(t, ctx, l, e0, []byte("abc"), 4)
	if _, _, err := l.Take(ctx, e1, nil, 0, 4, 3); !errors.Is(err, errMismatch) {
		t.Errorf("Take of another call's message: %v", err)
	}
	if _, _, err := l.Take(ctx, e1, nil, 0, 4, 5); !errors.Is(err, errMismatch) {
		t.Errorf("Take of another size: %v", err)
	}
	if diff := cmp.Diff([]int{0, 0}, w1.mismatches); diff != "" {
		t.Errorf("mismatches reported (-want +got):\n%s", diff)
	}
	// Both slots came back.
	for i := 0; i < channel.Slots; i++ {
		if _, _, err := l.Reserve(ctx, e0, 1); err != nil {
			t.Fatal(err)
		}
	}
}

// loopback is a transport within one process: a send completes when its
// bytes are queued under its tag.
type loopback struct {
	mu sync.Mutex
	q  map[int][][]byte
}

type done struct{}

func (done) Test() (bool, error) { return true, nil }
func (done) Cancel() error       { return nil }

type recvReq struct {
	t   *loopback
	p   []byte
	tag int
}

func (r *recvReq) Test() (bool, error) {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	q := r.t.q[r.tag]
	if len(q) == 0 {
		return false, nil
	}
	copy(r.p, q[0])
	r.t.q[r.tag] = q[1:]
	return true, nil
}

func (r *recvReq) Cancel() error { return nil }

func (t *loopback) Name() string { return "loopback" }
func (t *loopback) Rank() int    { return 0 }
func (t *loopback) Size() int    { return 2 }
func (t *loopback) Isend(p []byte, peer, tag int) (backend.Request, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.q[tag] = append(t.q[tag], append([]byte(nil), p...))
	return done{}, nil
}
func (t *loopback) Irecv(p []byte, peer, tag int) (backend.Request, error) {
	return &recvReq{t: t, p: p, tag: tag}, nil
}
func (t *loopback) Allgather(ctx context.Context, mine, all []byte) error { return nil }
func (t *loopback) Close() error                                          { return nil }

func TestRemote(t *testing.T) {
	d0, d1 := open(t), open(t)
	tr := &loopback{q: map[int][][]byte{}}
	// The two ends of one link, each in its own process.
	out := channel.NewRemote(0, 1, slotBytes, tr, 0, 1, 5)
	inl := channel.NewRemote(0, 1, slotBytes, tr, 0, 1, 5)
	if !out.Remote() {
		t.Fatal("a remote link is not Remote")
	}
	e0, e1 := channel.End{Dev: d0, W: &waiter{}}, channel.End{Dev: d1, W: &waiter{}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in := inbox(t, d1)
	msgs := [][]byte{[]byte("one"), []byte("two, longer"), []byte("three")}
	var got [][]byte
	for i, p := range msgs {
		send(t, ctx, out, e0, p, 1)
		r, h, err := inl.Take(ctx, e1, in, i%2, 1, len(p))
		if err != nil {
			t.Fatal(err)
		}
		if h != (channel.Held{}) {
			t.Error("a remote message is held in place")
		}
		got = append(got, read(t, r))
	}
	if diff := cmp.Diff(msgs, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	out.FinishSends(true, time.Second)
	if errs := out.Close(false, false); len(errs) > 0 {
		t.Errorf("Close: %v", errs)
	}
}
