package host

import (
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
)

// maxKernelDestinations is how many destinations one dispatch of the reducem
// kernel writes.
const maxKernelDestinations = 8

var _ backend.MultiReducer = (*stream)(nil)

// ReduceMulti records dsts[j][i] = op(srcs[0][i], srcs[1][i], ...) * scale
// for every j (backend.MultiReducer), computed once per element as Reduce
// computes it (for every element type, with Reduce's integer and 16-bit
// semantics) and stored to every destination. A destination may be the same
// region as a source (the host reduces each element over all sources before
// storing it), never a partial overlap; destinations are disjoint. It
// counts what the GPU backends record: Reduce's passes, plus one copying
// pass per further 8 destinations beyond the first 8, each pass one dispatch
// per piece, and as BytesReduced every pass's writes (partial results, then
// every destination once).
func (s *stream) ReduceMulti(op backend.Op, dt backend.DType, dsts []backend.Region, srcs []backend.Region, scale float64) error {
	d := s.d
	if d.closed.Load() {
		return errClosed
	}
	if err := s.checkType(dt); err != nil {
		return fmt.Errorf("host: reduce multi: %w", err)
	}
	if err := backend.CheckOp(op, dt); err != nil {
		return fmt.Errorf("host: reduce multi: %w", err)
	}
	if err := checkScale(dt, scale); err != nil {
		return fmt.Errorf("host: reduce multi: %w", err)
	}
	if len(srcs) == 0 || len(dsts) == 0 {
		return fmt.Errorf("host: reduce multi: %d sources, %d destinations: %w", len(srcs), len(dsts), backend.ErrInvalidArgument)
	}
	db, err := s.resolveElems(dsts[0], dt)
	if err != nil {
		return fmt.Errorf("host: reduce multi: dsts[0]: %w", err)
	}
	n := dsts[0].Len
	for j, r := range dsts[1:] {
		if err := s.checkSource(dsts[0], r, dt); err != nil {
			return fmt.Errorf("host: reduce multi: dsts[%d]: %w", j+1, err)
		}
		for i := range j + 1 {
			if overlap(dsts[i], r) {
				return fmt.Errorf("host: reduce multi: dsts[%d] overlaps dsts[%d]: %w", j+1, i, backend.ErrInvalidArgument)
			}
		}
	}
	for i, r := range srcs {
		for j := range dsts {
			if err := s.checkSource(dsts[j], r, dt); err != nil {
				return fmt.Errorf("host: reduce multi: srcs[%d] (dsts[%d]): %w", i, j, err)
			}
		}
	}
	if n == 0 {
		return nil
	}
	// The sources, then the further destinations, go into the batch's
	// reusable storage.
	b := s.cur
	lo := len(b.srcs)
	for _, r := range srcs {
		b.srcs = append(b.srcs, r.Buf.(*buffer).data[r.Off:r.Off+n:r.Off+n])
	}
	for _, r := range dsts[1:] {
		b.srcs = append(b.srcs, r.Buf.(*buffer).data[r.Off:r.Off+n:r.Off+n])
	}
	b.cmds = append(b.cmds, command{
		kind: cmdReduceMulti, op: op, dt: dt, sc: hostmath.NewScale(scale),
		dst: db, srcLo: lo, srcHi: len(b.srcs), ndst: len(dsts) - 1,
	})
	passes := reducePasses(len(srcs))
	copies := int64((len(dsts) - 1) / maxKernelDestinations)
	d.counters.Dispatches.Add((passes + copies) * s.pieces(n, dt))
	d.counters.BytesReduced.Add((passes - 1 + int64(len(dsts))) * int64(n))
	d.counters.CountHost(dsts[0], srcs...)
	for _, r := range dsts[1:] {
		d.counters.CountHost(r)
	}
	return nil
}

// reducePasses returns how many kernel passes a reduction of k sources
// takes: one of up to 8 sources, then one per 7 more (each later pass reads
// the partial result and up to 7 new sources).
func reducePasses(k int) int64 {
	passes := int64(1)
	if extra := k - maxKernelSources; extra > 0 {
		perPass := maxKernelSources - 1
		passes += int64((extra + perPass - 1) / perPass)
	}
	return passes
}
