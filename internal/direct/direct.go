// Package direct is the one-process direct and pipelined all-reduce, the
// prefix reductions (Scan, Exscan) done the same way, and the all-gather
// of host slices (AllGather: each rank copies every rank's block). In the
// reductions every rank reduces its own slice of every rank's input, in
// rank order (so the
// result has the same bits on any layout), and writes the reduced slice
// into every rank's output. Staged runs through host memory the rank's
// device reads and writes; ZeroCopy reads and writes the ranks' imported
// host memory straight from the device. The exchange runs over Rank, the
// few services of the rank's device and pooled buffers it needs; the
// caller publishes the ranks' buffers, and keeps every rank in the call
// until all slices are written.
//
// In place is safe: rank r writes only slice r of each output, after it
// has read slice r of each input, and no other rank reads slice r.
package direct

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
)

// The rank's pooled buffers the exchange asks for (Rank.Buffer).
const (
	Stage  = iota // host-visible: the rank's reduced slice (Staged)
	Gather        // host-visible: every rank's inputs of the slice (Staged)
	Work          // device-local: a reduced chunk (ZeroCopy without ReduceMulti)
)

// Rank is what the exchange needs of the rank that runs it.
type Rank interface {
	// Stream returns the stream the device work is recorded on.
	Stream() backend.Stream
	// Buffer returns the rank's pooled buffer which (Stage, Gather,
	// Work), grown to at least n bytes.
	Buffer(which, n int) (backend.Buffer, error)
	// CopyIn starts buf[off:] = p (Buffer.Write), CopyOut starts p =
	// buf[off:] (Buffer.Read); CopyWait waits for every copy started.
	CopyIn(buf backend.Buffer, off int, p []byte)
	CopyOut(buf backend.Buffer, off int, p []byte)
	CopyWait() error
	// Submit submits the work recorded; Wait waits for a submission
	// (bounded by ctx and the group's timeout, breaking it on failure).
	Submit() (backend.Fence, error)
	Wait(ctx context.Context, f backend.Fence) error
	// Broken returns the group's error once it broke, else nil (cheap).
	Broken() error
	// Import returns the device's region of host memory p of any rank
	// (ok false, and why when known, where it cannot).
	Import(p []byte) (r backend.Region, ok bool, err error)
}

// Call is one all-reduce of N elements.
type Call struct {
	DT    backend.DType
	Op    backend.Op
	Scale float64 // the final multiplier (a mean's 1/N)
	N     int
	Me    int // the rank that runs the exchange
	// Sends and Recvs are every rank's input and output, indexed by rank.
	Sends, Recvs [][]byte
	// Depth is the chunks the slice is cut into (1: direct; more:
	// pipelined); Host reduces on the CPU, in one chunk, with the
	// kernels' arithmetic.
	Depth int
	Host  bool
	// CPU says the rank's device is the CPU itself (the host backend: its
	// buffers are host memory, its kernels hostmath's), so Staged reduces
	// on the caller as for Host.
	CPU bool
	// Prefix is the prefix reduction of a Scan exchange (0 otherwise).
	Prefix Prefix
}

// slice returns the rank's share [lo, lo+cnt) of the elements.
func (k *Call) slice() (lo, cnt int) {
	n, size := k.N, len(k.Sends)
	lo = n * k.Me / size
	return lo, n*(k.Me+1)/size - lo
}

// Exchange is a rank's state of the exchange, reused across calls.
type Exchange struct {
	fences     []backend.Fence // Staged's chunks in flight
	ins, outs  [][]byte        // the CPU passes' inputs and outputs
	scratch    []byte          // ReduceScatter's copy of its inputs where recv overlaps them
	srcs, dsts []backend.Region
	pair       [2]backend.Region // ScanZeroCopy's two sources
}

// regions returns the exchange's scratch of n source and n destination
// regions.
func (x *Exchange) regions(n int) (srcs, dsts []backend.Region) {
	if cap(x.srcs) < n {
		x.srcs, x.dsts = make([]backend.Region, n), make([]backend.Region, n)
	}
	return x.srcs[:n], x.dsts[:n]
}

// Staged is the exchange through host memory: the rank gathers its slice
// of every rank's input into its host-visible buffer, reduces it with one
// kernel in rank order, and copies the reduced slice into every rank's
// output. With Depth > 1 the slice is cut into chunks: each chunk's kernel
// is submitted without waiting while the next chunk is gathered, and chunk
// d's result is copied out while chunk d+1 runs. The caller handles
// failures.
func (x *Exchange) Staged(ctx context.Context, r Rank, k *Call) error {
	lo, cnt := k.slice()
	if cnt == 0 {
		return nil
	}
	es := k.DT.Size()
	if k.Host || k.CPU {
		if err := r.Broken(); err != nil {
			return err
		}
		if x.cpu(k, lo, cnt) {
			return nil
		}
	}
	stage, err := r.Buffer(Stage, cnt*es)
	if err != nil {
		return err
	}
	// Rank p's inputs go to slot p of the gather buffer; slots and chunk
	// boundaries sit on 16-byte boundaries so kernels can use 16-byte
	// accesses.
	ranks := len(k.Sends)
	stride := (cnt*es + 15) &^ 15
	gather, err := r.Buffer(Gather, ranks*stride)
	if err != nil {
		return err
	}
	depth := max(1, min(k.Depth, cnt))
	if k.Host {
		depth = 1
	}
	if len(x.fences) < depth {
		x.fences = make([]backend.Fence, depth)
	}
	gb := gather.Bytes()
	s := r.Stream()
	srcs, _ := x.regions(ranks)
	for d := 0; d < depth; d++ {
		if err := r.Broken(); err != nil {
			return err
		}
		a, b := chunkBounds(lo, cnt, d, depth)
		m := b - a
		x.fences[d] = nil
		if m > 0 {
			for p, send := range k.Sends {
				r.CopyIn(gather, p*stride+(a-lo)*es, send[a*es:b*es])
			}
			if err := r.CopyWait(); err != nil {
				return err
			}
			if k.Host {
				res := stage.Bytes()[(a-lo)*es : (b-lo)*es]
				hostmath.ReduceStrided(k.DT, k.Op, res, gb, stride/es, a-lo, ranks, m, k.Scale)
				if err := scatter(r, k, stage, lo, a, b); err != nil {
					return err
				}
				continue
			}
			for p := range srcs {
				srcs[p] = backend.Region{Buf: gather, Off: p*stride + (a-lo)*es, Len: m * es}
			}
			dst := backend.Region{Buf: stage, Off: (a - lo) * es, Len: m * es}
			if err := s.Reduce(k.Op, k.DT, dst, srcs, k.Scale); err != nil {
				return err
			}
			f, err := r.Submit()
			if err != nil {
				return err
			}
			x.fences[d] = f
		}
		// Copy out the previous chunk while this one runs (an empty chunk
		// still lets the one before it finish).
		if d > 0 {
			if err := x.finishChunk(ctx, r, k, stage, d-1, depth); err != nil {
				return err
			}
		}
	}
	if !k.Host {
		return x.finishChunk(ctx, r, k, stage, depth-1, depth)
	}
	return nil
}

// cpu is Staged on the CPU without staging, where the ranks' memory
// allows: one pass (hostmath.ReduceMulti) reads the rank's slice of every
// rank's input straight from it, reduces it in rank order with the kernels'
// arithmetic, and stores the result into every rank's output. It reports
// false, having done nothing, where a rank's output partly overlaps another
// output or an input other than its own (a block is stored before the next
// one is read): the staged copy then takes every input first.
func (x *Exchange) cpu(k *Call, lo, cnt int) bool {
	es := k.DT.Size()
	a, b := lo*es, (lo+cnt)*es
	x.ins, x.outs = x.ins[:0], x.outs[:0]
	for p := range k.Sends {
		x.ins = append(x.ins, k.Sends[p][a:b])
		x.outs = append(x.outs, k.Recvs[p][a:b])
	}
	ok := disjointOrSame(x.outs, x.ins)
	if ok {
		hostmath.ReduceMulti(k.DT, k.Op, x.outs, x.ins, cnt, k.Scale)
	}
	clear(x.ins) // hold no reference to the ranks' memory
	clear(x.outs)
	return ok
}

// disjointOrSame reports whether outs are pairwise disjoint and every one
// of ins is exactly one of outs or apart from all of them (multiSafe on
// host memory).
func disjointOrSame(outs, ins [][]byte) bool {
	return safeLayout(outs, ins, memOverlap, func(a, b []byte) bool { return &a[0] == &b[0] && len(a) == len(b) })
}

// memOverlap reports whether non-empty a and b share a byte.
func memOverlap(a, b []byte) bool {
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// finishChunk waits for chunk d's kernel and copies its result into every
// rank's output.
func (x *Exchange) finishChunk(ctx context.Context, r Rank, k *Call, stage backend.Buffer, d, depth int) error {
	lo, cnt := k.slice()
	a, b := chunkBounds(lo, cnt, d, depth)
	if a == b || x.fences[d] == nil {
		return nil
	}
	if err := r.Wait(ctx, x.fences[d]); err != nil {
		return err
	}
	x.fences[d] = nil
	if err := r.Broken(); err != nil {
		return err
	}
	return scatter(r, k, stage, lo, a, b)
}

// chunkBounds returns chunk d of depth chunks of [lo, lo+cnt); inner
// boundaries are multiples of 4 elements from lo (16-byte aligned).
func chunkBounds(lo, cnt, d, depth int) (int, int) {
	a, b := (cnt*d/depth)&^3, (cnt*(d+1)/depth)&^3
	if d == depth-1 {
		b = cnt
	}
	if a > b {
		a = b
	}
	return lo + a, lo + b
}

// scatter copies reduced elements [a, b) (at their place in the stage
// buffer) into every rank's output.
func scatter(r Rank, k *Call, stage backend.Buffer, lo, a, b int) error {
	es := k.DT.Size()
	for _, recv := range k.Recvs {
		r.CopyOut(stage, (a-lo)*es, recv[a*es:b*es])
	}
	return r.CopyWait()
}

// ZeroCopy is the exchange without a single host copy, for host memory
// every rank's device imported (pinned buffers, imported Go slices): the
// rank's kernel reads its slice of every rank's input straight from host
// memory, reduces it in rank order, and the result lands in every rank's
// output (one ReduceMulti pass where the device has it and the regions
// allow, else a reduction into device memory and copies out). The slice is
// cut into Depth chunks, each submitted without waiting; one fence (the
// last: queues are FIFO) covers the batch. The caller handles failures.
func (x *Exchange) ZeroCopy(ctx context.Context, r Rank, k *Call) error {
	lo, cnt := k.slice()
	if cnt == 0 {
		return nil
	}
	es := k.DT.Size()
	depth := max(1, min(k.Depth, cnt))
	s := r.Stream()
	mr, multi := s.(backend.MultiReducer)
	if !multi {
		if _, err := r.Buffer(Work, cnt*es); err != nil {
			return err
		}
	}
	srcs, dsts := x.regions(len(k.Sends))
	var last backend.Fence
	for d := 0; d < depth; d++ {
		a, b := lo+cnt*d/depth, lo+cnt*(d+1)/depth
		if a == b {
			continue
		}
		for p := range srcs {
			var ok bool
			var err error
			if srcs[p], ok, err = r.Import(k.Sends[p][a*es : b*es]); !ok {
				return importFailed(p, err)
			}
			if dsts[p], ok, err = r.Import(k.Recvs[p][a*es : b*es]); !ok {
				return importFailed(p, err)
			}
		}
		if multi && multiSafe(dsts, srcs) {
			// One pass reads every rank's pinned input and writes every
			// rank's pinned output: host-to-device and device-to-host
			// traffic in the same dispatch, both PCIe directions at once.
			if err := mr.ReduceMulti(k.Op, k.DT, dsts, srcs, k.Scale); err != nil {
				return err
			}
		} else {
			work, err := r.Buffer(Work, cnt*es)
			if err != nil {
				return err
			}
			w := backend.Region{Buf: work, Off: (a - lo) * es, Len: (b - a) * es}
			if err := s.Reduce(k.Op, k.DT, w, srcs, k.Scale); err != nil {
				return err
			}
			for _, r := range dsts {
				if err := s.Copy(r, w); err != nil {
					return err
				}
			}
		}
		f, err := r.Submit()
		if err != nil {
			return err
		}
		last = f
	}
	if last != nil {
		return r.Wait(ctx, last)
	}
	return nil
}

// multiSafe reports whether one ReduceMulti may write dsts from srcs: the
// destinations pairwise disjoint, and every source either exactly a
// destination (in place) or apart from all of them. (Within one rank a
// host allocation is imported once, so regions of one memory share a
// Buffer.) Ranks passing overlapping buffers take the staged path instead.
func multiSafe(dsts, srcs []backend.Region) bool {
	return safeLayout(dsts, srcs, overlaps, func(a, b backend.Region) bool { return a == b })
}

// safeLayout reports whether outs are pairwise disjoint and every one of
// ins is exactly one of outs (same) or apart from all of them (multiSafe,
// disjointOrSame).
func safeLayout[R any](outs, ins []R, overlap, same func(a, b R) bool) bool {
	for j, r := range outs {
		for _, o := range outs[:j] {
			if overlap(r, o) {
				return false
			}
		}
	}
	for _, r := range ins {
		for _, o := range outs {
			if overlap(r, o) && !same(r, o) {
				return false
			}
		}
	}
	return true
}

// importFailed is the error of a failed import of rank p's memory during
// a zero-copy exchange (every rank's own import had succeeded).
func importFailed(p int, err error) error {
	if err == nil {
		err = backend.ErrUnsupported
	}
	return fmt.Errorf("importing rank %d's pinned buffer: %w", p, err)
}
