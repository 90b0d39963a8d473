package collective

import (
	"context"
	"fmt"
	"golang.org/x/sys/unix"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/importcache"
)

// BenchmarkFreshSlice: the cost of an all-reduce (sum, in place) of a
// plain Go slice that is new on every call, as in a training loop that
// allocates new gradients each step ("fresh"), against the same loop
// reusing one slice per rank ("reused") and against the fresh slice staged
// with importing off ("staged": the copy through the rank's staging
// buffer). "fresh-import", on devices that import host memory, imports
// every fresh slice at its first call, as the import cache did before it
// waited for memory to come back (goimport.go). Every mode writes the slice
// before each call (the gradients); all but reused also allocate it
// (make), inside the timed loop, so the fresh/staged difference is the
// library's alone and fresh/reused adds Go's cost of a new allocation.
//
// Besides time it reports the process's CPU time per call (getrusage:
// user-ns/op, sys-ns/op, every rank and driver thread together), its minor
// page faults (minflt/op), the device buffers created (dev-allocs/op: an
// import is one) and the bytes copied through staging buffers
// (staged-B/op).
func BenchmarkFreshSlice(b *testing.B) {
	for _, bk := range backendsUnderTest(b) {
		// Auto is what a training loop gets; on a device Direct as well,
		// the strategy that reads and writes imported slices in place
		// (Auto picks the host reduction on a CPU driver).
		strats := []Strategy{Auto}
		if bk != "host" {
			strats = append(strats, Direct)
		}
		for _, ranks := range []int{2, 4, 8} {
			for _, size := range []int{4 << 20, 64 << 20} {
				for _, s := range strats {
					for _, mode := range []string{"fresh", "fresh-import", "reused", "staged"} {
						name := fmt.Sprintf("%s/ranks=%d/bytes=%d/%s/%s", bk, ranks, size, strings.ToLower(s.String()), mode)
						b.Run(name, func(b *testing.B) {
							switch mode {
							case "staged":
								was := SetImportCacheBytes(0)
								b.Cleanup(func() { SetImportCacheBytes(was) })
							case "fresh-import":
								was := importcache.SetImportAtFirstSightForTest(true)
								b.Cleanup(func() { importcache.SetImportAtFirstSightForTest(was) })
							}
							g := openGroup(b, bk, ranks, func(o *Options) { o.Validation = false })
							if ranks == 8 && (bk == "host" || g.infos[0].Type == "cpu") {
								b.Skip("8 ranks on a device only")
							}
							if _, ok := g.devs[0].(backend.Importer); mode == "fresh-import" && (bk == "host" || !ok || !g.infos[0].HostImport) {
								b.Skip("the device does not import host memory")
							}
							benchFreshSlice(b, g, size/4, s, mode != "reused")
						})
					}
				}
			}
		}
	}
}

func benchFreshSlice(b *testing.B, g *Group, n int, s Strategy, fresh bool) {
	kept := make([][]float32, g.Size())
	for r := range kept {
		kept[r] = make([]float32, n)
	}
	ctx := context.Background()
	l := loopRanks(g, func(c *Comm) error {
		x := kept[c.Rank()]
		if fresh {
			x = make([]float32, n)
		}
		v := float32(c.Rank() + 1)
		for i := range x {
			x[i] = v
		}
		return AllReduceWith(ctx, c, x, x, Sum, s)
	})
	defer l.stop()
	// Rank 0 runs in the benchmark's goroutine.
	var x0 []float32
	call := func() error {
		x0 = kept[0]
		if fresh {
			x0 = make([]float32, n)
		}
		for i := range x0 {
			x0[i] = 1
		}
		return AllReduceWith(ctx, g.Comm(0), x0, x0, Sum, s)
	}
	// Two untimed calls: a reused slice is imported on the second (the
	// first sighting of memory is staged: goimport.go).
	for range 2 {
		if err := l.step(call); err != nil {
			b.Fatal(err)
		}
	}
	if want := float32(g.Size() * (g.Size() + 1) / 2); x0[0] != want || x0[n-1] != want {
		b.Fatalf("result %v, %v; want %v", x0[0], x0[n-1], want)
	}
	devs := distinctCounters(g)
	before := make([]backend.CounterSnapshot, len(devs))
	for i, d := range devs {
		before[i] = d.Snapshot()
	}
	b.SetBytes(int64(n) * 4)
	ru0 := rusage(b)
	b.ResetTimer()
	for range b.N {
		if err := l.step(call); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	ru1 := rusage(b)
	var d backend.CounterSnapshot
	for i, dev := range devs {
		s := dev.Snapshot().Sub(before[i])
		d.Allocs += s.Allocs
		d.BytesWritten += s.BytesWritten
		d.BytesRead += s.BytesRead
	}
	per := func(x int64) float64 { return float64(x) / float64(b.N) }
	b.ReportMetric(per(tvNs(ru1.Utime)-tvNs(ru0.Utime)), "user-ns/op")
	b.ReportMetric(per(tvNs(ru1.Stime)-tvNs(ru0.Stime)), "sys-ns/op")
	b.ReportMetric(per(ru1.Minflt-ru0.Minflt), "minflt/op")
	b.ReportMetric(per(d.Allocs), "dev-allocs/op")
	b.ReportMetric(per(d.BytesWritten+d.BytesRead), "staged-B/op")
}

// distinctCounters is the counters of g's devices, each once (ranks may
// share a logical device).
func distinctCounters(g *Group) []*backend.Counters {
	var out []*backend.Counters
	seen := map[*backend.Counters]bool{}
	for _, d := range g.devs {
		if c := d.Counters(); !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

func rusage(b *testing.B) unix.Rusage {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru
}

func tvNs(t unix.Timeval) int64 { return t.Nano() }
