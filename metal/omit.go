//go:build !darwin || !cgo || nometal

package metal

import (
	"runtime"

	"github.com/gocoll/gocoll/backend"
)

func init() {
	why, prio := "left out of this build (built with -tags nometal or CGO_ENABLED=0)", backend.PriorityMetal
	if runtime.GOOS != "darwin" {
		// Never a candidate here: the automatic choice does not mention it.
		why, prio = "Metal exists only on macOS (this build is for "+runtime.GOOS+")", -1
	}
	backend.RegisterOmitted("metal", why, prio)
}
