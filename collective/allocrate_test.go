package collective

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/gocoll/gocoll/backend/backendtest"
)

// rankTeam is one goroutine per rank, each making calls of a collective
// when asked and reporting the first error, so the goroutines (and their
// start-up allocations) live outside the measured window.
type rankTeam struct {
	start []chan int // rank r makes this many calls
	done  chan error
}

func newRankTeam(ranks int, call func(r int) error) *rankTeam {
	tm := &rankTeam{start: make([]chan int, ranks), done: make(chan error, ranks)}
	for r := range tm.start {
		tm.start[r] = make(chan int)
		go func(r int, start chan int) {
			for n := range start {
				var err error
				for i := 0; i < n && err == nil; i++ {
					err = call(r)
				}
				tm.done <- err
			}
		}(r, tm.start[r])
	}
	return tm
}

// run has every rank make n calls and returns the first error.
func (tm *rankTeam) run(n int) error {
	for _, ch := range tm.start {
		ch <- n
	}
	var err error
	for range tm.start {
		if e := <-tm.done; e != nil && err == nil {
			err = e
		}
	}
	return err
}

func (tm *rankTeam) stop() {
	for _, ch := range tm.start {
		close(ch)
	}
}

// allocPath is how an all-reduce's data is passed.
type allocPath int

const (
	sliceInPlace allocPath = iota
	sliceOutOfPlace
	tensorPath
)

var allocPathNames = [...]string{"in-place", "out-of-place", "tensor"}

// mallocRate runs RateCalls synchronous 4-rank all-reduces (Mean: the values
// stay bounded however often they are reduced) of n elements of T after a
// warm-up, every rank looping on its own goroutine, and returns the heap
// allocations of the whole process per all-reduce.
func mallocRate[T Float](t *testing.T, g *Group, n int, s Strategy, path allocPath) float64 {
	t.Helper()
	ctx := context.Background()
	ranks := g.Size()
	send, recv := make([][]T, ranks), make([][]T, ranks)
	tensors := make([]*Tensor[T], ranks)
	for r := range send {
		send[r], recv[r] = make([]T, n), make([]T, n)
		for i := range send[r] {
			send[r][i] = T(exactInput(Sum, r, i))
		}
		if path == tensorPath {
			tt, err := NewTensor[T](g.Comm(r), n)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tt.Close() })
			if err := tt.Upload(send[r]); err != nil {
				t.Fatal(err)
			}
			tensors[r] = tt
		}
	}
	call := func(r int) error {
		c := g.Comm(r)
		switch path {
		case sliceInPlace:
			return AllReduceWith(ctx, c, send[r], send[r], Mean, s)
		case sliceOutOfPlace:
			return AllReduceWith(ctx, c, send[r], recv[r], Mean, s)
		}
		return AllReduceTensor(ctx, c, tensors[r], Mean, s)
	}
	tm := newRankTeam(ranks, call)
	defer tm.stop()
	// Warm up: the first calls fill the Comm's pools and free lists; then a
	// collection (which empties the runtime's central cache of sudogs, the
	// records of goroutines blocked on channels) before the calls that
	// refill the runtime's caches, so none is emptied again in the window.
	if err := tm.run(20); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	if err := tm.run(1000); err != nil {
		t.Fatal(err)
	}
	var err error
	calls := backendtest.RateCalls
	if g.Backend() != "host" && !fullRun() {
		// lavapipe (1 ms a call): 3,000 calls, so that 3 allocations in
		// the window still fail the rate.
		calls = 3000
	}
	rate := backendtest.MallocsPerCall(calls, func() {
		if e := tm.run(calls); e != nil && err == nil {
			err = e
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return rate
}

// TestAllReduceMallocRate: a steady-state synchronous AllReduce on 4 ranks
// allocates nothing, for every strategy, f32 and f64, in place, out of place
// and on tensors: fewer than backendtest.MaxMallocsPerCall heap allocations
// per all-reduce (all ranks together) over backendtest.RateCalls of them
// (3,000 on lavapipe unless full).
// testing.AllocsPerRun truncates to an integer and misses an allocation every
// few hundred calls; this does not. On lavapipe (1-9 ms a call) only a
// subset runs: lavapipeRateCase. On host, unless full, each strategy and
// path with one element type, the other at the next path or strategy (half
// the cases: every strategy and every path with both types).
func TestAllReduceMallocRate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	if testing.Short() {
		t.Skip("short mode: leaving out 10,000-call allocation measurements")
	}
	const n = 1500 // several 4096-byte chunks
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 4, func(o *Options) { o.ChunkBytes = 4096; o.Config.LocalGroupSize = 2 })
		for si, s := range allStrategies {
			for ti, f64 := range []bool{false, true} {
				for path := range allocPathNames {
					p := allocPath(path)
					if bk != "host" && !lavapipeRateCase(s, f64, p) {
						continue
					}
					if bk == "host" && !fullRun() && (si+ti+path)%2 != 0 {
						continue
					}
					dt := "f32"
					if f64 {
						dt = "f64"
					}
					t.Run(fmt.Sprintf("%s/%s/%s/%s", bk, s, dt, allocPathNames[p]), func(t *testing.T) {
						var rate float64
						if f64 {
							rate = mallocRate[float64](t, g, n, s, p)
						} else {
							rate = mallocRate[float32](t, g, n, s, p)
						}
						t.Logf("%.5f allocations per all-reduce", rate)
						if rate >= backendtest.MaxMallocsPerCall {
							t.Errorf("%.5f allocations per all-reduce, want < %g", rate, backendtest.MaxMallocsPerCall)
						}
					})
				}
			}
		}
	}
}

// lavapipeRateCase reports whether a case runs on a GPU backend: Direct in
// place, f32 (the host backend runs every case); with ./build.sh test-full
// f64 too, every strategy in place and Direct on every path.
func lavapipeRateCase(s Strategy, f64 bool, p allocPath) bool {
	switch {
	case s == Direct && p == sliceInPlace && !f64:
		return true
	case fullRun():
		return p == sliceInPlace || s == Direct
	}
	return false
}
