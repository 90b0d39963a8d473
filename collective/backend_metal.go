//go:build darwin && cgo && !nometal

package collective

// Pull in the Metal backend (leave it out with -tags nometal).
import _ "github.com/gocoll/gocoll/metal"
