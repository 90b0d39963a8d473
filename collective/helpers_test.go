package collective

import (
	"context"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// fullRun reports whether the whole matrix runs on every backend
// (./build.sh test-full); CI runs the full matrix on host and a
// representative subset on lavapipe.
func fullRun() bool { return os.Getenv("GOCOLL_TEST_FULL") != "" }

// arithmetic marks a test of rounding and bits alone (every strategy's
// arithmetic, which the other tests' calls also take): the race run
// (./build.sh test runs it with -short; the race detector checks
// synchronisation and slows the Go references tenfold) leaves it to the run
// without the race detector, unless full.
func arithmetic(t *testing.T) {
	t.Helper()
	if raceEnabled && testing.Short() && !fullRun() {
		t.Skip("rounding and bits: checked by the run without the race detector (GOCOLL_TEST_FULL=1 runs it here)")
	}
}

// raceShort reports whether this is the race run of ./build.sh test (-race
// -short, not full): matrices of arithmetic that also check concurrency
// run a sample there, the rest in the run without the race detector.
func raceShort() bool { return raceEnabled && testing.Short() && !fullRun() }

// withSessions runs a randomized suite (TestConformance, TestFaultInjection)
// inside another test on a budget of its own: n sessions from seed (fresh
// sessions, not a repeat of the suite's own run), unless the flags or the
// environment name a budget or this is a full run (which keeps the suite's
// full budget and random seeds). Under the race detector a quarter. It sets
// the suite's flags for the rest of t.
func withSessions(t *testing.T, seedFlag *uint64, casesFlag *int, env string, seed uint64, n int) {
	if fullRun() || *seedFlag != 0 || *casesFlag != 0 || os.Getenv(env+"_SEED") != "" || os.Getenv(env+"_CASES") != "" {
		return
	}
	if raceEnabled {
		n = max(1, n/4)
	}
	*seedFlag, *casesFlag = seed, n
	t.Cleanup(func() { *seedFlag, *casesFlag = 0, 0 })
}

// backendsUnderTest returns the backends the tests run on: host always,
// vulkan when available (in CI it must be: lavapipe is installed by
// build.sh deps).
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
// GOCOLL_VULKAN_VALIDATION=0 turned it off for the process (figures on a
// GPU).
func wantValidation(bk string) bool {
	return bk == "vulkan" && os.Getenv("GOCOLL_VULKAN_VALIDATION") != "0"
}

func testConfig() Config {
	c := DefaultConfig()
	c.CommunicationTimeout = 20 * time.Second
	return c
}

func openGroup(t testing.TB, bk string, ranks int, mod ...func(*Options)) *Group {
	t.Helper()
	o := Options{Ranks: ranks, Backend: bk, Config: testConfig(), Validation: wantValidation(bk)}
	for _, m := range mod {
		m(&o)
	}
	g, err := NewGroup(context.Background(), o)
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
func onRanks(g *Group, f func(c *Comm) error) []error {
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

// refReduce is the independent reference: a float64 loop over the ranks'
// inputs, rounded to the element type at the end (and after each step for
// products and extrema, which are exact in both).
func refReduce(inputs [][]float64, op Op) []float64 {
	n := len(inputs[0])
	out := make([]float64, n)
	for i := 0; i < n; i++ {
		acc := inputs[0][i]
		for r := 1; r < len(inputs); r++ {
			x := inputs[r][i]
			switch op {
			case Sum, Mean:
				acc += x
			case Prod:
				acc *= x
			case Max:
				acc = ieeeMax(acc, x)
			case Min:
				acc = ieeeMin(acc, x)
			}
		}
		if op == Mean {
			acc /= float64(len(inputs))
		}
		out[i] = acc
	}
	return out
}

func ieeeMax(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return math.Max(a, b)
}

func ieeeMin(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return math.Min(a, b)
}

// exactInput returns small integers (or powers of two for prod) so every
// reduction of up to 8 ranks is exact in f32 and f64.
func exactInput(op Op, rank, i int) float64 {
	if op == Prod {
		v := [...]float64{1, 2, -1, 0.5, 1, -2, 0.25, 4}
		return v[(i*3+rank*5)%len(v)]
	}
	return float64((i*7+rank*13)%23 - 11)
}

// ulps returns the distance between a and b in units in the last place of
// the element type (0 when bitwise equal or both NaN).
func ulps(a, b float64, f64 bool) float64 {
	if math.IsNaN(a) && math.IsNaN(b) {
		return 0
	}
	if a == b {
		return 0
	}
	if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return math.Inf(1)
	}
	if f64 {
		return math.Abs(a-b) / (math.Nextafter(math.Abs(b), math.Inf(1)) - math.Abs(b))
	}
	fb := float32(b)
	step := float64(math.Nextafter32(float32(math.Abs(float64(fb))), float32(math.Inf(1)))) - math.Abs(float64(fb))
	return math.Abs(a-b) / step
}

// sizesUnderTest returns the edge sizes: 0, 1, around the 256-wide work
// group, 64K+1 and 1M+3 elements. Under the race detector (which checks
// synchronisation, not arithmetic) the 1M+3 size runs only in full mode.
func sizesUnderTest(bk string) []int {
	if raceEnabled && !fullRun() {
		if bk == "host" {
			return []int{0, 1, 255, 256, 257, 65537}
		}
		return []int{0, 1, 257, 4099}
	}
	if bk == "host" || fullRun() {
		return []int{0, 1, 255, 256, 257, 65537, 1<<20 + 3}
	}
	return []int{0, 1, 257, 65537}
}
