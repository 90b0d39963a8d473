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
			dst := backend.Region{Buf: alloc(b, d, c.bytes, backend.DeviceLocal), Len: c.bytes}
			s, ctx := d.Stream(), context.Background()
			run := func() {
				if err := s.Reduce(backend.Sum, backend.F32, dst, regs, 1); err != nil {
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
			b.ReportMetric(float64((c.k+1)*c.bytes)/sec/1e9, "GB/s")
			b.ReportMetric(sec*1e6, "us/op")
		})
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
