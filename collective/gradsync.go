package collective

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// SyncOptions tune a GradientSync beyond the group's Config.
type SyncOptions struct {
	// SwitchCooldown is the least number of steps between two strategy
	// evaluations (and so between two switches). 0 means 50.
	SwitchCooldown int
	// EvaluationWindow is the number of recent samples per strategy and size
	// class the monitor keeps and the selector compares. 0 means 20.
	EvaluationWindow int
	// SwitchThreshold is the least measured speed-up (current time / best
	// time) that makes the selector switch. 0 means 1.2.
	SwitchThreshold float64
	// ProbeSteps is how many steps each other strategy runs during an
	// evaluation, so that it has fresh measurements. 0 means 3.
	ProbeSteps int
	// Candidates are the strategies the selector compares. nil means
	// Direct, Pipelined, Ring, Tree and Hierarchical.
	Candidates []Strategy
	// FusionBytes is the size of the buckets SyncAll packs small tensors
	// into. 0 means 4 MiB.
	FusionBytes int
	// Wire, when set (backend.F16 or backend.BF16), compresses the dense
	// all-reduce of float32 gradients on the wire (ring strategy; see
	// AllReduceWire): Sync's, and each of SyncAll's buckets. The strategy
	// is then always the ring, so the adaptive selector stays idle.
	Wire backend.WireFormat
	// Logger receives the monitor's log lines every
	// Config.BandwidthMonitorInterval steps and one per strategy switch;
	// nil means none (a library is quiet unless asked).
	Logger *slog.Logger
}

// Stats is a snapshot of a GradientSync's counters (all real counts).
type Stats struct {
	AverageBandwidth float64 // bytes per second over every collective run
	Operations       int64   // collectives run (buckets and top-k exchanges included)
	BytesMoved       int64   // bytes of gradient data reduced
	CurrentStrategy  Strategy
	PendingAsync     int   // asynchronous steps not finished
	Steps            int64 // Sync/SyncAll calls
	Switches         int   // strategy switches the selector made
	LastSwitchStep   int64
}

// GradientSync synchronises gradients for one rank of a data-parallel
// training loop (the seed's MultiGpuSync): a mean all-reduce per step, with
// a performance monitor, adaptive strategy selection agreed across ranks,
// optional top-k compression with error feedback, tensor fusion and
// asynchronous steps. Every rank of the group makes the same sequence of
// calls.
//
// A step is a sequence of collectives on the Comm (the selector's probes
// and its agreement included), so steps run one at a time in call order:
// Sync and SyncAll first wait for the SyncAsync steps started before them.
// Config.AdaptiveCommunication applies to the dense all-reduce: with
// Config.GradientCompression (the exchange is two all-gathers) or a Wire
// format (always the ring) there is no strategy to choose, and the
// selector stays idle.
type GradientSync[T Float] struct {
	c        *Comm
	cfg      Config
	opts     SyncOptions
	log      *slog.Logger
	adaptive bool // the selector runs

	mu       sync.Mutex // guards the fields below (async steps run on the comm's worker)
	mon      *Monitor
	cur      Strategy
	step     int64
	lastEval int64
	lastSw   int64
	switches int
	probe    []Strategy // strategies still to probe, one per step, in order
	vec      []float64  // agreement vector (pooled)

	residual []T // error feedback of top-k
	acc      []T
	order    []int
	idx      []float64
	val      []T
	allIdx   []float64
	allVal   []T
	bucket   []T
	flat     []T            // SyncAll's model, concatenated for top-k
	dAcc     backend.Buffer // device copies for top-k selection on the device
	dIdx     backend.Buffer
	dVal     backend.Buffer
	idxBuf   []uint32

	pendMu  sync.Mutex
	pending []*Work
}

// NewGradientSync wraps c. The starting strategy is the group's
// Config.Strategy (Auto: the cost model's choice for each call until the
// selector switches to a fixed one).
func NewGradientSync[T Float](c *Comm, opts SyncOptions) (*GradientSync[T], error) {
	if c == nil {
		return nil, invalidArg("NewGradientSync: nil Comm")
	}
	if opts.SwitchCooldown == 0 {
		opts.SwitchCooldown = 50
	}
	if opts.EvaluationWindow == 0 {
		opts.EvaluationWindow = 20
	}
	if opts.SwitchThreshold == 0 {
		opts.SwitchThreshold = 1.2
	}
	if opts.ProbeSteps == 0 {
		opts.ProbeSteps = 3
	}
	if opts.FusionBytes == 0 {
		opts.FusionBytes = 4 << 20
	}
	if opts.Candidates == nil {
		opts.Candidates = []Strategy{Direct, Pipelined, Ring, Tree, Hierarchical}
	}
	switch {
	case opts.SwitchCooldown < 1:
		return nil, &ConfigError{Field: "SwitchCooldown", Reason: "must be >= 1"}
	case opts.EvaluationWindow < 1:
		return nil, &ConfigError{Field: "EvaluationWindow", Reason: "must be >= 1"}
	case !(opts.SwitchThreshold >= 1) || math.IsInf(opts.SwitchThreshold, 0):
		return nil, &ConfigError{Field: "SwitchThreshold", Reason: "must be finite and >= 1"}
	case opts.ProbeSteps < 1:
		return nil, &ConfigError{Field: "ProbeSteps", Reason: "must be >= 1"}
	case opts.FusionBytes < 8:
		return nil, &ConfigError{Field: "FusionBytes", Reason: "must be >= 8"}
	}
	if opts.Wire != 0 && (dtypeOf[T]() != backend.F32 || (opts.Wire != backend.F16 && opts.Wire != backend.BF16)) {
		return nil, &ConfigError{Field: "Wire", Reason: "wire compression takes float32 gradients and F16 or BF16"}
	}
	for _, s := range opts.Candidates {
		if s <= Auto || s > Host {
			return nil, &ConfigError{Field: "Candidates", Reason: fmt.Sprintf("%s is not a concrete strategy", s)}
		}
	}
	l := opts.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	cfg := c.g.cfg
	s := &GradientSync[T]{c: c, cfg: cfg, opts: opts, log: l, mon: newMonitor(opts.EvaluationWindow), cur: cfg.Strategy,
		adaptive: cfg.AdaptiveCommunication && c.g.n > 1 && !cfg.GradientCompression && opts.Wire == 0}
	if opts.Wire != 0 {
		s.cur = Ring
	}
	s.vec = make([]float64, len(opts.Candidates))
	return s, nil
}

// Sync all-reduces grads to their mean across ranks, in place, and counts
// one step. With Config.GradientCompression it sends only the top-k
// elements (plus error feedback with Config.ErrorCorrection).
func (s *GradientSync[T]) Sync(ctx context.Context, grads []T) error {
	if err := s.settle(ctx, "GradientSync.Sync"); err != nil {
		return err
	}
	return s.stepOne(ctx, grads)
}

// SyncAsync starts Sync and returns at once (Config.AsyncParamUpdates must
// be set); grads must not be touched until the Work is done. Steps run in
// the order they were started.
func (s *GradientSync[T]) SyncAsync(ctx context.Context, grads []T) *Work {
	if !s.cfg.AsyncParamUpdates {
		return failedWork(&ConfigError{Field: "AsyncParamUpdates", Reason: "SyncAsync needs it set"})
	}
	w := s.c.submit(ctx, "GradientSync.Sync", asBytes(grads), func(ctx context.Context) error { return s.stepOne(ctx, grads) })
	s.pendMu.Lock()
	s.pending = append(pruneDone(s.pending), w)
	s.pendMu.Unlock()
	return w
}

// settle orders a synchronous step after the comm's queued operations,
// the SyncAsync steps started before it among them: a step is several
// collectives plus the selector's state (probes, step count), which every
// rank must advance in the same order. The comm's entry does the wait, so a
// ctx that ends here breaks the group as any collective's would (peers wait
// for this rank's step).
func (s *GradientSync[T]) settle(ctx context.Context, op string) error {
	owned, err := s.c.enter(ctx, op, false)
	if err != nil {
		return err
	}
	s.c.leave(owned, &err)
	s.pendMu.Lock()
	s.pending = pruneDone(s.pending)
	s.pendMu.Unlock()
	return nil
}

// pruneDone drops the Works that finished without an error (Synchronize
// still reports the others).
func pruneDone(ws []*Work) []*Work {
	out := ws[:0]
	for _, w := range ws {
		if !w.Done() || w.Wait(context.Background()) != nil {
			out = append(out, w)
		}
	}
	clear(ws[len(out):])
	return out
}

// SyncAll all-reduces many tensors (a model's layers) to their means as one
// step: small tensors are packed into fusion buckets of FusionBytes and
// reduced together, so a 100-tensor model costs a few collectives. The step
// runs one strategy for all its buckets and is measured as one sample at
// the size class of the whole model (where the selector compares).
//
// With Config.GradientCompression it is Sync on the tensors concatenated in
// order: one top-k selection over the whole model (k = CompressionRatio x
// the total element count) and one error-feedback residual covering the
// concatenation (so Sync and SyncAll of different lengths on one
// GradientSync restart it). With a Wire format every bucket is compressed.
func (s *GradientSync[T]) SyncAll(ctx context.Context, tensors [][]T) error {
	if err := s.settle(ctx, "GradientSync.SyncAll"); err != nil {
		return err
	}
	s.mu.Lock()
	s.step++
	s.mu.Unlock()
	es := dtypeOf[T]().Size()
	total := 0
	for _, t := range tensors {
		total += len(t)
	}
	if s.cfg.GradientCompression {
		if cap(s.flat) < total {
			s.flat = make([]T, total)
		}
		flat := s.flat[:0]
		for _, t := range tensors {
			flat = append(flat, t...)
		}
		if err := s.topK(ctx, flat); err != nil {
			return err
		}
		for _, t := range tensors {
			flat = flat[copy(t, flat):]
		}
	} else if err := s.fused(ctx, tensors); err != nil {
		return err
	}
	s.afterStep(ctx)
	return s.evaluate(ctx, total*es)
}

// fused reduces tensors in fusion buckets (tensors larger than a bucket on
// their own, in place) with this step's strategy, and records the step as
// one sample.
func (s *GradientSync[T]) fused(ctx context.Context, tensors [][]T) error {
	st := s.strategyForStep()
	per := s.opts.FusionBytes / dtypeOf[T]().Size()
	if cap(s.bucket) < per {
		s.bucket = make([]T, per)
	}
	b := s.bucket[:0]
	start := 0
	var spent time.Duration
	bytes, ops := 0, 0
	reduce := func(data []T) error {
		t0 := time.Now()
		if err := s.reduce(ctx, data, st); err != nil {
			return err
		}
		spent += time.Since(t0)
		bytes += len(data) * dtypeOf[T]().Size()
		ops++
		return nil
	}
	flush := func(end int) error {
		if len(b) == 0 {
			return nil
		}
		if err := reduce(b); err != nil {
			return err
		}
		off := 0
		for _, t := range tensors[start:end] {
			if len(t) <= per {
				copy(t, b[off:off+len(t)])
				off += len(t)
			}
		}
		b = b[:0]
		return nil
	}
	for i, t := range tensors {
		if len(t) > per {
			// Larger than a bucket: reduce it on its own, in place.
			if err := reduce(t); err != nil {
				return err
			}
			continue
		}
		if len(b)+len(t) > per {
			if err := flush(i); err != nil {
				return err
			}
			start = i
		}
		if len(b) == 0 {
			start = i
		}
		b = append(b, t...)
	}
	if err := flush(len(tensors)); err != nil {
		return err
	}
	if ops > 0 {
		s.mu.Lock()
		s.mon.record(st, bytes, spent, ops)
		s.mu.Unlock()
	}
	return nil
}

// Synchronize waits for every step started with SyncAsync.
func (s *GradientSync[T]) Synchronize(ctx context.Context) error {
	s.pendMu.Lock()
	ws := s.pending
	s.pending = nil
	s.pendMu.Unlock()
	var first error
	for _, w := range ws {
		if err := w.Wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Stats returns the current counters.
func (s *GradientSync[T]) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		AverageBandwidth: s.mon.averageBandwidth(),
		Operations:       s.mon.ops,
		BytesMoved:       s.mon.totalBytes,
		CurrentStrategy:  s.cur,
		PendingAsync:     s.c.PendingAsync(),
		Steps:            s.step,
		Switches:         s.switches,
		LastSwitchStep:   s.lastSw,
	}
}

// Monitor returns the per-strategy time per byte at a size class, for
// inspection: seconds per byte and the number of samples.
func (s *GradientSync[T]) Monitor(st Strategy, bytes int) (float64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mon.secsPerByte(st, sizeClass(bytes))
}

func (s *GradientSync[T]) stepOne(ctx context.Context, grads []T) error {
	s.mu.Lock()
	s.step++
	s.mu.Unlock()
	var err error
	if s.cfg.GradientCompression {
		err = s.topK(ctx, grads)
	} else {
		st := s.strategyForStep()
		start := time.Now()
		if err = s.reduce(ctx, grads, st); err == nil {
			s.mu.Lock()
			s.mon.record(st, len(grads)*dtypeOf[T]().Size(), time.Since(start), 1)
			s.mu.Unlock()
		}
	}
	if err != nil {
		return err
	}
	s.afterStep(ctx)
	return s.evaluate(ctx, len(grads)*dtypeOf[T]().Size())
}

// strategyForStep is the strategy this step runs: a probe, or the current.
func (s *GradientSync[T]) strategyForStep() Strategy {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.probe) > 0 {
		st := s.probe[0]
		s.probe = s.probe[1:]
		return st
	}
	return s.cur
}

// reduce runs one mean all-reduce of data in place with strategy st (with a
// Wire format: the compressed ring, and st is Ring).
func (s *GradientSync[T]) reduce(ctx context.Context, data []T, st Strategy) error {
	if s.opts.Wire != 0 {
		f32 := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), len(data))
		return AllReduceWire(ctx, s.c, f32, Mean, s.opts.Wire)
	}
	return AllReduceWith(ctx, s.c, data, data, Mean, st)
}

func (s *GradientSync[T]) afterStep(ctx context.Context) {
	s.mu.Lock()
	step := s.step
	every := int64(s.cfg.BandwidthMonitorInterval)
	var st Stats
	if step%every == 0 {
		st = Stats{AverageBandwidth: s.mon.averageBandwidth(), Operations: s.mon.ops, BytesMoved: s.mon.totalBytes,
			CurrentStrategy: s.cur, Steps: step, Switches: s.switches}
	}
	s.mu.Unlock()
	if step%every == 0 {
		s.log.InfoContext(ctx, "gocoll: gradient sync", "rank", s.c.rank, "step", st.Steps,
			"avg_GBps", st.AverageBandwidth/1e9, "operations", st.Operations, "bytes", st.BytesMoved,
			"strategy", st.CurrentStrategy.String(), "switches", st.Switches, "pending_async", s.c.PendingAsync())
	}
}

// evaluate is the adaptive selector: SwitchCooldown steps after the last
// evaluation it probes every other candidate for ProbeSteps steps, then all
// ranks agree on the measurements (the maximum over ranks of each
// strategy's recent time per byte: a collective is as slow as its slowest
// rank) and switch together, at the same step, if the best candidate is
// faster than the current strategy by SwitchThreshold.
func (s *GradientSync[T]) evaluate(ctx context.Context, bytes int) error {
	if !s.adaptive {
		return nil
	}
	s.mu.Lock()
	step := s.step
	if len(s.probe) > 0 {
		s.mu.Unlock()
		return nil
	}
	if s.lastEval < 0 {
		// A probe round just ended: compare now.
		s.lastEval = step
		cls := sizeClass(bytes)
		for i, st := range s.opts.Candidates {
			v, n := s.mon.secsPerByte(st, cls)
			if n == 0 {
				v = math.Inf(1)
			}
			s.vec[i] = v
		}
		s.mu.Unlock()
		// Agreement: every rank gets the same vector.
		if err := AllReduceWith(ctx, s.c, s.vec, s.vec, Max, Direct); err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		best, cur := -1, math.Inf(1)
		for i, st := range s.opts.Candidates {
			if best < 0 || s.vec[i] < s.vec[best] {
				best = i
			}
			if st == s.cur {
				cur = s.vec[i]
			}
		}
		if best >= 0 && s.opts.Candidates[best] != s.cur && (s.cur == Auto || cur/s.vec[best] >= s.opts.SwitchThreshold) {
			from := s.cur
			s.cur = s.opts.Candidates[best]
			s.lastSw = step
			s.switches++
			s.log.InfoContext(ctx, "gocoll: strategy switched", "rank", s.c.rank, "step", step, "from", from.String(),
				"to", s.cur.String(), "speedup", cur/s.vec[best])
		}
		return nil
	}
	if step-s.lastEval >= int64(s.opts.SwitchCooldown) && step-s.lastSw >= int64(s.opts.SwitchCooldown) {
		// Start a probe round: the current strategy keeps its own samples
		// fresh between probes; each other candidate runs ProbeSteps steps.
		s.probe = s.probe[:0]
		for _, st := range s.opts.Candidates {
			if st == s.cur {
				continue
			}
			for i := 0; i < s.opts.ProbeSteps; i++ {
				s.probe = append(s.probe, st)
			}
		}
		// The current strategy runs too, last, so it is compared on
		// samples as fresh as the others'.
		for i := 0; i < s.opts.ProbeSteps; i++ {
			s.probe = append(s.probe, s.cur)
		}
		s.lastEval = -1
	}
	s.mu.Unlock()
	return nil
}

// topK sends only the k largest-magnitude elements of grads (plus the
// residual of earlier steps with ErrorCorrection): each rank selects its
// top k, every rank gathers all ranks' (index, value) pairs and sums them
// in rank order into a dense result, then divides by N. What was not sent
// stays in the residual and is added to the next step's gradient (Deep
// Gradient Compression's error feedback).
func (s *GradientSync[T]) topK(ctx context.Context, grads []T) error {
	n := len(grads)
	if n == 0 {
		return nil
	}
	k := int(float64(s.cfg.CompressionRatio) * float64(n))
	if k < 1 {
		k = 1 // never 0
	}
	if k > n {
		k = n
	}
	N := s.c.g.n
	if cap(s.acc) < n {
		s.acc = make([]T, n)
		s.order = make([]int, n)
	}
	if s.cfg.ErrorCorrection && len(s.residual) != n {
		s.residual = make([]T, n)
	}
	if cap(s.idx) < k {
		s.idx = make([]float64, k)
		s.val = make([]T, k)
	}
	if cap(s.allIdx) < k*N {
		s.allIdx = make([]float64, k*N)
		s.allVal = make([]T, k*N)
	}
	acc := s.acc[:n]
	for i, g := range grads {
		if s.cfg.ErrorCorrection {
			acc[i] = g + s.residual[i]
		} else {
			acc[i] = g
		}
	}
	idx, val := s.idx[:k], s.val[:k]
	if onDevice, err := s.selectOnDevice(ctx, acc, k); err != nil {
		return err
	} else if !onDevice {
		selectTopK(acc, s.order[:n], k)
	}
	for j, i := range s.order[:k] {
		idx[j] = float64(i)
		val[j] = acc[i]
	}
	if s.cfg.ErrorCorrection {
		copy(s.residual, acc)
		for _, i := range s.order[:k] {
			s.residual[i] = 0
		}
	}
	start := time.Now()
	if err := AllGather(ctx, s.c, idx, s.allIdx[:k*N]); err != nil {
		return err
	}
	if err := AllGather(ctx, s.c, val, s.allVal[:k*N]); err != nil {
		return err
	}
	d := time.Since(start)
	for i := range grads {
		grads[i] = 0
	}
	for j, fi := range s.allIdx[:k*N] {
		i := int(fi)
		grads[i] += s.allVal[j]
	}
	for i := range grads {
		grads[i] = T(float64(grads[i]) / float64(N)) // correctly rounded mean
	}
	s.mu.Lock()
	s.mon.record(s.cur, k*N*(8+dtypeOf[T]().Size()), d, 2) // two gathers
	s.mu.Unlock()
	return nil
}

// Residual returns a copy of the error-feedback residual (nil without
// ErrorCorrection or before the first compressed step).
func (s *GradientSync[T]) Residual() []T {
	return append([]T(nil), s.residual...)
}

// selectTopK puts the indices of the k largest |x| first in order (ties by
// lower index; NaN counts as an infinite magnitude, so it propagates and
// never breaks the selection).
func selectTopK[T Float](x []T, order []int, k int) {
	for i := range order {
		order[i] = i
	}
	key := func(i int) float64 {
		v := float64(x[i])
		if v != v {
			return math.Inf(1)
		}
		return math.Abs(v)
	}
	less := func(a, b int) bool {
		ka, kb := key(a), key(b)
		if ka != kb {
			return ka > kb
		}
		return a < b
	}
	// Quickselect to put the k largest first, then sort those k by index
	// for a stable exchange order.
	lo, hi := 0, len(order)-1
	for lo < hi {
		p := order[(lo+hi)/2]
		i, j := lo, hi
		for i <= j {
			for less(order[i], p) {
				i++
			}
			for less(p, order[j]) {
				j--
			}
			if i <= j {
				order[i], order[j] = order[j], order[i]
				i++
				j--
			}
		}
		if k-1 <= j {
			hi = j
		} else if k-1 >= i {
			lo = i
		} else {
			break
		}
	}
	sort.Ints(order[:k])
}

// selectOnDevice runs the top-k selection with the backend's kernel when it
// has one (backend.Compressor), leaving the indices in s.order[:k]. It
// reports false when the backend has none (the host selection runs then).
func (s *GradientSync[T]) selectOnDevice(ctx context.Context, acc []T, k int) (_ bool, err error) {
	c := s.c
	comp, ok := c.dev.Stream().(backend.Compressor)
	dt := dtypeOf[T]()
	if !ok || (dt == backend.F64 && !c.info.Float64) {
		return false, nil
	}
	owned, err := c.enter(ctx, "TopK selection", false)
	if err != nil {
		return false, err
	}
	defer c.leave(owned, &err)
	es := dt.Size()
	n := len(acc)
	for _, b := range []struct {
		buf  *backend.Buffer
		size int
	}{{&s.dAcc, n * es}, {&s.dIdx, 4 * k}, {&s.dVal, k * es}} {
		if err := c.ensureMem(b.buf, b.size, backend.DeviceLocal); err != nil {
			return false, err
		}
	}
	if err := s.dAcc.Write(0, asBytes(acc)); err != nil {
		return false, err
	}
	if err := comp.TopK(dt, backend.Region{Buf: s.dAcc, Len: n * es}, k,
		backend.Region{Buf: s.dIdx, Len: 4 * k}, backend.Region{Buf: s.dVal, Len: k * es}); err != nil {
		return false, err
	}
	f, err := c.submitWork()
	if err != nil {
		return false, c.failAfter(err, nil, nil)
	}
	if err := c.waitFence(ctx, f); err != nil {
		return false, err
	}
	if cap(s.idxBuf) < k {
		s.idxBuf = make([]uint32, k)
	}
	ib := s.idxBuf[:k]
	if err := s.dIdx.Read(0, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ib))), 4*k)); err != nil {
		return false, err
	}
	for j, i := range ib {
		s.order[j] = int(i)
	}
	return true, nil
}
