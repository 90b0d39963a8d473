package devopen

import (
	"errors"
	"testing"

	"github.com/gocoll/gocoll/backend"
	_ "github.com/gocoll/gocoll/host"
)

// Select takes a backend by name, and refuses one it does not know with an
// error that matches backend.ErrUnavailable.
func TestSelect(t *testing.T) {
	b, skipped, err := Select(" HOST ")
	if err != nil || b.Name() != "host" || skipped != nil {
		t.Fatalf("Select(host) = %v, %v, %v", b, skipped, err)
	}
	if _, _, err := Select("no-such-backend"); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Select of an unknown backend: %v, want ErrUnavailable", err)
	}
}

// Open places the ranks (r mod D, or as Devices says), opens one device
// each, and reports what they share; a placement on a missing device is a
// *PlacementError.
func TestOpen(t *testing.T) {
	s, err := Open(Options{Backend: "host", Ranks: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Backend != "host" || len(s.Devs) != 3 || len(s.Infos) != 3 || len(s.Placement) != 3 {
		t.Fatalf("Open = %+v", s)
	}
	infos, _ := mustHost(t).Devices()
	for r, d := range s.Placement {
		if d != r%len(infos) {
			t.Fatalf("rank %d placed on device %d, want %d", r, d, r%len(infos))
		}
	}
	if !s.SharesMemory() {
		t.Fatal("host devices do not share memory")
	}
	if s.Kernels() == 0 {
		t.Fatal("host devices reduce no type in kernels")
	}
	for _, c := range []struct{ chunk, want int }{{100, 96}, {64, 64}} {
		if got := s.SlotBytes(c.chunk, false); got != c.want {
			t.Fatalf("SlotBytes(%d) = %d, want %d", c.chunk, got, c.want)
		}
	}
	if got := s.SlotBytes(0, true); got != 1<<20 {
		t.Fatalf("the default slot across processes is %d, want 1 MiB", got)
	}

	_, err = Open(Options{Backend: "host", Ranks: 2, Devices: []int{0, len(infos)}})
	var pe *PlacementError
	if !errors.As(err, &pe) || pe.Rank != 1 || pe.Device != len(infos) || pe.Have != len(infos) {
		t.Fatalf("Open on a missing device: %v, want a *PlacementError for rank 1", err)
	}
}

// The default slot is 32 MiB only for discrete GPUs in one process.
func TestSlotBytesDefault(t *testing.T) {
	gpu := &Set{Infos: []backend.DeviceInfo{{Type: "discrete"}, {Type: "discrete"}}}
	if got := gpu.SlotBytes(0, false); got != 32<<20 {
		t.Fatalf("discrete GPUs: %d, want 32 MiB", got)
	}
	mixed := &Set{Infos: []backend.DeviceInfo{{Type: "discrete"}, {Type: "integrated"}}}
	if got := mixed.SlotBytes(0, false); got != 1<<20 {
		t.Fatalf("an integrated GPU among them: %d, want 1 MiB", got)
	}
	if got := (&Set{}).SlotBytes(0, false); got != 1<<20 {
		t.Fatalf("no devices: %d, want 1 MiB", got)
	}
}

// Across processes the slot depends on no device: 1 MiB by default, else
// the chunk asked for in whole f64 elements, whatever the devices.
func TestSpanSlotBytes(t *testing.T) {
	gpu := &Set{Infos: []backend.DeviceInfo{{Type: "discrete"}}}
	for _, c := range []struct{ chunk, want int }{{0, 1 << 20}, {100, 96}, {4096, 4096}} {
		if got := SpanSlotBytes(c.chunk); got != c.want {
			t.Fatalf("SpanSlotBytes(%d) = %d, want %d", c.chunk, got, c.want)
		}
		if got := gpu.SlotBytes(c.chunk, true); got != c.want {
			t.Fatalf("SlotBytes(%d) across processes on a discrete GPU = %d, want %d", c.chunk, got, c.want)
		}
	}
}

func mustHost(t *testing.T) backend.Backend {
	b, err := backend.Lookup("host")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
