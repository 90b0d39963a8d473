//go:build darwin && cgo && !nometal

package metal

import (
	"testing"

	"github.com/gocoll/gocoll/backend/backendtest"
)

// TestConformance runs the backend conformance suite, the one every backend
// runs, on Metal device 0.
func TestConformance(t *testing.T) { backendtest.Run(t, openConformance) }
