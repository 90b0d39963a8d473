package collective

import (
	"context"
	"sync/atomic"
	"testing"
)

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
	send, recv := make([][]int32, ranks), make([][]int32, ranks)
	for r := range send {
		send[r], recv[r] = make([]int32, n), make([]int32, n)
	}
	// fill gives rank r's message of call k; check verifies that rank r
	// received rank from's message of call k.
	step := make([]int32, ranks)
	fill := func(buf []int32, r int, k int32) {
		for i := range buf {
			buf[i] = int32(r)*1_000_000 + k*1000 + int32(i%1000)
		}
	}
	var bad atomic.Int64
	check := func(buf []int32, from int, k int32) {
		for i, v := range buf {
			if want := int32(from)*1_000_000 + k*1000 + int32(i%1000); v != want {
				bad.Add(1)
				return
			}
		}
	}
	// ring sends to the next rank and receives from the previous one, from
	// and into one buffer (replace) or two.
	ring := func(replace bool) func(ctx context.Context, c *Comm) error {
		return func(ctx context.Context, c *Comm) error {
			r := c.Rank()
			step[r]++
			fill(send[r], r, step[r])
			to, from, into := (r+1)%ranks, (r+ranks-1)%ranks, recv[r]
			if replace {
				into = send[r]
			}
			if err := SendRecv(ctx, c, send[r], to, into, from); err != nil {
				return err
			}
			check(into, from, step[r])
			return nil
		}
	}
	calls := map[string]func(ctx context.Context, c *Comm) error{
		"SendRecv":        ring(false),
		"SendRecvReplace": ring(true),
		"Send+Recv": func(ctx context.Context, c *Comm) error {
			r := c.Rank()
			step[r]++
			fill(send[r], r, step[r])
			peer := r ^ 1
			if r%2 == 0 {
				if err := Send(ctx, c, send[r], peer); err != nil {
					return err
				}
				if err := Recv(ctx, c, recv[r], peer); err != nil {
					return err
				}
			} else {
				if err := Recv(ctx, c, recv[r], peer); err != nil {
					return err
				}
				if err := Send(ctx, c, send[r], peer); err != nil {
					return err
				}
			}
			check(recv[r], peer, step[r])
			return nil
		},
	}
	for _, name := range []string{"SendRecv", "SendRecvReplace", "Send+Recv"} {
		call := calls[name]
		for _, kind := range []string{"background", "run", "deadline"} {
			clear(step)
			bad.Store(0)
			var a float64
			if kind == "background" {
				stepAll, stop := startOpLoop(g, func(c *Comm, _ int) error { return call(context.Background(), c) })
				for i := 0; i < 3; i++ {
					if err := stepAll(); err != nil {
						t.Fatal(err)
					}
				}
				a = testing.AllocsPerRun(20, func() {
					if err := stepAll(); err != nil {
						t.Error(err)
					}
				})
				stop()
			} else {
				a = runCtxAllocs(t, g, kind, call)
			}
			if a != 0 {
				t.Errorf("%s/%s: %v allocations per call, want 0", name, kind, a)
			}
			if b := bad.Load(); b != 0 {
				t.Errorf("%s/%s: %d calls received other data than their peer's", name, kind, b)
			}
			if step[0] != 24 {
				t.Errorf("%s/%s: rank 0 made %d calls, want 24", name, kind, step[0])
			}
		}
	}
}
