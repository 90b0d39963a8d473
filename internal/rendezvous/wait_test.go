package rendezvous

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocoll/gocoll/internal/bell"
	"github.com/gocoll/gocoll/internal/liveness"
	"github.com/gocoll/gocoll/internal/park"
	"github.com/gocoll/gocoll/internal/parktimer"
	"github.com/gocoll/gocoll/internal/waitrec"
)

// group is a test's group of n ranks in one process: its rendezvous, its
// liveness, and each rank's doorbell, timer and wake channel.
type group struct {
	b      Barrier[fp, result]
	live   liveness.Board
	ranks  []liveness.Rank
	broken atomic.Bool
	bells  []bell.Bell
	timers []parktimer.Timer
	wakes  []chan struct{}
	bell   bool
}

func newGroup(t *testing.T, n int, useBell bool) *group {
	g := &group{ranks: make([]liveness.Rank, n), bells: make([]bell.Bell, n), timers: make([]parktimer.Timer, n), bell: useBell}
	g.b.Init(n)
	g.live.Init()
	for r := range n {
		g.timers[r].Init()
		t.Cleanup(g.timers[r].Stop)
		g.wakes = append(g.wakes, make(chan struct{}, 1))
	}
	return g
}

func (g *group) Broken() bool              { return g.broken.Load() }
func (g *group) Gone(r int) *liveness.Mark { return g.ranks[r].Mark() }

// poke wakes every rank's wait, as the comms do when a generation
// completes, a rank goes or the group breaks.
func (g *group) poke() {
	for r := range g.wakes {
		select {
		case g.wakes[r] <- struct{}{}:
		default:
		}
		g.bells[r].Ring()
	}
}

// arrive enters rank r (call number seq) and, unless it completes the
// generation, waits for it with timeout.
func (g *group) arrive(ctx context.Context, r int, seq int64, timeout time.Duration) Outcome[result] {
	g.b.Lock(false)
	gen, last := g.b.Arrive(r, fp{call: 1}, true, seq)
	if last {
		g.b.Complete(&result{rank: r}, g.b.AllFlags())
		g.b.Unlock()
		g.poke()
		return Outcome[result]{End: Completed}
	}
	g.b.Unlock()
	p := park.Begin(&g.bells[r], &g.timers[r], g.bell, waitrec.Now(), timeout)
	return g.b.Wait(ctx, gen, &p, Waiter{Wake: g.wakes[r], Live: &g.live, Env: g, Base: 10})
}

// modes runs f with the waits parked on channels, and sleeping on
// doorbells where the OS has a futex.
func modes(t *testing.T, f func(t *testing.T, useBell bool)) {
	t.Run("parked", func(t *testing.T) { f(t, false) })
	if bell.Available {
		t.Run("bell", func(t *testing.T) { f(t, true) })
	}
}

// A wait ends with the generation's result once the last rank arrives.
func TestWaitCompletes(t *testing.T) {
	modes(t, func(t *testing.T, useBell bool) {
		g := newGroup(t, 2, useBell)
		go func() {
			time.Sleep(5 * time.Millisecond)
			g.arrive(context.Background(), 1, 1, time.Hour)
		}()
		o := g.arrive(context.Background(), 0, 1, time.Hour)
		if o.End != Completed || o.Res == nil || o.Res.rank != 1 || !o.All {
			t.Fatalf("Outcome = %+v, want completed by rank 1 with every flag", o)
		}
	})
}

func breaks(g *group) { g.broken.Store(true) }
func goes(g *group)   { g.live.Go(&g.ranks[2], &liveness.Mark{Reason: "returned"}) }

// A wait ends when the group breaks (a timeout of its own when its context
// ended too), when a rank that has not arrived is gone, at its deadline
// with the missing ranks, and when its context ends.
func TestWaitEnds(t *testing.T) {
	modes(t, func(t *testing.T, useBell bool) {
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		for _, tc := range []struct {
			name   string
			ctx    context.Context
			event  func(g *group)
			first  bool // the event comes before the wait
			end    End
			ctxErr error
		}{
			{"broken", context.Background(), breaks, false, Broken, nil},
			{"broken and cancelled", cancelled, breaks, true, TimedOut, context.Canceled},
			{"gone", context.Background(), goes, false, Gone, nil},
			{"gone before", context.Background(), goes, true, Gone, nil},
			{"cancelled", cancelled, nil, false, TimedOut, context.Canceled},
			{"timed out", context.Background(), nil, false, TimedOut, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				g := newGroup(t, 3, useBell)
				if tc.first {
					tc.event(g)
				} else if tc.event != nil {
					go func() {
						time.Sleep(5 * time.Millisecond)
						tc.event(g)
						g.poke()
					}()
				}
				g.b.Lock(false)
				g.b.Arrive(1, fp{call: 1}, true, 4)
				g.b.Unlock()
				timeout := time.Minute // the event ends the wait
				if tc.event == nil {
					timeout = 20 * time.Millisecond
				}
				o := g.arrive(tc.ctx, 0, 5, timeout)
				if o.End != tc.end || !errors.Is(o.Ctx, tc.ctxErr) || (tc.ctxErr == nil && o.Ctx != nil) {
					t.Fatalf("Outcome = %+v, want end %v, context error %v", o, tc.end, tc.ctxErr)
				}
				switch o.End {
				case Gone:
					if o.Rank != 2 || o.Mark == nil || o.Mark.Reason != "returned" {
						t.Fatalf("gone: rank %d, mark %+v; want rank 2, returned", o.Rank, o.Mark)
					}
				case TimedOut:
					if !reflect.DeepEqual(o.Missing, []int{12}) || !reflect.DeepEqual(o.LastSeq, []int64{-1}) {
						t.Fatalf("Missing = %v, %v; want [12], [-1]", o.Missing, o.LastSeq)
					}
				}
			})
		}
	})
}

// A deadline that passes while the last rank completes the generation
// outside the lock is renewed: the wait ends with the result.
func TestWaitWhileCompleting(t *testing.T) {
	modes(t, func(t *testing.T, useBell bool) {
		g := newGroup(t, 2, useBell)
		g.b.Lock(false)
		gen, _ := g.b.Arrive(0, fp{call: 1}, true, 1)
		g.b.Arrive(1, fp{call: 1}, false, 1) // the last: it completes
		g.b.SetCompleting(true)
		g.b.Unlock()
		go func() {
			time.Sleep(60 * time.Millisecond) // past the waiter's deadline
			g.b.Lock(false)
			g.b.SetCompleting(false)
			g.b.Complete(nil, false)
			g.b.Unlock()
			g.poke()
		}()
		p := park.Begin(&g.bells[0], &g.timers[0], useBell, waitrec.Now(), 20*time.Millisecond)
		o := g.b.Wait(context.Background(), gen, &p, Waiter{Wake: g.wakes[0], Live: &g.live, Env: g})
		if o.End != Completed || o.Res != nil || o.All {
			t.Fatalf("Outcome = %+v, want completed without a result, not every flag", o)
		}
	})
}

// Absent names the ranks not yet arrived in a generation, or says it is
// over.
func TestAbsent(t *testing.T) {
	var b Barrier[fp, result]
	b.Init(3)
	b.Arrive(1, fp{}, true, 0)
	if m, over := b.Absent(0, 10, []int{7}); over || !reflect.DeepEqual(m, []int{7, 10, 12}) {
		t.Fatalf("Absent = %v, %v; want [7 10 12], false", m, over)
	}
	b.Arrive(0, fp{}, true, 0)
	b.Arrive(2, fp{}, true, 0)
	b.Complete(nil, true)
	if m, over := b.Absent(0, 10, nil); !over || m != nil {
		t.Fatalf("Absent of a completed generation = %v, %v; want nil, true", m, over)
	}
}
