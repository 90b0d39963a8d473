package host

import (
	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// block is how many elements a kernel reduces at a time through a local
// accumulator: every source of a block is read before the block is stored,
// so dst may be any one of the sources.
const block = 1024

// chunkBytes is the destination bytes of a chunk of a large command on the
// worker pool; a copy moves more bytes per second than a reduction and takes
// chunks twice as large. (A variable for the tests, which make it small.)
var chunkBytes = parreduce.ChunkBytes

// executor runs a device's batches on its worker goroutine. A command of
// more than one chunk (chunkBytes of its destination, twice that for a
// copy) runs in chunks on the process's worker pool, shared with every
// other device and capped by parreduce.Device.
//
// Chunks pay even when every rank's device reduces at once: R ranks' workers
// keep R cores busy, and a kernel is bound by memory, which one core streams
// at about 10 GB/s and a socket at several times that; the pool lends the
// other cores (12 of 16 for four ranks). Where ranks outnumber cores no
// helper is idle and a kernel runs on its worker alone, in chunks.
type executor struct {
	job  parreduce.Job
	c    *command // the command job runs
	srcs [][]byte
}

// run executes the commands of b in order.
func (e *executor) run(b *batch) {
	for i := range b.cmds {
		c := &b.cmds[i]
		e.exec(c, b.srcs[c.srcLo:c.srcHi])
	}
}

// exec executes one command, in chunks over the pool when it is large. The
// result does not depend on the chunking: every element is computed alone.
func (e *executor) exec(c *command, srcs [][]byte) {
	if c.kind >= cmdPack {
		execCompress(c)
		return
	}
	n, chunk := len(c.dst), 2*chunkBytes
	if c.kind != cmdCopy {
		es := c.dt.Size()
		n /= es
		chunk = chunkBytes / es
	}
	e.c, e.srcs = c, srcs
	e.job.Run(&parreduce.Device, e, n, chunk)
	e.c, e.srcs = nil, nil
}

// Range executes elements [lo, hi) of the current command (parreduce's
// Ranger).
func (e *executor) Range(lo, hi int) { execRange(e.c, e.srcs, lo, hi) }

// execRange executes elements (bytes, for a copy) [lo, hi) of c.
func execRange(c *command, srcs [][]byte, lo, hi int) {
	switch c.kind {
	case cmdCopy:
		copy(c.dst[lo:hi], c.src[lo:hi])
	case cmdScale:
		switch c.dt {
		case backend.F32:
			scaleRange(view[float32](c.dst)[lo:hi], view[float32](c.src)[lo:hi], c)
		case backend.F64:
			scaleRange(view[float64](c.dst)[lo:hi], view[float64](c.src)[lo:hi], c)
		case backend.Half, backend.BFloat16:
			scaleNarrow(view[uint16](c.dst)[lo:hi], view[uint16](c.src)[lo:hi], c)
		case backend.F8E4M3, backend.F8E5M2:
			scaleNarrow(view[uint8](c.dst)[lo:hi], view[uint8](c.src)[lo:hi], c)
		default: // an integer type: a copy, divided by N for a mean's 1/N (checkScale)
			es := c.dt.Size()
			copy(c.dst[lo*es:hi*es], c.src[lo*es:hi*es])
			scaleInt(c.dt, c.dst[lo*es:hi*es], c.sc)
		}
	case cmdReduce, cmdReduceMulti:
		// kernels/reduce.comp (and reducem.comp) over elements [lo, hi): the
		// sources reduced left to right in the element type (the narrow
		// floats in float32, rounded once), scaled as c says, stored to dst
		// and to every region of more (the other destinations of a reduce
		// multi). A partial result of a GPU pass is stored in the element
		// type and read back, so one pass over all sources gives the same
		// bits as passes of eight.
		srcs, more := srcs[:len(srcs)-c.ndst], srcs[len(srcs)-c.ndst:]
		hostmath.ReduceRange(c.dt, c.op, c.dst, more, srcs, lo, hi, c.sc)
	}
}

// scaleRange is kernels/scale.comp: dst[i] = src[i] scaled as c says, or a
// copy. dst and src are the same length and may be the same memory.
func scaleRange[T float](dst, src []T, c *command) {
	if c.sc.Identity() {
		copy(dst, src) // bit for bit, NaN payloads included
		return
	}
	hostmath.Apply(c.sc, dst[:len(src)], src)
}

// scaleInt divides the integers of dt in b by N where sc is 1/N
// (hostmath.ApplyInt), else leaves them.
func scaleInt(dt backend.DType, b []byte, sc hostmath.Scale) {
	if sc.Identity() {
		return
	}
	switch dt {
	case backend.I32:
		hostmath.ApplyInt(sc, view[int32](b))
	case backend.U32:
		hostmath.ApplyInt(sc, view[uint32](b))
	case backend.I64:
		hostmath.ApplyInt(sc, view[int64](b))
	case backend.U64:
		hostmath.ApplyInt(sc, view[uint64](b))
	case backend.I8:
		hostmath.ApplyInt(sc, view[int8](b))
	case backend.U8:
		hostmath.ApplyInt(sc, view[uint8](b))
	case backend.I16:
		hostmath.ApplyInt(sc, view[int16](b))
	case backend.U16:
		hostmath.ApplyInt(sc, view[uint16](b))
	}
}

// scaleNarrow is scaleRange for the narrow float types (c.dt): a copy when
// the scale is 1, else each element converted to float32, scaled as f32 is
// (applyScale) and rounded once to the type. dst may be src.
func scaleNarrow[E hostmath.Bits](dst, src []E, c *command) {
	if c.sc.Identity() {
		copy(dst, src)
		return
	}
	var buf [block]float32
	for b := 0; b < len(src); b += block {
		e := min(b+block, len(src))
		v := buf[:e-b]
		hostmath.Widen(c.dt, v, src[b:e])
		hostmath.Apply(c.sc, v, v)
		hostmath.Narrow(c.dt, dst[b:e], v)
	}
}
