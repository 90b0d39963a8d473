package collective

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// costModel predicts each strategy's time from constants measured once per
// group on a rank's device (the first time Auto must choose). Every rank
// uses the same measured constants, so every rank makes the same choice for
// the same call; the choice is also part of the call's fingerprint, which
// would catch a disagreement before any data moved.
type costModel struct {
	once sync.Once
	done atomic.Bool // once has run
	// Measured:
	Submit     float64 // seconds: a small submission and its fence wait
	Memcpy     float64 // bytes/s: a host memcpy into mapped memory, one core
	ParMemcpy  float64 // bytes/s: the same spread over the cores
	Copy       float64 // bytes/s: a device copy host-visible -> device-local
	Reduce     float64 // bytes/s written by a 2-input reduce kernel in device memory
	HostReduce float64 // bytes/s read by a reduce kernel whose inputs are in host memory
	CPUReduce  float64 // bytes/s read by the CPU reducing two f32 inputs (strategy Host), one core
	// CPUByType is CPUReduce for each element type (the 16-bit floats'
	// conversions and the 8-bit types' per-byte loop make them several
	// times slower per byte than float32); 0 where not measured.
	CPUByType [backend.NumDTypes]float64
	Handoff   float64 // seconds: one rank-to-rank handoff (a barrier)
	Err       error   // a failed measurement falls back to ring
	Measured  time.Duration
	SlotBytes int
	// Links says how a received slot reaches the receiver's device: read
	// in place from device memory (ranks sharing memory), read in place
	// from host memory both devices import, or copied on the CPU into the
	// receiver's inbox.
	Links linkPath
}

// linkPath is how link slots travel between the ranks of a group.
type linkPath uint8

const (
	linksCopied   linkPath = iota // a host copy into the receiver's inbox
	linksShared                   // the sender's slot in device memory, read in place
	linksImported                 // host memory both devices import, read in place
)

// linkPathOf returns how g's links move slots (within its process).
func linkPathOf(g *Group) linkPath {
	if g.tr != nil {
		return linksCopied
	}
	if g.sharedMem {
		return linksShared
	}
	for _, d := range g.devs {
		if _, ok := d.(backend.Importer); !ok {
			return linksCopied
		}
	}
	return linksImported
}

// modelConstants returns the group's cost-model constants, measuring them on rank's
// device if that has not happened yet (tests).
// The measurement runs on rank's device as an operation of its Comm: it
// fails with ErrConcurrentUse while the Comm is in use by another goroutine.
func (g *Group) modelConstants(rank int) (Submit, Memcpy, Copy, Reduce, Handoff float64, err error) {
	if rank < 0 || rank >= g.nl {
		return 0, 0, 0, 0, 0, invalidArg("modelConstants: rank %d out of range", rank)
	}
	m, err := g.measureOn(g.comms[rank])
	if err != nil {
		return 0, 0, 0, 0, 0, err
	}
	return m.Submit, m.Memcpy, m.Copy, m.Reduce, m.Handoff, m.Err
}

// measureOn measures the model (once per group) as an operation of c,
// from outside any collective.
func (g *Group) measureOn(c *Comm) (m *costModel, err error) {
	owned, err := c.enter(context.Background(), "cost model", false)
	if err != nil {
		return nil, err
	}
	defer c.leave(owned, &err)
	return g.measure(c), nil
}

func (g *Group) measure(c *Comm) *costModel {
	m := &g.model
	m.once.Do(func() {
		start := time.Now()
		m.SlotBytes = g.slotBytes
		m.Links = linkPathOf(g)
		// Bounded: a device that does not finish its work makes the
		// measurement fail (and Auto fall back) instead of hanging every
		// rank in this Once.
		ctx, cancel := context.WithTimeout(context.Background(), g.cfg.CommunicationTimeout)
		m.Err = measureDevice(ctx, c.dev, m)
		cancel()
		m.Measured = time.Since(start)
		m.done.Store(true)
		if g.log != nil {
			g.log.Info("gocoll: cost model measured", "rank", c.rank, "submit_us", m.Submit*1e6,
				"memcpy_GBps", m.Memcpy/1e9, "par_memcpy_GBps", m.ParMemcpy/1e9, "copy_GBps", m.Copy/1e9,
				"reduce_GBps", m.Reduce/1e9, "host_reduce_GBps", m.HostReduce/1e9, "cpu_reduce_GBps", m.CPUReduce/1e9,
				"handoff_us", m.Handoff*1e6, "took", m.Measured, "err", m.Err)
		}
	})
	return m
}

func median(xs []float64) float64 {
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

// measureDevice times the primitives the algorithms are built of.
func measureDevice(ctx context.Context, dev backend.Device, m *costModel) error {
	const size = 1 << 20
	hv, err := dev.Alloc(2*size, backend.HostVisible)
	if err != nil {
		return err
	}
	defer hv.Close()
	dl, err := dev.Alloc(size, backend.DeviceLocal)
	if err != nil {
		return err
	}
	defer dl.Close()
	st := dev.Stream()
	timeIt := func(reps int, f func() error) (float64, error) {
		xs := make([]float64, reps)
		for i := range xs {
			t := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			xs[i] = time.Since(t).Seconds()
		}
		return median(xs), nil
	}
	submit := func() error {
		f, err := st.Submit()
		if err != nil {
			return err
		}
		return f.Wait(ctx)
	}
	// The latency of one small submission and its fence (an empty submit
	// may not reach the queue at all).
	tiny := func() error {
		if err := st.Copy(backend.Region{Buf: dl, Len: 16}, backend.Region{Buf: hv, Len: 16}); err != nil {
			return err
		}
		return submit()
	}
	if m.Submit, err = timeIt(9, tiny); err != nil {
		return err
	}
	b := hv.Bytes()
	t, _ := timeIt(5, func() error { copy(b[:size], b[size:]); return nil })
	m.Memcpy = size / math.Max(t, 1e-9)
	t, err = timeIt(5, func() error {
		if err := st.Copy(backend.Region{Buf: dl, Len: size}, backend.Region{Buf: hv, Len: size}); err != nil {
			return err
		}
		return submit()
	})
	if err != nil {
		return err
	}
	m.Copy = size / math.Max(t-m.Submit, 1e-9)
	srcs := []backend.Region{{Buf: dl, Len: size}, {Buf: dl, Len: size}}
	t, err = timeIt(5, func() error {
		if err := st.Reduce(backend.Sum, backend.F32, backend.Region{Buf: dl, Len: size}, srcs[:2], 1); err != nil {
			return err
		}
		return submit()
	})
	if err != nil {
		return err
	}
	m.Reduce = size / math.Max(t-m.Submit, 1e-9)
	hsrcs := []backend.Region{{Buf: hv, Len: size / 2}, {Buf: hv, Off: size, Len: size / 2}}
	t, err = timeIt(5, func() error {
		if err := st.Reduce(backend.Sum, backend.F32, backend.Region{Buf: dl, Len: size / 2}, hsrcs, 1); err != nil {
			return err
		}
		return submit()
	})
	if err != nil {
		return err
	}
	m.HostReduce = size / math.Max(t-m.Submit, 1e-9)
	// Parallel memcpy of 8 MiB over the cores, as the copy pool does.
	big := make([]byte, 16<<20)
	workers := runtime.GOMAXPROCS(0)
	t, _ = timeIt(3, func() error {
		var wg sync.WaitGroup
		per := (8 << 20) / workers
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				copy(big[w*per:(w+1)*per], big[8<<20+w*per:8<<20+(w+1)*per])
			}(w)
		}
		wg.Wait()
		return nil
	})
	m.ParMemcpy = math.Max(8<<20/math.Max(t, 1e-9), m.Memcpy)
	// The CPU reduction of strategy Host: two 256 KiB f32 inputs.
	const cpuBytes = 256 << 10
	t, _ = timeIt(5, func() error {
		reduceHost(backend.F32, big[:cpuBytes/2], big[cpuBytes:2*cpuBytes], cpuBytes/8, 0, 2, cpuBytes/8, Sum, 1)
		return nil
	})
	m.CPUReduce = cpuBytes / math.Max(t, 1e-9)
	// The same for every other element type, on smaller inputs.
	const typeBytes = 64 << 10
	for dt := backend.DType(0); dt < backend.NumDTypes; dt++ {
		if dt == backend.F32 {
			m.CPUByType[dt] = m.CPUReduce
			continue
		}
		cnt := typeBytes / 2 / dt.Size()
		t, _ = timeIt(3, func() error {
			reduceHost(dt, big[:typeBytes/2], big[typeBytes:2*typeBytes], cnt, 0, 2, cnt, Sum, 1)
			return nil
		})
		m.CPUByType[dt] = typeBytes / math.Max(t, 1e-9)
	}
	// A handoff between two goroutines through a channel, as a barrier does.
	ping, pong := make(chan struct{}), make(chan struct{})
	go func() {
		for range ping {
			pong <- struct{}{}
		}
	}()
	t, _ = timeIt(21, func() error { ping <- struct{}{}; <-pong; return nil })
	close(ping)
	m.Handoff = t / 2
	return nil
}

// predict returns the modelled time of strategy s for bytes bytes of dt on n
// ranks.
func (m *costModel) predict(s Strategy, dt backend.DType, bytes, n, depth, local int) float64 {
	B := float64(bytes)
	N := float64(n)
	slot := float64(m.SlotBytes)
	// Host copies of a call's slices: parallel over the cores from 1 MiB.
	memcpy := func(x float64) float64 {
		if x >= parCopyMin {
			return x / m.ParMemcpy
		}
		return x / m.Memcpy
	}
	// One exchange step of x bytes: one submission and fence wait, one
	// hand-off between goroutines, and the slot's way: a device copy into
	// the outbox, a host copy into the peer's inbox and the kernel reading
	// it from host memory; without the host copy where the receiver reads
	// the sender's imported slot in place; all in device memory where the
	// ranks share it.
	// The sender's submission and fence wait come before its post, and the
	// receiver's after its take: a step's critical path holds both.
	step := func(x float64) float64 {
		switch m.Links {
		case linksShared:
			return 2*(m.Submit+m.Handoff) + 2*x/m.Reduce
		case linksImported:
			return 2*(m.Submit+m.Handoff) + x/m.Copy + x/m.HostReduce
		}
		return 2*(m.Submit+m.Handoff) + x/m.Copy + memcpy(x) + x/m.HostReduce
	}
	// Upload and download of the device buffer: host copies between the
	// caller's slices and mapped memory, and device copies.
	updown := 2*B/m.Copy + 2*memcpy(B)
	switch s {
	case Host:
		// Two rendezvous; each rank copies its 1/N slice from every rank
		// (B bytes), reduces it on one core and writes it into every
		// rank's output (B bytes).
		cpu := m.CPUReduce
		if dt.Valid() && m.CPUByType[dt] > 0 {
			cpu = m.CPUByType[dt]
		}
		return 2*N*m.Handoff + memcpy(B) + B/cpu + memcpy(B)
	case Direct, Pipelined:
		// Two rendezvous; each rank gathers its 1/N slice from every rank
		// (B bytes), the kernel reads them from host memory, and the
		// reduced slice goes to every rank's output (B bytes).
		sync := 2 * N * m.Handoff
		gather, scatter := memcpy(B), memcpy(B)
		kernel := B / m.HostReduce
		if s == Direct {
			return sync + gather + kernel + m.Submit + scatter
		}
		d := math.Max(1, math.Min(float64(depth), math.Ceil(B/N/4)))
		return sync + d*m.Submit + math.Max(gather+scatter, kernel) + math.Min(gather+scatter, kernel)/d
	case Ring:
		chunk := B / N
		slices := math.Max(1, math.Ceil(chunk/slot))
		return updown + 2*(N-1)*slices*step(chunk/slices)
	case Tree:
		slices := math.Max(1, math.Ceil(B/slot))
		per := B / slices
		depthT := math.Ceil(math.Log2(N + 1))
		// Pipelined over slices: the last slice arrives depth hops after
		// the first; each internal node handles two children.
		return updown + 2*(slices+depthT)*step(per)*2
	case Hierarchical:
		groups := math.Ceil(N / float64(local))
		if groups <= 1 || float64(local) <= 1 {
			return math.Inf(1) // the same as tree or ring: let those win
		}
		slices := math.Max(1, math.Ceil(B/slot))
		per := B / slices
		inner := 2 * (slices + math.Ceil(math.Log2(float64(local)+1))) * step(per) * 2
		chunk := B / groups
		rs := math.Max(1, math.Ceil(chunk/slot))
		return updown + inner + 2*(groups-1)*rs*step(chunk/rs)
	}
	return math.Inf(1)
}

// autoStrategy picks the strategy with the least modelled time. The first
// call of a group measures the device (a few hundred milliseconds at most,
// on the calling rank's device, while the other ranks' first calls wait for
// it); that time counts against the call's context.
//
// slices says the call's data are host slices (strategy Host applies).
func (c *Comm) autoStrategy(bytes int, dt backend.DType, slices bool) (Strategy, string) {
	g := c.g
	if c.noKernels(dt) {
		return Direct, dt.String() + " reduced on the host (a device has no " + dt.String() + " kernels)"
	}
	if g.tr != nil { // 2 processes or more
		if g.nl > 1 {
			return Hierarchical, "spans processes: reduce inside each process, ring between processes"
		}
		return Ring, "spans processes"
	}
	m := g.measure(c)
	if m.Err != nil {
		return Ring, fmt.Sprintf("cost model unavailable (%v)", m.Err)
	}
	best, bestT := Direct, math.Inf(1)
	for _, s := range autoCandidates {
		if s == Host && !slices {
			continue
		}
		if t := m.predict(s, dt, bytes, g.n, g.cfg.PipelineDepth, g.cfg.LocalGroupSize); t < bestT {
			best, bestT = s, t
		}
	}
	if best == Host {
		return best, "cost model: the CPU reduction is faster than any device path"
	}
	return best, "cost model"
}

// AutoChoice returns the strategy Auto picks for an all-reduce of bytes
// bytes of dt in c's group, and the cost model's time for each strategy
// (none where the model could not be measured), with the model measured, if
// it is not yet, as an operation of c: call it from c's goroutine, or inside
// a function queued with c.Go once the model exists (while c is in use the
// measurement fails over to Ring). The model is the group's (one
// measurement, shared by its ranks), so every rank of one process gets the
// same answer; across processes Auto does not use the model (the choice is
// the same on every rank, the modelled times are each process's own).
func (c *Comm) AutoChoice(bytes int, dt backend.DType) (Strategy, map[Strategy]time.Duration) {
	g := c.g
	out := map[Strategy]time.Duration{}
	m := &g.model
	if !m.done.Load() {
		var err error
		if m, err = g.measureOn(c); err != nil {
			return Ring, out
		}
	}
	s, _ := c.autoStrategy(bytes, dt, true)
	if m.Err == nil {
		for _, st := range autoCandidates {
			t := m.predict(st, dt, bytes, g.n, g.cfg.PipelineDepth, g.cfg.LocalGroupSize)
			if !math.IsInf(t, 0) {
				out[st] = time.Duration(t * 1e9)
			}
		}
	}
	return s, out
}
