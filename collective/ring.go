package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/algo"
)

// call carries one collective's parameters through the algorithms.
type call struct {
	dt    backend.DType
	es    int
	op    backend.Op
	scale float64 // applied once, by the rank that finishes a chunk's reduction
	work  backend.Buffer
	base  int // byte offset of element 0 in work
	// wire, when set, converts every exchanged slice to a 16-bit format
	// (ring only; see wire.go).
	wire backend.WireFormat
	comp backend.Compressor
	// scaled is set once the reduction itself applied the scale (see
	// stepper.Ordered); scaleOwned then leaves the chunk as it is.
	scaled bool
	// slice, when set, is the elements per message in place of a slot's
	// worth (the compressed rank-ordered reduce-scatter's half slot).
	slice int
	// src, when set, is where the call's sends read elements [a, b) from
	// (element a at src.Off): data outside the buffer, a tensor.
	src backend.Region
}

func (k *call) region(lo, hi int) backend.Region {
	return backend.Region{Buf: k.work, Off: k.base + lo*k.es, Len: (hi - lo) * k.es}
}

// algo returns c's runner of the algorithms (internal/algo) over the
// exchange steps of call k.
func (c *Comm) algo(k *call) *algo.Rank {
	if c.alg.S == nil {
		c.stp.c = c
		c.alg.S = &c.stp
	}
	c.stp.k, c.alg.Det = k, c.g.cfg.Deterministic
	return &c.alg
}

// stepper is the comm's algo.Steps for one call: the device work of each
// step over the comm's links.
type stepper struct {
	c *Comm
	k *call
}

func (s *stepper) Me() int { return s.c.rank }
func (s *stepper) Slice() int {
	if s.k.slice > 0 {
		return s.k.slice
	}
	return s.c.g.slotBytes / s.k.es
}

// Reduce is a ring or tree step's reduction: the received slices (unpacked
// from the wire format into an inbox slot) and the buffer's own into the
// buffer, and on to the next rank. Where fuse allows it, one pass reduces
// into the buffer and writes the sum into the next rank's slot: the slot's
// read and the send's write cross PCIe in the same dispatch.
func (s *stepper) Reduce(ctx context.Context, from []int, to, a, b int) error {
	c, k := s.c, s.k
	dst := k.region(a, b)
	st := c.dev.Stream()
	c.srcs3[0] = dst
	for q, f := range from {
		in, err := c.take(ctx, f, q, k.wireBytes(b-a))
		if err != nil {
			return err
		}
		if k.wire != 0 {
			scratch := backend.Region{Buf: c.inbox, Off: (len(from) + q) * c.g.slotBytes, Len: (b - a) * k.es}
			if err := c.rec(k.comp.Unpack(k.wire, scratch, in)); err != nil {
				return err
			}
			in = scratch
		}
		c.srcs3[1+q] = in
	}
	srcs := c.srcs3[:1+len(from)]
	var slot int
	var out backend.Region
	if to >= 0 {
		var err error
		if slot, out, err = c.reserve(ctx, to, k.wireBytes(b-a)); err != nil {
			return err
		}
	}
	if mr, ok := c.fuse(k, st, to < 0); ok && len(from) > 0 {
		c.dsts2[0], c.dsts2[1] = dst, out
		if err := c.rec(mr.ReduceMulti(k.op, k.dt, c.dsts2[:2], srcs, 1)); err != nil {
			return err
		}
	} else {
		if len(from) > 0 {
			if err := c.rec(st.Reduce(k.op, k.dt, dst, srcs, 1)); err != nil {
				return err
			}
		}
		if to >= 0 {
			if err := c.rec(k.sendInto(st, out, dst, false)); err != nil {
				return err
			}
		}
	}
	if to < 0 && len(from) == 0 {
		return nil
	}
	if err := c.flush(ctx); err != nil {
		return err
	}
	if to >= 0 {
		c.post(to, slot, k.wireBytes(b-a))
	}
	return nil
}

// Copy is a ring or tree step's copy (a send of the buffer's own slice,
// or of k.src's, when from < 0): the received slice into the buffer (unpacked from the
// wire format) and, as received, into the next ranks' slots. Where
// fuseCopy allows it, one pass copies the slot into the buffer and into
// the next ranks' slots.
func (s *stepper) Copy(ctx context.Context, from int, to []int, a, b int) error {
	c, k := s.c, s.k
	dst := k.region(a, b)
	st := c.dev.Stream()
	var in backend.Region
	if from >= 0 {
		var err error
		if in, err = c.take(ctx, from, 0, k.wireBytes(b-a)); err != nil {
			return err
		}
	}
	pend := c.pendings(len(to))
	for q, r := range to {
		slot, out, err := c.reserve(ctx, r, k.wireBytes(b-a))
		if err != nil {
			return err
		}
		c.dsts3[1+q] = out
		pend[q] = pending{to: r, slot: slot, n: k.wireBytes(b - a)}
	}
	if mr, ok := c.fuseCopy(k, st, len(to) == 0); ok && from >= 0 {
		c.dsts3[0], c.srcs2[0] = dst, in
		if err := c.rec(mr.ReduceMulti(backend.Sum, k.dt, c.dsts3[:1+len(to)], c.srcs2[:1], 1)); err != nil {
			return err
		}
	} else {
		src, packed := dst, false
		if k.src.Buf != nil {
			src = backend.Region{Buf: k.src.Buf, Off: k.src.Off + a*k.es, Len: (b - a) * k.es}
		}
		if from >= 0 {
			var err error
			if k.wire != 0 {
				err = k.comp.Unpack(k.wire, dst, in)
			} else {
				err = st.Copy(dst, in)
			}
			if err := c.rec(err); err != nil {
				return err
			}
			src, packed = in, true
		}
		for _, out := range c.dsts3[1 : 1+len(to)] {
			if err := c.rec(k.sendInto(st, out, src, packed)); err != nil {
				return err
			}
		}
	}
	if from < 0 && len(to) == 0 {
		return nil
	}
	return c.flushPost(ctx, pend)
}

// Scatter copies each part into an outbox slot to its rank (converted to
// the wire format if the call has one), then posts them all once the
// copies completed.
func (s *stepper) Scatter(ctx context.Context, parts []algo.Part) error {
	c, k := s.c, s.k
	st := c.dev.Stream()
	pend := c.pendings(len(parts))
	for q, p := range parts {
		slot, out, err := c.reserve(ctx, p.Rank, k.wireBytes(p.B-p.A))
		if err != nil {
			return err
		}
		if err := c.rec(k.sendInto(st, out, k.region(p.A, p.B), false)); err != nil {
			return err
		}
		pend[q] = pending{to: p.Rank, slot: slot, n: k.wireBytes(p.B - p.A)}
	}
	return c.flushPost(ctx, pend)
}

// Gather copies each part received from its rank into the buffer.
func (s *stepper) Gather(ctx context.Context, parts []algo.Part) error {
	c, k := s.c, s.k
	st := c.dev.Stream()
	for q, p := range parts {
		in, err := c.take(ctx, p.Rank, q, (p.B-p.A)*k.es)
		if err != nil {
			return err
		}
		if err := c.rec(st.Copy(k.region(p.A, p.B), in)); err != nil {
			return err
		}
	}
	return c.flush(ctx)
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
func (s *stepper) Ordered() {
	if s.k.dt.IsNarrowFloat() && s.k.scale != 1 {
		s.k.scaled = true
	}
}

// ReduceOrdered reduces the slice from every member, in member order, with
// one kernel (the rank's own slice copied into its inbox slot). With a
// wire format every input is unpacked (the rank's own packed and unpacked
// the same way, so each input is rounded exactly once whoever owns the
// chunk) into the second half of its slot: the call's slices are half a
// slot long (k.slice).
func (s *stepper) ReduceOrdered(ctx context.Context, members []int, a, b int) error {
	c, k := s.c, s.k
	st := c.dev.Stream()
	srcs := c.regions(len(members))
	for q, r := range members {
		in := backend.Region{Buf: c.inbox, Off: q * c.g.slotBytes, Len: k.wireBytes(b - a)}
		var err error
		if r == c.rank {
			err = c.rec(k.sendInto(st, in, k.region(a, b), false))
		} else {
			in, err = c.take(ctx, r, q, k.wireBytes(b-a))
		}
		if err != nil {
			return err
		}
		if k.wire != 0 {
			unpacked := backend.Region{Buf: c.inbox, Off: q*c.g.slotBytes + c.g.slotBytes/2, Len: (b - a) * k.es}
			if err := c.rec(k.comp.Unpack(k.wire, unpacked, in)); err != nil {
				return err
			}
			in = unpacked
		}
		srcs[q] = in
	}
	scale := 1.0
	if k.dt.IsNarrowFloat() && k.scale != 1 {
		scale = k.scale
	}
	if err := c.rec(st.Reduce(k.op, k.dt, k.region(a, b), srcs, scale)); err != nil {
		return err
	}
	return c.flush(ctx)
}

func (s *stepper) Scale(ctx context.Context, lo, hi int) error {
	return s.c.scaleOwned(ctx, s.k, lo, hi)
}

// scaleOwned applies the final scale (mean) to the chunk this member owns,
// unless the reduction already did (k.scaled).
func (c *Comm) scaleOwned(ctx context.Context, k *call, lo, hi int) error {
	if k.scale == 1 || k.scaled || hi <= lo {
		return nil
	}
	r := k.region(lo, hi)
	if err := c.rec(c.dev.Stream().Scale(k.dt, r, r, k.scale)); err != nil {
		return err
	}
	return c.flush(ctx)
}

// fuse returns the stream's MultiReducer when a ring or tree step's
// reduction and its send can be one ReduceMulti pass: a step that sends, no
// wire format, and a type the device reduces in kernels.
func (c *Comm) fuse(k *call, st backend.Stream, last bool) (backend.MultiReducer, bool) {
	if last || k.wire != 0 || fuseOff || c.noKernels(k.dt) {
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
func (c *Comm) fuseCopy(k *call, st backend.Stream, last bool) (backend.MultiReducer, bool) {
	if k.es < 4 || (!fuseCopyAlways && (c.g.sharedMem || c.info.UnifiedMemory)) {
		return nil, false
	}
	return c.fuse(k, st, last)
}

// fuseCopyAlways fuses the copies wherever fuse would (a test hook: the
// layouts that fuse them need a discrete GPU).
var fuseCopyAlways bool

// fuseOff turns the fused steps off (tests compare both).
var fuseOff bool

// pending is a reserved slot waiting for its copy to finish before it is
// posted.
type pending struct{ to, slot, n int }
