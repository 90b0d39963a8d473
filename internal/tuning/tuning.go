// Package tuning is the cost model that Auto chooses an all-reduce
// algorithm by: the time of the primitives the algorithms are built of,
// measured once on a device (Measure) for the ranks of a group that share
// them (Shared; MeasureOnce: bounded in time, a sub-group taking over its
// parent's), and each algorithm's time predicted from them
// (Model.Predict).
package tuning

import (
	"context"
	"math"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// Algo is an all-reduce algorithm the model predicts (collective's
// strategies but Auto).
type Algo uint8

const (
	Direct Algo = iota
	Pipelined
	Ring
	Tree
	Hierarchical
	Host
)

// ParCopyMin is the size from which a host copy is spread over the cores
// (internal/parreduce's Batch).
const ParCopyMin = parreduce.CopyMin

// Model is the measured constants.
type Model struct {
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
	Err       error   // a failed measurement: the caller falls back
	Measured  time.Duration
	SlotBytes int
	// Links says how a received slot reaches the receiver's device: read
	// in place from device memory (ranks sharing memory), read in place
	// from host memory both devices import, or copied on the CPU into the
	// receiver's inbox.
	Links LinkPath
	// CPU says the device is the CPU itself (the host backend): Direct,
	// Pipelined and Host then run as one CPU pass straight between the
	// ranks' memory (internal/direct).
	CPU bool
}

// LinkPath is how link slots travel between the ranks of a group.
type LinkPath uint8

const (
	LinksCopied   LinkPath = iota // a host copy into the receiver's inbox
	LinksShared                   // the sender's slot in device memory, read in place
	LinksImported                 // host memory both devices import, read in place
)

func median(xs []float64) float64 {
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

// Measure times on dev the primitives the algorithms are built of, into
// m (which keeps SlotBytes and Links). Under the race detector it times
// the parallel memcpy on 16 times fewer bytes (measureShift).
func Measure(ctx context.Context, dev backend.Device, m *Model) error {
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
	// Parallel memcpy of 8 MiB over the cores, as the process's pool
	// (internal/parreduce's Batch) does (512 KiB under the race detector).
	const par = 8 << 20 >> measureShift
	big := make([]byte, 2*par)
	workers := runtime.GOMAXPROCS(0)
	t, _ = timeIt(3, func() error {
		var wg sync.WaitGroup
		per := par / workers
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				copy(big[w*per:(w+1)*per], big[par+w*per:par+(w+1)*per])
			}(w)
		}
		wg.Wait()
		return nil
	})
	m.ParMemcpy = math.Max(par/math.Max(t, 1e-9), m.Memcpy)
	// The CPU reduction of strategy Host: two 256 KiB f32 inputs.
	const cpuBytes = 256 << 10
	t, _ = timeIt(5, func() error {
		hostmath.ReduceStrided(backend.F32, backend.Sum, big[:cpuBytes/2], big[cpuBytes:2*cpuBytes], cpuBytes/8, 0, 2, cpuBytes/8, 1)
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
			hostmath.ReduceStrided(dt, backend.Sum, big[:typeBytes/2], big[typeBytes:2*typeBytes], cnt, 0, 2, cnt, 1)
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

// Predict returns the modelled time in seconds of algorithm s for bytes
// bytes of dt on n ranks (depth: Pipelined's chunks in flight; local:
// Hierarchical's group size); +Inf where s does not apply.
func (m *Model) Predict(s Algo, dt backend.DType, bytes, n, depth, local int) float64 {
	B := float64(bytes)
	N := float64(n)
	slot := float64(m.SlotBytes)
	// Host copies of a call's slices: parallel over the cores from 1 MiB.
	memcpy := func(x float64) float64 {
		if x >= ParCopyMin {
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
		case LinksShared:
			return 2*(m.Submit+m.Handoff) + 2*x/m.Reduce
		case LinksImported:
			return 2*(m.Submit+m.Handoff) + x/m.Copy + x/m.HostReduce
		}
		return 2*(m.Submit+m.Handoff) + x/m.Copy + memcpy(x) + x/m.HostReduce
	}
	// Upload and download of the device buffer: host copies between the
	// caller's slices and mapped memory, and device copies.
	updown := 2*B/m.Copy + 2*memcpy(B)
	cpu := m.CPUReduce
	if dt.Valid() && m.CPUByType[dt] > 0 {
		cpu = m.CPUByType[dt]
	}
	if m.CPU && (s == Direct || s == Pipelined || s == Host) {
		// Two rendezvous; each rank reads its 1/N slice of every rank's
		// input (B bytes), reduces it on the CPU and stores it into every
		// rank's output (B bytes), in one pass.
		return 2*N*m.Handoff + B/cpu + memcpy(B)
	}
	switch s {
	case Host:
		// Two rendezvous; each rank copies its 1/N slice from every rank
		// (B bytes), reduces it on one core and writes it into every
		// rank's output (B bytes).
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
