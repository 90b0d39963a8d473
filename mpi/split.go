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

// split is World.Split in the mpi build (api.go).
func (w *World) split(ctx context.Context, color, key int) (backend.Transport, error) {
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
	d := &World{world{exec: w.exec, mode: w.mode, level: w.level, version: w.version, rank: res.rank, size: res.size,
		tagUB: w.tagUB, limit: w.limit, comm: res.comm, diag: res.diag, procs: res.procs, noHB: res.procs == nil}}
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
			if res.code == 0 && res.comm != commNull {
				res.procs = cWorldRanks(res.comm, res.size) // nil: the heartbeat does not judge its processes
			}
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
