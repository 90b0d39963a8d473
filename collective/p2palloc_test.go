package collective

import (
	"context"
	"sync/atomic"
	"testing"
)

// p2pAllocCalls are the synchronous point-to-point calls whose allocations
// TestP2PZeroAllocs and TestProcessesP2PZeroAllocs count, on ranks ranks of
// n int32 each: a SendRecv along the ring of the ranks (to the next, from
// the previous), one of a single buffer, and a Send and Recv pair with
// pairOf(r)'s peer (sendFirst: rank r sends before it receives). Each call's
// data is checked against the values its peer sent in that call: bad counts
// the calls that received anything else, step[r] rank r's calls.
type p2pAllocCalls struct {
	send, recv [][]int32
	step       []int32
	bad        atomic.Int64
	calls      map[string]func(ctx context.Context, c *Comm) error
}

func newP2PAllocCalls(ranks, n int, pairOf func(r int) (peer int, sendFirst bool)) *p2pAllocCalls {
	p := &p2pAllocCalls{send: make([][]int32, ranks), recv: make([][]int32, ranks), step: make([]int32, ranks)}
	for r := range p.send {
		p.send[r], p.recv[r] = make([]int32, n), make([]int32, n)
	}
	// fill gives rank r's message of call k; check verifies that rank r
	// received rank from's message of call k.
	fill := func(buf []int32, r int, k int32) {
		for i := range buf {
			buf[i] = int32(r)*1_000_000 + k*1000 + int32(i%1000)
		}
	}
	check := func(buf []int32, from int, k int32) {
		for i, v := range buf {
			if want := int32(from)*1_000_000 + k*1000 + int32(i%1000); v != want {
				p.bad.Add(1)
				return
			}
		}
	}
	// ring sends to the next rank and receives from the previous one, from
	// and into one buffer (replace) or two.
	ring := func(replace bool) func(ctx context.Context, c *Comm) error {
		return func(ctx context.Context, c *Comm) error {
			r := c.Rank()
			p.step[r]++
			fill(p.send[r], r, p.step[r])
			to, from, into := (r+1)%ranks, (r+ranks-1)%ranks, p.recv[r]
			if replace {
				into = p.send[r]
			}
			if err := SendRecv(ctx, c, p.send[r], to, into, from); err != nil {
				return err
			}
			check(into, from, p.step[r])
			return nil
		}
	}
	p.calls = map[string]func(ctx context.Context, c *Comm) error{
		"SendRecv":        ring(false),
		"SendRecvReplace": ring(true),
		"Send+Recv": func(ctx context.Context, c *Comm) error {
			r := c.Rank()
			p.step[r]++
			fill(p.send[r], r, p.step[r])
			peer, sendFirst := pairOf(r)
			send := func() error { return Send(ctx, c, p.send[r], peer) }
			recv := func() error { return Recv(ctx, c, p.recv[r], peer) }
			first, second := send, recv
			if !sendFirst {
				first, second = recv, send
			}
			if err := first(); err != nil {
				return err
			}
			if err := second(); err != nil {
				return err
			}
			check(p.recv[r], peer, p.step[r])
			return nil
		},
	}
	return p
}

// measure counts each call's allocations under context.Background, Run's
// ctx and a deadline ctx (groupsCtxAllocs over gs), and checks that each
// is 0 and every call received its peer's data.
func (p *p2pAllocCalls) measure(t *testing.T, gs []*Group) {
	t.Helper()
	for _, name := range []string{"SendRecv", "SendRecvReplace", "Send+Recv"} {
		for _, kind := range []string{"background", "run", "deadline"} {
			clear(p.step)
			p.bad.Store(0)
			if a := groupsCtxAllocs(t, gs, kind, p.calls[name]); a != 0 {
				t.Errorf("%s/%s: %v allocations per call, want 0", name, kind, a)
			}
			if b := p.bad.Load(); b != 0 {
				t.Errorf("%s/%s: %d calls received other data than their peer's", name, kind, b)
			}
			if p.step[0] != 24 {
				t.Errorf("%s/%s: rank 0 made %d calls, want 24", name, kind, p.step[0])
			}
		}
	}
}

// TestP2PZeroAllocs: a steady-state synchronous point-to-point call
// between ranks of one process allocates nothing (a SendRecv along a ring,
// one of a single buffer, and a Send and Recv pair), under
// context.Background, under the ctx Group.Run passes and under a ctx with a
// deadline made once before the loop; each call's data is checked against
// the values the peer sent.
func TestP2PZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const ranks, n = 4, 1024
	g := openGroup(t, "host", ranks)
	newP2PAllocCalls(ranks, n, func(r int) (int, bool) { return r ^ 1, r%2 == 0 }).measure(t, []*Group{g})
}

// TestProcessesP2PZeroAllocs: a steady-state synchronous point-to-point
// call between ranks of different processes (two simulated processes of
// two ranks over an in-memory transport that allocates nothing itself)
// allocates nothing: the calls of TestP2PZeroAllocs, the SendRecv along the
// ring of the four ranks with one operation with a rank of this process and
// one with the other process, the Send and Recv pair across the processes,
// messages of several of the transport's slots.
func TestProcessesP2PZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const procs, local, n = 2, 2, 1500 // n*4 bytes: several 4 KiB slots
	gs := openProcessesOn(t, newQuietNet(procs), "host", local)
	newP2PAllocCalls(procs*local, n, func(r int) (int, bool) {
		return (r + local) % (procs * local), r < local // the same local rank of the other process
	}).measure(t, gs)
}
