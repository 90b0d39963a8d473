package tuning

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// Shared is a group's model: measured once, the first time one of its
// ranks must choose, and read by every rank, so that every rank makes the
// same choice for the same call.
type Shared struct {
	once sync.Once
	done atomic.Bool // measured
	Model
}

// Measure runs measure on s's model the first time it is called (later
// callers wait for it), and returns s.
func (s *Shared) Measure(measure func(m *Model)) *Shared {
	s.once.Do(func() {
		measure(&s.Model)
		s.done.Store(true)
	})
	return s
}

// Setup is what the measurement of a group's model takes.
type Setup struct {
	Dev       backend.Device // the device it is measured on
	SlotBytes int            // the group's slot size
	Links     LinkPath       // how the group's links move slots
	CPU       bool           // the device is the CPU (Model.CPU)
	// Timeout bounds the measurement: a device that does not finish its
	// work makes it fail (and the callers fall back) instead of hanging
	// every rank that waits for it.
	Timeout time.Duration
	// Parent, when set, returns the model of the group this one was split
	// from, on the same devices, measured once for both: it is taken over,
	// with this group's own slots and links, unless it failed.
	Parent func() *Shared
	// Log, when set, receives the measured constants (Info), naming Rank.
	Log  *slog.Logger
	Rank int
}

// MeasureOnce measures s for a group set up as set, the first time it is
// called (see Measure), and returns s.
func (s *Shared) MeasureOnce(set Setup) *Shared {
	if s.Done() {
		return s
	}
	return s.Measure(func(m *Model) {
		if set.Parent != nil {
			if pm := set.Parent(); pm.Err == nil {
				*m = pm.Model
				m.SlotBytes, m.Links, m.CPU, m.Measured = set.SlotBytes, set.Links, set.CPU, 0
				return
			}
		}
		start := time.Now()
		m.SlotBytes, m.Links, m.CPU = set.SlotBytes, set.Links, set.CPU
		ctx, cancel := context.WithTimeout(context.Background(), set.Timeout)
		m.Err = Measure(ctx, set.Dev, m)
		cancel()
		m.Measured = time.Since(start)
		if set.Log != nil {
			set.Log.Info("gocoll: cost model measured", append([]any{"rank", set.Rank}, m.LogAttrs()...)...)
		}
	})
}

// Done reports whether s was measured.
func (s *Shared) Done() bool { return s.done.Load() }

// LogAttrs returns m's constants as the key and value pairs of a log
// record (in the units people read: microseconds, GB/s).
func (m *Model) LogAttrs() []any {
	return []any{"submit_us", m.Submit * 1e6, "memcpy_GBps", m.Memcpy / 1e9, "par_memcpy_GBps", m.ParMemcpy / 1e9,
		"copy_GBps", m.Copy / 1e9, "reduce_GBps", m.Reduce / 1e9, "host_reduce_GBps", m.HostReduce / 1e9,
		"cpu_reduce_GBps", m.CPUReduce / 1e9, "handoff_us", m.Handoff * 1e6, "took", m.Measured, "err", m.Err}
}
