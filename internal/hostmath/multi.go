package hostmath

import (
	"sync"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// ReduceMulti reduces the sources in order (srcs[0] op srcs[1] op ...) over
// their first cnt elements of dt, scales the result as ReduceStrided does,
// and stores it to the first cnt elements of every destination: the host
// backend's ReduceMulti kernel (and its Reduce, with one destination), and
// the one-process exchange's CPU reduction straight between the ranks'
// memory. A destination may be a source (the same first byte: every source
// of a block is read before the block is stored), never a partial overlap;
// destinations are disjoint.
//
// More than one chunk of elements (parreduce.ChunkBytes of a destination)
// is reduced in chunks on the process's worker pool, capped by
// parreduce.Reduce; every element reduces its inputs in order alone, so the
// bits do not depend on the chunking.
func ReduceMulti(dt backend.DType, op backend.Op, dsts, srcs [][]byte, cnt int, scale float64) {
	if cnt <= 0 || len(srcs) == 0 || len(dsts) == 0 {
		return
	}
	s := NewScale(scale)
	chunk := chunkBytes / dt.Size()
	if cnt <= chunk || parreduce.Reduce.Limit() == 1 {
		ReduceRange(dt, op, dsts[0], dsts[1:], srcs, 0, cnt, s)
		return
	}
	j := multiJobs.get()
	j.dt, j.op, j.dsts, j.srcs, j.s = dt, op, dsts, srcs, s
	j.job.Run(&parreduce.Reduce, j, cnt, chunk)
	j.dsts, j.srcs = nil, nil // hold no reference to the caller's memory
	multiJobs.put(j)
}

// multiJob is a parallel ReduceMulti's arguments and its job.
type multiJob struct {
	job        parreduce.Job
	dt         backend.DType
	op         backend.Op
	dsts, srcs [][]byte
	s          Scale
}

// Range reduces elements [lo, hi) of the call.
func (j *multiJob) Range(lo, hi int) {
	ReduceRange(j.dt, j.op, j.dsts[0], j.dsts[1:], j.srcs, lo, hi, j.s)
}

var multiJobs freeList[multiJob]

// ReduceRange is ReduceMulti's work on elements [lo, hi) on the caller's
// goroutine alone: a block of elements at a time is reduced through a local
// accumulator in the element type (float32 for the narrow floats), scaled,
// stored to dst and copied to every slice of more.
func ReduceRange(dt backend.DType, op backend.Op, dst []byte, more, srcs [][]byte, lo, hi int, s Scale) {
	if dt.Valid() {
		rangeFuncs[dt](dt, op, dst, more, srcs, lo, hi, s)
	}
}

// rangeFuncs is ReduceRange's work for each element type.
var rangeFuncs = [backend.NumDTypes]func(dt backend.DType, op backend.Op, dst []byte, more, srcs [][]byte, lo, hi int, s Scale){
	backend.F32: reduceFloatRange[float32], backend.F64: reduceFloatRange[float64],
	backend.I32: reduceIntRange[int32], backend.U32: reduceIntRange[uint32],
	backend.I64: reduceIntRange[int64], backend.U64: reduceIntRange[uint64],
	backend.I8: reduceIntRange[int8], backend.U8: reduceIntRange[uint8],
	backend.I16: reduceIntRange[int16], backend.U16: reduceIntRange[uint16],
	backend.Half: reduceNarrowRange[uint16], backend.BFloat16: reduceNarrowRange[uint16],
	backend.F8E4M3: reduceNarrowRange[uint8], backend.F8E5M2: reduceNarrowRange[uint8],
}

// multiBlock is how many elements ReduceRange reduces at a time: its
// accumulator stays in the L1 cache while every source is added to it and
// it is copied to every destination.
const multiBlock = 1024

func reduceFloatRange[T Float](_ backend.DType, op backend.Op, dst []byte, more, srcs [][]byte, lo, hi int, s Scale) {
	var buf [multiBlock]T
	d := View[T](dst)
	for b := lo; b < hi; b += multiBlock {
		e := min(b+multiBlock, hi)
		acc := buf[:e-b]
		copy(acc, View[T](srcs[0])[b:e])
		for _, src := range srcs[1:] {
			Combine(op, acc, View[T](src)[b:e])
		}
		Apply(s, acc, acc)
		storeBlock(d, more, acc, b)
	}
}

// reduceIntRange is reduceFloatRange for the integer types (Go's called
// functions differ: the combining and scaling are CombineInt and ApplyInt).
func reduceIntRange[T Integer](_ backend.DType, op backend.Op, dst []byte, more, srcs [][]byte, lo, hi int, s Scale) {
	var buf [multiBlock]T
	d := View[T](dst)
	for b := lo; b < hi; b += multiBlock {
		e := min(b+multiBlock, hi)
		acc := buf[:e-b]
		copy(acc, View[T](srcs[0])[b:e])
		for _, src := range srcs[1:] {
			CombineInt(op, acc, View[T](src)[b:e])
		}
		ApplyInt(s, acc)
		storeBlock(d, more, acc, b)
	}
}

// storeBlock stores a reduced block, elements [b, b+len(acc)), to d and to
// every slice of more.
func storeBlock[T any](d []T, more [][]byte, acc []T, b int) {
	copy(d[b:b+len(acc)], acc)
	for _, m := range more {
		copy(View[T](m)[b:b+len(acc)], acc)
	}
}

func reduceNarrowRange[E Bits](dt backend.DType, op backend.Op, dst []byte, more, srcs [][]byte, lo, hi int, s Scale) {
	var buf, x [multiBlock]float32
	d := View[E](dst)
	for b := lo; b < hi; b += multiBlock {
		e := min(b+multiBlock, hi)
		acc := buf[:e-b]
		Widen(dt, acc, View[E](srcs[0])[b:e])
		for _, src := range srcs[1:] {
			v := x[:e-b]
			Widen(dt, v, View[E](src)[b:e])
			Combine(op, acc, v)
		}
		Apply(s, acc, acc)
		// Every source of the block has been read: dst may be one of them.
		Narrow(dt, d[b:e], acc)
		for _, m := range more {
			copy(View[E](m)[b:e], d[b:e])
		}
	}
}

// freeList keeps the jobs of finished calls, so that a call allocates none
// (one per call running at once, kept for the process's life).
type freeList[T any] struct {
	mu   sync.Mutex
	free []*T
}

func (f *freeList[T]) get() *T {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.free); n > 0 {
		j := f.free[n-1]
		f.free = f.free[:n-1]
		return j
	}
	return new(T)
}

func (f *freeList[T]) put(j *T) {
	f.mu.Lock()
	f.free = append(f.free, j)
	f.mu.Unlock()
}

// Copy copies src into dst (copy's semantics; dst and src do not overlap)
// and returns the bytes copied: from parreduce.CopyMin up in pieces of two
// chunks over the process's worker pool, capped by parreduce.Copy (a core
// moves about 10 GB/s, a socket several times that), below it on the
// caller alone.
func Copy(dst, src []byte) int { return CopyPieces(dst, src, 2*parreduce.ChunkBytes) }

// CopyPieces is Copy in pieces of piece bytes (at least one chunk): with
// pieces of 1 MiB or more each worker's copy is a memmove large enough for
// non-temporal stores, which bypass the cache.
func CopyPieces(dst, src []byte, piece int) int {
	n := min(len(dst), len(src))
	if !parreduce.ParallelCopy(n) {
		return copy(dst, src)
	}
	j := copyJobs.get()
	j.dst, j.src = dst, src
	j.job.Run(&parreduce.Copy, j, n, max(piece, parreduce.ChunkBytes))
	j.dst, j.src = nil, nil
	copyJobs.put(j)
	return n
}

// copyJob is a parallel Copy's arguments and its job.
type copyJob struct {
	job      parreduce.Job
	dst, src []byte
}

// Range copies bytes [lo, hi).
func (j *copyJob) Range(lo, hi int) { copy(j.dst[lo:hi], j.src[lo:hi]) }

var copyJobs freeList[copyJob]

// CopyBlocks copies len(dst)/bs blocks of bs bytes, block i from
// src[i*stride:], into dst one after the other (dst and src do not
// overlap): from parreduce.CopyMin up in pieces over the process's worker
// pool, as Copy.
func CopyBlocks(dst, src []byte, bs, stride int) {
	if bs <= 0 || len(dst) == 0 {
		return
	}
	if !parreduce.ParallelCopy(len(dst)) {
		j := blockJob{dst: dst, src: src, bs: bs, stride: stride}
		j.Range(0, len(dst))
		return
	}
	j := blockJobs.get()
	j.dst, j.src, j.bs, j.stride = dst, src, bs, stride
	j.job.Run(&parreduce.Copy, j, len(dst), 2*parreduce.ChunkBytes)
	j.dst, j.src = nil, nil
	blockJobs.put(j)
}

// CopyGather copies len(srcs) blocks of bs bytes, block i from srcs[i],
// into dst one after the other (a block may be its own source, in place:
// it is left as it is; otherwise dst and the sources do not overlap), in
// pieces over the process's worker pool as CopyBlocks.
func CopyGather(dst []byte, srcs [][]byte, bs int) { CopyGatherMore(dst, nil, srcs, bs) }

// CopyGatherMore is CopyGather into dst and into every slice of more (each
// at least as long as dst's gathered bytes, disjoint from dst and from one
// another): each piece is read from its source once, stored to dst, then
// copied from dst (just written) into the others. A block of more that is
// its own source is left as it is, as in dst. A piece of the pool's work
// writes about what one of CopyBlocks' does, in all its destinations: a
// 1 MiB gather into 4 results is 8 pieces, not 2 (two of the process's
// cores idle).
func CopyGatherMore(dst []byte, more, srcs [][]byte, bs int) {
	n := min(len(dst), len(srcs)*bs)
	if bs <= 0 || n == 0 {
		return
	}
	if !parreduce.ParallelCopy(n * (1 + len(more))) {
		j := blockJob{dst: dst, srcs: srcs, more: more, bs: bs}
		j.Range(0, n)
		return
	}
	j := blockJobs.get()
	j.dst, j.srcs, j.more, j.bs = dst, srcs, more, bs
	j.job.Run(&parreduce.Copy, j, n, max(2*parreduce.ChunkBytes/(1+len(more)), parreduce.ChunkBytes/4))
	j.dst, j.srcs, j.more = nil, nil, nil
	blockJobs.put(j)
}

// blockJob is a parallel CopyBlocks' or CopyGather's arguments and its job.
type blockJob struct {
	job        parreduce.Job
	dst, src   []byte
	srcs       [][]byte // CopyGather's sources (src is nil then)
	more       [][]byte // CopyGatherMore's further destinations
	bs, stride int
}

// Range copies bytes [lo, hi) of dst, block by block.
func (j *blockJob) Range(lo, hi int) {
	for lo < hi {
		i, off := lo/j.bs, lo%j.bs
		n := min(j.bs-off, hi-lo)
		switch {
		case j.srcs == nil:
			copy(j.dst[lo:lo+n], j.src[i*j.stride+off:])
		case &j.dst[lo] != &j.srcs[i][off]:
			copy(j.dst[lo:lo+n], j.srcs[i][off:])
		}
		for _, m := range j.more {
			if &m[lo] != &j.srcs[i][off] {
				copy(m[lo:lo+n], j.dst[lo:lo+n])
			}
		}
		lo += n
	}
}

var blockJobs freeList[blockJob]
