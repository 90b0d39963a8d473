package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// pattern returns n bytes of dt elements equal to v.
func pattern(dt backend.DType, n int, v float64) []byte {
	b := make([]byte, n)
	if dt == backend.F64 {
		for i := 0; i+8 <= n; i += 8 {
			binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
		}
	} else {
		for i := 0; i+4 <= n; i += 4 {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(v)))
		}
	}
	return b
}

func fill(buf backend.Buffer, dt backend.DType, v float64) error {
	const chunk = 64 << 20
	p := pattern(dt, min(chunk, buf.Len()), v)
	for off := 0; off < buf.Len(); off += len(p) {
		n := min(len(p), buf.Len()-off)
		if err := buf.Write(off, p[:n]); err != nil {
			return err
		}
	}
	return nil
}

// submitWait submits what is recorded and waits for it.
func submitWait(ctx context.Context, s backend.Stream) error {
	f, err := s.Submit()
	if err != nil {
		return err
	}
	return f.Wait(ctx)
}

// timeBatch times record() (which records work) + one submit + fence wait,
// reps times after warm untimed runs; the device is idle at each start.
func timeBatch(ctx context.Context, s backend.Stream, warm, reps int, record func() error) ([]float64, error) {
	var out []float64
	for i := 0; i < warm+reps; i++ {
		t0 := time.Now()
		if err := record(); err != nil {
			return nil, err
		}
		if err := submitWait(ctx, s); err != nil {
			return nil, err
		}
		if i >= warm {
			out = append(out, time.Since(t0).Seconds())
		}
	}
	return out, nil
}

// timeLat times iters round trips of record + submit + wait.
func timeLat(ctx context.Context, s backend.Stream, warm, iters int, record func(i int) error) (Lat, error) {
	d := make([]time.Duration, 0, iters)
	for i := 0; i < warm+iters; i++ {
		t0 := time.Now()
		if err := record(i); err != nil {
			return Lat{}, err
		}
		if err := submitWait(ctx, s); err != nil {
			return Lat{}, err
		}
		if i >= warm {
			d = append(d, time.Since(t0))
		}
	}
	return newLat(d), nil
}

// alternate returns 2 for even i and 0.5 for odd: repeated in-place scaling
// keeps the values exact and bounded.
func alternate(i int) float64 {
	if i%2 == 0 {
		return 2
	}
	return 0.5
}

// importHost allocates n bytes of page-aligned host memory filled with v
// and imports it into dev.
func importHost(dev backend.Device, dt backend.DType, n int, v float64) ([]byte, backend.Buffer, error) {
	imp, ok := dev.(backend.Importer)
	if !ok {
		return nil, nil, fmt.Errorf("device cannot import host memory: %w", backend.ErrUnsupported)
	}
	mem, err := backend.AllocHostMemory(n)
	if err != nil {
		return nil, nil, err
	}
	copy(mem, pattern(dt, len(mem), v))
	b, err := imp.Import(mem)
	if err != nil {
		backend.FreeHostMemory(mem)
		return nil, nil, err
	}
	return mem, b, nil
}

func shimBench(ctx context.Context, bk backend.Backend, p params, res *Results, skip map[string]bool) error {
	dev, err := bk.Open(p.Device, backend.OpenOptions{})
	if err != nil {
		return err
	}
	defer dev.Close()
	s := dev.Stream()
	c := &res.Ceilings
	dts := []backend.DType{backend.F32}
	if dev.Info().Float64 {
		dts = append(dts, backend.F64)
	}

	if !skip["ceilings"] {
		// In-place scale kernel: bytes read + written per dispatch = 2 x size.
		if err := func() error {
			buf, err := dev.Alloc(p.Size, backend.DeviceLocal)
			if err != nil {
				return err
			}
			defer buf.Close()
			for _, dt := range dts {
				if err := fill(buf, dt, 1); err != nil {
					return err
				}
				r := backend.Region{Buf: buf, Len: p.Size / dt.Size() * dt.Size()}
				times, err := timeBatch(ctx, s, p.Warmup, p.Reps, func() error {
					for i := 0; i < p.Batch; i++ {
						if err := s.Scale(dt, r, r, alternate(i)); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					return err
				}
				bw := newBW(int64(2*r.Len*p.Batch), times)
				if dt == backend.F64 {
					c.ScaleF64 = bw
				} else {
					c.ScaleF32 = bw
				}
				logf("ceiling: in-place scale %v, %d MiB x %d per submit: %.1f GB/s (best %.1f)", dt, r.Len>>20, p.Batch, bw.GBps, bw.BestGBps)
			}
			return nil
		}(); err != nil {
			res.errorf("ceiling scale", "%v", err)
		}

		// Pinned copies: imported host memory <-> device-local, one copy per submit.
		if err := copyCeilings(ctx, bk, dev, p, res); err != nil {
			res.errorf("ceiling copies", "%v", err)
		}
		if !skip["mixed"] {
			if err := mixedDuplex(ctx, bk, p, res); err != nil {
				res.errorf("mixed duplex", "%v", err)
			}
		}

		// Latency: a tiny copy; a 1-element dispatch; a small round trip.
		if err := func() error {
			small, err := dev.Alloc(256, backend.DeviceLocal)
			if err != nil {
				return err
			}
			defer small.Close()
			a := backend.Region{Buf: small, Off: 0, Len: 4}
			b := backend.Region{Buf: small, Off: 128, Len: 4}
			if c.SubmitFence, err = timeLat(ctx, s, 50, p.LatIters, func(int) error { return s.Copy(b, a) }); err != nil {
				return err
			}
			logf("ceiling: tiny copy + submit + fence wait: median %.1f us, p99 %.1f us", c.SubmitFence.MedianUS, c.SubmitFence.P99US)
			if c.Dispatch, err = timeLat(ctx, s, 50, p.LatIters, func(i int) error { return s.Scale(backend.F32, a, a, alternate(i)) }); err != nil {
				return err
			}
			logf("ceiling: 1-element dispatch + submit + fence wait: median %.1f us, p99 %.1f us", c.Dispatch.MedianUS, c.Dispatch.P99US)
			memIn, in, err := importHost(dev, backend.F32, p.LatBytes, 1)
			if err != nil {
				return err
			}
			defer backend.FreeHostMemory(memIn)
			defer in.Close()
			memOut, out, err := importHost(dev, backend.F32, p.LatBytes, 0)
			if err != nil {
				return err
			}
			defer backend.FreeHostMemory(memOut)
			defer out.Close()
			work, err := dev.Alloc(p.LatBytes, backend.DeviceLocal)
			if err != nil {
				return err
			}
			defer work.Close()
			n := p.LatBytes / 4 * 4
			w := backend.Region{Buf: work, Len: n}
			c.RoundTrip, err = timeLat(ctx, s, 50, p.LatIters, func(i int) error {
				if err := s.Copy(w, backend.Region{Buf: in, Len: n}); err != nil {
					return err
				}
				if err := s.Scale(backend.F32, w, w, 2); err != nil {
					return err
				}
				return s.Copy(backend.Region{Buf: out, Len: n}, w)
			})
			if err != nil {
				return err
			}
			logf("ceiling: %d B round trip (copy in, kernel, copy out, one submit): median %.1f us, p99 %.1f us", n, c.RoundTrip.MedianUS, c.RoundTrip.P99US)
			return nil
		}(); err != nil {
			res.errorf("ceiling latency", "%v", err)
		}
	}

	if !skip["t1"] {
		for _, dt := range dts {
			for _, k := range p.ReduceInputs {
				if err := reduceBench(ctx, dev, dt, k, p, res); err != nil {
					res.errorf("t1", "%v x%d: %v", dt, k, err)
				}
			}
		}
	}
	return nil
}

func reduceBench(ctx context.Context, dev backend.Device, dt backend.DType, k int, p params, res *Results) error {
	s := dev.Stream()
	n := p.ReduceSize / dt.Size() * dt.Size()
	srcs := make([]backend.Region, k)
	for i := range srcs {
		b, err := dev.Alloc(n, backend.DeviceLocal)
		if err != nil {
			return err
		}
		defer b.Close()
		if err := fill(b, dt, float64(i+1)); err != nil {
			return err
		}
		srcs[i] = backend.Region{Buf: b, Len: n}
	}
	out, err := dev.Alloc(n, backend.DeviceLocal)
	if err != nil {
		return err
	}
	defer out.Close()
	dst := backend.Region{Buf: out, Len: n}
	times, err := timeBatch(ctx, s, p.Warmup, p.Reps, func() error {
		for i := 0; i < p.Batch; i++ {
			if err := s.Reduce(backend.Sum, dt, dst, srcs, 1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Spot-check the result: sum of 1..k.
	got := make([]byte, 64)
	if err := out.Read(0, got); err != nil {
		return err
	}
	want := float64(k * (k + 1) / 2)
	var v float64
	if dt == backend.F64 {
		v = math.Float64frombits(binary.LittleEndian.Uint64(got))
	} else {
		v = float64(math.Float32frombits(binary.LittleEndian.Uint32(got)))
	}
	if v != want {
		return fmt.Errorf("reduce result %v, want %v", v, want)
	}
	f := ReduceFig{DType: dt.String(), Inputs: k, BW: newBW(int64((k+1)*n*p.Batch), times)}
	logf("T1: reduce %d x %d MiB %v, %d per submit: %.1f GB/s (best %.1f)", k, n>>20, dt, p.Batch, f.BW.GBps, f.BW.BestGBps)
	res.T1 = append(res.T1, f)
	return nil
}

// copyCeilings measures pinned H2D, D2H (one queue) and both at once (two
// logical devices, two queues) with vkCmdCopyBuffer.
func copyCeilings(ctx context.Context, bk backend.Backend, dev backend.Device, p params, res *Results) error {
	c := &res.Ceilings
	mem, host, err := importHost(dev, backend.F32, p.Size, 1)
	if err != nil {
		return err
	}
	defer backend.FreeHostMemory(mem)
	defer host.Close()
	dl, err := dev.Alloc(p.Size, backend.DeviceLocal)
	if err != nil {
		return err
	}
	defer dl.Close()
	s := dev.Stream()
	hr := backend.Region{Buf: host, Len: p.Size}
	dr := backend.Region{Buf: dl, Len: p.Size}
	for _, dir := range []string{"H2D", "D2H"} {
		times, err := timeBatch(ctx, s, p.Warmup, p.Reps, func() error {
			if dir == "H2D" {
				return s.Copy(dr, hr)
			}
			return s.Copy(hr, dr)
		})
		if err != nil {
			return err
		}
		bw := newBW(int64(p.Size), times)
		if dir == "H2D" {
			c.H2DPinned = bw
		} else {
			c.D2HPinned = bw
		}
		logf("ceiling: pinned %s copy %d MiB: %.1f GB/s (best %.1f)", dir, p.Size>>20, bw.GBps, bw.BestGBps)
	}

	// Both directions in one dispatch: a ReduceMulti pass with one source,
	// hr (host memory, read over PCIe), and two destinations, dr (device
	// memory) and ho (host memory, written over PCIe): p.Size bytes each
	// way.
	if m, ok := s.(backend.MultiReducer); ok {
		memOut, ho, err := importHost(dev, backend.F32, p.Size, 0)
		if err != nil {
			return err
		}
		defer backend.FreeHostMemory(memOut)
		defer ho.Close()
		dsts := []backend.Region{dr, {Buf: ho, Len: p.Size}}
		times, err := timeBatch(ctx, s, p.Warmup, p.Reps, func() error {
			return m.ReduceMulti(backend.Sum, backend.F32, dsts, []backend.Region{hr}, 1)
		})
		if err != nil {
			return err
		}
		if got := binary.LittleEndian.Uint32(memOut[len(memOut)-4:]); got != math.Float32bits(1) {
			return fmt.Errorf("duplex pass: last element %#x, want 1.0", got)
		}
		c.Duplex = newBW(int64(2*p.Size), times)
		logf("ceiling: one dispatch reading %d MiB of host memory, writing it to device and host memory: %.1f GB/s both directions (best %.1f)",
			p.Size>>20, c.Duplex.GBps, c.Duplex.BestGBps)
	}

	// Both directions at once: a second logical device (its own queue)
	// copies device -> host while the first copies host -> device.
	dev2, err := bk.Open(p.Device, backend.OpenOptions{})
	if err != nil {
		return err
	}
	defer dev2.Close()
	mem2, host2, err := importHost(dev2, backend.F32, p.Size, 1)
	if err != nil {
		return err
	}
	defer backend.FreeHostMemory(mem2)
	defer host2.Close()
	dl2, err := dev2.Alloc(p.Size, backend.DeviceLocal)
	if err != nil {
		return err
	}
	defer dl2.Close()
	s2 := dev2.Stream()
	h2, d2 := backend.Region{Buf: host2, Len: p.Size}, backend.Region{Buf: dl2, Len: p.Size}
	times, err := timeConcurrent(p.Warmup, p.Reps, 2, func(i int) error {
		if i == 0 {
			if err := s.Copy(dr, hr); err != nil {
				return err
			}
			return submitWait(ctx, s)
		}
		if err := s2.Copy(h2, d2); err != nil {
			return err
		}
		return submitWait(ctx, s2)
	})
	if err != nil {
		return err
	}
	c.BidirPinned = newBW(int64(2*p.Size), times)
	logf("ceiling: pinned H2D + D2H at once on two queues, %d MiB each: %.1f GB/s both directions (best %.1f)", p.Size>>20, c.BidirPinned.GBps, c.BidirPinned.BestGBps)
	return nil
}
