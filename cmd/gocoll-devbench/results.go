package main

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Results is everything one run measured. Bandwidths are GB/s (1e9 bytes
// per second), latencies microseconds, times seconds.
type Results struct {
	Date      string     `json:"date"`
	Host      string     `json:"host,omitempty"`
	GoVersion string     `json:"go"`
	GOOS      string     `json:"goos"`
	Command   string     `json:"command"`
	Device    DeviceMeta `json:"device"`
	Params    params     `json:"params"`

	Ceilings Ceilings    `json:"ceilings"`
	Mixed    []MixedFig  `json:"mixed_duplex,omitempty"`
	T1       []ReduceFig `json:"t1_reduce"`
	T2a      []ARFig     `json:"t2a_allreduce_pinned"`
	T2b      []ARFig     `json:"t2b_allreduce_slices"`
	T3       []LatFig    `json:"t3_latency"`
	T3b      *TensorFig  `json:"t3b_tensor_latency,omitempty"`
	T6       []TensorFig `json:"t6_tensor_bandwidth,omitempty"`
	T7       []T7Fig     `json:"t7_slices_n_ranks,omitempty"`
	Torch    Torch       `json:"torch"`
	Targets  []Target    `json:"targets"`
	Errors   []string    `json:"errors,omitempty"`

	save func() error
}

// DeviceMeta is the measured device as the backend reports it.
type DeviceMeta struct {
	Backend    string `json:"backend"`
	Name       string `json:"name"`
	Driver     string `json:"driver"`
	API        string `json:"api"`
	Type       string `json:"type"`
	HostImport bool   `json:"host_import"`
	Float64    bool   `json:"float64"`
	MaxAlloc   int64  `json:"max_alloc_bytes"`
}

// BW is a bandwidth figure: bytes moved per timed repetition and the
// repetitions' times.
type BW struct {
	Bytes    int64   `json:"bytes"`
	MedianS  float64 `json:"median_s"`
	MinS     float64 `json:"min_s"`
	GBps     float64 `json:"GBps"`      // Bytes / MedianS
	BestGBps float64 `json:"best_GBps"` // Bytes / MinS
	N        int     `json:"n"`
	Err      string  `json:"error,omitempty"`
}

func newBW(bytes int64, times []float64) BW {
	if len(times) == 0 {
		return BW{Bytes: bytes}
	}
	med, mn := median(times), minOf(times)
	b := BW{Bytes: bytes, MedianS: med, MinS: mn, N: len(times)}
	if med > 0 {
		b.GBps = float64(bytes) / med / 1e9
	}
	if mn > 0 {
		b.BestGBps = float64(bytes) / mn / 1e9
	}
	return b
}

// Lat is a latency distribution in microseconds.
type Lat struct {
	MedianUS float64 `json:"median_us"`
	P99US    float64 `json:"p99_us"`
	MinUS    float64 `json:"min_us"`
	MeanUS   float64 `json:"mean_us"`
	N        int     `json:"n"`
	Err      string  `json:"error,omitempty"`
}

func newLat(d []time.Duration) Lat {
	if len(d) == 0 {
		return Lat{}
	}
	xs := make([]float64, len(d))
	sum := 0.0
	for i, v := range d {
		xs[i] = float64(v) / 1e3
		sum += xs[i]
	}
	sort.Float64s(xs)
	return Lat{MedianUS: quantile(xs, 0.5), P99US: quantile(xs, 0.99), MinUS: xs[0], MeanUS: sum / float64(len(xs)), N: len(xs)}
}

// Ceilings are the device's limits measured through gocoll's backend.
type Ceilings struct {
	ScaleF32    BW  `json:"scale_inplace_f32"` // bytes read + written by an in-place scale kernel
	ScaleF64    BW  `json:"scale_inplace_f64"`
	H2DPinned   BW  `json:"h2d_pinned"` // imported host memory -> device-local, vkCmdCopyBuffer
	D2HPinned   BW  `json:"d2h_pinned"`
	BidirPinned BW  `json:"bidir_pinned"` // H2D and D2H at once on two queues (bytes of both)
	Duplex      BW  `json:"duplex"`       // one dispatch reading host memory and writing host memory (bytes of both)
	SubmitFence Lat `json:"submit_fence"` // one tiny copy, submit, fence wait
	Dispatch    Lat `json:"dispatch_fence"`
	RoundTrip   Lat `json:"roundtrip"` // latency-bytes copy in from pinned, scale kernel, copy out, one submit
}

// ReduceFig is one T1 figure.
type ReduceFig struct {
	DType   string  `json:"dtype"`
	Inputs  int     `json:"inputs"`
	BW      BW      `json:"bw"`
	Ceiling float64 `json:"scale_ceiling_GBps"`
	Ratio   float64 `json:"ratio"`
}

// ARFig is one T2 figure: a 2-rank all-reduce with one strategy.
type ARFig struct {
	Strategy string  `json:"strategy"`
	Depth    int     `json:"depth"`
	Picked   string  `json:"auto_picked,omitempty"`
	Pinned   bool    `json:"pinned"`
	Bytes    int64   `json:"bytes_per_rank"`
	MedianS  float64 `json:"median_s"`
	MinS     float64 `json:"min_s"`
	N        int     `json:"n"`
	// Per call, summed over the ranks, from the backend counters.
	FromHost int64   `json:"bytes_from_host_per_call"`
	ToHost   int64   `json:"bytes_to_host_per_call"`
	HostGBps float64 `json:"host_GBps"` // (FromHost+ToHost)/MedianS
	// Bytes of the caller's tensors (2 ranks x in and out) per second.
	TensorGBps float64 `json:"tensor_GBps"`
	Ratio      float64 `json:"ratio"` // T2a: HostGBps / the duplex ceiling; T2b: torch pageable time / MedianS
	Allocs     float64 `json:"allocs_per_call"`
	Objects    float64 `json:"objects_per_call"`
	Err        string  `json:"error,omitempty"`
}

// LatFig is one T3 figure.
type LatFig struct {
	Strategy string  `json:"strategy"`
	Picked   string  `json:"auto_picked,omitempty"`
	Lat      Lat     `json:"latency"`
	Allocs   float64 `json:"allocs_per_call"`  // Go heap allocations per call, both ranks, timed window
	Objects  float64 `json:"objects_per_call"` // Vulkan objects created per call, both ranks
	// The process's mallocs in the timed window and in each further window
	// of as many calls (counted inside rank 0's loop, every rank calling),
	// the most of them per call, and the timed phase's mallocs counted from
	// outside (its margins and the wake-ups of the rank goroutines too).
	AllocWindows []uint64 `json:"mallocs_per_window,omitempty"`
	MaxAllocs    float64  `json:"max_allocs_per_call"`
	PhaseMallocs uint64   `json:"phase_mallocs"`
	Err          string   `json:"error,omitempty"`
}

// Target is one verdict.
type Target struct {
	ID        string  `json:"id"`
	What      string  `json:"what"`
	Measured  string  `json:"measured"`
	Threshold string  `json:"threshold"`
	Ratio     float64 `json:"ratio"`
	Verdict   string  `json:"verdict"` // PASS, FAIL, N/A
}

func (r *Results) errorf(section, format string, a ...any) {
	msg := section + ": " + fmt.Sprintf(format, a...)
	logf("ERROR %s", msg)
	r.Errors = append(r.Errors, msg)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return quantile(s, 0.5)
}

// quantile of sorted xs, linear interpolation.
func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	f := pos - float64(lo)
	return s[lo]*(1-f) + s[hi]*f
}

func minOf(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}
