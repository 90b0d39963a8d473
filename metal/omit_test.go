//go:build !darwin || !cgo || nometal

package metal

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// TestOmitted: a build without the backend says why it is missing: the
// platform, or the build tag.
func TestOmitted(t *testing.T) {
	_, err := backend.Lookup("metal")
	want := "nometal"
	if runtime.GOOS != "darwin" {
		want = "only on macOS"
	}
	if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), want) {
		t.Errorf("Lookup(metal) = %v, want ErrUnavailable naming %q", err, want)
	}
}
