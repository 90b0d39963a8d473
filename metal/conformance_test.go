//go:build darwin && cgo && !nometal

package metal

import (
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/backend/backendtest"
)

// TestConformance runs the backend conformance suite, the one every backend
// runs, on Metal device 0.
func TestConformance(t *testing.T) {
	requireMetal(t)
	backendtest.Run(t, func(t *testing.T, opts backend.OpenOptions) backend.Device {
		return openDevice(t, opts)
	})
}
