package ddp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// StepError is how a step fails when one of its collectives fails: it
// names the ddp call that returned it, the rank, the step and what the
// step was doing, with the strategy that ran. The collective's own error
// (a *collective.Error: its rank, operation and call number, and the
// cause) is kept in the chain, so errors.Is and errors.As see everything
// it matches (collective.ErrTimeout, collective.ErrGroupBroken,
// context.Canceled, a *collective.MismatchError, ...).
//
// Failures that every rank finds alike before anything moves are not
// StepErrors: shapes that differ (*ShapeError), Options that differ
// (*OptionsError), a restored residual that does not fit.
type StepError struct {
	// Call is the ddp call that returned the error: "Sync.Sync",
	// "Sync.SyncAll", "Sync.SyncAsync" (the error of its Work), or
	// "Reducer.Wait".
	Call string
	Rank int
	// Step is the number of the step that failed: the value Stats.Steps
	// would have taken had it succeeded.
	Step int64
	// Bucket is the Reducer bucket whose all-reduce failed, and Gradients
	// its gradients' names (-1 and nil outside a Reducer step).
	Bucket    int
	Gradients []string
	// Phase is what the step was doing: "all-reduce" (with a Wire format:
	// "all-reduce, bfloat16 on the wire"), "shape and options check",
	// "top-k all-gather", "top-k selection", "strategy agreement".
	Phase string
	// Strategy is the strategy of the collective that failed, as it ran:
	// the one the step resolved (Auto's pick for the size, ring for a Wire
	// format and for top-k's all-gathers, direct for the checks and the
	// selector's agreement), never Auto, except where no strategy applies
	// (the device's top-k selection; an all-reduce that refused closed
	// memory before choosing one).
	Strategy collective.Strategy
	Err      error
	hint     string
}

func (e *StepError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ddp.%s: rank %d, step %d", e.Call, e.Rank, e.Step)
	if e.Bucket >= 0 {
		fmt.Fprintf(&b, ", bucket %d (%s)", e.Bucket, bucketLabel(e.Gradients))
	}
	b.WriteString(": ")
	b.WriteString(e.Phase)
	var details []string
	if e.Strategy != collective.Auto {
		details = append(details, "strategy "+e.Strategy.String())
	}
	cause := error(e.Err)
	var ce *collective.Error
	if errors.As(e.Err, &ce) {
		if ce.Seq > 0 && !ce.P2P {
			details = append(details, fmt.Sprintf("collective call #%d", ce.Seq))
		}
		cause = ce.Err
		var be *collective.BrokenError
		if errors.As(ce.Err, &be) && be.Rank >= 0 && be.Rank != ce.Rank && !be.P2P && be.Op != "Run" {
			// Another rank's collective failed first: named by its
			// number, as this one is.
			if be.Seq == ce.Seq {
				cause = fmt.Errorf("rank %d failed there first: %w", be.Rank, be.Cause)
			} else {
				cause = fmt.Errorf("rank %d failed first, in collective call #%d: %w", be.Rank, be.Seq, be.Cause)
			}
		}
	}
	if len(details) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(details, ", "))
	}
	fmt.Fprintf(&b, ": %v", cause)
	if e.hint != "" {
		fmt.Fprintf(&b, " (%s)", e.hint)
	}
	return b.String()
}

// Unwrap returns the collective's error.
func (e *StepError) Unwrap() error { return e.Err }

// bucketLabel names a bucket's gradients (the first and last of many).
func bucketLabel(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	if len(names) == 0 {
		return "no gradients"
	}
	return fmt.Sprintf("%s .. %s, %d gradients", names[0], names[len(names)-1], len(names))
}

// phaseError is a failed collective of a step, with what the step was
// doing and the strategy that ran; the step's call turns it into a
// *StepError (named).
type phaseError struct {
	phase string
	st    collective.Strategy
	err   error
}

func (e *phaseError) Error() string { return e.phase + ": " + e.err.Error() }
func (e *phaseError) Unwrap() error { return e.err }

func failed(phase string, st collective.Strategy, err error) error {
	if err == nil {
		return nil
	}
	return &phaseError{phase: phase, st: st, err: err}
}

// named makes a step's collective failure a *StepError of call at step;
// other errors are returned as they are.
func (s *Sync[T]) named(call string, step int64, err error) error {
	pe, ok := err.(*phaseError)
	if !ok {
		return err
	}
	return &StepError{Call: call, Rank: s.c.Rank(), Step: step, Bucket: -1, Phase: pe.phase, Strategy: pe.st, Err: pe.err}
}

// nextStep is the number the step about to run will have.
func (s *Sync[T]) nextStep() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.step + 1
}

// OptionsError says that ranks created their Syncs with different Options
// (or gradient types, or group strategies): found at the first step, or
// at NewReducer, in the same small all-reduce as the shape check and
// before any gradient moved. Every rank gets the same OptionsError,
// comparing every rank's values with rank 0's. Fields that only matter
// with another option set (the selector's with Adaptive, NoErrorFeedback
// with TopK) are compared only then. errors.Is(err,
// collective.ErrMismatch) holds.
type OptionsError struct {
	Call string // the ddp call that found it: "Sync.Sync", "NewReducer", ...
	// Field is the first field (in Options order; "gradient type",
	// "Config.Strategy" and "Config.Deterministic" of the group's Config
	// after them) whose value on Peer differs from rank 0's: Value there
	// and PeerValue on Peer, as Go would print them.
	Field            string
	Value, PeerValue string
	// Peer is the lowest rank whose values differ from rank 0's, Ranks
	// every such rank, and Fields every field that differs on some rank.
	Peer   int
	Ranks  []int
	Fields []string
}

func (e *OptionsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ddp.%s: ranks created their Syncs with different options: %s is %s on rank 0 and %s on rank %d",
		e.Call, e.Field, e.Value, e.PeerValue, e.Peer)
	if len(e.Fields) > 1 {
		fmt.Fprintf(&b, " (fields that differ: %s)", strings.Join(e.Fields, ", "))
	}
	if len(e.Ranks) > 1 {
		fmt.Fprintf(&b, "; ranks %v differ from rank 0", e.Ranks)
	}
	b.WriteString("; nothing was reduced")
	return b.String()
}

// Is makes errors.Is(err, collective.ErrMismatch) true.
func (e *OptionsError) Is(t error) bool { return t == collective.ErrMismatch }

// optionFields are the fields of a Sync's fingerprint, in its order.
var optionFields = [...]string{"TopK", "NoErrorFeedback", "Wire", "AnyOrder", "Adaptive", "SwitchCooldown",
	"EvaluationWindow", "SwitchThreshold", "ProbeSteps", "Candidates", "ProbeLimit", "FusionBytes",
	"gradient type", "Config.Strategy", "Config.Deterministic"}

const (
	fpTopK = iota
	fpNoErrorFeedback
	fpWire
	fpAnyOrder
	fpAdaptive
	fpSwitchCooldown
	fpEvaluationWindow
	fpSwitchThreshold
	fpProbeSteps
	fpCandidates
	fpProbeLimit
	fpFusionBytes
	fpType
	fpStrategy
	fpDeterministic
	fpFields
)

// fingerprint is the values of the options every rank must share (the
// defaults filled in), one word each, in optionFields order.
func fingerprint(o Options, dt backend.DType, cfg collective.Config) []uint64 {
	fp := make([]uint64, fpFields)
	b := func(v bool) uint64 {
		if v {
			return 1
		}
		return 0
	}
	fp[fpTopK] = uint64(math.Float32bits(o.TopK))
	fp[fpNoErrorFeedback] = b(o.NoErrorFeedback && o.TopK > 0)
	fp[fpWire] = uint64(o.Wire)
	fp[fpAnyOrder] = b(o.AnyOrder)
	fp[fpAdaptive] = b(o.Adaptive)
	if o.Adaptive {
		fp[fpSwitchCooldown] = uint64(o.SwitchCooldown)
		fp[fpEvaluationWindow] = uint64(o.EvaluationWindow)
		fp[fpSwitchThreshold] = math.Float64bits(o.SwitchThreshold)
		fp[fpProbeSteps] = uint64(o.ProbeSteps)
		fp[fpCandidates] = packStrategies(o.Candidates)
		fp[fpProbeLimit] = math.Float64bits(o.ProbeLimit)
	}
	fp[fpFusionBytes] = uint64(o.FusionBytes)
	fp[fpType] = uint64(dt)
	fp[fpStrategy] = uint64(cfg.Strategy)
	fp[fpDeterministic] = b(cfg.Deterministic)
	return fp
}

// packStrategies packs up to 15 strategies, in order, into a word: the
// count in the low 4 bits, then 4 bits each. Longer lists (repeats) are
// hashed, with the top bit set.
func packStrategies(ss []collective.Strategy) uint64 {
	if len(ss) > 15 {
		h := uint64(fnvOffset)
		for _, s := range ss {
			h = hashWord(h, uint64(s))
		}
		return h | 1<<63
	}
	v := uint64(len(ss))
	for i, s := range ss {
		v |= uint64(s&15) << (4 * (i + 1))
	}
	return v
}

// optionValue prints fingerprint word v of field f as Go would print the
// option.
func optionValue(f int, v uint64) string {
	switch f {
	case fpTopK:
		return fmt.Sprint(math.Float32frombits(uint32(v)))
	case fpNoErrorFeedback, fpAnyOrder, fpAdaptive, fpDeterministic:
		return fmt.Sprint(v != 0)
	case fpWire:
		if v == 0 {
			return "0 (none)"
		}
		switch w := backend.WireFormat(v); w {
		case backend.F16:
			return "backend.F16"
		case backend.BF16:
			return "backend.BF16"
		default:
			return w.String()
		}
	case fpSwitchThreshold, fpProbeLimit:
		return fmt.Sprint(math.Float64frombits(v))
	case fpCandidates:
		if v>>63 != 0 {
			return "a list of more than 15 strategies"
		}
		var names []string
		for i := range int(v & 15) {
			names = append(names, collective.Strategy((v>>(4*(i+1)))&15).String())
		}
		return "[" + strings.Join(names, " ") + "]"
	case fpType:
		return gradName(backend.DType(v))
	case fpStrategy:
		return collective.Strategy(v).String()
	}
	return fmt.Sprint(v)
}

// fingerprintHash is a 64-bit FNV-1a hash of a fingerprint.
func fingerprintHash(fp []uint64) uint64 {
	h := uint64(fnvOffset)
	for _, v := range fp {
		h = hashWord(h, v)
	}
	return h
}

// describeOptions gathers every rank's fingerprint (after the hashes
// differed) and returns the OptionsError every rank builds from them
// alike.
func (s *Sync[T]) describeOptions(ctx context.Context, call string) error {
	n := s.c.Size()
	all := make([]uint64, n*fpFields)
	if err := collective.AllGather(ctx, s.c, s.fp, all); err != nil {
		return failed("options check", collective.Ring, err)
	}
	of := func(r int) []uint64 { return all[r*fpFields : (r+1)*fpFields] }
	e := &OptionsError{Call: call, Peer: -1}
	differ := make([]bool, fpFields)
	ref := of(0)
	for r := 1; r < n; r++ {
		fp := of(r)
		same := true
		for f := range fpFields {
			if fp[f] == ref[f] {
				continue
			}
			same = false
			differ[f] = true
			if e.Peer < 0 {
				e.Peer = r
				e.Field, e.Value, e.PeerValue = optionFields[f], optionValue(f, ref[f]), optionValue(f, fp[f])
			}
		}
		if !same {
			e.Ranks = append(e.Ranks, r)
		}
	}
	for f, d := range differ {
		if d {
			e.Fields = append(e.Fields, optionFields[f])
		}
	}
	if e.Peer < 0 {
		return nil // unreachable: equal fingerprints hash alike
	}
	return e
}
