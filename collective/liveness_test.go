package collective

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Run's error is the root cause: with Run's ctx cancelled while the ranks
// loop over AllReduce, it is the *Error of the rank whose own wait noticed
// the cancellation first (it matches context.Canceled), never another
// rank's *BrokenError, in every run (100 on host, 30 on lavapipe; race: 30
// and 10, -short 4 on lavapipe).
func TestRunRootCauseCancelled(t *testing.T) {
	runs := map[string]int{"host": 100, "vulkan": 30}
	if raceEnabled {
		runs = map[string]int{"host": 30, "vulkan": 10}
	}
	if raceShort() {
		runs["vulkan"] = 4 // each run opens 4 devices
	}
	for _, bk := range backendsUnderTest(t) {
		for i := 0; i < runs[bk]; i++ {
			g, err := NewGroup(context.Background(), Options{Ranks: 4, Backend: bk, Config: testConfig()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			tm := time.AfterFunc(time.Duration(10+i%20)*time.Millisecond, cancel)
			err = g.Run(ctx, func(ctx context.Context, c *Comm) error {
				data := make([]float32, 1024)
				for {
					if err := AllReduce(ctx, c, data, Sum); err != nil {
						return err
					}
				}
			})
			tm.Stop()
			cancel()
			g.Close()
			var e *Error
			var be *BrokenError
			if !errors.Is(err, context.Canceled) || !errors.As(err, &e) || errors.As(err, &be) || errors.Is(err, ErrGroupBroken) {
				t.Fatalf("%s, run %d: Run = %v; want the cancelled rank's own *Error (context.Canceled), not another rank's failure", bk, i, err)
			}
		}
	}
}

// A panic inside a rank's function: Run recovers it into a *PanicError
// with the rank, the value and the stack where it happened, the other ranks
// fail promptly naming that rank, and a panic with an error unwraps to it.
func TestRunPanic(t *testing.T) {
	g := openGroup(t, "host", 3)
	start := time.Now()
	err := g.Run(context.Background(), func(ctx context.Context, c *Comm) error {
		data := make([]float32, 16)
		for i := 0; ; i++ {
			if c.Rank() == 2 && i == 3 {
				panicInRank("boom")
			}
			if err := AllReduce(ctx, c, data, Sum); err != nil {
				return err
			}
		}
	})
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Run returned after %v", el)
	}
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Rank != 2 || pe.Value != "boom" {
		t.Fatalf("Run = %v (%T); want a *PanicError of rank 2 with value boom", err, err)
	}
	if !strings.Contains(string(pe.Stack), "panicInRank") || !strings.Contains(err.Error(), "rank 2") {
		t.Errorf("the stack does not show where rank 2 panicked:\n%s", pe.Stack)
	}
	err = Barrier(context.Background(), g.Comm(0))
	var be *BrokenError
	if !errors.As(err, &be) || be.Rank != 2 || !errors.As(err, &pe) || !strings.Contains(err.Error(), "panic: boom") {
		t.Errorf("after the panic: %v; want the group broken by rank 2's panic", err)
	}

	g2 := openGroup(t, "host", 2)
	sentinel := errors.New("a bad batch")
	err = g2.Run(context.Background(), func(ctx context.Context, c *Comm) error {
		if c.Rank() == 1 {
			panic(fmt.Errorf("loading: %w", sentinel))
		}
		return Barrier(ctx, c)
	})
	if !errors.Is(err, sentinel) || !errors.As(err, &pe) || pe.Rank != 1 {
		t.Errorf("Run = %v; want rank 1's *PanicError unwrapping to its error", err)
	}
}

//go:noinline
func panicInRank(v any) { panic(v) }

// A rank whose function returns early from Run (without error) is gone:
// the ranks waiting for it fail at once (within 2 s), naming it and why,
// although the timeout is the default (minutes); a rank's function that
// leaves an asynchronous operation running is not gone until it ended.
func TestRunRankReturnsEarly(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3, func(o *Options) { o.Config = Config{} })
		errs := make([]error, 3)
		returned := make([]time.Time, 3)
		start := time.Now()
		err := g.Run(context.Background(), func(ctx context.Context, c *Comm) error {
			defer func() { returned[c.Rank()] = time.Now() }()
			data := make([]float32, 256)
			for i := 0; i < 5; i++ {
				if c.Rank() == 0 && i == 2 {
					return nil // done early, by mistake
				}
				if err := AllReduce(ctx, c, data, Sum); err != nil {
					errs[c.Rank()] = err
					return err
				}
			}
			return nil
		})
		// At once, not at the timeout (10 minutes): Run's bound includes
		// the calls' work on lavapipe, the ranks' failures are timed from
		// rank 0's return below (2 s: a loaded machine's scheduling).
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("%s: Run returned after %v", bk, el)
		}
		var ge *RankGoneError
		if !errors.Is(err, ErrRankGone) || !errors.As(err, &ge) || ge.Rank != 0 || ge.Reason != GoneReturned || ge.LastSeq != 2 {
			t.Fatalf("%s: Run = %v; want a rank's error naming rank 0 gone (returned after call #2)", bk, err)
		}
		for r := 1; r < 3; r++ {
			if !errors.Is(errs[r], ErrRankGone) || !strings.Contains(errs[r].Error(), "rank 0 is gone (its function in Group.Run returned") {
				t.Errorf("%s: rank %d: %v; want an error naming rank 0, gone", bk, r, errs[r])
			}
			if d := returned[r].Sub(returned[0]); d > 2*time.Second {
				t.Errorf("%s: rank %d failed %v after rank 0 returned", bk, r, d)
			}
		}

		// A function that returns with its asynchronous all-reduce still
		// queued: the others' all-reduce meets it, and Run succeeds.
		g2 := openGroup(t, bk, 3, func(o *Options) { o.Config = Config{} })
		data := make([][]float32, 3)
		err = g2.Run(context.Background(), func(ctx context.Context, c *Comm) error {
			data[c.Rank()] = []float32{float32(c.Rank())}
			if c.Rank() == 0 {
				AllReduceAsync(ctx, c, data[0], Sum) // not waited for
				return nil
			}
			time.Sleep(50 * time.Millisecond)
			return AllReduce(ctx, c, data[c.Rank()], Sum)
		})
		if err != nil || data[0][0] != 3 || data[2][0] != 3 {
			t.Errorf("%s: a function returning with its Work queued: %v, %v", bk, err, data)
		}
		// A rank that returns after Split is gone from its sub-group too.
		g3 := openGroup(t, bk, 4, func(o *Options) { o.Config = Config{} })
		// The bound runs from rank 0's return; the parent's first
		// AllReduce measures the cost model, which the sub-groups take
		// over (neither opening them nor measuring is part of the bound).
		subErr := make([]error, 4)
		subAt := make([]time.Time, 4)
		err = g3.Run(context.Background(), func(ctx context.Context, c *Comm) error {
			if err := AllReduce(ctx, c, make([]float32, 8), Sum); err != nil {
				return err
			}
			sub, err := c.Split(ctx, c.Rank()%2, 0)
			defer func() { subAt[c.Rank()] = time.Now() }()
			if err != nil || c.Rank() == 0 {
				return err
			}
			subErr[c.Rank()] = AllReduce(ctx, sub, make([]float32, 8), Sum)
			return subErr[c.Rank()]
		})
		if el := subAt[2].Sub(subAt[0]); el > time.Second || !errors.Is(subErr[2], ErrRankGone) || !errors.Is(err, ErrRankGone) {
			t.Errorf("%s: after Split, rank 0 returned: Run = %v; rank 2 in the sub-group failed %v later: %v", bk, err, el, subErr[2])
		}

		// The group runs again: the ranks gone from the last Run are back.
		err = g2.Run(context.Background(), func(ctx context.Context, c *Comm) error {
			return Barrier(ctx, c)
		})
		if err != nil {
			t.Errorf("%s: Run after a Run: %v", bk, err)
		}
	}
}

// A rank driven outside Run leaves with Comm.Close: the ranks waiting for
// it (in a collective or a Recv) fail within a second naming it, and its
// own later calls fail with ErrClosed.
func TestCommCloseFailsWaiters(t *testing.T) {
	g := openGroup(t, "host", 3, func(o *Options) { o.Config = Config{} })
	start := time.Now()
	errs := onRanks(g, func(c *Comm) error {
		if err := Barrier(context.Background(), c); err != nil {
			return err
		}
		switch c.Rank() {
		case 0:
			time.Sleep(100 * time.Millisecond)
			return c.Close()
		case 1:
			return AllReduce(context.Background(), c, make([]float64, 8), Sum)
		default:
			return Recv(context.Background(), c, make([]float64, 8), 0)
		}
	})
	// Woken by the Close, not by the timeout (10 minutes): the bound leaves
	// a loaded machine's race detector its seconds.
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("the ranks waiting for the closed rank returned after %v", el)
	}
	if errs[0] != nil {
		t.Fatalf("Close: %v", errs[0])
	}
	for r := 1; r < 3; r++ {
		var ge *RankGoneError
		if !errors.Is(errs[r], ErrRankGone) || !strings.Contains(errs[r].Error(), "rank 0 is gone (its Comm was closed") {
			t.Errorf("rank %d: %v; want an error naming rank 0, closed", r, errs[r])
		} else if errors.As(errs[r], &ge) && (ge.Rank != 0 || ge.Reason != GoneClosed) {
			t.Errorf("rank %d: %+v", r, ge)
		}
	}
	if err := Barrier(context.Background(), g.Comm(0)); !errors.Is(err, ErrClosed) {
		t.Errorf("a call on the closed Comm: %v, want ErrClosed", err)
	}
	if err := BroadcastAsync(context.Background(), g.Comm(0), []float32{1}, 0).Wait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("an asynchronous call on the closed Comm: %v, want ErrClosed", err)
	}
}

// Blocking point-to-point calls that wait for each other in one process
// (Send/Send, Recv/Recv, a ring of Sends) fail within a second with the
// default timeout: one rank with a *DeadlockError naming the cycle, the
// others with the group broken by it; both match ErrDeadlock.
func TestP2PDeadlockDetected(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ranks int
		call  func(ctx context.Context, c *Comm, buf []float32) error
		hint  string
	}{
		{"send-send", 2, func(ctx context.Context, c *Comm, buf []float32) error {
			if err := Send(ctx, c, buf, 1-c.Rank()); err != nil {
				return err
			}
			return Recv(ctx, c, buf, 1-c.Rank())
		}, "both ranks Send before they Recv"},
		{"recv-recv", 2, func(ctx context.Context, c *Comm, buf []float32) error {
			if err := Recv(ctx, c, buf, 1-c.Rank()); err != nil {
				return err
			}
			return Send(ctx, c, buf, 1-c.Rank())
		}, "both ranks Recv before they Send"},
		{"send-ring", 3, func(ctx context.Context, c *Comm, buf []float32) error {
			if err := Send(ctx, c, buf, (c.Rank()+1)%3); err != nil {
				return err
			}
			return Recv(ctx, c, buf, (c.Rank()+2)%3)
		}, "every rank Sends before it Recvs"},
	} {
		g := openGroup(t, "host", tc.ranks, func(o *Options) { o.Config = Config{} })
		start := time.Now()
		errs := onRanks(g, func(c *Comm) error {
			return tc.call(context.Background(), c, make([]float32, 3<<18))
		})
		if el := time.Since(start); el > time.Second {
			t.Errorf("%s: the deadlocked ranks returned after %v", tc.name, el)
		}
		found := 0
		for r, err := range errs {
			if !errors.Is(err, ErrDeadlock) {
				t.Errorf("%s: rank %d: %v; want ErrDeadlock", tc.name, r, err)
			}
			var de *DeadlockError
			var be *BrokenError
			if errors.As(err, &de) && !errors.As(err, &be) {
				found++
				if len(de.Ranks) != tc.ranks || de.Ranks[0] != r || !strings.Contains(err.Error(), tc.hint) {
					t.Errorf("%s: rank %d: %v; want the cycle of %d ranks from rank %d and %q", tc.name, r, err, tc.ranks, r, tc.hint)
				}
			}
		}
		if found != 1 {
			t.Errorf("%s: %d ranks report the deadlock themselves, want 1: %v", tc.name, found, errs)
		}
	}
}

// Blocking calls that do meet are never taken for a deadlock: pairs and
// rings where each rank blocks in turn, many times over.
func TestP2PNoFalseDeadlock(t *testing.T) {
	g := openGroup(t, "host", 4)
	rounds := 2000
	if raceEnabled {
		rounds = 300
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		ctx := context.Background()
		buf := make([]float32, 4)
		r, n := c.Rank(), c.Size()
		for i := 0; i < rounds; i++ {
			// Pairs (0,1) (2,3): the even rank sends first.
			p := r ^ 1
			if r%2 == 0 {
				if err := Send(ctx, c, buf, p); err != nil {
					return err
				}
				if err := Recv(ctx, c, buf, p); err != nil {
					return err
				}
			} else {
				if err := Recv(ctx, c, buf, p); err != nil {
					return err
				}
				if err := Send(ctx, c, buf, p); err != nil {
					return err
				}
			}
			// A ring: rank 0 sends first, the others receive first.
			if r == 0 {
				if err := Send(ctx, c, buf, 1); err != nil {
					return err
				}
				if err := Recv(ctx, c, buf, n-1); err != nil {
					return err
				}
			} else {
				if err := Recv(ctx, c, buf, r-1); err != nil {
					return err
				}
				if err := Send(ctx, c, buf, (r+1)%n); err != nil {
					return err
				}
			}
			// A shift along the ring in one call each.
			if err := SendRecv(ctx, c, buf, (r+1)%n, buf, (r+n-1)%n); err != nil {
				return err
			}
		}
		return nil
	}))
}

// The default timeout waits minutes for a slow rank.
func TestDefaultTimeoutGenerous(t *testing.T) {
	if DefaultCommunicationTimeout < 5*time.Minute || DefaultConfig().CommunicationTimeout != DefaultCommunicationTimeout {
		t.Errorf("DefaultCommunicationTimeout %v, DefaultConfig's %v: want at least 5 minutes", DefaultCommunicationTimeout,
			DefaultConfig().CommunicationTimeout)
	}
}

// With the default options, a rank pausing 6 s in a loop of all-reduces
// (a checkpoint, an evaluation) is waited for: the loop trains on.
func TestSlowRankTrainsOn(t *testing.T) {
	g, err := NewGroup(context.Background(), Options{Ranks: 3, Backend: "host"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	start := time.Now()
	err = g.Run(context.Background(), func(ctx context.Context, c *Comm) error {
		data := []float32{1}
		for i := 0; i < 4; i++ {
			if c.Rank() == 0 && i == 2 {
				time.Sleep(6 * time.Second)
			}
			if err := AllReduce(ctx, c, data, Sum); err != nil {
				return err
			}
		}
		if data[0] != 81 {
			return fmt.Errorf("rank %d: %v, want 81", c.Rank(), data[0])
		}
		return nil
	})
	if err != nil || time.Since(start) < 6*time.Second {
		t.Fatalf("a 6 s pause of rank 0: %v after %v", err, time.Since(start))
	}
}

// While ranks wait, Group.Pending names the rank they wait for and the
// call; with a logger, the group logs the waits that last.
func TestPendingReportsMissingRank(t *testing.T) {
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	g := openGroup(t, "host", 3, func(o *Options) {
		o.Config.CommunicationTimeout = 12 * time.Second // logs every 3 s; room for a loaded machine
		o.Logger = logger
	})
	release := make(chan struct{})
	done := make(chan []error)
	go func() {
		done <- onRanks(g, func(c *Comm) error {
			ctx := context.Background()
			if err := Barrier(ctx, c); err != nil {
				return err
			}
			switch c.Rank() {
			case 0:
				<-release
				if err := Send(ctx, c, []int32{7}, 2); err != nil {
					return err
				}
			case 2:
				if err := Recv(ctx, c, make([]int32, 1), 0); err != nil {
					return err
				}
			}
			return AllReduce(ctx, c, make([]float32, 4), Sum)
		})
	}()
	// Wait until rank 1 waits in its all-reduce and rank 2 in its Recv.
	var ps []PendingWait
	byRank := map[int]PendingWait{}
	deadline := time.Now().Add(10 * time.Second)
	for ; time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ps = g.Pending()
		clear(byRank)
		for _, p := range ps {
			byRank[p.Rank] = p
		}
		if len(ps) == 2 && byRank[1].Op == "AllReduce" && byRank[2].Op == "Recv" {
			break
		}
	}
	if p := byRank[1]; p.Op != "AllReduce" || p.Seq != 2 || p.P2P || fmt.Sprint(p.Missing) != "[0 2]" || p.LastSeq[0] != 1 {
		t.Errorf("rank 1: %+v; want waiting in AllReduce #2 for ranks 0 (at call #1) and 2", p)
	}
	if p := byRank[2]; p.Op != "Recv" || p.Seq != 1 || !p.P2P || fmt.Sprint(p.Missing) != "[0]" ||
		!strings.Contains(p.String(), "rank 2 has waited") || !strings.Contains(p.String(), "for rank 0 (at call #1)") {
		t.Errorf("rank 2: %+v (%v); want waiting in Recv (point-to-point #1) for rank 0", p, p)
	}
	// Until the log names the rank waited for (a log interval or two), well
	// within the timeout.
	logged := func() bool {
		out := logs.String()
		return strings.Contains(out, "gocoll: rank waiting") && strings.Contains(out, "rank=2") && strings.Contains(out, "missing=[0]")
	}
	for end := time.Now().Add(8 * time.Second); !logged() && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	noErrors(t, <-done)
	if !logged() {
		t.Errorf("no log line names the rank waited for:\n%s", logs.String())
	}
	if ps := g.Pending(); len(ps) != 0 {
		t.Errorf("Pending after the calls: %v", ps)
	}
}
