package collective

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/faultinject"
	"github.com/gocoll/gocoll/internal/importcache"
)

// importerGroup opens a vulkan group whose devices import host memory, or
// skips.
func importerGroup(t testing.TB, ranks int, mod ...func(*Options)) *Group {
	t.Helper()
	vk := false
	for _, bk := range backendsUnderTest(t) {
		vk = vk || bk == "vulkan"
	}
	if !vk {
		t.Skip("vulkan unavailable")
	}
	g := openGroup(t, "vulkan", ranks, mod...)
	if _, ok := g.devs[0].(backend.Importer); !ok || !importcache.DeviceImports(g.devs[0], g.infos[0].HostImport) {
		t.Skip("the device does not import host memory")
	}
	return g
}

func withImportMin(t *testing.T, n int) {
	was := importcache.SetMinBytesForTest(n)
	t.Cleanup(func() { importcache.SetMinBytesForTest(was) })
}

// withImportAtFirstSight imports slices the first time their object is
// seen, for the test.
func withImportAtFirstSight(t *testing.T) {
	was := importcache.SetImportAtFirstSightForTest(true)
	t.Cleanup(func() { importcache.SetImportAtFirstSightForTest(was) })
}

// withImportBudget sets the process's import budget for the test.
func withImportBudget(t *testing.T, n int64) {
	was := SetImportCacheBytes(n)
	t.Cleanup(func() { SetImportCacheBytes(was) })
}

// goEntryOf returns the live import entry that holds b, or nil.
func goEntryOf(b []byte) *importcache.Entry { return importcache.Lookup(b) }

// goBytesOf returns the bytes of the live entries c imported, and how many.
func goBytesOf(c *Comm) (bytes int64, n int) { return c.goImp.Imported() }

// importGroup is g's side of the import cache.
func importGroup(g *Group) *importcache.Group { return g.comms[0].goImp.Group() }

// goEntriesOf returns the live entries ranks of g imported.
func goEntriesOf(g *Group) []*importcache.Entry { return importGroup(g).Entries() }

// Large plain slices are staged on first use, imported on the second, and
// then read and written in place by every strategy: exact results, no
// staging bytes on the direct paths once imported, the same import on later
// calls, updated data seen.
func TestGoSliceImport(t *testing.T) {
	withImportMin(t, 64<<10)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, ranks := range []int{2, 3} {
		g := importerGroup(t, ranks, func(o *Options) { o.ChunkBytes = 64 << 10 })
		for _, s := range []Strategy{Direct, Pipelined, Ring, Tree, Hierarchical, Auto} {
			for _, inPlace := range []bool{false, true} {
				n := 16<<10 + rng.IntN(64<<10)
				if rng.IntN(3) == 0 {
					n = 16<<10 + rng.IntN(3) // just over the import minimum
				}
				name := fmt.Sprintf("%d/%s/n=%d/inplace=%v", ranks, s, n, inPlace)
				t.Run(name, func(t *testing.T) {
					send := make([][]float32, ranks)
					recv := make([][]float32, ranks)
					for r := range send {
						// A sub-slice at an odd element offset: the import is
						// rounded out to pages inside the object.
						off := rng.IntN(1000)
						send[r] = make([]float32, n+off)[off:]
						recv[r] = send[r]
						if !inPlace {
							recv[r] = make([]float32, n)
						}
					}
					for round := 0; round < 3; round++ {
						inputs := make([][]float64, ranks)
						for r := range inputs {
							inputs[r] = make([]float64, n)
							for i := range inputs[r] {
								inputs[r][i] = float64(rng.IntN(2001) - 1000)
								send[r][i] = float32(inputs[r][i])
							}
						}
						before := g.counters(0)
						noErrors(t, onRanks(g, func(c *Comm) error {
							return AllReduceWith(context.Background(), c, send[c.Rank()], recv[c.Rank()], Sum, s)
						}))
						d := g.counters(0).Sub(before)
						checkResult(t, recv, refReduce(inputs, Sum), Sum, 0)
						for r := 0; r < ranks; r++ {
							if g.Comm(r).strat == Host {
								break // Auto reduced on the CPU: nothing to import
							}
							imported := goEntryOf(asBytes(send[r])) != nil && goEntryOf(asBytes(recv[r])) != nil
							if round == 0 && goEntryOf(asBytes(send[r])) != nil {
								t.Fatalf("round 0: rank %d's slice imported at its first sighting", r)
							}
							if round > 0 && !imported {
								t.Fatalf("round %d: rank %d's slices not imported", round, r)
							}
						}
						if round > 1 && d.Allocs != 0 {
							t.Errorf("round %d: %d device allocations: the import was not reused", round, d.Allocs)
						}
						if round > 0 && (s == Direct || s == Pipelined) && (d.BytesWritten != 0 || d.BytesRead != 0) {
							t.Errorf("round %d: imported slices staged: %+v", round, d)
						}
					}
				})
			}
		}
	}
}

// The imports stay within the process's budget, and within a group's own
// bound (the deprecated Options.ImportCacheBytes): older slices are evicted
// (their imports closed) as new ones come, and every result stays exact.
func TestGoSliceImportEviction(t *testing.T) {
	withImportMin(t, 64<<10)
	const ranks, n = 2, 400 << 10 // 1.6 MB per slice
	for _, groupBound := range []bool{false, true} {
		t.Run(fmt.Sprintf("groupBound=%v", groupBound), func(t *testing.T) {
			var g *Group
			if groupBound {
				withImportBudget(t, 1<<30)
				g = importerGroup(t, ranks, func(o *Options) { o.ImportCacheBytes = 4 << 20 })
			} else {
				withImportBudget(t, 4<<20)
				g = importerGroup(t, ranks)
			}
			bufs := make([][][]float32, 5)
			for i := range bufs {
				bufs[i] = make([][]float32, ranks)
				for r := range bufs[i] {
					bufs[i][r] = make([]float32, n)
				}
			}
			for round := 0; round < 12; round++ {
				b := bufs[(round*3)%len(bufs)]
				for r := range b {
					for i := range b[r] {
						b[r][i] = float32(r + i%7 + round)
					}
				}
				noErrors(t, onRanks(g, func(c *Comm) error {
					return AllReduceWith(context.Background(), c, b[c.Rank()], b[c.Rank()], Sum, Direct)
				}))
				for r := range b {
					for i, v := range b[r] {
						if want := float32(1 + 2*(i%7+round)); v != want {
							t.Fatalf("round %d rank %d element %d: %v, want %v", round, r, i, v, want)
						}
					}
				}
				var sum int64
				for _, e := range goEntriesOf(g) {
					sum += e.Size()
				}
				// Rounds 0-4 see each set for the first time: staged.
				first := round < len(bufs)
				if sum > 4<<20 || (sum == 0) != first {
					t.Fatalf("round %d: the group's entries hold %d bytes (bound 4 MiB; first sightings: %v)", round, sum, first)
				}
				if !groupBound && ImportedBytes() > 4<<20 {
					t.Fatalf("round %d: %d bytes imported (budget 4 MiB)", round, ImportedBytes())
				}
				for r := 0; r < ranks; r++ {
					if _, k := goBytesOf(g.Comm(r)); k > 2 || (k == 0) != first {
						t.Fatalf("round %d rank %d: %d imports", round, r, k)
					}
				}
			}
		})
	}
}

// Memory outside the Go heap is never imported (it could be unmapped and its
// address reused under the import), Go globals neither; their results are
// exact through the staging path. Importing off (ImportCacheBytes < 0)
// stages everything.
func TestGoSliceImportOnlyGoHeap(t *testing.T) {
	withImportMin(t, 64<<10)
	const ranks, n = 2, 64 << 10
	g := importerGroup(t, ranks)
	mm := make([][]float32, ranks)
	for r := range mm {
		b, err := unix.Mmap(-1, 0, n*4, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			t.Skip("no mmap:", err)
		}
		defer unix.Munmap(b)
		mm[r] = unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
	}
	for i := range n {
		mm[0][i], mm[1][i] = float32(i%100), 1
		globalSlab[0][i], globalSlab[1][i] = float32(i%50), 2
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		if err := AllReduceWith(context.Background(), c, mm[c.Rank()], mm[c.Rank()], Sum, Direct); err != nil {
			return err
		}
		return AllReduceWith(context.Background(), c, globalSlab[c.Rank()][:], globalSlab[c.Rank()][:], Sum, Direct)
	}))
	for i := range n {
		if mm[1][i] != float32(i%100+1) || globalSlab[0][i] != float32(i%50+2) {
			t.Fatalf("element %d: %v, %v", i, mm[1][i], globalSlab[0][i])
		}
	}
	for r := 0; r < ranks; r++ {
		if b, _ := goBytesOf(g.Comm(r)); b != 0 {
			t.Fatalf("rank %d imported %d bytes of memory outside the Go heap", r, b)
		}
	}
	// The probe allocates: a slice found outside the Go heap is remembered,
	// so later calls on it allocate nothing.
	c0 := g.Comm(0)
	mb := asBytes(mm[0])
	if c0.goImp.Adopt(mb) {
		t.Fatal("mmap memory adopted")
	}
	if a := testing.AllocsPerRun(20, func() { c0.goImp.Adopt(mb) }); a != 0 {
		t.Errorf("adopt of known non-heap memory: %v allocations", a)
	}
	if importcache.InGoHeap(unsafe.Pointer(&mm[0][0])) || importcache.InGoHeap(unsafe.Pointer(&globalSlab[0][0])) {
		t.Fatal("InGoHeap accepted mmap memory or a global")
	}
	if x := make([]byte, 1<<20); !importcache.InGoHeap(unsafe.Pointer(&x[12345])) {
		t.Fatal("InGoHeap refused an interior pointer of a heap object")
	}

	off := importerGroup(t, ranks, func(o *Options) { o.ImportCacheBytes = -1 })
	data := [][]float32{make([]float32, n), make([]float32, n)}
	noErrors(t, onRanks(off, func(c *Comm) error {
		return AllReduceWith(context.Background(), c, data[c.Rank()], data[c.Rank()], Sum, Direct)
	}))
	for r := 0; r < ranks; r++ {
		if b, _ := goBytesOf(off.Comm(r)); b != 0 {
			t.Fatalf("importing off: rank %d imported %d bytes", r, b)
		}
	}
	if _, err := NewGroup(context.Background(), Options{Ranks: 1, Backend: "host", ImportCacheBytes: 1 << 20}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("ImportCacheBytes 1 MiB: %v, want ErrInvalidConfig", err)
	}
}

var globalSlab [2][64 << 10]float32

// Send and recv in one object, overlapping imports, and the group's Close
// releasing every import: the entries leave the pinned set and are unpinned.
func TestGoSliceImportOverlapAndClose(t *testing.T) {
	withImportMin(t, 64<<10)
	const ranks, n = 2, 40 << 10
	g := importerGroup(t, ranks)
	objs := [][]float32{make([]float32, 3*n), make([]float32, 3*n)}
	for step, f := range []func(x []float32) (send, recv []float32){
		func(x []float32) ([]float32, []float32) { return x[:n], x[n : 2*n] },
		func(x []float32) ([]float32, []float32) { return x[2*n : 3*n : 3*n], x[:n] },
		func(x []float32) ([]float32, []float32) { return x[n/2 : n/2+n], x[n/2+n : n/2+2*n] },
		func(x []float32) ([]float32, []float32) { return x[:n:n], x[:n:n] },
	} {
		for r := range objs {
			for i := range objs[r] {
				objs[r][i] = float32(r*3 + i%11)
			}
		}
		noErrors(t, onRanks(g, func(c *Comm) error {
			s, d := f(objs[c.Rank()])
			return AllReduceWith(context.Background(), c, s, d, Sum, Pipelined)
		}))
		for r := range objs {
			s, d := f(objs[r])
			for i := range d {
				want := float32(3)
				if &s[0] == &d[0] {
					want += 2 * float32(i%11)
				} else {
					si := int(uintptr(unsafe.Pointer(&s[i]))-uintptr(unsafe.Pointer(&objs[r][0]))) / 4
					want += 2 * float32(si%11)
				}
				if d[i] != want {
					t.Fatalf("step %d rank %d element %d: %v, want %v", step, r, i, d[i], want)
				}
			}
		}
	}
	owned := goEntriesOf(g)
	if len(owned) == 0 {
		t.Fatal("nothing imported")
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for _, e := range owned {
		if !e.Closed() {
			t.Error("an imported slice is still in the cache after Close, or an import survived it")
		}
	}
	runtime.GC()
	runtime.GC()
}

// Two groups passing the same slices share one import entry per slice:
// both run zero-copy, the entry outlives the first group's Close, and the
// second Close releases it.
func TestGoSliceImportTwoGroups(t *testing.T) {
	withImportMin(t, 64<<10)
	const ranks, n = 2, 96 << 10
	g1 := importerGroup(t, ranks)
	g2 := importerGroup(t, ranks)
	data := [][]float32{make([]float32, n), make([]float32, n)}
	run := func(g *Group, round int) backend.CounterSnapshot {
		for r := range data {
			for i := range data[r] {
				data[r][i] = float32(r + i%9 + round)
			}
		}
		before := g.counters(0)
		noErrors(t, onRanks(g, func(c *Comm) error {
			return AllReduceWith(context.Background(), c, data[c.Rank()], data[c.Rank()], Sum, Direct)
		}))
		for r := range data {
			for i, v := range data[r] {
				if want := float32(1 + 2*(i%9+round)); v != want {
					t.Fatalf("round %d rank %d element %d: %v, want %v", round, r, i, v, want)
				}
			}
		}
		return g.counters(0).Sub(before)
	}
	for round := 0; round < 4; round++ {
		g := g1
		if round%2 == 1 {
			g = g2
		}
		d := run(g, round)
		if round >= 2 && (d.BytesWritten != 0 || d.BytesRead != 0) {
			t.Errorf("round %d: staged %+v", round, d)
		}
	}
	e := goEntryOf(asBytes(data[0]))
	both := e != nil && e.ImportedBy(g1.Comm(0).goImp) && e.ImportedBy(g2.Comm(0).goImp)
	if !both {
		t.Fatalf("entry %+v, want one entry imported by both groups' rank 0", e)
	}
	if err := g1.Close(); err != nil {
		t.Fatal(err)
	}
	now := goEntryOf(asBytes(data[0]))
	kept := now == e && !e.ImportedByGroup(importGroup(g1)) && e.ImportedByGroup(importGroup(g2))
	if !kept {
		t.Fatal("the entry did not survive the first group's Close, or kept its imports")
	}
	run(g2, 9)
	if err := g2.Close(); err != nil {
		t.Fatal(err)
	}
	if goEntryOf(asBytes(data[0])) != nil || !e.Closed() {
		t.Fatal("the entry survived both groups' Close")
	}
	runtime.GC()
}

// A failed import stages the slice: exact results, and larger slices are not
// tried again.
func TestGoSliceImportFails(t *testing.T) {
	withImportMin(t, 64<<10)
	if vk := backendsUnderTest(t); len(vk) < 2 {
		t.Skip("vulkan unavailable")
	}
	fi := faultBackend(t, "vulkan")
	const ranks, n = 2, 64 << 10
	data := [][]float32{make([]float32, n), make([]float32, n)}
	for k := int64(1); k <= 3; k++ {
		inj := fi.Arm(faultinject.Plan{Kind: faultinject.FailAlloc, Device: 1, K: k})
		g, err := NewGroup(context.Background(), Options{Ranks: ranks, Backend: fi.Name(), Config: testConfig(), ImportCacheBytes: 64 << 20})
		if err != nil {
			continue // the fault hit the group's own allocations
		}
		for round := 0; round < 3; round++ { // imported from round 1
			for r := range data {
				for i := range data[r] {
					data[r][i] = float32(r + i%5)
				}
			}
			errs := onRanks(g, func(c *Comm) error {
				return AllReduceWith(context.Background(), c, data[c.Rank()], data[c.Rank()], Sum, Direct)
			})
			if errs[0] != nil || errs[1] != nil {
				if !errors.Is(errs[0], backend.ErrOutOfMemory) && !errors.Is(errs[1], backend.ErrOutOfMemory) && !errors.Is(errs[0], ErrGroupBroken) {
					t.Fatalf("k=%d: %v / %v", k, errs[0], errs[1])
				}
				break
			}
			for r := range data {
				for i, v := range data[r] {
					if want := float32(1 + 2*(i%5)); v != want {
						t.Fatalf("k=%d rank %d element %d: %v, want %v (fired: %s)", k, r, i, v, want, inj.Fired())
					}
				}
			}
		}
		if err := g.Close(); err != nil && !errors.Is(err, backend.ErrOutOfMemory) {
			t.Fatalf("k=%d: Close: %v", k, err)
		}
	}
	runtime.GC()
}

// The suites that hold the exchange to its contracts pass with every plain
// slice that can be imported imported (the import minimum lowered to one
// byte: every slice in a large Go object, over 32 KiB; imported at its
// first sighting, since the suites' inputs are mostly fresh).
func TestGoSliceImportSuites(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	withImportMin(t, 1)
	withImportAtFirstSight(t)
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"AllReduceRandom", TestAllReduceRandom},
		{"AllReduceNaNInf", TestAllReduceNaNInf},
		{"AllReduceFloat64Exact", TestAllReduceFloat64Exact},
		{"StrategiesZeroAllocs", TestStrategiesZeroAllocs},
		{"DirectCancelledRankNotWrittenAfterReturn", TestDirectCancelledRankNotWrittenAfterReturn},
		{"HostBufferPinned", TestHostBufferPinned},
		{"Abort", TestAbort},
		// The randomized suites on budgets of their own, from other seeds
		// than their own runs (full runs: their full budgets).
		{"FaultInjection", func(t *testing.T) {
			withSessions(t, faultSeedFlag, faultCasesFlag, "GOCOLL_FAULT", confCISeed+1<<32, 16)
			TestFaultInjection(t)
		}},
		{"Conformance", func(t *testing.T) {
			withSessions(t, confSeedFlag, confCasesFlag, "GOCOLL_CONFORMANCE", confCISeed+1<<32, 40)
			TestConformance(t)
		}},
	} {
		if tc.name == "Conformance" && raceEnabled {
			continue // the race run has TestConformance itself; CI time
		}
		start := time.Now()
		t.Run(tc.name, tc.f)
		t.Logf("%s: %v", tc.name, time.Since(start).Round(time.Millisecond))
	}
}

// The collectives other than all-reduce adopt large plain slices too: the
// first call stages them, the second imports them, and from then on the
// upload of send and the download into recv are DMA copies from and to the
// imported memory (no Buffer.Write or Read at the seam: the V collectives'
// counts do not cross it either in one process; no device allocation, the
// staging buffer of the first call left as it was), results exact, every
// root.
func TestGoSliceImportCollectives(t *testing.T) {
	withImportMin(t, 64<<10)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	for _, ranks := range []int{2, 3} {
		g := importerGroup(t, ranks, func(o *Options) { o.ChunkBytes = 64 << 10 })
		for _, coll := range []string{"ReduceScatter", "AllGather", "Broadcast", "Reduce", "AllToAll", "Gather", "Scatter", "AllToAllV", "AllGatherV"} {
			// m: the per-rank chunk, over the import minimum (64 KiB) and,
			// for one draw, over the parallel staging size (1 MiB).
			m := 16<<10 + rng.IntN(32<<10)
			if rng.IntN(3) == 0 {
				m = 256<<10 + rng.IntN(1000)
			}
			root := rng.IntN(ranks)
			t.Run(fmt.Sprintf("%d/%s/m=%d", ranks, coll, m), func(t *testing.T) {
				N := ranks
				send, recv := make([][]int32, N), make([][]int32, N)
				for r := range send {
					send[r] = make([]int32, N*m)
					recv[r] = make([]int32, N*m)
				}
				cnt, dsp := make([]int, N), make([]int, N)
				for j := range cnt {
					cnt[j], dsp[j] = m, j*m
				}
				val := func(round, r, i int) int32 { return int32(round*1_000_003 + r*100_003 + i) }
				stage0 := make([]backend.Buffer, N)
				for round := 0; round < 4; round++ {
					for r := range send {
						for i := range send[r] {
							send[r][i] = val(round, r, i)
						}
					}
					var before []backend.CounterSnapshot
					for r := 0; r < N; r++ {
						before = append(before, g.counters(r))
					}
					noErrors(t, onRanks(g, func(c *Comm) error {
						ctx, r := context.Background(), c.Rank()
						s, v := send[r], recv[r]
						switch coll {
						case "ReduceScatter":
							return ReduceScatter(ctx, c, s, v[:m], Sum)
						case "AllGather":
							return AllGather(ctx, c, s[:m], v)
						case "Broadcast":
							return Broadcast(ctx, c, s, root)
						case "Reduce":
							return Reduce(ctx, c, s, v, Sum, root)
						case "AllToAll":
							return AllToAll(ctx, c, s, v)
						case "Gather":
							return Gather(ctx, c, s[:m], v, root)
						case "Scatter":
							return Scatter(ctx, c, s, v[:m], root)
						case "AllToAllV":
							return AllToAllV(ctx, c, s, cnt, dsp, v, cnt, dsp)
						}
						return AllGatherV(ctx, c, s[:m], v, cnt, dsp)
					}))
					for r := 0; r < N; r++ {
						var got []int32
						want := func(i int) int32 { return 0 }
						switch coll {
						case "ReduceScatter":
							got = recv[r][:m]
							want = func(i int) int32 {
								var a int32
								for p := 0; p < N; p++ {
									a += val(round, p, r*m+i)
								}
								return a
							}
						case "AllGather", "AllGatherV":
							got = recv[r]
							want = func(i int) int32 { return val(round, i/m, i%m) }
						case "Broadcast":
							got = send[r]
							want = func(i int) int32 { return val(round, root, i) }
						case "Reduce":
							if r != root {
								continue
							}
							got = recv[r]
							want = func(i int) int32 {
								var a int32
								for p := 0; p < N; p++ {
									a += val(round, p, i)
								}
								return a
							}
						case "AllToAll", "AllToAllV":
							got = recv[r]
							want = func(i int) int32 { return val(round, i/m, r*m+i%m) }
						case "Gather":
							if r != root {
								continue
							}
							got = recv[r]
							want = func(i int) int32 { return val(round, i/m, i%m) }
						case "Scatter":
							got = recv[r][:m]
							want = func(i int) int32 { return val(round, root, r*m+i) }
						}
						for i, x := range got {
							if x != want(i) {
								t.Fatalf("round %d: rank %d element %d = %d, want %d", round, r, i, x, want(i))
							}
						}
						if round == 0 {
							stage0[r] = g.Comm(r).stage
						}
						if round < 2 {
							continue
						}
						if d := g.counters(r).Sub(before[r]); d.BytesWritten != 0 || d.BytesRead != 0 || d.Allocs != 0 {
							t.Errorf("round %d: rank %d staged or allocated: %+v", round, r, d)
						}
						if c := g.Comm(r); c.stage != stage0[r] {
							t.Errorf("round %d: rank %d: staging buffer allocated", round, r)
						} else if b, _ := goBytesOf(c); b == 0 {
							t.Errorf("round %d: rank %d imported nothing", round, r)
						}
					}
				}
			})
		}
	}
}

// A slice is imported when its object comes back: a fresh slice per call is
// always staged (no device allocation, no entry, no bytes imported), a
// reused one is staged on its first call, imported on its second (the call
// itself then runs zero-copy) and runs on the import after that; a window
// that overlaps memory seen before is imported at once; in-place and
// out-of-place slices in one object seen first in one call are staged.
func TestGoSliceImportSecondSighting(t *testing.T) {
	withImportMin(t, 64<<10)
	const ranks, n = 2, 64 << 10
	g := importerGroup(t, ranks)
	ctx := context.Background()
	type want struct {
		imports bool // device allocations (imports) in the call
		staged  bool // bytes through Buffer.Write
	}
	step := 0
	call := func(name string, send, recv func(r int) []float32, w want) {
		t.Helper()
		step++
		for r := 0; r < ranks; r++ {
			for i, s := 0, send(r); i < len(s); i++ {
				s[i] = float32(r + step)
			}
		}
		before := g.counters(0)
		noErrors(t, onRanks(g, func(c *Comm) error {
			return AllReduceWith(ctx, c, send(c.Rank()), recv(c.Rank()), Sum, Direct)
		}))
		d := g.counters(0).Sub(before)
		for r := 0; r < ranks; r++ {
			v := recv(r)
			if want := float32(1 + 2*step); v[0] != want || v[len(v)-1] != want {
				t.Fatalf("%s: rank %d: %v, %v, want %v", name, r, v[0], v[len(v)-1], want)
			}
		}
		if (d.Allocs != 0) != w.imports || (d.BytesWritten != 0) != w.staged {
			t.Errorf("%s: %d device allocations, %d bytes staged; want imports %v, staged %v", name, d.Allocs, d.BytesWritten, w.imports, w.staged)
		}
	}
	staged, imports, zeroCopy := want{false, true}, want{true, false}, want{false, false}
	warm := [][]float32{make([]float32, n), make([]float32, n)}
	noErrors(t, onRanks(g, func(c *Comm) error { // the group's own buffers
		return AllReduceWith(ctx, c, warm[c.Rank()], warm[c.Rank()], Sum, Direct)
	}))

	imported := ImportedBytes()
	for k := 0; k < 4; k++ {
		xs := [][]float32{make([]float32, n), make([]float32, n)}
		x := func(r int) []float32 { return xs[r] }
		call(fmt.Sprintf("fresh %d", k), x, x, staged)
		if goEntryOf(asBytes(xs[0])) != nil || ImportedBytes() != imported {
			t.Fatalf("fresh %d: imported at its first sighting", k)
		}
	}

	kept := [][]float32{make([]float32, n), make([]float32, n)}
	x := func(r int) []float32 { return kept[r] }
	call("reused, first call", x, x, staged)
	call("reused, second call", x, x, imports)
	if goEntryOf(asBytes(kept[0])) == nil || goEntryOf(asBytes(kept[1])) == nil {
		t.Fatal("reused slice not imported at its second call")
	}
	call("reused, third call", x, x, zeroCopy)

	// A window that overlaps memory seen before.
	objs := [][]float32{make([]float32, 2*n), make([]float32, 2*n)}
	first := func(r int) []float32 { return objs[r][:n] }
	shifted := func(r int) []float32 { return objs[r][n/2 : n/2+n] }
	call("first window", first, first, staged)
	call("overlapping window", shifted, shifted, imports)

	// Send and recv in one fresh object: both staged in the first call.
	both := [][]float32{make([]float32, 2*n), make([]float32, 2*n)}
	lo := func(r int) []float32 { return both[r][:n:n] }
	hi := func(r int) []float32 { return both[r][n:] }
	call("send and recv in one object", lo, hi, staged)
	if goEntryOf(asBytes(both[0])) != nil {
		t.Fatal("an object seen first in one call was imported in that call")
	}
	call("send and recv in one object again", lo, hi, imports)
}
