//go:build mpi && cgo

package mpi

/*
#include <mpi.h>
#include <string.h>

typedef struct {
	int code;
	const char *call;
	MPI_Win win;
	void *mine;
} gm_alloc_ret;

// gm_shm_alloc allocates bytes of shared memory on each process of node
// (MPI_Win_allocate_shared, collective and blocking), opens one passive
// epoch on it (MPI_Win_lock_all) and writes every process's segment, as
// mapped here, to bases and sizes (MPI_Win_shared_query).
static gm_alloc_ret gm_shm_alloc(MPI_Comm node, MPI_Aint bytes, int n, void **bases, MPI_Aint *sizes) {
	gm_alloc_ret r;
	memset(&r, 0, sizeof r);
	r.win = MPI_WIN_NULL;
	r.call = "MPI_Win_allocate_shared";
	if ((r.code = MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, node, &r.mine, &r.win)) != MPI_SUCCESS) return r;
	r.call = "MPI_Win_set_errhandler";
	if ((r.code = MPI_Win_set_errhandler(r.win, MPI_ERRORS_RETURN)) != MPI_SUCCESS) return r;
	r.call = "MPI_Win_lock_all";
	if ((r.code = MPI_Win_lock_all(MPI_MODE_NOCHECK, r.win)) != MPI_SUCCESS) return r;
	r.call = "MPI_Win_shared_query";
	for (int q = 0; q < n; q++) {
		int unit = 0;
		if ((r.code = MPI_Win_shared_query(r.win, q, &sizes[q], &unit, &bases[q])) != MPI_SUCCESS) return r;
	}
	r.call = NULL;
	return r;
}
*/
import "C"

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// Inputs that need no copy in. Memory from AllocShared is an MPI-3
// shared-memory allocation over the node's processes, mapped in every one
// of them. Where every process's inputs of an AllReduce, ReduceScatter or
// AllGather through the window lie in such memory, the processes read one
// another's inputs where they lie instead of copying them into the window
// first:
//
//   - AllReduce: process p reduces piece p of every input straight into the
//     window's half; fence; each process copies the result out. Where every
//     process's result lies in such memory too (and moves at least the
//     agreed zcDirectMin), a commit fence, then the processes' workers
//     claim pieces from a counter in the window and reduce each piece of
//     every input straight into that piece of every process's result;
//     fence (zcDirect: n read and n written per process on average, where
//     the window's path reads 2n and writes n + n/P).
//   - ReduceScatter: process p reduces its segment of every input straight
//     into its result (with one rank per process the rank's own, into,
//     else the leader's pooled blocks); fence.
//   - AllGather: each process copies every input into its result; fence.
//
// The processes agree without a fence of their own: with its first chunk,
// each process writes a descriptor of its inputs (the allocation's token
// and the offset, per input) into its area of the half the chunk writes,
// and leaves the copy in out where it offers its inputs. After the chunk's
// fence every process reads every descriptor: all offered, and the call
// goes on without copies in; none did, and it goes on as it began; some
// did, and every process runs the call again from its first chunk, copying
// in (one fence lost). A process offers only inputs whose allocation spans
// every process of the World, so every process can resolve every offer and
// the verdict is the same everywhere.
//
// The last fence of such a call is what keeps a process's inputs from
// being changed while another reads them: every process enters it once
// done reading. Its barrier is held like a native collective's memory
// (nativeFence). Every fence after the agreement is such a fence, since
// the others read this process's inputs until they enter it: a process
// whose context ends posts it all the same (its own part of the phase is
// done), waits for the others past the end up to fenceDrain, and goes on
// to the end of the call, then returns the context's error; the others
// finish the call as if nothing happened. Past fenceDrain it returns, the
// barrier held like a native collective's memory (the group drains a
// failed native call; past its limit the World is lost). So no process
// reads another's inputs after that one's call returned, except where a
// process's context ends while it waits at the agreement's fence and that
// fence completes later (the others then read the first chunk of its
// inputs, and fail at the next fence, which it never posts): the
// agreement does not wait past the context, so that a process that never
// arrives is reported within the timeout. No process writes another's
// result before the commit fence, which such a process never posts.

// descBytes is a process's descriptor area in a half: the count of inputs
// it offers (0: none), its flags (descInPlace, descOut), 16 bytes per
// input (token, offset), and in its last 16 bytes its result's (token,
// offset) where it offers that too.
const descBytes = 256

// maxOffer is the most inputs a process offers in one call.
const maxOffer = descBytes/16 - 2

// The descriptor's flags: the result overlaps an input; the result is
// offered (zcDirect).
const (
	descInPlace = 1
	descOut     = 2
)

// zcMin is the fewest bytes per input a call offers its inputs for: below
// it the fence the offer adds to a reduce-scatter or all-gather costs more
// than the copy in it saves. GOCOLL_MPI_ZC_MIN sets it (bytes, with an
// optional K, M or G suffix); a variable for the tests.
var zcMin = 64 << 10

// zcGatherMin is the fewest bytes per input an all-gather of one chunk
// offers its inputs for: such a call fences once when it copies in, and
// twice without the copy (the agreement and the end). Measured on the
// 16-core host (bench/h100-2026-12-07, ag/), the copy in costs more than
// the fence at every size measured, from 128 KiB per input (1 MiB of 8
// processes): 1 MiB all-gathers of 4 and 8 processes took 134 and 173 us
// with this floor at 64 KiB against 212 and 275 us at 1 MiB (4 MiB of 8
// processes: 554 against 1026 us), so it is zcMin's. A call of several
// chunks offers from zcMin (it saves a fence per chunk).
// GOCOLL_MPI_ZC_GATHER_MIN sets it; a variable for the tests. The window
// uses the least of each floor over its processes (agreed as it opens).
var zcGatherMin = 64 << 10

// zcDirectMin is the fewest bytes per input an all-reduce offers its
// result for, to have the processes' workers write the pieces of the
// result straight into every process's result (zcDirect): it adds a fence
// (the commit) and saves each process reading and writing the whole
// result once more (the copy out of the window). GOCOLL_MPI_ZC_DIRECT_MIN
// sets it; a variable for the tests; agreed as the other floors are.
var zcDirectMin = 1 << 20

// shmZeroCopy counts the calls that read every input where it lies,
// shmDirect those of them that wrote every process's result straight, and
// shmGatherMore the all-gathers among them that wrote the process's other
// ranks' results too.
var shmZeroCopy, shmDirect, shmGatherMore atomic.Int64

// sharedMem is one AllocShared allocation, as this process maps it.
type sharedMem struct {
	token int64
	win   C.MPI_Win
	mine  []byte                 // this process's segment
	base  map[int]unsafe.Pointer // every process's segment, by rank in MPI_COMM_WORLD
	size  map[int]int
}

// spans reports whether every process of ranks (in MPI_COMM_WORLD) maps
// the allocation.
func (a *sharedMem) spans(ranks []int) bool {
	for _, r := range ranks {
		if _, ok := a.base[r]; !ok {
			return false
		}
	}
	return true
}

// shared is the process's allocations, kept until the process ends
// (MPI_Finalize releases them).
var shared struct {
	sync.RWMutex
	list    []*sharedMem
	byToken map[int64]*sharedMem
	next    int64
}

// findShared returns the allocation whose segment here holds all of b (not
// empty), nil if none does. Under shared's read lock.
func findShared(b []byte) *sharedMem {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, a := range shared.list {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(a.mine)))
		if p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(a.mine)) {
			return a
		}
	}
	return nil
}

// allocShared is AllocShared's work in the mpi build: nb bytes of memory
// shared with the World's processes on its node (shared true), or nil,
// false where the World has no window (plain memory then serves).
func (w *World) allocShared(ctx context.Context, nb int) (mem []byte, isShared bool, err error) {
	const call = "MPI_Win_allocate_shared"
	switch {
	case w.closed.Load():
		return nil, false, closedError(call)
	case w.lost.Load():
		return nil, false, lostError(call)
	}
	w.shm.mu.Lock()
	defer w.shm.mu.Unlock()
	s, err := w.openShm(ctx)
	if s == nil {
		return nil, false, err
	}
	if !s.zc {
		return nil, false, nil // agreed: the same on every process
	}
	// A window whose call failed (s.failed, which may differ between the
	// processes) still allocates: the allocation is a window of its own.
	// The token: process 0's next, unique in the job (its rank in
	// MPI_COMM_WORLD in the high half).
	tok := []int64{math.MaxInt64}
	if w.rank == 0 {
		shared.Lock()
		shared.next++
		tok[0] = int64(s.wranks[0])<<32 | shared.next
		shared.Unlock()
	}
	if err := w.agreeMin(ctx, tok); err != nil {
		return nil, false, err
	}
	P := w.size
	arr := cMalloc(16 * P)
	defer cFree(arr)
	bases := unsafe.Slice((*unsafe.Pointer)(arr), P)
	sizes := unsafe.Slice((*C.MPI_Aint)(unsafe.Add(arr, 8*P)), P)
	var res C.gm_alloc_ret
	if !w.cold(false, func() {
		res = C.gm_shm_alloc(s.node, C.MPI_Aint(nb), C.int(P), &bases[0], &sizes[0])
	}) {
		return nil, false, closedError(call)
	}
	ok := []int64{0}
	if res.code == 0 {
		ok[0] = 1
		a := &sharedMem{token: tok[0], win: res.win, base: make(map[int]unsafe.Pointer, P), size: make(map[int]int, P)}
		for q := range P {
			a.base[s.wranks[q]] = bases[q] // MPI's mapping, not Go memory
			a.size[s.wranks[q]] = int(sizes[q])
		}
		if nb > 0 {
			a.mine = unsafe.Slice((*byte)(res.mine), nb)
			clear(a.mine)
		}
		shared.Lock()
		if shared.byToken == nil {
			shared.byToken = map[int64]*sharedMem{}
		}
		shared.list = append(shared.list, a)
		shared.byToken[a.token] = a
		shared.Unlock()
		mem = a.mine
	}
	if err := w.agreeMin(ctx, ok); err != nil {
		return nil, false, err // what was allocated stays registered, never offered
	}
	if ok[0] == 0 {
		if res.code != 0 {
			return nil, false, w.mpiError(C.GoString(res.call), int(res.code), "shared memory of AllocShared")
		}
		return nil, false, &Error{Call: call, Err: backend.ErrTransportLost,
			Msg: "another process of the node could not allocate its part of the shared memory"}
	}
	if mem == nil {
		mem = []byte{}
	}
	return mem, true, nil
}

// zcOffer writes this process's descriptor of srcs (nb bytes each) into
// its area of the half the current phase writes, with inPlace (the result
// overlaps the inputs), and reports whether it offered them (then it
// leaves their copy in out): want (the caller's choice, the same on every
// process), every input lies in one allocation of AllocShared that every
// process of the World maps, and nb is at least the agreed zcMin
// (zcEligible). Otherwise it writes a count of 0: every process writes its
// area in the first chunk of every call that may go without copies, so no
// stale descriptor is read. With the inputs it offers out (the result, ob
// bytes: an all-reduce's nb, a reduce-scatter's segment; nil: none) where
// nb is at least the agreed zcDirectMin, out lies in such an allocation
// too, and it lies at offset ooff of each input (in place: the
// all-reduce's 0, the reduce-scatter's own segment) or overlaps none
// (zcDirect writes it piece by piece, each piece after reading the same
// piece of every input).
func (w *World) zcOffer(s *shmState, srcs [][]byte, nb int, want, inPlace bool, out []byte, ob, ooff int) bool {
	d := s.desc[(s.half*w.size+w.rank)*descBytes:][:descBytes]
	n, flags := 0, 0
	if inPlace {
		flags = descInPlace
	}
	if s.zcEligible(want, len(srcs), nb) {
		shared.RLock()
		for l, src := range srcs {
			a := findShared(src[:nb])
			if a == nil || !a.spans(s.wranks) {
				n = 0
				break
			}
			binary.LittleEndian.PutUint64(d[16+16*l:], uint64(a.token))
			binary.LittleEndian.PutUint64(d[24+16*l:], uint64(a.offset(src)))
			n = l + 1
		}
		if n > 0 && out != nil && nb >= s.zcDMin && len(out) >= ob && directOut(srcs, out[:ob], nb, ooff) {
			if a := findShared(out[:ob]); a != nil && a.spans(s.wranks) {
				binary.LittleEndian.PutUint64(d[descBytes-16:], uint64(a.token))
				binary.LittleEndian.PutUint64(d[descBytes-8:], uint64(a.offset(out)))
				flags |= descOut
			}
		}
		shared.RUnlock()
	}
	binary.LittleEndian.PutUint64(d, uint64(n))
	binary.LittleEndian.PutUint64(d[8:], uint64(flags))
	return n > 0
}

// offset is b's offset in the allocation's segment here (b lies in it).
func (a *sharedMem) offset(b []byte) int {
	return int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(a.mine))))
}

// directOut reports whether out may take zcDirect's pieces: each input
// (nb bytes) holds out at offset ooff or overlaps it nowhere.
func directOut(srcs [][]byte, out []byte, nb, ooff int) bool {
	for _, src := range srcs {
		if overlap(src[:nb], out) && (ooff+len(out) > nb || &src[ooff] != unsafe.SliceData(out)) {
			return false
		}
	}
	return true
}

// zcEligible reports whether a call of L inputs of nb bytes per process
// may read them where they lie (want: the caller's choice, the same on
// every process): the same answer on every process, whose floors are
// agreed (s.zcMin). Where the inputs lie is each process's own.
func (s *shmState) zcEligible(want bool, L, nb int) bool {
	return want && s.zc && nb >= s.zcMin && L <= maxOffer
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// zcVerdict reads every process's descriptor from the half the last fence
// closed: all, every process offered its L inputs of nb bytes (s.zcp then
// holds every input, in global order, as mapped here); some, at least one
// did; inPlace, a process's result overlaps its inputs; direct, all, and
// every process offered its result too (s.zco then holds every process's
// result, ob bytes, in process order). The same answers on every process.
func (w *World) zcVerdict(s *shmState, L, nb, ob int) (all, some, inPlace, direct bool) {
	h := s.half ^ 1
	all, direct = true, true
	zcp, zco := s.zcp[:0], s.zco[:0]
	shared.RLock()
	for p := range w.size {
		d := s.desc[(h*w.size+p)*descBytes:][:descBytes]
		n := int(binary.LittleEndian.Uint64(d))
		some = some || n > 0
		flags := binary.LittleEndian.Uint64(d[8:])
		inPlace = inPlace || flags&descInPlace != 0
		if n != L {
			all = false
		}
		for l := 0; all && l < L; l++ {
			b := s.resolve(p, d[16+16*l:], nb)
			if b == nil {
				all = false // cannot happen where the offer was honest: the same everywhere
				break
			}
			zcp = append(zcp, b)
		}
		if direct = direct && all && flags&descOut != 0; direct {
			if b := s.resolve(p, d[descBytes-16:], ob); b != nil {
				zco = append(zco, b)
			} else {
				direct = false
			}
		}
	}
	shared.RUnlock()
	if !all {
		clear(zcp)
		zcp = zcp[:0]
	}
	if !direct {
		clear(zco)
		zco = zco[:0]
	}
	s.zcp, s.zco = zcp, zco
	return all, some, inPlace, direct
}

// resolve returns the nb bytes that process p's descriptor entry e (token,
// offset) names, as mapped here; nil where no allocation holds them. Under
// shared's read lock.
func (s *shmState) resolve(p int, e []byte, nb int) []byte {
	tok := int64(binary.LittleEndian.Uint64(e))
	off := int(binary.LittleEndian.Uint64(e[8:]))
	a := shared.byToken[tok]
	if a == nil || off < 0 || off > a.size[s.wranks[p]]-nb {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(a.base[s.wranks[p]], off)), nb)
}

// zcEnd ends a call that read the inputs where they lie: it forgets them.
func (s *shmState) zcEnd() {
	clear(s.zcp)
	clear(s.zcs)
	clear(s.zco)
	clear(s.zcd)
	s.zcp, s.zcs, s.zco, s.zcd = s.zcp[:0], s.zcs[:0], s.zco[:0], s.zcd[:0]
	s.into[0], s.held, s.ended = nil, false, nil
}

// zcEnded is the error of a call that read the inputs where they lie and
// went on to its end past its context's end (phase): the context's.
func (s *shmState) zcEnded() error {
	if s.ended == nil {
		return nil
	}
	return &Error{Call: "MPI_Ibarrier", Err: s.ended, ended: true,
		Msg: "the context ended while the other processes read this process's inputs where they lie; the call went on until they were done"}
}

// zcAllreduce is an all-reduce (n elements per input) of the inputs in
// s.zcp into dst, once the processes agreed: per chunk of a half's
// elements, process p reduces piece p of every input into the half; fence;
// each copies the chunk out.
func (w *World) zcAllreduce(ctx context.Context, s *shmState, dst []byte, n int, dt backend.DType, op backend.Op, scale float64) error {
	defer s.zcEnd()
	s.held = true
	es := dt.Size()
	P := w.size
	C := P * s.slot / es
	for k, lo := 0, 0; lo < n; k, lo = k+1, lo+C {
		c := min(C, n-lo)
		out := s.buf(P, s.half)
		pc := (c + P - 1) / P
		a, b := min(w.rank*pc, c), min((w.rank+1)*pc, c)
		if a < b {
			srcs := s.zcs[:0]
			for _, in := range s.zcp {
				srcs = append(srcs, in[(lo+a)*es:(lo+b)*es])
			}
			s.zcs, s.into[0] = srcs, out[a*es:b*es]
			t := time.Now()
			hostmath.ReduceMulti(dt, op, s.into[:], srcs, b-a, scale)
			shmWorkNs.Add(int64(time.Since(t)))
		}
		if shmChunkHook != nil {
			shmChunkHook(ctx, w, -2)
		}
		if err := w.phase(ctx, s); err != nil {
			return err
		}
		hostmath.Copy(dst[lo*es:(lo+c)*es], out[:c*es])
		if shmChunkHook != nil {
			shmChunkHook(ctx, w, k)
		}
	}
	shmZeroCopy.Add(1)
	s.done()
	return s.zcEnded()
}

// zcDirect ends an all-reduce (n elements per input; seg 0), or a
// reduce-scatter (segments of seg elements, segment q process q's), once
// every process offered its inputs and its result (zcVerdict's direct): a
// fence first, the commit (held, as every fence after the agreement: from
// here on the other processes write this process's result); then the
// processes' pool workers claim pieces of directPieceBytes per input
// (within one segment) from one counter in the window (s.claim) until none
// are left, and reduce each piece of every input straight into that piece
// of every process's result (all-reduce) or of its segment's process's
// (hostmath.ReduceRange: the inputs in global order, the one-process
// arithmetic whoever computes a piece; a result that is an input is read a
// block at a time before that block is written, and only the worker that
// claimed a piece touches it in any buffer); fence. Each process reads n
// and writes n bytes on average (a reduce-scatter: n read, n/P written),
// where zcAllreduce's pieces read n, write n/P into the window and copy n
// out (reading and writing n again); a process slower than the others (its
// cores busier, its memory further) claims fewer pieces, where a fixed
// piece per process had the others wait for it at the last fence (a
// quarter of the call with 8 processes at 16-64 MiB, bench/h100-2026-12-07e).
//
// The commit keeps the others from writing into the result of a process
// that left the call at the agreement's fence (its context ended there,
// and the fence completed after): it never posts the commit, so no process
// passes it, and they fail there past fenceDrain as at any held fence.
func (w *World) zcDirect(ctx context.Context, s *shmState, n, seg int, dt backend.DType, op backend.Op, scale float64) error {
	defer s.zcEnd()
	s.held = true
	// Every process reads the same count here: the last call's claims
	// ended before its last fence, and this call's start after the commit.
	base := s.claim.Load()
	if shmChunkHook != nil {
		shmChunkHook(ctx, w, -2)
	}
	if err := w.phase(ctx, s); err != nil {
		return err
	}
	es := dt.Size()
	line := max(1, 64/es)
	pc := max(directPieceBytes/es/line, 1) * line // whole cache lines: where the results are aligned, no two workers write one
	j := &s.direct
	// An all-reduce is one segment of n elements that every result takes.
	j.every = seg == 0
	if j.every {
		seg = n
	}
	j.s, j.dt, j.op, j.sc, j.base, j.seg, j.pc = s, dt, op, hostmath.NewScale(scale), base, seg, pc
	j.segs, j.per = len(s.zcp), (seg+pc-1)/pc
	j.pieces = n / seg * j.per
	// Segment q's slices of every input, for the workers to read.
	srcs := s.zcs[:0]
	for q := range n / seg {
		for _, in := range s.zcp {
			srcs = append(srcs, in[q*seg*es:(q+1)*seg*es])
		}
	}
	s.zcs = srcs
	// A claiming loop per worker the process may take, but at least 4
	// pieces per loop in all: a call of a few pieces per process (1 MiB:
	// 16) runs on its callers alone, as the fixed pieces did, instead of
	// waking helpers for a piece or two each (1 MiB of 4 processes took
	// 175 us against 150 with 2 loops per process).
	loops := min(copyWorkers(), max(1, j.pieces/(4*w.size)))
	t := time.Now()
	j.job.Run(&parreduce.Reduce, j, loops, 1)
	shmWorkNs.Add(int64(time.Since(t)))
	j.s = nil
	shmDirect.Add(1)
	return w.zcFinish(ctx, s)
}

// directPieceBytes is the bytes per input of a piece the direct path's
// workers claim: a few dozen per worker at 16 MiB on 16 cores, each
// claim one atomic add on the window's counter. A variable for the tests
// (the same on every process).
var directPieceBytes = 64 << 10

// directJob is zcDirect's work on the process's pool: each of its chunks
// (one per worker the process may take) claims pieces until none are left.
type directJob struct {
	job    parreduce.Job
	s      *shmState
	dt     backend.DType
	op     backend.Op
	sc     hostmath.Scale
	base   int64
	pc     int  // elements per piece
	pieces int  // in all
	seg    int  // elements per segment (an all-reduce: one, of every element)
	per    int  // pieces per segment
	segs   int  // inputs: segment q's slices are s.zcs[q*segs:(q+1)*segs]
	every  bool // an all-reduce: every process's result takes every piece
}

// Range claims pieces of the call and reduces each (its bounds unused: one
// claiming loop per chunk of the process's job).
func (j *directJob) Range(_, _ int) {
	s := j.s
	for {
		i := int(s.claim.Add(1) - 1 - j.base)
		if i >= j.pieces {
			return
		}
		q, k := i/j.per, i%j.per
		lo, hi := k*j.pc, min((k+1)*j.pc, j.seg)
		dsts := s.zco[q : q+1] // segment q's process's result
		if j.every {
			dsts = s.zco
		}
		hostmath.ReduceRange(j.dt, j.op, dsts[0], dsts[1:], s.zcs[q*j.segs:(q+1)*j.segs], lo, hi, j.sc)
	}
}

// zcReduce ends an all-reduce of 2 processes whose results overlap no
// input, or a reduce-scatter, once the processes agreed: this process
// reduces elements [off, off+cnt) of every input in s.zcp straight into
// dst; fence. For the pair (off 0, every element: 2n bytes read and n
// written, where the pieces read n, write n/2 into the window, then copy
// n out) every element reduces the same inputs in the same order on both:
// the same bits. For the reduce-scatter, off is this process's segment.
func (w *World) zcReduce(ctx context.Context, s *shmState, dst []byte, off, cnt int, dt backend.DType, op backend.Op, scale float64) error {
	defer s.zcEnd()
	s.held = true
	es := dt.Size()
	srcs := s.zcs[:0]
	for _, in := range s.zcp {
		srcs = append(srcs, in[off*es:(off+cnt)*es])
	}
	s.zcs, s.into[0] = srcs, dst[:cnt*es]
	t := time.Now()
	hostmath.ReduceMulti(dt, op, s.into[:], srcs, cnt, scale)
	shmWorkNs.Add(int64(time.Since(t)))
	return w.zcFinish(ctx, s)
}

// zcAllgather is an all-gather (mb bytes per input) of the inputs in s.zcp
// into dst and each of more (the process's other ranks' results), once
// the processes agreed: each process copies every input into dst and more
// (one parallel pass reading each input once; a block that is its own
// input left where in place); fence.
func (w *World) zcAllgather(ctx context.Context, s *shmState, dst []byte, more [][]byte, mb int) error {
	defer s.zcEnd()
	s.held = true
	nb := len(s.zcp) * mb
	into := s.zcd[:0]
	for _, m := range more {
		into = append(into, m[:nb])
	}
	s.zcd = into
	t := time.Now()
	hostmath.CopyGatherMore(dst[:nb], into, s.zcp, mb)
	shmWorkNs.Add(int64(time.Since(t)))
	if len(more) > 0 {
		shmGatherMore.Add(1)
	}
	return w.zcFinish(ctx, s)
}

// zcFinish ends a reduce-scatter or all-gather that read the inputs where
// they lie: the fence every process enters once done reading them.
func (w *World) zcFinish(ctx context.Context, s *shmState) error {
	if shmChunkHook != nil {
		shmChunkHook(ctx, w, -2)
	}
	if err := w.phase(ctx, s); err != nil {
		return err
	}
	if shmChunkHook != nil {
		shmChunkHook(ctx, w, 0)
	}
	shmZeroCopy.Add(1)
	s.done()
	return s.zcEnded()
}
