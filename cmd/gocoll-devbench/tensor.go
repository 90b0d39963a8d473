package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/diag"
)

// TensorFig is a device-resident all-reduce among ranks of one GPU, which
// share one logical device (the default layout): T3b (latency) and T6
// (bandwidth).
type TensorFig struct {
	Ranks     int     `json:"ranks"`
	Bytes     int64   `json:"bytes_per_rank"`
	Lat       Lat     `json:"latency"`
	MedianS   float64 `json:"median_s"`
	BoundS    float64 `json:"bound_s,omitempty"` // 2 x N x S bytes at the same run's in-place scale bandwidth
	HostBytes int64   `json:"host_bytes_per_call"`
	// KernelS is the median time of the same ReduceMulti pass alone (every
	// rank's tensor in place, p.Batch passes per submit, on one device):
	// what the kernel costs without a collective around it.
	KernelS float64 `json:"kernel_s,omitempty"`
	Allocs  float64 `json:"allocs_per_call,omitempty"`
	Err     string  `json:"error,omitempty"`
}

// openRanks opens ranks ranks on device p.Device with the default layout.
func openRanks(ctx context.Context, p params, ranks int) (*collective.Group, error) {
	cfg := collective.DefaultConfig()
	cfg.CommunicationTimeout = 120 * time.Second
	devs := make([]int, ranks)
	for i := range devs {
		devs[i] = p.Device
	}
	return collective.NewGroup(ctx, collective.Options{Ranks: ranks, Backend: p.Backend, Devices: devs, Config: cfg})
}

// tensorRun times calls all-reduces of every rank's tensor (strategy
// Direct: on ranks sharing a device, the device-memory path) after warm
// untimed ones; rank 0's times.
func tensorRun(ctx context.Context, g *collective.Group, ts []*collective.Tensor[float32], warm, calls int) (TensorFig, error) {
	f := TensorFig{Ranks: g.Size(), Bytes: int64(ts[0].Len() * 4)}
	times := make([]time.Duration, calls)
	run := func(n int, timed bool) error {
		var wg sync.WaitGroup
		errs := make([]error, g.Size())
		for r := range ts {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				for i := 0; i < n; i++ {
					t0 := time.Now()
					if err := collective.AllReduceTensor(ctx, g.Comm(r), ts[r], collective.Sum, collective.Direct); err != nil {
						errs[r] = err
						return
					}
					if timed && r == 0 {
						times[i] = time.Since(t0)
					}
				}
			}(r)
		}
		wg.Wait()
		return rankErr(errs)
	}
	if err := run(warm, false); err != nil {
		return f, err
	}
	host := func() int64 {
		var s int64
		for r := 0; r < g.Size(); r++ {
			c := diag.Counters(g, r)
			s += c.BytesFromHost + c.BytesToHost
		}
		return s
	}
	h0 := host()
	if err := run(calls, true); err != nil {
		return f, err
	}
	f.HostBytes = (host() - h0) / int64(calls)
	f.Lat = newLat(times)
	f.MedianS = f.Lat.MedianUS / 1e6
	return f, nil
}

func tensorBench(ctx context.Context, p params, res *Results) {
	one := func(ranks, bytes, warm, calls int) TensorFig {
		f := TensorFig{Ranks: ranks, Bytes: int64(bytes)}
		g, err := openRanks(ctx, p, ranks)
		if err != nil {
			f.Err = err.Error()
			return f
		}
		defer g.Close()
		ts := make([]*collective.Tensor[float32], ranks)
		for r := range ts {
			t, err := collective.NewTensor[float32](g.Comm(r), bytes/4)
			if err != nil {
				f.Err = err.Error()
				return f
			}
			defer t.Close()
			ts[r] = t
		}
		got, err := tensorRun(ctx, g, ts, warm, calls)
		if err != nil {
			f.Err = err.Error()
			return f
		}
		return got
	}
	t3b := one(2, p.LatBytes, 100, p.CallIters)
	logf("t3b: 2 ranks, %d B tensors, direct on the shared device: median %.1f us, p99 %.1f us, %d host bytes/call %s",
		p.LatBytes, t3b.Lat.MedianUS, t3b.Lat.P99US, t3b.HostBytes, t3b.Err)
	res.T3b = &t3b
	res.save()
	bw := res.Ceilings.ScaleF32.GBps
	for _, ranks := range []int{2, 8} {
		f := one(ranks, p.T6Size, 2, p.T6Calls)
		if bw > 0 && f.Err == "" {
			f.BoundS = 2 * float64(ranks) * float64(f.Bytes) / (bw * 1e9)
		}
		if f.Err == "" {
			k, err := multiKernel(ctx, p, ranks)
			if err != nil {
				f.Err = "kernel alone: " + err.Error()
			}
			f.KernelS = k
		}
		logf("t6: %d ranks x %d MiB tensors: median %.3f ms (the ReduceMulti pass alone %.3f ms), bound %.3f ms, %d host bytes/call %s", ranks, p.T6Size>>20,
			f.MedianS*1e3, f.KernelS*1e3, f.BoundS*1e3, f.HostBytes, f.Err)
		res.T6 = append(res.T6, f)
		res.save()
	}
}

// tensorTargets adds the T3b and T6 verdicts.
func (r *Results) tensorTargets() {
	if f := r.T3b; f != nil {
		t := Target{ID: "T3b", What: fmt.Sprintf("2 ranks, %d B device-resident tensors, GPU path (direct, shared device), per call", f.Bytes),
			Threshold: "<= 25 us"}
		if f.Err != "" {
			t.Measured, t.Verdict = "error: "+f.Err, "FAIL"
		} else {
			t.Measured = fmt.Sprintf("median %.1f us (p99 %.1f), %d host bytes/call", f.Lat.MedianUS, f.Lat.P99US, f.HostBytes)
			t.Ratio = f.Lat.MedianUS / 25
			t.Verdict = verdict(f.Lat.MedianUS <= 25, true)
		}
		r.add(t)
	}
	for _, f := range r.T6 {
		t := Target{ID: "T6", What: fmt.Sprintf("%d ranks on one GPU, %d MiB f32 device-resident each: time vs 2 x N x S / in-place scale bandwidth", f.Ranks, f.Bytes>>20),
			Threshold: "<= 1.25 x bound"}
		switch {
		case f.Err != "":
			t.Measured, t.Verdict = "error: "+f.Err, "FAIL"
		case f.BoundS == 0:
			t.Measured, t.Verdict = fmt.Sprintf("%.2f ms; no scale ceiling in this run", f.MedianS*1e3), "N/A"
		default:
			t.Ratio = f.MedianS / f.BoundS
			t.Measured = fmt.Sprintf("%.2f ms, bound %.2f ms (%.2f x), %d host bytes/call", f.MedianS*1e3, f.BoundS*1e3, t.Ratio, f.HostBytes)
			t.Verdict = verdict(t.Ratio <= 1.25, true)
		}
		r.add(t)
	}
}

// multiKernel times the ReduceMulti pass of T6 alone: ranks device-local
// buffers of p.T6Size bytes, all-reduced in place (each read once, each
// written once), p.Batch passes per submit; the median time per pass.
func multiKernel(ctx context.Context, p params, ranks int) (float64, error) {
	bk, err := backend.Lookup(p.Backend)
	if err != nil {
		return 0, err
	}
	dev, err := bk.Open(p.Device, backend.OpenOptions{})
	if err != nil {
		return 0, err
	}
	defer dev.Close()
	s := dev.Stream()
	m, ok := s.(backend.MultiReducer)
	if !ok {
		return 0, fmt.Errorf("%s streams have no ReduceMulti", p.Backend)
	}
	n := p.T6Size / 4 * 4
	regs := make([]backend.Region, ranks)
	for i := range regs {
		b, err := dev.Alloc(n, backend.DeviceLocal)
		if err != nil {
			return 0, err
		}
		defer b.Close()
		if err := fill(b, backend.F32, 1); err != nil {
			return 0, err
		}
		regs[i] = backend.Region{Buf: b, Len: n}
	}
	times, err := timeBatch(ctx, s, p.Warmup, p.Reps, func() error {
		for i := 0; i < p.Batch; i++ {
			// Mean: the values stay 1.
			if err := m.ReduceMulti(backend.Sum, backend.F32, regs, regs, 1/float64(ranks)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return median(times) / float64(p.Batch), nil
}
