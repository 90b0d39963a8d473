//go:build cgo

package shimdev

import (
	"math"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/kernels"
)

// Multi-destination kernel kinds, indexing multiState.
const (
	multiF32 = iota
	multiF64
	multiI32
	multiU32
	multiI64
	multiU64
	multiI8
	multiU8
	multiI16
	multiU16
	multiF16
	multiF16In32 // src0 holds float32 partial results
	multiBF16
	multiBF16In32
	multiE4M3
	multiE4M3In32
	multiE5M2
	multiE5M2In32
	multi4F32 // 16-byte variants, as in vec.go
	multi4F64
	multi4I32
	multi4U32
	multi4I64
	multi4U64
	numMultiKinds
)

// multiSpec says what a multi-destination kind is: its kernel, its element
// type, and the 16-byte kind of a scalar one (-1: none).
type multiSpec struct {
	name string
	ftz  string // as kindSpec.ftz
	dt   backend.DType
	vec  int
}

var multiKinds = [numMultiKinds]multiSpec{
	multiF32:      {name: kernels.ReduceMF32, ftz: kernels.ReduceMF32FTZ, dt: backend.F32, vec: multi4F32},
	multiF64:      {name: kernels.ReduceMF64, dt: backend.F64, vec: multi4F64},
	multiI32:      {name: kernels.ReduceMI32, dt: backend.I32, vec: multi4I32},
	multiU32:      {name: kernels.ReduceMU32, dt: backend.U32, vec: multi4U32},
	multiI64:      {name: kernels.ReduceMI64, dt: backend.I64, vec: multi4I64},
	multiU64:      {name: kernels.ReduceMU64, dt: backend.U64, vec: multi4U64},
	multiI8:       {name: kernels.ReduceMI8, dt: backend.I8, vec: -1},
	multiU8:       {name: kernels.ReduceMU8, dt: backend.U8, vec: -1},
	multiI16:      {name: kernels.ReduceMI16, dt: backend.I16, vec: -1},
	multiU16:      {name: kernels.ReduceMU16, dt: backend.U16, vec: -1},
	multiF16:      {name: kernels.ReduceMF16, dt: backend.Half, vec: -1},
	multiF16In32:  {name: kernels.ReduceMF16In32, dt: backend.Half, vec: -1},
	multiBF16:     {name: kernels.ReduceMBF16, dt: backend.BFloat16, vec: -1},
	multiBF16In32: {name: kernels.ReduceMBF16In32, dt: backend.BFloat16, vec: -1},
	multiE4M3:     {name: kernels.ReduceME4M3, dt: backend.F8E4M3, vec: -1},
	multiE4M3In32: {name: kernels.ReduceME4M3In32, dt: backend.F8E4M3, vec: -1},
	multiE5M2:     {name: kernels.ReduceME5M2, dt: backend.F8E5M2, vec: -1},
	multiE5M2In32: {name: kernels.ReduceME5M2In32, dt: backend.F8E5M2, vec: -1},
	multi4F32:     {name: kernels.ReduceM4F32, ftz: kernels.ReduceM4F32FTZ, dt: backend.F32, vec: -1},
	multi4F64:     {name: kernels.ReduceM4F64, dt: backend.F64, vec: -1},
	multi4I32:     {name: kernels.ReduceM4I32, dt: backend.I32, vec: -1},
	multi4U32:     {name: kernels.ReduceM4U32, dt: backend.U32, vec: -1},
	multi4I64:     {name: kernels.ReduceM4I64, dt: backend.I64, vec: -1},
	multi4U64:     {name: kernels.ReduceM4U64, dt: backend.U64, vec: -1},
}

// multiKind returns the scalar multi-destination kind of a scalar reduce
// kind (of a 16-bit one that reads src0 as float32 partial results, the
// matching In32 kind).
func multiKind(kind int) int {
	switch kind {
	case kindReduceF32:
		return multiF32
	case kindReduceF64:
		return multiF64
	case kindReduceI32:
		return multiI32
	case kindReduceU32:
		return multiU32
	case kindReduceI64:
		return multiI64
	case kindReduceU64:
		return multiU64
	case kindReduceI8:
		return multiI8
	case kindReduceU8:
		return multiU8
	case kindReduceI16:
		return multiI16
	case kindReduceU16:
		return multiU16
	case kindReduceF16:
		return multiF16
	case kindReduceF16In32:
		return multiF16In32
	case kindReduceBF16:
		return multiBF16
	case kindReduceBF16In32:
		return multiBF16In32
	case kindReduceE4M3:
		return multiE4M3
	case kindReduceE4M3In32:
		return multiE4M3In32
	case kindReduceE5M2:
		return multiE5M2
	case kindReduceE5M2In32:
		return multiE5M2In32
	}
	panic("shimdev: no multi-destination variant of kernel kind")
}

// Push-constant layout of the reducem kernels (kernels/reduce.comp with
// GOCOLL_MULTI): n at 0 as in reduce, then these.
const (
	pushMultiDstOff = 4  // uint dst_off[8]
	pushMultiSrcOff = 36 // uint src_off[8]
	pushMultiScale  = 72 // S scale
	pushMultiDiv    = 80 // uint div
)

// multiState holds a device's multi-destination pipelines, by kind, op,
// K-1, M-1 and scale flag (created on first use, like Device.pipes), and the
// stream's scratch list of sources. Only the stream's goroutine touches it.
type multiState struct {
	kinfo  [numMultiKinds]kernels.Info
	looked bool // kinfo is filled
	pipes  [numMultiKinds][backend.NumOps][kernels.MaxSources][kernels.MaxDestinations][2]*cshim.Kernel
	srcs   [kernels.MaxSources]backend.Region
	// A pass's body or tail (multiPass).
	tailDsts [kernels.MaxDestinations]backend.Region
	tailSrcs [kernels.MaxSources]backend.Region
}

var _ backend.MultiReducer = (*Stream)(nil)

// ReduceMulti records dsts[j] = op(srcs...) * scale for every j
// (backend.MultiReducer), bitwise what Reduce writes to one destination.
//
// Up to 8 sources and 8 destinations take one pass of the reducem kernel
// (per piece of the binding limit): every source is read once and every
// destination written once. More sources are first reduced as Reduce does,
// in passes of 8 and then 7 more into a partial result (a destination that
// no later pass reads, else the device's scratch buffer; for the 16-bit
// types float32 partial results, always in the scratch buffer), the last pass
// being the reducem kernel over the partial result and the remaining
// sources; each earlier pass costs one more write and read of the partial
// result. More than 8 destinations cost one more pass per further 8: the
// reducem kernel with one source, dsts[0], copying it to them (a read of
// dsts[0] each). Counters: one dispatch per pass and piece (and one per
// scalar tail: vecState.body), BytesReduced the bytes each dispatch writes
// (all its destinations), host traffic counted once per region as Reduce
// counts it.
func (s *Stream) ReduceMulti(op backend.Op, dt backend.DType, dsts []backend.Region, srcs []backend.Region, scale float64) error {
	const name = "reduce multi"
	d := s.d
	if d.closed.Load() {
		return d.errClosed(name)
	}
	es, kind, _, err := s.dtype(name, dt)
	if err != nil {
		return err
	}
	if err := backend.CheckOp(op, dt); err != nil {
		return d.errorf("%s: %w", name, err)
	}
	if err := s.checkScale(name, dt, scale); err != nil {
		return err
	}
	if len(srcs) == 0 || len(dsts) == 0 {
		return d.errorf("%s: %d sources, %d destinations: %w", name, len(srcs), len(dsts), backend.ErrInvalidArgument)
	}
	if err := s.checkMulti(name, es, dsts, srcs); err != nil {
		return err
	}
	if dsts[0].Len == 0 {
		return nil
	}
	d.counters.CountHost(dsts[0], srcs...)
	for _, r := range dsts[1:] {
		d.counters.CountHost(r)
	}
	last, lastKind := srcs, kind
	switch {
	case len(srcs) <= kernels.MaxSources:
	case isNarrowKind(kind):
		// Float32 partial results in scratch (Reduce's), read by the
		// reducem kernel of kind+in32.
		partial, err := s.scratch(dsts[0].Len / es * 4)
		if err != nil {
			return err
		}
		if last, err = s.partials16(kind, op, es, partial, srcs); err != nil {
			return err
		}
		m := &s.d.multi
		k := copy(m.srcs[:], last)
		last, lastKind = m.srcs[:k], kind+in32
	default:
		if last, err = s.partialPasses(kind, op, es, dsts, srcs); err != nil {
			return err
		}
	}
	head := dsts[:min(len(dsts), kernels.MaxDestinations)]
	if err := s.multiPass(lastKind, op, es, head, last, scale); err != nil {
		return err
	}
	for j := kernels.MaxDestinations; j < len(dsts); j += kernels.MaxDestinations {
		s.d.multi.srcs[0] = dsts[0]
		if err := s.multiPass(kind, op, es, dsts[j:min(j+kernels.MaxDestinations, len(dsts))], s.d.multi.srcs[:1], 1); err != nil {
			return err
		}
	}
	return d.check(name)
}

// checkMulti checks the regions of a ReduceMulti: all of this device (or of
// one sharing its memory), in whole elements, of one length; destinations
// pairwise disjoint; a source either a destination's very region or apart
// from every destination.
func (s *Stream) checkMulti(name string, es int, dsts, srcs []backend.Region) error {
	d := s.d
	n := dsts[0].Len
	for j, r := range dsts {
		if _, err := s.region(name, "dst", r, es); err != nil {
			return err
		}
		if r.Len != n {
			return d.errorf("%s: dst %d has %d bytes, dst 0 %d: %w", name, j, r.Len, n, backend.ErrInvalidArgument)
		}
		for i := range j {
			if o := dsts[i]; o.Buf == r.Buf && n > 0 && o.Off < r.Off+n && r.Off < o.Off+n {
				return d.errorf("%s: dst %d overlaps dst %d: %w", name, j, i, backend.ErrInvalidArgument)
			}
		}
	}
	for i, r := range srcs {
		if _, err := s.region(name, "src", r, es); err != nil {
			return err
		}
		if r.Len != n {
			return d.errorf("%s: src %d has %d bytes, dst %d: %w", name, i, r.Len, n, backend.ErrInvalidArgument)
		}
		for j := range dsts {
			if partialOverlap(dsts[j], r) {
				return d.errorf("%s: dst %d partly overlaps src %d: %w", name, j, i, backend.ErrInvalidArgument)
			}
		}
	}
	return nil
}

// partialPasses reduces all but the last at most 7 sources of more than 8
// in Reduce's passes (8, then 7 at a time) into a partial result, and
// returns the sources of the last pass: the partial result, then the rest.
func (s *Stream) partialPasses(kind int, op backend.Op, es int, dsts, srcs []backend.Region) ([]backend.Region, error) {
	partial, err := s.partialRegion(dsts, srcs)
	if err != nil {
		return nil, err
	}
	if err := s.pass(kind, op, es, partial, srcs[:kernels.MaxSources], 1); err != nil {
		return nil, err
	}
	i := kernels.MaxSources
	for ; len(srcs)-i > kernels.MaxSources-1; i += kernels.MaxSources - 1 {
		s.passSrcs[0] = partial
		copy(s.passSrcs[1:], srcs[i:i+kernels.MaxSources-1])
		if err := s.pass(kind, op, es, partial, s.passSrcs[:], 1); err != nil {
			return nil, err
		}
	}
	m := &s.d.multi
	m.srcs[0] = partial
	k := copy(m.srcs[1:], srcs[i:])
	return m.srcs[:1+k], nil
}

// partialRegion returns where partial results go: the first destination
// that no pass after the first reads (a source from the ninth on), else
// scratch.
func (s *Stream) partialRegion(dsts, srcs []backend.Region) (backend.Region, error) {
next:
	for _, r := range dsts {
		for _, src := range srcs[kernels.MaxSources:] {
			if sameRegion(r, src) {
				continue next
			}
		}
		return r, nil
	}
	return s.scratch(dsts[0].Len)
}

// multiPass records one reducem kernel over every element of dsts (at most
// 8) from srcs (at most 8), split by the binding limit as pass splits, with
// the 16-byte variant where every region starts on 16 bytes (vec.go).
func (s *Stream) multiPass(kind int, op backend.Op, es int, dsts, srcs []backend.Region, scale float64) error {
	d := s.d
	mk := multiKind(kind)
	scalarES := es
	hasVec := multiKinds[mk].vec >= 0
	vec := hasVec && d.vec.use(d, es, dsts[0], srcs)
	aligned := hasVec
	for _, r := range dsts[1:] {
		aligned = aligned && r.Off%kernels.VecBytes == 0
	}
	vec = vec && aligned
	if body := d.vec.body(d, es, dsts[0], srcs); !vec && aligned && body > 0 {
		// Aligned regions with a tail: the 16-byte kernel on the body,
		// the scalar one on the last few elements.
		m := &d.multi
		for _, part := range [2][2]int{{0, body}, {body, dsts[0].Len - body}} {
			for i, r := range dsts {
				m.tailDsts[i] = backend.Region{Buf: r.Buf, Off: r.Off + part[0], Len: part[1]}
			}
			for i, r := range srcs {
				m.tailSrcs[i] = backend.Region{Buf: r.Buf, Off: r.Off + part[0], Len: part[1]}
			}
			if err := s.multiPass(kind, op, scalarES, m.tailDsts[:len(dsts)], m.tailSrcs[:len(srcs)], scale); err != nil {
				return err
			}
		}
		return nil
	}
	if vec {
		mk, es = multiKinds[mk].vec, kernels.VecBytes
	}
	k, err := d.multiPipeline(mk, op, len(srcs), len(dsts), scale != 1)
	if err != nil {
		return err
	}
	info := &d.multi.kinfo[mk]
	push := s.push[:info.PushConstantBytes]
	clear(push)
	if kinds[kind].dt.IsInt() { // a mean's 1/N: div is N, the scale unused
		ne.PutUint32(push[pushMultiDiv:], uint32(backend.Divisor(scale)))
	}
	if sb := kinds[kind].scale; sb != 0 { // partial results are never scaled: scale and div stay 0
		ne.PutUint32(push[pushMultiDiv:], uint32(backend.Divisor(scale)))
		if sb == 4 {
			ne.PutUint32(push[pushMultiScale:], math.Float32bits(float32(scale)))
		} else {
			ne.PutUint64(push[pushMultiScale:], math.Float64bits(scale))
		}
	}
	const src0 = kernels.MaxDestinations // first source binding
	_, src0ES := sizes(kind, es)         // 4 where srcs[0] holds float32 partial results
	n := dsts[0].Len / es
	for p := 0; p < n; {
		cnt := s.piece(dsts[0], srcs, p, n-p, es, src0ES, es)
		for _, r := range dsts[1:] {
			cnt = s.piece(r, nil, p, cnt, es, es, es)
		}
		ne.PutUint32(push[pushN:], uint32(cnt))
		for j := range dsts {
			ne.PutUint32(push[pushMultiDstOff+4*j:], s.bindRegion(j, dsts[j], p, cnt, es))
		}
		for i := range srcs {
			ne.PutUint32(push[pushMultiSrcOff+4*i:], s.bindRegion(src0+i, srcs[i], p, cnt, srcES(i, src0ES, es)))
		}
		// Every binding is declared: unused ones repeat a used range, which
		// the kernel neither reads nor writes.
		for j := len(dsts); j < src0; j++ {
			s.bind[j] = s.bind[0]
		}
		for i := src0 + len(srcs); i < info.Bindings; i++ {
			s.bind[i] = s.bind[src0]
		}
		groups := min((uint64(cnt)+uint64(d.wg)-1)/uint64(d.wg), uint64(d.maxGroups))
		if err := d.dev.CmdDispatch(k, [3]uint32{uint32(groups), 1, 1}, s.bind[:info.Bindings], push); err != nil {
			return d.errorf("%s: %w", info.Name, err)
		}
		s.recorded = true
		d.counters.Dispatches.Add(1)
		d.counters.BytesReduced.Add(int64(cnt * es * len(dsts)))
		if vec {
			d.vec.dispatches++
		}
		p += cnt
	}
	return nil
}

// multiPipeline returns the cached reducem pipeline of kind mk for k
// sources and m destinations, creating it on first use.
func (d *Device) multiPipeline(mk int, op backend.Op, k, m int, scale bool) (*cshim.Kernel, error) {
	ms := &d.multi
	sc := 0
	if scale {
		sc = 1
	}
	if p := ms.pipes[mk][op][k-1][m-1][sc]; p != nil {
		return p, nil
	}
	if !ms.looked {
		for i, m := range multiKinds {
			name := m.name
			if d.ftz && m.ftz != "" {
				name = m.ftz
			}
			info, err := kernels.Lookup(name)
			if err != nil {
				return nil, d.errorf("%w", err)
			}
			ms.kinfo[i] = info
		}
		ms.looked = true
	}
	info := &ms.kinfo[mk]
	values := d.reduceSpec(op, k, sc)
	values[kernels.SpecM] = uint32(m)
	p, err := d.specialized(info, values)
	if err != nil {
		return nil, d.errorf("pipeline %s (op %v, %d sources, %d destinations, scale %v): %w", info.Name, op, k, m, scale, err)
	}
	ms.pipes[mk][op][k-1][m-1][sc] = p
	return p, nil
}
