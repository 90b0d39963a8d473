package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/diag"
)

// T7Fig is one T7 figure: N ranks on one GPU all-reducing Go slices of
// t7-size bytes each with one strategy, in one device layout.
type T7Fig struct {
	Ranks    int     `json:"ranks"`
	Layout   string  `json:"layout"` // "shared" (the default) or "per-rank" (DevicePerRank)
	Strategy string  `json:"strategy"`
	Picked   string  `json:"auto_picked,omitempty"`
	Bytes    int64   `json:"bytes_per_rank"`
	MedianS  float64 `json:"median_s"`
	Err      string  `json:"error,omitempty"`
}

var t7Strategies = []struct {
	name string
	s    collective.Strategy
}{
	{"auto", collective.Auto}, {"direct", collective.Direct}, {"pipelined", collective.Pipelined},
	{"ring", collective.Ring}, {"tree", collective.Tree}, {"hierarchical", collective.Hierarchical},
}

// t7Bench runs T7: for each rank count, both layouts and every strategy,
// the median of p.Reps timed mean all-reduces (after two untimed: a plain
// slice is imported at its second call) of plain Go slices, each rank on
// its own goroutine; the result is checked.
func t7Bench(ctx context.Context, p params, res *Results) {
	n := p.T7Size / 4
	for _, ranks := range p.T7Ranks {
		bufs := make([][]float32, ranks)
		for r := range bufs {
			bufs[r] = make([]float32, n)
		}
		for _, layout := range []string{"shared", "per-rank"} {
			cfg := collective.DefaultConfig()
			cfg.CommunicationTimeout = 120 * time.Second
			devs := make([]int, ranks)
			for i := range devs {
				devs[i] = p.Device
			}
			g, err := collective.NewGroup(ctx, collective.Options{Ranks: ranks, Backend: p.Backend, Devices: devs, Config: cfg,
				DevicePerRank: layout == "per-rank", ChunkBytes: p.T7Chunk})
			if err != nil {
				res.T7 = append(res.T7, T7Fig{Ranks: ranks, Layout: layout, Err: err.Error()})
				continue
			}
			for _, st := range t7Strategies {
				f := T7Fig{Ranks: ranks, Layout: layout, Strategy: st.name, Bytes: int64(n * 4)}
				if st.s == collective.Auto {
					pick, _ := diag.AutoChoice(g.Comm(0), n*4, backend.F32)
					f.Picked = pick.String()
				}
				med, err := t7Run(ctx, g, bufs, st.s, p.T7Reps)
				if err != nil {
					f.Err = err.Error()
				}
				f.MedianS = med
				logf("t7: %d ranks, %s devices, %s%s, %d MiB each: %.2f ms %s", ranks, layout, st.name, pickNote(f.Picked), n*4>>20, med*1e3, f.Err)
				res.T7 = append(res.T7, f)
				if err != nil {
					break // the group is broken
				}
			}
			g.Close()
			res.save()
		}
	}
}

// t7Run fills rank r's slice with r+1, then times reps mean all-reduces
// after two untimed (the first stages a plain slice, the second imports
// it); every element must end at (N+1)/2 (exact in f32).
func t7Run(ctx context.Context, g *collective.Group, bufs [][]float32, s collective.Strategy, reps int) (float64, error) {
	for r, b := range bufs {
		for i := range b {
			b[i] = float32(r + 1)
		}
	}
	var times []float64
	const untimed = 2
	for i := 0; i < untimed+reps; i++ {
		var wg sync.WaitGroup
		errs := make([]error, len(bufs))
		t0 := time.Now()
		for r := range bufs {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				errs[r] = collective.AllReduceWith(ctx, g.Comm(r), bufs[r], bufs[r], collective.Mean, s)
			}(r)
		}
		wg.Wait()
		el := time.Since(t0).Seconds()
		if err := rankErr(errs); err != nil {
			return 0, err
		}
		if i >= untimed {
			times = append(times, el)
		}
	}
	want := float32(len(bufs)+1) / 2
	for r, b := range bufs {
		for i := 0; i < len(b); i += 1 + len(b)/4096 {
			if b[i] != want {
				return median(times), fmt.Errorf("rank %d element %d: %v, want %v", r, i, b[i], want)
			}
		}
		if len(b) > 0 && b[len(b)-1] != want {
			return median(times), fmt.Errorf("rank %d last element: %v, want %v", r, b[len(b)-1], want)
		}
	}
	return median(times), nil
}

// t7Targets adds the T7 verdicts: the default (auto, shared devices) against
// torch's same work from pinned tensors; ring and tree against 1.3 x
// (3 - 2/N) x direct's time in the per-rank layout; auto within 10% of the
// best strategy of its layout.
func (r *Results) t7Targets() {
	type key struct {
		ranks  int
		layout string
	}
	by := map[key]map[string]*T7Fig{}
	for i := range r.T7 {
		f := &r.T7[i]
		if f.Err != "" || f.MedianS == 0 {
			continue
		}
		k := key{f.Ranks, f.Layout}
		if by[k] == nil {
			by[k] = map[string]*T7Fig{}
		}
		by[k][f.Strategy] = f
	}
	var keys []key
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].ranks != keys[j].ranks {
			return keys[i].ranks < keys[j].ranks
		}
		return keys[i].layout > keys[j].layout
	})
	for _, k := range keys {
		m := by[k]
		mb := r.Params.T7Size >> 20
		if a := m["auto"]; a != nil && k.layout == "shared" {
			t := Target{ID: "T7", What: fmt.Sprintf("%d ranks, %d MiB f32 Go slices each, default options (auto%s) vs torch from pinned tensors (two streams)", k.ranks, mb, pickNote(a.Picked)),
				Threshold: "<= torch"}
			tt := r.Torch.T7[fmt.Sprint(k.ranks)]
			if tt > 0 {
				t.Ratio = a.MedianS / tt
				t.Measured = fmt.Sprintf("%.2f ms vs torch %.2f ms", a.MedianS*1e3, tt*1e3)
				t.Verdict = verdict(a.MedianS <= tt, true)
			} else {
				t.Measured, t.Verdict = fmt.Sprintf("%.2f ms; no torch figure", a.MedianS*1e3), "N/A"
			}
			r.add(t)
		}
		var best *T7Fig
		for _, f := range m {
			if f.Strategy != "auto" && (best == nil || f.MedianS < best.MedianS) {
				best = f
			}
		}
		if a := m["auto"]; a != nil && best != nil {
			ratio := a.MedianS / best.MedianS
			r.add(Target{ID: "T7", What: fmt.Sprintf("%d ranks, %s devices: auto%s vs the best strategy (%s)", k.ranks, k.layout, pickNote(a.Picked), best.Strategy),
				Measured: fmt.Sprintf("%.2f ms vs %.2f ms", a.MedianS*1e3, best.MedianS*1e3), Threshold: "<= 1.10", Ratio: ratio, Verdict: verdict(ratio <= 1.1, true)})
		}
		if d := m["direct"]; d != nil && k.layout == "per-rank" {
			bound := 1.3 * (3 - 2/float64(k.ranks)) * d.MedianS
			for _, name := range []string{"ring", "tree"} {
				f := m[name]
				if f == nil {
					continue
				}
				ratio := f.MedianS / bound
				r.add(Target{ID: "T7", What: fmt.Sprintf("%d ranks, per-rank devices: %s vs 1.3 x (3 - 2/N) x direct (%.2f ms)", k.ranks, name, d.MedianS*1e3),
					Measured: fmt.Sprintf("%.2f ms vs bound %.2f ms", f.MedianS*1e3, bound*1e3), Threshold: "<= 1.00", Ratio: ratio, Verdict: verdict(ratio <= 1, true)})
			}
		}
	}
}

// t7Table is T7's table in the report.
func (r *Results) t7Table() string {
	if len(r.T7) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## T7: N ranks on one GPU, %d MiB f32 Go slices each (mean, in place), median of %d\n\n| ranks | devices | strategy | time | error |\n|---|---|---|---|---|\n", r.Params.T7Size>>20, r.Params.T7Reps)
	for _, f := range r.T7 {
		fmt.Fprintf(&b, "| %d | %s | %s%s | %.2f ms | %s |\n", f.Ranks, f.Layout, f.Strategy, pickNote(f.Picked), f.MedianS*1e3, strings.ReplaceAll(f.Err, "|", "/"))
	}
	for _, n := range []int{2, 4, 8} {
		if t := r.Torch.T7[fmt.Sprint(n)]; t > 0 {
			fmt.Fprintf(&b, "\ntorch, %d pinned inputs: %d uploads, one sum, %d downloads, pipelined over two streams: %.2f ms\n", n, n, n, t*1e3)
		}
	}
	return b.String()
}
