package collective

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// p2pWorld runs a function on every rank of 4 ranks: in one process, or as
// 2 simulated processes of 2 ranks over the loopback transport.
type p2pWorld struct {
	name string
	run  func(f func(c *Comm) error) []error
}

func p2pWorlds(t *testing.T, mod ...func(*Options)) []p2pWorld {
	g := openGroup(t, "host", 4, mod...)
	gs := openProcesses(t, "host", 2, 2, append([]func(*Options){func(o *Options) { o.ChunkBytes = 1 << 20 }}, mod...)...)
	return []p2pWorld{
		{"in-process", func(f func(c *Comm) error) []error { return onRanks(g, f) }},
		{"2 processes", func(f func(c *Comm) error) []error { return onAllRanks(gs, f) }},
	}
}

// pairVal is what rank from sends at element i: exact in float32.
func pairVal(from, to, i int) float32 { return float32((from*7919 + to*104729 + i) % (1 << 24)) }

// roundPartner is rank r's partner in round k of a round-robin schedule of
// 4 ranks: every pair meets once in 3 rounds.
func roundPartner(r, k int) int {
	return [3][4]int{{1, 0, 3, 2}, {2, 3, 0, 1}, {3, 2, 1, 0}}[k][r]
}

// A pairwise exchange of 1 KiB, 3 MiB and 256 MiB between every pair of 4
// ranks, in one process and across processes, through SendRecv and through
// async pairs in both orders; every element checked. 256 MiB runs the first
// of the three rounds (one pair each) unless GOCOLL_TEST_FULL is set.
func TestP2PPairwiseExchange(t *testing.T) {
	sizes := []int{1 << 10, 3 << 20, 256 << 20}
	if testing.Short() || raceEnabled {
		sizes = sizes[:2] // the race detector makes filling 1 GiB of buffers minutes long
	}
	modes := []string{"SendRecv", "SendAsync+RecvAsync", "RecvAsync+SendAsync", "RecvAsync+Send"}
	for _, w := range p2pWorlds(t) {
		for _, bytes := range sizes {
			n := bytes / 4
			send := make([][]float32, 4)
			recv := make([][]float32, 4)
			for r := range send {
				send[r], recv[r] = make([]float32, n), make([]float32, n)
			}
			for mi, mode := range modes {
				if bytes > 3<<20 && (mi != 0 || w.name != "in-process") && (mi != 1 || w.name == "in-process" || !fullRun()) {
					// The largest size: SendRecv in one process, and async
					// pairs over the loopback transport in full runs (the
					// mpi package's tests cross real processes at this size).
					continue
				}
				rounds := 3
				if bytes > 3<<20 && !fullRun() {
					rounds = 1
				}
				for k := 0; k < rounds; k++ {
					for r := range send {
						p := roundPartner(r, k)
						for i := range send[r] {
							send[r][i] = pairVal(r, p, i)
						}
						clear(recv[r])
					}
					errs := w.run(func(c *Comm) error {
						ctx := context.Background()
						r := c.Rank()
						p := roundPartner(r, k)
						switch mode {
						case "SendRecv":
							return SendRecv(ctx, c, send[r], p, recv[r], p)
						case "SendAsync+RecvAsync":
							ws := SendAsync(ctx, c, send[r], p)
							wr := RecvAsync(ctx, c, recv[r], p)
							return errors.Join(ws.Wait(ctx), wr.Wait(ctx))
						case "RecvAsync+SendAsync":
							wr := RecvAsync(ctx, c, recv[r], p)
							ws := SendAsync(ctx, c, send[r], p)
							return errors.Join(ws.Wait(ctx), wr.Wait(ctx))
						default:
							wr := RecvAsync(ctx, c, recv[r], p)
							err := Send(ctx, c, send[r], p)
							return errors.Join(err, wr.Wait(ctx))
						}
					})
					for r, err := range errs {
						if err != nil {
							t.Fatalf("%s, %d bytes, %s, round %d: rank %d: %v", w.name, bytes, mode, k, r, err)
						}
					}
					for r := range recv {
						p := roundPartner(r, k)
						for i, v := range recv[r] {
							if v != pairVal(p, r, i) {
								t.Fatalf("%s, %d bytes, %s, round %d: rank %d element %d = %v, want %v",
									w.name, bytes, mode, k, r, i, v, pairVal(p, r, i))
							}
						}
					}
				}
			}
			runtime.GC()
		}
	}
}

// A Send and a Recv of different lengths or types: a *MismatchError on both
// ranks, in one process and across processes; no data is written.
func TestP2PMismatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(ctx context.Context, c *Comm) error
	}{
		{"length", func(ctx context.Context, c *Comm) error {
			if c.Rank()%2 == 0 {
				return Send(ctx, c, make([]float32, 10), c.Rank()+1)
			}
			got := []float32{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}
			err := Recv(ctx, c, got, c.Rank()-1)
			for _, v := range got {
				if v != 7 {
					return fmt.Errorf("a mismatched Recv wrote its buffer (%v), error %v", got, err)
				}
			}
			return err
		}},
		{"type", func(ctx context.Context, c *Comm) error {
			if c.Rank()%2 == 0 {
				return Send(ctx, c, make([]float32, 4), c.Rank()+1)
			}
			return Recv(ctx, c, make([]float64, 2), c.Rank()-1)
		}},
	} {
		for _, w := range p2pWorlds(t) {
			// By rank: the processes' runs list their errors in the order
			// they came, which the senders' exemption below must not read
			// as ranks.
			errs := make([]error, 4)
			w.run(func(c *Comm) error {
				errs[c.Rank()] = tc.f(context.Background(), c)
				return nil
			})
			// Across processes the first mismatch breaks the group in
			// both processes: a rank whose own pair had not met yet
			// gets ErrGroupBroken naming it. At least one pair reports
			// its own mismatch on both sides.
			pairs := 0
			for r, err := range errs {
				var me *MismatchError
				mine := errors.As(err, &me)
				if !mine && !(w.name != "in-process" && errors.Is(err, ErrGroupBroken) && strings.Contains(err.Error(), "called Recv")) {
					t.Errorf("%s, %s: rank %d: %v, want a *MismatchError", tc.name, w.name, r, err)
				}
				var pe *MismatchError
				if r%2 == 1 && mine && errors.As(errs[r-1], &pe) {
					pairs++
				}
			}
			if pairs == 0 {
				t.Errorf("%s, %s: no pair reported its own mismatch on both ranks: %v", tc.name, w.name, errs)
			}
		}
	}
}

// Messages on one direction meet in call order; stream order holds between
// point-to-point and collective operations of a comm.
func TestP2POrderAndStream(t *testing.T) {
	for _, w := range p2pWorlds(t) {
		const n = 1000
		errs := w.run(func(c *Comm) error {
			ctx := context.Background()
			r := c.Rank()
			peer := r ^ 1
			// Three messages each way, asynchronous, then a collective on
			// the received data: it must see all three.
			var ws []Work
			out := make([][]float64, 3)
			in := make([][]float64, 3)
			for k := range out {
				out[k] = make([]float64, n+k)
				for i := range out[k] {
					out[k][i] = float64(r*1000000 + k*10000 + i)
				}
				in[k] = make([]float64, n+k)
				ws = append(ws, SendAsync(ctx, c, out[k], peer))
			}
			for k := range in {
				ws = append(ws, RecvAsync(ctx, c, in[k], peer))
			}
			sum := AllReduceAsync(ctx, c, in[2], Sum) // runs after the receives completed
			if err := sum.Wait(ctx); err != nil {
				return err
			}
			for _, w := range ws {
				if err := w.Wait(ctx); err != nil {
					return err
				}
			}
			for k := 0; k < 2; k++ {
				for i, v := range in[k] {
					if want := float64(peer*1000000 + k*10000 + i); v != want {
						return fmt.Errorf("message %d element %d = %v, want %v", k, i, v, want)
					}
				}
			}
			// in[2] is the sum over the 4 ranks of what each received: the
			// peer's third message.
			for i, v := range in[2] {
				want := 0.0
				for q := 0; q < 4; q++ {
					want += float64((q^1)*1000000 + 2*10000 + i)
				}
				if v != want {
					return fmt.Errorf("the all-reduce after the receives: element %d = %v, want %v", i, v, want)
				}
			}
			// An all-reduce queued before a send: the send carries its result.
			x := []float32{float32(r + 1)}
			y := []float32{0}
			a := AllReduceAsync(ctx, c, x, Sum)
			s := SendAsync(ctx, c, x, peer)
			v := RecvAsync(ctx, c, y, peer)
			if err := errors.Join(a.Wait(ctx), s.Wait(ctx), v.Wait(ctx)); err != nil {
				return err
			}
			if y[0] != 10 {
				return fmt.Errorf("a send after an all-reduce carried %v, want 10", y[0])
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("%s: rank %d: %v", w.name, r, err)
			}
		}
	}
}

// A pending RecvAsync whose context is cancelled fails with the context's
// error; the group breaks, so the peer's pending operation fails too; Close
// with operations pending returns and every Work ends.
func TestP2PCancelAndClose(t *testing.T) {
	g := openGroup(t, "host", 2)
	ctx, cancel := context.WithCancel(context.Background())
	w0 := RecvAsync(ctx, g.Comm(0), make([]float32, 8), 1)
	w1 := RecvAsync(context.Background(), g.Comm(1), make([]float32, 8), 0)
	time.Sleep(20 * time.Millisecond)
	if w0.Done() || w1.Done() {
		t.Fatal("an unmatched receive completed")
	}
	cancel()
	if err := w0.Wait(context.Background()); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled RecvAsync: %v, want context.Canceled", err)
	}
	if err := w1.Wait(context.Background()); !errors.Is(err, ErrGroupBroken) || errors.Is(err, context.Canceled) {
		t.Errorf("peer's RecvAsync: %v, want ErrGroupBroken (not the other rank's context)", err)
	}

	g2 := openGroup(t, "host", 2)
	ws := []Work{
		SendAsync(context.Background(), g2.Comm(0), make([]float64, 1<<20), 1),
		RecvAsync(context.Background(), g2.Comm(1), make([]float64, 5), 0),
	}
	time.Sleep(20 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- g2.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung with point-to-point operations pending")
	}
	for i, w := range ws {
		err := w.Wait(context.Background())
		if err == nil {
			t.Errorf("Work %d: nil error", i)
		}
	}
}

// With a transport whose sends never complete and cannot be cancelled,
// a failed call and Close leave every buffer the transport was given
// valid: the transport only ever sees Go memory (never a device's mapped
// memory, which Close frees). The test reads every buffer after Close.
func TestTransportStuckSendsClose(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		net := newLoopNet(2)
		net[0].net.stuck = true
		gs := make([]*Group, 2)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for p := range gs {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				cfg := testConfig()
				cfg.CommunicationTimeout = 300 * time.Millisecond
				gs[p], errs[p] = NewGroup(context.Background(), Options{Ranks: 1, Backend: bk, Config: cfg, Transport: net[p], ChunkBytes: 4096})
			}(p)
		}
		wg.Wait()
		for p, err := range errs {
			if err != nil {
				t.Fatalf("%s: process %d: %v", bk, p, err)
			}
		}
		errs = onAllRanks(gs, func(c *Comm) error {
			data := make([]float32, 5000)
			if err := AllReduceWith(context.Background(), c, data, data, Sum, Ring); err != nil {
				return err
			}
			return SendRecv(context.Background(), c, data, 1-c.Rank(), data, 1-c.Rank())
		})
		if len(errs) == 0 {
			t.Fatalf("%s: calls over a transport whose sends never complete succeeded", bk)
		}
		for _, g := range gs {
			g.Close()
		}
		d := net[0].net.dups[0]
		d.mu.Lock()
		kept := d.kept
		d.mu.Unlock()
		if len(kept) == 0 {
			t.Fatalf("%s: the transport was never given a send", bk)
		}
		sum := 0
		for _, b := range kept {
			for _, x := range b {
				sum += int(x)
			}
		}
		t.Logf("%s: %d buffers still held by the transport after Close, readable (byte sum %d)", bk, len(kept), sum)
	}
}

// Two groups over one transport (each works on its own duplicate) run
// collectives and point-to-point at the same time; results exact.
func TestProcessesTwoGroupsConcurrent(t *testing.T) {
	net := newLoopNet(2)
	open := func() []*Group {
		gs := make([]*Group, 2)
		var wg sync.WaitGroup
		for p := range gs {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				g, err := NewGroup(context.Background(), Options{Ranks: 2, Backend: "host", Config: testConfig(), Transport: net[p], ChunkBytes: 4096})
				if err != nil {
					t.Errorf("process %d: %v", p, err)
				}
				gs[p] = g
			}(p)
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		t.Cleanup(func() {
			for _, g := range gs {
				g.Close()
			}
		})
		return gs
	}
	a, b := open(), open()
	var wg sync.WaitGroup
	for gi, gs := range [][]*Group{a, b} {
		wg.Add(1)
		go func(gi int, gs []*Group) {
			defer wg.Done()
			for it := 0; it < 30; it++ {
				errs := onAllRanks(gs, func(c *Comm) error {
					data := make([]float64, 3000+it)
					for i := range data {
						data[i] = float64(gi*100 + c.Rank() + i)
					}
					if err := AllReduceWith(context.Background(), c, data, data, Sum, Ring); err != nil {
						return err
					}
					for i, v := range data {
						if want := float64(4*(gi*100+i) + 6); v != want {
							return fmt.Errorf("group %d: element %d = %v, want %v", gi, i, v, want)
						}
					}
					peer := (c.Rank() + 2) % 4
					got := make([]float64, 700)
					send := make([]float64, 700)
					for i := range send {
						send[i] = float64(gi*1000 + c.Rank()*10 + i)
					}
					if err := SendRecv(context.Background(), c, send, peer, got, peer); err != nil {
						return err
					}
					for i, v := range got {
						if want := float64(gi*1000 + peer*10 + i); v != want {
							return fmt.Errorf("group %d: received element %d = %v, want %v", gi, i, v, want)
						}
					}
					return nil
				})
				for _, err := range errs {
					t.Errorf("iteration %d: %v", it, err)
				}
			}
		}(gi, gs)
	}
	wg.Wait()
}

// Abort in one process: every rank of every process returns promptly with
// the cause (ErrAborted on the other process, through its control
// message), well before the communication timeout.
func TestProcessesAbortCrossesProcesses(t *testing.T) {
	gs := openProcesses(t, "host", 3, 2, func(o *Options) { o.Config.CommunicationTimeout = 20 * time.Second })
	start := time.Now()
	var once sync.Once
	errs := onAllRanks(gs, func(c *Comm) error {
		if c.Rank() == 0 {
			once.Do(func() {
				go func() {
					time.Sleep(50 * time.Millisecond)
					gs[0].Abort(errors.New("operator stop"))
				}()
			})
		}
		// Every rank waits for a message that never comes.
		return Recv(context.Background(), c, make([]float32, 4), (c.Rank()+1)%c.Size())
	})
	el := time.Since(start)
	if el > time.Second {
		t.Errorf("ranks returned %v after Abort, want < 1 s", el)
	}
	if len(errs) != 6 {
		t.Fatalf("%d of 6 ranks failed: %v", len(errs), errs)
	}
	for _, err := range errs {
		if !errors.Is(err, ErrGroupBroken) || !strings.Contains(err.Error(), "operator stop") {
			t.Errorf("%v: want ErrGroupBroken naming the cause", err)
		}
		if !strings.Contains(err.Error(), "rank 0:") && !strings.Contains(err.Error(), "rank 1:") && !errors.Is(err, ErrAborted) {
			t.Errorf("%v: a remote Abort must match ErrAborted", err)
		}
	}
}

// A cross-process Group dropped without Close is collected: its cleanup
// ends its control requests and closes its transport duplicate.
func TestProcessesGroupDroppedWithoutClose(t *testing.T) {
	net := newLoopNet(2)
	var wg sync.WaitGroup
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			g, err := NewGroup(context.Background(), Options{Ranks: 1, Backend: "host", Config: testConfig(), Transport: net[p]})
			if err != nil {
				t.Errorf("process %d: %v", p, err)
				return
			}
			onAllRanks([]*Group{g}, func(c *Comm) error { return nil })
			_ = g // dropped
		}(p)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		if closedDups(net) == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dropped groups' transports were not closed (%d of 2)", closedDups(net))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func closedDups(net []*loopTr) int {
	n := net[0].net
	n.mu.Lock()
	defer n.mu.Unlock()
	k := 0
	for _, d := range n.dupTrs {
		if d.closed.Load() {
			k++
		}
	}
	return k
}

// A point-to-point mismatch between ranks of one process breaks the group
// naming the failed operation (its name and point-to-point number), not the
// comm's last collective: a third rank, blocked in a collective, sees that;
// the two ranks' own errors name their calls.
func TestP2PMismatchAttribution(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3)
		ctx := context.Background()
		errs := onRanks(g, func(c *Comm) error {
			if err := AllReduce(ctx, c, []float32{1}, Sum); err != nil { // call #1
				return err
			}
			switch c.Rank() {
			case 0:
				if err := Send(ctx, c, []float32{1, 2}, 1); err != nil { // point-to-point #1
					return err
				}
				return SendAsync(ctx, c, make([]float32, 4), 1).Wait(ctx) // #2
			case 1:
				if err := Recv(ctx, c, make([]float32, 2), 0); err != nil {
					return err
				}
				return RecvAsync(ctx, c, make([]float32, 5), 0).Wait(ctx)
			}
			return AllReduce(ctx, c, []float32{1}, Sum) // call #2
		})
		for r, op := range []string{"SendAsync", "RecvAsync"} {
			var e *Error
			var me *MismatchError
			if !errors.As(errs[r], &e) || e.Rank != r || e.Op != op || e.Seq != 2 || !e.P2P || !errors.As(errs[r], &me) {
				t.Errorf("%s: rank %d: %v, want an *Error of its %s (point-to-point call #2) with a *MismatchError", bk, r, errs[r], op)
			}
		}
		var e *Error
		var be *BrokenError
		if !errors.As(errs[2], &e) || e.Rank != 2 || e.Op != "AllReduce" || e.Seq != 2 || e.P2P || !errors.As(errs[2], &be) {
			t.Fatalf("%s: rank 2: %v, want an *Error of its AllReduce (call #2) with a *BrokenError", bk, errs[2])
		}
		if want := [2]string{"SendAsync", "RecvAsync"}; be.Rank < 0 || be.Rank > 1 || be.Op != want[be.Rank] || be.Seq != 2 || !be.P2P ||
			!strings.Contains(be.Error(), want[be.Rank]+" (point-to-point call #2)") {
			t.Errorf("%s: rank 2 sees %v (rank %d, %s, #%d, P2P %v), want rank 0's SendAsync or rank 1's RecvAsync, point-to-point call #2",
				bk, be, be.Rank, be.Op, be.Seq, be.P2P)
		}
	}
}

// Point-to-point calls are numbered in their own sequence, synchronous and
// asynchronous alike, apart from the collectives: after three all-reduces
// and three point-to-point calls, a RecvAsync whose context ends fails as
// point-to-point call #4 and breaks the group naming itself; its peer's
// blocking Recv (#4) fails with that break. In one process and across
// processes.
func TestP2PErrorNumbering(t *testing.T) {
	body := func(c *Comm) error {
		ctx := context.Background()
		r := c.Rank()
		peer := r ^ 2
		x, y := make([]float32, 4), make([]float32, 4)
		for i := 0; i < 3; i++ {
			if err := AllReduce(ctx, c, x, Sum); err != nil {
				return err
			}
		}
		s, v := SendAsync(ctx, c, x, peer), RecvAsync(ctx, c, y, peer)
		if err := errors.Join(s.Wait(ctx), v.Wait(ctx)); err != nil {
			return err
		}
		if err := SendRecv(ctx, c, x, peer, y, peer); err != nil {
			return err
		}
		if r < 2 {
			ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			return RecvAsync(ctx, c, y, peer).Wait(context.Background())
		}
		return Recv(ctx, c, y, peer) // rank r^2 never sends
	}
	for _, w := range p2pWorlds(t) {
		errs := make([]error, 4)
		w.run(func(c *Comm) error {
			errs[c.Rank()] = body(c)
			return nil
		})
		for r, err := range errs {
			op := "RecvAsync"
			if r >= 2 {
				op = "Recv"
			}
			var e *Error
			if !errors.As(err, &e) || e.Rank != r || e.Op != op || e.Seq != 4 || !e.P2P ||
				!strings.Contains(err.Error(), op+" (point-to-point call #4)") {
				t.Errorf("%s: rank %d: %v, want an *Error of its %s, point-to-point call #4", w.name, r, err, op)
				continue
			}
			var be *BrokenError
			if errors.As(err, &be) && be.Rank >= 0 && (be.Op != "RecvAsync" || be.Seq != 4 || !be.P2P) {
				t.Errorf("%s: rank %d: the group broke by %v, want a RecvAsync, point-to-point call #4", w.name, r, be)
			}
			if r < 2 && be == nil && (!errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded)) {
				t.Errorf("%s: rank %d: %v, want ErrTimeout and context.DeadlineExceeded", w.name, r, err)
			}
		}
	}
}
