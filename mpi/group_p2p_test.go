//go:build mpi && cgo

package mpi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/collective"
)

// pairVal is what global rank from sends to rank to at element i (exact in
// float32).
func pairVal(from, to, i int) float32 { return float32((from*7919 + to*104729 + i) % (1 << 24)) }

// TestGroupPairwiseExchange: a pairwise exchange of 1 KiB, 3 MiB and
// 256 MiB between every pair of ranks (2 local ranks per process, so pairs
// inside a process and across processes), through SendRecv and through
// async pairs; every element checked. 256 MiB runs one round (pairs inside
// a process and across processes) unless GOCOLL_TEST_FULL is set.
func TestGroupPairwiseExchange(t *testing.T) {
	w, _ := begin(t, 120*time.Second)
	g := openTestGroup(t, w, "host", 2, 60*time.Second)
	n := g.Size()
	sizes := []int{1 << 10, 3 << 20, 256 << 20}
	if !fullOnlyHere(w) || n > 6 {
		sizes = sizes[:2] // the largest size runs in the 3-process job (full runs: 2 too)
	}
	for _, bytes := range sizes {
		elems := bytes / 4
		for _, mode := range []string{"SendRecv", "async"} {
			if bytes > 3<<20 && mode == "async" && n > 4 {
				continue
			}
			// Round k: rank r exchanges with r XOR k (every pair once when n
			// is a power of two), or with (k - r) mod n otherwise (r whose
			// partner is itself sits out).
			rounds := n - 1
			if n&(n-1) != 0 {
				rounds = n
			}
			local := g.LocalSize()
			bufs := make([][2][]float32, local)
			for i := range bufs {
				bufs[i] = [2][]float32{make([]float32, elems), make([]float32, elems)}
			}
			if bytes > 3<<20 && os.Getenv("GOCOLL_TEST_FULL") == "" {
				// 256 MiB: round 1 only (a pair inside a process and pairs
				// across processes), unless full.
				rounds = 1
			}
			for k := 1; k <= rounds; k++ {
				partner := func(r int) int {
					if n&(n-1) == 0 {
						return r ^ k
					}
					return ((k-r)%n + n) % n
				}
				errs := onLocal(g, func(c *collective.Comm) error {
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					r := c.Rank()
					p := partner(r)
					if p == r {
						return nil
					}
					b := bufs[r-g.Comm(0).Rank()]
					for i := range b[0] {
						b[0][i] = pairVal(r, p, i)
					}
					clear(b[1])
					var err error
					if mode == "SendRecv" {
						err = collective.SendRecv(ctx, c, b[0], p, b[1], p)
					} else {
						wr := collective.RecvAsync(ctx, c, b[1], p)
						ws := collective.SendAsync(ctx, c, b[0], p)
						err = errors.Join(ws.Wait(ctx), wr.Wait(ctx))
					}
					if err != nil {
						return err
					}
					for i, v := range b[1] {
						if v != pairVal(p, r, i) {
							return fmt.Errorf("from rank %d: element %d = %v, want %v", p, i, v, pairVal(p, r, i))
						}
					}
					return nil
				})
				err := errors.Join(errs...)
				agree(t, w, err == nil, fmt.Sprintf("%d bytes, %s, round %d: %v", bytes, mode, k, err))
			}
			bufs = nil
			runtime.GC()
		}
	}
}

// TestGroupSendSendDeadlock: two ranks in different processes that both
// Send 3 MiB and then Recv fail within the timeout (they cannot meet), with
// an error naming the peer, never the calling rank, as missing.
func TestGroupSendSendDeadlock(t *testing.T) {
	w, _ := begin(t, 60*time.Second)
	const timeout = 500 * time.Millisecond
	g := openTestGroup(t, w, "host", 1, timeout)
	start := time.Now()
	var err error
	me := g.Comm(0).Rank()
	peer := me ^ 1
	if peer < g.Size() {
		buf := make([]float32, 3<<18)
		err = collective.Send(context.Background(), g.Comm(0), buf, peer)
		if err == nil {
			err = collective.Recv(context.Background(), g.Comm(0), buf, peer)
		}
	}
	el := time.Since(start)
	ok := true
	if peer < g.Size() {
		var te *collective.TimeoutError
		switch {
		case err == nil:
			t.Errorf("rank %d: Send-then-Recv on both ranks succeeded", me)
			ok = false
		case errors.As(err, &te) && (len(te.Missing) != 1 || te.Missing[0] != peer):
			t.Errorf("rank %d: missing %v, want [%d]: %v", me, te.Missing, peer, err)
			ok = false
		case !strings.Contains(err.Error(), fmt.Sprintf("rank %d", peer)):
			t.Errorf("rank %d: the error does not name rank %d: %v", me, peer, err)
			ok = false
		}
		if el > timeout+2*time.Second {
			t.Errorf("rank %d: returned after %v (timeout %v)", me, el, timeout)
			ok = false
		}
		t.Logf("rank %d after %v: %v", me, el.Round(time.Millisecond), err)
	}
	agree(t, w, ok, "blocking Send then Recv on both ranks")
}

// TestGroupTwoGroupsConcurrent: two groups over one World run collectives
// and point-to-point at the same time (each on its own communicator);
// every result exact.
func TestGroupTwoGroupsConcurrent(t *testing.T) {
	w, _ := begin(t, 120*time.Second)
	a := openTestGroup(t, w, "host", 2, 30*time.Second)
	b := openTestGroup(t, w, "host", 2, 30*time.Second)
	iters := 40
	if light() {
		iters = 10
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for gi, g := range []*collective.Group{a, b} {
		wg.Go(func() {
			n := g.Size()
			for it := 0; it < iters && errs[gi] == nil; it++ {
				e := onLocal(g, func(c *collective.Comm) error {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					data := make([]float64, 2000+it*37)
					for i := range data {
						data[i] = float64(gi*100 + c.Rank() + i)
					}
					if err := collective.AllReduce(ctx, c, data, collective.Sum); err != nil {
						return err
					}
					for i, v := range data {
						if want := float64(n*(gi*100+i) + n*(n-1)/2); v != want {
							return fmt.Errorf("group %d: element %d = %v, want %v", gi, i, v, want)
						}
					}
					to, from := (c.Rank()+1)%n, (c.Rank()+n-1)%n
					send := make([]float32, 500+gi)
					got := make([]float32, 500+gi)
					for i := range send {
						send[i] = pairVal(c.Rank(), gi, i)
					}
					if err := collective.SendRecv(ctx, c, send, to, got, from); err != nil {
						return err
					}
					for i, v := range got {
						if v != pairVal(from, gi, i) {
							return fmt.Errorf("group %d: from rank %d element %d = %v", gi, from, i, v)
						}
					}
					return nil
				})
				errs[gi] = errors.Join(e...)
			}
		})
	}
	wg.Wait()
	err := errors.Join(errs...)
	agree(t, w, err == nil, fmt.Sprintf("two groups at once: %v", err))
}

// TestGroupAbortAcrossProcesses: Abort in process 0 while every rank of
// every process waits in a Recv that never matches: every rank returns
// within 1 s with the cause, long before the communication timeout.
func TestGroupAbortAcrossProcesses(t *testing.T) {
	w, _ := begin(t, 60*time.Second)
	g := openTestGroup(t, w, "host", 2, 30*time.Second)
	n := g.Size()
	start := time.Now()
	stop := errors.New("operator stop")
	if w.Rank() == 0 {
		go func() {
			time.Sleep(100 * time.Millisecond)
			g.Abort(stop)
		}()
	}
	errs, late := onLocalWithin(g, start, 1100*time.Millisecond, func(c *collective.Comm) error {
		return collective.Recv(context.Background(), c, make([]float32, 4), (c.Rank()+1)%n)
	})
	ok := len(late) == 0
	if !ok {
		t.Errorf("ranks returned late: %v", late)
	}
	for i, err := range errs {
		// In the aborting process the cause itself matches; in the others
		// the cause arrives as text in a RemoteError, which matches
		// ErrAborted.
		cause := errors.Is(err, stop)
		if w.Rank() != 0 {
			cause = errors.Is(err, collective.ErrAborted)
		}
		if !errors.Is(err, collective.ErrGroupBroken) || !cause || !strings.Contains(fmt.Sprint(err), "operator stop") {
			t.Errorf("rank %d: %v: want ErrGroupBroken, the cause (ErrAborted from another process) and its text", g.Comm(i).Rank(), err)
			ok = false
		}
	}
	t.Logf("process %d: %v", w.Rank(), errs[0])
	agree(t, w, ok, "Abort across processes")
}

// TestGroupRefusedP2PAcrossProcesses: rank 0's Send to a peer that does
// not exist is refused and breaks the group naming it, while every other
// rank of every process waits in a Recv from rank 0: each returns within
// 1 s with ErrGroupBroken matching the refusal's ErrInvalidArgument and
// naming rank 0's Send, long before the communication timeout.
func TestGroupRefusedP2PAcrossProcesses(t *testing.T) {
	w, _ := begin(t, 60*time.Second)
	g := openTestGroup(t, w, "host", 2, 30*time.Second)
	n := g.Size()
	start := time.Now()
	errs, late := onLocalWithin(g, start, 1100*time.Millisecond, func(c *collective.Comm) error {
		if c.Rank() == 0 {
			return collective.Send(context.Background(), c, make([]float32, 4), n+5)
		}
		return collective.Recv(context.Background(), c, make([]float32, 4), 0)
	})
	ok := len(late) == 0
	if !ok {
		t.Errorf("ranks returned late: %v", late)
	}
	for i, err := range errs {
		r := g.Comm(i).Rank()
		want := errors.Is(err, collective.ErrInvalidArgument)
		if r != 0 {
			want = want && errors.Is(err, collective.ErrGroupBroken) && strings.Contains(fmt.Sprint(err), "rank 0's Send (point-to-point call #1)")
		}
		if !want {
			t.Errorf("rank %d: %v: want ErrInvalidArgument (and ErrGroupBroken naming rank 0's Send on the others)", r, err)
			ok = false
		}
	}
	agree(t, w, ok, "a refused Send across processes")
}

// onLocalWithin is onLocal, and lists the ranks whose f returned more
// than limit after start.
func onLocalWithin(g *collective.Group, start time.Time, limit time.Duration, f func(c *collective.Comm) error) ([]error, []string) {
	var mu sync.Mutex
	var late []string
	errs := onLocal(g, func(c *collective.Comm) error {
		err := f(c)
		if el := time.Since(start); el > limit {
			mu.Lock()
			late = append(late, fmt.Sprintf("rank %d after %v", c.Rank(), el))
			mu.Unlock()
		}
		return err
	})
	return errs, late
}

// TestGroupDroppedWithoutClose: a group that spans the processes and used
// its links is dropped without Close; garbage collection must not crash
// the process (requests MPI holds keep their buffers), and the World keeps
// working.
func TestGroupDroppedWithoutClose(t *testing.T) {
	w, ctx := begin(t, 60*time.Second)
	func() {
		cfg := collective.DefaultConfig()
		cfg.CommunicationTimeout = 30 * time.Second
		g, err := collective.NewGroup(ctx, collective.Options{Ranks: 2, Backend: "host", Transport: w, Config: cfg, ChunkBytes: groupChunk})
		agree(t, w, err == nil, fmt.Sprintf("NewGroup: %v", err))
		errs := onLocal(g, func(c *collective.Comm) error {
			x := make([]float32, 100000)
			if err := collective.AllReduceWith(ctx, c, x, x, collective.Sum, collective.Ring); err != nil {
				return err
			}
			n := g.Size()
			return collective.SendRecv(ctx, c, x[:5000], (c.Rank()+1)%n, x[5000:10000], (c.Rank()+n-1)%n)
		})
		agree(t, w, errors.Join(errs...) == nil, fmt.Sprintf("using the group: %v", errors.Join(errs...)))
	}()
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	if err := w.Barrier(ctx); err != nil {
		t.Fatalf("Barrier after dropping a group: %v", err)
	}
}

// TestGroupP2PMismatch: a Send of n elements in one process and a Recv of
// m in another (n < m, n > m, or n == m of another type), below one slot,
// of exactly one slot's first piece (slot - p2p.Header bytes) and of
// several slots. The receiver fails with a *MismatchError naming both
// calls and its buffer untouched; the group breaks with the mismatch as
// cause, so the sender's Send returns nil or that break, and its next call
// (a Barrier, on every rank) fails with ErrGroupBroken matching
// ErrMismatch, long before the communication timeout.
func TestGroupP2PMismatch(t *testing.T) {
	w, _ := begin(t, 120*time.Second)
	const first = (groupChunk - 16) / 4 // float32 elements in the first piece
	const several = 3*groupChunk/4 + 5
	type shape struct {
		dt string
		n  int
	}
	cases := []struct{ send, recv shape }{
		{shape{"float32", 10}, shape{"float32", 20}},
		{shape{"float32", 20}, shape{"float32", 10}},
		{shape{"float32", first}, shape{"float32", first - 1}},
		{shape{"float32", first}, shape{"float32", first + 1}},
		{shape{"float32", first - 1}, shape{"float32", first}},
		{shape{"float32", several}, shape{"float32", 10}},
		{shape{"float32", 10}, shape{"float32", several}},
		{shape{"float32", several}, shape{"float32", several - 2*groupChunk/4}},
		{shape{"float32", several - 2*groupChunk/4}, shape{"float32", several}},
		{shape{"float32", 10}, shape{"int32", 10}},
		{shape{"float32", first}, shape{"int32", first}},
		{shape{"float32", several}, shape{"uint32", several}},
		{shape{"float32", 2 * several}, shape{"float64", several}},
	}
	if light() {
		// The trimmed jobs: a piece short and long at the first slot's
		// boundary, several slots against one piece, a type and a width.
		cases = append(cases[2:4:4], cases[5], cases[9], cases[12])
	}
	const timeout = 30 * time.Second
	for _, tc := range cases {
		what := fmt.Sprintf("Send of %d %s, Recv of %d %s", tc.send.n, tc.send.dt, tc.recv.n, tc.recv.dt)
		g := openTestGroup(t, w, "host", 1, timeout)
		c := g.Comm(0)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		start := time.Now()
		var callErr error
		untouched := true
		switch c.Rank() {
		case 0:
			callErr = collective.Send(ctx, c, make([]float32, tc.send.n), 1)
		case 1:
			switch tc.recv.dt {
			case "float32":
				untouched, callErr = recvUntouched(ctx, c, tc.recv.n, float32(-7))
			case "int32":
				untouched, callErr = recvUntouched(ctx, c, tc.recv.n, int32(-7))
			case "uint32":
				untouched, callErr = recvUntouched(ctx, c, tc.recv.n, uint32(7))
			case "float64":
				untouched, callErr = recvUntouched(ctx, c, tc.recv.n, float64(-7))
			}
		}
		nextErr := collective.Barrier(ctx, c)
		el := time.Since(start)
		cancel()
		ok := true
		fail := func(format string, args ...any) {
			t.Errorf("%s: rank %d: %s", what, c.Rank(), fmt.Sprintf(format, args...))
			ok = false
		}
		var me *collective.MismatchError
		switch c.Rank() {
		case 0:
			if callErr != nil && !(errors.Is(callErr, collective.ErrGroupBroken) && errors.Is(callErr, collective.ErrMismatch)) {
				fail("Send: %v, want nil or ErrGroupBroken matching ErrMismatch", callErr)
			}
		case 1:
			// The calls name the types as backend.DType does.
			named := map[string]string{"float32": "float", "float64": "double", "int32": "int32", "uint32": "uint32"}
			sendCall := fmt.Sprintf("Send(op=sum, type=%s, count=%d,", named[tc.send.dt], tc.send.n)
			recvCall := fmt.Sprintf("Recv(op=sum, type=%s, count=%d,", named[tc.recv.dt], tc.recv.n)
			switch {
			case !errors.As(callErr, &me):
				fail("Recv: %v, want a *MismatchError", callErr)
			case me.Rank != 1 || me.Peer != 0 || !strings.Contains(me.Call, recvCall) || !strings.Contains(me.PeerCall, sendCall):
				fail("Recv: %+v, want rank 1's Recv (%s) and rank 0's Send (%s)", *me, recvCall, sendCall)
			}
			if !untouched {
				fail("Recv wrote into its buffer")
			}
		}
		if !errors.Is(nextErr, collective.ErrGroupBroken) || !errors.Is(nextErr, collective.ErrMismatch) {
			fail("the next call (Barrier): %v, want ErrGroupBroken matching ErrMismatch", nextErr)
		}
		if el > timeout/3 {
			fail("returned after %v (communication timeout %v)", el, timeout)
		}
		agree(t, w, ok, what)
	}
}

// recvUntouched receives n elements from rank 0 into a buffer of fill and
// reports whether the buffer still holds only fill.
func recvUntouched[T int32 | uint32 | float32 | float64](ctx context.Context, c *collective.Comm, n int, fill T) (bool, error) {
	buf := make([]T, n)
	for i := range buf {
		buf[i] = fill
	}
	err := collective.Recv(ctx, c, buf, 0)
	for _, v := range buf {
		if v != fill {
			return false, err
		}
	}
	return true, err
}
