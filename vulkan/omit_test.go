//go:build !cgo || novulkan

package vulkan

import (
	"errors"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// TestOmitted: a build without the backend says why it is missing.
func TestOmitted(t *testing.T) {
	_, err := backend.Lookup("vulkan")
	if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "novulkan") {
		t.Errorf("Lookup(vulkan) = %v, want ErrUnavailable naming -tags novulkan", err)
	}
}
