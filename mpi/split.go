//go:build mpi && cgo

package mpi

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gocoll/gocoll/backend"
)

var _ backend.Splitter = (*World)(nil)

// Split returns a new World (a *World, as a backend.Transport) over the
// processes of w that pass the same color: MPI_Comm_split of w's two
// communicators (the caller's traffic and the arrival notices), ranked by
// key, then by rank in w. A process that passes a negative color
// (MPI_UNDEFINED) gets nil, nil. The new World is isolated from w and from
// every other World, like a duplicate: it has w's thread level, tag bound and
// largest count per MPI call, its own rank and size, and its Close frees only
// its own communicators (closing w does not close it; Finalize does). color
// and key must fit in a C int.
//
// Split is a collective of w, like Dup: every process calls it, in the same
// order as w's other collectives, from one goroutine at a time. MPI has no
// nonblocking MPI_Comm_split, so Split first waits in an MPI_Ibarrier on w,
// honouring ctx as Allgather does: when a process never calls, it returns an
// *Error for MPI_Comm_split that matches backend.ErrTimeout and lists, in
// Ranks, the processes not seen to arrive. Once the barrier completed, every
// process has called Split, and the blocking MPI_Comm_split runs on a
// goroutine of its own while the caller waits for it within ctx.
//
// When ctx ends first, the work is left to w, as a Dup that timed out is: a
// barrier still posted completes when the missing processes call Split, and
// then this process makes its MPI_Comm_split in the background (a process
// whose barrier completed makes it in any case, so the others never wait for
// it in vain) and frees what it made. Until then w's next collective waits
// for it within its own ctx, and fails without being posted when ctx ends
// first. The missing processes must therefore call Split next, or the job
// should end. An MPI_Comm_split that never returns (a process stopped using
// w) holds w's communicators, and under MPI_THREAD_FUNNELED or SERIALIZED
// MPI's main thread or w's lock: Close then leaves them to MPI (ErrInFlight).
func (w *World) Split(ctx context.Context, color, key int) (backend.Transport, error) {
	const call = "MPI_Comm_split"
	if color > maxInt || key > maxInt || key < -maxInt-1 {
		return nil, argError(call, "color %d or key %d does not fit in a C int", color, key)
	}
	if color < 0 {
		color = -1 // MPI_UNDEFINED
	}
	seq, err := w.beginCollective(ctx, call)
	if err != nil {
		return nil, err
	}
	defer w.collMu.Unlock()
	r := w.getRequest(kindSplit, call, -1, 0)
	r.seq, r.color, r.key = seq, color, key
	r.setSubs(0)
	if err := w.collective(ctx, r, postBarrier); err != nil {
		return nil, err // a barrier still posted is left to w (releaseOrphan)
	}
	r.release()
	start := time.Now()
	j := w.startSplit(seq, color, key, false)
	select {
	case <-j.done:
	case <-ctx.Done():
	}
	res, ok := j.take()
	if !ok {
		return nil, &Error{Call: call, Err: ctx.Err(), Msg: fmt.Sprintf(
			"collective #%d: every process arrived, but MPI_Comm_split had not returned on process %d of %d after %v "+
				"(a process stopped waiting before it made its part); it completes in the background, and what it makes is freed",
			seq, w.rank, w.size, time.Since(start).Round(time.Microsecond))}
	}
	switch {
	case res.closed:
		return nil, closedError(call)
	case res.code != 0:
		return nil, w.mpiError(res.call, res.code, fmt.Sprintf("collective #%d (color %d, key %d)", seq, color, key))
	case res.comm == commNull:
		return nil, nil // not a member
	}
	d := &World{exec: w.exec, mode: w.mode, level: w.level, version: w.version, rank: res.rank, size: res.size,
		tagUB: w.tagUB, limit: w.limit, comm: res.comm, diag: res.diag}
	d.seen = make([]uint64, d.size)
	initMu.Lock()
	defer initMu.Unlock()
	if finalized {
		// MPI_Finalize ran meanwhile and took the communicators with it.
		return nil, closedError(call)
	}
	dups[d] = struct{}{}
	return d, nil
}

// splitJob is one MPI_Comm_split running on a goroutine of its own.
type splitJob struct {
	seq  uint64
	done chan struct{} // closed once MPI_Comm_split returned and the job left w.splitting

	mu    sync.Mutex
	res   splitResult
	ended bool // MPI_Comm_split returned: res is set
	left  bool // nobody takes the result: the job frees it
}

// startSplit starts MPI_Comm_split of w's communicators for collective #seq
// on a goroutine of its own. left: nobody waits for it (the barrier of a
// Split that timed out completed in the background), so it frees what it
// makes.
func (w *World) startSplit(seq uint64, color, key int, left bool) *splitJob {
	j := &splitJob{seq: seq, done: make(chan struct{}), left: left}
	w.bgMu.Lock()
	w.splitting = append(w.splitting, j)
	w.bgMu.Unlock()
	go w.runSplit(j, color, key)
	return j
}

func (w *World) runSplit(j *splitJob, color, key int) {
	res := splitResult{closed: true}
	w.cold(false, func() {
		if !w.closed.Load() {
			res = cCommSplit(w.comm, w.diag, color, key)
		}
	})
	j.mu.Lock()
	j.res, j.ended = res, true
	free := j.left
	j.mu.Unlock()
	if free {
		w.freeSplit(res)
	}
	w.bgMu.Lock()
	if i := slices.Index(w.splitting, j); i >= 0 {
		w.splitting = slices.Delete(w.splitting, i, i+1)
	}
	w.bgMu.Unlock()
	close(j.done)
}

// take returns the job's result if MPI_Comm_split returned; otherwise it
// leaves the result to the job, which frees it, and reports false.
func (j *splitJob) take() (splitResult, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.ended {
		j.left = true
		return splitResult{}, false
	}
	return j.res, true
}

// freeSplit frees the communicators an MPI_Comm_split made that nobody
// took.
func (w *World) freeSplit(res splitResult) {
	if res.comm == commNull && res.diag == commNull {
		return
	}
	// The new communicators do not depend on w's: they may be freed after w
	// closed, as long as MPI runs.
	w.cold(false, func() {
		for _, c := range []cComm{res.comm, res.diag} {
			if c != commNull {
				cCommFree(c)
			}
		}
	})
}
