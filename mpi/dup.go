//go:build mpi && cgo

package mpi

import (
	"context"

	"github.com/gocoll/gocoll/backend"
)

// dup is World.Dup in the mpi build (api.go).
func (w *World) dup(ctx context.Context) (backend.Transport, error) {
	const call = "MPI_Comm_idup"
	seq, err := w.beginCollective(ctx, call)
	if err != nil {
		return nil, err
	}
	defer w.collMu.Unlock()
	r := w.getRequest(kindDup, call, -1, 0)
	r.seq = seq
	if r.cmem = cComms(2); r.cmem == nil {
		r.release()
		return nil, &Error{Call: call, Msg: "no memory for two communicator handles", Err: backend.ErrOutOfMemory}
	}
	r.useSubs(2)
	if err := w.collective(ctx, r, postIdup); err != nil {
		return nil, err
	}
	d := &World{world{exec: w.exec, mode: w.mode, level: w.level, version: w.version, rank: w.rank, size: w.size,
		tagUB: w.tagUB, limit: w.limit, comm: cCommAt(r.cmem, 0), diag: cCommAt(r.cmem, 1), procs: w.procs, noHB: w.noHB}}
	d.seen = make([]uint64, d.size)
	r.release()
	initMu.Lock()
	defer initMu.Unlock()
	if finalized {
		// MPI_Finalize ran meanwhile and took the communicators with it.
		return nil, closedError(call)
	}
	dups[d] = struct{}{}
	return d, nil
}

// postIdup posts MPI_Comm_idup of the World's two communicators into r.cmem
// (on the MPI thread).
func postIdup(r *request) {
	if !r.beginPost() {
		return
	}
	w := r.w
	for i, c := range []cComm{w.comm, w.diag} {
		req, code := cCommIdup(c, r.cmem, i)
		if !r.record(i, req, code) {
			return
		}
	}
}

// freeDupComms frees the communicators that a Dup which timed out made once
// MPI completed it.
func (w *World) freeDupComms(r *request) {
	w.cold(false, func() {
		for i := range 2 {
			if c := cCommAt(r.cmem, i); c != commNull {
				cCommFree(c)
			}
		}
	})
}
