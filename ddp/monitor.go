package ddp

import (
	"math/bits"
	"slices"
	"time"

	"github.com/gocoll/gocoll/collective"
)

// sizeClass buckets a transfer by its size: one class per power of four
// bytes, so a strategy's record at 4 KiB does not judge it at 64 MiB.
func sizeClass(bytes int) int {
	if bytes <= 1 {
		return 0
	}
	return (bits.Len(uint(bytes-1)) + 1) / 2
}

// sample is one measured collective.
type sample struct {
	bytes int
	secs  float64
}

// window keeps the last len(buf) samples.
type window struct {
	buf     []sample
	next    int
	n       int
	total   int64     // samples ever added
	scratch []float64 // for the median
}

func (w *window) add(s sample) {
	w.total++
	w.buf[w.next] = s
	w.next = (w.next + 1) % len(w.buf)
	if w.n < len(w.buf) {
		w.n++
	}
}

// secsPerByte is the median over the window of the samples' times per
// byte (0 when empty). The median, not the mean: one slow sample (a
// strategy's first run at a size, which builds its pipelines and imports
// its memory, or a pause of the process) does not decide a comparison.
func (w *window) secsPerByte() float64 {
	x := w.scratch[:0]
	for i := 0; i < w.n; i++ {
		if b := w.buf[i].bytes; b > 0 {
			x = append(x, w.buf[i].secs/float64(b))
		}
	}
	if len(x) == 0 {
		return 0
	}
	slices.Sort(x)
	if len(x)%2 == 1 {
		return x[len(x)/2]
	}
	return (x[len(x)/2-1] + x[len(x)/2]) / 2
}

// monitor records the time and size of every collective a Sync runs,
// per strategy and size class, over a window of recent samples. Steps that
// followed Auto are recorded under Auto (whatever it picked), so that Auto
// is compared with the candidates step for step.
type monitor struct {
	window     int
	perClass   map[[2]int]*window // (strategy, size class)
	totalBytes int64
	totalTime  time.Duration
	ops        int64
}

func newMonitor(size int) *monitor {
	if size < 1 {
		size = 1
	}
	return &monitor{window: size, perClass: map[[2]int]*window{}}
}

// record adds one sample: ops collectives of strategy s that together
// reduced bytes in d (one step's worth: SyncAll's buckets are one sample, at
// the size class of the whole model, which is where the selector compares).
func (m *monitor) record(s collective.Strategy, bytes int, d time.Duration, ops int) {
	m.totalBytes += int64(bytes)
	m.totalTime += d
	m.ops += int64(ops)
	key := [2]int{int(s), sizeClass(bytes)}
	w := m.perClass[key]
	if w == nil {
		w = &window{buf: make([]sample, m.window), scratch: make([]float64, 0, m.window)}
		m.perClass[key] = w
	}
	w.add(sample{bytes: bytes, secs: d.Seconds()})
}

// secsPerByte returns strategy s's recent time per byte at size class cls
// (the median over its window), and how many samples back it.
func (m *monitor) secsPerByte(s collective.Strategy, cls int) (float64, int) {
	w := m.perClass[[2]int{int(s), cls}]
	if w == nil {
		return 0, 0
	}
	return w.secsPerByte(), w.n
}

// count returns how many samples of strategy s at size class cls were ever
// recorded (the window keeps the last of them).
func (m *monitor) count(s collective.Strategy, cls int) int64 {
	if w := m.perClass[[2]int{int(s), cls}]; w != nil {
		return w.total
	}
	return 0
}

// averageBandwidth is bytes per second over every recorded operation.
func (m *monitor) averageBandwidth() float64 {
	if m.totalTime <= 0 {
		return 0
	}
	return float64(m.totalBytes) / m.totalTime.Seconds()
}
