package collective

import (
	"context"
	"errors"
	"testing"
)

// SendRecv: a pairwise exchange of several slots each way (which deadlocks
// as Send then Recv on both ranks) and a shift around a ring, at sizes
// around the slot boundaries, checked element by element.
func TestSendRecvLockstep(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for _, ranks := range []int{2, 3, 5} {
			g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 4096 })
			slot := 4096 / 4
			for _, n := range []int{0, 1, slot - 1, slot, slot + 1, 3*slot + 7, 40 * slot} {
				if bk == "vulkan" && n > 3*slot+7 && !fullRun() {
					continue
				}
				val := func(from, i int) float32 { return float32(from*1000003 + i) }
				send := make([][]float32, ranks)
				recv := make([][]float32, ranks)
				for r := range send {
					// Each rank sends n+r elements, so sizes differ along the ring.
					send[r] = make([]float32, n+r)
					for i := range send[r] {
						send[r][i] = val(r, i)
					}
					prev := (r + ranks - 1) % ranks
					recv[r] = make([]float32, n+prev)
				}
				noErrors(t, onRanks(g, func(c *Comm) error {
					r := c.Rank()
					return SendRecv(context.Background(), c, send[r], (r+1)%ranks, recv[r], (r+ranks-1)%ranks)
				}))
				for r := range recv {
					prev := (r + ranks - 1) % ranks
					for i, v := range recv[r] {
						if v != val(prev, i) {
							t.Fatalf("%s ranks=%d n=%d: rank %d element %d = %v, want %v", bk, ranks, n, r, i, v, val(prev, i))
						}
					}
				}
			}
		}
	}
}

// SendRecv pairs with plain Send and Recv, and one side may be absent.
func TestSendRecvWithSendAndRecv(t *testing.T) {
	g := openGroup(t, "host", 3, func(o *Options) { o.ChunkBytes = 256 })
	a := make([]float64, 300)
	for i := range a {
		a[i] = float64(i) + 0.5
	}
	got := make([]float64, 300)
	got2 := make([]float64, 300)
	noErrors(t, onRanks(g, func(c *Comm) error {
		ctx := context.Background()
		switch c.Rank() {
		case 0:
			return SendRecv(ctx, c, a, 1, nil, -1) // only sends
		case 1:
			if err := Recv(ctx, c, got, 0); err != nil {
				return err
			}
			return SendRecv(ctx, c, got, 2, nil, -1)
		default:
			return SendRecv(ctx, c, nil, -1, got2, 1) // only receives
		}
	}))
	for i := range a {
		if got[i] != a[i] || got2[i] != a[i] {
			t.Fatalf("element %d: %v %v, want %v", i, got[i], got2[i], a[i])
		}
	}
	if err := SendRecv[float32](context.Background(), g.Comm(0), nil, -1, nil, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("no peers: %v", err)
	}
	if err := SendRecv[float32](context.Background(), g.Comm(0), nil, 0, nil, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("send to self: %v", err)
	}
}
