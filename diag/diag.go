// Package diag exposes gocoll's diagnostics, for tools (gocoll-info,
// allreduce-perf, the device benchmark) and tests: which backends this
// build knows and why one cannot run, the counters at the backend seam, and
// what Auto picks and why. Using the collectives needs none of it.
package diag

import (
	"fmt"
	"runtime"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// BackendReport describes one backend known to this build.
type BackendReport struct {
	Name    string
	Err     error // nil when available, else why not
	Devices []backend.DeviceInfo
}

// Probe lists every backend this build knows of (compiled in or left out),
// whether it can run here and its devices, with the float32 kernels each
// runs and why (DeviceInfo.Float32Hardware, Float32Reason). A CPU driver's
// device makes that choice at its first open in the process, which may run
// a self-test of its float32 arithmetic: Probe opens each device whose
// choice is not known yet, once.
func Probe() []BackendReport {
	var out []BackendReport
	seen := map[string]bool{}
	for _, n := range backend.Known() {
		if seen[n] {
			continue
		}
		seen[n] = true
		r := BackendReport{Name: n}
		b, err := backend.Lookup(n)
		if err == nil {
			err = b.Available()
		}
		if err == nil {
			r.Devices, err = b.Devices()
		}
		if err == nil {
			settleFloat32(b, r.Devices)
		}
		r.Err = err
		if n == "metal" && err != nil && runtime.GOOS != "darwin" {
			r.Err = fmt.Errorf("metal runs only on darwin: %w", backend.ErrUnavailable)
		}
		out = append(out, r)
	}
	return out
}

// settleFloat32 fills in the float32 kernels of the devices whose listing
// leaves them to their first open (Float32Reason empty): it opens each such
// device with default options, which makes the choice, and closes it.
func settleFloat32(b backend.Backend, devs []backend.DeviceInfo) {
	for i := range devs {
		if devs[i].Float32Reason != "" {
			continue
		}
		d, err := b.Open(devs[i].Index, backend.OpenOptions{})
		if err != nil {
			devs[i].Float32Reason = fmt.Sprintf("not chosen: the device does not open: %v", err)
			continue
		}
		info := d.Info()
		devs[i].Float32Hardware, devs[i].Float32Reason = info.Float32Hardware, info.Float32Reason
		if err := d.Close(); err != nil {
			devs[i].Float32Reason += fmt.Sprintf(" (closing the device: %v)", err)
		}
	}
}

// Counters returns local rank rank's counters at the backend seam (what
// its device recorded, submitted and moved; see backend.Counters).
func Counters(g *collective.Group, rank int) backend.CounterSnapshot {
	c := g.Comm(rank)
	if c == nil {
		return backend.CounterSnapshot{}
	}
	return c.Device().Counters().Snapshot()
}

// AutoChoice returns the strategy Auto picks for an all-reduce of bytes
// bytes of dt on c's group, and the cost model's time for each strategy.
// The group's cost model is measured, if it has not been yet, as an
// operation of c: call it from c's goroutine (it fails over to Ring while c
// is in use). Every rank of one process gets the same answer.
// (The same as c.AutoChoice.)
func AutoChoice(c *collective.Comm, bytes int, dt backend.DType) (collective.Strategy, map[collective.Strategy]time.Duration) {
	return c.AutoChoice(bytes, dt)
}
