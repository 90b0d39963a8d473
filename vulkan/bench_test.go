//go:build cgo && !novulkan

package vulkan

import (
	"context"
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// BenchmarkReduce times Reduce+Submit+Wait of k device-local f32 sources
// into a device-local destination and reports the bytes the kernel moves
// ((k+1) x size) per second. Run with GOCOLL_VULKAN_VALIDATION=0 for
// meaningful figures.
func BenchmarkReduce(b *testing.B) {
	for _, c := range []struct{ k, bytes int }{{2, 4 << 10}, {8, 4 << 20}, {8, 128 << 20}} {
		b.Run(fmt.Sprintf("k=%d/%dKiB", c.k, c.bytes>>10), func(b *testing.B) {
			d := openDevice(b, backend.OpenOptions{})
			regs := make([]backend.Region, c.k)
			for i := range regs {
				regs[i] = backend.Region{Buf: alloc(b, d, c.bytes, backend.DeviceLocal), Len: c.bytes}
			}
			benchReduce(b, d, backend.Sum, regs, 1)
		})
	}
}

// benchReduce times Reduce+Submit+Wait of op over regs (scaled by scale)
// into a device-local destination of their size and reports the bytes the
// kernel moves per second.
func benchReduce(b *testing.B, d backend.Device, op backend.Op, regs []backend.Region, scale float64) {
	size := regs[0].Len
	dst := backend.Region{Buf: alloc(b, d, size, backend.DeviceLocal), Len: size}
	s, ctx := d.Stream(), context.Background()
	run := func() {
		if err := s.Reduce(op, backend.F32, dst, regs, scale); err != nil {
			b.Fatal(err)
		}
		f, err := s.Submit()
		if err == nil {
			err = f.Wait(ctx)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	run()
	b.ResetTimer()
	for range b.N {
		run()
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64((len(regs)+1)*size)/sec/1e9, "GB/s")
	b.ReportMetric(sec*1e6, "us/op")
}

// BenchmarkReduceFloat32Kernels compares the two sets of float32 kernels
// (Float32Kernels: the hardware's arithmetic, or the _ftz kernels' on the
// bits) on a mean (Sum, scale 1/8) and a Max of 8 device-local sources of
// normal values, reporting the bytes moved per second as BenchmarkReduce
// does. Run with GOCOLL_VULKAN_VALIDATION=0 for meaningful figures.
func BenchmarkReduceFloat32Kernels(b *testing.B) {
	const k = 8
	for _, bytes := range []int{4 << 20, 64 << 20} {
		for _, kernels := range []string{"hardware", "ftz"} {
			for _, op := range []backend.Op{backend.Sum, backend.Max} {
				scale := 1.0
				if op == backend.Sum {
					scale = 1.0 / k
				}
				b.Run(fmt.Sprintf("%dMiB/%s/%v", bytes>>20, kernels, op), func(b *testing.B) {
					d := openDevice(b, backend.OpenOptions{})
					if err := d.Float32Kernels(kernels == "hardware"); err != nil {
						b.Fatal(err)
					}
					v := make([]float32, bytes/4)
					regs := make([]backend.Region, k)
					for i := range regs {
						for j := range v {
							v[j] = float32(j%1000+i) / 64
						}
						regs[i] = backend.Region{Buf: alloc(b, d, bytes, backend.DeviceLocal), Len: bytes}
						put(b, regs[i].Buf, 0, v)
					}
					benchReduce(b, d, op, regs, scale)
				})
			}
		}
	}
}

// BenchmarkRecord times recording one small Reduce (the per-call CPU cost of
// the binding, the validation checks and the C calls), submitting every 64.
func BenchmarkRecord(b *testing.B) {
	d := openDevice(b, backend.OpenOptions{})
	regs := []backend.Region{
		{Buf: alloc(b, d, 1024, backend.DeviceLocal), Len: 1024},
		{Buf: alloc(b, d, 1024, backend.DeviceLocal), Len: 1024},
	}
	s := d.Stream()
	if err := s.Reduce(backend.Sum, backend.F32, regs[0], regs, 1); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if err := s.Reduce(backend.Sum, backend.F32, regs[0], regs, 1); err != nil {
			b.Fatal(err)
		}
		if i%64 == 63 {
			if _, err := s.Submit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	wait(b, s)
}
