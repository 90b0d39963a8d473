package collective

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkAllReduce measures in-place all-reduce (sum) per backend, element
// type, rank count and size. It reports bytes per second of the tensor
// (algbw, via SetBytes) and busbw = algbw * 2(N-1)/N, as nccl-tests does.
func BenchmarkAllReduce(b *testing.B) {
	for _, bk := range backendsUnderTest(b) {
		for _, dt := range []string{"f32", "f64"} {
			for _, ranks := range []int{1, 4} {
				for _, size := range []int{4 << 10, 256 << 10, 4 << 20, 64 << 20} {
					name := fmt.Sprintf("%s/%s/ranks=%d/bytes=%d", bk, dt, ranks, size)
					b.Run(name, func(b *testing.B) {
						g := openGroup(b, bk, ranks)
						if dt == "f32" {
							benchAllReduce[float32](b, g, size/4)
						} else {
							benchAllReduce[float64](b, g, size/8)
						}
					})
				}
			}
		}
	}
}

func benchAllReduce[T Float](b *testing.B, g *Group, n int) {
	data := make([][]T, g.Size())
	for r := range data {
		data[r] = make([]T, n)
		for i := range data[r] {
			data[r][i] = T(i % 17)
		}
	}
	l := startRankLoop(g, data, Sum)
	defer l.stop()
	ctx := context.Background()
	call := func() error { return AllReduce(ctx, g.Comm(0), data[0], Sum) }
	if err := l.step(call); err != nil {
		b.Fatal(err)
	}
	var z T
	bytes := int64(n) * int64(sizeOf(z))
	b.SetBytes(bytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := l.step(call); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	sec := b.Elapsed().Seconds() / float64(b.N)
	if sec > 0 {
		nr := float64(g.Size())
		algbw := float64(bytes) / sec / 1e9
		b.ReportMetric(algbw*2*(nr-1)/nr, "busbw-GB/s")
	}
}

func sizeOf[T Float](T) int { return dtypeOf[T]().Size() }
