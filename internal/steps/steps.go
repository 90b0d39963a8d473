// Package steps implements, for one rank, the exchange steps the schedules
// of internal/algo are written over (algo.Steps): each step's device work on
// the call's buffer (reductions, copies, the wire format's packing and
// unpacking, the fused passes that reduce or copy and send at once) between
// the messages it takes from and posts on the rank's links. The links
// themselves, the waits and the submissions belong to the rank (Rank).
package steps

import (
	"context"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/algo"
)

// Rank is what the steps use of the rank that runs them: its links (see
// internal/channel) and the submission of its recorded device work. A
// method that fails has broken the group already, except Fail, which
// breaks it.
type Rank interface {
	// Take waits for the next message of this call from rank from (n
	// bytes expected) and returns where its bytes are for the rank's
	// device: read in place, or copied into inbox slot idx.
	Take(ctx context.Context, from, idx, n int) (backend.Region, error)
	// Reserve waits for a free slot on the link to rank to and returns it
	// and the region of its first n bytes.
	Reserve(ctx context.Context, to, n int) (int, backend.Region, error)
	// Post sends the reserved slot's first n bytes to rank to.
	Post(to, slot, n int)
	// Flush submits what the device's stream recorded and waits for it.
	Flush(ctx context.Context) error
	// Fail breaks the group with err (a recording failed) and returns it.
	Fail(err error) error
}

// Call is the call's buffer as the steps see it: elements of DT (ES bytes
// each) reduced with Op, element 0 at byte Base of Work; Scale is the final
// scale (a mean's), applied once, by the rank that finishes a chunk's
// reduction.
type Call struct {
	DT    backend.DType
	ES    int
	Op    backend.Op
	Scale float64
	Work  backend.Buffer
	Base  int
	// Kernels: every rank's device reduces DT in kernels (fusing a step
	// needs them); PCIeSlots: the link slots are host memory a discrete
	// device reads and writes over PCIe (fusing a copy pays only there).
	Kernels, PCIeSlots bool
}

// Region returns elements [lo, hi) of the call's buffer.
func (k *Call) Region(lo, hi int) backend.Region {
	return backend.Region{Buf: k.Work, Off: k.Base + lo*k.ES, Len: (hi - lo) * k.ES}
}

// Exchange is one call's state of its exchange, zero at the call's start:
// how its messages are formatted, where its sends read, and where its
// rank-ordered reduction stands.
type Exchange struct {
	// Wire, when set, converts every exchanged slice to a 16-bit format
	// with Comp's kernels (the compressed ring all-reduce): reductions stay
	// in float32, and the owner of each reduced chunk rounds it as the
	// others receive it (Scale).
	Wire backend.WireFormat
	Comp backend.Compressor
	// Src, when set, is where the sends read elements [a, b) from (element
	// a at Src.Off): data outside the buffer, a tensor.
	Src backend.Region
	// ordering: a rank-ordered reduction runs (Ordered), until Scale.
	// scaled: the reduction itself applied the scale; Scale then leaves
	// the chunk as it is.
	ordering, scaled bool
}

// FuseOff turns the fused steps off (tests compare both).
var FuseOff bool

// FuseCopyAlways fuses the copies wherever a reduction would be fused (a
// test hook: the layouts that fuse them need a discrete GPU).
var FuseCopyAlways bool

// Steps is a rank's algo.Steps for one call at a time: set R, Self,
// SlotBytes, Dev and Inbox, then Use each call. Its scratch is reused
// across calls.
type Steps struct {
	R         Rank
	Self      int // the rank's number in the group
	SlotBytes int // a link slot's bytes; the inbox holds one slot per peer
	Dev       backend.Device
	Inbox     backend.Buffer // received slices, unpacked ones, staging
	k         Call
	x         *Exchange

	srcs  []backend.Region
	pend  []pending
	srcs2 [2]backend.Region
	dsts2 [2]backend.Region
	dsts3 [3]backend.Region
	srcs3 [3]backend.Region
}

// pending is a reserved slot waiting for its copy to finish before it is
// posted.
type pending struct{ to, slot, n int }

var _ algo.Steps = (*Steps)(nil)

// Use makes s run call k, whose exchange state is x.
func (s *Steps) Use(k Call, x *Exchange) { s.k, s.x = k, x }

// Me is the rank that runs the steps.
func (s *Steps) Me() int { return s.Self }

// Slice is the most elements one message carries: a slot's worth, or half
// of it in a rank-ordered reduction with a wire format, so that a packed
// message and its unpacked float32 copy share the receiver's inbox slot
// (ReduceOrdered); a multiple of 4 either way, slots being of 8 bytes.
func (s *Steps) Slice() int {
	if s.x.Wire != 0 && s.x.ordering {
		return s.SlotBytes / 2 / s.k.ES
	}
	return s.SlotBytes / s.k.ES
}

// Reduce is a ring or tree step's reduction: the received slices (unpacked
// from the wire format into an inbox slot) and the buffer's own into the
// buffer, and on to the next rank. Where fuse allows it, one pass reduces
// into the buffer and writes the sum into the next rank's slot: the slot's
// read and the send's write cross PCIe in the same dispatch.
func (s *Steps) Reduce(ctx context.Context, from []int, to, a, b int) error {
	k, x := &s.k, s.x
	dst := k.Region(a, b)
	st := s.Dev.Stream()
	s.srcs3[0] = dst
	for q, f := range from {
		in, err := s.R.Take(ctx, f, q, s.wireBytes(b-a))
		if err != nil {
			return err
		}
		if x.Wire != 0 {
			scratch := backend.Region{Buf: s.Inbox, Off: (len(from) + q) * s.SlotBytes, Len: (b - a) * k.ES}
			if err := x.Comp.Unpack(x.Wire, scratch, in); err != nil {
				return s.R.Fail(err)
			}
			in = scratch
		}
		s.srcs3[1+q] = in
	}
	srcs := s.srcs3[:1+len(from)]
	var slot int
	var out backend.Region
	if to >= 0 {
		var err error
		if slot, out, err = s.R.Reserve(ctx, to, s.wireBytes(b-a)); err != nil {
			return err
		}
	}
	var err error
	if mr, ok := s.fuse(st, to < 0); ok && len(from) > 0 {
		s.dsts2[0], s.dsts2[1] = dst, out
		err = mr.ReduceMulti(k.Op, k.DT, s.dsts2[:2], srcs, 1)
	} else {
		if len(from) > 0 {
			err = st.Reduce(k.Op, k.DT, dst, srcs, 1)
		}
		if err == nil && to >= 0 {
			err = s.sendInto(st, out, dst, false)
		}
	}
	if err != nil {
		return s.R.Fail(err)
	}
	if to < 0 && len(from) == 0 {
		return nil
	}
	if err := s.R.Flush(ctx); err != nil {
		return err
	}
	if to >= 0 {
		s.R.Post(to, slot, s.wireBytes(b-a))
	}
	return nil
}

// Copy is a ring or tree step's copy (a send of the buffer's own slice, or
// of the exchange's Src, when from < 0): the received slice into the
// buffer (unpacked from the wire format) and, as received, into the next
// ranks' slots. Where fuseCopy allows it, one pass copies the slot into the
// buffer and into the next ranks' slots.
func (s *Steps) Copy(ctx context.Context, from int, to []int, a, b int) error {
	dst := s.k.Region(a, b)
	st := s.Dev.Stream()
	var in backend.Region
	if from >= 0 {
		var err error
		if in, err = s.R.Take(ctx, from, 0, s.wireBytes(b-a)); err != nil {
			return err
		}
	}
	pend := scratch(&s.pend, len(to))
	for q, r := range to {
		slot, out, err := s.R.Reserve(ctx, r, s.wireBytes(b-a))
		if err != nil {
			return err
		}
		s.dsts3[1+q] = out
		pend[q] = pending{to: r, slot: slot, n: s.wireBytes(b - a)}
	}
	if err := s.copyOn(st, from, to, in, dst, a, b); err != nil {
		return s.R.Fail(err)
	}
	if from < 0 && len(to) == 0 {
		return nil
	}
	return s.flushPost(ctx, pend)
}

// copyOn records Copy's device work: in (received from rank from, if any)
// into dst, and what is sent into the slots of s.dsts3[1:1+len(to)].
func (s *Steps) copyOn(st backend.Stream, from int, to []int, in, dst backend.Region, a, b int) error {
	k, x := &s.k, s.x
	if mr, ok := s.fuseCopy(st, len(to) == 0); ok && from >= 0 {
		s.dsts3[0], s.srcs2[0] = dst, in
		return mr.ReduceMulti(backend.Sum, k.DT, s.dsts3[:1+len(to)], s.srcs2[:1], 1)
	}
	src, packed := dst, false
	if x.Src.Buf != nil {
		src = backend.Region{Buf: x.Src.Buf, Off: x.Src.Off + a*k.ES, Len: (b - a) * k.ES}
	}
	if from >= 0 {
		var err error
		if x.Wire != 0 {
			err = x.Comp.Unpack(x.Wire, dst, in)
		} else {
			err = st.Copy(dst, in)
		}
		if err != nil {
			return err
		}
		src, packed = in, true
	}
	for _, out := range s.dsts3[1 : 1+len(to)] {
		if err := s.sendInto(st, out, src, packed); err != nil {
			return err
		}
	}
	return nil
}

// Scatter copies each part into an outbox slot to its rank (converted to
// the wire format if the call has one), then posts them all once the
// copies completed.
func (s *Steps) Scatter(ctx context.Context, parts []algo.Part) error {
	st := s.Dev.Stream()
	pend := scratch(&s.pend, len(parts))
	for q, p := range parts {
		slot, out, err := s.R.Reserve(ctx, p.Rank, s.wireBytes(p.B-p.A))
		if err != nil {
			return err
		}
		if err := s.sendInto(st, out, s.k.Region(p.A, p.B), false); err != nil {
			return s.R.Fail(err)
		}
		pend[q] = pending{to: p.Rank, slot: slot, n: s.wireBytes(p.B - p.A)}
	}
	return s.flushPost(ctx, pend)
}

// Gather copies each part received from its rank into the buffer.
func (s *Steps) Gather(ctx context.Context, parts []algo.Part) error {
	st := s.Dev.Stream()
	for q, p := range parts {
		in, err := s.R.Take(ctx, p.Rank, q, (p.B-p.A)*s.k.ES)
		if err != nil {
			return err
		}
		if err := st.Copy(s.k.Region(p.A, p.B), in); err != nil {
			return s.R.Fail(err)
		}
	}
	return s.R.Flush(ctx)
}

// Ordered: for Float16, BFloat16 and the fp8 types the ordered reduction's
// kernel also applies the call's scale (a mean's division by N) to its
// float32 accumulator before the one rounding to the type, as the direct
// all-reduce, ReduceScatterV and the host paths do, and marks the call
// scaled, so Scale does not round the chunk a second time. Reduce does this
// for more than 8 sources too: the partial results stay float32 (the
// _out32 and _in32 kernels) and the last pass, which writes the 16-bit
// result, divides. float32 and float64 keep the separate Scale pass: their
// stored sum is the accumulator itself, so that pass rounds only the
// quotient, as a fused one would.
func (s *Steps) Ordered() {
	s.x.ordering = true
	if s.k.DT.IsNarrowFloat() && s.k.Scale != 1 {
		s.x.scaled = true
	}
}

// ReduceOrdered reduces the slice from every member, in member order, with
// one kernel (the rank's own slice copied into its inbox slot). With a
// wire format every input is unpacked (the rank's own packed and unpacked
// the same way, so each input is rounded exactly once whoever owns the
// chunk) into the second half of its slot: the call's slices are half a
// slot long (Slice).
func (s *Steps) ReduceOrdered(ctx context.Context, members []int, a, b int) error {
	k, x := &s.k, s.x
	st := s.Dev.Stream()
	srcs := scratch(&s.srcs, len(members))
	for q, r := range members {
		in := backend.Region{Buf: s.Inbox, Off: q * s.SlotBytes, Len: s.wireBytes(b - a)}
		var err error
		if r == s.Self {
			if err = s.sendInto(st, in, k.Region(a, b), false); err != nil {
				return s.R.Fail(err)
			}
		} else if in, err = s.R.Take(ctx, r, q, s.wireBytes(b-a)); err != nil {
			return err
		}
		if x.Wire != 0 {
			unpacked := backend.Region{Buf: s.Inbox, Off: q*s.SlotBytes + s.SlotBytes/2, Len: (b - a) * k.ES}
			if err := x.Comp.Unpack(x.Wire, unpacked, in); err != nil {
				return s.R.Fail(err)
			}
			in = unpacked
		}
		srcs[q] = in
	}
	scale := 1.0
	if k.DT.IsNarrowFloat() && k.Scale != 1 {
		scale = k.Scale
	}
	if err := st.Reduce(k.Op, k.DT, k.Region(a, b), srcs, scale); err != nil {
		return s.R.Fail(err)
	}
	return s.R.Flush(ctx)
}

// Scale applies the final scale (mean) to the chunk [lo, hi) this rank
// owns, unless the reduction already did, and ends a rank-ordered
// reduction. With a wire format it then rounds the chunk to the format and
// back, as the other ranks will receive it, so that every rank ends with
// the same bits: the chunk was reduced in float32 (only the exchange is
// 16-bit), so the scale rounds only the quotient before that rounding.
func (s *Steps) Scale(ctx context.Context, lo, hi int) error {
	k := &s.k
	s.x.ordering = false
	if k.Scale != 1 && !s.x.scaled && hi > lo {
		r := k.Region(lo, hi)
		if err := s.Dev.Stream().Scale(k.DT, r, r, k.Scale); err != nil {
			return s.R.Fail(err)
		}
		if err := s.R.Flush(ctx); err != nil {
			return err
		}
	}
	if s.x.Wire != 0 {
		return s.round(ctx, lo, hi)
	}
	return nil
}

// round rounds elements [lo, hi) of the buffer to the wire format and back,
// slice by slice, through the first inbox slot.
func (s *Steps) round(ctx context.Context, lo, hi int) error {
	k, x := &s.k, s.x
	slice := s.Slice()
	for a := lo; a < hi; a += slice {
		b := min(a+slice, hi)
		tmp := backend.Region{Buf: s.Inbox, Off: 0, Len: PackedLen(b - a)}
		err := x.Comp.Pack(x.Wire, tmp, k.Region(a, b))
		if err == nil {
			err = x.Comp.Unpack(x.Wire, k.Region(a, b), tmp)
		}
		if err != nil {
			return s.R.Fail(err)
		}
		if err := s.R.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// fuse returns the stream's MultiReducer when a ring or tree step's
// reduction and its send can be one ReduceMulti pass: a step that sends, no
// wire format, and a type the device reduces in kernels.
func (s *Steps) fuse(st backend.Stream, last bool) (backend.MultiReducer, bool) {
	if last || s.x.Wire != 0 || FuseOff || !s.k.Kernels {
		return nil, false
	}
	mr, ok := st.(backend.MultiReducer)
	return mr, ok
}

// fuseCopy is fuse for a step that copies a received slice into the buffer
// and sends it on: a one-source ReduceMulti is a copy, bit for bit, for the
// 32- and 64-bit types (moves, no arithmetic). Only where the slots are
// host memory a discrete device reads and writes over PCIe (ranks on
// devices of their own), so one pass moves both directions at once; where
// the slots are device memory, or the device's memory is host memory, two
// DMA copies are cheaper than a kernel (lavapipe: 4 MiB AllGather 10.5 ms
// fused, 5.4 ms with copies).
func (s *Steps) fuseCopy(st backend.Stream, last bool) (backend.MultiReducer, bool) {
	if s.k.ES < 4 || (!FuseCopyAlways && !s.k.PCIeSlots) {
		return nil, false
	}
	return s.fuse(st, last)
}

// flushPost submits the slices copied into outbox slots, waits for them and
// posts them to their receivers.
func (s *Steps) flushPost(ctx context.Context, pend []pending) error {
	if err := s.R.Flush(ctx); err != nil {
		return err
	}
	for _, p := range pend {
		s.R.Post(p.to, p.slot, p.n)
	}
	return nil
}

// sendInto records src (a slice of the buffer or an inbox region) into the
// outbox region out: a copy, or a conversion to the wire format (unless
// src is packed already).
func (s *Steps) sendInto(st backend.Stream, out, src backend.Region, packed bool) error {
	if s.x.Wire == 0 || packed {
		return st.Copy(out, src)
	}
	return s.x.Comp.Pack(s.x.Wire, out, src)
}

// wireBytes is the message length of a slice of m elements.
func (s *Steps) wireBytes(m int) int {
	if s.x.Wire == 0 {
		return m * s.k.ES
	}
	return PackedLen(m)
}

// PackedLen is the byte length of n elements in a 16-bit wire format,
// rounded up to whole 4-byte words.
func PackedLen(n int) int { return (2*n + 3) &^ 3 }

// scratch returns (*p)[:n], growing *p to n first.
func scratch[T any](p *[]T, n int) []T {
	if cap(*p) < n {
		*p = make([]T, n)
	}
	return (*p)[:n]
}
