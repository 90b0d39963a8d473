//go:build mpi && cgo

package mpi

import (
	"context"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// Polling (poll, and the progress thread when it backs off, progress.go): a
// wait first spins (testing and yielding) for spinFor, then sleeps
// between tests, from sleepMin doubling to sleepMax, so a quick completion is
// seen at once and a long wait costs little CPU (ranks may share cores). The
// sleeps are nanosleep calls (cNap): Go's time.Sleep rounds a wait under a
// millisecond up to about 1.1 ms on Linux when the process has nothing else
// to run (measured on the 2-core development machine), and MPI progresses a
// nonblocking collective only inside MPI_Test, so each such sleep would
// stall it by a millisecond.
const (
	spinFor  = 50 * time.Microsecond
	sleepMin = 50 * time.Microsecond
	sleepMax = 200 * time.Microsecond
)

// announceAfter is how long a process waits in a collective before it tells
// the others it has arrived (see notice). Most collectives finish sooner and
// send nothing.
var announceAfter = 10 * time.Millisecond

// noticeTag is the tag of arrival notices on the World's diag communicator.
const noticeTag = 1

// poll calls test until it reports done or an error, or ctx ends; ended
// reports the last, with ctx's error. idle, if not nil, runs between tests
// once spinning is over, with the time waited so far.
func poll(ctx context.Context, test func() (bool, error), idle func(waited time.Duration)) (ended bool, err error) {
	done := ctx.Done()
	start := time.Now()
	var sleep time.Duration
	for {
		ok, err := test()
		if err != nil {
			return false, err
		}
		if ok {
			return false, nil
		}
		select {
		case <-done:
			return true, ctx.Err()
		default:
		}
		waited := time.Since(start)
		if waited < spinFor {
			runtime.Gosched()
			continue
		}
		if idle != nil {
			idle(waited)
		}
		sleep = min(max(2*sleep, sleepMin), sleepMax)
		cNap(int64(sleep))
	}
}

// A notice says "I have arrived at collective #seq". MPI cannot tell which
// processes have not arrived at a collective, so each process that has
// waited announceAfter (or half its deadline, if sooner) sends its sequence
// number to every other process on the diag communicator. When a collective
// times out, the processes whose latest notice is older are the ones not
// seen to arrive. Processes that arrived less than announceAfter before the
// deadline are counted as missing too, so the answer errs on naming more.
type notice struct {
	req cRequest
	buf unsafe.Pointer // C memory holding the sequence number
}

// announce sends r.seq to every other process (on the MPI thread).
func announce(r *request) {
	w := r.w
	if w.closed.Load() {
		r.closedHit = true
		return
	}
	w.noticeMu.Lock()
	defer w.noticeMu.Unlock()
	for p := 0; p < w.size; p++ {
		if p == w.rank {
			continue
		}
		// Best effort: a notice that cannot be sent only makes a timeout
		// name one more process.
		if req, buf, code := cNoticeSend(w.diag, p, noticeTag, r.seq); code == 0 {
			w.notices = append(w.notices, notice{req, buf})
		}
	}
}

// drainNotices receives the notices that arrived and completes sent ones (on
// the MPI thread).
func drainNotices(r *request) {
	w := r.w
	if w.closed.Load() {
		r.closedHit = true
		return
	}
	w.noticeMu.Lock()
	defer w.noticeMu.Unlock()
	kept := w.notices[:0]
	for _, n := range w.notices {
		if t := cTest(n.req); t.code == 0 && !t.done {
			kept = append(kept, n)
		} else {
			cFree(n.buf) // sent, or failed (and freed by MPI_Test)
		}
	}
	clear(w.notices[len(kept):])
	w.notices = kept
	for {
		ok, src, seq, code := cNoticeRecv(w.diag, noticeTag)
		if code != 0 || !ok {
			return
		}
		if src >= 0 && src < len(w.seen) && seq > w.seen[src] {
			w.seen[src] = seq
		}
	}
}

// beginCollective claims the World for one collective and numbers it.
func (w *World) beginCollective(ctx context.Context, call string) (uint64, error) {
	if !w.collMu.TryLock() {
		return 0, argError(call, "another collective is in progress on this World: "+
			"collectives must be called by one goroutine at a time, in the same order on every process")
	}
	if w.closed.Load() {
		w.collMu.Unlock()
		return 0, closedError(call)
	}
	if w.lost.Load() {
		w.collMu.Unlock()
		return 0, lostError(call)
	}
	w.progressOrphans()
	if err := w.awaitDup(ctx, call); err != nil {
		w.collMu.Unlock()
		return 0, err
	}
	w.seq++
	return w.seq, nil
}

// awaitDup waits until no Dup or Split that timed out is still posted on the
// World (the caller holds collMu). Open MPI posts the steps of MPI_Comm_idup
// on the parent communicator one after the other as it progresses, so a
// collective posted on the parent before the idup completes would be
// matched out of order with the other processes' (open-mpi/ompi#2025); a
// Split left to the World still owes its MPI_Comm_split, which must come
// before any later collective, as on the other processes. When ctx ends
// first, the collective is not posted and its number not taken.
func (w *World) awaitDup(ctx context.Context, call string) error {
	seq := w.pendingDup()
	if seq == 0 {
		return nil
	}
	start := time.Now()
	ended, err := poll(ctx, func() (bool, error) {
		w.progressOrphans()
		seq = w.pendingDup()
		return seq == 0, nil
	}, nil)
	if !ended {
		return err
	}
	missing, seen := w.arrivals(seq)
	return &Error{Call: call, Ranks: missing, Err: err, ended: true, Msg: fmt.Sprintf(
		"not posted: collective #%d (the MPI_Comm_idup or MPI_Comm_split of a Dup or Split that timed out) still not complete on process %d of %d "+
			"after %v more; processes not seen to arrive at it: %v (seen: %v)",
		seq, w.rank, w.size, time.Since(start).Round(time.Microsecond), missing, seen)}
}

// pendingDup returns the number of the first Dup or Split left to the World
// that MPI has not completed, 0 when there is none.
func (w *World) pendingDup() uint64 {
	w.bgMu.Lock()
	defer w.bgMu.Unlock()
	for _, r := range w.orphans {
		if r.kind == kindDup || r.kind == kindSplit {
			return r.seq
		}
	}
	if len(w.splitting) > 0 {
		return w.splitting[0].seq
	}
	return 0
}

// arrivals receives the waiting notices and splits the processes into those
// not seen to arrive at collective #seq and the others.
func (w *World) arrivals(seq uint64) (missing, seen []int) {
	r := w.getRequest(kindCollective, "", -1, 0)
	w.run(drainNotices, r)
	r.release()
	w.noticeMu.Lock()
	defer w.noticeMu.Unlock()
	for p, s := range w.seen {
		if p == w.rank || s >= seq {
			seen = append(seen, p)
		} else {
			missing = append(missing, p)
		}
	}
	return missing, seen
}

// collective posts r with post and polls it until it completes or ctx ends.
// On success r is still the caller's (to copy results out, then release);
// on failure it is released or left to the World.
func (w *World) collective(ctx context.Context, r *request, post func(*request)) error {
	w.run(drainNotices, r)
	if !w.run(post, r) || r.closedHit {
		r.release()
		return closedError(r.call)
	}
	if r.code != 0 {
		err := w.mpiError(r.call, r.code, r.describe())
		if r.posted == 0 {
			r.release()
		} else {
			w.orphan(r) // the posted parts cannot be cancelled
		}
		return err
	}
	w.exec.progress.watch(r)
	start := time.Now()
	announceAt := announceAfter
	if dl, ok := ctx.Deadline(); ok {
		announceAt = min(announceAt, dl.Sub(start)/2)
	}
	// Park until the progress thread completes r; announce arrival once
	// after announceAt (a timer of the World's, reused: collectives of one
	// World are one at a time, under collMu).
	if w.announce == nil {
		w.announce = time.NewTimer(announceAt)
	} else {
		w.announce.Reset(announceAt)
	}
	tick := w.announce.C
	var hung *Error
	end := r.await(ctx.Done(), tick)
	for end == awaitTick || end == awaitHung {
		if end == awaitHung {
			if hung = w.hungError(r.call, r, time.Since(start)); hung != nil {
				break
			}
		} else {
			a := w.getRequest(kindCollective, r.call, -1, 0)
			a.seq = r.seq
			w.run(announce, a)
			a.release()
			tick = nil
		}
		end = r.await(ctx.Done(), tick)
	}
	w.announce.Stop()
	if end == awaitDone && r.native == nativeFence {
		// Other processes read this one's inputs until they enter the
		// fence: wait for them past ctx's end, up to fenceDrain.
		t := time.NewTimer(fenceDrain)
		for end = r.await(nil, t.C); end == awaitHung; end = r.await(nil, t.C) {
			if hung = w.hungError(r.call, r, time.Since(start)); hung != nil {
				break
			}
		}
		t.Stop()
		if end == awaitTick {
			end = awaitDone // past the limit: ctx's end, the fence held
		}
	}
	if end != awaitReady && !w.exec.progress.unwatch(r) {
		end = awaitReady // the thread completed r meanwhile
	}
	if end == awaitReady {
		r.watched = false
		switch {
		case r.closedHit:
			w.orphan(r)
			return closedError(r.call)
		case r.code != 0:
			w.orphan(r) // MPI forbids cancelling a collective: leave the rest to MPI
			return w.mpiError("MPI_Test", r.code, r.describe())
		}
		return nil
	}
	if end == awaitHung {
		hung.Msg += "; it stays posted and completes if they resume and call it"
		w.orphan(r)
		return hung
	}
	// The deadline passed: find who was seen to arrive.
	err := ctx.Err()
	missing, seen := w.arrivals(r.seq)
	e := &Error{Call: r.call, Ranks: missing, Err: err, ended: true, Msg: fmt.Sprintf(
		"collective #%d not complete on process %d of %d after %v; processes not seen to arrive: %v (seen: %v); "+
			"it stays posted and completes when they call it",
		r.seq, w.rank, w.size, time.Since(start).Round(time.Microsecond), missing, seen)}
	w.orphan(r)
	return e
}

// allgather is World.Allgather in the mpi build (api.go).
func (w *World) allgather(ctx context.Context, mine, all []byte) error {
	const call = "MPI_Iallgather"
	if len(all) != w.size*len(mine) {
		return argError(call, "all holds %d bytes, want %d (%d per process)", len(all), w.size*len(mine), len(mine))
	}
	seq, err := w.beginCollective(ctx, call)
	if err != nil {
		return err
	}
	defer w.collMu.Unlock()
	n := len(mine)
	r := w.getRequest(kindCollective, call, -1, 0)
	r.seq, r.n = seq, n
	r.cmem = cMalloc(n + len(all))
	r.buf = r.cmem
	copy(unsafe.Slice((*byte)(r.cmem), n), mine)
	r.setSubs(n)
	if err := w.collective(ctx, r, postAllgather); err != nil {
		return err
	}
	// Piece i gathered bytes [off, off+m) of every process into a block of
	// size*m bytes at size*off, process by process.
	stage := unsafe.Slice((*byte)(unsafe.Add(r.cmem, n)), len(all))
	for off := 0; off < n; off += r.limit {
		m := min(r.limit, n-off)
		block := stage[w.size*off:]
		for p := 0; p < w.size; p++ {
			copy(all[p*n+off:p*n+off+m], block[p*m:(p+1)*m])
		}
	}
	r.release()
	return nil
}

// postAllgather posts one MPI_Iallgather per piece of mine (on the MPI thread).
func postAllgather(r *request) {
	if !r.beginPost() {
		return
	}
	w := r.w
	all := unsafe.Add(r.cmem, r.n)
	for i := range r.subs {
		off := i * r.limit
		m := min(r.limit, r.n-off)
		req, code := cIallgather(unsafe.Add(r.buf, off), m, unsafe.Add(all, w.size*off), w.comm)
		if !r.record(i, req, code) {
			return
		}
	}
}

// allreduceF32 is World.AllreduceF32 in the mpi build (api.go).
func (w *World) allreduceF32(ctx context.Context, send, recv []float32, op backend.Op) error {
	return w.allreduce(ctx, unsafe.Pointer(unsafe.SliceData(send)), unsafe.Pointer(unsafe.SliceData(recv)),
		len(send), len(recv), backend.F32, op)
}

// allreduceF64 is World.AllreduceF64 in the mpi build (api.go).
func (w *World) allreduceF64(ctx context.Context, send, recv []float64, op backend.Op) error {
	return w.allreduce(ctx, unsafe.Pointer(unsafe.SliceData(send)), unsafe.Pointer(unsafe.SliceData(recv)),
		len(send), len(recv), backend.F64, op)
}

func (w *World) allreduce(ctx context.Context, send, recv unsafe.Pointer, ns, nr int, dt backend.DType, op backend.Op) error {
	const call = "MPI_Iallreduce"
	if ns != nr {
		return argError(call, "send has %d elements, recv %d", ns, nr)
	}
	if op < backend.Sum || op > backend.Min {
		return argError(call, "unknown op %v", op)
	}
	bytes := uintptr(ns * dt.Size())
	if ns > 0 && send != recv && uintptr(send) < uintptr(recv)+bytes && uintptr(recv) < uintptr(send)+bytes {
		return argError(call, "send and recv overlap without being the same slice")
	}
	seq, err := w.beginCollective(ctx, call)
	if err != nil {
		return err
	}
	defer w.collMu.Unlock()
	r := w.getRequest(kindCollective, call, -1, 0)
	r.seq, r.n, r.dt, r.op = seq, ns, dt, op
	if ns > 0 {
		r.buf = recv
		r.pinBuffer(recv)
		if send != recv {
			r.send = send
			r.pinBuffer(send)
		}
	}
	r.setSubs(ns)
	if err := w.collective(ctx, r, postAllreduce); err != nil {
		return err
	}
	r.release()
	return nil
}

// postAllreduce posts one MPI_Iallreduce per piece (on the MPI thread).
func postAllreduce(r *request) {
	if !r.beginPost() {
		return
	}
	w := r.w
	size := r.dt.Size()
	for i := range r.subs {
		off := i * r.limit
		m := min(r.limit, r.n-off)
		var send unsafe.Pointer
		if r.send != nil {
			send = unsafe.Add(r.send, off*size)
		}
		req, code := cIallreduce(send, unsafe.Add(r.buf, off*size), m, r.dt, r.op, w.comm)
		if !r.record(i, req, code) {
			return
		}
	}
}

// barrier is World.Barrier in the mpi build (api.go).
func (w *World) barrier(ctx context.Context) error { return w.barrierAs(ctx, nativeNone) }

// fenceDrain is how long a fence of kind nativeFence waits past its
// context's end for the other processes (the default drain limit of a
// collective.Group); a variable for the tests.
var fenceDrain = 10 * time.Second

// barrierAs is barrier; kind nativeFence waits past ctx's end up to
// fenceDrain, and when that passes too holds the barrier like a native
// collective's memory (a Drain waits for it).
func (w *World) barrierAs(ctx context.Context, kind nativeKind) error {
	const call = "MPI_Ibarrier"
	seq, err := w.beginCollective(ctx, call)
	if err != nil {
		return err
	}
	defer w.collMu.Unlock()
	r := w.getRequest(kindCollective, call, -1, 0)
	r.seq, r.native = seq, kind
	r.setSubs(0)
	if err := w.collective(ctx, r, postBarrier); err != nil {
		return err
	}
	r.release()
	return nil
}

func postBarrier(r *request) {
	if !r.beginPost() {
		return
	}
	req, code := cIbarrier(r.w.comm)
	r.record(0, req, code)
}
