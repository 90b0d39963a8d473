package hostmath

import (
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// BenchmarkCombine: acc += x of float32 and float64 (the packed loops on
// amd64), 1 MiB a call (in the L2 cache of most machines) and 64 MiB
// (memory). SetBytes is acc's bytes.
func BenchmarkCombine(b *testing.B) {
	for _, size := range []int{1 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("f32/bytes=%d", size), func(b *testing.B) {
			acc, x := make([]float32, size/4), make([]float32, size/4)
			b.SetBytes(int64(size))
			for b.Loop() {
				Combine(backend.Sum, acc, x)
			}
		})
		b.Run(fmt.Sprintf("f64/bytes=%d", size), func(b *testing.B) {
			acc, x := make([]float64, size/8), make([]float64, size/8)
			b.SetBytes(int64(size))
			for b.Loop() {
				Combine(backend.Sum, acc, x)
			}
		})
	}
}

// BenchmarkReduceMulti: the one-process CPU pass of a rank's slice, float32
// sum of 4 sources into 1 and 4 destinations, serial (parreduce.Reduce
// capped at 1) and over the worker pool. SetBytes is one destination's
// bytes.
func BenchmarkReduceMulti(b *testing.B) {
	const size = 4 << 20
	srcs := make([][]byte, 4)
	for i := range srcs {
		srcs[i] = make([]byte, size)
	}
	for _, nd := range []int{1, 4} {
		dsts := make([][]byte, nd)
		for i := range dsts {
			dsts[i] = make([]byte, size)
		}
		for _, workers := range []int{1, 0} {
			b.Run(fmt.Sprintf("dsts=%d/workers=%d", nd, workers), func(b *testing.B) {
				defer parreduce.Reduce.Set(parreduce.Reduce.Set(workers))
				b.SetBytes(size)
				for b.Loop() {
					ReduceMulti(backend.F32, backend.Sum, dsts, srcs, size/4, 1)
				}
			})
		}
	}
}
