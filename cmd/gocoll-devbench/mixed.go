package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// MixedFig is one way of moving host->device and device->host traffic at
// once: which engine moves each direction, and whether the two run on one
// logical device (two queues) or two.
type MixedFig struct {
	Name string `json:"name"`
	BW   BW     `json:"bw"` // bytes of both directions (or of the one direction) per second
}

// mixedSide is one rank of a mixed pair: its device, stream and a host and
// a device-local buffer of p.Size bytes.
type mixedSide struct {
	dev       backend.Device
	s         backend.Stream
	mem       []byte
	host, dl  backend.Buffer
	hr, dr    backend.Region
	mr        backend.MultiReducer
	closeFunc func()
}

func openMixedSide(bk backend.Backend, p params, opts backend.OpenOptions) (*mixedSide, error) {
	dev, err := bk.Open(p.Device, opts)
	if err != nil {
		return nil, err
	}
	m := &mixedSide{dev: dev, s: dev.Stream()}
	m.mem, m.host, err = importHost(dev, backend.F32, p.Size, 1)
	if err != nil {
		dev.Close()
		return nil, err
	}
	if m.dl, err = dev.Alloc(p.Size, backend.DeviceLocal); err != nil {
		m.host.Close()
		backend.FreeHostMemory(m.mem)
		dev.Close()
		return nil, err
	}
	m.hr = backend.Region{Buf: m.host, Len: p.Size}
	m.dr = backend.Region{Buf: m.dl, Len: p.Size}
	m.mr, _ = m.s.(backend.MultiReducer)
	m.closeFunc = func() {
		m.dl.Close()
		m.host.Close()
		backend.FreeHostMemory(m.mem)
		dev.Close()
	}
	return m, nil
}

// record records one direction on m with one engine: a kernel (a one-source
// ReduceMulti pass) or the copy command.
func (m *mixedSide) record(h2d, kernel bool) error {
	dst, src := m.hr, m.dr
	if h2d {
		dst, src = m.dr, m.hr
	}
	if kernel {
		if m.mr == nil {
			return fmt.Errorf("stream has no ReduceMulti: %w", backend.ErrUnsupported)
		}
		return m.mr.ReduceMulti(backend.Sum, backend.F32, []backend.Region{dst}, []backend.Region{src}, 1)
	}
	return m.s.Copy(dst, src)
}

// mixedDuplex measures how far each engine pairing overlaps the two PCIe
// directions: a kernel moving one direction while the copy command moves
// the other, on two queues of one logical device and on two logical
// devices, next to each engine alone.
func mixedDuplex(ctx context.Context, bk backend.Backend, p params, res *Results) error {
	type pair struct {
		name   string
		shared bool
		// per side: direction and engine; without two, one side runs alone.
		h2d, kernel [2]bool
		two         bool
	}
	cases := []pair{
		{name: "kernel H2D alone", h2d: [2]bool{true}, kernel: [2]bool{true}},
		{name: "kernel D2H alone", h2d: [2]bool{false}, kernel: [2]bool{true}},
		{name: "copy H2D alone", h2d: [2]bool{true}, kernel: [2]bool{false}},
		{name: "copy D2H alone", h2d: [2]bool{false}, kernel: [2]bool{false}},
		{name: "one device, two queues: kernel D2H + copy H2D", shared: true, two: true, h2d: [2]bool{false, true}, kernel: [2]bool{true, false}},
		{name: "one device, two queues: kernel H2D + copy D2H", shared: true, two: true, h2d: [2]bool{true, false}, kernel: [2]bool{true, false}},
		{name: "one device, two queues: kernel H2D + kernel D2H", shared: true, two: true, h2d: [2]bool{true, false}, kernel: [2]bool{true, true}},
		{name: "two devices: kernel D2H + copy H2D", two: true, h2d: [2]bool{false, true}, kernel: [2]bool{true, false}},
		{name: "two devices: kernel H2D + copy D2H", two: true, h2d: [2]bool{true, false}, kernel: [2]bool{true, false}},
	}
	for ci, pc := range cases {
		var sides [2]*mixedSide
		n := 1
		if pc.two {
			n = 2
		}
		err := func() error {
			for i := 0; i < n; i++ {
				o := backend.OpenOptions{}
				if pc.shared {
					o.ShareDevice, o.ShareKey = true, uint64(0x6d697864)+uint64(ci)
				}
				s, err := openMixedSide(bk, p, o)
				if err != nil {
					return err
				}
				sides[i] = s
			}
			times, err := timeConcurrent(p.Warmup, p.Reps, n, func(i int) error {
				if err := sides[i].record(pc.h2d[i], pc.kernel[i]); err != nil {
					return err
				}
				return submitWait(ctx, sides[i].s)
			})
			if err != nil {
				return err
			}
			f := MixedFig{Name: pc.name, BW: newBW(int64(n*p.Size), times)}
			res.Mixed = append(res.Mixed, f)
			logf("mixed: %s, %d MiB each: %.1f GB/s (best %.1f)", pc.name, p.Size>>20, f.BW.GBps, f.BW.BestGBps)
			return nil
		}()
		for _, s := range sides {
			if s != nil {
				s.closeFunc()
			}
		}
		if err != nil {
			res.errorf("mixed "+pc.name, "%v", err)
		}
	}
	return nil
}

// timeConcurrent times n goroutines running do(0..n-1) at once, reps times
// after warm untimed runs, until the last one ends.
func timeConcurrent(warm, reps, n int, do func(i int) error) ([]float64, error) {
	var times []float64
	errs := make([]error, n)
	for it := 0; it < warm+reps; it++ {
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				errs[i] = do(i)
			}(i)
		}
		wg.Wait()
		el := time.Since(t0).Seconds()
		for _, e := range errs {
			if e != nil {
				return nil, e
			}
		}
		if it >= warm {
			times = append(times, el)
		}
	}
	return times, nil
}
