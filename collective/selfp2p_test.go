package collective

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Point-to-point with one's own rank: SendRecv to and from itself, SendAsync
// and RecvAsync to itself in either order, and a Send and a Recv to itself
// in one Batch pair in call order as with any other peer, in one process
// and in groups spanning processes (where a message to itself never goes
// to the transport), on 1-4 ranks. A blocking Send or Recv to itself alone
// (and a SendRecv with itself on one side only) is refused at once.

// selfVal is element i of the message rank r sends itself in round k.
func selfVal(r, k, i int) int64 { return int64(r)*1_000_003 + int64(k)*7919 + int64(i) }

// selfSizes are the element counts tested: empty, one, odd, across the
// slot boundaries of 4096-byte slots, and large.
func selfSizes(bk string) []int {
	s := []int{0, 1, 7, 1023, 4097, 3*512 + 7}
	if bk == "host" || fullRun() {
		s = append(s, 1<<18+3)
	}
	return s
}

func fillSelf(r, k, n int) []int64 {
	d := make([]int64, n)
	for i := range d {
		d[i] = selfVal(r, k, i)
	}
	return d
}

func checkSelf(t *testing.T, what string, r, k int, got []int64) {
	t.Helper()
	for i, v := range got {
		if v != selfVal(r, k, i) {
			t.Fatalf("%s: rank %d element %d of %d = %d, want %d", what, r, i, len(got), v, selfVal(r, k, i))
		}
	}
}

// selfForms runs one self-message of round k on c in each supported form:
// it sends send and receives into recv.
var selfForms = []struct {
	name string
	do   func(ctx context.Context, c *Comm, send, recv []int64) error
}{
	{"SendRecv", func(ctx context.Context, c *Comm, send, recv []int64) error {
		return SendRecv(ctx, c, send, c.Rank(), recv, c.Rank())
	}},
	{"SendAsync then RecvAsync", func(ctx context.Context, c *Comm, send, recv []int64) error {
		ws := SendAsync(ctx, c, send, c.Rank())
		wr := RecvAsync(ctx, c, recv, c.Rank())
		return WaitAll(ctx, ws, wr)
	}},
	{"RecvAsync then SendAsync", func(ctx context.Context, c *Comm, send, recv []int64) error {
		wr := RecvAsync(ctx, c, recv, c.Rank())
		ws := SendAsync(ctx, c, send, c.Rank())
		return WaitAll(ctx, wr, ws)
	}},
	{"Batch, Send first", func(ctx context.Context, c *Comm, send, recv []int64) error {
		b := c.Batch()
		BatchSend(b, send, c.Rank())
		BatchRecv(b, recv, c.Rank())
		return b.Run(ctx)
	}},
	{"Batch, Recv first", func(ctx context.Context, c *Comm, send, recv []int64) error {
		b := c.Batch()
		BatchRecv(b, recv, c.Rank())
		BatchSend(b, send, c.Rank())
		return b.Run(ctx)
	}},
}

func TestSelfP2PForms(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for ranks := 1; ranks <= 4; ranks++ {
			g := openGroup(t, bk, ranks)
			for _, n := range selfSizes(bk) {
				for k, f := range selfForms {
					what := fmt.Sprintf("%s, %d ranks, n=%d, %s", bk, ranks, n, f.name)
					recv := make([][]int64, ranks)
					noErrors(t, onRanks(g, func(c *Comm) error {
						r := c.Rank()
						recv[r] = make([]int64, n)
						return f.do(context.Background(), c, fillSelf(r, k, n), recv[r])
					}))
					for r := range recv {
						checkSelf(t, what, r, k, recv[r])
					}
				}
				// In place: one buffer sent to and received from itself.
				bufs := make([][]int64, ranks)
				noErrors(t, onRanks(g, func(c *Comm) error {
					r := c.Rank()
					bufs[r] = fillSelf(r, 99, n)
					return SendRecv(context.Background(), c, bufs[r], r, bufs[r], r)
				}))
				for r := range bufs {
					checkSelf(t, fmt.Sprintf("%s, %d ranks, n=%d, SendRecv in place", bk, ranks, n), r, 99, bufs[r])
				}
			}
		}
	}
}

// Messages to itself pair in call order, and mix with messages to other
// ranks in one Batch and among asynchronous operations: every rank sends
// itself two messages and its right neighbour one, receiving in another
// order than it sent, the first by an asynchronous Recv started before
// the Batch.
func TestSelfP2POrderAndMix(t *testing.T) {
	for _, ranks := range []int{2, 3, 4} {
		g := openGroup(t, "host", ranks)
		const n = 301
		got := make([][3][]int64, ranks)
		noErrors(t, onRanks(g, func(c *Comm) error {
			ctx := context.Background()
			r := c.Rank()
			right, left := (r+1)%ranks, (r+ranks-1)%ranks
			for i := range got[r] {
				got[r][i] = make([]int64, n)
			}
			// The first message to itself is received by an asynchronous
			// Recv started before the Batch, the second in the Batch.
			w := RecvAsync(ctx, c, got[r][0], r)
			b := c.Batch()
			BatchSend(b, fillSelf(r, 0, n), r)
			BatchRecv(b, got[r][2], left)
			BatchSend(b, fillSelf(r, 2, n), right)
			BatchRecv(b, got[r][1], r)
			BatchSend(b, fillSelf(r, 1, n), r)
			if err := b.Run(ctx); err != nil {
				return err
			}
			return w.Wait(ctx)
		}))
		for r := range got {
			left := (r + ranks - 1) % ranks
			checkSelf(t, fmt.Sprintf("%d ranks, first message to itself", ranks), r, 0, got[r][0])
			checkSelf(t, fmt.Sprintf("%d ranks, second message to itself", ranks), r, 1, got[r][1])
			checkSelf(t, fmt.Sprintf("%d ranks, message from the left", ranks), left, 2, got[r][2])
		}
	}
}

// A length or a type that differs between a rank's send to itself and its
// receive from itself is a *MismatchError, naming the rank on both sides.
func TestSelfP2PMismatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(ctx context.Context, c *Comm) (send, recv Work)
	}{
		{"length", func(ctx context.Context, c *Comm) (Work, Work) {
			return SendAsync(ctx, c, make([]float32, 8), c.Rank()), RecvAsync(ctx, c, make([]float32, 9), c.Rank())
		}},
		{"type", func(ctx context.Context, c *Comm) (Work, Work) {
			return SendAsync(ctx, c, make([]float32, 8), c.Rank()), RecvAsync(ctx, c, make([]int32, 8), c.Rank())
		}},
	} {
		for _, ranks := range []int{1, 2} {
			g := openGroup(t, "host", ranks)
			c := g.Comm(0)
			ws, wr := tc.do(context.Background(), c)
			for i, w := range []Work{ws, wr} {
				err := w.Wait(context.Background())
				var me *MismatchError
				if !errors.As(err, &me) || me.Rank != 0 || me.Peer != 0 || !errors.Is(err, ErrMismatch) {
					t.Errorf("%s mismatch, %d ranks, Work %d: %v, want a *MismatchError of rank 0 with itself", tc.name, ranks, i, err)
				}
			}
		}
	}
	// SendRecv too.
	g := openGroup(t, "host", 1)
	err := SendRecv(context.Background(), g.Comm(0), make([]int64, 4), 0, make([]int64, 5), 0)
	var me *MismatchError
	if !errors.As(err, &me) || me.Rank != 0 || me.Peer != 0 {
		t.Errorf("SendRecv length mismatch with itself: %v, want a *MismatchError", err)
	}
}

// A blocking Send or Recv to itself, and a SendRecv with itself on one
// side only, fail at once with ErrInvalidArgument naming the forms that
// work, and break the group naming the call (as every refused
// point-to-point call does), so the other ranks fail at once.
func TestSelfP2PBlockingRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		do    func(ctx context.Context, c *Comm) error
		multi bool // only with other ranks (on one, every peer is itself)
	}{
		{"Send", func(ctx context.Context, c *Comm) error { return Send(ctx, c, make([]float32, 4), c.Rank()) }, false},
		{"Recv", func(ctx context.Context, c *Comm) error { return Recv(ctx, c, make([]float32, 4), c.Rank()) }, false},
		{"SendRecv", func(ctx context.Context, c *Comm) error {
			return SendRecv(ctx, c, make([]float32, 4), c.Rank(), nil, -1)
		}, false},
		{"SendRecv", func(ctx context.Context, c *Comm) error {
			return SendRecv(ctx, c, nil, -1, make([]float32, 4), c.Rank())
		}, false},
		{"SendRecv", func(ctx context.Context, c *Comm) error {
			return SendRecv(ctx, c, make([]float32, 4), c.Rank(), make([]float32, 4), (c.Rank()+1)%c.Group().Size())
		}, true},
	} {
		for _, ranks := range []int{1, 3} {
			if ranks == 1 && tc.multi {
				continue
			}
			g := openGroup(t, "host", ranks, func(o *Options) { o.Config.CommunicationTimeout = time.Minute })
			var mu sync.Mutex
			errs := make([]error, ranks)
			took := make([]time.Duration, ranks)
			onRanks(g, func(c *Comm) error {
				start := time.Now()
				var err error
				if c.Rank() == 0 {
					err = tc.do(context.Background(), c)
				} else {
					// Waits for rank 0, which never sends.
					err = Recv(context.Background(), c, make([]float32, 4), 0)
				}
				mu.Lock()
				errs[c.Rank()], took[c.Rank()] = err, time.Since(start)
				mu.Unlock()
				return nil
			})
			what := fmt.Sprintf("%s with itself, %d ranks", tc.name, ranks)
			var e *Error
			if !errors.As(errs[0], &e) || e.Rank != 0 || e.Op != tc.name || !e.P2P || !errors.Is(errs[0], ErrInvalidArgument) {
				t.Errorf("%s: rank 0: %v, want an *Error of its %s matching ErrInvalidArgument", what, errs[0], tc.name)
			} else {
				for _, form := range []string{"SendRecv", "SendAsync", "RecvAsync", "Batch"} {
					if !strings.Contains(errs[0].Error(), form) {
						t.Errorf("%s: rank 0: %v does not name %s", what, errs[0], form)
					}
				}
			}
			for r := 0; r < ranks; r++ {
				if took[r] > 5*time.Second {
					t.Errorf("%s: rank %d took %v", what, r, took[r])
				}
			}
			for r := 1; r < ranks; r++ {
				var be *BrokenError
				if !errors.As(errs[r], &be) || be.Rank != 0 || be.Op != tc.name || !be.P2P || !errors.Is(errs[r], ErrInvalidArgument) {
					t.Errorf("%s: rank %d: %v, want the group broken by rank 0's %s", what, r, errs[r], tc.name)
				}
			}
		}
	}
}

// In groups spanning processes, messages to itself are copied in the
// process: none reaches the transport (no queue of the loopback network
// from a process to itself), while messages to the other process do.
func TestSelfP2PAcrossProcesses(t *testing.T) {
	for _, local := range []int{1, 2} {
		trs := newLoopNet(2)
		gs := openProcessesOn(t, trs, "host", local)
		ranks := 2 * local
		for _, n := range []int{0, 1, 1023, 3*1024 + 7} {
			for k, f := range selfForms {
				recv := make([][]int64, ranks)
				other := make([][]int64, ranks)
				var mu sync.Mutex
				noErrors(t, onAllRanks(gs, func(c *Comm) error {
					r := c.Rank()
					got, fromOther := make([]int64, n), make([]int64, n)
					mu.Lock()
					recv[r], other[r] = got, fromOther
					mu.Unlock()
					if err := f.do(context.Background(), c, fillSelf(r, k, n), got); err != nil {
						return err
					}
					// A message to the rank at the same place in the
					// other process.
					peer := (r + local) % ranks
					return SendRecv(context.Background(), c, fillSelf(r, 50+k, n), peer, fromOther, peer)
				}))
				for r := range recv {
					what := fmt.Sprintf("%d processes of %d ranks, n=%d, %s", 2, local, n, f.name)
					checkSelf(t, what, r, k, recv[r])
					checkSelf(t, what+", from the other process", (r+local)%ranks, 50+k, other[r])
				}
			}
		}
		for p, tr := range trs {
			nets := append([]*loopNet{tr.net}, tr.net.dups...)
			sawOther := false
			for _, net := range nets {
				net.mu.Lock()
				for key := range net.queues {
					if key[0] == key[1] {
						t.Errorf("%d ranks per process: process %d's network has messages from process %d to itself (tag %d)", local, p, key[0], key[2])
					} else {
						sawOther = true
					}
				}
				net.mu.Unlock()
			}
			if !sawOther {
				t.Errorf("%d ranks per process: process %d's network carried nothing", local, p)
			}
		}
	}
}
