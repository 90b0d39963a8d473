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
	want := map[bool]string{true: "nometal", false: "only on macOS"}[runtime.GOOS == "darwin"]
	if _, err := backend.Lookup("metal"); !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), want) {
		t.Errorf("Lookup(metal) = %v, want ErrUnavailable naming %q", err, want)
	}
}
