package tuning

import (
	"sync"
	"sync/atomic"
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

// Done reports whether s was measured.
func (s *Shared) Done() bool { return s.done.Load() }

// LogAttrs returns m's constants as the key and value pairs of a log
// record (in the units people read: microseconds, GB/s).
func (m *Model) LogAttrs() []any {
	return []any{"submit_us", m.Submit * 1e6, "memcpy_GBps", m.Memcpy / 1e9, "par_memcpy_GBps", m.ParMemcpy / 1e9,
		"copy_GBps", m.Copy / 1e9, "reduce_GBps", m.Reduce / 1e9, "host_reduce_GBps", m.HostReduce / 1e9,
		"cpu_reduce_GBps", m.CPUReduce / 1e9, "handoff_us", m.Handoff * 1e6, "took", m.Measured, "err", m.Err}
}
