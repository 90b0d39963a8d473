package collective

import "testing"

// BenchmarkSmallHost: every collective and SendRecv at 4 KiB per rank on
// the host backend, 4 ranks: the per-call overhead of the entry points
// (argument checks, memory resolution, fingerprints), where the data moved
// is negligible. Compare versions with benchstat.
func BenchmarkSmallHost(b *testing.B) {
	const ranks, size = 4, 4 << 10
	n := size / 4
	m := n / ranks
	for _, coll := range []string{"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce", "AllToAll", "Gather",
		"Scatter", "AllToAllV", "AllGatherV", "ReduceScatterV", "GatherV", "ScatterV", "SendRecv"} {
		b.Run(coll, func(b *testing.B) {
			g := openGroup(b, "host", ranks)
			full, part, out := make([][]float32, ranks), make([][]float32, ranks), make([][]float32, ranks)
			for r := range full {
				full[r], part[r], out[r] = make([]float32, n), make([]float32, m), make([]float32, n)
			}
			cnt, dsp := []int{m, m, m, m}, []int{0, m, 2 * m, 3 * m}
			run := benchCollCall(coll, full, part, out, cnt, dsp)
			l := loopRanks(g, run)
			defer l.stop()
			benchLoop(b, l, func() error { return run(g.Comm(0)) }, size, 1)
		})
	}
}
