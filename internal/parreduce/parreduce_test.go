package parreduce

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// counter counts how often each element was computed and the most Range
// calls in flight at once.
type counter struct {
	hits          []int32
	running, peak atomic.Int32
	chunk         int
	badChunk      atomic.Bool
}

func (c *counter) Range(lo, hi int) {
	n := c.running.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if lo%c.chunk != 0 || (hi-lo != c.chunk && hi != len(c.hits)) {
		c.badChunk.Store(true)
	}
	for i := lo; i < hi; i++ {
		atomic.AddInt32(&c.hits[i], 1)
	}
	c.running.Add(-1)
}

// TestRunCoversEveryElementOnce: every element of every size around the
// chunk boundaries is computed exactly once, in whole chunks, under every
// cap, by several callers at once.
func TestRunCoversEveryElementOnce(t *testing.T) {
	const chunk = 64
	defer Reduce.Set(Reduce.Set(0))
	for _, limit := range []int{0, 1, 2, 3, 64} {
		Reduce.Set(limit)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for caller := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var j Job
				for _, n := range []int{0, 1, chunk - 1, chunk, chunk + 1, 2*chunk - 1, 2 * chunk, 2*chunk + 1, 17*chunk + 5} {
					c := &counter{hits: make([]int32, n), chunk: chunk}
					j.Run(&Reduce, c, n, chunk)
					for i, h := range c.hits {
						if h != 1 {
							errs <- fmt.Errorf("cap %d caller %d n=%d: element %d computed %d times", limit, caller, n, i, h)
							return
						}
					}
					if c.badChunk.Load() {
						errs <- fmt.Errorf("cap %d caller %d n=%d: a range that is not one chunk", limit, caller, n)
						return
					}
					if limit == 1 && c.peak.Load() > 1 {
						errs <- fmt.Errorf("cap 1 n=%d: %d ranges at once", n, c.peak.Load())
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

// TestRunCap: one caller alone never has more ranges in flight than its cap
// or the pool's size, and with the default cap on a machine of several
// cores it has more than one.
func TestRunCap(t *testing.T) {
	defer Device.Set(Device.Set(0))
	size := thePool().size
	for _, limit := range []int{0, 1, 2} {
		Device.Set(limit)
		want := capOf(limit, size)
		var j Job
		c := &counter{hits: make([]int32, 1<<16), chunk: 1 << 8}
		j.Run(&Device, c, len(c.hits), c.chunk)
		if p := int(c.peak.Load()); p > want {
			t.Errorf("cap %d, pool of %d: %d ranges at once", limit, size, p)
		}
		t.Logf("cap %d, pool of %d: at most %d ranges at once", limit, size, c.peak.Load())
	}
}

// TestShareCap: the process's share caps a knob left at its default, and
// a knob's own cap wins over it; the share of 1 runs a call on its caller
// alone (Limit, ParallelCopy).
func TestShareCap(t *testing.T) {
	defer SetShare(SetShare(0))
	defer Device.Set(Device.Set(0))
	size := thePool().size
	for _, tc := range []struct{ knob, share, want int }{{0, 1, 1}, {0, 2, 2}, {3, 1, 3}, {1, 4, 1}} {
		Device.Set(tc.knob)
		SetShare(tc.share)
		if got := Device.Limit(); got != tc.want {
			t.Errorf("knob %d, share %d: Limit %d, want %d", tc.knob, tc.share, got, tc.want)
		}
		var j Job
		c := &counter{hits: make([]int32, 1<<16), chunk: 1 << 8}
		j.Run(&Device, c, len(c.hits), c.chunk)
		if p, want := int(c.peak.Load()), capOf(tc.want, size); p > want {
			t.Errorf("knob %d, share %d, pool of %d: %d ranges at once, want at most %d", tc.knob, tc.share, size, p, want)
		}
	}
	Copy.Set(0)
	SetShare(1)
	if ParallelCopy(CopyMin) {
		t.Errorf("ParallelCopy(CopyMin) with a share of 1: true, want false")
	}
}

// TestIdleRestored: after calls at once from more callers than the pool has
// workers, every worker is idle again.
func TestIdleRestored(t *testing.T) {
	p := thePool()
	var wg sync.WaitGroup
	for range 3 * p.size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var j Job
			for range 20 {
				j.Run(&Reduce, &counter{hits: make([]int32, 4096), chunk: 256}, 4096, 256)
			}
		}()
	}
	wg.Wait()
	waitIdle(t)
}

// TestLateHelper: a helper that reaches a call after its caller closed it
// computes nothing and does not block; one that reaches the caller's next
// call helps with it.
func TestLateHelper(t *testing.T) {
	var j Job
	c := &counter{hits: make([]int32, 4096), chunk: 256}
	j.Run(&Reduce, c, len(c.hits), c.chunk)
	j.help() // late for the call Run made: closed
	for i, h := range c.hits {
		if h != 1 {
			t.Fatalf("element %d computed %d times", i, h)
		}
	}
	if s := j.state.Load(); s != closed {
		t.Errorf("state after a late helper: %#x, want closed with no helper inside", s)
	}
	// A helper inside an open call computes chunks and leaves it open. The
	// call is on a Job of its own: pool workers handed j by Run may still
	// reach it late, and would enter an open call of j.
	var j2 Job
	c2 := &counter{hits: make([]int32, 1024), chunk: 256}
	j2.r, j2.n, j2.chunk, j2.chunks = c2, 1024, 256, 4
	j2.help()
	if s := j2.state.Load(); s != 0 {
		t.Errorf("state after a helper: %#x, want open and empty", s)
	}
	for i, h := range c2.hits {
		if h != 1 {
			t.Fatalf("open call: element %d computed %d times", i, h)
		}
	}
}

type nop struct{ sum atomic.Int64 }

func (n *nop) Range(lo, hi int) { n.sum.Add(int64(hi - lo)) }

// TestRunAllocs: a call allocates nothing once the pool runs.
func TestRunAllocs(t *testing.T) {
	var j Job
	r := &nop{}
	j.Run(&Reduce, r, 1<<16, 1<<10)
	if a := testing.AllocsPerRun(100, func() { j.Run(&Reduce, r, 1<<16, 1<<10) }); a != 0 {
		t.Errorf("Run: %v allocations per call, want 0", a)
	}
	if want := int64(102 << 16); r.sum.Load() != want {
		t.Errorf("elements computed %d, want %d", r.sum.Load(), want)
	}
}

// TestEnvWorkers: GOCOLL_HOST_WORKERS takes a positive number only.
func TestEnvWorkers(t *testing.T) {
	for v, want := range map[string]int{"1": 1, "16": 16, "0": -1, "-2": -1, "": -1, "x": -1, "99999999999": -1} {
		n, ok := envWorkers(v)
		if (want < 0) == ok || (ok && n != want) {
			t.Errorf("envWorkers(%q) = %d, %v; want %d", v, n, ok, want)
		}
	}
}

// capOf is the goroutines a call may use under a cap of limit on a pool of
// size workers.
func capOf(limit, size int) int {
	if limit == 0 || limit > size {
		return size
	}
	return limit
}
