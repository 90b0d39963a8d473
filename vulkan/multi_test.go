//go:build cgo && !novulkan

package vulkan

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/backend/backendtest"
)

// TestReduceMulti runs the ReduceMulti conformance checks on Vulkan device
// 0 under the validation layer.
func TestReduceMulti(t *testing.T) {
	arithmetic(t)
	requireVulkan(t)
	backendtest.RunMultiOptions(t, func(t *testing.T, opts backend.OpenOptions) backend.Device {
		return openDevice(t, opts)
	}, suiteOptions())
}

// TestReduceMultiVec checks that aligned regions run the 16-byte reducem
// kernels and unaligned ones the scalar kernels, with the same results.
func TestReduceMultiVec(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	const n = 1000
	regs := make([]backend.Region, 3)
	for i := range regs {
		regs[i] = backend.Region{Buf: alloc(t, d, 4*n+4, backend.HostVisible), Len: 4 * n}
	}
	src := [][]float32{make([]float32, n), make([]float32, n), make([]float32, n)}
	for i := range n {
		src[0][i], src[1][i], src[2][i] = float32(i)*0.25, float32(n-i), 1.5
	}
	want := reduceRef(backend.Sum, src, 1.0/3)
	s := d.Stream()
	for _, off := range []int{0, 4} {
		for i := range regs {
			regs[i].Off = off
			put(t, regs[i].Buf, off, src[i])
		}
		before := d.VecDispatches()
		if err := s.(backend.MultiReducer).ReduceMulti(backend.Sum, backend.F32, regs, regs, 1.0/3); err != nil {
			t.Fatal(err)
		}
		wait(t, s)
		if vec := d.VecDispatches() - before; (vec > 0) != (off == 0) {
			t.Errorf("offset %d: %d 16-byte dispatches", off, vec)
		}
		for j := range regs {
			got := get[float32](t, regs[j].Buf, off, n)
			for i := range n {
				if got[i] != float32(float64(src[0][i]+src[1][i]+src[2][i])/3) {
					t.Fatalf("offset %d: dsts[%d][%d] = %v, want %v", off, j, i, got[i], want[i])
				}
			}
		}
	}
}

// BenchmarkAllReduceInPlace compares two ways to all-reduce N device-local
// f32 tensors in place on one device: ReduceMulti (N inputs -> N outputs,
// one pass) and Reduce into the first followed by N-1 Scale copies. SetBytes
// is one tensor, so MB/s is tensor bytes all-reduced per second. Run with
// GOCOLL_VULKAN_VALIDATION=0 for meaningful figures.
func BenchmarkAllReduceInPlace(b *testing.B) {
	for _, c := range []struct{ n, bytes int }{{4, 64 << 10}, {4, 16 << 20}, {8, 16 << 20}} {
		for _, way := range []string{"ReduceMulti", "Reduce+Scale"} {
			b.Run(fmt.Sprintf("N=%d/%dKiB/%s", c.n, c.bytes>>10, way), func(b *testing.B) {
				d := openDevice(b, backend.OpenOptions{})
				regs := make([]backend.Region, c.n)
				for i := range regs {
					regs[i] = backend.Region{Buf: alloc(b, d, c.bytes, backend.DeviceLocal), Len: c.bytes}
				}
				s := d.Stream()
				run := func() {
					var err error
					if way == "ReduceMulti" {
						err = s.(backend.MultiReducer).ReduceMulti(backend.Sum, backend.F32, regs, regs, 1)
					} else {
						err = s.Reduce(backend.Sum, backend.F32, regs[0], regs, 1)
						for _, r := range regs[1:] {
							if err == nil {
								err = s.Scale(backend.F32, r, regs[0], 1)
							}
						}
					}
					if err != nil {
						b.Fatal(err)
					}
					wait(b, s)
				}
				run()
				b.SetBytes(int64(c.bytes))
				b.ResetTimer()
				for range b.N {
					run()
				}
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e6, "us/op")
			})
		}
	}
}

// TestReduceMultiShared: on devices that share one logical device, one
// device's ReduceMulti reads and writes every rank's buffers in place, and a
// device that does not share memory is refused.
func TestReduceMultiShared(t *testing.T) {
	const ranks, n = 3, 777
	devs := make([]*device, ranks)
	regs := make([]backend.Region, ranks)
	in := make([][]float64, ranks)
	for r := range devs {
		devs[r] = openDevice(t, shareOpts)
		if !devs[r].Info().Float64 {
			t.Skip("no f64 kernels")
		}
		regs[r] = backend.Region{Buf: alloc(t, devs[r], 8*n, backend.DeviceLocal), Len: 8 * n}
		in[r] = make([]float64, n)
		for i := range n {
			in[r][i] = float64(i*(r+1)) / 3
		}
		put(t, regs[r].Buf, 0, in[r])
	}
	if !backend.SharesMemory(devs[0], devs[1]) {
		t.Fatal("devices opened with ShareDevice do not share memory")
	}
	want := reduceRef(backend.Max, in, 1)
	s := devs[1].Stream()
	if err := s.(backend.MultiReducer).ReduceMulti(backend.Max, backend.F64, regs, regs, 1); err != nil {
		t.Fatal(err)
	}
	wait(t, s)
	for r := range regs {
		compare(t, fmt.Sprintf("rank %d", r), get[float64](t, regs[r].Buf, 0, n), want)
	}
	other := openDevice(t, backend.OpenOptions{})
	if backend.SharesMemory(other, devs[0]) {
		t.Skip("a separately opened device shares memory")
	}
	err := other.Stream().(backend.MultiReducer).ReduceMulti(backend.Max, backend.F64, regs[:1], regs, 1)
	if !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("ReduceMulti over another device's buffers: %v, want ErrInvalidArgument", err)
	}
}
