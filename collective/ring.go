package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
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
	// detReduceScatter); scaleOwned then leaves the chunk as it is.
	scaled bool
}

func (k *call) region(lo, hi int) backend.Region {
	return backend.Region{Buf: k.work, Off: k.base + lo*k.es, Len: (hi - lo) * k.es}
}

// chunkRange returns chunk c of k chunks of n elements, each chunkLen long
// (the last ones shorter or empty).
func chunkRange(n, chunkLen, c int) (lo, hi int) {
	lo = c * chunkLen
	hi = lo + chunkLen
	if lo > n {
		lo = n
	}
	if hi > n {
		hi = n
	}
	return
}

// sliceRange returns slice j (of at most slice elements) of [lo, hi).
func sliceRange(lo, hi, slice, j int) (int, int) {
	a := lo + j*slice
	b := a + slice
	if a > hi {
		a = hi
	}
	if b > hi {
		b = hi
	}
	return a, b
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func mod(a, k int) int { return ((a % k) + k) % k }

// position returns c's index in members, or -1.
func (c *Comm) position(members []int) int {
	for i, r := range members {
		if r == c.rank {
			return i
		}
	}
	return -1
}

// ringReduceScatter reduces n elements over members with a ring: the buffer
// is cut into len(members) chunks of chunkLen elements, processed in rounds
// of slices (one outbox slot each) so that exchange and reduction of
// different slices overlap across ranks. Member i ends owning chunk
// (i+off) mod k, fully reduced (without the final scale). With sendFirst
// false the caller has nothing to forward afterwards; with ag true the last
// step also forwards the owned chunk (the first all-gather step), fused.
//
// In deterministic mode the reduction instead gathers every member's slice at
// its owner and reduces them in rank order (off must be 0).
func (c *Comm) ringReduceScatter(ctx context.Context, k *call, members []int, n, chunkLen, round int, off int) error {
	km := len(members)
	i := c.position(members)
	right := members[mod(i+1, km)]
	left := members[mod(i-1, km)]
	slice := c.g.slotBytes / k.es
	for j := 0; j*slice < chunkLen; j++ {
		// Step 0: send the slice of chunk (i+off-1).
		sc := mod(i+off-1, km)
		lo, hi := chunkRange(n, chunkLen, sc)
		a, b := sliceRange(lo, hi, slice, j)
		if err := c.sendSlice(ctx, k, right, a, b); err != nil {
			return err
		}
		for s := 0; s < km-1; s++ {
			rc := mod(i+off-2-s, km)
			lo, hi := chunkRange(n, chunkLen, rc)
			a, b := sliceRange(lo, hi, slice, j)
			if b <= a {
				continue
			}
			in, err := c.take(ctx, left, 0, k.wireBytes(b-a))
			if err != nil {
				return err
			}
			dst := k.region(a, b)
			st := c.dev.Stream()
			if k.wire != 0 {
				scratch := backend.Region{Buf: c.inbox, Off: c.g.slotBytes, Len: (b - a) * k.es}
				if err := c.rec(k.comp.Unpack(k.wire, scratch, in)); err != nil {
					return err
				}
				in = scratch
			}
			c.srcs2[0], c.srcs2[1] = dst, in
			last := s == km-2
			var slot int
			var out backend.Region
			if !last {
				slot, out, err = c.reserve(ctx, right, k.wireBytes(b-a))
				if err != nil {
					return err
				}
			}
			if mr, ok := c.fuse(k, st, last); ok {
				// One pass reduces into the buffer and writes the sum into
				// the right neighbour's slot: the slot's read and the
				// send's write cross PCIe in the same dispatch.
				c.dsts2[0], c.dsts2[1] = dst, out
				if err := c.rec(mr.ReduceMulti(k.op, k.dt, c.dsts2[:2], c.srcs2[:2], 1)); err != nil {
					return err
				}
			} else {
				if err := c.rec(st.Reduce(k.op, k.dt, dst, c.srcs2[:2], 1)); err != nil {
					return err
				}
				if !last {
					if err := c.rec(k.sendInto(st, out, dst, false)); err != nil {
						return err
					}
				}
			}
			if err := c.flush(ctx); err != nil {
				return err
			}
			if !last {
				c.post(right, slot, k.wireBytes(b-a))
			}
		}
	}
	return nil
}

// detReduceScatter is the rank-ordered reduce-scatter of deterministic mode
// (and of the direct algorithm on device buffers): for each round, every
// member sends its slice of chunk c to member c, which reduces the k slices
// in member order with one kernel. Member i ends owning chunk i.
//
// For Float16 and BFloat16 that kernel also applies the call's scale (a
// mean's division by N) to its float32 accumulator before the one rounding
// to 16 bits, as the direct all-reduce, ReduceScatterV and the host paths
// do, and marks the call scaled, so scaleOwned does not round the chunk a
// second time. Reduce does this for more than 8 sources too: the partial
// results stay float32 (the _out32 and _in32 kernels) and the last pass,
// which writes the 16-bit result, divides. float32 and float64 keep the
// separate scaleOwned pass: their stored sum is the accumulator itself, so
// that pass rounds only the quotient, as a fused one would.
func (c *Comm) detReduceScatter(ctx context.Context, k *call, members []int, n, chunkLen int) error {
	km := len(members)
	i := c.position(members)
	slice := c.g.slotBytes / k.es
	pend, srcs := c.pendings(km), c.regions(km)
	scale := 1.0
	if k.dt.Is16() && k.scale != 1 {
		scale, k.scaled = k.scale, true
	}
	for j := 0; j*slice < chunkLen; j++ {
		// Send my slice of every other member's chunk.
		st := c.dev.Stream()
		nsend := 0
		for q := 0; q < km; q++ {
			if q == i {
				continue
			}
			lo, hi := chunkRange(n, chunkLen, q)
			a, b := sliceRange(lo, hi, slice, j)
			if b <= a {
				continue
			}
			slot, out, err := c.reserve(ctx, members[q], (b-a)*k.es)
			if err != nil {
				return err
			}
			if err := c.rec(st.Copy(out, k.region(a, b))); err != nil {
				return err
			}
			pend[nsend] = pending{to: members[q], slot: slot, n: (b - a) * k.es}
			nsend++
		}
		if nsend > 0 {
			if err := c.flushPost(ctx, pend[:nsend]); err != nil {
				return err
			}
		}
		// Reduce my chunk's slice from everyone, in member order.
		lo, hi := chunkRange(n, chunkLen, i)
		a, b := sliceRange(lo, hi, slice, j)
		if b <= a {
			continue
		}
		for q := 0; q < km; q++ {
			if q == i {
				in := backend.Region{Buf: c.inbox, Off: q * c.g.slotBytes, Len: (b - a) * k.es}
				if err := c.rec(st.Copy(in, k.region(a, b))); err != nil {
					return err
				}
				srcs[q] = in
				continue
			}
			in, err := c.take(ctx, members[q], q, (b-a)*k.es)
			if err != nil {
				return err
			}
			srcs[q] = in
		}
		if err := c.rec(st.Reduce(k.op, k.dt, k.region(a, b), srcs[:km], scale)); err != nil {
			return err
		}
		if err := c.flush(ctx); err != nil {
			return err
		}
	}
	return nil
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

// ringAllGather circulates the chunks: member i starts owning chunk
// (i+off) mod k and ends with all of them.
func (c *Comm) ringAllGather(ctx context.Context, k *call, members []int, n, chunkLen, off int) error {
	km := len(members)
	i := c.position(members)
	right := members[mod(i+1, km)]
	left := members[mod(i-1, km)]
	slice := c.g.slotBytes / k.es
	for j := 0; j*slice < chunkLen; j++ {
		sc := mod(i+off, km)
		lo, hi := chunkRange(n, chunkLen, sc)
		a, b := sliceRange(lo, hi, slice, j)
		if err := c.sendSlice(ctx, k, right, a, b); err != nil {
			return err
		}
		for s := 0; s < km-1; s++ {
			rc := mod(i+off-1-s, km)
			lo, hi := chunkRange(n, chunkLen, rc)
			a, b := sliceRange(lo, hi, slice, j)
			if b <= a {
				continue
			}
			in, err := c.take(ctx, left, 0, k.wireBytes(b-a))
			if err != nil {
				return err
			}
			st := c.dev.Stream()
			last := s == km-2
			var slot int
			var out backend.Region
			if !last {
				slot, out, err = c.reserve(ctx, right, k.wireBytes(b-a))
				if err != nil {
					return err
				}
			}
			if mr, ok := c.fuseCopy(k, st, last); ok {
				// One pass copies the slot into the buffer and on to the
				// right neighbour's slot.
				c.srcs2[0] = in
				c.dsts2[0], c.dsts2[1] = k.region(a, b), out
				if err := c.rec(mr.ReduceMulti(backend.Sum, k.dt, c.dsts2[:2], c.srcs2[:1], 1)); err != nil {
					return err
				}
			} else {
				if k.wire != 0 {
					err = k.comp.Unpack(k.wire, k.region(a, b), in)
				} else {
					err = st.Copy(k.region(a, b), in)
				}
				if err := c.rec(err); err != nil {
					return err
				}
				if !last {
					if err := c.rec(k.sendInto(st, out, in, true)); err != nil {
						return err
					}
				}
			}
			if err := c.flush(ctx); err != nil {
				return err
			}
			if !last {
				c.post(right, slot, k.wireBytes(b-a))
			}
		}
	}
	return nil
}

// ringAllReduce is reduce-scatter then all-gather over members: 2(k-1)
// steps, each member sending 2(k-1)/k of the buffer.
func (c *Comm) ringAllReduce(ctx context.Context, k *call, members []int, n int) error {
	km := len(members)
	if km == 1 {
		return c.scaleOwned(ctx, k, 0, n)
	}
	chunkLen := ceilDiv(n, km)
	i := c.position(members)
	off := 1
	if c.g.cfg.Deterministic {
		off = 0
		if err := c.detReduceScatter(ctx, k, members, n, chunkLen); err != nil {
			return err
		}
	} else if err := c.ringReduceScatter(ctx, k, members, n, chunkLen, 0, off); err != nil {
		return err
	}
	lo, hi := chunkRange(n, chunkLen, mod(i+off, km))
	if err := c.scaleOwned(ctx, k, lo, hi); err != nil {
		return err
	}
	return c.ringAllGather(ctx, k, members, n, chunkLen, off)
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

// sendSlice sends elements [a, b) of the call's buffer to peer (nothing
// when the slice is empty): into a free outbox slot (converted to the wire
// format if the call has one), then posted.
func (c *Comm) sendSlice(ctx context.Context, k *call, to, a, b int) error {
	if b <= a {
		return nil
	}
	slot, out, err := c.reserve(ctx, to, k.wireBytes(b-a))
	if err != nil {
		return err
	}
	if err := c.rec(k.sendInto(c.dev.Stream(), out, k.region(a, b), false)); err != nil {
		return err
	}
	if err := c.flush(ctx); err != nil {
		return err
	}
	c.post(to, slot, k.wireBytes(b-a))
	return nil
}
