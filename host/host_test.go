package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/backend/backendtest"
	"github.com/gocoll/gocoll/host"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// open opens a host device that t closes.
func open(t testing.TB, opts backend.OpenOptions) *host.Device {
	t.Helper()
	d, err := host.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, opts backend.OpenOptions) backend.Device { return open(t, opts) })
}

func TestRegistered(t *testing.T) {
	b, err := backend.Lookup(host.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Available(); err != nil {
		t.Fatalf("Available: %v", err)
	}
	infos, err := b.Devices()
	if err != nil || len(infos) != 1 {
		t.Fatalf("Devices() = %d devices, %v; want 1", len(infos), err)
	}
	i := infos[0]
	if i.Backend != "host" || i.Type != "cpu" || !i.Float64 || !i.UnifiedMemory || !i.HostImport || i.MaxBindingBytes <= 1<<40 {
		t.Errorf("Devices()[0] = %+v", i)
	}
	if _, err := b.Open(1, backend.OpenOptions{}); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Open(1): %v, want ErrInvalidArgument", err)
	}
	if _, err := b.Open(0, backend.OpenOptions{MaxBindingBytes: 4}); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Open with MaxBindingBytes 4: %v, want ErrInvalidArgument", err)
	}
	d, err := b.Open(0, backend.OpenOptions{MaxBindingBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.Info().MaxBindingBytes; got != 4096 {
		t.Errorf("MaxBindingBytes = %d, want 4096", got)
	}
}

// f32 returns a region of n float32 elements of a new buffer holding vals.
func f32(t testing.TB, d backend.Device, mem backend.Memory, vals ...float32) backend.Region {
	t.Helper()
	b, err := d.Alloc(4*len(vals), mem)
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) > 0 {
		if err := b.Write(0, unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 4*len(vals))); err != nil {
			t.Fatal(err)
		}
	}
	return backend.Region{Buf: b, Len: 4 * len(vals)}
}

func readF32(t testing.TB, r backend.Region) []float32 {
	t.Helper()
	v := make([]float32, r.Len/4)
	if len(v) > 0 {
		if err := r.Buf.Read(r.Off, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), r.Len)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// TestSetDelay checks that SetDelay really delays the worker, and that a
// delayed submission can be waited for with a deadline.
func TestSetDelay(t *testing.T) {
	const delay = 100 * time.Millisecond
	d := open(t, backend.OpenOptions{})
	st := d.Stream()
	x := f32(t, d, backend.DeviceLocal, 1, 2, 3)
	d.SetDelay(delay)
	start := time.Now()
	if err := st.Scale(backend.F32, x, x, 2); err != nil {
		t.Fatal(err)
	}
	f, err := st.Submit()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), delay/4)
	defer cancel()
	if err := f.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait during the delay: %v, want context.DeadlineExceeded", err)
	}
	if err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < delay {
		t.Errorf("delayed submission finished after %v, want at least %v", el, delay)
	}
	if got := readF32(t, x); got[0] != 2 || got[2] != 6 {
		t.Errorf("got %v, want [2 4 6]", got)
	}

	d.SetDelay(0)
	start = time.Now()
	if err := st.Scale(backend.F32, x, x, 2); err != nil {
		t.Fatal(err)
	}
	f, err = st.Submit()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el >= delay {
		t.Errorf("undelayed submission took %v", el)
	}
}

// TestConcurrentDevices runs many devices from many goroutines at once (one
// rank each), with several goroutines waiting on each fence and a large
// kernel in every round so the shared pool is used by all of them; run it
// with -race.
func TestConcurrentDevices(t *testing.T) {
	const ranks, rounds, n = 8, 20, 1<<16 + 5
	var wg sync.WaitGroup
	errs := make(chan error, ranks)
	for r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- rank(r, rounds, n)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// rank is one goroutine of TestConcurrentDevices: it adds its rank number
// into an accumulator rounds times, checking the value every round.
func rank(r, rounds, n int) error {
	d, err := host.Open(backend.OpenOptions{})
	if err != nil {
		return err
	}
	defer d.Close()
	acc, err := d.Alloc(4*n, backend.DeviceLocal)
	if err != nil {
		return err
	}
	add, err := d.Alloc(4*n, backend.HostVisible)
	if err != nil {
		return err
	}
	v := unsafe.Slice((*float32)(unsafe.Pointer(&add.Bytes()[0])), n)
	for i := range v {
		v[i] = float32(r)
	}
	accR, addR := backend.Region{Buf: acc, Len: 4 * n}, backend.Region{Buf: add, Len: 4 * n}
	st := d.Stream()
	out := make([]byte, 4*n)
	for round := 1; round <= rounds; round++ {
		srcs := []backend.Region{accR, addR}
		if round == 1 {
			srcs = srcs[1:]
		}
		if err := st.Reduce(backend.Sum, backend.F32, accR, srcs, 1); err != nil {
			return err
		}
		f, err := st.Submit()
		if err != nil {
			return err
		}
		var waiters sync.WaitGroup
		werrs := make([]error, 3)
		for w := range werrs {
			waiters.Add(1)
			go func() {
				defer waiters.Done()
				werrs[w] = f.Wait(context.Background())
			}()
		}
		waiters.Wait()
		if err := errors.Join(werrs...); err != nil {
			return err
		}
		if err := acc.Read(0, out); err != nil {
			return err
		}
		got := unsafe.Slice((*float32)(unsafe.Pointer(&out[0])), n)
		for i, x := range got {
			if x != float32(r*round) {
				return fmt.Errorf("rank %d round %d element %d: %v, want %v", r, round, i, x, r*round)
			}
		}
	}
	return nil
}

// TestManyInFlight submits far more batches than the device ever needed
// before, without waiting, so the queue and the free lists grow, then waits
// for them in submission order.
func TestManyInFlight(t *testing.T) {
	const batches = 1000
	d := open(t, backend.OpenOptions{})
	st := d.Stream()
	x := f32(t, d, backend.DeviceLocal, 0)
	one := f32(t, d, backend.HostVisible, 1)
	d.SetDelay(time.Microsecond) // keep the worker behind
	fences := make([]backend.Fence, batches)
	for i := range fences {
		if err := st.Reduce(backend.Sum, backend.F32, x, []backend.Region{x, one}, 1); err != nil {
			t.Fatal(err)
		}
		f, err := st.Submit()
		if err != nil {
			t.Fatal(err)
		}
		fences[i] = f
	}
	for _, f := range fences {
		if err := f.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := readF32(t, x)[0]; got != batches {
		t.Errorf("got %v, want %v", got, batches)
	}
	if got := d.Counters().Submits.Load(); got != batches {
		t.Errorf("Submits = %d, want %d", got, batches)
	}
}

// TestAliasLaterSource checks a host property beyond the GPU kernels' passes:
// the destination may be any source, even one a GPU would read only in a
// later pass, because the host reduces each element over all sources before
// storing it.
func TestAliasLaterSource(t *testing.T) {
	const k = 17
	d := open(t, backend.OpenOptions{})
	st := d.Stream()
	srcs := make([]backend.Region, k)
	want := float32(0)
	for i := range srcs {
		srcs[i] = f32(t, d, backend.DeviceLocal, float32(i+1), 2*float32(i+1))
		want += float32(i + 1)
	}
	if err := st.Reduce(backend.Sum, backend.F32, srcs[12], srcs, 1); err != nil {
		t.Fatal(err)
	}
	f, err := st.Submit()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := readF32(t, srcs[12]); got[0] != want || got[1] != 2*want {
		t.Errorf("got %v, want [%v %v]", got, want, 2*want)
	}
}

// TestCloseConcurrent closes a device from several goroutines while another
// waits on its work.
func TestCloseConcurrent(t *testing.T) {
	d := open(t, backend.OpenOptions{})
	d.SetDelay(20 * time.Millisecond)
	st := d.Stream()
	x := f32(t, d, backend.DeviceLocal, 1)
	if err := st.Scale(backend.F32, x, x, 3); err != nil {
		t.Fatal(err)
	}
	f, err := st.Submit()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	if err := f.Wait(context.Background()); err != nil {
		t.Error(err)
	}
	wg.Wait()
	if _, err := st.Submit(); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("Submit after Close: %v, want ErrClosed", err)
	}
}

func BenchmarkReduce(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 16, 1 << 22} {
		b.Run(fmt.Sprintf("f32/K=2/n=%d", n), func(b *testing.B) {
			d := open(b, backend.OpenOptions{})
			st := d.Stream()
			mk := func() backend.Region {
				buf, err := d.Alloc(4*n, backend.DeviceLocal)
				if err != nil {
					b.Fatal(err)
				}
				return backend.Region{Buf: buf, Len: 4 * n}
			}
			dst, srcs := mk(), []backend.Region{mk(), mk()}
			b.SetBytes(int64(3 * 4 * n))
			for b.Loop() {
				if err := st.Reduce(backend.Sum, backend.F32, dst, srcs, 1); err != nil {
					b.Fatal(err)
				}
				f, err := st.Submit()
				if err != nil {
					b.Fatal(err)
				}
				if err := f.Wait(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConcurrentReduce: ranks devices each reduce 4 float32 sources of
// 1, 16 and 64 MiB at once (one submission each, then every fence waited),
// with each device's kernels on its worker alone (serial: parreduce.Device
// capped at 1) and in chunks on the shared pool (parallel); the bytes are
// every rank's sources read.
func BenchmarkConcurrentReduce(b *testing.B) {
	defer parreduce.Device.Set(parreduce.Device.Set(0))
	const k = 4
	for _, ranks := range []int{1, 4} {
		for _, mib := range []int{1, 16, 64} {
			n := mib << 20
			type rank struct {
				st   backend.Stream
				dst  backend.Region
				srcs []backend.Region
			}
			rs := make([]rank, ranks)
			for r := range rs {
				d := open(b, backend.OpenOptions{})
				rs[r].st = d.Stream()
				for i := range k + 1 {
					buf, err := d.Alloc(n, backend.DeviceLocal)
					if err != nil {
						b.Fatal(err)
					}
					if err := buf.Write(0, bytes.Repeat([]byte{byte(i + 1)}, n)); err != nil { // no first touch in the timing
						b.Fatal(err)
					}
					if i == 0 {
						rs[r].dst = backend.Region{Buf: buf, Len: n}
					} else {
						rs[r].srcs = append(rs[r].srcs, backend.Region{Buf: buf, Len: n})
					}
				}
			}
			fences := make([]backend.Fence, ranks)
			for _, mode := range []struct {
				name string
				cap  int
			}{{"serial", 1}, {"parallel", 0}} {
				b.Run(fmt.Sprintf("ranks=%d/%dMiB/%s", ranks, mib, mode.name), func(b *testing.B) {
					parreduce.Device.Set(mode.cap)
					b.SetBytes(int64(ranks * k * n))
					step := func() {
						for r := range rs {
							if err := rs[r].st.Reduce(backend.Sum, backend.F32, rs[r].dst, rs[r].srcs, 1); err != nil {
								b.Fatal(err)
							}
							f, err := rs[r].st.Submit()
							if err != nil {
								b.Fatal(err)
							}
							fences[r] = f
						}
						for _, f := range fences {
							if err := f.Wait(context.Background()); err != nil {
								b.Fatal(err)
							}
						}
					}
					step() // warm: the pool started, every page mapped
					for b.Loop() {
						step()
					}
				})
			}
		}
	}
}
