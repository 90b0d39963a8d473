package ddp

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"go.uber.org/goleak"
)

// Test helpers over the exported collective API (the equivalents of
// collective's own helpers_test.go).

// quiet is the Logger of the tests' Syncs.
var quiet = slog.New(slog.DiscardHandler)

// backendsUnderTest returns the backends the tests run on: host always,
// vulkan when available (in CI it must be: lavapipe is installed by
// build.sh deps). Importing collective registers the vulkan backend in cgo
// builds without the novulkan tag.
func backendsUnderTest(t testing.TB) []string {
	out := []string{"host"}
	b, err := backend.Lookup("vulkan")
	if err == nil {
		err = b.Available()
	}
	if err != nil {
		if os.Getenv("CI") != "" && vulkanBuilt {
			t.Fatalf("vulkan backend unavailable in CI: %v", err)
		}
		t.Logf("vulkan backend not tested: %v", err)
		return out
	}
	return append(out, "vulkan")
}

// wantValidation: groups on Vulkan ask for the validation layer, unless
// GOCOLL_VULKAN_VALIDATION=0 turned it off for the process.
func wantValidation(bk string) bool {
	return bk == "vulkan" && os.Getenv("GOCOLL_VULKAN_VALIDATION") != "0"
}

func testConfig() collective.Config {
	c := collective.DefaultConfig()
	c.CommunicationTimeout = 20 * time.Second
	return c
}

// openGroup opens a group of ranks ranks on backend bk, closed (and the
// validation layer's messages checked) when the test ends.
func openGroup(t testing.TB, bk string, ranks int, mod ...func(*collective.Options)) *collective.Group {
	t.Helper()
	o := collective.Options{Ranks: ranks, Backend: bk, Config: testConfig(), Validation: wantValidation(bk)}
	for _, m := range mod {
		m(&o)
	}
	g, err := collective.NewGroup(context.Background(), o)
	if err != nil {
		t.Fatalf("NewGroup(%s, %d ranks): %v", bk, ranks, err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		checkValidation(t)
	})
	return g
}

// onRanks runs f for every rank, each in its own goroutine, and returns the
// errors by rank.
func onRanks(g *collective.Group, f func(c *collective.Comm) error) []error {
	errs := make([]error, g.Size())
	var wg sync.WaitGroup
	for r := 0; r < g.Size(); r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = f(g.Comm(r))
		}(r)
	}
	wg.Wait()
	return errs
}

func noErrors(t testing.TB, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// setDelay slows every rank's host device down: a delay before every
// submission (the host backend's test hook).
func setDelay(t testing.TB, g *collective.Group, d time.Duration) {
	t.Helper()
	for r := 0; r < g.Size(); r++ {
		dev, ok := g.Comm(r).Device().(interface{ SetDelay(time.Duration) })
		if !ok {
			t.Fatalf("rank %d: device %T has no SetDelay", r, g.Comm(r).Device())
		}
		dev.SetDelay(d)
	}
}

// newSyncs creates every rank's Sync with options o (logging discarded).
func newSyncs[T Grad](t testing.TB, g *collective.Group, o Options) []*Sync[T] {
	t.Helper()
	o.Logger = quiet
	out := make([]*Sync[T], g.Size())
	for r := range out {
		s, err := New[T](g.Comm(r), o)
		if err != nil {
			t.Fatal(err)
		}
		out[r] = s
	}
	t.Cleanup(func() {
		for r, s := range out {
			if err := s.Close(context.Background()); err != nil {
				t.Errorf("rank %d: Sync.Close: %v", r, err)
			}
		}
	})
	return out
}

func bitsEqual[T collective.Elem](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return true
	}
	n := len(a) * int(unsafe.Sizeof(a[0]))
	return string(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), n)) ==
		string(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), n))
}

// leakOpts ignore the goroutines that exist before the test and the
// process-wide worker pool of reductions and copies (internal/parreduce,
// started once, on first use).
var leakOpts = []goleak.Option{goleak.IgnoreCurrent(),
	goleak.IgnoreTopFunction("github.com/gocoll/gocoll/internal/parreduce.worker")}

// allocsPerStep returns the allocations of rank 0's step(0) in a steady
// state of a group of two ranks: rank 1 runs step(1) whenever rank 0 runs
// step(0), so a measurement on rank 0's goroutine covers whole steps.
func allocsPerStep(t *testing.T, step func(r int) error) float64 {
	t.Helper()
	run, done := make(chan struct{}), make(chan error)
	go func() {
		for range run {
			done <- step(1)
		}
	}()
	defer close(run)
	both := func() error {
		run <- struct{}{}
		err := step(0)
		return errors.Join(err, <-done)
	}
	for i := 0; i < 3; i++ { // warm the pools and the strategy choice
		if err := both(); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	allocs := testing.AllocsPerRun(50, func() {
		if e := both(); e != nil && err == nil {
			err = e
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return allocs
}
