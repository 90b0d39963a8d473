//go:build darwin && cgo && !nometal

package metal

import (
	"os"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/shimdev"
	"github.com/gocoll/gocoll/internal/shimdev/shimdevtest"
)

// device is the device the backend opens (the shared implementation over
// the ABI).
type device = shimdev.Device

// metalRequired reports whether a missing Metal device fails the tests
// instead of skipping them: GOCOLL_BACKEND=metal (what the macOS CI workflow
// sets) says Metal is what is being tested.
func metalRequired() bool {
	return strings.EqualFold(os.Getenv("GOCOLL_BACKEND"), "metal") || os.Getenv("GOCOLL_REQUIRE_METAL") == "1"
}

// requireMetal skips the test when no Metal device can be opened, or fails
// it when Metal is required.
func requireMetal(t testing.TB) {
	t.Helper()
	b, err := backend.Lookup("metal")
	if err == nil {
		err = b.Available()
	}
	if err != nil {
		if metalRequired() {
			t.Fatalf("GOCOLL_BACKEND=metal needs a usable Metal device: %v", err)
		}
		t.Skipf("no usable Metal here: %v", err)
	}
}

// openDevice opens Metal device 0 for the test and closes it at the end.
func openDevice(t testing.TB, opts backend.OpenOptions) *device {
	t.Helper()
	requireMetal(t)
	return shimdevtest.Open(t, Backend{}, opts)
}

// openConformance is openDevice for the conformance suite.
func openConformance(t *testing.T, opts backend.OpenOptions) backend.Device {
	return openDevice(t, opts)
}
