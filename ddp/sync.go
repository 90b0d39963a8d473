package ddp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/diag"
)

// ErrClosed is returned by calls on a closed Sync.
var ErrClosed = errors.New("ddp: Sync closed")

// Options tune a Sync. The zero Options are the defaults: dense mean
// all-reduce with the group's strategy (Auto restricted to rank-order
// reductions: reproducible), no compression, no adaptive switching, no
// logging.
type Options struct {
	// TopK, in (0, 1], turns on top-k compression: each step sends only
	// the TopK fraction of the gradient's elements with the largest
	// magnitudes (at least one), exchanged with two all-gathers. 0: dense.
	// Float32 and float64 gradients only: New refuses it for Float16 and
	// BFloat16.
	TopK float32
	// NoErrorFeedback drops what top-k did not send; by default it is kept
	// in a residual and added to the next step's gradient (Deep Gradient
	// Compression's error feedback).
	NoErrorFeedback bool
	// Wire, when set (backend.F16 or backend.BF16), compresses the dense
	// all-reduce of float32 gradients on the wire (the ring strategy; see
	// collective.AllReduceWire). Not with TopK, nor with float64, Float16
	// or BFloat16 gradients.
	Wire backend.WireFormat

	// AnyOrder lets the dense all-reduce use every strategy, ring, tree and
	// hierarchical included, whose reduction order (and so the last bits of
	// the result) differs from strategy to strategy unless the group's
	// Config.Deterministic is set. By default Auto and the adaptive
	// selector choose among rank-order strategies only, so the results do
	// not depend on what the cost model picked (a strategy set explicitly
	// in the group's Config.Strategy runs as set).
	AnyOrder bool
	// Adaptive turns on the performance monitor's strategy selection: every
	// SwitchCooldown steps it probes the candidate strategies for ProbeSteps
	// steps each, then the current one (with the group's strategy Auto:
	// Auto itself, whatever it picks), the ranks agree on the measurements,
	// and all switch together when a candidate's time (the median over its
	// window of recent samples) beats the current one's by SwitchThreshold.
	// A switch is checked before the next probe round: once the new
	// strategy has run EvaluationWindow steps of the size it was chosen at,
	// its time over them is compared with the time it beat, and if it is
	// slower all ranks switch back. So the selector never keeps a strategy
	// that measured slower than the one it left, over the windows it
	// compares; Sync.Decisions lists what it compared.
	// Off by default: the cost model's choice is already measured on the
	// machine, probing costs steps at the slower strategies, and the choice
	// can differ from run to run.
	Adaptive bool
	// SwitchCooldown is the least number of steps between two evaluations
	// (0: 50). It is raised so that probing takes at most a tenth of the
	// steps.
	SwitchCooldown int
	// EvaluationWindow is the number of recent samples per strategy and
	// size class the monitor keeps and compares, and the number of steps a
	// switch runs before it is checked (0: 20).
	EvaluationWindow int
	// SwitchThreshold is the least measured speed-up (current time / best
	// time) that makes the selector switch (0: 1.2).
	SwitchThreshold float64
	// ProbeSteps is how many steps each other candidate runs in a probe
	// round (0: 3).
	ProbeSteps int
	// Candidates are the strategies the selector may probe (nil: direct,
	// pipelined, ring, tree and hierarchical; without AnyOrder only the
	// rank-order ones among them).
	Candidates []collective.Strategy
	// ProbeLimit skips candidates the group's cost model rates more than
	// ProbeLimit times slower than the best for the step's size (0: 2).
	ProbeLimit float64

	// FusionBytes is the size of the buckets SyncAll packs small tensors
	// into (0: 4 MiB).
	FusionBytes int
	// Logger receives a line every LogEvery steps and one per strategy
	// switch. nil: nothing, unless GOCOLL_DEBUG is set (then slog.Default).
	Logger *slog.Logger
	// LogEvery is the number of steps between two monitor lines (0: 100).
	LogEvery int
}

// Stats is a snapshot of a Sync's counters (all real counts).
type Stats struct {
	AverageBandwidth float64 // bytes per second over every collective run
	Operations       int64   // collectives run (buckets and top-k exchanges included)
	BytesMoved       int64   // bytes of gradient data reduced
	// CurrentStrategy is the strategy the last all-reduce of a step outside
	// the selector's probes ran: with the group's strategy Auto, the one
	// Auto picked for its size; with a Wire format, ring; with TopK, ring
	// (the all-gathers'). Never Auto once a step has run; before the first
	// step, the group's strategy (ring with a Wire format).
	CurrentStrategy collective.Strategy
	// ByStrategy counts the all-reduces run with each strategy (probes
	// included), each bucket of SyncAll under the strategy that reduced it.
	ByStrategy     map[collective.Strategy]int64
	Steps          int64 // Sync/SyncAll calls
	ProbeSteps     int64 // steps run on a probed strategy (Adaptive)
	Switches       int   // strategy switches the selector made (switches back included)
	LastSwitchStep int64
}

// A Decision is one comparison the adaptive selector made, on times every
// rank agreed on (each the slowest rank's): at the end of a probe round,
// between the strategy it ran and the fastest other candidate; or, when
// Check is set, between the strategy it switched to, after it ran a window
// of steps, and the one it left.
type Decision struct {
	Step  int64 // the step it was made after
	Bytes int   // that step's size; the times are for a step of this size
	Check bool  // the check of the last switch
	// Current is the strategy the selector ran (Auto: the steps Auto
	// chose for, measured as one strategy); Other the fastest other
	// candidate, or, at a check, the strategy it left.
	Current, Other collective.Strategy
	// CurrentTime and OtherTime are the step times compared: the median
	// over each one's window of recent samples at this size class.
	CurrentTime, OtherTime time.Duration
	// Switched: the selector switched from Current to Other (at a probe
	// round: Other beat Current by SwitchThreshold; at a check: Current
	// was slower than Other, so it switched back).
	Switched bool
}

// maxDecisions is how many recent decisions a Sync keeps.
const maxDecisions = 32

// Sync averages gradients across the ranks of one rank's Comm: each rank
// of a data-parallel job creates one over its own Comm and calls it once
// per training step.
//
// A step is a sequence of collectives on the Comm (the selector's probes
// and its agreement included), so steps run one at a time in call order:
// Sync and SyncAll first wait for the SyncAsync steps started before them.
//
// Float16 and BFloat16 gradients (a Sync[collective.Float16], an
// Arena[collective.BFloat16]) are averaged as collective's Mean averages
// them: converted to float32, summed in rank order (with the default
// Options), divided by the number of ranks and rounded once to 16 bits,
// the same bits on every rank (with AnyOrder the ring and tree round once
// per exchange step).
type Sync[T Grad] struct {
	c        *collective.Comm
	g        *collective.Group
	opts     Options
	log      *slog.Logger
	hold     collective.Holding // SyncAll's hold on its tensors
	adaptive bool               // the selector runs
	fixed    bool               // every strategy reduces in rank order (Config.Deterministic)
	dt       backend.DType      // T's

	mu       sync.Mutex // guards the fields below (async steps run on the comm's worker)
	mon      *monitor
	cur      collective.Strategy // the selector's strategy (Auto: Auto's pick per all-reduce)
	ran      collective.Strategy // the last non-probe all-reduce's (Stats.CurrentStrategy)
	byStrat  map[collective.Strategy]int64
	chk      switchCheck // the last switch, until it is checked
	history  []Decision  // the last maxDecisions decisions, oldest first
	step     int64
	probed   int64
	lastEval int64
	lastSw   int64
	switches int
	probe    []collective.Strategy       // strategies still to probe, one per step, in order
	vec      []float64                   // agreement vector (pooled)
	cands    []collective.Strategy       // candidates of the probe round under way
	pick     map[int]collective.Strategy // Auto's pick per all-reduce size
	closed   bool
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

	shape    shapeState // the shapes of the last step, once agreed (steps run one at a time)
	fp       []uint64   // the options every rank must share (fingerprint)
	fpHash   uint64     // fp's hash, agreed on with the shapes
	restored bool       // residual was restored and has not been checked against a step

	pendMu  sync.Mutex
	pending []collective.Work
}

// switchCheck is a switch waiting for its check: the strategy left, its
// agreed time per byte, the size class of the switch and how many samples
// the new strategy had there when it switched.
type switchCheck struct {
	on       bool
	from     collective.Strategy
	fromSecs float64
	cls      int
	n0       int64
}

// Grad is the element types of gradients a Sync averages: float32 and
// float64 (and types defined on them), and the 16-bit collective.Float16
// and collective.BFloat16, which are reduced in float32 and rounded once
// (see collective.Float16); top-k compression and wire formats take
// float32 or float64 only.
type Grad interface {
	collective.Float | collective.Float16 | collective.BFloat16
}

func dtypeOf[T Grad]() backend.DType {
	var z T
	switch any(z).(type) {
	case collective.Float16:
		return backend.Half
	case collective.BFloat16:
		return backend.BFloat16
	}
	if unsafe.Sizeof(z) == 8 {
		return backend.F64
	}
	return backend.F32
}

// gradName names gradient type dt as the API does.
func gradName(dt backend.DType) string {
	switch dt {
	case backend.Half:
		return "collective.Float16"
	case backend.BFloat16:
		return "collective.BFloat16"
	case backend.F64:
		return "float64"
	}
	return "float32"
}

func bad(field, format string, a ...any) error {
	return &collective.ConfigError{Field: field, Reason: fmt.Sprintf(format, a...)}
}

// New returns rank c.Rank()'s Sync. Every rank of the group creates one
// with the same Options.
func New[T Grad](c *collective.Comm, opts Options) (*Sync[T], error) {
	if c == nil {
		return nil, fmt.Errorf("ddp.New: nil Comm: %w", collective.ErrInvalidArgument)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&opts.SwitchCooldown, 50)
	def(&opts.EvaluationWindow, 20)
	def(&opts.ProbeSteps, 3)
	def(&opts.FusionBytes, defaultFusionBytes)
	def(&opts.LogEvery, 100)
	if opts.SwitchThreshold == 0 {
		opts.SwitchThreshold = 1.2
	}
	if opts.ProbeLimit == 0 {
		opts.ProbeLimit = 2
	}
	dt := dtypeOf[T]()
	switch {
	case !(opts.TopK >= 0 && opts.TopK <= 1):
		return nil, bad("TopK", "must be in [0, 1] (0: dense), got %v", opts.TopK)
	case opts.Wire != 0 && opts.Wire != backend.F16 && opts.Wire != backend.BF16:
		return nil, bad("Wire", "must be 0, backend.F16 or backend.BF16, got %v", opts.Wire)
	case opts.Wire != 0 && opts.TopK > 0:
		return nil, bad("Wire", "top-k exchanges indices and values with all-gathers: choose TopK or Wire")
	case opts.Wire != 0 && dt != backend.F32:
		return nil, bad("Wire", "compresses float32 gradients only, not %s", gradName(dt))
	case opts.TopK > 0 && dt.Size() == 2:
		return nil, bad("TopK", "top-k compression needs float32 or float64 gradients, not %s", gradName(dt))
	case opts.SwitchCooldown < 1:
		return nil, bad("SwitchCooldown", "must be >= 1")
	case opts.EvaluationWindow < 1:
		return nil, bad("EvaluationWindow", "must be >= 1")
	case !(opts.SwitchThreshold >= 1) || math.IsInf(opts.SwitchThreshold, 0):
		return nil, bad("SwitchThreshold", "must be finite and >= 1")
	case !(opts.ProbeLimit >= 1) || math.IsNaN(opts.ProbeLimit):
		return nil, bad("ProbeLimit", "must be >= 1")
	case opts.ProbeSteps < 1:
		return nil, bad("ProbeSteps", "must be >= 1")
	case opts.FusionBytes < dt.Size():
		return nil, bad("FusionBytes", "must hold at least one element")
	case opts.LogEvery < 1:
		return nil, bad("LogEvery", "must be >= 1")
	}
	if opts.Candidates == nil {
		opts.Candidates = []collective.Strategy{collective.Direct, collective.Pipelined, collective.Ring, collective.Tree, collective.Hierarchical}
	} else {
		opts.Candidates = append([]collective.Strategy(nil), opts.Candidates...)
	}
	for _, s := range opts.Candidates {
		if s == collective.Auto || s.String() == fmt.Sprintf("Strategy(%d)", int(s)) {
			return nil, bad("Candidates", "%s is not a concrete strategy", s)
		}
	}
	g := c.Group()
	cfg := g.Config()
	l := opts.Logger
	if l == nil {
		if os.Getenv("GOCOLL_DEBUG") != "" {
			l = slog.Default()
		} else {
			l = slog.New(slog.DiscardHandler)
		}
	}
	s := &Sync[T]{c: c, g: g, opts: opts, log: l, dt: dt, mon: newMonitor(opts.EvaluationWindow), cur: cfg.Strategy,
		fixed: cfg.Deterministic, pick: map[int]collective.Strategy{}, byStrat: map[collective.Strategy]int64{},
		adaptive: opts.Adaptive && g.Size() > 1 && opts.TopK == 0 && opts.Wire == 0}
	if opts.Wire != 0 {
		s.cur = collective.Ring
	}
	s.ran = s.cur
	s.fp = fingerprint(opts, dt, cfg)
	s.fpHash = fingerprintHash(s.fp)
	s.vec = make([]float64, len(opts.Candidates)+1) // the candidates', then the current strategy's
	s.cands = make([]collective.Strategy, 0, len(opts.Candidates))
	// Measure the group's cost model now, from the caller's goroutine (an
	// operation of c), so the steps' choices never have to.
	diag.AutoChoice(c, 1, dt)
	return s, nil
}

// rankOrder reports whether strategy st reduces in rank order (so its
// result does not depend on which such strategy ran).
func (s *Sync[T]) rankOrder(st collective.Strategy) bool {
	if s.fixed || s.opts.AnyOrder {
		return true
	}
	return rankOrderStrategies[st]
}

// rankOrderStrategies are the strategies that reduce in rank order: those
// collective's algorithm table marks RankOrder.
var rankOrderStrategies = func() map[collective.Strategy]bool {
	m := map[collective.Strategy]bool{}
	for _, a := range collective.Algorithms() {
		m[a.Strategy] = a.RankOrder
	}
	return m
}()

// Sync all-reduces grads to their mean across ranks, in place, and counts
// one step (with TopK: the top-k exchange). A gradient in an Arena (or any
// collective.HostBuffer) moves without a copy into staging memory.
//
// The first step, and every step whose shapes differ from the previous
// step's (Sync: the length of grads; SyncAll: the number of tensors and
// their lengths, in order), first agrees on the shapes and the Options
// across ranks (one all-reduce of a few words): when they differ every
// rank fails with the same *ShapeError or *OptionsError naming the call,
// and nothing is reduced. A step whose collective fails returns a
// *StepError naming the call, the step and the strategy that ran.
func (s *Sync[T]) Sync(ctx context.Context, grads []T) error {
	if err := s.settle(ctx); err != nil {
		return err
	}
	return s.stepOne(ctx, "Sync.Sync", grads)
}

// SyncAsync starts Sync and returns at once; grads must not be touched
// until the Work is done. Steps run in the order they were started, after
// the comm's operations queued before them.
func (s *Sync[T]) SyncAsync(ctx context.Context, grads []T) collective.Work {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return s.c.Go(ctx, "ddp.SyncAsync", func(context.Context) error { return ErrClosed })
	}
	// grads is named so that closing the HostBuffer or Arena holding it
	// waits for the step.
	w := s.c.Go(ctx, "ddp.SyncAsync", func(ctx context.Context) error { return s.stepOne(ctx, "Sync.SyncAsync", grads) }, collective.Mem(grads))
	if w.Done() && errors.Is(w.Wait(ctx), collective.ErrClosed) {
		// grads was closed: the step fails in its turn on every rank.
		w = s.c.Go(ctx, "ddp.SyncAsync", func(ctx context.Context) error { return s.refuse(ctx, grads) })
	}
	s.pendMu.Lock()
	s.pending = append(pruneDone(s.pending), w)
	s.pendMu.Unlock()
	return w
}

// settle waits for the SyncAsync steps started before a synchronous step:
// a step advances the selector's state (probes, step count), which every
// rank must advance in the same order.
func (s *Sync[T]) settle(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return s.waitPending(ctx)
}

// pruneDone drops the Works that finished without an error (Wait still
// reports the others).
func pruneDone(ws []collective.Work) []collective.Work {
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
// step. Tensors smaller than FusionBytes are copied into a bucket, reduced
// together and copied back (one collective per bucket, two host copies of
// each small tensor); larger ones are reduced in place, without a copy. An
// Arena avoids both: Sync(ctx, arena.Flat()) is one zero-copy collective.
// The step runs one strategy for all its buckets and is measured as one
// sample at the size of the whole model (where the selector compares).
//
// With TopK it is Sync on the tensors concatenated in order (one copy in
// and out): one top-k selection over the whole model and one residual
// covering the concatenation (so Sync and SyncAll of different lengths on
// one Sync restart it). With a Wire format every bucket is compressed.
// The shapes are checked as Sync's are.
func (s *Sync[T]) SyncAll(ctx context.Context, tensors [][]T) error {
	if err := s.settle(ctx); err != nil {
		return err
	}
	step := s.nextStep()
	return s.named("Sync.SyncAll", step, s.syncAll(ctx, tensors))
}

// syncAll runs SyncAll's step.
func (s *Sync[T]) syncAll(ctx context.Context, tensors [][]T) error {
	// The step copies the tensors itself (fused buckets, top-k): hold
	// them, so that closing their HostBuffers or Arena waits for it.
	h := &s.hold
	defer h.Release()
	for _, t := range tensors {
		if err := collective.Hold(ctx, s.c, h, t); err != nil {
			return s.refuse(ctx, t)
		}
	}
	if err := s.checkStep(ctx, "Sync.SyncAll", tensors); err != nil {
		return err
	}
	s.mu.Lock()
	s.step++
	s.mu.Unlock()
	es := s.dt.Size()
	total := 0
	for _, t := range tensors {
		total += len(t)
	}
	if s.opts.TopK > 0 {
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
	} else if err := s.fused(ctx, tensors, total*es); err != nil {
		return err
	}
	s.afterStep(ctx)
	return s.evaluate(ctx, total*es)
}

// fused reduces tensors in fusion buckets (tensors larger than a bucket on
// their own, in place) with this step's strategy, and records the step as
// one sample.
func (s *Sync[T]) fused(ctx context.Context, tensors [][]T, total int) error {
	st, probe := s.strategyForStep()
	per := s.opts.FusionBytes / s.dt.Size()
	if cap(s.bucket) < per {
		s.bucket = make([]T, per)
	}
	b := s.bucket[:0]
	start := 0
	var spent time.Duration
	bytes, ops := 0, 0
	reduce := func(data []T) error {
		t0 := time.Now()
		if err := s.reduce(ctx, data, st, probe); err != nil {
			return err
		}
		spent += time.Since(t0)
		bytes += len(data) * s.dt.Size()
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

// Wait waits for every step started with SyncAsync and returns the first
// error among them.
func (s *Sync[T]) Wait(ctx context.Context) error {
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

// Close waits for the SyncAsync steps (within ctx) and frees the Sync's
// device buffers; later calls fail with ErrClosed. It does not close the
// Comm.
func (s *Sync[T]) Close(ctx context.Context) error {
	err := s.Wait(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, b := range []*backend.Buffer{&s.dAcc, &s.dIdx, &s.dVal} {
		if *b != nil {
			if cerr := (*b).Close(); cerr != nil && err == nil {
				err = cerr
			}
			*b = nil
		}
	}
	return err
}

// Stats returns the current counters.
func (s *Sync[T]) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	by := make(map[collective.Strategy]int64, len(s.byStrat))
	for st, n := range s.byStrat {
		by[st] = n
	}
	return Stats{
		AverageBandwidth: s.mon.averageBandwidth(),
		Operations:       s.mon.ops,
		BytesMoved:       s.mon.totalBytes,
		CurrentStrategy:  s.ran,
		ByStrategy:       by,
		Steps:            s.step,
		ProbeSteps:       s.probed,
		Switches:         s.switches,
		LastSwitchStep:   s.lastSw,
	}
}

// Decisions returns the adaptive selector's most recent decisions (up to
// 32), oldest first: the same on every rank.
func (s *Sync[T]) Decisions() []Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Decision(nil), s.history...)
}

// stepOne is the step of Sync and SyncAsync (call names it in errors).
func (s *Sync[T]) stepOne(ctx context.Context, call string, grads []T) error {
	step := s.nextStep()
	return s.named(call, step, s.runOne(ctx, call, grads))
}

// runOne runs stepOne's step.
func (s *Sync[T]) runOne(ctx context.Context, call string, grads []T) error {
	// The step reads and writes grads itself (top-k): hold it, so that
	// closing its HostBuffer or Arena waits for the step.
	var h collective.Holding
	defer h.Release()
	if err := collective.Hold(ctx, s.c, &h, grads); err != nil {
		return s.refuse(ctx, grads)
	}
	if err := s.checkStep(ctx, call, [][]T{grads}); err != nil {
		return err
	}
	s.mu.Lock()
	s.step++
	s.mu.Unlock()
	bytes := len(grads) * s.dt.Size()
	var err error
	if s.opts.TopK > 0 {
		err = s.topK(ctx, grads)
	} else {
		st, probe := s.strategyForStep()
		start := time.Now()
		if err = s.reduce(ctx, grads, st, probe); err == nil {
			s.mu.Lock()
			s.mon.record(st, bytes, time.Since(start), 1)
			s.mu.Unlock()
		}
	}
	if err != nil {
		return err
	}
	s.afterStep(ctx)
	return s.evaluate(ctx, bytes)
}

// refuse fails a step handed closed memory on every rank: the all-reduce
// of that memory is refused (ErrClosed) before it touches it, and the
// peers learn of it at the same rendezvous instead of waiting for a
// timeout.
func (s *Sync[T]) refuse(ctx context.Context, closed []T) error {
	return failed("all-reduce", collective.Auto, collective.AllReduce(ctx, s.c, closed, collective.Sum))
}

// strategyForStep is the strategy this step runs, and whether it is a
// probe: the next probe of a probe round, or the current one. The step is
// measured under it, Auto included (each of its all-reduces runs Auto's
// pick for its size).
func (s *Sync[T]) strategyForStep() (collective.Strategy, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.probe) > 0 {
		st := s.probe[0]
		s.probe = s.probe[1:]
		s.probed++
		return st, true
	}
	return s.cur, false
}

// autoPick is the strategy Auto runs for an all-reduce of bytes: the cost
// model's choice (what collective.AllReduce would run), restricted to rank
// order unless AnyOrder. Resolving it here, rather than in the collective,
// is how the Sync knows what ran. s.mu held.
func (s *Sync[T]) autoPick(bytes int) collective.Strategy {
	if st, ok := s.pick[bytes]; ok {
		return st
	}
	st := s.bestRankOrder(bytes)
	s.pick[bytes] = st
	return st
}

// bestRankOrder is the cost model's fastest rank-order strategy for an
// all-reduce of bytes (Auto's own choice where it reduces in rank order).
// s.mu held.
func (s *Sync[T]) bestRankOrder(bytes int) collective.Strategy {
	choice, est := diag.AutoChoice(s.c, bytes, s.dt)
	if s.rankOrder(choice) || s.g.Processes() > 1 {
		// Across processes the modelled times are each process's own: only
		// Auto's choice (the same everywhere) keeps the ranks in step.
		return choice
	}
	best, bestT := collective.Auto, time.Duration(math.MaxInt64)
	for _, st := range []collective.Strategy{collective.Host, collective.Direct, collective.Pipelined} {
		if t, ok := est[st]; ok && t < bestT {
			best, bestT = st, t
		}
	}
	if best == collective.Auto {
		// No rank-order strategy applies (across processes without
		// Config.Deterministic): the cost model's choice.
		return choice
	}
	return best
}

// reduce runs one mean all-reduce of data in place with strategy st (Auto:
// its pick for the size; with a Wire format: the compressed ring) and
// counts the strategy that ran.
func (s *Sync[T]) reduce(ctx context.Context, data []T, st collective.Strategy, probe bool) error {
	s.mu.Lock()
	if st == collective.Auto {
		st = s.autoPick(len(data) * s.dt.Size())
	}
	s.mu.Unlock()
	if s.opts.Wire != 0 {
		st = collective.Ring
		f32 := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), len(data))
		if err := collective.AllReduceWire(ctx, s.c, f32, collective.Mean, s.opts.Wire); err != nil {
			return failed("all-reduce, "+s.opts.Wire.String()+" on the wire", st, err)
		}
	} else if err := collective.AllReduceWith(ctx, s.c, data, data, collective.Mean, st); err != nil {
		return failed("all-reduce", st, err)
	}
	s.mu.Lock()
	s.byStrat[st]++
	if !probe {
		s.ran = st
	}
	s.mu.Unlock()
	return nil
}

func (s *Sync[T]) afterStep(ctx context.Context) {
	s.mu.Lock()
	step := s.step
	every := int64(s.opts.LogEvery)
	var st Stats
	if step%every == 0 {
		st = Stats{AverageBandwidth: s.mon.averageBandwidth(), Operations: s.mon.ops, BytesMoved: s.mon.totalBytes,
			CurrentStrategy: s.ran, Steps: step, ProbeSteps: s.probed, Switches: s.switches}
	}
	s.mu.Unlock()
	if step%every == 0 {
		s.log.InfoContext(ctx, "gocoll: gradient sync", "rank", s.c.Rank(), "step", st.Steps,
			"avg_GBps", st.AverageBandwidth/1e9, "operations", st.Operations, "bytes", st.BytesMoved,
			"strategy", st.CurrentStrategy.String(), "probe_steps", st.ProbeSteps, "switches", st.Switches)
	}
}

// probeCandidates fills s.cands with the candidates a probe round at this
// size runs: rank-order ones unless AnyOrder, and none the cost model rates
// more than ProbeLimit times slower than its best. s.mu held.
func (s *Sync[T]) probeCandidates(bytes int) {
	s.cands = s.cands[:0]
	_, est := diag.AutoChoice(s.c, bytes, s.dt)
	if s.g.Processes() > 1 {
		clear(est) // each process's own model: no filter, so every rank probes the same
	}
	best := time.Duration(math.MaxInt64)
	for _, st := range s.opts.Candidates {
		if t, ok := est[st]; ok && t < best {
			best = t
		}
	}
	for _, st := range s.opts.Candidates {
		if !s.rankOrder(st) {
			continue
		}
		if t, ok := est[st]; ok && best > 0 && float64(t) > s.opts.ProbeLimit*float64(best) && st != s.cur {
			continue
		}
		s.cands = append(s.cands, st)
	}
}

// evaluate is the adaptive selector: SwitchCooldown steps after the last
// evaluation it probes every other candidate for ProbeSteps steps, then the
// current strategy; all ranks agree on the measurements (the maximum over
// ranks of each strategy's time per byte, the median over its window: a
// collective is as slow as its slowest rank) and switch together, at the
// same step, if the best candidate beats the current strategy by
// SwitchThreshold. A switch is then checked (checkSwitch) before the next
// probe round.
func (s *Sync[T]) evaluate(ctx context.Context, bytes int) error {
	if !s.adaptive {
		return nil
	}
	s.mu.Lock()
	step := s.step
	cls := sizeClass(bytes)
	switch {
	case len(s.probe) > 0:
		s.mu.Unlock()
		return nil
	case s.lastEval < 0:
		return s.compare(ctx, step, bytes)
	case s.chk.on:
		if cls == s.chk.cls && s.mon.count(s.cur, cls)-s.chk.n0 >= int64(s.opts.EvaluationWindow) {
			return s.checkSwitch(ctx, step, bytes)
		}
		// No probe round until the switch is checked.
		s.mu.Unlock()
		return nil
	}
	s.probeCandidates(bytes)
	round := len(s.cands) * s.opts.ProbeSteps
	if !contains(s.cands, s.cur) {
		round += s.opts.ProbeSteps
	}
	cooldown := int64(max(s.opts.SwitchCooldown, 9*round)) // probing <= a tenth of the steps
	if len(s.cands) > 0 && step-s.lastEval >= cooldown && step-s.lastSw >= cooldown {
		// A probe round: each other candidate runs ProbeSteps steps, then
		// the current strategy (Auto included), so it is compared on
		// samples as fresh as the others'.
		s.probe = s.probe[:0]
		for _, st := range s.cands {
			if st == s.cur {
				continue
			}
			for i := 0; i < s.opts.ProbeSteps; i++ {
				s.probe = append(s.probe, st)
			}
		}
		for i := 0; i < s.opts.ProbeSteps; i++ {
			s.probe = append(s.probe, s.cur)
		}
		s.lastEval = -1
	}
	s.mu.Unlock()
	return nil
}

// compare ends a probe round: the ranks agree on each candidate's time and
// the current strategy's, and switch if the fastest candidate beats the
// current one by SwitchThreshold. Every slot of the agreement vector is
// filled (+Inf where this round did not probe the candidate), so the
// ranks' vectors line up. Called with s.mu held; releases it.
func (s *Sync[T]) compare(ctx context.Context, step int64, bytes int) error {
	s.lastEval = step
	cls := sizeClass(bytes)
	n := len(s.opts.Candidates)
	for i := range s.vec {
		s.vec[i] = math.Inf(1)
	}
	for i, st := range s.opts.Candidates {
		if st == s.cur || !contains(s.cands, st) {
			continue
		}
		if v, k := s.mon.secsPerByte(st, cls); k > 0 {
			s.vec[i] = v
		}
	}
	if v, k := s.mon.secsPerByte(s.cur, cls); k > 0 {
		s.vec[n] = v
	}
	s.mu.Unlock()
	// Agreement: every rank gets the same vector.
	if err := collective.AllReduceWith(ctx, s.c, s.vec, s.vec, collective.Max, collective.Direct); err != nil {
		return failed("strategy agreement", collective.Direct, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	best := -1
	for i := range n {
		if !math.IsInf(s.vec[i], 1) && (best < 0 || s.vec[i] < s.vec[best]) {
			best = i
		}
	}
	cur := s.vec[n]
	if best < 0 || math.IsInf(cur, 1) {
		return nil // nothing measured to compare: keep the current strategy
	}
	d := Decision{Step: step, Bytes: bytes, Current: s.cur, Other: s.opts.Candidates[best],
		CurrentTime: perStep(cur, bytes), OtherTime: perStep(s.vec[best], bytes)}
	if cur/s.vec[best] >= s.opts.SwitchThreshold {
		d.Switched = true
		s.chk = switchCheck{on: true, from: s.cur, fromSecs: cur, cls: cls, n0: s.mon.count(d.Other, cls)}
		s.switchTo(ctx, step, d.Other, cur/s.vec[best])
	}
	s.note(d)
	return nil
}

// checkSwitch checks the last switch once the new strategy has run a
// window of steps at the size class it was chosen at: the ranks agree on
// its time over them, and if that is slower than the time of the strategy
// it left (the one it beat), all switch back. Called with s.mu
// held; releases it.
func (s *Sync[T]) checkSwitch(ctx context.Context, step int64, bytes int) error {
	chk := s.chk
	s.chk = switchCheck{}
	s.lastEval = step // the next probe round a cooldown from now
	v, _ := s.mon.secsPerByte(s.cur, chk.cls)
	agreed := s.vec[:1]
	agreed[0] = v
	s.mu.Unlock()
	if err := collective.AllReduceWith(ctx, s.c, agreed, agreed, collective.Max, collective.Direct); err != nil {
		return failed("strategy agreement", collective.Direct, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := Decision{Step: step, Bytes: bytes, Check: true, Current: s.cur, Other: chk.from,
		CurrentTime: perStep(agreed[0], bytes), OtherTime: perStep(chk.fromSecs, bytes)}
	if agreed[0] > chk.fromSecs {
		d.Switched = true
		s.switchTo(ctx, step, chk.from, agreed[0]/chk.fromSecs)
	}
	s.note(d)
	return nil
}

// switchTo makes st the current strategy at step. s.mu held.
func (s *Sync[T]) switchTo(ctx context.Context, step int64, st collective.Strategy, speedup float64) {
	from := s.cur
	s.cur = st
	s.lastSw = step
	s.switches++
	s.log.InfoContext(ctx, "gocoll: strategy switched", "rank", s.c.Rank(), "step", step, "from", from.String(),
		"to", st.String(), "speedup", speedup)
}

// note keeps decision d among the last maxDecisions. s.mu held.
func (s *Sync[T]) note(d Decision) {
	if len(s.history) == maxDecisions {
		copy(s.history, s.history[1:])
		s.history = s.history[:maxDecisions-1]
	}
	s.history = append(s.history, d)
}

// perStep is a time per byte as the time of a step of bytes.
func perStep(secsPerByte float64, bytes int) time.Duration {
	return time.Duration(secsPerByte * float64(bytes) * 1e9)
}

func contains(ss []collective.Strategy, st collective.Strategy) bool {
	for _, x := range ss {
		if x == st {
			return true
		}
	}
	return false
}

// topK sends only the k largest-magnitude elements of grads (plus the
// residual of earlier steps, unless NoErrorFeedback): each rank selects its
// top k, every rank gathers all ranks' (index, value) pairs and sums them
// in rank order into a dense result, then divides by N. What was not sent
// stays in the residual and is added to the next step's gradient. T is
// float32 or float64 here (New refuses TopK for 16-bit gradients, whose
// arithmetic this is not).
func (s *Sync[T]) topK(ctx context.Context, grads []T) error {
	n := len(grads)
	if n == 0 {
		return nil
	}
	k := int(float64(s.opts.TopK) * float64(n))
	k = min(max(k, 1), n)
	N := s.c.Size()
	feedback := !s.opts.NoErrorFeedback
	if cap(s.acc) < n {
		s.acc = make([]T, n)
		s.order = make([]int, n)
	}
	if feedback && len(s.residual) != n {
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
		if feedback {
			acc[i] = g + s.residual[i]
		} else {
			acc[i] = g
		}
	}
	idx, val := s.idx[:k], s.val[:k]
	if onDevice, err := s.selectOnDevice(ctx, acc, k); err != nil {
		return failed("top-k selection", collective.Auto, err)
	} else if !onDevice {
		selectTopK(acc, s.order[:n], k)
	}
	for j, i := range s.order[:k] {
		idx[j] = float64(i)
		val[j] = acc[i]
	}
	if feedback {
		copy(s.residual, acc)
		for _, i := range s.order[:k] {
			s.residual[i] = 0
		}
	}
	start := time.Now()
	// The all-gathers run the ring (AllGather's only strategy).
	if err := collective.AllGather(ctx, s.c, idx, s.allIdx[:k*N]); err != nil {
		return failed("top-k all-gather", collective.Ring, err)
	}
	if err := collective.AllGather(ctx, s.c, val, s.allVal[:k*N]); err != nil {
		return failed("top-k all-gather", collective.Ring, err)
	}
	d := time.Since(start)
	for i := range grads {
		grads[i] = 0
	}
	for j, fi := range s.allIdx[:k*N] {
		grads[int(fi)] += s.allVal[j]
	}
	for i := range grads {
		grads[i] = T(float64(grads[i]) / float64(N)) // correctly rounded mean
	}
	s.mu.Lock()
	s.mon.record(s.cur, k*N*(8+s.dt.Size()), d, 2) // two gathers
	s.ran = collective.Ring
	s.mu.Unlock()
	return nil
}

// Residual returns a copy of the error-feedback residual (nil without
// TopK, with NoErrorFeedback, or before the first compressed step). State
// and Restore save and restore it with the counters.
func (s *Sync[T]) Residual() []T {
	return append([]T(nil), s.residual...)
}

// selectTopK puts the indices of the k largest |x| first in order (ties by
// lower index; NaN counts as an infinite magnitude, so it propagates and
// never breaks the selection).
func selectTopK[T Grad](x []T, order []int, k int) {
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
func (s *Sync[T]) selectOnDevice(ctx context.Context, acc []T, k int) (bool, error) {
	dev := s.c.Device()
	comp, ok := dev.Stream().(backend.Compressor)
	if !ok || (s.dt == backend.F64 && !dev.Info().Float64) {
		return false, nil
	}
	es := s.dt.Size()
	n := len(acc)
	for _, b := range []struct {
		buf  *backend.Buffer
		size int
	}{{&s.dAcc, n * es}, {&s.dIdx, 4 * k}, {&s.dVal, k * es}} {
		if *b.buf != nil && (*b.buf).Len() >= b.size {
			continue
		}
		if *b.buf != nil {
			if err := (*b.buf).Close(); err != nil {
				return false, err
			}
			*b.buf = nil
		}
		nb, err := dev.Alloc(max(b.size, 1), backend.DeviceLocal)
		if err != nil {
			return false, err
		}
		*b.buf = nb
	}
	if err := s.dAcc.Write(0, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(acc))), n*es)); err != nil {
		return false, err
	}
	err := s.c.Exec(ctx, "ddp top-k selection", func(backend.Stream) error {
		return comp.TopK(s.dt, backend.Region{Buf: s.dAcc, Len: n * es}, k,
			backend.Region{Buf: s.dIdx, Len: 4 * k}, backend.Region{Buf: s.dVal, Len: k * es})
	})
	if err != nil {
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
