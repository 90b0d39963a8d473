//go:build mpi && cgo

package mpi

import (
	"context"

	"github.com/gocoll/gocoll/backend"
)

var _ backend.Duplicator = (*World)(nil)

// Dup returns a new World (a *World, as a backend.Transport) over duplicates
// of w's communicators: MPI_Comm_idup of the one that carries the caller's
// traffic and of the one that carries arrival notices. The messages and
// collectives of the duplicate never meet w's or another duplicate's, even
// with the same peers and tags, so several duplicates may be used at the
// same time from different goroutines, each with its own collective order.
// The duplicate has w's thread level, rank, size, tag bound and largest count
// per MPI call. Its Close frees only its own communicators; closing w does
// not close it; Finalize closes it if it is still open.
//
// Dup is a collective of w, like Allgather: every process calls it, in the
// same order as w's other collectives, from one goroutine at a time (a Dup
// while another collective is in progress on w fails at once with
// backend.ErrInvalidArgument). It honours ctx: when a process never calls, it
// returns an *Error for MPI_Comm_idup that matches backend.ErrTimeout and
// lists, in Ranks, the processes not seen to arrive. Dup of a closed World
// fails with backend.ErrClosed.
//
// MPI cannot cancel MPI_Comm_idup, so a Dup that timed out stays posted on w,
// as a timed-out Allgather does, and completes when the missing processes
// call Dup on w; w then frees the communicators it made. Meanwhile a
// collective of w (Allgather, Allreduce*, Barrier, Dup) first waits for it,
// within its own ctx, and fails without being posted when ctx ends first:
// Open MPI posts the steps of MPI_Comm_idup on w's communicator as they
// come, so a collective posted in between would be matched out of order
// (open-mpi/ompi#2025). The missing processes must therefore call Dup next,
// or the job should end. In Open MPI 4.1 the unfinished MPI_Comm_idup also
// holds up, in that process, every communicator creation that starts from a
// communicator with a higher context id, which includes Dup of the Worlds
// made after w: such a Dup times out on every process, although all arrive,
// and completes in the background once the first one has. Closing w does
// not lift that: the request stays in MPI, and Close reports it with
// ErrInFlight.
func (w *World) Dup(ctx context.Context) (backend.Transport, error) {
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
	d := &World{exec: w.exec, mode: w.mode, level: w.level, version: w.version, rank: w.rank, size: w.size,
		tagUB: w.tagUB, limit: w.limit, comm: cCommAt(r.cmem, 0), diag: cCommAt(r.cmem, 1)}
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
