package host_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/host"
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

// TestWaitersRunInOrder checks the waiters that run small batches
// themselves instead of waking the worker: a chain of submissions, each
// copying the previous one's destination onward (small ones a waiter may
// run, large ones only the worker), waited for by several goroutines at once
// in random order, never runs a batch early or twice: when fence i returns,
// link i of the chain holds the data, and so does every link at the end;
// Close racing the waiters waits for every submission.
func TestWaitersRunInOrder(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	for round := range 20 {
		d, err := host.Open(backend.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := d.Stream()
		const links = 40
		n := make([]int, links) // elements of link i's data
		bufs := make([]backend.Region, links)
		src := make([]float32, 200<<10) // 800 KiB: larger than a waiter runs
		for i := range src {
			src[i] = float32(r.IntN(1 << 20))
		}
		first := f32(t, d, backend.HostVisible, src...)
		for i := range bufs {
			n[i] = len(src)
			if r.IntN(3) > 0 {
				n[i] = 1 + r.IntN(2048)
			}
			if i > 0 {
				n[i] = min(n[i], n[i-1])
			}
			bufs[i] = f32(t, d, backend.DeviceLocal, make([]float32, n[i])...)
		}
		fences := make([]backend.Fence, links)
		for i := range bufs {
			from := first
			if i > 0 {
				from = bufs[i-1]
			}
			from.Len = 4 * n[i]
			if err := st.Copy(bufs[i], from); err != nil {
				t.Fatal(err)
			}
			if fences[i], err = st.Submit(); err != nil {
				t.Fatal(err)
			}
		}
		errs := make(chan error, 4)
		for w := range 4 {
			order := rand.New(rand.NewPCG(seed, uint64(10*round+w))).Perm(links)
			go func() {
				for _, i := range order {
					if err := fences[i].Wait(context.Background()); err != nil {
						errs <- err
						return
					}
					got := readF32Closed(bufs[i])
					if got == nil { // Close ran: the data is checked there
						errs <- nil
						return
					}
					for j, v := range got {
						if v != src[j] {
							errs <- fmt.Errorf("round %d: link %d element %d is %v after its fence, want %v", round, i, j, v, src[j])
							return
						}
					}
				}
				errs <- nil
			}()
		}
		if round%2 == 1 {
			d.Close() // waits for every submission, helped or not
			for i := range bufs {
				if got := readF32Closed(bufs[i]); got != nil && got[len(got)-1] != src[n[i]-1] {
					t.Fatalf("round %d: link %d not written when Close returned", round, i)
				}
			}
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		d.Close()
	}
}

// readF32Closed reads r, or returns nil once its device is closed.
func readF32Closed(r backend.Region) []float32 {
	v := make([]float32, r.Len/4)
	if err := r.Buf.Read(r.Off, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), r.Len)); err != nil {
		return nil
	}
	return v
}
