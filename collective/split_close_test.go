package collective

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// splitEntries counts the Split calls a group still keeps state for.
func splitEntries(g *Group) int {
	return g.kids.Entries()
}

// checkSplitErr checks that err is rank's typed Split error matching want.
func checkSplitErr(t *testing.T, what string, rank int, err error, want ...error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Rank != rank || e.Op != "Split" {
		t.Errorf("%s: rank %d: %v (%T), want a *collective.Error of rank %d's Split", what, rank, err, err, rank)
		return
	}
	if _, ok := err.(*Error); !ok {
		t.Errorf("%s: rank %d: %T, want *collective.Error itself", what, rank, err)
	}
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Errorf("%s: rank %d: %v does not match %v", what, rank, err, w)
		}
	}
}

// TestSplitRacingClose: Split on every rank racing the parent's Close, at
// delays that cover the Split, ends with each rank's sub-group closed with
// the parent (a later call on it gets ErrClosed) or with Split failing with
// a typed ErrClosed; never a sub-group left open.
func TestSplitRacingClose(t *testing.T) {
	tries := 1000
	if testing.Short() {
		tries = 200
	}
	splitRacingClose(t, "host", 2, tries)
}

// TestSplitRacingCloseVulkan is TestSplitRacingClose on the vulkan backend
// (lavapipe in CI), with fewer tries: opening a sub-group opens devices.
func TestSplitRacingCloseVulkan(t *testing.T) {
	bks := backendsUnderTest(t)
	if len(bks) < 2 {
		t.Skip("no vulkan backend")
	}
	splitRacingClose(t, "vulkan", 2, 30)
}

func splitRacingClose(t *testing.T, bk string, ranks, tries int) {
	ctx := context.Background()
	small := func(o *Options) { o.ChunkBytes = 4096 } // small pools: a fresh group's first call is cheap
	// The time one Split takes, so the Close delays cover it.
	var span time.Duration
	{
		g := openGroup(t, bk, ranks, small)
		start := time.Now()
		noErrors(t, onRanks(g, func(c *Comm) error {
			_, err := c.Split(ctx, 0, c.Rank())
			return err
		}))
		span = time.Since(start)
	}
	made, refused := 0, 0
	for i := 0; i < tries && !t.Failed(); i++ {
		o := Options{Ranks: ranks, Backend: bk, Config: testConfig()}
		small(&o)
		g, err := NewGroup(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		delay := span * time.Duration(i%20) / 16
		subs := make([]*Comm, ranks)
		errs := make([]error, ranks)
		var wg sync.WaitGroup
		for r := 0; r < ranks; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				subs[r], errs[r] = g.Comm(r).Split(ctx, 0, r)
			}()
		}
		time.Sleep(delay)
		if err := g.Close(); err != nil {
			t.Errorf("try %d: Close: %v", i, err)
		}
		wg.Wait()
		for r := 0; r < ranks; r++ {
			if errs[r] != nil {
				refused++
				checkSplitErr(t, fmt.Sprintf("%s try %d", bk, i), r, errs[r], ErrClosed)
				continue
			}
			made++
			sg := subs[r].Group()
			if !sg.closed.Load() {
				t.Errorf("%s try %d: rank %d's sub-group is open after the parent closed", bk, i, r)
				sg.Close()
				continue
			}
			if err := AllReduce(ctx, subs[r], []float32{1}, Sum); !errors.Is(err, ErrClosed) {
				t.Errorf("%s try %d: rank %d: AllReduce on the sub-group after the parent closed: %v, want ErrClosed", bk, i, r, err)
			}
		}
		if n := splitEntries(g); n != 0 {
			t.Errorf("%s try %d: %d Split entries left", bk, i, n)
		}
	}
	t.Logf("%s: %d tries: %d sub-comms made (closed with the parent), %d Splits refused", bk, tries, made, refused)
}

// TestSplitErrorsTyped: every error of an in-process Split is a
// *collective.Error naming the rank, Split and the call's number, matching
// the cause as other calls' errors do (ErrInvalidArgument, context errors,
// ErrTimeout, ErrClosed), and leaves no Split state behind.
func TestSplitErrorsTyped(t *testing.T) {
	const ranks = 3
	bg := context.Background()
	// brokenOK: a rank may instead get ErrGroupBroken, the failure of
	// another rank having broken the group first.
	run := func(t *testing.T, name string, ctxOf func() context.Context, brokenOK bool, hook func(ctx context.Context) error, color func(r int) int, want ...error) {
		t.Helper()
		g := openGroup(t, "host", ranks)
		// A call first, so Split's number is 2.
		noErrors(t, onRanks(g, func(c *Comm) error { return AllReduce(bg, c, []float32{1}, Sum) }))
		splitOpenHook = hook
		defer func() { splitOpenHook = nil }()
		ctx := ctxOf()
		errs := onRanks(g, func(c *Comm) error {
			sub, err := c.Split(ctx, color(c.Rank()), 0)
			if err == nil && sub != nil {
				return fmt.Errorf("Split succeeded: rank %d of %d", sub.Rank(), sub.Size())
			}
			return err
		})
		cause := 0 // ranks whose error matches every want
		for r, err := range errs {
			mine := err != nil
			for _, w := range want {
				mine = mine && errors.Is(err, w)
			}
			if mine {
				cause++
			}
			if brokenOK && !mine {
				// Another rank's failure broke the group first.
				checkSplitErr(t, name, r, err, ErrGroupBroken)
			} else {
				checkSplitErr(t, name, r, err, want...)
			}
			var e *Error
			if errors.As(err, &e) && e.Seq != 2 {
				t.Errorf("%s: rank %d: call #%d, want #2 (%v)", name, r, e.Seq, err)
			}
		}
		if cause == 0 {
			t.Errorf("%s: no rank's error matches %v: %v", name, want, errs)
		}
		if n := splitEntries(g); n != 0 {
			t.Errorf("%s: %d Split entries left", name, n)
		}
	}
	all0 := func(int) int { return 0 }

	background := func() context.Context { return bg }
	run(t, "invalid color", background, false, nil, func(r int) int { return -2 - r }, ErrInvalidArgument)

	run(t, "cancelled", func() context.Context {
		ctx, cancel := context.WithCancel(bg)
		cancel()
		return ctx
	}, true, nil, all0, context.Canceled)

	// The sub-group takes longer to open than the members' deadline: the
	// members waiting for it and the one opening it time out.
	var cancels []context.CancelFunc
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	run(t, "deadline while opening", func() context.Context {
		ctx, cancel := context.WithTimeout(bg, time.Second)
		cancels = append(cancels, cancel)
		return ctx
	}, false, func(ctx context.Context) error {
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		return nil
	}, all0, ErrTimeout, context.DeadlineExceeded)

	// Opening the sub-group fails: every member gets the cause.
	run(t, "opening fails", background, false, func(context.Context) error {
		return invalidArg("refused by the test")
	}, all0, ErrInvalidArgument)
	run(t, "opening fails (config)", background, false, func(context.Context) error {
		return &ConfigError{Field: "Ranks", Reason: "refused by the test"}
	}, all0, ErrInvalidConfig)

	// On a closed parent.
	g := openGroup(t, "host", ranks)
	noErrors(t, onRanks(g, func(c *Comm) error { return AllReduce(bg, c, []float32{1}, Sum) }))
	g.Close()
	for r, err := range onRanks(g, func(c *Comm) error { _, err := c.Split(bg, 0, 0); return err }) {
		checkSplitErr(t, "closed parent", r, err, ErrClosed)
	}
}

// TestSplitProcessesRacingClose: Split across simulated processes (a
// sub-group spanning them, made over the transport, and one within each
// process) racing every process's Close: each rank ends with its sub-group
// closed with the parent, or a typed Split error; nothing hangs.
func TestSplitProcessesRacingClose(t *testing.T) {
	ctx := context.Background()
	const procs, local = 2, 2
	colors := map[string]func(r int) int{
		"spanning": func(r int) int { return r % 2 },
		"local":    func(r int) int { return r / local },
	}
	for _, name := range []string{"spanning", "local"} {
		color := colors[name]
		var span time.Duration
		{
			gs := openSplitProcesses(t, newSplitWorld(), procs, local, 5*time.Second)
			start := time.Now()
			if errs := onAllRanks(gs, func(c *Comm) error {
				_, err := c.Split(ctx, color(c.Rank()), 0)
				return err
			}); len(errs) > 0 {
				t.Fatal(errs)
			}
			span = time.Since(start)
		}
		made, refused := 0, 0
		for i := 0; i < 100 && !t.Failed(); i++ {
			gs := openSplitProcesses(t, newSplitWorld(), procs, local, 5*time.Second)
			var mu sync.Mutex
			subs := map[int]*Comm{}
			errs := map[int]error{}
			var wg sync.WaitGroup
			wg.Go(func() {
				onAllRanks(gs, func(c *Comm) error {
					sub, err := c.Split(ctx, color(c.Rank()), 0)
					mu.Lock()
					subs[c.Rank()], errs[c.Rank()] = sub, err
					mu.Unlock()
					return nil
				})
			})
			time.Sleep(span * time.Duration(i%20) / 16)
			for _, g := range gs {
				wg.Go(func() { g.Close() })
			}
			wg.Wait()
			for r := 0; r < procs*local; r++ {
				what := fmt.Sprintf("%s try %d", name, i)
				if errs[r] != nil {
					refused++
					checkSplitErr(t, what, r, errs[r])
					continue
				}
				made++
				if sg := subs[r].Group(); !sg.closed.Load() {
					t.Errorf("%s: rank %d's sub-group is open after the parents closed", what, r)
					sg.Close()
				}
			}
			for p, g := range gs {
				if n := splitEntries(g); n != 0 {
					t.Errorf("%s try %d: process %d: %d Split entries left", name, i, p, n)
				}
			}
		}
		t.Logf("%s: %d sub-comms made (closed with the parents), %d Splits refused", name, made, refused)
	}
}
