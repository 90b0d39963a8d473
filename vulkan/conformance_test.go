//go:build cgo && !novulkan

package vulkan

import (
	"os"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/backend/backendtest"
)

// fullRun reports whether the suites run whole (./build.sh test-full sets
// GOCOLL_TEST_FULL). The default run (./build.sh test, CI) samples the
// multi-destination matrices, and runs the largest cases once, on the
// unshared device.
func fullRun() bool { return os.Getenv("GOCOLL_TEST_FULL") != "" }

// arithmetic marks a test of the kernels' arithmetic alone: the race run
// (./build.sh test runs it with -short; the race detector checks
// synchronisation and slows the Go references tenfold) leaves it to the run
// without the race detector, unless full.
func arithmetic(t *testing.T) {
	t.Helper()
	if raceEnabled && testing.Short() && !fullRun() {
		t.Skip("the kernels' arithmetic: checked by the run without the race detector (GOCOLL_TEST_FULL=1 runs it here)")
	}
}

// suiteOptions are the conformance suite's options for this run: short
// under -short, the multi-destination matrices sampled unless full, and
// unless full (or under the race detector) the arithmetic of the types
// TestDTypeKernels checks left to it.
func suiteOptions() backendtest.Options {
	o := backendtest.Options{Short: testing.Short(), Sample: testing.Short() || !fullRun()}
	if !fullRun() && !raceEnabled {
		// TestDTypeKernels checks their arithmetic (under the race detector
		// it does not run, and the suite's int32 and half take every path).
		o.CoveredTypes = featureTypes
	}
	return o
}

// TestConformance runs the backend conformance suite on Vulkan device 0,
// under the validation layer.
func TestConformance(t *testing.T) {
	requireVulkan(t)
	backendtest.RunOptions(t, func(t *testing.T, opts backend.OpenOptions) backend.Device {
		return openDevice(t, opts)
	}, suiteOptions())
}
