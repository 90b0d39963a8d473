package host

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
)

// maxKernelSources is how many sources one dispatch of reduce.comp reads.
// Reductions of more sources run in passes, the partial result being the
// first source of the next pass; the counters count them so.
const maxKernelSources = 8

// fenceRing is how many fences a device hands out in turn, so that Submit
// allocates nothing. A fence stands for its submission until fenceRing later
// submissions; then it stands for a later one, so a stale holder's Wait may
// wait longer but never returns before its own work is done (tickets only
// grow, and they complete in order).
const fenceRing = 256

// cmdKind is what a recorded command does.
type cmdKind uint8

const (
	cmdCopy cmdKind = iota
	cmdReduce
	cmdScale
	cmdReduceMulti // multi.go: a reduce into several destinations
	cmdPack        // f32 -> 16-bit wire format
	cmdUnpack      // 16-bit wire format -> f32
	cmdTopK
)

// command is one recorded command. Regions are resolved to byte slices when
// the command is recorded, so execution needs no checks.
type command struct {
	kind  cmdKind
	op    backend.Op
	dt    backend.DType
	sc    hostmath.Scale
	dst   []byte
	src   []byte // copy and scale
	srcLo int    // reduce: the sources are batch.srcs[srcLo:srcHi]
	srcHi int
	ndst  int                // reduce multi: the last ndst of the sources are further destinations
	wire  backend.WireFormat // pack, unpack
	idx   []byte             // topk: the indices out
	k     int                // topk
}

// batch is the work of one submission. Batches are recycled through the
// device's free list, so recording allocates nothing in steady state.
type batch struct {
	ticket uint64
	cmds   []command
	srcs   [][]byte
}

func newBatch() *batch {
	return &batch{cmds: make([]command, 0, 16), srcs: make([][]byte, 0, 64)}
}

// reset drops the batch's references to buffer memory and empties it.
func (b *batch) reset() {
	clear(b.cmds)
	b.cmds = b.cmds[:0]
	clear(b.srcs)
	b.srcs = b.srcs[:0]
	b.ticket = 0
}

// stream records commands into the current batch until Submit hands it to the
// device's worker.
type stream struct {
	d   *Device
	cur *batch
}

// Copy records dst = src, a byte copy. The regions must have equal lengths
// and must not overlap. It counts one copy, as vkCmdCopyBuffer would; an empty
// copy records nothing.
func (s *stream) Copy(dst, src backend.Region) error {
	d := s.d
	if d.closed.Load() {
		return errClosed
	}
	db, err := s.resolve(dst)
	if err != nil {
		return fmt.Errorf("host: copy: dst: %w", err)
	}
	sb, err := s.resolve(src)
	if err != nil {
		return fmt.Errorf("host: copy: src: %w", err)
	}
	if dst.Len != src.Len {
		return fmt.Errorf("host: copy: dst has %d bytes, src %d: %w", dst.Len, src.Len, backend.ErrInvalidArgument)
	}
	if overlap(dst, src) {
		return fmt.Errorf("host: copy: dst [%d, %d) and src [%d, %d) overlap: %w", dst.Off, dst.Off+dst.Len, src.Off, src.Off+src.Len, backend.ErrInvalidArgument)
	}
	if dst.Len == 0 {
		return nil
	}
	s.cur.cmds = append(s.cur.cmds, command{kind: cmdCopy, dst: db, src: sb})
	d.counters.Copies.Add(1)
	d.counters.BytesCopied.Add(int64(dst.Len))
	d.counters.CountHost(dst, src)
	return nil
}

// Reduce records dst[i] = op(srcs[0][i], srcs[1][i], ...) * scale exactly as
// kernels/reduce.comp computes it (divided by N, correctly rounded, when
// scale is 1/N: backend.Divisor). dst may be the same region as any source
// (the host reduces each element over all sources before storing it), never
// a partial overlap. It counts the dispatches a GPU backend records: one per
// pass of at most eight sources per piece of at most MaxBindingBytes per
// binding.
//
// It takes every element type (backend.AllDTypes). Integers (I32, U32, I64,
// U64, I8, U8, I16, U16) reduce in their own type: Sum and Prod wrap (two's
// complement, as Go's integer arithmetic does), Max and Min are the integer
// maximum and minimum, BAnd, BOr and BXor act on the bits (two's
// complement) and LAnd, LOr and LXor give 0 or 1 (backend.Op); a scale of
// 1/N (a mean) divides the wrapped result by N once, truncated toward zero
// (hostmath.ApplyInt), any scale other than 1 and 1/N is an error wrapping
// backend.ErrInvalidArgument, as is an integer-only operator on a
// floating-point type. Half, BFloat16, F8E4M3 and F8E5M2 elements are
// converted to float32 exactly, reduced left to right in float32 as the f32
// kernel reduces (IEEE 754-2019 maximum and minimum), scaled as f32 is, and
// rounded once to the type, to nearest even (F32ToF16, F32ToBF16: overflow
// gives +-Inf, NaN stays NaN; the fp8 types as hostmath.F32ToE4M3 and
// F32ToE5M2 say: a finite overflow saturates): what the GPU kernels
// reproduce.
func (s *stream) Reduce(op backend.Op, dt backend.DType, dst backend.Region, srcs []backend.Region, scale float64) error {
	d := s.d
	if d.closed.Load() {
		return errClosed
	}
	if err := s.checkType(dt); err != nil {
		return fmt.Errorf("host: reduce: %w", err)
	}
	if err := backend.CheckOp(op, dt); err != nil {
		return fmt.Errorf("host: reduce: %w", err)
	}
	if err := checkScale(dt, scale); err != nil {
		return fmt.Errorf("host: reduce: %w", err)
	}
	if len(srcs) == 0 {
		return fmt.Errorf("host: reduce: no sources: %w", backend.ErrInvalidArgument)
	}
	db, err := s.resolveElems(dst, dt)
	if err != nil {
		return fmt.Errorf("host: reduce: dst: %w", err)
	}
	// The sources go straight into the batch's reusable storage, and are
	// dropped again if one of them is invalid.
	b := s.cur
	lo := len(b.srcs)
	for i, r := range srcs {
		if err := s.checkSource(dst, r, dt); err != nil {
			clear(b.srcs[lo:])
			b.srcs = b.srcs[:lo]
			return fmt.Errorf("host: reduce: srcs[%d]: %w", i, err)
		}
		b.srcs = append(b.srcs, r.Buf.(*buffer).data[r.Off:r.Off+r.Len:r.Off+r.Len])
	}
	if dst.Len == 0 {
		clear(b.srcs[lo:])
		b.srcs = b.srcs[:lo]
		return nil
	}
	b.cmds = append(b.cmds, command{
		kind: cmdReduce, op: op, dt: dt, sc: hostmath.NewScale(scale),
		dst: db, srcLo: lo, srcHi: len(b.srcs),
	})
	passes := reducePasses(len(srcs))
	d.counters.Dispatches.Add(passes * s.pieces(dst.Len, dt))
	d.counters.BytesReduced.Add(passes * int64(dst.Len))
	d.counters.CountHost(dst, srcs...)
	return nil
}

// Scale records dst[i] = src[i] * scale (a copy when scale is 1; divided by
// N when scale is 1/N) exactly as kernels/scale.comp computes it. dst and src may be the same region. It
// counts one dispatch per piece, and the bytes written as BytesReduced (they
// are written by a kernel). Integers are copied, or divided by N truncated
// toward zero when scale is 1/N (any other scale is an error wrapping
// backend.ErrInvalidArgument); Half, BFloat16 and fp8
// elements are converted to float32, scaled as f32 is and rounded once to
// their type, as Reduce does.
func (s *stream) Scale(dt backend.DType, dst, src backend.Region, scale float64) error {
	d := s.d
	if d.closed.Load() {
		return errClosed
	}
	if err := s.checkType(dt); err != nil {
		return fmt.Errorf("host: scale: %w", err)
	}
	if err := checkScale(dt, scale); err != nil {
		return fmt.Errorf("host: scale: %w", err)
	}
	db, err := s.resolveElems(dst, dt)
	if err != nil {
		return fmt.Errorf("host: scale: dst: %w", err)
	}
	sb, err := s.resolveElems(src, dt)
	if err != nil {
		return fmt.Errorf("host: scale: src: %w", err)
	}
	if dst.Len != src.Len {
		return fmt.Errorf("host: scale: dst has %d bytes, src %d: %w", dst.Len, src.Len, backend.ErrInvalidArgument)
	}
	if overlap(dst, src) && dst != src {
		return fmt.Errorf("host: scale: dst [%d, %d) partially overlaps src [%d, %d): %w", dst.Off, dst.Off+dst.Len, src.Off, src.Off+src.Len, backend.ErrInvalidArgument)
	}
	if dst.Len == 0 {
		return nil
	}
	s.cur.cmds = append(s.cur.cmds, command{kind: cmdScale, dt: dt, sc: hostmath.NewScale(scale), dst: db, src: sb})
	d.counters.Dispatches.Add(s.pieces(dst.Len, dt))
	d.counters.BytesReduced.Add(int64(dst.Len))
	return nil
}

// checkSource checks one source region of a reduction into dst.
func (s *stream) checkSource(dst, r backend.Region, dt backend.DType) error {
	if _, err := s.resolveElems(r, dt); err != nil {
		return err
	}
	if r.Len != dst.Len {
		return fmt.Errorf("%d bytes, dst %d: %w", r.Len, dst.Len, backend.ErrInvalidArgument)
	}
	if overlap(dst, r) && r != dst {
		return fmt.Errorf("[%d, %d) partially overlaps dst [%d, %d): %w", r.Off, r.Off+r.Len, dst.Off, dst.Off+dst.Len, backend.ErrInvalidArgument)
	}
	return nil
}

// pieces returns how many dispatches a kernel over bytes bytes per binding
// takes when no binding may cover more than MaxBindingBytes: pieces of
// MaxBindingBytes rounded down to whole elements.
func (s *stream) pieces(bytes int, dt backend.DType) int64 {
	perPiece := s.d.info.MaxBindingBytes / int64(dt.Size()) // elements
	n := int64(bytes / dt.Size())
	if n == 0 {
		return 0
	}
	return (n-1)/perPiece + 1
}

// checkType checks that the device reduces dt (Info().Kernels: every
// element type, f64 unless OpenOptions.DisableFloat64 took it away).
func (s *stream) checkType(dt backend.DType) error {
	if !dt.Valid() {
		return fmt.Errorf("unknown dtype %d: %w", int(dt), backend.ErrInvalidArgument)
	}
	if dt == backend.F64 && !s.d.info.Float64 {
		return fmt.Errorf("f64 kernels: %s: %w", s.d.info.Float64Reason, backend.ErrUnsupported)
	}
	return nil
}

// checkScale checks the scale of a reduction or Scale of dt: integers take
// 1 and a mean's 1/N only (backend.IntScale).
func checkScale(dt backend.DType, scale float64) error {
	if dt.IsInt() && !backend.IntScale(scale) {
		return fmt.Errorf("scale %v of %v elements (integers take only 1 and a mean's 1/N): %w", scale, dt, backend.ErrInvalidArgument)
	}
	return nil
}

// resolve checks that r is a region of a live host buffer and returns its
// bytes. Host devices share memory: a buffer of another host device is
// usable (SharesMemory).
func (s *stream) resolve(r backend.Region) ([]byte, error) {
	if r.Buf == nil {
		return nil, fmt.Errorf("region has no buffer: %w", backend.ErrInvalidArgument)
	}
	b, ok := r.Buf.(*buffer)
	if !ok {
		return nil, fmt.Errorf("buffer %T is not a host buffer: %w", r.Buf, backend.ErrInvalidArgument)
	}

	if b.closed.Load() {
		return nil, errBufferClosed
	}
	if err := backend.CheckRegion(r); err != nil {
		return nil, err
	}
	return b.data[r.Off : r.Off+r.Len : r.Off+r.Len], nil
}

// resolveElems is resolve for a kernel binding: the region must start and end
// on whole elements of dt.
func (s *stream) resolveElems(r backend.Region, dt backend.DType) ([]byte, error) {
	p, err := s.resolve(r)
	if err != nil {
		return nil, err
	}
	if size := dt.Size(); r.Off%size != 0 || r.Len%size != 0 {
		return nil, fmt.Errorf("region [%d, %d) is not whole %s elements: %w", r.Off, r.Off+r.Len, dt, backend.ErrInvalidArgument)
	}
	return p, nil
}

// overlap reports whether two non-empty regions share a byte.
func overlap(a, b backend.Region) bool {
	return a.Buf == b.Buf && a.Len > 0 && b.Len > 0 && a.Off < b.Off+b.Len && b.Off < a.Off+a.Len
}

// Submit hands the recorded batch to the device's worker and returns its
// fence without waiting. Submitting nothing returns a signalled fence.
func (s *stream) Submit() (backend.Fence, error) {
	d := s.d
	if len(s.cur.cmds) == 0 {
		if d.closed.Load() {
			return nil, errClosed
		}
		return signalled, nil
	}
	d.mu.Lock()
	if d.stopping {
		d.mu.Unlock()
		return nil, errClosed
	}
	d.submitted++
	ticket := d.submitted
	s.cur.ticket = ticket
	d.queue = append(d.queue, s.cur)
	if n := len(d.free); n > 0 {
		s.cur = d.free[n-1]
		d.free[n-1] = nil
		d.free = d.free[:n-1]
	} else {
		s.cur = nil
	}
	d.work.Signal()
	d.mu.Unlock()
	if s.cur == nil {
		s.cur = newBatch()
	}
	d.counters.Submits.Add(1)

	f := &d.fences[ticket%fenceRing]
	f.ticket.Store(ticket)
	return f, nil
}

// fence is one of a device's fenceRing fences, standing for the submission
// whose ticket (place in the device's FIFO order) it holds. The ticket is
// atomic because a stale holder may read it while Submit reuses the fence.
type fence struct {
	d      *Device
	ticket atomic.Uint64
}

// signalled is the fence of an empty submission.
var signalled = &fence{}

// Wait returns nil once the submission has run, at once if it already has
// (even when ctx is done), and otherwise ctx.Err() when ctx ends first.
func (f *fence) Wait(ctx context.Context) error {
	d := f.d
	if d == nil {
		return nil
	}
	ticket := f.ticket.Load()
	if d.completed.Load() >= ticket {
		return nil
	}
	d.mu.Lock()
	if d.completed.Load() >= ticket || d.help(ticket) {
		d.mu.Unlock()
		return nil
	}
	var ch chan struct{}
	if n := len(d.chans); n > 0 {
		ch = d.chans[n-1]
		d.chans[n-1] = nil
		d.chans = d.chans[:n-1]
	} else {
		ch = make(chan struct{}, 1)
	}
	d.waiters = append(d.waiters, waiter{ticket: ticket, ch: ch})
	d.mu.Unlock()

	select {
	case <-ch:
		d.mu.Lock()
		d.chans = append(d.chans, ch)
		d.mu.Unlock()
		return nil
	case <-ctx.Done():
	}
	d.mu.Lock()
	if !d.removeWaiter(ch) {
		<-ch // the worker signalled it before we took the lock
	}
	d.chans = append(d.chans, ch)
	d.mu.Unlock()
	if d.completed.Load() >= ticket {
		return nil
	}
	return ctx.Err()
}

// removeWaiter removes the waiter on ch and reports whether it was there.
// d.mu must be held.
func (d *Device) removeWaiter(ch chan struct{}) bool {
	for i, w := range d.waiters {
		if w.ch == ch {
			last := len(d.waiters) - 1
			d.waiters[i] = d.waiters[last]
			d.waiters[last] = waiter{}
			d.waiters = d.waiters[:last]
			return true
		}
	}
	return false
}
