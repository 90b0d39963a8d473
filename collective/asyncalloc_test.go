package collective

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// asyncPairCalls is a steady-state asynchronous point-to-point pair on
// ranks ranks of n int32 each: every rank posts a SendAsync to pairOf(r)
// and a RecvAsync from it (the sender first on even ranks, the receiver
// first on odd ones), then waits for both. Each received message is
// checked against the values its peer sent in that step: bad counts the
// steps that received anything else, step[r] rank r's steps.
type asyncPairCalls struct {
	send, recv [][]int32
	step       []int32
	bad        atomic.Int64
}

func newAsyncPairCalls(ranks, n int) *asyncPairCalls {
	p := &asyncPairCalls{send: make([][]int32, ranks), recv: make([][]int32, ranks), step: make([]int32, ranks)}
	for r := range p.send {
		p.send[r], p.recv[r] = make([]int32, n), make([]int32, n)
	}
	return p
}

// call is rank c.Rank()'s step with peer.
func (p *asyncPairCalls) call(ctx context.Context, c *Comm, peer int) error {
	r := c.Rank()
	p.step[r]++
	k := p.step[r]
	for i := range p.send[r] {
		p.send[r][i] = int32(r)*1_000_000 + k*1000 + int32(i%1000)
	}
	var ws, wr Work
	if r%2 == 0 {
		ws = SendAsync(ctx, c, p.send[r], peer)
		wr = RecvAsync(ctx, c, p.recv[r], peer)
	} else {
		wr = RecvAsync(ctx, c, p.recv[r], peer)
		ws = SendAsync(ctx, c, p.send[r], peer)
	}
	if err := ws.Wait(ctx); err != nil {
		return err
	}
	if err := wr.Wait(ctx); err != nil {
		return err
	}
	for i, v := range p.recv[r] {
		if want := int32(peer)*1_000_000 + k*1000 + int32(i%1000); v != want {
			p.bad.Add(1)
			break
		}
	}
	return nil
}

// measure checks that the pair allocates nothing per step under
// context.Background, Run's ctx and a deadline ctx, on messages of 16 KiB
// and 1 MiB, and that every step received its peer's data.
func (p *asyncPairCalls) measure(t *testing.T, gs []*Group, peerOf func(r int) int) {
	t.Helper()
	// Warm-up: the comms' free records and the transport's free message
	// buffers grow to the most in use at once (a remote send's pieces may
	// all be out before its receive takes the first), reached before
	// counting.
	groupsCtxAllocs(t, gs, "background", func(ctx context.Context, c *Comm) error { return p.call(ctx, c, peerOf(c.Rank())) })
	for _, kind := range []string{"background", "run", "deadline"} {
		clear(p.step)
		p.bad.Store(0)
		a := groupsCtxAllocs(t, gs, kind, func(ctx context.Context, c *Comm) error {
			return p.call(ctx, c, peerOf(c.Rank()))
		})
		name := fmt.Sprintf("%dKiB/%s", 4*len(p.send[0])>>10, kind)
		if a != 0 {
			t.Errorf("%s: %v allocations per step, want 0", name, a)
		}
		if b := p.bad.Load(); b != 0 {
			t.Errorf("%s: %d steps received other data than their peer's", name, b)
		}
		if p.step[0] != 24 {
			t.Errorf("%s: rank 0 made %d steps, want 24", name, p.step[0])
		}
	}
}

// TestAsyncP2PZeroAllocs: a steady-state SendAsync and RecvAsync pair
// between ranks of one process, both waited for, allocates nothing (its
// operation records and Work handles reused, its context watched without a
// registration per operation) under context.Background, Run's ctx and a
// deadline ctx, 16 KiB and 1 MiB messages checked against the peer's.
func TestAsyncP2PZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const ranks = 4
	g := openGroup(t, "host", ranks)
	for _, size := range []int{16 << 10, 1 << 20} {
		newAsyncPairCalls(ranks, size/4).measure(t, []*Group{g}, func(r int) int { return r ^ 1 })
	}
}

// TestProcessesAsyncP2PZeroAllocs: the pair of TestAsyncP2PZeroAllocs
// between ranks of two simulated processes (over the in-memory transport
// that allocates nothing itself: quiettr_test.go) allocates nothing either,
// the messages moved in many of the transport's slots.
func TestProcessesAsyncP2PZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const procs, local = 2, 2
	gs := openProcessesOn(t, newQuietNet(procs), "host", local)
	peerOf := func(r int) int { return (r + local) % (procs * local) }
	for _, size := range []int{16 << 10, 1 << 20} {
		newAsyncPairCalls(procs*local, size/4).measure(t, gs, peerOf)
	}
}

// TestBatchP2PZeroAllocs: a steady-state Batch of a BatchSend and a
// BatchRecv with the paired rank, run and reused, allocates nothing (its
// operations' records reused as SendAsync's and RecvAsync's), under
// context.Background, Run's ctx and a deadline ctx, 16 KiB messages checked
// against the peer's.
func TestBatchP2PZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const ranks, n = 4, 4 << 10
	g := openGroup(t, "host", ranks)
	p := newAsyncPairCalls(ranks, n)
	batches := make([]*Batch, ranks)
	for r := range batches {
		batches[r] = g.Comm(r).Batch()
	}
	// The first pass warms up (the batches' slices, the comms' free
	// records), uncounted.
	for pass, kind := range []string{"background", "background", "run", "deadline"} {
		clear(p.step)
		p.bad.Store(0)
		a := groupsCtxAllocs(t, []*Group{g}, kind, func(ctx context.Context, c *Comm) error {
			r := c.Rank()
			p.step[r]++
			k, peer := p.step[r], r^1
			for i := range p.send[r] {
				p.send[r][i] = int32(r)*1_000_000 + k*1000 + int32(i%1000)
			}
			b := batches[r]
			BatchSend(b, p.send[r], peer)
			BatchRecv(b, p.recv[r], peer)
			if err := b.Run(ctx); err != nil {
				return err
			}
			for i, v := range p.recv[r] {
				if want := int32(peer)*1_000_000 + k*1000 + int32(i%1000); v != want {
					p.bad.Add(1)
					break
				}
			}
			return nil
		})
		if a != 0 && pass > 0 {
			t.Errorf("%s: %v allocations per batch, want 0", kind, a)
		}
		if b := p.bad.Load(); b != 0 || p.step[0] != 24 {
			t.Errorf("%s: %d batches received other data than their peer's, rank 0 ran %d, want 24", kind, b, p.step[0])
		}
	}
}
