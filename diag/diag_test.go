package diag

import (
	"context"
	"runtime"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

func TestProbe(t *testing.T) {
	var host bool
	for _, r := range Probe() {
		if r.Name == "host" {
			host = r.Err == nil && len(r.Devices) > 0
		}
		for _, d := range r.Devices {
			if d.Float32Reason == "" {
				t.Errorf("%s device %d (%s): no float32 kernels chosen", r.Name, d.Index, d.Name)
			}
			t.Logf("%s device %d (%s): float32 hardware kernels %v: %s", r.Name, d.Index, d.Name, d.Float32Hardware, d.Float32Reason)
		}
		if r.Name == "metal" && runtime.GOOS != "darwin" && r.Err == nil {
			t.Error("metal reported available off darwin")
		}
	}
	if !host {
		t.Error("Probe does not list an available host backend")
	}
}

// TestCountersAndAutoChoice: the counters see a host all-reduce's bytes (a
// ring: the host backend's direct exchange is a CPU pass that never reaches
// its device), and
// AutoChoice answers on every rank alike with a time for the strategy it
// picks.
func TestCountersAndAutoChoice(t *testing.T) {
	ctx := context.Background()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 2, Backend: "host", Config: collective.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if Counters(g, 5) != (backend.CounterSnapshot{}) {
		t.Error("Counters of a rank out of range are not zero")
	}
	before := Counters(g, 0)
	err = g.Run(ctx, func(ctx context.Context, c *collective.Comm) error {
		return collective.AllReduceWith(ctx, c, make([]float32, 1<<16), make([]float32, 1<<16), collective.Sum, collective.Ring)
	})
	if err != nil {
		t.Fatal(err)
	}
	d := Counters(g, 0).Sub(before)
	if d.BytesWritten == 0 && d.BytesReduced == 0 && d.BytesRead == 0 {
		t.Errorf("no traffic counted: %+v", d)
	}
	for _, bytes := range []int{64, 1 << 20, 64 << 20} {
		s0, est := AutoChoice(g.Comm(0), bytes, backend.F32)
		s1, _ := AutoChoice(g.Comm(1), bytes, backend.F32)
		if s0 != s1 {
			t.Errorf("%d B: rank 0 picks %v, rank 1 %v", bytes, s0, s1)
		}
		if _, ok := est[s0]; !ok {
			t.Errorf("%d B: no modelled time for the pick %v: %v", bytes, s0, est)
		}
	}
}
