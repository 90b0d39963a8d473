package main

import (
	"fmt"
	"strings"
)

// Torch is bench/torch_peer.py's JSON (the fields this program uses; the
// file itself is kept beside the results).
type Torch struct {
	Device            string     `json:"device,omitempty"`
	TorchVersion      string     `json:"torch,omitempty"`
	CUDA              string     `json:"cuda,omitempty"`
	Driver            string     `json:"driver,omitempty"`
	ScaleF32          float64    `json:"scale_f32_GBps,omitempty"`
	ScaleF64          float64    `json:"scale_f64_GBps,omitempty"`
	H2DPinned         float64    `json:"h2d_pinned_GBps,omitempty"`
	D2HPinned         float64    `json:"d2h_pinned_GBps,omitempty"`
	H2DPageable       float64    `json:"h2d_pageable_GBps,omitempty"`
	D2HPageable       float64    `json:"d2h_pageable_GBps,omitempty"`
	LaunchSync        *TorchLat  `json:"launch_sync_us,omitempty"`
	RoundTrip         *TorchLat  `json:"roundtrip_pinned_us,omitempty"`
	RoundTripBytes    int        `json:"roundtrip_bytes,omitempty"`
	Reduce            []TorchRed `json:"reduce,omitempty"`
	AllReduceBytes    int64      `json:"allreduce_bytes,omitempty"`
	AllReducePageable float64    `json:"allreduce_pageable_s,omitempty"`
	AllReducePinned   float64    `json:"allreduce_pinned_s,omitempty"`
	AllReducePinned2  float64    `json:"allreduce_pinned_2stream_s,omitempty"`
	DuplexPinned      float64    `json:"duplex_pinned_GBps,omitempty"`
	// T7 is, by rank count, the time of N pinned uploads, one sum and N
	// downloads pipelined over two streams.
	T7     map[string]float64 `json:"t7_pinned_2stream_s,omitempty"`
	Errors []string           `json:"errors,omitempty"`
}

// TorchLat is a latency in microseconds.
type TorchLat struct {
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
}

// TorchRed is torch's sum of k inputs.
type TorchRed struct {
	DType  string  `json:"dtype"`
	Inputs int     `json:"inputs"`
	GBps   float64 `json:"GBps"`
	How    string  `json:"how"`
}

func verdict(ok, known bool) string {
	switch {
	case !known:
		return "N/A"
	case ok:
		return "PASS"
	}
	return "FAIL"
}

func (r *Results) add(t Target) { r.Targets = append(r.Targets, t) }

// bestAR returns the figure with the highest host bandwidth and the auto one.
func bestAR(figs []ARFig) (best, auto *ARFig) {
	for i := range figs {
		f := &figs[i]
		if f.Err != "" || f.MedianS == 0 {
			continue
		}
		if f.Strategy == "auto" {
			auto = f
		}
		if best == nil || f.MedianS < best.MedianS {
			best = f
		}
	}
	return
}

func (r *Results) evaluate() {
	c := &r.Ceilings
	// T1.
	for i := range r.T1 {
		f := &r.T1[i]
		ceil := c.ScaleF32.GBps
		if f.DType == "double" {
			ceil = c.ScaleF64.GBps
		}
		f.Ceiling = ceil
		if ceil > 0 {
			f.Ratio = f.BW.GBps / ceil
		}
		r.add(Target{ID: "T1", What: fmt.Sprintf("reduce %d x %d MiB %s, kernel bytes/s vs in-place scale", f.Inputs, r.Params.ReduceSize>>20, f.DType),
			Measured: fmt.Sprintf("%.1f GB/s vs %.1f GB/s", f.BW.GBps, ceil), Threshold: ">= 0.90",
			Ratio: f.Ratio, Verdict: verdict(f.Ratio >= 0.9, ceil > 0)})
	}
	// T2a: bytes of both directions per second against the one-dispatch
	// duplex ceiling.
	pcie := c.Duplex.GBps
	for i := range r.T2a {
		if pcie > 0 {
			r.T2a[i].Ratio = r.T2a[i].TensorGBps / pcie
		}
	}
	best, auto := bestAR(r.T2a)
	for _, x := range []struct {
		tag string
		f   *ARFig
	}{{"best", best}, {"auto", auto}} {
		if x.f == nil {
			if len(r.T2a) > 0 {
				r.add(Target{ID: "T2a", What: "pinned all-reduce (" + x.tag + "): no successful run", Verdict: "FAIL"})
			}
			continue
		}
		vsTorch := ""
		if td := r.Torch.DuplexPinned; td > 0 {
			vsTorch = fmt.Sprintf("; %.2f x torch's two-stream duplex %.1f GB/s", x.f.TensorGBps/td, td)
		}
		r.add(Target{ID: "T2a", What: fmt.Sprintf("2-rank all-reduce %d MiB f32, pinned, %s = %s%s: 2 x N x S bytes / time vs the one-dispatch duplex ceiling",
			x.f.Bytes>>20, x.tag, x.f.Strategy, pickNote(x.f.Picked)),
			Measured:  fmt.Sprintf("%.1f GB/s (%.2f ms/call) vs %.1f GB/s%s", x.f.TensorGBps, x.f.MedianS*1e3, pcie, vsTorch),
			Threshold: ">= 0.90", Ratio: x.f.Ratio, Verdict: verdict(x.f.Ratio >= 0.9, pcie > 0)})
	}
	// T2b.
	tp := r.Torch.AllReducePageable
	sameSize := r.Torch.AllReduceBytes == 0 || len(r.T2b) == 0 || r.Torch.AllReduceBytes == r.T2b[0].Bytes
	for i := range r.T2b {
		if tp > 0 && r.T2b[i].MedianS > 0 {
			r.T2b[i].Ratio = tp / r.T2b[i].MedianS
		}
	}
	best, auto = bestAR(r.T2b)
	for _, x := range []struct {
		tag string
		f   *ARFig
	}{{"best", best}, {"auto", auto}} {
		if x.f == nil {
			if len(r.T2b) > 0 {
				r.add(Target{ID: "T2b", What: "all-reduce from Go slices (" + x.tag + "): no successful run", Verdict: "FAIL"})
			}
			continue
		}
		t := Target{ID: "T2b", What: fmt.Sprintf("2-rank all-reduce %d MiB f32 from Go slices, %s = %s%s: speed vs torch from pageable tensors",
			x.f.Bytes>>20, x.tag, x.f.Strategy, pickNote(x.f.Picked)), Threshold: ">= 2.00"}
		if tp > 0 && sameSize {
			t.Measured = fmt.Sprintf("%.2f ms vs torch %.2f ms per op", x.f.MedianS*1e3, tp*1e3)
			t.Ratio = x.f.Ratio
			t.Verdict = verdict(x.f.Ratio >= 2, true)
		} else {
			t.Measured = fmt.Sprintf("%.2f ms per op; no torch figure of the same size", x.f.MedianS*1e3)
			t.Verdict = "N/A"
		}
		r.add(t)
	}
	// T3.
	var tl float64
	if r.Torch.RoundTrip != nil {
		tl = r.Torch.RoundTrip.Median
	}
	var bestL, autoL *LatFig
	for i := range r.T3 {
		f := &r.T3[i]
		if f.Err != "" || f.Lat.N == 0 {
			continue
		}
		if f.Strategy == "auto" {
			autoL = f
		}
		if bestL == nil || f.Lat.MedianUS < bestL.Lat.MedianUS {
			bestL = f
		}
	}
	for _, x := range []struct {
		tag string
		f   *LatFig
	}{{"best", bestL}, {"auto", autoL}} {
		if x.f == nil {
			if len(r.T3) > 0 {
				r.add(Target{ID: "T3a", What: "latency (" + x.tag + "): no successful run", Verdict: "FAIL"})
			}
			continue
		}
		ok := x.f.Lat.MedianUS <= 30
		meas := fmt.Sprintf("median %.1f us (p99 %.1f)", x.f.Lat.MedianUS, x.f.Lat.P99US)
		thr := "<= 30 us"
		ratio := x.f.Lat.MedianUS / 30
		if tl > 0 {
			ok = ok && x.f.Lat.MedianUS <= tl
			meas += fmt.Sprintf("; torch pinned round trip %.1f us", tl)
			thr += fmt.Sprintf(" and <= torch (%.1f us)", tl)
			ratio = x.f.Lat.MedianUS / min(30, tl)
		}
		r.add(Target{ID: "T3a", What: fmt.Sprintf("2-rank all-reduce of %d B host slices, %s = %s%s, per call", r.Params.LatBytes, x.tag, x.f.Strategy, pickNote(x.f.Picked)),
			Measured: meas, Threshold: thr, Ratio: ratio, Verdict: verdict(ok, true)})
	}
	// T4, as measured in this run's loops (the tests are the proof): the
	// most mallocs in any window of calls of any T3 strategy.
	maxA, maxO, n, maxP := 0.0, 0.0, 0, uint64(0)
	for _, f := range r.T3 {
		if f.Err == "" && f.Lat.N > 0 {
			maxA, maxO, n, maxP = max(maxA, f.MaxAllocs), max(maxO, f.Objects), n+1, max(maxP, f.PhaseMallocs)
		}
	}
	// The large all-reduces run a few calls each, too few to count allocations
	// to 0.01; their Vulkan objects count.
	for _, f := range append(append([]ARFig(nil), r.T2a...), r.T2b...) {
		if f.Err == "" && f.N > 0 {
			maxO = max(maxO, f.Objects)
		}
	}
	if n > 0 {
		r.add(Target{ID: "T4", What: fmt.Sprintf("allocations per small synchronous all-reduce call (T3 loops, worst strategy, both ranks, the process's mallocs in the worst of %d windows of %d calls, counted in rank 0's loop with every rank calling) and Vulkan objects per call (T2 and T3 loops)", r.Params.AllocWindows, r.Params.CallIters),
			Measured: fmt.Sprintf("%.4f allocs/call, %.3f objects/call (a whole timed phase, its margins and harness wake-ups included: at most %d mallocs)", maxA, maxO, maxP), Threshold: fmt.Sprintf("allocs < 0.001 per call over %d calls, 0 objects", r.Params.CallIters),
			Ratio: maxA, Verdict: verdict(maxA < 0.001 && maxO == 0, true)})
	}
	r.tensorTargets()
	r.t7Targets()
}

func f1(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

func (r *Results) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	d := r.Device
	w("# gocoll device benchmark\n\n")
	w("- date: %s\n- device: %s (%s, %s), driver %s, API %s\n", r.Date, d.Name, d.Backend, d.Type, d.Driver, d.API)
	if r.Torch.Device != "" {
		w("- torch: %s, CUDA %s, device %s, NVIDIA driver %s\n", r.Torch.TorchVersion, r.Torch.CUDA, r.Torch.Device, r.Torch.Driver)
	}
	w("- %s %s; command: `%s`\n", r.GoVersion, r.GOOS, r.Command)
	p := r.Params
	w("- sizes: ceilings %d MiB, reduce inputs %d MiB, all-reduce %d MiB per rank, latency %d B; %d timed reps (median), %d kernels per submit\n\n",
		p.Size>>20, p.ReduceSize>>20, p.ARSize>>20, p.LatBytes, p.Reps, p.Batch)

	w("## Targets\n\n| target | what | measured | threshold | ratio | verdict |\n|---|---|---|---|---|---|\n")
	for _, t := range r.Targets {
		w("| %s | %s | %s | %s | %.2f | **%s** |\n", t.ID, t.What, t.Measured, t.Threshold, t.Ratio, t.Verdict)
	}

	c := r.Ceilings
	tt := r.Torch
	w("\n## Ceilings (same run)\n\n| what | gocoll shim | PyTorch |\n|---|---|---|\n")
	w("| in-place scale %d MiB f32, bytes read+written | %s GB/s | %s GB/s (`mul_`) |\n", p.Size>>20, f1(c.ScaleF32.GBps), f1(tt.ScaleF32))
	w("| in-place scale %d MiB f64 | %s GB/s | %s GB/s |\n", p.Size>>20, f1(c.ScaleF64.GBps), f1(tt.ScaleF64))
	w("| pinned H2D %d MiB | %s GB/s | %s GB/s |\n", p.Size>>20, f1(c.H2DPinned.GBps), f1(tt.H2DPinned))
	w("| pinned D2H %d MiB | %s GB/s | %s GB/s |\n", p.Size>>20, f1(c.D2HPinned.GBps), f1(tt.D2HPinned))
	w("| pinned H2D + D2H at once (two queues), both directions | %s GB/s | |\n", f1(c.BidirPinned.GBps))
	w("| one dispatch reading host memory and writing host memory (the duplex ceiling), both directions | %s GB/s | %s GB/s (H2D and D2H on two streams) |\n", f1(c.Duplex.GBps), f1(tt.DuplexPinned))
	w("| pageable H2D / D2H | (Go slices: see T2b) | %s / %s GB/s |\n", f1(tt.H2DPageable), f1(tt.D2HPageable))
	for _, m := range r.Mixed {
		w("| %s, %d MiB each way | %s GB/s | |\n", m.Name, p.Size>>20, f1(m.BW.GBps))
	}
	lat := func(l Lat) string {
		if l.N == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f / %.1f us", l.MedianUS, l.P99US)
	}
	tlat := func(l *TorchLat) string {
		if l == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f / %.1f us", l.Median, l.P99)
	}
	w("| tiny copy + submit + fence wait (median / p99) | %s | |\n", lat(c.SubmitFence))
	w("| 1-element dispatch + submit + fence wait | %s | launch + synchronize %s |\n", lat(c.Dispatch), tlat(tt.LaunchSync))
	w("| %d B round trip: copy in, kernel, copy out, one submit | %s | pinned non-blocking %s |\n", p.LatBytes, lat(c.RoundTrip), tlat(tt.RoundTrip))

	w("\n## T1: device-resident reduce\n\n| dtype | inputs | GB/s (kernel bytes) | best | scale ceiling | ratio | torch |\n|---|---|---|---|---|---|---|\n")
	for _, f := range r.T1 {
		tv := "-"
		for _, x := range tt.Reduce {
			if x.Inputs == f.Inputs && (x.DType == f.DType || (x.DType == "float32" && f.DType == "float") || (x.DType == "float64" && f.DType == "double")) {
				tv = fmt.Sprintf("%.1f (%s)", x.GBps, x.How)
			}
		}
		w("| %s | %d | %.1f | %.1f | %.1f | %.2f | %s |\n", f.DType, f.Inputs, f.BW.GBps, f.BW.BestGBps, f.Ceiling, f.Ratio, tv)
	}
	arTable := func(title string, figs []ARFig, ratioName string) {
		w("\n## %s\n\n| strategy | ms/call (median) | best | host bytes up+down per call | GB/s at the seam | tensor GB/s (2 ranks x in+out) | %s | allocs/call | objects/call |\n|---|---|---|---|---|---|---|---|---|\n", title, ratioName)
		for _, f := range figs {
			if f.Err != "" {
				w("| %s | error: %s | | | | | | | |\n", f.Strategy, strings.ReplaceAll(f.Err, "|", "/"))
				continue
			}
			w("| %s%s | %.2f | %.2f | %d + %d MiB | %.1f | %.1f | %.2f | %.2f | %.2f |\n", f.Strategy, pickNote(f.Picked), f.MedianS*1e3, f.MinS*1e3,
				f.FromHost>>20, f.ToHost>>20, f.HostGBps, f.TensorGBps, f.Ratio, f.Allocs, f.Objects)
		}
	}
	arTable(fmt.Sprintf("T2a: 2 ranks on one device, %d MiB f32 each, pinned HostBuffers", p.ARSize>>20), r.T2a, "ratio vs the duplex ceiling")
	if tt.AllReducePinned > 0 {
		w("\ntorch, same work from pinned tensors (2 x H2D, add, 2 x D2H, one stream): %.2f ms/op\n", tt.AllReducePinned*1e3)
		if tt.AllReducePinned2 > 0 {
			w("\ntorch, the same pipelined in 16 chunks over two streams (uploads on one, add and downloads on the other): %.2f ms/op\n", tt.AllReducePinned2*1e3)
		}
	}
	arTable("T2b: the same from plain Go slices", r.T2b, "speed vs torch pageable")
	if tt.AllReducePageable > 0 {
		w("\ntorch, same work from pageable tensors: %.2f ms/op\n", tt.AllReducePageable*1e3)
	}
	w("\n## T3: 2 ranks, %d B f32 host slices, per call\n\n| strategy | median us | p99 us | min us | allocs/call (timed) | mallocs per window of %d calls | objects/call |\n|---|---|---|---|---|---|---|\n", p.LatBytes, p.CallIters)
	for _, f := range r.T3 {
		if f.Err != "" {
			w("| %s | error: %s | | | | | |\n", f.Strategy, strings.ReplaceAll(f.Err, "|", "/"))
			continue
		}
		w("| %s%s | %.1f | %.1f | %.1f | %.4f | %s | %.3f |\n", f.Strategy, pickNote(f.Picked), f.Lat.MedianUS, f.Lat.P99US, f.Lat.MinUS, f.Allocs, windowList(f.AllocWindows), f.Objects)
	}
	if f := r.T3b; f != nil {
		w("\n## T3b and T6: device-resident tensors, ranks on one GPU (one shared logical device)\n\n| ranks | bytes per rank | median | p99 | bound (2 x N x S / scale bw) | the ReduceMulti pass alone | host bytes/call | error |\n|---|---|---|---|---|---|---|---|\n")
		for _, f := range append([]TensorFig{*f}, r.T6...) {
			med, p99 := fmt.Sprintf("%.1f us", f.Lat.MedianUS), fmt.Sprintf("%.1f us", f.Lat.P99US)
			if f.Bytes >= 1<<20 {
				med, p99 = fmt.Sprintf("%.2f ms", f.MedianS*1e3), fmt.Sprintf("%.2f ms", f.Lat.P99US/1e3)
			}
			bound := "-"
			if f.BoundS > 0 {
				bound = fmt.Sprintf("%.2f ms", f.BoundS*1e3)
			}
			kernel := "-"
			if f.KernelS > 0 {
				kernel = fmt.Sprintf("%.2f ms", f.KernelS*1e3)
			}
			w("| %d | %d | %s | %s | %s | %s | %d | %s |\n", f.Ranks, f.Bytes, med, p99, bound, kernel, f.HostBytes, strings.ReplaceAll(f.Err, "|", "/"))
		}
	}
	if tt.RoundTrip != nil {
		w("\ntorch pinned non-blocking round trip of %d B (copy in, add, copy out, synchronize): median %.1f us, p99 %.1f us\n", tt.RoundTripBytes, tt.RoundTrip.Median, tt.RoundTrip.P99)
	}
	w("%s", r.t7Table())
	if len(r.Errors) > 0 || len(tt.Errors) > 0 {
		w("\n## Errors\n\n")
		for _, e := range append(append([]string(nil), r.Errors...), tt.Errors...) {
			w("- %s\n", e)
		}
	}
	return b.String()
}

// windowList formats mallocs per window as "a, b, c".
func windowList(w []uint64) string {
	var b strings.Builder
	for i, v := range w {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, v)
	}
	return b.String()
}
