//go:build cgo

package shimdev

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/kernels"
)

// stream records into the device's ring of command buffers. Its scratch
// arrays are reused by every call, so recording allocates nothing.
type Stream struct {
	d        *Device
	recorded bool // something was recorded since the last Submit
	bind     [kernels.MaxDestinations + kernels.MaxSources]cshim.Binding
	push     [cshim.MaxPushBytes]byte
	passSrcs [kernels.MaxSources]backend.Region
	tailSrcs [kernels.MaxSources]backend.Region // the sources of a pass's body or tail (pass)
	comp     compressState                      // Pack, Unpack, TopK (compress.go)
}

var _ backend.Stream = (*Stream)(nil)

// Push-constant layout of the kernels (see kernels/reduce.comp, scale.comp).
const (
	pushN           = 0
	pushDstOff      = 4
	pushSrcOff      = 8  // reduce: uint src_off[8]; scale: uint src_off
	pushReduceScale = 40 // reduce: T scale
	pushScaleScale  = 16 // scale: T scale
	pushReduceDiv   = 48 // reduce: uint div, N when scale is 1/N (backend.Divisor), else 0
	pushScaleDiv    = 12 // scale: uint div, before the scale
)

var ne = binary.NativeEndian

// region checks that r is a region of this device whose offset and length
// are whole elements, and returns its buffer.
func (s *Stream) region(op, what string, r backend.Region, es int) (*Buffer, error) {
	if err := backend.CheckRegion(r); err != nil {
		return nil, s.d.errorf("%s: %s: %w", op, what, err)
	}
	b, ok := r.Buf.(*Buffer)
	if !ok || b.d != s.d && !s.d.dev.SharesMemory(b.d.dev) {
		return nil, s.d.errorf("%s: %s is not a buffer of this device: %w", op, what, backend.ErrInvalidArgument)
	}
	if b.closed.Load() {
		return nil, s.d.errorf("%s: %s: buffer closed: %w", op, what, backend.ErrClosed)
	}
	if r.Off%es != 0 || r.Len%es != 0 {
		return nil, s.d.errorf("%s: %s [%d, +%d) is not in whole %d-byte elements: %w",
			op, what, r.Off, r.Len, es, backend.ErrInvalidArgument)
	}
	return b, nil
}

// partialOverlap reports whether a and b share bytes without being the same
// region.
func partialOverlap(a, b backend.Region) bool {
	if a.Buf != b.Buf || a.Len == 0 || b.Len == 0 {
		return false
	}
	if a.Off == b.Off && a.Len == b.Len {
		return false
	}
	return a.Off < b.Off+b.Len && b.Off < a.Off+a.Len
}

func sameRegion(a, b backend.Region) bool {
	return a.Buf == b.Buf && a.Off == b.Off && a.Len == b.Len && a.Len > 0
}

// dtype returns the element size and kernel kinds of dt, or an error when
// dt is unknown, f64 is not available, or dt is an element type the device
// has no kernels for (outside Info().Kernels: the 64-, 16- and 8-bit integer
// and the 16- and 8-bit float types where the device lacks their features).
// The last wraps
// backend.ErrUnsupported; an unknown dtype backend.ErrInvalidArgument. The
// scale kind of every type but f32 and f64 is its reduce kind: Scale copies
// the integers with it (one source, no scale) and scales the 16- and 8-bit
// float types with it (K = 0 for a copy of the bits).
func (s *Stream) dtype(op string, dt backend.DType) (es, reduceKind, scaleKind int, err error) {
	switch {
	case dt == backend.F64 && !s.d.info.Float64:
		return 0, 0, 0, s.d.errorf("%s: f64 kernels on %s: %s: %w", op, s.d.info.Name, s.d.info.Float64Reason, backend.ErrUnsupported)
	case !dt.Valid():
		return 0, 0, 0, s.d.errorf("%s: unknown dtype %v: %w", op, dt, backend.ErrInvalidArgument)
	case dt != backend.F32 && !s.d.info.Kernels.Has(dt):
		return 0, 0, 0, s.d.errorf("%s: no %v kernels on %s (not in Info().Kernels): %w", op, dt, s.d.info.Name, backend.ErrUnsupported)
	}
	switch dt {
	case backend.F32:
		return 4, kindReduceF32, kindScaleF32, nil
	case backend.F64:
		return 8, kindReduceF64, kindScaleF64, nil
	}
	kind := dtypeKinds[dt]
	return dt.Size(), kind, kind, nil
}

// dtypeKinds is the reduce kind of every type but f32 and f64.
var dtypeKinds = [backend.NumDTypes]int{
	backend.I32: kindReduceI32, backend.U32: kindReduceU32,
	backend.I64: kindReduceI64, backend.U64: kindReduceU64,
	backend.I8: kindReduceI8, backend.U8: kindReduceU8,
	backend.I16: kindReduceI16, backend.U16: kindReduceU16,
	backend.F8E4M3: kindReduceE4M3, backend.F8E5M2: kindReduceE5M2,
	backend.Half: kindReduceF16, backend.BFloat16: kindReduceBF16,
}

// checkScale refuses a scale other than 1 and a mean's 1/N (NaN included)
// of an integer type (backend.IntScale), with an error wrapping
// backend.ErrInvalidArgument.
func (s *Stream) checkScale(op string, dt backend.DType, scale float64) error {
	if dt.IsInt() && !backend.IntScale(scale) {
		return s.d.errorf("%s: scale %v of %v elements (integers take only 1 and a mean's 1/N): %w", op, scale, dt, backend.ErrInvalidArgument)
	}
	return nil
}

// Copy records dst = src with vkCmdCopyBuffer.
func (s *Stream) Copy(dst, src backend.Region) error {
	const op = "copy"
	d := s.d
	if d.closed.Load() {
		return d.errClosed(op)
	}
	db, err := s.region(op, "dst", dst, 1)
	if err != nil {
		return err
	}
	sb, err := s.region(op, "src", src, 1)
	if err != nil {
		return err
	}
	if dst.Len != src.Len {
		return d.errorf("copy: dst has %d bytes, src %d: %w", dst.Len, src.Len, backend.ErrInvalidArgument)
	}
	if dst.Buf == src.Buf && dst.Len > 0 && dst.Off < src.Off+src.Len && src.Off < dst.Off+dst.Len {
		return d.errorf("copy: dst and src overlap: %w", backend.ErrInvalidArgument)
	}
	if dst.Len == 0 {
		return nil
	}
	if err := d.dev.CmdCopy(db.b, int64(dst.Off), sb.b, int64(src.Off), int64(dst.Len)); err != nil {
		return d.errorf("copy: %w", err)
	}
	s.recorded = true
	d.counters.Copies.Add(1)
	d.counters.BytesCopied.Add(int64(dst.Len))
	d.counters.CountHost(dst, src)
	return d.check(op)
}

// Reduce records dst = op(srcs...) * scale with the reduce kernel: one pass
// for up to 8 sources, more passes for more, each later pass reading the
// partial result first, so the order of srcs is kept. The integer types run
// the integer kernels (wrapping sum and prod) and take only scale 1 and a
// mean's 1/N (the wrapped result divided by N once, in the last pass,
// truncated toward zero); any other is an error wrapping
// backend.ErrInvalidArgument, nothing recorded.
func (s *Stream) Reduce(op backend.Op, dt backend.DType, dst backend.Region, srcs []backend.Region, scale float64) error {
	const name = "reduce"
	d := s.d
	if d.closed.Load() {
		return d.errClosed(name)
	}
	es, kind, _, err := s.dtype(name, dt)
	if err != nil {
		return err
	}
	if err := backend.CheckOp(op, dt); err != nil {
		return d.errorf("reduce: %w", err)
	}
	if err := s.checkScale(name, dt, scale); err != nil {
		return err
	}
	if len(srcs) == 0 {
		return d.errorf("reduce: no sources: %w", backend.ErrInvalidArgument)
	}
	if _, err := s.region(name, "dst", dst, es); err != nil {
		return err
	}
	alias := false // dst is a source that a later pass reads
	for i := range srcs {
		if _, err := s.region(name, "src", srcs[i], es); err != nil {
			return err
		}
		if srcs[i].Len != dst.Len {
			return d.errorf("reduce: src %d has %d bytes, dst %d: %w", i, srcs[i].Len, dst.Len, backend.ErrInvalidArgument)
		}
		if partialOverlap(dst, srcs[i]) {
			return d.errorf("reduce: dst partly overlaps src %d: %w", i, backend.ErrInvalidArgument)
		}
		alias = alias || (i >= kernels.MaxSources && sameRegion(dst, srcs[i]))
	}
	if dst.Len == 0 {
		return nil
	}
	d.counters.CountHost(dst, srcs...)
	switch {
	case len(srcs) <= kernels.MaxSources:
		if err := s.pass(kind, op, es, dst, srcs, scale); err != nil {
			return err
		}
	case isNarrowKind(kind):
		// The partial results stay float32, in scratch, so the result is
		// rounded once, as the host's.
		partial, err := s.scratch(dst.Len / es * 4)
		if err != nil {
			return err
		}
		last, err := s.partials16(kind, op, es, partial, srcs)
		if err != nil {
			return err
		}
		if err := s.pass(kind+in32, op, es, dst, last, scale); err != nil {
			return err
		}
	default:
		// Partial results go to dst, or to scratch when dst is also a
		// source that a later pass still has to read.
		partial := dst
		if alias {
			if partial, err = s.scratch(dst.Len); err != nil {
				return err
			}
		}
		if err := s.pass(kind, op, es, partial, srcs[:kernels.MaxSources], 1); err != nil {
			return err
		}
		for i := kernels.MaxSources; i < len(srcs); {
			take := min(kernels.MaxSources-1, len(srcs)-i)
			out, sc := partial, 1.0
			if i+take == len(srcs) {
				out, sc = dst, scale
			}
			s.passSrcs[0] = partial
			copy(s.passSrcs[1:], srcs[i:i+take])
			if err := s.pass(kind, op, es, out, s.passSrcs[:take+1], sc); err != nil {
				return err
			}
			i += take
		}
	}
	return d.check(name)
}

// partials16 reduces all but the last at most 7 of more than 8 sources of a
// 16-bit type (kind) into partial, float32 results in a region of scratch,
// in passes of 8 and then 7 more (the partial result first), and returns
// the sources of the last pass: partial, then the rest. That pass (the
// reduce or reducem kernel of kind+in32) scales and rounds.
func (s *Stream) partials16(kind int, op backend.Op, es int, partial backend.Region, srcs []backend.Region) ([]backend.Region, error) {
	if err := s.pass(kind+out32, op, es, partial, srcs[:kernels.MaxSources], 1); err != nil {
		return nil, err
	}
	i := kernels.MaxSources
	for ; len(srcs)-i > kernels.MaxSources-1; i += kernels.MaxSources - 1 {
		s.passSrcs[0] = partial
		copy(s.passSrcs[1:], srcs[i:i+kernels.MaxSources-1])
		if err := s.pass(kind+in32+out32, op, es, partial, s.passSrcs[:], 1); err != nil {
			return nil, err
		}
	}
	s.passSrcs[0] = partial
	k := copy(s.passSrcs[1:], srcs[i:])
	return s.passSrcs[:1+k], nil
}

// Scale records dst = src * scale (a copy when scale is 1) with the scale
// kernel, or for the 16-bit types with their reduce kernel (K = 0 copying
// the bits when scale is 1). Its bytes count as BytesReduced: they are
// written by a kernel.
// Integers take only scale 1 and a mean's 1/N (else an error wrapping
// backend.ErrInvalidArgument, nothing recorded) and are copied, or divided
// by N truncated toward zero, by their reduce kernel with one source,
// counted as a float copy by 1 is: a
// dispatch per piece, its bytes in BytesReduced. dst may be src, as for
// floats, which vkCmdCopyBuffer (Copy) would refuse.
func (s *Stream) Scale(dt backend.DType, dst, src backend.Region, scale float64) error {
	const name = "scale"
	d := s.d
	if d.closed.Load() {
		return d.errClosed(name)
	}
	es, _, kind, err := s.dtype(name, dt)
	if err != nil {
		return err
	}
	if err := s.checkScale(name, dt, scale); err != nil {
		return err
	}
	if _, err := s.region(name, "dst", dst, es); err != nil {
		return err
	}
	if _, err := s.region(name, "src", src, es); err != nil {
		return err
	}
	if dst.Len != src.Len {
		return d.errorf("scale: dst has %d bytes, src %d: %w", dst.Len, src.Len, backend.ErrInvalidArgument)
	}
	if partialOverlap(dst, src) {
		return d.errorf("scale: dst partly overlaps src: %w", backend.ErrInvalidArgument)
	}
	if dst.Len == 0 {
		return nil
	}
	op := backend.Sum
	if isNarrowKind(kind) && scale == 1 {
		op = opCopy // a copy of the bits, as the host's (a reduce of one source would quiet a NaN)
	}
	s.passSrcs[0] = src
	if err := s.pass(kind, op, es, dst, s.passSrcs[:1], scale); err != nil {
		return err
	}
	return d.check(name)
}

// scratch returns a device-local region of n bytes for partial results,
// growing the device's scratch buffer when needed (the old one is freed once
// the work using it is done).
func (s *Stream) scratch(n int) (backend.Region, error) {
	d := s.d
	if d.scratch == nil || d.scratch.n < n {
		b, err := d.newBuffer(n, backend.DeviceLocal)
		if err != nil {
			return backend.Region{}, err
		}
		if d.scratch != nil {
			d.scratch.Close()
		}
		d.scratch = b
	}
	return backend.Region{Buf: d.scratch, Off: 0, Len: n}, nil
}

// opCopy is pass's op for the 16-bit kinds' copy of the bits (K = 0), the
// Scale by 1 of a 16-bit type.
const opCopy backend.Op = -1

// pass records one kernel over every element of out, split into as many
// dispatches as the binding limit needs; each dispatch covers the same
// piece of out and of every source. es is the size of an element of the
// type; a kind whose dst or src0 holds float32 partial results (sizes)
// binds 4 bytes an element there. Every dispatch counts in Dispatches and
// the type's bytes of the elements it writes in BytesReduced (so a
// reduction of k > 8 sources counts its dst once per pass, partial results
// included).
func (s *Stream) pass(kind int, op backend.Op, es int, out backend.Region, srcs []backend.Region, scale float64) error {
	d := s.d
	spec := &kinds[kind]
	isReduce := !spec.isScale
	vec := spec.vec >= 0 && d.vec.use(d, es, out, srcs)
	if body := d.vec.body(d, es, out, srcs); spec.vec >= 0 && !vec && body > 0 {
		// Aligned regions with a tail: the 16-byte kernel on the body,
		// the scalar one on the last few elements.
		for _, part := range [2][2]int{{0, body}, {body, out.Len - body}} {
			for i, r := range srcs {
				s.tailSrcs[i] = backend.Region{Buf: r.Buf, Off: r.Off + part[0], Len: part[1]}
			}
			o := backend.Region{Buf: out.Buf, Off: out.Off + part[0], Len: part[1]}
			if err := s.pass(kind, op, es, o, s.tailSrcs[:len(srcs)], scale); err != nil {
				return err
			}
		}
		return nil
	}
	scaleBytes := spec.scale
	if vec {
		kind, es = spec.vec, kernels.VecBytes
	}
	nsrc := len(srcs)
	if op == opCopy {
		op, nsrc = backend.Sum, 0
	}
	k, err := d.pipeline(kind, op, nsrc, scale != 1)
	if err != nil {
		return err
	}
	info := &d.kinfo[kind]
	push := s.push[:info.PushConstantBytes]
	clear(push)
	scaleAt, divAt := pushScaleScale, pushScaleDiv
	if isReduce {
		scaleAt, divAt = pushReduceScale, pushReduceDiv
	}
	if spec.dt.IsInt() { // a mean's 1/N: div is N, the scale unused
		ne.PutUint32(push[divAt:], uint32(backend.Divisor(scale)))
	}
	if scaleBytes != 0 { // partial results are never scaled: scale and div stay 0
		ne.PutUint32(push[divAt:], uint32(backend.Divisor(scale)))
		if scaleBytes == 4 {
			ne.PutUint32(push[scaleAt:], math.Float32bits(float32(scale)))
		} else {
			ne.PutUint64(push[scaleAt:], math.Float64bits(scale))
		}
	}

	dstES, src0ES := sizes(kind, es)
	n := out.Len / dstES
	for p := 0; p < n; {
		cnt := s.piece(out, srcs, p, n-p, dstES, src0ES, es)
		ne.PutUint32(push[pushN:], uint32(cnt))
		ne.PutUint32(push[pushDstOff:], s.bindRegion(0, out, p, cnt, dstES))
		for i := range srcs {
			ne.PutUint32(push[pushSrcOff+4*i:], s.bindRegion(1+i, srcs[i], p, cnt, srcES(i, src0ES, es)))
		}
		// The kernel declares every binding: fill unused ones with a valid
		// range the kernel does not read.
		for i := 1 + len(srcs); i < info.Bindings; i++ {
			s.bind[i] = s.bind[1]
		}
		groups := min((uint64(cnt)+uint64(d.wg)-1)/uint64(d.wg), uint64(d.maxGroups))
		if err := d.dev.CmdDispatch(k, [3]uint32{uint32(groups), 1, 1}, s.bind[:info.Bindings], push); err != nil {
			return d.errorf("%s: %w", info.Name, err)
		}
		s.recorded = true
		d.counters.Dispatches.Add(1)
		d.counters.BytesReduced.Add(int64(cnt * es))
		if vec {
			d.vec.dispatches++
		}
		p += cnt
	}
	return nil
}

// srcES is the size of an element of source i: src0ES for the first, es
// for the others.
func srcES(i, src0ES, es int) int {
	if i == 0 {
		return src0ES
	}
	return es
}

// piece returns how many elements, of the left from element p on, one
// dispatch covers: as many as keep every binding within maxBind, given
// that a binding starts at its data's offset aligned down to
// minStorageBufferOffsetAlignment. Aligned regions get maxBind/es elements;
// a misaligned one loses at most align-es bytes. An element of out is
// dstES bytes, of srcs[0] src0ES, of the other sources es.
func (s *Stream) piece(out backend.Region, srcs []backend.Region, p, left, dstES, src0ES, es int) int {
	d := s.d
	fit := func(r backend.Region, es int) int64 {
		start := int64(r.Off) + int64(p)*int64(es)
		return (d.maxBind - start%d.align) / int64(es)
	}
	cnt := min(int64(left), fit(out, dstES), math.MaxInt32)
	for i := range srcs {
		cnt = min(cnt, fit(srcs[i], srcES(i, src0ES, es)))
	}
	return int(cnt)
}

// bindRegion binds elements [p, p+cnt) of r to binding i, from the offset
// aligned down to minStorageBufferOffsetAlignment, and returns the element
// offset of the data within the binding.
func (s *Stream) bindRegion(i int, r backend.Region, p, cnt, es int) uint32 {
	start := int64(r.Off) + int64(p)*int64(es)
	base := start - start%s.d.align
	s.bind[i] = cshim.Binding{Buffer: r.Buf.(*Buffer).b, Offset: base, Range: start - base + int64(cnt)*int64(es)}
	return uint32((start - base) / int64(es))
}

// pipeline returns the cached pipeline of a kernel variant, creating it on
// first use with the specialization constants (Vulkan:
// vkCreateComputePipelines; Metal: newFunctionWithName:constantValues:error:
// and newComputePipelineStateWithFunction:error:). k is 0 only for the copy
// of a 16-bit kind (opCopy).
func (d *Device) pipeline(kind int, op backend.Op, k int, scale bool) (*cshim.Kernel, error) {
	sc := 0
	if scale {
		sc = 1
	}
	if isScaleKind(kind) {
		op, k = 0, 1
	}
	if p := d.pipes[kind][op][k][sc]; p != nil {
		return p, nil
	}
	info := &d.kinfo[kind]
	p, err := d.specialized(info, d.reduceSpec(op, k, sc))
	if err != nil {
		return nil, d.errorf("pipeline %s (op %v, %d sources, scale %v): %w", info.Name, op, k, scale, err)
	}
	d.pipes[kind][op][k][sc] = p
	return p, nil
}

// reduceSpec returns the values of the reduce kernels' specialization
// constants for op, k sources and scale flag sc.
func (d *Device) reduceSpec(op backend.Op, k, sc int) map[int]uint32 {
	return map[int]uint32{
		kernels.SpecWorkGroupSize: d.wg,
		kernels.SpecOp:            uint32(op),
		kernels.SpecK:             uint32(k),
		kernels.SpecScale:         uint32(sc),
	}
}

// specialized creates a pipeline of a kernel whose specialization constants
// take values[ID] (0 for an ID values lacks).
func (d *Device) specialized(info *kernels.Info, values map[int]uint32) (*cshim.Kernel, error) {
	spec := make([]cshim.SpecConstant, 0, len(info.Spec))
	for _, c := range info.Spec {
		spec = append(spec, cshim.SpecConstant{ID: uint32(c.ID), Value: values[c.ID]})
	}
	return d.newKernel(info, spec)
}

// newKernel creates a pipeline of a kernel with the API's code of it, which
// it gets once per device. Only the stream's goroutine calls it.
func (d *Device) newKernel(info *kernels.Info, spec []cshim.SpecConstant) (*cshim.Kernel, error) {
	c, ok := d.code[info.Name]
	if !ok {
		code, entry, err := d.in.api.Code(*info, d.raw)
		if err != nil {
			return nil, err
		}
		if d.code == nil {
			d.code = map[string]kernelCode{}
		}
		c = kernelCode{code, entry}
		d.code[info.Name] = c
	}
	p, err := d.dev.NewKernel(cshim.KernelDesc{SPIRV: c.code, Entry: c.entry, Spec: spec,
		PushBytes: info.PushConstantBytes, Bindings: info.Bindings})
	d.syncObjects()
	return p, err
}

// signalled is the fence of an empty submission.
type signalled struct{}

func (signalled) Wait(context.Context) error { return nil }

var doneFence backend.Fence = signalled{}

// Submit submits what was recorded (vkQueueSubmit; Metal: commit) without
// waiting.
func (s *Stream) Submit() (backend.Fence, error) {
	d := s.d
	if d.closed.Load() {
		return nil, d.errClosed("submit")
	}
	if !s.recorded {
		return doneFence, nil
	}
	s.recorded = false
	t, err := d.dev.Submit()
	if err != nil {
		return nil, d.errorf("submit: %w", err)
	}
	d.counters.Submits.Add(1)
	f := &d.fences[t%fenceRing]
	f.ticket.Store(t)
	return f, d.check("submit")
}

// Fence waiting: polls first (a short job is often done by then), then
// blocking waits in slices so ctx is honoured. On a GPU the polls last up to
// API.SpinGPU (a blocking vkWaitForFences wakes tens of microseconds late on
// a discrete GPU, more in a virtual machine, and small collectives are a few
// such waits; Metal's timed wait sleeps between polls of the command
// buffer's status); on CPU drivers, whose threads need the cores, only a few
// polls. GOCOLL_SPIN_US overrides the GPU spin.
const (
	pollSpins = 4
	minSlice  = time.Millisecond
	maxSlice  = 5 * time.Millisecond
)

// Fence is one of a device's fenceRing fences, standing for a ticket.
type Fence struct {
	d      *Device
	ticket atomic.Uint64
}

// Wait waits for the submission (vkGetFenceStatus, then vkWaitForFences in
// slices of 1-5 ms, checking ctx between them). It returns ctx.Err() when
// ctx ends first and an error wrapping backend.ErrDeviceLost when the device
// is lost. A submission complete already wins over an ended ctx: the status
// is asked once more before ctx's error is returned.
func (f *Fence) Wait(ctx context.Context) error {
	d := f.d
	t := f.ticket.Load()
	if t <= d.done.Load() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return f.ended(t, err)
	}
	for i := 0; i < pollSpins; i++ {
		if ok, err := d.dev.Wait(t, 0); ok || err != nil {
			return f.finish(t, err)
		}
	}
	if spin := d.in.spin; d.info.Type != "cpu" && spin > 0 {
		for start := time.Now(); time.Since(start) < spin; {
			if ok, err := d.dev.Wait(t, 0); ok || err != nil {
				return f.finish(t, err)
			}
			runtime.Gosched()
		}
	}
	done := ctx.Done()
	for slice := minSlice; ; slice = min(2*slice, maxSlice) {
		if ok, err := d.dev.Wait(t, slice); ok || err != nil {
			return f.finish(t, err)
		}
		if done != nil {
			select {
			case <-done:
				return f.ended(t, ctx.Err())
			default:
			}
		}
	}
}

// ended is Wait's answer once ctx ended (err): the submission's status if
// it completed or failed meanwhile, else err.
func (f *Fence) ended(t uint64, err error) error {
	if ok, werr := f.d.dev.Wait(t, 0); ok || werr != nil {
		return f.finish(t, werr)
	}
	return err
}

func (f *Fence) finish(t uint64, err error) error {
	d := f.d
	if err != nil {
		if errors.Is(err, backend.ErrClosed) && d.closed.Load() {
			<-d.closeDone // Close drained, or declared the device lost
			if t <= d.done.Load() {
				return nil
			}
			if d.lost != nil {
				return d.errorf("fence wait: %w", d.lost)
			}
		}
		return d.errorf("fence wait: %w", err)
	}
	for {
		old := d.done.Load()
		if t <= old || d.done.CompareAndSwap(old, t) {
			break
		}
	}
	return d.check("fence wait")
}
