package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/diag"
)

// openPair opens a 2-rank group with both ranks on device p.Device.
func openPair(ctx context.Context, p params, depth int) (*collective.Group, error) {
	cfg := collective.DefaultConfig()
	cfg.PipelineDepth = depth
	cfg.CommunicationTimeout = 120 * time.Second
	return collective.NewGroup(ctx, collective.Options{
		Ranks: 2, Backend: p.Backend, Devices: []int{p.Device, p.Device}, Config: cfg,
	})
}

// loop runs n in-place sum all-reduces of bufs on both ranks; rank 0's
// per-call times go to times (when not nil).
func loop(ctx context.Context, g *collective.Group, bufs [][]float32, s collective.Strategy, n int, times []time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, g.Size())
	for r := 0; r < g.Size(); r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			c := g.Comm(r)
			for i := 0; i < n; i++ {
				t0 := time.Now()
				if err := collective.AllReduceWith(ctx, c, bufs[r], bufs[r], collective.Sum, s); err != nil {
					errs[r] = err
					return
				}
				if r == 0 && times != nil {
					times[i] = time.Since(t0)
				}
			}
		}(r)
	}
	wg.Wait()
	return rankErr(errs)
}

// rankErr returns the first rank's error, naming the rank.
func rankErr(errs []error) error {
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return nil
}

type measured struct {
	times   []time.Duration
	delta   backend.CounterSnapshot // summed over ranks
	allocs  float64                 // per call, process-wide, in the timed window
	objects float64
	// windows holds the process's mallocs in the timed window and in each
	// further window of n calls, counted from inside rank 0's loop.
	windows []uint64
	// phase counts the timed phase's mallocs from outside: its window
	// plus the margins and the harness's wake-ups of the rank goroutines.
	phase uint64
}

// phaseReq starts one phase of measure's rank goroutines: calls all-reduces
// each; when times is not nil, rank 0 times calls [margin, margin+len(times))
// and counts the process's mallocs over them into *mallocs.
type phaseReq struct {
	calls, margin int
	times         []time.Duration
	mallocs       *uint64
}

// heapObjects returns the process's heap allocations so far (tiny ones
// included, as runtime.MemStats.Mallocs counts them) without stopping the
// world; s is the caller's reusable sample slice.
func heapObjects(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

func newHeapSamples() []metrics.Sample {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/tiny/allocs:objects"}}
	heapObjects(s) // the first read initialises the runtime's tables
	return s
}

// measure runs warm untimed calls, then n timed ones between margin calls
// before and after, and returns rank 0's times and the counter and
// allocation deltas of the timed calls; then windows-1 further windows of n
// untimed calls. Allocations are counted by rank 0 from inside its loop,
// from its call margin to its call margin+n, so that with a margin the
// window holds only calls in flight on every rank, no goroutine of the
// harness waking or going to sleep (the runtime's own bounded
// caches, OS threads for cgo calls and per-P sudog caches, fill in the first
// windows on a many-core machine). The rank goroutines are started once,
// before the warm-up, and wait on a channel between phases.
func measure(ctx context.Context, g *collective.Group, bufs [][]float32, s collective.Strategy, warm, margin, n, windows int) (measured, error) {
	var m measured
	N := g.Size()
	start := make([]chan phaseReq, N)
	done := make(chan error, N)
	for r := 0; r < N; r++ {
		start[r] = make(chan phaseReq)
		go func(r int) {
			c := g.Comm(r)
			samples := newHeapSamples()
			for req := range start[r] {
				count := r == 0 && req.times != nil
				var err error
				var before uint64
				for i := 0; i < req.calls && err == nil; i++ {
					if count && i == req.margin {
						before = heapObjects(samples)
					}
					t0 := time.Now()
					err = collective.AllReduceWith(ctx, c, bufs[r], bufs[r], collective.Sum, s)
					if count && i >= req.margin && i < req.margin+len(req.times) {
						req.times[i-req.margin] = time.Since(t0)
						if i == req.margin+len(req.times)-1 {
							*req.mallocs = heapObjects(samples) - before
						}
					}
				}
				if err != nil {
					err = fmt.Errorf("rank %d: %w", r, err)
				}
				done <- err
			}
		}(r)
	}
	defer func() {
		for _, ch := range start {
			close(ch)
		}
	}()
	phase := func(req phaseReq) error {
		for _, ch := range start {
			ch <- req
		}
		var first error
		for range start {
			if err := <-done; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	// A collection first (earlier sections freed large buffers, and a
	// collection empties the runtime's central caches), then the warm-up
	// calls that refill them, so no collection lands in the window.
	runtime.GC()
	if warm > 0 {
		if err := phase(phaseReq{calls: warm}); err != nil {
			return m, err
		}
	}
	snap := func() backend.CounterSnapshot {
		var t backend.CounterSnapshot
		for r := 0; r < g.Size(); r++ {
			c := diag.Counters(g, r)
			t.BytesFromHost += c.BytesFromHost
			t.BytesToHost += c.BytesToHost
			t.ObjectsCreated += c.ObjectsCreated
			t.Submits += c.Submits
			t.Dispatches += c.Dispatches
			t.Copies += c.Copies
		}
		return t
	}
	m.times = make([]time.Duration, n)
	m.windows = make([]uint64, max(1, windows))
	samples := newHeapSamples()
	before := snap()
	h0 := heapObjects(samples)
	if err := phase(phaseReq{calls: n + 2*margin, margin: margin, times: m.times, mallocs: &m.windows[0]}); err != nil {
		return m, err
	}
	m.phase = heapObjects(samples) - h0
	// The counters cover the margins too: per call over all calls.
	m.delta = snap().Sub(before)
	m.allocs = float64(m.windows[0]) / float64(n)
	m.objects = float64(m.delta.ObjectsCreated) / float64(n+2*margin)
	scratch := make([]time.Duration, n)
	for w := 1; w < len(m.windows); w++ {
		if err := phase(phaseReq{calls: n + 2*margin, margin: margin, times: scratch, mallocs: &m.windows[w]}); err != nil {
			return m, err
		}
	}
	return m, nil
}

type stratRun struct {
	name  string
	s     collective.Strategy
	depth int
}

func collBench(ctx context.Context, p params, res *Results, skip map[string]bool) {
	n := p.ARSize / 4
	var runs []stratRun // T2: direct, pipelined at each depth, ring, auto
	runs = append(runs, stratRun{"direct", collective.Direct, p.Depths[0]})
	for _, d := range p.Depths {
		runs = append(runs, stratRun{fmt.Sprintf("pipelined-%d", d), collective.Pipelined, d})
	}
	runs = append(runs, stratRun{"ring", collective.Ring, p.Depths[0]}, stratRun{"auto", collective.Auto, p.Depths[0]})

	if !skip["t2a"] {
		var hb [2]*collective.HostBuffer[float32]
		bufs := make([][]float32, 2)
		ok := true
		for r := range hb {
			b, err := collective.NewHostBuffer[float32](n)
			if err != nil {
				res.errorf("t2a", "NewHostBuffer: %v", err)
				ok = false
				break
			}
			defer b.Close()
			for i := range b.Data {
				b.Data[i] = 1
			}
			hb[r], bufs[r] = b, b.Data
		}
		if ok {
			res.T2a = arBench(ctx, p, res, "t2a", runs, bufs, true)
			res.save()
		}
	}
	if !skip["t2b"] {
		bufs := [][]float32{make([]float32, n), make([]float32, n)}
		for r := range bufs {
			for i := range bufs[r] {
				bufs[r][i] = 1
			}
		}
		res.T2b = arBench(ctx, p, res, "t2b", runs, bufs, false)
		res.save()
	}
	if !skip["t3"] {
		latBench(ctx, p, res)
	}
}

// arBench runs each strategy on a group opened with its pipeline depth.
func arBench(ctx context.Context, p params, res *Results, sec string, runs []stratRun, bufs [][]float32, pinned bool) []ARFig {
	var out []ARFig
	groups := map[int]*collective.Group{}
	defer func() {
		for _, g := range groups {
			g.Close()
		}
	}()
	bytes := int64(len(bufs[0]) * 4)
	for _, sr := range runs {
		f := ARFig{Strategy: sr.name, Depth: sr.depth, Pinned: pinned, Bytes: bytes}
		g := groups[sr.depth]
		if g == nil {
			var err error
			if g, err = openPair(ctx, p, sr.depth); err != nil {
				res.errorf(sec, "%s: open group: %v", sr.name, err)
				f.Err = err.Error()
				out = append(out, f)
				continue
			}
			groups[sr.depth] = g
		}
		if sr.s == collective.Auto {
			pick, _ := diag.AutoChoice(g.Comm(0), int(bytes), backend.F32)
			f.Picked = pick.String()
		}
		m, err := measure(ctx, g, bufs, sr.s, p.Warmup, 0, p.ARIters, 1)
		if err != nil {
			res.errorf(sec, "%s: %v", sr.name, err)
			f.Err = err.Error()
			out = append(out, f)
			// A broken group is useless for the next strategies.
			g.Close()
			delete(groups, sr.depth)
			continue
		}
		xs := make([]float64, len(m.times))
		for i, t := range m.times {
			xs[i] = t.Seconds()
		}
		f.MedianS, f.MinS, f.N = median(xs), minOf(xs), len(xs)
		f.FromHost = m.delta.BytesFromHost / int64(p.ARIters)
		f.ToHost = m.delta.BytesToHost / int64(p.ARIters)
		if f.MedianS > 0 {
			f.HostGBps = float64(f.FromHost+f.ToHost) / f.MedianS / 1e9
			f.TensorGBps = float64(4*bytes) / f.MedianS / 1e9
		}
		f.Allocs, f.Objects = m.allocs, m.objects
		logf("%s: %s%s: %.2f ms/call (best %.2f); host bytes/call %d MiB up + %d MiB down = %.1f GB/s at the seam; %.2f allocs, %.2f objects/call",
			sec, sr.name, pickNote(f.Picked), f.MedianS*1e3, f.MinS*1e3, f.FromHost>>20, f.ToHost>>20, f.HostGBps, f.Allocs, f.Objects)
		out = append(out, f)
	}
	return out
}

func pickNote(p string) string {
	if p == "" {
		return ""
	}
	return " (picked " + p + ")"
}

func latBench(ctx context.Context, p params, res *Results) {
	n := p.LatBytes / 4
	g, err := openPair(ctx, p, p.Depths[0])
	if err != nil {
		res.errorf("t3", "open group: %v", err)
		return
	}
	defer g.Close()
	bufs := [][]float32{make([]float32, n), make([]float32, n)}
	var hb [2]*collective.HostBuffer[float32]
	pinned := make([][]float32, 2)
	for r := range hb {
		b, err := collective.NewHostBuffer[float32](n)
		if err != nil {
			res.errorf("t3", "NewHostBuffer: %v", err)
			return
		}
		defer b.Close()
		hb[r], pinned[r] = b, b.Data
	}
	type lr struct {
		name string
		s    collective.Strategy
		bufs [][]float32
	}
	runs := []lr{
		{"auto", collective.Auto, bufs},
		{"host", collective.Host, bufs},
		{"direct", collective.Direct, bufs},
		{fmt.Sprintf("pipelined-%d", p.Depths[0]), collective.Pipelined, bufs},
		{"ring", collective.Ring, bufs},
		{"tree", collective.Tree, bufs},
		{"hierarchical", collective.Hierarchical, bufs},
		{"direct (pinned)", collective.Direct, pinned},
		{"auto (pinned)", collective.Auto, pinned},
	}
	for _, r := range runs {
		f := LatFig{Strategy: r.name}
		if r.s == collective.Auto {
			pick, _ := diag.AutoChoice(g.Comm(0), p.LatBytes, backend.F32)
			f.Picked = pick.String()
		}
		// Warm-up: the Comm's pools fill in the first calls; the runtime's
		// own bounded caches (OS threads for cgo calls, per-P timer heaps
		// and sudog caches) fill over the first thousands of calls on a
		// many-core machine, allocating now and then until they do.
		m, err := measure(ctx, g, r.bufs, r.s, max(100, p.CallIters/5), 50, p.CallIters, p.AllocWindows)
		if err != nil {
			res.errorf("t3", "%s: %v", r.name, err)
			f.Err = err.Error()
			res.T3 = append(res.T3, f)
			return // the group may be broken
		}
		f.Lat, f.Allocs, f.Objects, f.AllocWindows = newLat(m.times), m.allocs, m.objects, m.windows
		f.PhaseMallocs = m.phase
		for _, w := range m.windows {
			f.MaxAllocs = max(f.MaxAllocs, float64(w)/float64(p.CallIters))
		}
		logf("t3: %s%s, %d B: median %.1f us, p99 %.1f us; %.4f allocs, %.3f objects/call; mallocs per window of %d calls %v (timed phase with its margins and wake-ups: %d)", r.name, pickNote(f.Picked), p.LatBytes, f.Lat.MedianUS, f.Lat.P99US, f.Allocs, f.Objects, p.CallIters, m.windows, m.phase)
		res.T3 = append(res.T3, f)
	}
}
