//go:build cgo && !novulkan

package vulkan

import (
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/backend/backendtest"
)

// TestConformance runs the backend conformance suite on Vulkan device 0,
// under the validation layer.
func TestConformance(t *testing.T) {
	requireVulkan(t)
	backendtest.Run(t, func(t *testing.T, opts backend.OpenOptions) backend.Device {
		return openDevice(t, opts)
	})
}
