package tuning

import (
	"context"
	"math"
	"testing"

	"github.com/gocoll/gocoll/backend"
	_ "github.com/gocoll/gocoll/host"
)

// TestMeasureHost measures the host backend's device: every constant is
// positive and finite, and the predictions of each algorithm grow with
// the size.
func TestMeasureHost(t *testing.T) {
	dev := openHost(t)
	m := Model{SlotBytes: 1 << 20, Links: LinksShared}
	if err := Measure(context.Background(), dev, &m); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]float64{"Submit": m.Submit, "Memcpy": m.Memcpy, "ParMemcpy": m.ParMemcpy, "Copy": m.Copy,
		"Reduce": m.Reduce, "HostReduce": m.HostReduce, "CPUReduce": m.CPUReduce, "Handoff": m.Handoff} {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("%s = %v, want a positive finite value", name, v)
		}
	}
	for a := Direct; a <= Host; a++ {
		small := m.Predict(a, backend.F32, 4<<10, 4, 4, 2)
		large := m.Predict(a, backend.F32, 64<<20, 4, 4, 2)
		if !(small > 0) || !(large > small) {
			t.Errorf("algorithm %d: %v s at 4 KiB, %v s at 64 MiB: want positive and growing", a, small, large)
		}
	}
	if h := m.Predict(Hierarchical, backend.F32, 1<<20, 4, 4, 4); !math.IsInf(h, 1) {
		t.Errorf("Hierarchical with one group of 4: %v, want +Inf", h)
	}
}

// openHost opens a host device, closed when the test ends.
func openHost(t *testing.T) backend.Device {
	t.Helper()
	b, err := backend.Lookup("host")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := b.Open(0, backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}
