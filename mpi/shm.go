//go:build mpi && cgo

package mpi

/*
#include <mpi.h>
#include <string.h>

static MPI_Win gm_win_null(void) { return MPI_WIN_NULL; }

typedef struct {
	int code;
	const char *call;
	MPI_Comm node;
	MPI_Win win;
	void *base;     // process 0's segment, the others' following it; NULL if not contiguous
	int size;       // processes of the node
} gm_shm_ret;

// gm_shm_open splits comm by node (MPI_Comm_split_type, ranked as in comm)
// and, where the node holds all csize processes of comm, allocates a
// shared window of seg bytes per process (ctrl more on the last one)
// (MPI_Win_allocate_shared), opens one passive epoch on all of it
// (MPI_Win_lock_all) and checks that the processes' segments follow each
// other (MPI_Win_shared_query). Blocking, and collective over comm.
static gm_shm_ret gm_shm_open(MPI_Comm comm, int rank, int csize, MPI_Aint seg, MPI_Aint ctrl) {
	gm_shm_ret r;
	memset(&r, 0, sizeof r);
	r.node = MPI_COMM_NULL;
	r.win = MPI_WIN_NULL;
	r.call = "MPI_Comm_split_type";
	if ((r.code = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &r.node)) != MPI_SUCCESS) return r;
	r.call = "MPI_Comm_set_errhandler";
	if ((r.code = MPI_Comm_set_errhandler(r.node, MPI_ERRORS_RETURN)) != MPI_SUCCESS) return r;
	r.call = "MPI_Comm_size";
	if ((r.code = MPI_Comm_size(r.node, &r.size)) != MPI_SUCCESS) return r;
	r.call = NULL;
	if (r.size != csize) return r;
	int last = rank == csize - 1;
	void *mine = NULL;
	r.call = "MPI_Win_allocate_shared";
	if ((r.code = MPI_Win_allocate_shared(seg + (last ? ctrl : 0), 1, MPI_INFO_NULL, r.node, &mine, &r.win)) != MPI_SUCCESS) return r;
	r.call = "MPI_Win_set_errhandler";
	if ((r.code = MPI_Win_set_errhandler(r.win, MPI_ERRORS_RETURN)) != MPI_SUCCESS) return r;
	r.call = "MPI_Win_lock_all";
	if ((r.code = MPI_Win_lock_all(MPI_MODE_NOCHECK, r.win)) != MPI_SUCCESS) return r;
	r.call = "MPI_Win_shared_query";
	for (int q = 0; q < csize; q++) {
		MPI_Aint size = 0;
		int unit = 0;
		void *b = NULL;
		if ((r.code = MPI_Win_shared_query(r.win, q, &size, &unit, &b)) != MPI_SUCCESS) return r;
		if (q == 0) r.base = b;
		if (size < seg || (char *)b != (char *)r.base + (MPI_Aint)q * seg) {
			r.base = NULL;
			break;
		}
	}
	r.call = NULL;
	return r;
}

static int gm_win_sync(MPI_Win win) { return MPI_Win_sync(win); }

typedef struct {
	int code;
	int old;
} gm_atomic_ret;

// gm_shm_atomic is MPI_Fetch_and_op (op 0: MPI_SUM of add; op 1:
// MPI_NO_OP, a read) or, for op 2, MPI_Compare_and_swap of compare with
// add, on the int at disp in target's segment, completed by MPI_Win_flush.
static gm_atomic_ret gm_shm_atomic(MPI_Win win, int target, MPI_Aint disp, int op, int add, int compare) {
	gm_atomic_ret r = {0, 0};
	switch (op) {
	case 0: r.code = MPI_Fetch_and_op(&add, &r.old, MPI_INT, target, disp, MPI_SUM, win); break;
	case 1: r.code = MPI_Fetch_and_op(&add, &r.old, MPI_INT, target, disp, MPI_NO_OP, win); break;
	default: r.code = MPI_Compare_and_swap(&add, &compare, &r.old, MPI_INT, target, disp, win); break;
	}
	if (r.code == MPI_SUCCESS) r.code = MPI_Win_flush(target, win);
	return r;
}

// gm_shm_free ends the epoch and frees the window (MPI_Win_free: collective
// and blocking) and the node's communicator.
static int gm_shm_free(MPI_Win win, MPI_Comm node) {
	int code = MPI_Win_unlock_all(win);
	int code2 = MPI_Win_free(&win);
	int code3 = MPI_Comm_free(&node);
	return code != MPI_SUCCESS ? code : code2 != MPI_SUCCESS ? code2 : code3;
}
*/
import "C"

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
	"github.com/gocoll/gocoll/internal/native"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// The shared-memory collectives. Where every process of a World runs on
// one node (its MPI_COMM_TYPE_SHARED split holds them all), strategy
// Native's AllReduce, ReduceScatter, AllGather, Reduce and Broadcast go
// through an MPI-3 shared-memory window instead of MPI's collectives: each
// process's inputs are copied into the window and reduced on the CPU with
// hostmath's arithmetic, in process order, at memory speed.
//
// The window is the World's, allocated on its first call with data
// (MPI_Win_allocate_shared over the node's communicator: 2 slots of
// GOCOLL_MPI_SHM_SLOT bytes, 4 MiB by default, per process), kept in one
// passive epoch (MPI_Win_lock_all) until the World closes. Its segments
// follow each other, so every process sees the whole window as one array
// of two halves of P slots. A call goes in chunks, and a chunk in phases;
// in each phase every process writes into one half, then a fence
// (MPI_Win_sync, MPI_Ibarrier polled under ctx like every collective of
// the World: a process that never comes makes the others fail with
// ErrTimeout naming it; MPI_Win_sync), then every process reads that
// half. The halves alternate phase by phase, across calls too (shmState's
// half, the same on every process): a half is written again only two
// phases later, after a fence every process entered once done reading it.
// Nothing else synchronises the window: no flag is polled.
//
//   - AllReduce, C elements per input per chunk (the half over the N inputs
//     of all processes): each process copies its inputs' chunk into the
//     half (input r, in global order, at r*C); fence; process p reduces
//     piece p of the chunk (ceil(C/P) elements) over the N inputs in order
//     (hostmath.ReduceStrided: the one-process deterministic arithmetic)
//     into the other half; fence; each process copies the chunk out (a
//     Reduce: the root's process only).
//   - ReduceScatter, C elements per segment per input (a slot over the N
//     inputs): each process copies its inputs' chunk of every process's
//     segment into the half (segment q's inputs together); fence; process
//     p reduces its segment's N inputs in order.
//   - AllGather, C bytes per input (the half over the N inputs, a multiple
//     of 8): each process copies its inputs' chunk into the half; fence;
//     each process copies every input's chunk out.
//   - Broadcast, C bytes (a half): the root's process copies the chunk
//     into the half; fence; the others copy it out.
//
// Each chunk's result goes straight into the caller's memory after its
// fence, written once: a call that fails after its first chunk may have
// written part of the result (in place: of the input). The group reports
// that (a failed native call's leader gets a *collective.DataError with
// Touched), and the process's other ranks copy from the leader only after
// it succeeded, so their memory stays untouched. A call that fails
// mid-way (its context ended, a process never came) leaves the processes
// at different fences and halves: the window is marked failed, and later
// calls through it fail at once (the group broke with the first failure);
// Close frees it as usual.
//
// Whether the window is used is agreed by every process of the World when
// it is allocated (an MPI_Iallreduce of each process's setting, then of its
// success), so the processes always take the same path; a World whose
// processes span nodes, or with GOCOLL_MPI_SHM=0 on any process, runs
// MPI's collectives instead. So does one below MPI_THREAD_MULTIPLE: the
// allocation is blocking (MPI_Comm_split_type, MPI_Win_allocate_shared), and
// where the process's MPI calls are funneled or serialized it would hold
// them all, so that two Worlds allocating at once in opposite orders on two
// processes (the sub-groups of a Split) would wait for each other for ever.

// Settings: GOCOLL_MPI_SHM=0 (or off, false) turns the window off, =always
// runs every collective it has through it (shmAlways: the tests do);
// GOCOLL_MPI_SHM_SLOT sizes its slots (bytes, with an optional K, M or G
// suffix). Read once; the tests change them before a World's first use.
var (
	shmOn      atomic.Bool
	shmAlways  atomic.Bool
	shmSlot    atomic.Int64
	shmSlotErr error // a GOCOLL_MPI_SHM_SLOT, _PIECE or GOCOLL_MPI_ZC_[GATHER_|DIRECT_]MIN that does not parse
)

// defaultShmSlot is the slot size without GOCOLL_MPI_SHM_SLOT.
const defaultShmSlot = 4 << 20

// shmPiece is the bytes each worker of a parallel copy into the window
// moves at a time: GOCOLL_MPI_SHM_PIECE (bytes, with an optional K, M or G
// suffix; default 512 KiB, Copy's). Pieces of 1 MiB or more make each
// worker's memmove use non-temporal stores, so the window's lines are not
// left in the writer's cache for the other processes to fetch from there:
// an experiment for the 16-core host.
var shmPiece = 2 * parreduce.ChunkBytes

// copyIn copies src into the window at dst (hostmath.CopyPieces).
func copyIn(dst, src []byte) { hostmath.CopyPieces(dst, src, shmPiece) }

// shmStats counts the calls each process completed through a window
// (shmCalls) and the fences they made (shmFences): the tests read them.
// GOCOLL_MPI_STATS prints them with the completed calls' time (shmCallNs),
// the time in the fences that passed (shmFenceNs) and the time the calls
// that read the inputs where they lie spent reducing or copying them
// (shmWorkNs).
var shmCalls, shmFences, shmCallNs, shmFenceNs, shmWorkNs atomic.Int64

func init() {
	native.RegisterNode(&theNode)
	switch strings.ToLower(os.Getenv("GOCOLL_MPI_SHM")) {
	case "0", "off", "false", "no":
	case "always":
		shmOn.Store(true)
		shmAlways.Store(true)
	default:
		shmOn.Store(true)
	}
	slot, err := parseBytes(os.Getenv("GOCOLL_MPI_SHM_SLOT"), defaultShmSlot)
	if err != nil {
		shmSlotErr = &Error{Call: "MPI_Win_allocate_shared", Err: backend.ErrInvalidArgument, Msg: "GOCOLL_MPI_SHM_SLOT: " + err.Error()}
	}
	shmSlot.Store(slot)
	// The copy pieces, and the floors of inputs read where they lie
	// (shmzc.go; a window uses the least of each over its processes,
	// agreed as it opens): experiments for the 16-core host. A value that
	// does not parse fails the window's calls, as a bad slot does.
	for _, f := range []struct {
		env string
		v   *int
	}{{"GOCOLL_MPI_SHM_PIECE", &shmPiece}, {"GOCOLL_MPI_ZC_MIN", &zcMin}, {"GOCOLL_MPI_ZC_GATHER_MIN", &zcGatherMin},
		{"GOCOLL_MPI_ZC_DIRECT_MIN", &zcDirectMin}} {
		v, err := parseBytes(os.Getenv(f.env), int64(*f.v))
		if err != nil && shmSlotErr == nil {
			shmSlotErr = &Error{Call: "MPI_Win_allocate_shared", Err: backend.ErrInvalidArgument, Msg: f.env + ": " + err.Error()}
		}
		*f.v = int(v)
	}
}

// parseBytes reads a size in bytes with an optional K, M or G suffix
// (powers of 1024); "" is def.
func parseBytes(s string, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	mul := int64(1)
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mul = 1 << 10
	case "M":
		mul = 1 << 20
	case "G":
		mul = 1 << 30
	}
	if mul > 1 {
		s = s[:len(s)-1]
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v > (1<<40)/mul {
		return def, fmt.Errorf("%q: want a positive number of bytes, optionally with K, M or G", s)
	}
	return v * mul, nil
}

// shmCtrl is the bytes after the last process's slots: the word of Close's
// agreement (leaveShm, freeShm), and a cache line further the counter of
// the pieces the direct all-reduce's workers claim (zcDirect).
const shmCtrl = 128

// shmState is a World's window.
type shmState struct {
	mu    sync.Mutex // held by the call in progress; Close frees the window only when it takes it
	state int8       // 0: not tried yet; 1: open; -1: not used
	node  cComm
	win   C.MPI_Win
	mem   []byte // the two halves: 2*P*slot bytes
	slot  int
	count int // Close's count once this process counted itself in (leaveShm), 0 before

	workers int // the fewest goroutines a process's copies take (agreed; see mpiBetter)

	// Inputs read where they lie (shmzc.go).
	zc     bool // every process knows its processes' ranks in MPI_COMM_WORLD (agreed)
	zcMin  int  // zcMin, zcGatherMin and zcDirectMin, the least over the processes (agreed)
	zcGMin int
	zcDMin int
	wranks []int         // each process's rank in MPI_COMM_WORLD
	desc   []byte        // the descriptor areas: 2 halves of P areas of descBytes
	zcp    [][]byte      // the call's inputs, every process's, as mapped here
	zcs    [][]byte      // pieces of zcp
	zco    [][]byte      // every process's result, as mapped here (zcDirect)
	zcd    [][]byte      // the other local ranks' results an all-gather writes (zcAllgather)
	claim  *atomic.Int64 // the direct path's count of claimed pieces, in the window (all processes')
	direct directJob     // zcDirect's work
	into   [1][]byte     // a reduction's destination
	one    [1][]byte     // a call's combined input (copyInputs)
	held   bool          // the fences hold the call's inputs (nativeFence)
	ended  error         // the context's error, where it ended during held fences the call went on through

	half   int       // the half the next phase writes (the same on every process)
	failed bool      // a call failed mid-way: the processes' halves and fences no longer agree
	began  time.Time // when the call in progress began (GOCOLL_MPI_STATS' call time)
}

// theNode is the World's native.Node: its collectives through the window.
var theNode = native.Node{
	Allreduce: func(ctx context.Context, nc backend.NativeCollectives, srcs [][]byte, comb native.Combiner, dst []byte, n int,
		dt backend.DType, op backend.Op, scale float64) (bool, error) {
		if w, ok := nc.(*World); ok {
			return w.shmAllreduce(ctx, srcs, comb, dst, n, dt, op, scale)
		}
		return false, nil
	},
	Reduce: func(ctx context.Context, nc backend.NativeCollectives, srcs [][]byte, dst []byte, n int,
		dt backend.DType, op backend.Op, scale float64, root int) (bool, error) {
		if w, ok := nc.(*World); ok {
			return w.shmReduce(ctx, srcs, nil, dst, n, dt, op, scale, root)
		}
		return false, nil
	},
	Bcast: func(ctx context.Context, nc backend.NativeCollectives, buf []byte, root int) (bool, error) {
		if w, ok := nc.(*World); ok {
			return w.shmBcast(ctx, buf, root)
		}
		return false, nil
	},
	ReduceScatter: func(ctx context.Context, nc backend.NativeCollectives, srcs [][]byte, comb native.Combiner, dst, into []byte, seg int,
		dt backend.DType, op backend.Op, scale float64) (bool, bool, error) {
		if w, ok := nc.(*World); ok {
			return w.shmReduceScatterInto(ctx, srcs, comb, dst, into, seg, dt, op, scale)
		}
		return false, false, nil
	},
	Allgather: func(ctx context.Context, nc backend.NativeCollectives, srcs [][]byte, dst []byte, more [][]byte, mb int, keep bool) ([]byte, int, bool, bool, error) {
		if w, ok := nc.(*World); ok {
			return w.shmAllgatherMore(ctx, srcs, dst, more, mb, keep)
		}
		return nil, 0, false, false, nil
	},
}

// shmChunkHook, when set (by tests), runs as a call through the window
// begins (chunk -1), after each of its chunks (chunk: its index in the
// call), and before each fence of a call that reads its inputs where they
// lie (chunk -2, shmzc.go).
var shmChunkHook func(ctx context.Context, w *World, chunk int)

// shmBegin locks the window for one call and returns it, allocating it on
// first use; nil (and ran false where err is nil) where it is not used.
// The caller unlocks s.mu once s is not nil; where it is nil, shmBegin
// did. The test hook (shmChunkHook) sees the call begin here.
func (w *World) shmBegin(ctx context.Context) (*shmState, error) {
	w.shm.mu.Lock()
	s, err := w.openShm(ctx)
	if s == nil {
		w.shm.mu.Unlock()
		return nil, err
	}
	if s.failed {
		w.shm.mu.Unlock()
		return nil, &Error{Call: "MPI_Win_sync", Err: backend.ErrTransportLost,
			Msg: "an earlier call through the shared-memory window failed on this process, so its processes no longer agree on the window's state"}
	}
	if shmChunkHook != nil {
		shmChunkHook(ctx, w, -1)
	}
	s.began = time.Now()
	return s, nil
}

// done counts a call that completed through the window, and its time.
func (s *shmState) done() {
	shmCalls.Add(1)
	shmCallNs.Add(int64(time.Since(s.began)))
}

// buf returns half i of the window (its halves alternate, phase by phase).
func (s *shmState) buf(P, i int) []byte { return s.mem[i*P*s.slot : (i+1)*P*s.slot] }

// phase runs the fence of one phase of a call (its writes to the current
// half done) and flips the half the next phase writes; a failure marks
// the window failed (the processes' halves and fences no longer agree).
//
// A fence that holds the inputs (s.held: the other processes read this
// process's inputs where they lie) is posted even when ctx has ended: this
// process's part of the phase is done, and the others read its inputs
// until they enter it. Its wait goes on past ctx's end, up to fenceDrain
// (shmFence); a fence that completes so records ctx's error in s.ended
// and the call goes on to its end (zcEnded), so that no process reads this
// one's inputs after its call returned.
func (w *World) phase(ctx context.Context, s *shmState) error {
	if err := ctx.Err(); err != nil && !s.held {
		// Not posted: the other processes wait for this one at this fence.
		s.failed = true
		return &Error{Call: "MPI_Ibarrier", Err: err, Msg: "the shared-memory window's fence was not posted: the context ended"}
	}
	t := time.Now()
	if err := w.shmFence(ctx); err != nil {
		s.failed = true
		return err
	}
	shmFenceNs.Add(int64(time.Since(t)))
	if err := ctx.Err(); err != nil && s.held && s.ended == nil {
		s.ended = err
	}
	s.half ^= 1
	return nil
}

// shmAllreduce reduces every process's srcs (n elements each; the same
// count of inputs on every process) in global order into dst, scaled by
// scale, through the World's window; ran false where the window is not
// used (the same answer on every process). With comb (not nil) the
// process's inputs go through the window as comb's one combined input,
// unless every process's srcs are read where they lie.
func (w *World) shmAllreduce(ctx context.Context, srcs [][]byte, comb native.Combiner, dst []byte, n int, dt backend.DType, op backend.Op, scale float64) (ran bool, err error) {
	return w.shmReduce(ctx, srcs, comb, dst, n, dt, op, scale, -1)
}

// copyInputs returns the inputs a call copies into the window: srcs, or
// with comb their combination (made on first use, held in s.one).
func (s *shmState) copyInputs(srcs [][]byte, comb native.Combiner) [][]byte {
	if comb == nil {
		return srcs
	}
	if s.one[0] == nil {
		s.one[0] = comb.Combined()
	}
	return s.one[:]
}

// shmReduce is shmAllreduce (root < 0) or a reduce to process root: the
// same phases, and only root copies the result out (dst is nil
// elsewhere).
func (w *World) shmReduce(ctx context.Context, srcs [][]byte, comb native.Combiner, dst []byte, n int, dt backend.DType, op backend.Op, scale float64, root int) (ran bool, err error) {
	if n == 0 {
		return true, nil
	}
	s, err := w.shmBegin(ctx)
	if s == nil {
		return err != nil, err
	}
	defer s.mu.Unlock()
	defer func() { s.one[0] = nil }()
	es := dt.Size()
	P, L := w.size, len(srcs)
	if comb != nil {
		L = 1 // the combination goes through the window
	}
	C := P * s.slot / (P * L * es) // elements per input per chunk
	// MPI's own all-reduce beats the window's copies (mpiBetter) but not
	// a window that reads every input where it lies: probe offers, and
	// the call leaves for MPI unless every process offered.
	probe := root < 0 && s.mpiBetter(P)
	if C == 0 || probe && !s.zcEligible(true, len(srcs), n*es) {
		return false, nil
	}
	mine := root < 0 || root == w.rank // this process takes the result
	offer := root < 0                  // an all-reduce may read its inputs where they lie
	for k, lo := 0, 0; lo < n; k, lo = k+1, lo+C {
		c := min(C, n-lo)
		in := s.buf(P, s.half)
		if (k > 0 || !offer || !w.zcOffer(s, srcs, n*es, true, inPlace(srcs, dst), dst, n*es, 0)) && !probe {
			for l, src := range s.copyInputs(srcs, comb) {
				copyIn(in[(w.rank*L+l)*C*es:], src[lo*es:(lo+c)*es])
			}
		}
		if err := w.phase(ctx, s); err != nil {
			return true, err
		}
		if k == 0 && offer {
			offer = false
			switch all, some, inPlace, direct := w.zcVerdict(s, len(srcs), n*es, n*es); {
			case direct:
				return true, w.zcDirect(ctx, s, n, 0, dt, op, scale)
			case all && P == 2 && len(srcs) == 1 && !inPlace:
				// Each reads 2n and writes n, where the pieces read n,
				// write n/2 and copy n out (with more inputs per process
				// the pieces read less: they stay).
				return true, w.zcReduce(ctx, s, dst, 0, n, dt, op, scale)
			case all:
				return true, w.zcAllreduce(ctx, s, dst, n, dt, op, scale)
			case probe:
				return false, nil // the same verdict everywhere: MPI's own, nothing written
			case some:
				k, lo = -1, -C // again from the first chunk, copying in
				continue
			}
		}
		if P == 2 {
			// Two processes: each reduces the whole chunk straight into its
			// result, after this one fence (it reads 2 inputs and writes
			// the result once, where a piece each, a second fence and the
			// copy out read 3 and write 1.5). Every element reduces the
			// same inputs in the same order: the same bits.
			if mine {
				hostmath.ReduceStrided(dt, op, dst[lo*es:(lo+c)*es], in, C, 0, P*L, c, scale)
			}
			if shmChunkHook != nil {
				shmChunkHook(ctx, w, k)
			}
			continue
		}
		out := s.buf(P, s.half)
		pc := (c + P - 1) / P
		a, b := min(w.rank*pc, c), min((w.rank+1)*pc, c)
		if a < b {
			hostmath.ReduceStrided(dt, op, out[a*es:b*es], in, C, a, P*L, b-a, scale)
		}
		if err := w.phase(ctx, s); err != nil {
			return true, err
		}
		if mine {
			hostmath.Copy(dst[lo*es:(lo+c)*es], out[:c*es])
		}
		if shmChunkHook != nil {
			shmChunkHook(ctx, w, k)
		}
	}
	s.done()
	return true, nil
}

// inPlace reports whether dst overlaps one of srcs.
func inPlace(srcs [][]byte, dst []byte) bool {
	for _, src := range srcs {
		if overlap(src, dst) {
			return true
		}
	}
	return false
}

// shmBcast copies buf of process root into buf of every other process
// through the World's window; ran false where the window is not used. A
// chunk of C bytes (a half) goes in one phase: root copies it into the
// current half, fence, the others copy it out.
func (w *World) shmBcast(ctx context.Context, buf []byte, root int) (ran bool, err error) {
	nb := len(buf)
	if nb == 0 {
		return true, nil
	}
	s, err := w.shmBegin(ctx)
	if s == nil {
		return err != nil, err
	}
	defer s.mu.Unlock()
	P := w.size
	C := P * s.slot
	mine := w.rank == root
	for k, lo := 0, 0; lo < nb; k, lo = k+1, lo+C {
		c := min(C, nb-lo)
		h := s.buf(P, s.half)
		if mine {
			copyIn(h, buf[lo:lo+c])
		}
		if err := w.phase(ctx, s); err != nil {
			return true, err
		}
		if !mine {
			hostmath.Copy(buf[lo:], h[:c])
		}
		if shmChunkHook != nil {
			shmChunkHook(ctx, w, k)
		}
	}
	s.done()
	return true, nil
}

// claimRSFloor is the reduce-scatter's floor for claimed pieces, in units
// of the agreed direct floor (zcDirectMin), on the call's whole input. A
// variable for the tests (the same on every process).
var claimRSFloor = 16

// shmReduceScatterInto reduces segment p of every process's srcs (P
// segments of seg elements each) in global order into dst (seg elements)
// on process p, scaled by scale, through the World's window; ran false
// where the window is not used. A chunk of C elements per segment and
// input goes in one phase: each process copies its inputs' chunk of every
// segment into the current half (segment q's inputs together, input r in
// global order at (q·inputs+r)·C), fence, process p reduces its segment's
// inputs. into (not nil: the process's one rank's result, seg elements)
// takes the result instead of dst when the call reads every input where
// it lies (wrote): the result is written once, straight where the caller
// wants it, by this process (zcReduce) or, where every process's into lies
// in shared memory too (from 4 processes and claimRSFloor), by whichever
// process's workers claim its pieces (zcDirect). into may be this
// process's segment of its input (in place): only that segment's result is
// written there, each piece after it was read, by the worker that claimed
// it.
func (w *World) shmReduceScatterInto(ctx context.Context, srcs [][]byte, comb native.Combiner, dst, into []byte, seg int, dt backend.DType, op backend.Op, scale float64) (wrote, ran bool, err error) {
	if seg == 0 {
		return false, true, nil
	}
	s, err := w.shmBegin(ctx)
	if s == nil {
		return false, err != nil, err
	}
	defer s.mu.Unlock()
	defer func() { s.one[0] = nil }()
	es := dt.Size()
	P, L := w.size, len(srcs)
	if comb != nil {
		L = 1 // the combination goes through the window
	}
	N := P * L
	C := s.slot / (N * es) // elements per segment per input per chunk
	if C == 0 {
		return false, false, nil
	}
	out := dst[:seg*es]
	claim := into // offered for every process's workers to write (zcDirect)
	if P < 4 || P*seg*es < claimRSFloor*s.zcDMin {
		// The pieces claimed by every process from 4 processes and 16 times
		// the direct floor of input (16 MiB): on the 16-core host the
		// reduce-scatter of 4 and 8 processes took 944 / 4518 and 1968 /
		// 7778 us at 16 / 64 MiB claimed, against 2647 / 5821 and 5078 /
		// 8557 with a segment each (medians of 3, alternating), but 4
		// processes at 4 MiB 1014 against 359, where one more fence and
		// the writes into the other processes' results outweigh the shared
		// work (bench/h100-2026-12-07f). 2 processes: not measured.
		claim = nil
	}
	offer := true
	for k, lo := 0, 0; lo < seg; k, lo = k+1, lo+C {
		c := min(C, seg-lo)
		in := s.buf(P, s.half)
		if k > 0 || !offer || !w.zcOffer(s, srcs, P*seg*es, true, false, claim, seg*es, w.rank*seg*es) {
			for q := range P {
				for l, src := range s.copyInputs(srcs, comb) {
					copyIn(in[(q*N+w.rank*L+l)*C*es:], src[(q*seg+lo)*es:(q*seg+lo+c)*es])
				}
			}
		}
		if err := w.phase(ctx, s); err != nil {
			return false, true, err
		}
		if k == 0 && offer {
			offer = false
			switch all, some, _, direct := w.zcVerdict(s, len(srcs), P*seg*es, seg*es); {
			case direct:
				return true, true, w.zcDirect(ctx, s, P*seg, seg, dt, op, scale)
			case all:
				if into != nil {
					return true, true, w.zcReduce(ctx, s, into, w.rank*seg, seg, dt, op, scale)
				}
				return false, true, w.zcReduce(ctx, s, dst, w.rank*seg, seg, dt, op, scale)
			case some:
				k, lo = -1, -C
				continue
			}
		}
		hostmath.ReduceStrided(dt, op, out[lo*es:(lo+c)*es], in, C, w.rank*N*C, N, c, scale)
		if shmChunkHook != nil {
			shmChunkHook(ctx, w, k)
		}
	}
	s.done()
	return false, true, nil
}

// shmAllgatherMore gathers every process's srcs (mb bytes each) in global
// order into dst through the World's window; ran false where the window
// is not used. A chunk of C bytes per input goes in one phase: each
// process copies its inputs' chunk into the current half (input r in
// global order at r·C), fence, every process copies every input's chunk
// out. With keep, a call of one chunk leaves the gathered blocks in the
// window instead (dst is not written): input r at view[r*C:], C the
// stride. They stay there until this process's next call through the
// window: another process writes this half again only two phases later,
// after a fence this process enters with that call. more are the
// process's other ranks' results (nil: none): a call that reads every
// input where it lies writes them in the same pass as dst (zcAllgather)
// and says so (wrote); the others leave them to the ranks.
func (w *World) shmAllgatherMore(ctx context.Context, srcs [][]byte, dst []byte, more [][]byte, mb int, keep bool) (view []byte, stride int, wrote, ran bool, err error) {
	if mb == 0 {
		return nil, 0, false, true, nil
	}
	s, err := w.shmBegin(ctx)
	if s == nil {
		return nil, 0, false, err != nil, err
	}
	defer s.mu.Unlock()
	P, L := w.size, len(srcs)
	N := P * L
	C := P * s.slot / N &^ 7 // bytes per input per chunk
	want := mb > C || mb >= s.zcGMin
	probe := s.mpiBetter(P) // as in shmReduce
	if C == 0 || probe && !s.zcEligible(want, L, mb) {
		return nil, 0, false, false, nil
	}
	offer := true
	for k, lo := 0, 0; lo < mb; k, lo = k+1, lo+C {
		c := min(C, mb-lo)
		in := s.buf(P, s.half)
		if (k > 0 || !offer || !w.zcOffer(s, srcs, mb, want, false, nil, 0, 0)) && !probe {
			for l, src := range srcs {
				copyIn(in[(w.rank*L+l)*C:], src[lo:lo+c])
			}
		}
		if err := w.phase(ctx, s); err != nil {
			return nil, 0, false, true, err
		}
		if k == 0 && offer {
			offer = false
			switch all, some, _, _ := w.zcVerdict(s, L, mb, 0); {
			case all:
				return nil, 0, true, true, w.zcAllgather(ctx, s, dst, more, mb)
			case probe:
				return nil, 0, false, false, nil
			case some:
				k, lo = -1, -C
				continue
			}
		}
		switch {
		case c == mb && keep:
			view = in[:N*C]
		case c == mb:
			// One chunk: the blocks are dst's in order, one parallel copy.
			hostmath.CopyBlocks(dst[:N*mb], in, mb, C)
		default:
			for r := range N {
				hostmath.Copy(dst[r*mb+lo:r*mb+lo+c], in[r*C:])
			}
		}
		if shmChunkHook != nil {
			shmChunkHook(ctx, w, k)
		}
	}
	s.done()
	return view, C, false, true, nil
}

// shmFence makes every process's stores to the window visible to every
// other before any goes on: MPI_Win_sync, a barrier, MPI_Win_sync.
func (w *World) shmFence(ctx context.Context) error {
	shmFences.Add(1)
	if err := w.winSync(); err != nil {
		return err
	}
	kind := nativeNone
	if w.shm.held {
		kind = nativeFence
	}
	if err := w.barrierAs(ctx, kind); err != nil {
		return err
	}
	return w.winSync()
}

// winSync is MPI_Win_sync on the World's window.
func (w *World) winSync() error {
	r := w.getRequest(kindCollective, "MPI_Win_sync", -1, 0)
	defer r.release()
	if !w.run(postWinSync, r) || r.closedHit {
		return closedError(r.call)
	}
	if r.code != 0 {
		return w.mpiError(r.call, r.code, "the shared-memory window")
	}
	return nil
}

func postWinSync(r *request) {
	if r.w.closed.Load() {
		r.closedHit = true
		return
	}
	r.code = int(C.gm_win_sync(r.w.shm.win))
}

// openShm returns the World's window, allocating it on first use, or nil
// where it is not used. The processes agree first on whether they all want
// it and on the slot size (the least asked), and after allocating on
// whether it worked everywhere, so that all take the same path.
func (w *World) openShm(ctx context.Context) (*shmState, error) {
	s := &w.shm
	switch s.state {
	case 1:
		return s, nil
	case -1:
		return nil, nil
	}
	if shmSlotErr != nil {
		return nil, shmSlotErr
	}
	wranks := cWorldRanks(w.comm, w.size)
	want := []int64{0, max(shmSlot.Load()&^63, 64), int64(copyWorkers()), 0, int64(zcMin), int64(zcGatherMin), int64(zcDirectMin)}
	if shmOn.Load() && w.mode == modeConcurrent {
		want[0] = 1
	}
	if wranks != nil {
		want[3] = 1
	}
	if shmAlways.Load() {
		want[2] = 1 << 30
	}
	if err := w.agreeMin(ctx, want); err != nil {
		return nil, err
	}
	if want[0] == 0 {
		s.state = -1
		return nil, nil
	}
	slot := int(want[1])
	var res C.gm_shm_ret
	if !w.cold(false, func() {
		res = C.gm_shm_open(w.comm, C.int(w.rank), C.int(w.size), C.MPI_Aint(2*slot), C.MPI_Aint(shmCtrl+2*w.size*descBytes))
	}) {
		return nil, closedError("MPI_Win_allocate_shared")
	}
	s.node, s.win = res.node, res.win
	if int(res.size) != w.size && res.code == 0 {
		// Not one node, the same answer on every process.
		s.state = -1
		w.cold(false, func() { cCommFree(s.node) })
		s.node = commNull
		return nil, nil
	}
	ok := []int64{0}
	if res.code == 0 && res.base != nil {
		ok[0] = 1
		s.mem = unsafe.Slice((*byte)(res.base), 2*w.size*slot)
		s.slot, s.workers = slot, int(want[2])
		s.zc, s.wranks = want[3] == 1, wranks
		s.zcMin, s.zcGMin, s.zcDMin = int(want[4]), int(want[5]), int(want[6])
		s.desc = unsafe.Slice((*byte)(unsafe.Add(res.base, 2*w.size*slot+shmCtrl)), 2*w.size*descBytes)
		s.claim = (*atomic.Int64)(unsafe.Add(res.base, 2*w.size*slot+64))
		if w.rank == w.size-1 {
			clear(unsafe.Slice((*byte)(unsafe.Add(res.base, 2*w.size*slot)), shmCtrl+2*w.size*descBytes))
			if err := w.winSync(); err != nil {
				ok[0] = 0
			}
		}
	}
	if err := w.agreeMin(ctx, ok); err != nil {
		s.state = -1 // the window, if any, is left to MPI
		return nil, err
	}
	if ok[0] == 0 {
		// Failed somewhere: MPI's collectives instead; what was allocated is
		// left to MPI (freeing it is collective and may be what failed).
		s.state, s.mem, s.desc, s.claim = -1, nil, nil, nil
		if res.code != 0 {
			return nil, w.mpiError(C.GoString(res.call), int(res.code), "the shared-memory window")
		}
		return nil, nil
	}
	s.state = 1
	return s, nil
}

// copyWorkers is the goroutines this process's host copies and
// reductions take (parreduce's share of the node, GOMAXPROCS at most).
func copyWorkers() int {
	g := runtime.GOMAXPROCS(0)
	if l := parreduce.Copy.Limit(); l > 0 {
		g = min(g, l)
	}
	return g
}

// mpiBetter reports whether MPI's own all-reduce and all-gather beat the
// window's for P processes: 2 processes whose copies each run on one core
// (Open MPI's default binds each of 2 processes to one core). The window
// copies every input in and then out; MPI moves each block once between
// the 2 processes. On the 16-core host, 1 to 64 MiB (docs/MPI.md):
// MPI_Iallreduce from Go took 0.83-1.02 of the window's time (medians of
// 3), the all-gather's MPI_Ialltoallv 0.69-0.82. With more cores, the
// window's copies and reductions spread over them and MPI's do not. The
// reduce-scatter stays in the window (MPI's took 2.5-3 times as long). The
// same answer on every process (workers is agreed). Where every process's
// inputs lie in memory of AllocShared the window copies none in, and it
// beat MPI's there (bench/h100-2026-12-07b, p2/: 1 to 64 MiB, the
// all-gather in 0.51-0.57 of MPI's time, the all-reduce in 0.42-0.65):
// such a call probes (shmReduce, shmAllgatherMore), and leaves for MPI only
// when not every process offered its inputs, after the one fence of the
// offers.
func (s *shmState) mpiBetter(P int) bool { return shmProbeAll || P == 2 && s.workers == 1 }

// shmProbeAll, set by tests (the same on every process), makes every
// all-reduce and all-gather probe as mpiBetter's do.
var shmProbeAll bool

// agreeMin sets each of v to its least over the processes (MPI_Iallreduce
// with MPI_MIN, in place).
func (w *World) agreeMin(ctx context.Context, v []int64) error {
	p := unsafe.Pointer(unsafe.SliceData(v))
	return w.allreduce(ctx, p, p, len(v), len(v), backend.I64, backend.Min)
}

// leaveShm and freeShm free the World's window (from Close). MPI_Win_free
// is collective and blocks until every process frees it, so the processes
// first agree, through an atomic counter in the window (MPI_Fetch_and_op,
// MPI_Compare_and_swap), that each is closing: a process counts itself in
// (leaveShm, as Close starts) and waits until the count reaches P, up to
// Close's deadline for the rest of its work (freeShm); then every process
// frees the window. One that waited in vain marks the count poisoned, and
// then none frees it (it stays allocated until MPI_Finalize, without
// hanging Close). A World closed during a call through it leaves it to MPI too.
const shmPoison = 1 << 30

func (w *World) leaveShm() {
	s := &w.shm
	if !s.mu.TryLock() {
		return // a call still reads the window (the World closed under it): left to MPI
	}
	defer s.mu.Unlock()
	if s.state != 1 {
		return
	}
	s.state = -1
	v, ok := w.shmAtomic(0, 1, 0)
	if ok {
		s.count = v + 1
	}
}

// shmAtomic is gm_shm_atomic on the counter: op 0 adds add, 1 reads, 2
// swaps in add where it holds compare; it returns the value before, ok
// false if MPI failed.
func (w *World) shmAtomic(op, add, compare int) (old int, ok bool) {
	s := &w.shm
	var r C.gm_atomic_ret
	if !w.cold(false, func() {
		r = C.gm_shm_atomic(s.win, C.int(w.size-1), C.MPI_Aint(2*s.slot), C.int(op), C.int(add), C.int(compare))
	}) || r.code != 0 {
		return 0, false
	}
	return int(r.old), true
}

// freeShm waits until every process counted itself in (leaveShm), or the
// deadline passed, then frees the window or leaves it to MPI.
func (w *World) freeShm(deadline time.Time) {
	s := &w.shm
	if !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	v := s.count
	if v == 0 {
		return // not open, or left to MPI
	}
	s.count = 0
	ok := true
	for ok && v < shmPoison && v != w.size {
		if time.Now().After(deadline) {
			var old int
			if old, ok = w.shmAtomic(2, v|shmPoison, v); ok && old == v {
				v |= shmPoison
			} else {
				v = old
			}
			continue
		}
		cNap(int64(sleepMax))
		v, ok = w.shmAtomic(1, 0, 0)
	}
	if !ok || v != w.size {
		return // left to MPI
	}
	w.cold(false, func() { C.gm_shm_free(s.win, s.node) })
	s.mem, s.desc, s.claim = nil, nil, nil
}
