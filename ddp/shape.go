package ddp

import (
	"context"
	"fmt"
	"strings"

	"github.com/gocoll/gocoll/collective"
)

// ShapeError says that ranks passed tensors of different shapes (the
// number of tensors, or their lengths in order) to the same ddp call.
// Every rank gets the same ShapeError, compared against rank 0's shapes,
// and nothing was reduced. errors.Is(err, collective.ErrMismatch) holds.
type ShapeError struct {
	Call string // the ddp call: "Sync.Sync", "Sync.SyncAll", "BroadcastParameters", ...
	// Peer is the lowest rank whose shapes differ from rank 0's; Ranks
	// lists every such rank.
	Peer  int
	Ranks []int
	// Tensors and PeerTensors are the numbers of tensors rank 0 and Peer
	// passed.
	Tensors, PeerTensors int
	// Tensor is the first tensor whose length differs between rank 0 and
	// Peer (-1 when only the numbers of tensors differ), Len and PeerLen
	// its lengths there, and Differ how many of the tensors both passed
	// differ in length.
	Tensor       int
	Len, PeerLen int
	Differ       int
}

func (e *ShapeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ddp.%s: shapes differ across ranks: ", e.Call)
	if e.Tensors != e.PeerTensors {
		fmt.Fprintf(&b, "rank 0 passed %s and rank %d %d", plural(e.Tensors, "tensor", "tensors"), e.Peer, e.PeerTensors)
		if e.Tensor >= 0 {
			fmt.Fprintf(&b, "; tensor %d has %s on rank 0 and %d on rank %d", e.Tensor, plural(e.Len, "element", "elements"), e.PeerLen, e.Peer)
		}
	} else {
		fmt.Fprintf(&b, "tensor %d has %s on rank 0 and %d on rank %d (%d of %d tensors differ)",
			e.Tensor, plural(e.Len, "element", "elements"), e.PeerLen, e.Peer, e.Differ, e.Tensors)
	}
	if len(e.Ranks) > 1 {
		fmt.Fprintf(&b, "; ranks %v differ from rank 0", e.Ranks)
	}
	return b.String()
}

// Is makes errors.Is(err, collective.ErrMismatch) true.
func (e *ShapeError) Is(t error) bool { return t == collective.ErrMismatch }

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// shapeState is what a Sync remembers of the shapes its steps were given:
// the lengths last agreed on by every rank. A step whose shapes are those
// is not checked again; the check runs at the first step and whenever the
// shapes change (and after Restore).
type shapeState struct {
	lens []int
	ok   bool
	vec  [6]uint64 // shapes, options, restored residual (Sync.agree)
}

// checkStep agrees on the lengths of a step's tensors unless they are the
// ones last agreed on: no collective and no allocation in a steady state.
// The same all-reduce agrees on the Sync's options (so the first step
// finds options that differ before any gradient moves). A residual restored and not yet checked is checked in the same
// all-reduce: when it does not fit the step on some rank, every rank
// fails.
func (s *Sync[T]) checkStep(ctx context.Context, call string, tensors [][]T) error {
	st := &s.shape
	if st.ok && len(st.lens) == len(tensors) {
		same := true
		for i, t := range tensors {
			if st.lens[i] != len(t) {
				same = false
				break
			}
		}
		if same {
			return nil
		}
	}
	st.ok = false
	st.lens = st.lens[:0]
	total := 0
	for _, t := range tensors {
		st.lens = append(st.lens, len(t))
		total += len(t)
	}
	var misfit uint64 // 1 + this rank, when its restored residual does not fit
	if s.restored && len(s.residual) != total {
		misfit = uint64(s.c.Rank()) + 1
	}
	st.vec[4], st.vec[5] = misfit, ^misfit
	if err := s.agree(ctx, call, st.lens, st.vec[:]); err != nil {
		return err
	}
	if r := st.vec[4]; r != 0 {
		if misfit != 0 {
			return fmt.Errorf("ddp.%s: the residual restored on rank %d has %d elements, the step's gradients %d: %w",
				call, s.c.Rank(), len(s.residual), total, collective.ErrInvalidArgument)
		}
		return fmt.Errorf("ddp.%s: the residual restored on rank %d does not fit the step's gradients: %w",
			call, r-1, collective.ErrInvalidArgument)
	}
	s.restored = false
	st.ok = true
	return nil
}

// shapeHash is a 64-bit FNV-1a hash of the number of tensors and their
// lengths, in order.
func shapeHash(lens []int) uint64 {
	h := hashWord(fnvOffset, uint64(len(lens)))
	for _, n := range lens {
		h = hashWord(h, uint64(n))
	}
	return h
}

// fnvOffset is FNV-1a's initial hash.
const fnvOffset = 14695981039346656037

// hashWord is FNV-1a hash h continued with the 8 bytes of v.
func hashWord(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= 1099511628211
		v >>= 8
	}
	return h
}

// agreeShapes checks that every rank has the same lens: one all-reduce
// (Max) of vec, whose first two slots it fills with the hash h of lens and
// ^h (so the maximum of the second is the complement of the minimum of
// the first). The caller's further slots, pairs (v, ^v) too, are agreed
// on by the same all-reduce: afterwards they hold the maximum and the
// complemented minimum over ranks. When the hashes differ every rank
// gathers every rank's lengths and returns the same *ShapeError.
func agreeShapes(ctx context.Context, c *collective.Comm, call string, lens []int, vec []uint64) error {
	h := shapeHash(lens)
	vec[0], vec[1] = h, ^h
	if err := collective.AllReduceWith(ctx, c, vec, vec, collective.Max, collective.Direct); err != nil {
		return fmt.Errorf("ddp.%s: shape check: %w", call, err)
	}
	if vec[0] == ^vec[1] {
		return nil
	}
	return plain(call, describeShapes(ctx, c, call, lens))
}

// plain names call in a collective failure outside a step (a *phaseError).
func plain(call string, err error) error {
	if pe, ok := err.(*phaseError); ok {
		return fmt.Errorf("ddp.%s: %s: %w", call, pe.phase, pe.err)
	}
	return err
}

// agree is agreeShapes for a Sync's calls, which also agree on the
// Sync's options: vec[2:4] carry the hash of its fingerprint, and when the
// ranks' fingerprints differ every rank returns the same *OptionsError
// (before comparing shapes, which different options may explain).
// Collective failures are *phaseErrors.
func (s *Sync[T]) agree(ctx context.Context, call string, lens []int, vec []uint64) error {
	h := shapeHash(lens)
	vec[0], vec[1] = h, ^h
	vec[2], vec[3] = s.fpHash, ^s.fpHash
	if err := collective.AllReduceWith(ctx, s.c, vec, vec, collective.Max, collective.Direct); err != nil {
		return failed("shape and options check", collective.Direct, err)
	}
	if vec[2] != ^vec[3] {
		return s.describeOptions(ctx, call)
	}
	if vec[0] != ^vec[1] {
		return describeShapes(ctx, s.c, call, lens)
	}
	return nil
}

// describeShapes gathers every rank's lengths (after the hashes differed)
// and returns the ShapeError every rank builds from them alike.
func describeShapes(ctx context.Context, c *collective.Comm, call string, lens []int) error {
	n := c.Size()
	counts := make([]int64, n)
	if err := collective.AllGather(ctx, c, []int64{int64(len(lens))}, counts); err != nil {
		return failed("shape check", collective.Ring, err)
	}
	cnt, displs := make([]int, n), make([]int, n)
	total := 0
	for r, k := range counts {
		cnt[r], displs[r] = int(k), total
		total += int(k)
	}
	mine := make([]int64, len(lens))
	for i, l := range lens {
		mine[i] = int64(l)
	}
	all := make([]int64, total)
	if err := collective.AllGatherV(ctx, c, mine, all, cnt, displs); err != nil {
		return failed("shape check", collective.Direct, err)
	}
	of := func(r int) []int64 { return all[displs[r] : displs[r]+cnt[r]] }
	e := &ShapeError{Call: call, Peer: -1, Tensor: -1}
	ref := of(0)
	for r := 1; r < n; r++ {
		l := of(r)
		if len(l) == len(ref) && sameInts(l, ref) {
			continue
		}
		e.Ranks = append(e.Ranks, r)
		if e.Peer >= 0 {
			continue
		}
		e.Peer, e.Tensors, e.PeerTensors = r, len(ref), len(l)
		for i := range min(len(l), len(ref)) {
			if l[i] != ref[i] {
				if e.Tensor < 0 {
					e.Tensor, e.Len, e.PeerLen = i, int(ref[i]), int(l[i])
				}
				e.Differ++
			}
		}
	}
	if e.Peer < 0 {
		return nil // unreachable: equal lengths hash alike
	}
	return e
}

func sameInts(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
