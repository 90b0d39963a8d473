package collective

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/gocoll/gocoll/internal/importcache"
)

// heapInuseAfterGC is runtime.MemStats.HeapInuse once the collector has
// freed what it can (two cycles: the first queues the cleanups).
func heapInuseAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	time.Sleep(10 * time.Millisecond) // let cleanups run
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// rankAllocs is each rank's device allocation count (an import is one).
func rankAllocs(g *Group) []int64 {
	out := make([]int64, g.Size())
	for r := range out {
		out[r] = g.counters(r).Allocs
	}
	return out
}

// A closed Group that stays reachable keeps none of the slices it saw
// alive: the slices (imported, as the device counters show) are collected
// after Close and two GC cycles, whichever collective saw them last.
func TestGoSliceImportReleasedAtClose(t *testing.T) {
	withImportMin(t, 64<<10)
	const ranks, n = 2, 64 << 10 // 256 KiB of float32 per rank
	// AllReduceAsync runs the configured strategy: one that imports.
	g := importerGroup(t, ranks, func(o *Options) { o.Config.Strategy = Pipelined })
	ctx := context.Background()
	calls := []struct {
		name string
		f    func(c *Comm, x []float32) error
	}{
		{"AllReduce/Direct", func(c *Comm, x []float32) error { return AllReduceWith(ctx, c, x, x, Sum, Direct) }},
		{"AllReduce/Pipelined", func(c *Comm, x []float32) error { return AllReduceWith(ctx, c, x, x, Sum, Pipelined) }},
		{"AllReduce/Ring", func(c *Comm, x []float32) error { return AllReduceWith(ctx, c, x, x, Sum, Ring) }},
		{"Broadcast", func(c *Comm, x []float32) error { return Broadcast(ctx, c, x, 1) }},
		{"ReduceScatter", func(c *Comm, x []float32) error { return ReduceScatter(ctx, c, x, x[c.Rank()*n/2:][:n/2], Sum) }},
		// AllGather of host slices in one process (Direct, its default)
		// copies rank to rank on the CPU: nothing to import.
		{"AllGather", func(c *Comm, x []float32) error { return AllGather(ctx, c, x[c.Rank()*n/2:][:n/2], x) }},
		{"AllToAll", func(c *Comm, x []float32) error {
			return AllToAll(ctx, c, x[:n/2], x[n/2:])
		}},
		{"AllReduceAsync", func(c *Comm, x []float32) error { return AllReduceAsync(ctx, c, x, Sum).Wait(ctx) }},
		{"BroadcastAsync", func(c *Comm, x []float32) error { return BroadcastAsync(ctx, c, x, 0).Wait(ctx) }},
	}
	var seen []weak.Pointer[float32]
	for _, call := range calls {
		xs := make([][]float32, ranks)
		for r := range xs {
			xs[r] = make([]float32, n)
			for i := range xs[r] {
				xs[r][i] = float32(r + 1)
			}
			seen = append(seen, weak.Make(&xs[r][0]))
		}
		// The first call sees each rank's slice (staged); the second
		// imports it (a device allocation); the third runs on the imports
		// (no staging copy on the direct all-reduce).
		noErrors(t, onRanks(g, func(c *Comm) error { return call.f(c, xs[c.Rank()]) }))
		before := rankAllocs(g)
		noErrors(t, onRanks(g, func(c *Comm) error { return call.f(c, xs[c.Rank()]) }))
		after := rankAllocs(g)
		for r := 0; r < ranks; r++ {
			if call.name == "AllGather" {
				if after[r] != before[r] || goEntryOf(asBytes(xs[r][:n/2])) != nil {
					t.Errorf("%s: rank %d imported its slice (%d device allocations)", call.name, r, after[r]-before[r])
				}
				continue
			}
			if after[r] == before[r] {
				t.Errorf("%s: rank %d imported nothing (no device allocation)", call.name, r)
			}
			if goEntryOf(asBytes(xs[r][:n/2])) == nil {
				t.Errorf("%s: rank %d's slice is not in the import cache", call.name, r)
			}
		}
		c0 := g.counters(0)
		noErrors(t, onRanks(g, func(c *Comm) error { return call.f(c, xs[c.Rank()]) }))
		if d := g.counters(0).Sub(c0); d.Allocs != 0 {
			t.Errorf("%s: the third call allocated %d device buffers: the import was not reused", call.name, d.Allocs)
		} else if call.name == "AllReduce/Direct" && (d.BytesWritten != 0 || d.BytesRead != 0) {
			t.Errorf("%s: the third call staged %+v", call.name, d)
		}
	}
	if ImportedBytes() == 0 {
		t.Fatal("ImportedBytes is 0 with the slices imported")
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if b := len(goEntriesOf(g)); b != 0 {
		t.Errorf("%d entries of the closed group left in the cache", b)
	}
	runtime.GC()
	runtime.GC()
	alive := 0
	for _, w := range seen {
		if w.Value() != nil {
			alive++
		}
	}
	if alive > 0 {
		t.Errorf("%d of %d slices the closed group saw are still alive after two GC cycles", alive, len(seen))
	}
	runtime.KeepAlive(g)
}

// keptByFreshSlices runs steps of two all-reduces (direct, in place, 2
// ranks) of a fresh slice per rank and step, window(k) of which is passed,
// under an import budget, and checks that each step's slices were imported
// (by the second all-reduce: the first sees them) and that the growth of
// the heap in use (after GC) plus the bytes the library reports imported
// stays within the budget.
func keptByFreshSlices(t *testing.T, what string, steps int, budget int64, window func() []float32) {
	const ranks = 2
	withImportBudget(t, budget)
	g := importerGroup(t, ranks)
	ctx := context.Background()
	step := func(k int) {
		noErrors(t, onRanks(g, func(c *Comm) error {
			w := window()
			for i := range w {
				w[i] = float32(c.Rank() + k)
			}
			for range 2 {
				if err := AllReduceWith(ctx, c, w, w, Sum, Direct); err != nil {
					return err
				}
			}
			if want := float32(2 * (1 + 2*k)); w[0] != want || w[len(w)-1] != want {
				return fmt.Errorf("step %d: %v, %v, want %v", k, w[0], w[len(w)-1], want)
			}
			return nil
		}))
	}
	step(0) // the group's own buffers
	base := heapInuseAfterGC()
	before := rankAllocs(g)
	for k := 1; k <= steps; k++ {
		step(k)
		if b := ImportedBytes(); b > budget {
			t.Fatalf("step %d: %d bytes imported, budget %d", k, b, budget)
		}
	}
	after := rankAllocs(g)
	grown := heapInuseAfterGC() - base
	imported := ImportedBytes()
	t.Logf("%d steps of %s on %d ranks: heap in use grew %.1f MiB, %.1f MiB imported (budget %d MiB); rank 0: %d imports",
		steps, what, ranks, float64(grown)/(1<<20), float64(imported)/(1<<20), budget>>20, after[0]-before[0])
	for r := range after {
		if after[r]-before[r] < int64(steps) {
			t.Errorf("rank %d: %d device allocations in %d steps: the slices were not imported", r, after[r]-before[r], steps)
		}
	}
	if grown+imported > budget+(2<<20) {
		t.Errorf("kept alive: heap growth %d + imported %d bytes > budget %d", grown, imported, budget)
	}
}

// A training loop that allocates a fresh gradient each step and reduces it
// twice keeps at most the import budget alive, while every step's
// gradients are imported: 40 steps, 10 times the budget; 12 steps (3 times
// the budget) in the race run, where the element loops take most of the
// test's time and the synchronisation is that of any step.
func TestGoSliceImportFreshGradients(t *testing.T) {
	const n = 2 << 20 // 8 MiB of float32
	steps := 40
	if raceShort() {
		steps = 12
	}
	keptByFreshSlices(t, "fresh 8 MiB gradients", steps, 32<<20, func() []float32 { return make([]float32, n) })
}

// Windows at the end of large fresh arrays keep at most the budget alive:
// the import covers the window, and the array is not kept.
func TestGoSliceImportTailWindows(t *testing.T) {
	const whole, win = 16 << 20, 1 << 20 // 64 MiB arrays, 4 MiB windows
	keptByFreshSlices(t, "4 MiB windows of fresh 64 MiB arrays", 8, 16<<20, func() []float32 {
		return make([]float32, whole)[whole-win:]
	})
}

// An entry or a sighting whose object died never serves another object,
// even one at the same addresses: the new object's first call is staged,
// its second gets an import of its own, results exact.
func TestGoSliceImportRecycledAddress(t *testing.T) {
	withImportMin(t, 64<<10)
	const ranks, n = 2, 64 << 10
	g := importerGroup(t, ranks)
	ctx := context.Background()
	run := func(xs [][]float32, v float32) {
		for r := range xs {
			for i := range xs[r] {
				xs[r][i] = v + float32(r)
			}
		}
		noErrors(t, onRanks(g, func(c *Comm) error {
			return AllReduceWith(ctx, c, xs[c.Rank()], xs[c.Rank()], Sum, Direct)
		}))
		for r := range xs {
			for i, x := range xs[r] {
				if x != 2*v+1 {
					t.Fatalf("rank %d element %d: %v, want %v", r, i, x, 2*v+1)
				}
			}
		}
	}
	fresh := func() [][]float32 { return [][]float32{make([]float32, n), make([]float32, n)} }
	xs := fresh()
	run(xs, 1)
	run(xs, 2)
	old := goEntryOf(asBytes(xs[0]))
	addr := uintptr(unsafe.Pointer(&xs[0][0]))
	if old == nil {
		t.Fatal("not imported")
	}
	xs = nil
	runtime.GC()
	runtime.GC()
	// Allocate until a slice lands at the dead one's address, keeping the
	// others so the allocator moves on.
	var keep [][]float32
	var again [][]float32
	for i := 0; i < 2000 && again == nil; i++ {
		y := make([]float32, n)
		if uintptr(unsafe.Pointer(&y[0])) == addr {
			again = [][]float32{y, make([]float32, n)}
		} else {
			keep = append(keep, y)
		}
	}
	runtime.KeepAlive(keep)
	if again == nil {
		t.Skip("the allocator did not reuse the address")
	}
	before := g.counters(0)
	run(again, 5)
	if d := g.counters(0).Sub(before); d.Allocs != 0 || d.BytesWritten == 0 {
		t.Errorf("the new object at the dead one's address was not staged at its first sighting (%+v)", d)
	}
	if e := goEntryOf(asBytes(again[0])); e != nil {
		t.Errorf("entry %p for the new object after its first sighting (the dead one's was %p)", e, old)
	}
	before = g.counters(0)
	run(again, 7)
	if d := g.counters(0).Sub(before); d.Allocs == 0 {
		t.Error("the new object was not imported at its second sighting")
	}
	if e := goEntryOf(asBytes(again[0])); e == nil || e == old {
		t.Errorf("entry %p for the new object, the dead one's was %p", e, old)
	}
	run(again, 9)
}

// The budget is the process's: groups and Split sub-groups together stay
// within it, and every result is exact.
func TestGoSliceImportBudgetAcrossGroups(t *testing.T) {
	withImportMin(t, 64<<10)
	const ranks, n = 2, 96 << 10 // 384 KiB per slice
	const budget = 1 << 20
	withImportBudget(t, budget)
	g1 := importerGroup(t, ranks)
	g2 := importerGroup(t, ranks)
	ctx := context.Background()
	subs := make([]*Comm, ranks)
	noErrors(t, onRanks(g1, func(c *Comm) error {
		s, err := c.Split(ctx, 0, c.Rank())
		subs[c.Rank()] = s
		return err
	}))
	t.Cleanup(func() { subs[0].Group().Close() })
	comms := func(i int) func(r int) *Comm {
		switch i % 3 {
		case 0:
			return g1.Comm
		case 1:
			return g2.Comm
		}
		return func(r int) *Comm { return subs[r] }
	}
	imported := 0
	for round := 0; round < 9; round++ {
		get := comms(round)
		xs := [][]float32{make([]float32, n), make([]float32, n)}
		for r := range xs {
			for i := range xs[r] {
				xs[r][i] = float32(r + round)
			}
		}
		// Twice: the second call imports.
		for range 2 {
			errs := make([]error, ranks)
			done := make(chan int)
			for r := 0; r < ranks; r++ {
				go func(r int) {
					errs[r] = AllReduceWith(ctx, get(r), xs[r], xs[r], Sum, Direct)
					done <- r
				}(r)
			}
			for range ranks {
				<-done
			}
			noErrors(t, errs)
		}
		for r := range xs {
			if want := float32(2 * (1 + 2*round)); xs[r][0] != want || xs[r][n-1] != want {
				t.Fatalf("round %d rank %d: %v, want %v", round, r, xs[r][0], want)
			}
			if goEntryOf(asBytes(xs[r])) != nil {
				imported++
			}
		}
		if b := ImportedBytes(); b > budget {
			t.Fatalf("round %d: %d bytes imported, budget %d", round, b, budget)
		}
	}
	if imported == 0 {
		t.Fatal("nothing imported")
	}
}

// SetImportCacheBytes restoring GOCOLL_IMPORT_CACHE's value.
func TestImportCacheBytesSetting(t *testing.T) {
	was := SetImportCacheBytes(123 << 20)
	defer SetImportCacheBytes(was)
	t.Setenv("GOCOLL_IMPORT_CACHE", "96M")
	if prev := SetImportCacheBytes(-1); prev != 123<<20 {
		t.Errorf("SetImportCacheBytes returned %d, want the previous budget %d", prev, 123<<20)
	}
	if b := importcache.Budget(); b != 96<<20 {
		t.Errorf("budget %d after restoring the default with GOCOLL_IMPORT_CACHE=96M", b)
	}
	t.Setenv("GOCOLL_IMPORT_CACHE", "")
	SetImportCacheBytes(-1)
	if b := importcache.Budget(); b != importcache.DefaultBudget {
		t.Errorf("default budget %d, want %d", b, int64(importcache.DefaultBudget))
	}
}

// A budget of 0 stages every slice; lowering the budget closes the imports
// no call uses at once.
func TestGoSliceImportBudgetLowered(t *testing.T) {
	withImportMin(t, 64<<10)
	const ranks, n = 2, 64 << 10
	withImportBudget(t, 64<<20)
	g := importerGroup(t, ranks)
	xs := [][]float32{make([]float32, n), make([]float32, n)}
	for range 2 { // the second call imports
		noErrors(t, onRanks(g, func(c *Comm) error {
			return AllReduceWith(context.Background(), c, xs[c.Rank()], xs[c.Rank()], Sum, Direct)
		}))
	}
	if goEntryOf(asBytes(xs[0])) == nil {
		t.Fatal("not imported")
	}
	SetImportCacheBytes(0)
	if b := ImportedBytes(); b != 0 || goEntryOf(asBytes(xs[0])) != nil {
		t.Fatalf("%d bytes imported after the budget went to 0", b)
	}
	ys := [][]float32{make([]float32, n), make([]float32, n)}
	before := g.counters(0)
	noErrors(t, onRanks(g, func(c *Comm) error {
		return AllReduceWith(context.Background(), c, ys[c.Rank()], ys[c.Rank()], Sum, Direct)
	}))
	if d := g.counters(0).Sub(before); d.BytesWritten == 0 || goEntryOf(asBytes(ys[0])) != nil {
		t.Fatalf("budget 0: imported (%+v)", d)
	}
}

// A reused imported slice allocates nothing per call, on every strategy.
func TestGoSliceImportZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	withImportMin(t, 64<<10)
	g := importerGroup(t, 2)
	for _, s := range allStrategies {
		if a := measureAllocsWith[float32](t, g, 64<<10, s); a != 0 {
			t.Errorf("%s: %v allocations per AllReduce of an imported slice, want 0", s, a)
		}
	}
	if ImportedBytes() == 0 {
		t.Error("nothing imported")
	}
}
