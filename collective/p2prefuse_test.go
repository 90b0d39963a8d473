package collective

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A point-to-point call refused on its own rank (a bad peer, aliased
// arguments, a closed HostBuffer, a context ended before the call) breaks
// the group naming itself, so the peer waiting for its matching operation
// fails at once instead of after CommunicationTimeout. These tests refuse
// rank 0's call in every point-to-point form (blocking, asynchronous,
// Batch, SendRecv), as the sender and as the receiver, with the peer in
// the same process and in another one.

// p2pForm is a way to post one point-to-point operation.
type p2pForm struct {
	name         string
	sendOp, recv string // the names errors give the operation
	do           func(ctx context.Context, c *Comm, send bool, data []float32, peer int) error
}

var p2pForms = []p2pForm{
	{"blocking", "Send", "Recv", func(ctx context.Context, c *Comm, send bool, data []float32, peer int) error {
		if send {
			return Send(ctx, c, data, peer)
		}
		return Recv(ctx, c, data, peer)
	}},
	{"async", "SendAsync", "RecvAsync", func(ctx context.Context, c *Comm, send bool, data []float32, peer int) error {
		if send {
			return SendAsync(ctx, c, data, peer).Wait(context.Background())
		}
		return RecvAsync(ctx, c, data, peer).Wait(context.Background())
	}},
	{"batch", "SendAsync", "RecvAsync", func(ctx context.Context, c *Comm, send bool, data []float32, peer int) error {
		b := c.Batch()
		if send {
			BatchSend(b, data, peer)
		} else {
			BatchRecv(b, data, peer)
		}
		return b.Run(ctx)
	}},
	{"SendRecv", "SendRecv", "SendRecv", func(ctx context.Context, c *Comm, send bool, data []float32, peer int) error {
		if send {
			return SendRecv(ctx, c, data, peer, nil, -1)
		}
		return SendRecv(ctx, c, nil, -1, data, peer)
	}},
}

// p2pRefusal makes rank 0's call refused: it returns the context, data
// and peer to call with, and the sentinel rank 0's error must match.
type p2pRefusal struct {
	name string
	make func(t *testing.T, peer int) (ctx context.Context, data []float32, callPeer int, want error)
}

var p2pRefusals = []p2pRefusal{
	{"peer out of range", func(t *testing.T, peer int) (context.Context, []float32, int, error) {
		return context.Background(), make([]float32, 8), 9, ErrInvalidArgument
	}},
	// Blocking and SendRecv forms only: SendAsync, RecvAsync and Batch
	// may send to and receive from the rank itself.
	{"peer is itself", func(t *testing.T, peer int) (context.Context, []float32, int, error) {
		return context.Background(), make([]float32, 8), 0, ErrInvalidArgument
	}},
	{"closed HostBuffer", func(t *testing.T, peer int) (context.Context, []float32, int, error) {
		hb, err := NewHostBuffer[float32](8)
		if err != nil {
			t.Fatal(err)
		}
		data := hb.Data
		if err := hb.Close(); err != nil {
			t.Fatal(err)
		}
		return context.Background(), data, peer, ErrClosed
	}},
	{"cancelled context", func(t *testing.T, peer int) (context.Context, []float32, int, error) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, make([]float32, 8), peer, context.Canceled
	}},
}

// refusedWorld opens a fresh world of 4 ranks (the refusal breaks it): in
// one process (cross false), or 2 processes of 2 ranks (ranks 0 and 1 in
// process 0).
func refusedWorld(t *testing.T, cross bool) p2pWorld {
	mod := func(o *Options) { o.Config.CommunicationTimeout = 60 * time.Second }
	if !cross {
		g := openGroup(t, "host", 4, mod)
		return p2pWorld{"in-process", func(f func(c *Comm) error) []error { return onRanks(g, f) }}
	}
	gs := openProcesses(t, "host", 2, 2, mod)
	return p2pWorld{"2 processes", func(f func(c *Comm) error) []error { return onAllRanks(gs, f) }}
}

// checkRefused checks rank 0's own error (an *Error of its call op,
// matching want) and the peer's (a prompt failure naming rank 0's op as
// the group's break). A peer that sends to another process may also
// succeed: the transport may take a message before it is received (as
// MPI_Send may).
func checkRefused(t *testing.T, what string, errs []error, took []time.Duration, peer int, op, peerOp string, want error, crossProcess, peerSends bool) {
	t.Helper()
	var e *Error
	if !errors.As(errs[0], &e) || e.Rank != 0 || e.Op != op || !e.P2P || !errors.Is(errs[0], want) {
		t.Errorf("%s: rank 0: %v, want an *Error of its %s (point-to-point) matching %v", what, errs[0], op, want)
	}
	err := errs[peer]
	if took[peer] > time.Second {
		t.Errorf("%s: rank %d waited %v for the refused call (error %v)", what, peer, took[peer], err)
	}
	if err == nil && crossProcess && peerSends {
		return
	}
	var pe *Error
	var be *BrokenError
	if !errors.As(err, &pe) || pe.Rank != peer || pe.Op != peerOp || !pe.P2P || !errors.Is(err, ErrGroupBroken) || !errors.As(err, &be) {
		t.Errorf("%s: rank %d: %v, want an *Error of its %s breaking with ErrGroupBroken", what, peer, err, peerOp)
		return
	}
	if !crossProcess {
		if be.Rank != 0 || be.Op != op || !be.P2P || be.Seq == 0 {
			t.Errorf("%s: rank %d: the group broke by %v (rank %d, %s #%d, P2P %v), want rank 0's %s, a numbered point-to-point call",
				what, peer, be, be.Rank, be.Op, be.Seq, be.P2P, op)
		}
		if want != context.Canceled && !errors.Is(err, want) {
			t.Errorf("%s: rank %d: %v, want the cause %v", what, peer, err, want)
		}
		if errors.Is(err, context.Canceled) {
			t.Errorf("%s: rank %d: %v matches rank 0's context.Canceled", what, peer, err)
		}
		return
	}
	var re *RemoteError
	if !errors.As(err, &re) || re.Rank != 0 || !strings.Contains(re.Msg, "rank 0's "+op+" (point-to-point call #") {
		t.Errorf("%s: rank %d: %v, want a *RemoteError naming rank 0's %s", what, peer, err, op)
	}
	if (want == ErrInvalidArgument || want == ErrClosed) && !errors.Is(err, want) {
		t.Errorf("%s: rank %d: %v, want the cause %v across processes", what, peer, err, want)
	}
}

// peerCtx bounds the peer's wait (CommunicationTimeout is a minute): a
// peer left waiting fails the test after 5 s, not at the timeout.
func peerCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// runRefused runs rank 0's refused call and the peer's matching operation
// (ranks other than 0 and peer do nothing), and returns the errors and how
// long each rank's call took.
func runRefused(w p2pWorld, peer int, r0, rp func(c *Comm) error) ([]error, []time.Duration) {
	errs := make([]error, 4)
	took := make([]time.Duration, 4)
	w.run(func(c *Comm) error {
		start := time.Now()
		switch c.Rank() {
		case 0:
			errs[0] = r0(c)
		case peer:
			errs[peer] = rp(c)
		}
		took[c.Rank()] = time.Since(start)
		return nil
	})
	return errs, took
}

func TestP2PRefusedCallFailsPeer(t *testing.T) {
	for _, f := range p2pForms {
		for _, rf := range p2pRefusals {
			for _, send := range []bool{true, false} {
				for _, cross := range []bool{false, true} {
					if rf.name == "peer is itself" && (f.name == "async" || f.name == "batch") {
						continue // a message to itself: not refused (selfp2p_test.go)
					}
					w := refusedWorld(t, cross)
					peer := 1
					if cross {
						peer = 2 // in the other process
					}
					op, peerOp := f.sendOp, f.recv
					if !send {
						op, peerOp = f.recv, f.sendOp
					}
					what := fmt.Sprintf("%s, %s, rank 0 sends %v, %s", f.name, rf.name, send, w.name)
					ctx, data, callPeer, want := rf.make(t, peer)
					errs, took := runRefused(w, peer,
						func(c *Comm) error { return f.do(ctx, c, send, data, callPeer) },
						func(c *Comm) error { return f.do(peerCtx(t), c, !send, make([]float32, 8), 0) })
					checkRefused(t, what, errs, took, peer, op, peerOp, want, cross, !send)
				}
			}
		}
	}
}

// SendRecv with send and recv partly overlapping is refused; its peers
// (one it sends to, one it receives from, in one process and across
// processes) fail at once.
func TestP2PRefusedSendRecvAliasFailsPeer(t *testing.T) {
	for _, cross := range []bool{false, true} {
		w := refusedWorld(t, cross)
		peer := 1
		if cross {
			peer = 2
		}
		b := make([]float32, 9)
		errs, took := runRefused(w, peer,
			func(c *Comm) error { return SendRecv(context.Background(), c, b[:8], peer, b[1:], peer) },
			func(c *Comm) error { return SendRecv(peerCtx(t), c, make([]float32, 8), 0, make([]float32, 8), 0) })
		checkRefused(t, "SendRecv, overlap, "+w.name, errs, took, peer, "SendRecv", "SendRecv", ErrInvalidArgument, cross, false)
	}
}
