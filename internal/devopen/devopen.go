// Package devopen opens a group's devices: it selects the backend (a name,
// else GOCOLL_BACKEND, else the backends by priority, recording why each
// one passed over was skipped), places the ranks on the backend's device
// indices, opens each rank's device (closing those it opened when one
// fails), and says what the opened devices have in common: whether they use
// each other's memory, the element types all of them reduce in kernels, and
// the exchange slot size that suits them.
package devopen

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"github.com/gocoll/gocoll/backend"
)

// Skip records a backend that selection passed over, and why.
type Skip struct {
	Backend string
	Reason  string
}

// Select applies the order: explicit name, GOCOLL_BACKEND, then the
// backends by priority (backend.Preference: metal on macOS, vulkan, host).
// An error matches backend.ErrUnavailable.
func Select(name string) (backend.Backend, []Skip, error) {
	if name == "" {
		name = os.Getenv("GOCOLL_BACKEND")
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if name != "" && name != "auto" {
		b, err := backend.Lookup(name)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
		}
		if err := b.Available(); err != nil {
			return nil, nil, fmt.Errorf("%w: %q: %w", backend.ErrUnavailable, name, err)
		}
		return b, nil, nil
	}
	var skipped []Skip
	for _, n := range backend.Preference() {
		b, err := backend.Lookup(n)
		if err == nil {
			err = b.Available()
			if err == nil {
				var infos []backend.DeviceInfo
				infos, err = b.Devices()
				if err == nil && len(infos) == 0 {
					err = errors.New("no devices")
				}
			}
		}
		if err != nil {
			skipped = append(skipped, Skip{Backend: n, Reason: err.Error()})
			continue
		}
		return b, skipped, nil
	}
	return nil, skipped, fmt.Errorf("collective: no backend available (%v): %w", skipped, backend.ErrUnavailable)
}

// Options say which devices to open.
type Options struct {
	Backend string // as Select takes it
	Ranks   int    // the ranks of this process
	// Devices maps ranks to device indices; nil places rank r on device
	// r mod D.
	Devices []int
	// Open is how each device opens; Open sets its ShareKey (each set's
	// ranks share logical devices only among themselves).
	Open backend.OpenOptions
}

// PlacementError is Options.Devices naming a device the backend lacks.
type PlacementError struct {
	Rank, Device int
	Backend      string
	Have         int // the backend's devices
}

func (e *PlacementError) Error() string {
	return fmt.Sprintf("rank %d: device %d out of range (the %s backend has %d)", e.Rank, e.Device, e.Backend, e.Have)
}

// Set is the devices of a group's ranks in this process.
type Set struct {
	Backend   string // the backend's name
	Skipped   []Skip // the backends selection passed over
	Placement []int  // each rank's device index
	Devs      []backend.Device
	Infos     []backend.DeviceInfo
}

// shareKeys numbers the sets.
var shareKeys atomic.Uint64

// Open selects the backend and opens a device for each rank.
func Open(o Options) (*Set, error) {
	b, skipped, err := Select(o.Backend)
	if err != nil {
		return nil, err
	}
	s := &Set{Backend: b.Name(), Skipped: skipped, Placement: make([]int, o.Ranks)}
	infos, err := b.Devices()
	if err != nil {
		return nil, fmt.Errorf("collective: %s: listing devices: %w", s.Backend, err)
	}
	if len(infos) == 0 {
		return nil, fmt.Errorf("collective: %s has no devices: %w", s.Backend, backend.ErrUnavailable)
	}
	for r := range s.Placement {
		d := r % len(infos)
		if o.Devices != nil {
			d = o.Devices[r]
			if d < 0 || d >= len(infos) {
				return nil, &PlacementError{Rank: r, Device: d, Backend: s.Backend, Have: len(infos)}
			}
		}
		s.Placement[r] = d
	}
	oo := o.Open
	oo.ShareKey = shareKeys.Add(1)
	for r, d := range s.Placement {
		dev, err := b.Open(d, oo)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("collective: rank %d: opening %s device %d: %w", r, s.Backend, d, err)
		}
		s.Devs = append(s.Devs, dev)
		s.Infos = append(s.Infos, dev.Info())
	}
	return s, nil
}

// Close closes the devices, the last opened first.
func (s *Set) Close() error { return CloseAll(s.Devs) }

// CloseAll closes devs, the last first.
func CloseAll(devs []backend.Device) error {
	var errs []error
	for i := len(devs) - 1; i >= 0; i-- {
		if err := devs[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Log logs the backends skipped and each rank's placement (base: the
// global rank of the set's first rank).
func (s *Set) Log(l *slog.Logger, base int) {
	for _, sk := range s.Skipped {
		l.Info("gocoll: backend skipped", "backend", sk.Backend, "reason", sk.Reason)
	}
	for r, inf := range s.Infos {
		l.Info("gocoll: rank placed", "rank", base+r, "backend", s.Backend, "device", s.Placement[r], "name", inf.Name,
			"f64", inf.Float64, "maxBindingBytes", inf.MaxBindingBytes)
	}
}

// SharesMemory reports whether every device can use every other device's
// buffers (one shared logical device, or the host backend).
func (s *Set) SharesMemory() bool {
	for _, d := range s.Devs {
		if !backend.SharesMemory(s.Devs[0], d) || !backend.SharesMemory(d, s.Devs[0]) {
			return false
		}
	}
	return true
}

// Kernels returns the element types every device reduces in kernels.
func (s *Set) Kernels() backend.DTypeSet {
	k := backend.AllDTypes
	for _, inf := range s.Infos {
		k &= inf.KernelTypes()
	}
	return k
}

// SlotBytes is the exchange slot size for chunk bytes asked for (0: the
// default), in whole f64 elements. spans: the group spans processes, whose
// slots must agree whatever each one's devices; the default is then 1 MiB,
// as it is for any device that is not a discrete GPU, else 32 MiB.
func (s *Set) SlotBytes(chunk int, spans bool) int {
	if spans {
		return SpanSlotBytes(chunk)
	}
	if chunk == 0 {
		chunk = 32 << 20
		if len(s.Infos) == 0 {
			chunk = 1 << 20
		}
		for _, inf := range s.Infos {
			if inf.Type != "discrete" {
				chunk = 1 << 20
			}
		}
	}
	return chunk &^ 7
}

// SpanSlotBytes is the exchange slot size of a group that spans processes
// for chunk bytes asked for (0: the default, 1 MiB), in whole f64 elements:
// the processes agree on it before they open their devices, so it depends
// on none of them.
func SpanSlotBytes(chunk int) int {
	if chunk == 0 {
		chunk = 1 << 20
	}
	return chunk &^ 7
}
