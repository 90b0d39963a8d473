package host_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// TestFenceRecycled checks the fences Submit hands out in turn: with three
// times as many submissions in flight as the device has fences, every
// fence, waited for in random order (most of them stale, their fence object
// standing for a later submission by then), returns only once its own
// submission has run, and returns nil at once after everything ran.
func TestFenceRecycled(t *testing.T) {
	const batches = 3*256 + 5
	d := open(t, backend.OpenOptions{})
	st := d.Stream()
	one := f32(t, d, backend.HostVisible, 1)
	marks := make([]backend.Region, batches) // batch i sets marks[i] to 1
	for i := range marks {
		marks[i] = f32(t, d, backend.HostVisible, 0)
	}
	d.SetDelay(20 * time.Microsecond) // keep the worker behind
	fences := make([]backend.Fence, batches)
	for i := range fences {
		if err := st.Scale(backend.F32, marks[i], one, 1); err != nil {
			t.Fatal(err)
		}
		f, err := st.Submit()
		if err != nil {
			t.Fatal(err)
		}
		fences[i] = f
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, i := range r.Perm(batches) {
		if err := fences[i].Wait(context.Background()); err != nil {
			t.Fatalf("Wait of fence %d: %v", i, err)
		}
		if got := readF32(t, marks[i])[0]; got != 1 {
			t.Fatalf("fence %d returned before its submission ran (mark %v)", i, got)
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for i, f := range fences {
		if err := f.Wait(cancelled); err != nil {
			t.Errorf("Wait of finished fence %d with a cancelled context: %v, want nil", i, err)
		}
	}
}
