package backendtest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// testAllocations checks that recording, submitting and waiting allocate
// nothing in steady state: collectives run them per chunk, so an allocation
// there is garbage per chunk. Skipped under the race detector.
func (s *suite) testAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on synchronisation; allocation counts are meaningless under -race")
	}
	if asanEnabled {
		t.Skip("-asan's instrumented cgo calls allocate; allocation counts are meaningless under -asan")
	}
	dev, st := s.dev, s.dev.Stream()
	for _, n := range []int{1024, 1 << 17} {
		for _, k := range []int{2, 9} {
			t.Run(fmt.Sprintf("K=%d/n=%d", k, n), func(t *testing.T) {
				srcs := make([]backend.Region, k)
				for i := range srcs {
					srcs[i] = backend.Region{Buf: alloc(t, dev, 4*n, alternate(i)), Len: 4 * n}
				}
				dst := backend.Region{Buf: alloc(t, dev, 4*n, backend.DeviceLocal), Len: 4 * n}
				tmp := backend.Region{Buf: alloc(t, dev, 4*n, backend.HostVisible), Len: 4 * n}
				cctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				for _, c := range []struct {
					name string
					ctx  context.Context
				}{{"Background", context.Background()}, {"WithCancel", cctx}} {
					var err error
					step := func() {
						if err != nil {
							return
						}
						if err = st.Reduce(backend.Sum, backend.F32, dst, srcs, 1); err != nil {
							return
						}
						if err = st.Scale(backend.F32, tmp, dst, 0.5); err != nil {
							return
						}
						if err = st.Copy(dst, tmp); err != nil {
							return
						}
						var f backend.Fence
						if f, err = st.Submit(); err != nil {
							return
						}
						err = f.Wait(c.ctx)
					}
					for range 10 { // warm up pools and free lists
						step()
					}
					allocs := testing.AllocsPerRun(100, step)
					must(t, err, "Reduce+Scale+Copy+Submit+Wait")
					if allocs != 0 {
						t.Errorf("%s: %v allocations per Reduce+Scale+Copy+Submit+Wait, want 0", c.name, allocs)
					}
				}
			})
		}
	}
}

// RateCalls is how many calls an allocation-rate measurement covers:
// enough that one allocation in the window is 1e-4 per call.
const RateCalls = 10000

// MaxMallocsPerCall is the steady-state allocation rate the tests allow.
const MaxMallocsPerCall = 0.001

// MallocsPerCall returns the heap allocations of the whole process while run
// runs, divided by calls (MemStats.Mallocs before and after). Unlike
// testing.AllocsPerRun it does not truncate to an integer, so an allocation
// every few hundred calls (a slab, a pool refill) shows. run makes the calls
// itself, on any goroutines; warm-up and goroutine start-up belong before,
// since everything that allocates in the window counts.
//
// The Go runtime allocates records of its own: a sudog each time a goroutine
// blocks on a channel or lock while its processor's cache and the central
// cache are empty (a collection empties the central one), 6-7 objects when it
// starts a thread. So before each window MallocsPerCall collects garbage and
// then fills the sudog caches, and it measures up to three windows, stopping
// at the first under MaxMallocsPerCall, returning the lowest rate: an
// allocation of the code under test recurs in every window, the runtime's
// occasional thread does not. run must be callable repeatedly.
func MallocsPerCall(calls int, run func()) float64 {
	best := math.Inf(1)
	for range 3 {
		runtime.GC()
		fillSudogCache()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		run()
		runtime.ReadMemStats(&after)
		best = min(best, float64(after.Mallocs-before.Mallocs)/float64(calls))
		if best < MaxMallocsPerCall {
			break
		}
	}
	return best
}

// fillSudogCache leaves the runtime's sudog caches holding plenty: one
// goroutine blocks in a select of many cases on one channel (a sudog per
// case), and releases them all when it wakes. Its processor's cache keeps
// up to 128 and passes the rest to the central cache, which every
// processor refills from before it allocates.
func fillSudogCache() {
	n := min(1024+256*runtime.GOMAXPROCS(0), 65536)
	ch := make(chan struct{})
	cases := make([]reflect.SelectCase, n)
	for i := range cases {
		cases[i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)}
	}
	done := make(chan struct{})
	go func() {
		reflect.Select(cases)
		close(done)
	}()
	// Close ch only once the goroutine blocks: a select that finds a case
	// ready takes no sudogs.
	buf := make([]byte, 1<<16)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		buf = buf[:runtime.Stack(buf[:cap(buf)], true)]
		if bytes.Contains(buf, []byte("[select]:\nreflect.rselect")) {
			break
		}
		time.Sleep(50 * time.Microsecond)
	}
	close(ch)
	<-done
}

// testAllocationRate checks steady-state recording, submission and waiting
// over RateCalls calls with MallocsPerCall: under MaxMallocsPerCall per
// Reduce+Scale+Submit+Wait, so a fence or batch slab refilled every few
// hundred submissions fails it. Skipped under the race detector.
func (s *suite) testAllocationRate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on synchronisation; allocation counts are meaningless under -race")
	}
	if asanEnabled {
		t.Skip("-asan's instrumented cgo calls allocate; allocation counts are meaningless under -asan")
	}
	const n = 64
	dev, st := s.dev, s.dev.Stream()
	srcs := []backend.Region{
		{Buf: alloc(t, dev, 4*n, backend.DeviceLocal), Len: 4 * n},
		{Buf: alloc(t, dev, 4*n, backend.HostVisible), Len: 4 * n},
	}
	dst := backend.Region{Buf: alloc(t, dev, 4*n, backend.DeviceLocal), Len: 4 * n}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	step := func() {
		if err != nil {
			return
		}
		if err = st.Reduce(backend.Sum, backend.F32, dst, srcs, 1.0/3); err != nil {
			return
		}
		if err = st.Scale(backend.F32, dst, dst, 0.5); err != nil {
			return
		}
		var f backend.Fence
		if f, err = st.Submit(); err != nil {
			return
		}
		err = f.Wait(ctx)
	}
	for range 2000 { // warm up pools, free lists and the runtime's caches
		step()
	}
	rate := MallocsPerCall(RateCalls, func() {
		for range RateCalls {
			step()
		}
	})
	must(t, err, "Reduce+Scale+Submit+Wait")
	t.Logf("%.5f allocations per Reduce+Scale+Submit+Wait over %d calls", rate, RateCalls)
	if rate >= MaxMallocsPerCall {
		t.Errorf("%.5f allocations per Reduce+Scale+Submit+Wait over %d calls, want < %g", rate, RateCalls, MaxMallocsPerCall)
	}
}
