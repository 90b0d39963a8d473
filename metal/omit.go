//go:build !darwin || !cgo || nometal

package metal

import (
	"runtime"

	"github.com/gocoll/gocoll/backend"
)

func init() {
	why := "left out of this build (built with -tags nometal or CGO_ENABLED=0)"
	if runtime.GOOS != "darwin" {
		why = "Metal exists only on macOS (this build is for " + runtime.GOOS + ")"
	}
	backend.RegisterOmitted("metal", why)
}
