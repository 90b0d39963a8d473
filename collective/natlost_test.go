package collective

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// heldNC is loopTr's network (not a Duplicator: a group works on it
// directly) with native collectives that behave as MPI's while a process
// is missing: a call never completes, returns when its context ends, and
// the memory it was given stays the transport's (held) until the test
// completes the collective, writing the receive buffers late. Drain
// reports whether nothing is held; the calls are counted.
type heldNC struct {
	backend.Transport
	mu     sync.Mutex
	held   [][]byte // receive buffers the transport still holds
	calls  int
	drains []time.Duration
}

func (h *heldNC) Reduces(backend.DType, backend.Op) bool { return true }

func (h *heldNC) hold(ctx context.Context, recv []byte) error {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	<-ctx.Done()
	h.mu.Lock()
	h.held = append(h.held, recv)
	h.mu.Unlock()
	return ctx.Err()
}

func (h *heldNC) Allreduce(ctx context.Context, _, recv []byte, _ backend.DType, _ backend.Op) error {
	return h.hold(ctx, recv)
}
func (h *heldNC) ReduceScatterBlock(ctx context.Context, _, recv []byte, _ backend.DType, _ backend.Op) error {
	return h.hold(ctx, recv)
}
func (h *heldNC) Reduce(ctx context.Context, _, recv []byte, _ backend.DType, _ backend.Op, _ int) error {
	return h.hold(ctx, recv)
}
func (h *heldNC) Bcast(ctx context.Context, buf []byte, _ int) error { return h.hold(ctx, buf) }
func (h *heldNC) Alltoall(ctx context.Context, _, recv []byte) error { return h.hold(ctx, recv) }
func (h *heldNC) Alltoallv(ctx context.Context, _ []byte, _, _ []int, recv []byte, _, _ []int) error {
	return h.hold(ctx, recv)
}

func (h *heldNC) Drain(limit time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drains = append(h.drains, limit)
	return len(h.held) == 0
}

// complete ends the held collectives as MPI would once the missing
// process called: it writes v into every held receive buffer.
func (h *heldNC) complete(v byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.held {
		for i := range b {
			b[i] = v
		}
	}
	h.held = nil
}

// heldNet returns procs transports on one heldNC network.
func heldNet(procs int) []*heldNC {
	out := make([]*heldNC, procs)
	for i, t := range newLoopNet(procs) {
		out[i] = &heldNC{Transport: t}
	}
	return out
}

// nativeLost opens procs processes of local ranks over heldNet with
// strategy Native and a drain limit of 2 ms.
func nativeLost(t *testing.T, procs, local int) ([]*heldNC, []*Group) {
	trs := heldNet(procs)
	gs := openProcessesOn(t, trs, "host", local, func(o *Options) {
		o.Config.Strategy = Native
		o.DrainLimit = 2 * time.Millisecond
	})
	for p, g := range gs {
		if g.nc == nil {
			t.Fatalf("process %d: the group has no native collectives", p)
		}
	}
	return trs, gs
}

// onRanksWithin runs f on every rank of every process at once, each under
// a context with timeout d(its rank), and returns the errors by process and
// local rank.
func onRanksWithin(gs []*Group, d func(rank int) time.Duration, f func(ctx context.Context, p int, c *Comm) error) [][]error {
	errs := make([][]error, len(gs))
	var wg sync.WaitGroup
	for p, g := range gs {
		errs[p] = make([]error, g.LocalSize())
		for l := range g.LocalSize() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := g.Comm(l)
				ctx, cancel := context.WithTimeout(context.Background(), d(c.Rank()))
				defer cancel()
				errs[p][l] = f(ctx, p, c)
			}()
		}
	}
	wg.Wait()
	return errs
}

// lateDeadline: rank 0's deadline passes first (50 ms), the others'
// calls end when its break reaches them.
func lateDeadline(rank int) time.Duration {
	if rank == 0 {
		return 50 * time.Millisecond
	}
	return 10 * time.Second
}

// untouched returns the first i with v[i] != -7, -1 if none.
func untouched(v []int32) int { return slices.IndexFunc(v, func(x int32) bool { return x != -7 }) }

// TestNativeTransportLost: two processes of one rank (the caller's recv
// handed to the transport, no copy) run an AllReduce with strategy Native
// whose native call never completes (a process hung inside it). Process
// 0's deadline passes first: its call returns the deadline's typed error
// (a *TimeoutError: ErrTimeout, context.DeadlineExceeded) that also
// matches ErrTransportLost and says MPI may still write the receive
// buffer, once the transport's Drain ran with the group's drain limit and
// reported the memory still held; process 1's returns ErrGroupBroken and
// ErrTransportLost. Each next call fails at once (ErrGroupBroken) without
// reaching the transport. The library writes no recv, on return or later;
// the transport, which still holds them, writes them when the collective
// completes (the memory is MPI's, as the error says).
func TestNativeTransportLost(t *testing.T) {
	trs, gs := nativeLost(t, 2, 1)
	const n = 1001
	recvs := [2][]int32{make([]int32, n), make([]int32, n)}
	send := make([]int32, n)
	for i := range send {
		send[i], recvs[0][i], recvs[1][i] = int32(i), -7, -7
	}
	start := time.Now()
	errs := onRanksWithin(gs, lateDeadline, func(ctx context.Context, p int, c *Comm) error {
		return AllReduceInto(ctx, c, send, recvs[p], Sum)
	})
	took := time.Since(start)
	var e *Error
	var te *TimeoutError
	err := errs[0][0]
	switch {
	case !errors.As(err, &e) || !errors.As(err, &te):
		t.Fatalf("process 0's AllReduce = %v; want an *Error around a *TimeoutError", err)
	case !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrTransportLost):
		t.Errorf("process 0's AllReduce = %v; want ErrTimeout, context.DeadlineExceeded and ErrTransportLost", err)
	case !strings.Contains(err.Error(), "MPI may still write the receive buffer"):
		t.Errorf("process 0's AllReduce = %v; want it to say MPI may still write the receive buffer", err)
	case took > 2*time.Second:
		t.Errorf("the AllReduces returned after %v", took)
	}
	if err := errs[1][0]; !errors.As(err, &e) || !errors.Is(err, ErrGroupBroken) || !errors.Is(err, ErrTransportLost) {
		t.Errorf("process 1's AllReduce = %v; want an *Error matching ErrGroupBroken and ErrTransportLost", err)
	}
	for p, tr := range trs {
		if len(tr.held) != 1 || &tr.held[0][0] != &asBytes(recvs[p])[0] || len(tr.held[0]) != 4*n {
			t.Fatalf("process %d: the transport holds %d buffers; want the caller's recv itself (zero copy)", p, len(tr.held))
		}
		if !slices.Equal(tr.drains, []time.Duration{2 * time.Millisecond}) {
			t.Errorf("process %d: Drain calls %v, want one with the drain limit (2ms)", p, tr.drains)
		}
		if i := untouched(recvs[p]); i >= 0 {
			t.Errorf("process %d: recv[%d] = %d on return: the library wrote the memory the transport holds", p, i, recvs[p][i])
		}
	}
	for p, g := range gs {
		start := time.Now()
		err := AllReduceInto(context.Background(), g.Comm(0), send, recvs[p], Sum)
		if !errors.Is(err, ErrGroupBroken) || !errors.As(err, &e) || time.Since(start) > time.Second {
			t.Errorf("process %d: the next AllReduce = %v after %v; want ErrGroupBroken at once", p, err, time.Since(start))
		}
		if trs[p].calls != 1 {
			t.Errorf("process %d: %d native calls, want 1 (the first AllReduce's)", p, trs[p].calls)
		}
	}
	time.Sleep(10 * time.Millisecond)
	for p, tr := range trs {
		if i := untouched(recvs[p]); i >= 0 {
			t.Errorf("process %d: recv[%d] = %d after the failed calls: the library wrote it", p, i, recvs[p][i])
		}
		tr.complete(0x11)
		if recvs[p][0] != 0x11111111 || recvs[p][n-1] != 0x11111111 {
			t.Errorf("process %d: recv = %#x...%#x after the transport completed: it did not write the caller's memory", p, recvs[p][0], recvs[p][n-1])
		}
	}
}

// TestNativeTransportLostLocalRanks: two processes of two ranks, Reduce to
// rank 1 (process 0's second rank, not its leader): process 0's leader
// hands rank 1's recv to the transport, whose call never completes; when
// Drain reports it still held, every rank's error matches
// ErrTransportLost (the leader's of process 0 its deadline's too, the
// others' ErrGroupBroken), no recv is written by the library, and the
// transport writes rank 1's recv late.
func TestNativeTransportLostLocalRanks(t *testing.T) {
	trs, gs := nativeLost(t, 2, 2)
	const n = 257
	recvs := make([][]int32, 4)
	for r := range recvs {
		recvs[r] = make([]int32, n)
		for i := range recvs[r] {
			recvs[r][i] = -7
		}
	}
	errs := onRanksWithin(gs, lateDeadline, func(ctx context.Context, p int, c *Comm) error {
		send := make([]int32, n)
		for i := range send {
			send[i] = int32(c.Rank()*n + i)
		}
		return Reduce(ctx, c, send, recvs[c.Rank()], Sum, 1)
	})
	if err := errs[0][0]; !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrTransportLost) {
		t.Errorf("process 0's leader's Reduce = %v; want ErrTimeout and ErrTransportLost", err)
	}
	var e *Error
	for r, err := range []error{errs[0][1], errs[1][0], errs[1][1]} {
		if !errors.As(err, &e) || !errors.Is(err, ErrGroupBroken) || !errors.Is(err, ErrTransportLost) ||
			!strings.Contains(err.Error(), "MPI may still write") {
			t.Errorf("rank %d's Reduce = %v; want an *Error matching ErrGroupBroken and ErrTransportLost", r+1, err)
		}
	}
	tr := trs[0]
	if len(tr.held) != 1 || &tr.held[0][0] != &asBytes(recvs[1])[0] {
		t.Fatalf("process 0's transport holds %d buffers; want the root's recv", len(tr.held))
	}
	for r, v := range recvs {
		if i := untouched(v); i >= 0 {
			t.Errorf("rank %d: recv[%d] = %d on return: the library wrote it", r, i, v[i])
		}
	}
	if err := Reduce(context.Background(), gs[0].Comm(0), recvs[0], recvs[0], Sum, 1); !errors.Is(err, ErrGroupBroken) {
		t.Errorf("the next Reduce = %v; want ErrGroupBroken", err)
	}
	tr.complete(0x22)
	if recvs[1][0] != 0x22222222 || recvs[0][0] != -7 {
		t.Errorf("after the transport completed: the root's recv[0] = %#x, the leader's %d; want the transport's write in the root's only",
			recvs[1][0], recvs[0][0])
	}
}
