package collective

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/steps"
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

func benchAllReduce[T convElem](b *testing.B, g *Group, n int) {
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
	for range 2 { // a large plain slice is imported at its second call
		if err := l.step(call); err != nil {
			b.Fatal(err)
		}
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

func sizeOf[T Elem](T) int { return dtypeOf[T]().Size() }

// BenchmarkElementTypes: a 4-rank all-reduce (sum) of each element type, the
// same bytes per call; on a GPU backend the types without kernels take the
// exact host path.
func BenchmarkElementTypes(b *testing.B) {
	for _, bk := range backendsUnderTest(b) {
		for _, size := range []int{256 << 10, 16 << 20} {
			for _, tc := range []struct {
				name string
				run  func(*testing.B, *Group, int)
			}{
				{"float", func(b *testing.B, g *Group, size int) { benchAllReduce[float32](b, g, size/4) }},
				{"int32", func(b *testing.B, g *Group, size int) { benchAllReduce[int32](b, g, size/4) }},
				{"int64", func(b *testing.B, g *Group, size int) { benchAllReduce[int64](b, g, size/8) }},
				{"uint8", func(b *testing.B, g *Group, size int) { benchAllReduce[uint8](b, g, size) }},
				{"half", func(b *testing.B, g *Group, size int) { benchAllReduce[Float16](b, g, size/2) }},
				{"bfloat16", func(b *testing.B, g *Group, size int) { benchAllReduce[BFloat16](b, g, size/2) }},
			} {
				b.Run(fmt.Sprintf("%s/%s/bytes=%d", bk, tc.name, size), func(b *testing.B) {
					tc.run(b, openGroup(b, bk, 4), size)
				})
			}
		}
	}
}

// BenchmarkStrategies compares the all-reduce strategies on 4 ranks.
func BenchmarkStrategies(b *testing.B) {
	for _, bk := range backendsUnderTest(b) {
		for _, s := range allStrategies {
			for _, size := range []int{64 << 10, 4 << 20, 32 << 20} {
				b.Run(fmt.Sprintf("%s/%s/bytes=%d", bk, s, size), func(b *testing.B) {
					g := openGroup(b, bk, 4, func(o *Options) { o.Config.LocalGroupSize = 2 })
					n := size / 4
					data := make([][]float32, g.Size())
					for r := range data {
						data[r] = make([]float32, n)
					}
					l := startRankLoopWith(g, data, Sum, s)
					defer l.stop()
					ctx := context.Background()
					call := func() error { return AllReduceWith(ctx, g.Comm(0), data[0], data[0], Sum, s) }
					benchLoop(b, l, call, int64(size), 2*3.0/4)
				})
			}
		}
	}
}

// BenchmarkCollectives measures the other collectives on 4 ranks (bytes =
// the full buffer: send of ReduceScatter, recv of AllGather, the data of
// Broadcast and Reduce), from plain Go slices (imported in place from 4 MiB
// up where the device imports host memory).
func BenchmarkCollectives(b *testing.B) {
	for _, bk := range backendsUnderTest(b) {
		for _, coll := range []string{"ReduceScatter", "AllGather", "Broadcast", "Reduce", "AllToAll", "Gather", "Scatter",
			"AllToAllV", "AllGatherV", "ReduceScatterV"} {
			for _, size := range []int{64 << 10, 4 << 20, 64 << 20} {
				b.Run(fmt.Sprintf("%s/%s/bytes=%d", bk, coll, size), func(b *testing.B) {
					g := openGroup(b, bk, 4, benchOptions(b))
					n := size / 4
					full := make([][]float32, 4)
					part := make([][]float32, 4)
					out := make([][]float32, 4)
					for r := range full {
						full[r] = make([]float32, n)
						part[r] = make([]float32, n/4)
						out[r] = make([]float32, n)
					}
					m := n / 4
					cnt, dsp := []int{m, m, m, m}, []int{0, m, 2 * m, 3 * m}
					run := benchCollCall(coll, full, part, out, cnt, dsp)
					l := loopRanks(g, run)
					defer l.stop()
					factor := map[string]float64{"ReduceScatter": 3.0 / 4, "AllGather": 3.0 / 4, "Broadcast": 1, "Reduce": 1,
						"AllToAll": 3.0 / 4, "Gather": 3.0 / 4, "Scatter": 3.0 / 4,
						"AllToAllV": 3.0 / 4, "AllGatherV": 3.0 / 4, "ReduceScatterV": 3.0 / 4}[coll]
					benchLoop(b, l, func() error { return run(g.Comm(0)) }, int64(size), factor)
				})
			}
		}
	}
}

// benchCollCall returns a rank's call of collective coll (or SendRecv
// along a ring) over the benchmarks' buffers: full and out of N*m elements,
// part of m, cnt and dsp the V forms' equal counts.
func benchCollCall(coll string, full, part, out [][]float32, cnt, dsp []int) func(c *Comm) error {
	return func(c *Comm) error {
		ctx := context.Background()
		r, N := c.Rank(), c.Size()
		switch coll {
		case "AllReduce":
			return AllReduce(ctx, c, full[r], Sum)
		case "SendRecv":
			return SendRecv(ctx, c, full[r], (r+1)%N, out[r], (r+N-1)%N)
		case "AllToAllV":
			return AllToAllV(ctx, c, full[r], cnt, dsp, out[r], cnt, dsp)
		case "AllGatherV":
			return AllGatherV(ctx, c, part[r], full[r], cnt, dsp)
		case "ReduceScatterV":
			return ReduceScatterV(ctx, c, full[r], part[r], cnt, dsp, Sum)
		case "ReduceScatter":
			return ReduceScatter(ctx, c, full[r], part[r], Sum)
		case "AllGather":
			return AllGather(ctx, c, part[r], full[r])
		case "Broadcast":
			return Broadcast(ctx, c, full[r], 0)
		case "AllToAll":
			return AllToAll(ctx, c, full[r], out[r])
		case "Gather":
			return Gather(ctx, c, part[r], full[r], 0)
		case "Scatter":
			return Scatter(ctx, c, full[r], part[r], 0)
		case "GatherV":
			return GatherV(ctx, c, part[r], full[r], cnt, dsp, 0)
		case "ScatterV":
			return ScatterV(ctx, c, full[r], part[r], cnt, dsp, 0)
		}
		return Reduce(ctx, c, full[r], full[r], Sum, 0)
	}
}

// loopRanks starts ranks 1.. of g, each running run once per step of the
// returned loop (rank 0's call is the step's).
func loopRanks(g *Group, run func(c *Comm) error) *rankLoop {
	l := &rankLoop{g: g, done: make(chan error, g.Size())}
	for r := 1; r < g.Size(); r++ {
		ch := make(chan struct{})
		l.go_ = append(l.go_, ch)
		go func(r int, ch chan struct{}) {
			for range ch {
				l.done <- run(g.Comm(r))
			}
		}(r, ch)
	}
	return l
}

// benchLoop times steps of l, reporting algbw through SetBytes and busbw
// (algbw * factor) as a metric.
func benchLoop(b *testing.B, l *rankLoop, call func() error, bytes int64, factor float64) {
	for range 2 { // a large plain slice is imported at its second call
		if err := l.step(call); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(bytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := l.step(call); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if sec := b.Elapsed().Seconds() / float64(b.N); sec > 0 {
		b.ReportMetric(float64(bytes)/sec/1e9*factor, "busbw-GB/s")
	}
}

// BenchmarkTensorLatency splits the latency of a small device-resident
// all-reduce of 2 ranks sharing one logical device: "allreduce" is the
// whole call (both ranks), "gpu-multi" the leader's GPU work alone (one
// multi-destination reduce over both tensors, submit, fence wait) and
// "gpu-reduce" the same with a plain reduce into one tensor, so the
// differences are the rendezvous and the kernel. "per-rank" runs the GPU
// parts on a group with a logical device per rank.
func BenchmarkTensorLatency(b *testing.B) {
	for _, bk := range backendsUnderTest(b) {
		for _, perRank := range []bool{false, true} {
			name := bk
			if perRank {
				name += "/per-rank"
			}
			b.Run(name, func(b *testing.B) { benchTensorLatency(b, bk, perRank) })
		}
	}
}

func benchTensorLatency(b *testing.B, bk string, perRank bool) {
	g := openGroup(b, bk, 2, func(o *Options) { o.Validation = false; o.DevicePerRank = perRank })
	const n = 1024
	ts := make([]*Tensor[float32], 2)
	for r := range ts {
		t, err := NewTensor[float32](g.Comm(r), n)
		if err != nil {
			b.Fatal(err)
		}
		defer t.Close()
		ts[r] = t
	}
	ctx := context.Background()
	if !perRank {
		b.Run("allreduce", func(b *testing.B) {
			done := make(chan error, 1)
			go func() {
				for i := 0; i < b.N; i++ {
					if err := AllReduceTensor(ctx, g.Comm(1), ts[1], Sum, Direct); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			for i := 0; i < b.N; i++ {
				if err := AllReduceTensor(ctx, g.Comm(0), ts[0], Sum, Direct); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
	c := g.Comm(0)
	st := c.dev.Stream()
	own := backend.Region{Buf: ts[0].buf, Off: ts[0].off, Len: 4 * n}
	regs := []backend.Region{own, {Buf: ts[1].buf, Off: ts[1].off, Len: 4 * n}}
	if perRank {
		regs = regs[:1]
	}
	gpu := func(b *testing.B, record func() error) {
		for i := 0; i < b.N; i++ {
			if err := record(); err != nil {
				b.Fatal(err)
			}
			f, err := st.Submit()
			if err != nil {
				b.Fatal(err)
			}
			if err := f.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if m, ok := st.(backend.MultiReducer); ok {
		b.Run("gpu-multi", func(b *testing.B) {
			gpu(b, func() error { return m.ReduceMulti(backend.Sum, backend.F32, regs, regs, 1) })
		})
	}
	b.Run("gpu-reduce", func(b *testing.B) {
		gpu(b, func() error { return st.Reduce(backend.Sum, backend.F32, own, regs, 1) })
	})
	b.Run("gpu-scale", func(b *testing.B) {
		gpu(b, func() error { return st.Scale(backend.F32, own, own, 1) })
	})
}

// benchOptions lets a benchmark run compare layouts without a rebuild:
// GOCOLL_BENCH_CHUNK (bytes, e.g. 1048576) sets Options.ChunkBytes and
// GOCOLL_BENCH_FUSE=off turns the fused ring and tree steps off;
// GOCOLL_BENCH_IMPORT=off stages every plain slice (Options.ImportCacheBytes
// negative).
func benchOptions(b *testing.B) func(*Options) {
	chunk, _ := strconv.Atoi(os.Getenv("GOCOLL_BENCH_CHUNK"))
	noImport := os.Getenv("GOCOLL_BENCH_IMPORT") == "off"
	if os.Getenv("GOCOLL_BENCH_FUSE") == "off" {
		steps.FuseOff = true
		b.Cleanup(func() { steps.FuseOff = false })
	}
	return func(o *Options) {
		if chunk > 0 {
			o.ChunkBytes = chunk
		}
		if noImport {
			o.ImportCacheBytes = -1
		}
	}
}
