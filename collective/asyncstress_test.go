package collective

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestAsyncP2PStress: 3,000 steps of a SendAsync and RecvAsync pair
// between two ranks (6,000 operations a rank), each step under a context
// drawn from a plan both ranks share: Run's, one of its own cancelled once
// the step was waited for, one with a deadline, or one that one rank
// cancels right after posting (racing the match: the operation either met
// its peer's first or fails, breaking the group; the test then opens a
// new group and goes on). Every step that succeeded received exactly the
// peer's values; every failed one returned an *Error matching the
// context's end, ErrTimeout, ErrGroupBroken or ErrRankGone, its receive buffer
// untouched. Reused records and the shared context watches are exercised
// under the race detector, in one process and between two processes over
// the in-memory transport.
func TestAsyncP2PStress(t *testing.T) {
	t.Run("process", func(t *testing.T) {
		asyncStress(t, func() []*Group {
			g, err := NewGroup(context.Background(), Options{Ranks: 2, Backend: "host", Config: testConfig()})
			if err != nil {
				t.Fatal(err)
			}
			return []*Group{g}
		})
	})
	t.Run("processes", func(t *testing.T) {
		asyncStress(t, func() []*Group { return openProcessesOn(t, newQuietNet(2), "host", 1) })
	})
}

// stressPlan is a step of TestAsyncP2PStress: its context (kind: 0 Run's,
// 1 cancelled after the step, 2 with a deadline, 3 cancelled by rank
// canceller right after posting).
type stressPlan struct{ kind, canceller int }

// asyncStress runs TestAsyncP2PStress's steps on the groups open makes
// (one group of two ranks, or one per process of a group of two
// processes), opening new ones after a failure.
func asyncStress(t *testing.T, open func() []*Group) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 26))
	const steps = 3000
	plans := make([]stressPlan, steps)
	for i := range plans {
		plans[i] = stressPlan{kind: rng.IntN(4), canceller: rng.IntN(2)}
		if plans[i].kind == 3 && rng.IntN(8) != 0 {
			plans[i].kind = 1 // racing cancellations: 1 step in 32
		}
	}
	var good, failed int
	reached := make([]int, 2)
	for next, groups := 0, 0; next < steps; groups++ {
		gs := open()
		oks := make([]int, 2)
		var errs error
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, g := range gs {
			wg.Go(func() {
				err := g.Run(context.Background(), func(ctx context.Context, c *Comm) error {
					return stressSteps(t, ctx, c, plans, next, reached, oks)
				})
				mu.Lock()
				errs = errors.Join(errs, err)
				mu.Unlock()
			})
		}
		wg.Wait()
		for _, g := range gs {
			if err := g.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
		good += min(oks[0], oks[1])
		if errs != nil {
			failed++
			// The step that failed is the canceller's; its peer, whose
			// operations of that step completed before the cancellation,
			// may have gone on to the next one (which then fails).
			cancelled := false
			for s := min(reached[0], reached[1]); s <= max(reached[0], reached[1]); s++ {
				cancelled = cancelled || plans[s].kind == 3
			}
			if !cancelled {
				t.Fatalf("group %d: steps %d-%d, none with a cancellation, failed: %v", groups, min(reached[0], reached[1]), max(reached[0], reached[1]), errs)
			}
		}
		next = max(reached[0], reached[1]) + 1
		if t.Failed() {
			return
		}
	}
	t.Logf("%d steps succeeded on both ranks, %d failed on a cancellation (a new group each)", good, failed)
	if good < steps/2 {
		t.Errorf("only %d of %d steps succeeded", good, steps)
	}
}

// stressSteps runs rank c.Rank()'s steps of plans from next on, until one
// fails (its error returned); reached[r] is the last step it began, oks[r]
// counts those that succeeded.
func stressSteps(t *testing.T, ctx context.Context, c *Comm, plans []stressPlan, next int, reached, oks []int) error {
	const n = 257
	value := func(step, r, i int) int32 { return int32(step*10_000 + r*1000 + i) }
	r, peer := c.Rank(), 1-c.Rank()
	send, recv := make([]int32, n), make([]int32, n)
	for step := next; step < len(plans); step++ {
		reached[r] = step
		p := plans[step]
		sctx, cancel := ctx, context.CancelFunc(func() {})
		switch p.kind {
		case 1, 3:
			sctx, cancel = context.WithCancel(ctx)
		case 2:
			sctx, cancel = context.WithTimeout(ctx, time.Minute)
		}
		for i := range send {
			send[i], recv[i] = value(step, r, i), -1
		}
		var ws, wr Work
		if r == 0 {
			ws, wr = SendAsync(sctx, c, send, peer), RecvAsync(sctx, c, recv, peer)
		} else {
			wr, ws = RecvAsync(sctx, c, recv, peer), SendAsync(sctx, c, send, peer)
		}
		if p.kind == 3 && p.canceller == r {
			cancel()
		}
		errS, errR := ws.Wait(context.Background()), wr.Wait(context.Background())
		cancel()
		for _, err := range []error{errS, errR} {
			var ce *Error
			// ErrRankGone: the peer whose operation failed returned from
			// Run before this rank's wait saw the group broken (both are
			// true of the peer; which one a loaded machine shows first is
			// a race of the two reports).
			if err != nil && (!errors.As(err, &ce) || !(errors.Is(err, context.Canceled) ||
				errors.Is(err, ErrTimeout) || errors.Is(err, ErrGroupBroken) || errors.Is(err, ErrRankGone))) {
				t.Errorf("step %d rank %d: %v, want an *Error of the context's end or the break", step, r, err)
			}
		}
		for i, v := range recv {
			if want := value(step, peer, i); (errR == nil && v != want) || (errR != nil && v != -1) {
				t.Errorf("step %d rank %d: recv[%d] = %d (error %v), want %d", step, r, i, v, errR, want)
				break
			}
		}
		if errS != nil || errR != nil {
			return errors.Join(errS, errR)
		}
		oks[r]++
	}
	return nil
}

// TestStaleWork: a point-to-point Work waited for keeps its result until
// the comm reuses its record for a later operation; from then on it (and
// every copy) reports ErrStaleWork at once, never the later operation's
// result nor its wait: Wait, Test and Done, WaitAll and WaitAny alike. The
// zero Work reports ErrStaleWork and is skipped by WaitAll and WaitAny.
func TestStaleWork(t *testing.T) {
	ctx := context.Background()
	var zero Work
	if err := zero.Wait(ctx); !errors.Is(err, ErrStaleWork) || !zero.Done() {
		t.Fatalf("the zero Work's Wait = %v, want ErrStaleWork", err)
	}
	if err := WaitAll(ctx, zero); err != nil {
		t.Fatalf("WaitAll(zero) = %v, want nil", err)
	}
	g := openGroup(t, "host", 2)
	hold := make(chan struct{})
	noErrors(t, onRanks(g, func(c *Comm) error {
		r, peer := c.Rank(), 1-c.Rank()
		send, recv := []int32{int32(10 + r)}, []int32{0}
		if err := WaitAll(ctx, SendAsync(ctx, c, send, peer), RecvAsync(ctx, c, recv, peer)); err != nil || recv[0] != int32(10+peer) {
			return errors.Join(err, errors.New("the first exchange failed"))
		}
		ws, wr := SendAsync(ctx, c, send, peer), RecvAsync(ctx, c, recv, peer)
		for _, w := range []Work{ws, wr} {
			if err := w.Wait(ctx); err != nil {
				return err
			}
		}
		if r == 1 {
			<-hold // rank 0 checks its stale Works while this send waits
			send[0] = 20
			return WaitAll(ctx, SendAsync(ctx, c, send, 0), RecvAsync(ctx, c, recv, 0))
		}
		old := []Work{ws, wr}
		if err := WaitAll(ctx, old...); err != nil {
			t.Errorf("waiting again before reuse = %v, want the same result (nil)", err)
		}
		// Both records are back once the worker let go of them.
		for deadline := time.Now().Add(10 * time.Second); c.recs.Len() < 2; {
			if time.Now().After(deadline) {
				t.Fatalf("%d free records, want 2", c.recs.Len())
			}
			time.Sleep(time.Millisecond)
		}
		pending := RecvAsync(ctx, c, recv, 1) // reuses one record, not matched yet
		other := SendAsync(ctx, c, []int32{1}, 1)
		short, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for i, w := range old {
			done, terr := w.Test()
			if err := w.Wait(short); !errors.Is(err, ErrStaleWork) || !done || !errors.Is(terr, ErrStaleWork) || !w.Done() {
				t.Errorf("stale Work %d: Wait %v, Test %v, %v, Done %v; want ErrStaleWork at once", i, err, done, terr, w.Done())
			}
		}
		if i, err := WaitAny(short, old[1], pending); i != 0 || !errors.Is(err, ErrStaleWork) {
			t.Errorf("WaitAny(stale, pending) = %d, %v; want 0, ErrStaleWork", i, err)
		}
		if pending.Done() {
			t.Error("the pending RecvAsync is done before its Send was posted")
		}
		close(hold)
		if err := pending.Wait(ctx); err != nil || recv[0] != 20 {
			t.Errorf("the later RecvAsync: %v, received %d; want nil, 20", err, recv[0])
		}
		return other.Wait(ctx)
	}))
}
