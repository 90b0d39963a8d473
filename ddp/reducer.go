package ddp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/collective"
)

// ReducerOptions tune a Reducer.
type ReducerOptions struct {
	// BucketBytes is the most a bucket holds (0: the Sync's FusionBytes):
	// consecutive gradients are packed into a bucket while they fit, and a
	// gradient larger than a bucket is a bucket of its own. Every rank
	// passes the same value.
	BucketBytes int
	// Names name the gradients in errors and in MarkReadyName (nil:
	// "gradient 3"); len(Names) = the number of gradients, each distinct.
	Names []string
}

// Reducer averages a model's gradients in buckets while the backward pass
// is still computing them, as torch's DistributedDataParallel does: the
// framework marks each gradient ready as backward finishes it
// (MarkReady), a bucket's all-reduce starts as soon as every gradient in
// it and every earlier bucket is ready, and Wait ends the step once every
// bucket is reduced. Communication then overlaps the rest of backward.
//
// The buckets are fixed at NewReducer, in the order of the gradients
// given, the same on every rank, and start in that order on every rank,
// whatever order the gradients are marked in: list the gradients in the
// order backward produces them (the last layer's first) so that the first
// bucket is ready first. A bucket of one gradient is reduced in place; a
// bucket of several is copied into the bucket's memory and back (two host
// copies). The gradients must not be written from the moment their bucket
// starts until Wait returns.
//
// A Reducer runs its steps on its Sync (the Sync's Options, its counters;
// each step is one of the Sync's steps, between its other steps). The
// adaptive selector does not probe during Reducer steps: each bucket runs
// the Sync's current strategy (Auto: Auto's rank-order pick for its size).
// One rank's calls to a Reducer must not overlap, except MarkReady from
// several goroutines of one backward pass.
type Reducer[T Grad] struct {
	s       *Sync[T]
	grads   [][]T
	names   []string
	index   map[string]int
	of      []int // gradient -> bucket
	buckets []rbucket[T]

	mu     sync.Mutex
	noSync bool
	ready  []bool
	nready int
	left   []int // per bucket, gradients not marked ready this step
	next   int   // buckets [0, next) have started this step
	works  []collective.Work
	spent  []time.Duration // per bucket, its all-reduce's time (written by the worker)
	failed atomic.Bool     // a bucket of this step failed: the later ones skip their all-reduce
}

// rbucket is gradients [first, end) of a Reducer, reduced together.
type rbucket[T Grad] struct {
	first, end int
	data       []T // the gradient itself (one gradient), else a copy
	inPlace    bool
}

// UnreadyError says that a Reducer step was waited for before every
// gradient was marked ready. The buckets from Bucket on were not reduced
// this step (Bucket -1: an accumulation step, which reduces nothing);
// errors.Is(err, collective.ErrInvalidArgument) holds.
type UnreadyError struct {
	Call      string   // "Reducer.Wait"
	Gradients []string // the gradients never marked ready, by name, in order
	Indices   []int    // and by index
	Bucket    int
}

func (e *UnreadyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ddp.%s: %s never marked ready this step: ", e.Call, plural(len(e.Gradients), "gradient", "gradients"))
	const most = 8
	for i, n := range e.Gradients[:min(len(e.Gradients), most)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (#%d)", n, e.Indices[i])
	}
	if len(e.Gradients) > most {
		fmt.Fprintf(&b, " and %d more", len(e.Gradients)-most)
	}
	if e.Bucket >= 0 {
		fmt.Fprintf(&b, "; buckets from %d on were not reduced", e.Bucket)
	}
	return b.String()
}

// Is makes errors.Is(err, collective.ErrInvalidArgument) true.
func (e *UnreadyError) Is(t error) bool { return t == collective.ErrInvalidArgument }

// NewReducer returns a Reducer of grads over s. Every rank calls it with
// gradients of the same lengths, in the same order, and the same
// BucketBytes, over Syncs with the same Options: the ranks agree on them
// (one small all-reduce), and when they differ, or one rank's arguments
// are invalid, every rank fails (an *OptionsError for options, a
// *ShapeError for lengths, collective.ErrMismatch for BucketBytes,
// collective.ErrInvalidArgument for invalid arguments). A Sync with TopK
// is refused: top-k selects over the whole model, not bucket by bucket.
func NewReducer[T Grad](ctx context.Context, s *Sync[T], grads [][]T, o ReducerOptions) (*Reducer[T], error) {
	const call = "NewReducer"
	if s == nil {
		return nil, fmt.Errorf("ddp.%s: nil Sync: %w", call, collective.ErrInvalidArgument)
	}
	if err := s.settle(ctx); err != nil {
		return nil, fmt.Errorf("ddp.%s: %w", call, err)
	}
	if o.BucketBytes == 0 {
		o.BucketBytes = s.opts.FusionBytes
	}
	es := s.dt.Size()
	r := &Reducer[T]{s: s, grads: grads, names: make([]string, len(grads)), index: map[string]int{}, of: make([]int, len(grads))}
	var invalid error
	switch {
	case s.opts.TopK > 0:
		invalid = fmt.Errorf("the Sync has TopK, which selects over the whole model: a Reducer reduces buckets densely")
	case o.BucketBytes < es:
		invalid = fmt.Errorf("BucketBytes %d holds no element of %d bytes", o.BucketBytes, es)
	case o.Names != nil && len(o.Names) != len(grads):
		invalid = fmt.Errorf("%d names for %d gradients", len(o.Names), len(grads))
	}
	for i := range grads {
		r.names[i] = fmt.Sprintf("gradient %d", i)
		if o.Names != nil && invalid == nil {
			r.names[i] = o.Names[i]
			if j, dup := r.index[o.Names[i]]; dup {
				invalid = fmt.Errorf("gradients %d and %d are both named %q", j, i, o.Names[i])
			}
		}
		r.index[r.names[i]] = i
	}
	lens := make([]int, len(grads))
	for i, g := range grads {
		lens[i] = len(g)
	}
	var refused uint64 // 1 + this rank, when its arguments are invalid
	if invalid != nil {
		refused = uint64(s.c.Rank()) + 1
	}
	bb := uint64(o.BucketBytes)
	vec := []uint64{4: bb, 5: ^bb, 6: refused, 7: ^refused}
	if err := s.agree(ctx, call, lens, vec); err != nil {
		if invalid != nil {
			return nil, fmt.Errorf("ddp.%s: %v: %w", call, invalid, collective.ErrInvalidArgument)
		}
		return nil, plain(call, err)
	}
	switch {
	case invalid != nil:
		return nil, fmt.Errorf("ddp.%s: %v: %w", call, invalid, collective.ErrInvalidArgument)
	case vec[6] != 0:
		return nil, fmt.Errorf("ddp.%s: rank %d's arguments are invalid: %w", call, vec[6]-1, collective.ErrInvalidArgument)
	case vec[4] != ^vec[5]:
		return nil, fmt.Errorf("ddp.%s: ranks pass different BucketBytes (%d and %d): %w", call, ^vec[5], vec[4], collective.ErrMismatch)
	}
	per := o.BucketBytes / es
	for i := 0; i < len(grads); {
		end, n := i+1, len(grads[i])
		for end < len(grads) && n+len(grads[end]) <= per {
			n += len(grads[end])
			end++
		}
		b := rbucket[T]{first: i, end: end}
		if end-i == 1 {
			b.data, b.inPlace = grads[i], true
		} else {
			b.data = make([]T, n)
		}
		for j := i; j < end; j++ {
			r.of[j] = len(r.buckets)
		}
		r.buckets = append(r.buckets, b)
		i = end
	}
	r.ready = make([]bool, len(grads))
	r.left = make([]int, len(r.buckets))
	r.spent = make([]time.Duration, len(r.buckets))
	r.works = make([]collective.Work, 0, len(r.buckets))
	r.reset()
	return r, nil
}

// Buckets returns the gradients of each bucket, as index ranges [first,
// end) of the gradients, in the order the buckets start.
func (r *Reducer[T]) Buckets() [][2]int {
	out := make([][2]int, len(r.buckets))
	for i, b := range r.buckets {
		out[i] = [2]int{b.first, b.end}
	}
	return out
}

// NoSync makes the next steps accumulation steps (on) or syncing steps
// (off, the default), as torch's no_sync: an accumulation step reduces
// nothing (the framework adds the gradients of its steps up), and the next
// syncing step reduces what was accumulated. Wait still ends each step.
// Every rank makes the same calls. Called between steps: during one (once
// a gradient was marked ready) it fails with collective.ErrInvalidArgument.
func (r *Reducer[T]) NoSync(on bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.nready > 0 {
		return fmt.Errorf("ddp.Reducer.NoSync: a step is under way (%d of %d gradients ready): %w", r.nready, len(r.grads), collective.ErrInvalidArgument)
	}
	r.noSync = on
	return nil
}

// MarkReady says that gradient i holds its final values for this step. In
// a syncing step it starts, asynchronously, the all-reduce of every
// bucket that is then ready with all the buckets before it. Marking a
// gradient twice in one step, or an index out of range, fails with
// collective.ErrInvalidArgument (and changes nothing). ctx bounds the
// all-reduces it starts.
func (r *Reducer[T]) MarkReady(ctx context.Context, i int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i < 0 || i >= len(r.grads) {
		return fmt.Errorf("ddp.Reducer.MarkReady: gradient %d of %d: %w", i, len(r.grads), collective.ErrInvalidArgument)
	}
	if r.ready[i] {
		return fmt.Errorf("ddp.Reducer.MarkReady: %s (#%d) marked ready twice in one step: %w", r.names[i], i, collective.ErrInvalidArgument)
	}
	if r.nready == 0 {
		r.s.mu.Lock()
		closed := r.s.closed
		r.s.mu.Unlock()
		if closed {
			return fmt.Errorf("ddp.Reducer.MarkReady: %w", ErrClosed)
		}
	}
	r.ready[i] = true
	r.nready++
	r.left[r.of[i]]--
	if r.noSync {
		return nil
	}
	for r.next < len(r.buckets) && r.left[r.next] == 0 {
		r.start(ctx, r.next)
		r.next++
	}
	return nil
}

// MarkReadyName is MarkReady of the gradient named name
// (ReducerOptions.Names).
func (r *Reducer[T]) MarkReadyName(ctx context.Context, name string) error {
	i, ok := r.index[name]
	if !ok {
		return fmt.Errorf("ddp.Reducer.MarkReadyName: no gradient named %q: %w", name, collective.ErrInvalidArgument)
	}
	return r.MarkReady(ctx, i)
}

// start starts bucket k's all-reduce on the comm's worker. r.mu held.
func (r *Reducer[T]) start(ctx context.Context, k int) {
	b := &r.buckets[k]
	s := r.s
	if !b.inPlace {
		off := 0
		for _, g := range r.grads[b.first:b.end] {
			off += copy(b.data[off:], g)
		}
	}
	s.mu.Lock()
	st := s.cur
	step := s.step + 1
	s.mu.Unlock()
	w := s.c.Go(ctx, "ddp.Reducer", func(ctx context.Context) error {
		if r.failed.Load() {
			// An earlier bucket failed (a peer refused it, say): its
			// peers will not reduce this one either.
			return fmt.Errorf("bucket %d (%s): not reduced: an earlier bucket failed", k, bucketLabel(r.names[b.first:b.end]))
		}
		t0 := time.Now()
		if err := s.reduce(ctx, b.data, st, false); err != nil {
			r.failed.Store(true)
			if se, ok := s.named("Reducer.Wait", step, err).(*StepError); ok {
				se.Bucket, se.Gradients = k, r.names[b.first:b.end:b.end]
				return se
			}
			return fmt.Errorf("bucket %d (%s): %w", k, bucketLabel(r.names[b.first:b.end]), err)
		}
		r.spent[k] = time.Since(t0)
		if !b.inPlace {
			off := 0
			for _, g := range r.grads[b.first:b.end] {
				off += copy(g, b.data[off:])
			}
		}
		return nil
	}, collective.Mem(b.data))
	r.works = append(r.works, w)
	s.pendMu.Lock()
	s.pending = append(pruneDone(s.pending), w)
	s.pendMu.Unlock()
}

// Wait ends the step: it waits for the all-reduces the step started and
// returns the first error among them, wrapped with the bucket and its
// gradients. When a gradient was never marked ready it returns an
// *UnreadyError naming every such gradient, and (in a syncing step, once
// the buckets that did start are reduced) tells the other ranks, so that a
// rank waiting in the all-reduce of a bucket this rank could not start
// fails at once with collective.ErrMismatch rather than waiting for the
// timeout. Either way the next step starts afresh: every gradient unready
// (except when ctx ends before the all-reduces: the step is still under
// way then, and Wait may be called again).
func (r *Reducer[T]) Wait(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var unready *UnreadyError
	if r.nready < len(r.grads) {
		unready = &UnreadyError{Call: "Reducer.Wait", Bucket: -1}
		if !r.noSync {
			unready.Bucket = r.next
		}
		for i, ok := range r.ready {
			if !ok {
				unready.Gradients = append(unready.Gradients, r.names[i])
				unready.Indices = append(unready.Indices, i)
			}
		}
	}
	var first error
	for _, w := range r.works {
		if err := w.Wait(ctx); err != nil && first == nil {
			first = err
		}
		if !w.Done() {
			// ctx ended first: the step stays under way (its all-reduces
			// own the gradients), and Wait may be called again.
			return fmt.Errorf("ddp.Reducer.Wait: %w", first)
		}
	}
	defer r.reset()
	r.forget()
	if unready != nil {
		if first == nil && !r.noSync {
			// The peers that marked every gradient wait in bucket
			// r.next's all-reduce: a barrier there fails them (and us)
			// with a mismatch at once; peers stuck at the same bucket
			// meet it and fail with their own UnreadyError.
			_ = collective.Barrier(ctx, r.s.c)
		}
		return unready
	}
	if first != nil {
		const hint = "a rank that did not mark every gradient ready meets the first bucket it could not start with a Barrier"
		if se, ok := first.(*StepError); ok {
			if errors.Is(first, collective.ErrMismatch) {
				se.hint = hint
			}
			return se
		}
		if errors.Is(first, collective.ErrMismatch) {
			return fmt.Errorf("ddp.Reducer.Wait: %w (%s)", first, hint)
		}
		return fmt.Errorf("ddp.Reducer.Wait: %w", first)
	}
	if r.noSync {
		return nil
	}
	var spent time.Duration
	bytes := 0
	for k, b := range r.buckets {
		spent += r.spent[k]
		bytes += len(b.data) * r.s.dt.Size()
	}
	s := r.s
	s.mu.Lock()
	s.step++
	st := s.cur
	s.mon.record(st, bytes, spent, len(r.buckets))
	s.mu.Unlock()
	s.afterStep(ctx)
	return nil
}

// forget drops the step's all-reduces from the Sync's pending steps: Wait
// reported them. r.mu held.
func (r *Reducer[T]) forget() {
	s := r.s
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	out := s.pending[:0]
	for _, w := range s.pending {
		if !slices.Contains(r.works, w) {
			out = append(out, w)
		}
	}
	clear(s.pending[len(out):])
	s.pending = out
}

// reset makes every gradient unready for the next step. r.mu held.
func (r *Reducer[T]) reset() {
	clear(r.ready)
	r.nready, r.next = 0, 0
	for k, b := range r.buckets {
		r.left[k] = b.end - b.first
	}
	clear(r.works)
	r.works = r.works[:0]
	r.failed.Store(false)
}
