//go:build mpi && cgo

package mpi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// closeGrace is how long Close lets background work (requests left by Cancel
// or by a collective that timed out, arrival notices) finish.
var closeGrace = 500 * time.Millisecond

// Process-wide MPI state: MPI starts once per process and cannot restart.
var (
	initMu     sync.Mutex
	mainThread *executor   // MPI's main thread, from the first Init
	initHere   bool        // this package called MPI_Init_thread (and so calls MPI_Finalize)
	provided   ThreadLevel // what MPI_Init_thread provided, capped at what was asked
	initErr    error       // why MPI could not start; Init keeps returning it
	current    *World      // the open World Init returns
	finalized  bool

	// abandoned keeps requests that MPI still held when their World closed,
	// with their pins, so MPI never writes into memory Go has reused.
	abandonMu sync.Mutex
	abandoned []*request
)

// dups holds the Worlds made by Dup and Split until they are closed (under
// initMu), so nothing they hold is garbage collected while MPI uses it, and
// Finalize closes them.
var dups = map[*World]struct{}{}

// world is a World's state in the mpi build.
type world struct {
	exec    *executor
	mode    mode
	level   ThreadLevel
	version string
	rank    int
	size    int
	tagUB   int
	comm    cComm // MPI_Comm_dup(MPI_COMM_WORLD): the caller's messages
	diag    cComm // another dup: arrival notices, see collective.go
	limit   int   // largest count per MPI call: C int, lowered by tests
	procs   []int // each process's rank in MPI_COMM_WORLD, nil when the same (the heartbeat's)
	noHB    bool  // the heartbeat does not judge this World's processes (their ranks are unknown)

	mu        sync.RWMutex // see run: readers are MPI calls, the writer is Close (serialized: serialMu instead)
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	splitMu sync.Mutex // keeps the pieces of a split message together

	collMu   sync.Mutex  // held by the collective in progress
	seq      uint64      // collectives started, under collMu
	announce *time.Timer // under collMu: when the collective in progress announces arrival

	bgMu      sync.Mutex  // guards orphans, splitting and bgClosed; never held while calling MPI
	orphans   []*request  // requests MPI still holds that nobody waits for
	splitting []*splitJob // MPI_Comm_split calls that have not returned (split.go)
	bgClosed  bool        // Close took the orphans: later ones are abandoned

	liveMu     sync.Mutex // guards live, liveClosed and the requests' links; never held while calling MPI
	live       *request   // the Isend and Irecv requests their callers own (a list through prev and next)
	liveClosed bool       // Close took the list over: no request joins it any more

	// nativeHeld counts the native collectives whose caller returned early
	// (their ctx ended) and which MPI still holds (Drain waits for them).
	nativeHeld atomic.Int64
	// lost: a Drain reported false (one of them was still held past its
	// limit); every later call but Drain and Close fails (lostError).
	lost atomic.Bool

	noticeMu sync.Mutex // guards notices and seen; taken only on the MPI thread
	notices  []notice
	seen     []uint64 // seen[p]: the latest collective process p announced arriving at

	shm shmState // the shared-memory window of strategy Native's all-reduce (shm.go), under collective order
}

// initMPI is Init in the mpi build (api.go).
func initMPI() (*World, error) {
	initMu.Lock()
	defer initMu.Unlock()
	switch {
	case initErr != nil:
		return nil, initErr
	case finalized:
		return nil, &Error{Call: "MPI_Init_thread", Msg: "MPI is finalized and cannot start again", Err: backend.ErrClosed}
	case current != nil:
		return current, nil
	}
	if mainThread == nil {
		if err := startMPI(); err != nil {
			initErr = err
			return nil, err
		}
	}
	w := &World{world{exec: mainThread, mode: modeFor(provided), level: provided, limit: maxInt}}
	var info worldInfo
	w.cold(false, func() {
		info = cWorld()
		w.version = cLibraryVersion()
	})
	if info.code != 0 {
		err := w.mpiError(info.call, info.code, "Init")
		w.cold(false, func() {
			for _, c := range []cComm{info.comm, info.diag} {
				if c != commNull {
					cCommFree(c)
				}
			}
		})
		return nil, err
	}
	w.comm, w.diag, w.rank, w.size, w.tagUB = info.comm, info.diag, info.rank, info.size, info.tagUB
	w.exec.progress.setLocal(w.exec.progress.policy, info.local, cCores())
	w.seen = make([]uint64, w.size)
	current = w
	return w, nil
}

// startMPI starts the executor and calls MPI_Init_thread on it.
func startMPI() error {
	required, err := parseThreadLevel(os.Getenv("GOCOLL_MPI_THREAD"))
	if err != nil {
		return &Error{Call: "MPI_Init_thread", Msg: err.Error(), Err: backend.ErrInvalidArgument}
	}
	policy, err := parseProgressPolicy(os.Getenv("GOCOLL_MPI_PROGRESS"))
	if err != nil {
		return &Error{Call: "MPI_Init_thread", Msg: err.Error(), Err: backend.ErrInvalidArgument}
	}
	interval, err := parseHeartbeat(os.Getenv("GOCOLL_MPI_HEARTBEAT"))
	if err != nil {
		return &Error{Call: "MPI_Init_thread", Msg: err.Error(), Err: backend.ErrInvalidArgument}
	}
	help, err := parseHelp(os.Getenv("GOCOLL_MPI_HELP"))
	if err != nil {
		return &Error{Call: "MPI_Init_thread", Msg: err.Error(), Err: backend.ErrInvalidArgument}
	}
	helpFor.Store(int64(help))
	e := startExecutor()
	var (
		prov          ThreadLevel
		here, wasDone bool
		code          int
		hbErr         error
	)
	e.do(func() {
		prov, here, wasDone, code = cInit(required)
		if code == 0 && !wasDone && (here || prov >= ThreadSerialized) {
			hbErr = e.hb.start(interval, modeFor(min(prov, required)))
		}
	})
	fail := func(err error) error {
		close(e.quit)
		return err
	}
	switch {
	case wasDone:
		return fail(&Error{Call: "MPI_Init_thread", Msg: "MPI was finalized already and cannot start again", Err: backend.ErrClosed})
	case code != 0:
		return fail(&Error{Call: "MPI_Init_thread", Code: code, Msg: "MPI failed to start"})
	case hbErr != nil:
		return fail(hbErr)
	case !here && prov < ThreadSerialized:
		return fail(&Error{Call: "MPI_Query_thread", Err: backend.ErrUnsupported, Msg: fmt.Sprintf(
			"MPI was initialized elsewhere with %v; without its main thread this package needs MPI_THREAD_SERIALIZED or more", prov)})
	}
	mainThread, initHere, provided = e, here, min(prov, required)
	e.progress.mode, e.progress.policy = modeFor(provided), policy
	return nil
}

// finalizeMPI is Finalize in the mpi build (api.go).
func finalizeMPI() error {
	initMu.Lock()
	defer initMu.Unlock()
	if finalized || mainThread == nil {
		return nil
	}
	var errs []error
	for d := range dups {
		errs = append(errs, d.shutdown())
	}
	clear(dups)
	if current != nil {
		errs = append(errs, current.shutdown())
		current = nil
	}
	finalized = true
	mainThread.do(mainThread.hb.stop)
	if initHere {
		code := 0
		mainThread.do(func() {
			code = cFinalize()
			mainThread.finalized.Store(true)
		})
		if code != 0 {
			errs = append(errs, &Error{Call: "MPI_Finalize", Code: code, Msg: "MPI_Finalize failed"})
		}
	}
	mainThread.finalized.Store(true)
	close(mainThread.quit)
	printProgressStats()
	return errors.Join(errs...)
}

// isend is World.Isend in the mpi build (api.go).
func (w *World) isend(p []byte, peer, tag int) (backend.Request, error) {
	r, err := w.startP2P(kindSend, "MPI_Isend", p, peer, tag)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// irecv is World.Irecv in the mpi build (api.go).
func (w *World) irecv(p []byte, peer, tag int) (backend.Request, error) {
	r, err := w.startP2P(kindRecv, "MPI_Irecv", p, peer, tag)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (w *World) irecvUpTo(p []byte, peer, tag int) (backend.Request, error) {
	if len(p) > w.limit {
		return nil, argError("MPI_Irecv", "%d bytes received up to: more than one MPI_Irecv holds (%d)", len(p), w.limit)
	}
	r, err := w.startP2P(kindRecvUpTo, "MPI_Irecv", p, peer, tag)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (w *World) startP2P(kind reqKind, call string, p []byte, peer, tag int) (*request, error) {
	if peer < 0 || peer >= w.size {
		return nil, argError(call, "process %d out of range [0, %d)", peer, w.size)
	}
	if tag < 0 || tag > w.tagUB {
		return nil, argError(call, "tag %d out of range [0, %d] (MPI_TAG_UB)", tag, w.tagUB)
	}
	if w.lost.Load() {
		return nil, lostError(call)
	}
	r := w.getRequest(kind, call, peer, tag)
	r.n = len(p)
	r.buf = unsafe.Pointer(unsafe.SliceData(p))
	if r.n == 0 {
		r.buf = nil
	}
	r.pinBuffer(r.buf)
	r.setSubs(r.n)
	r.mu.Lock()
	if !w.link(r) {
		r.mu.Unlock()
		r.release()
		return nil, closedError(call)
	}
	split := len(r.subs) > 1 && w.mode == modeConcurrent
	if split {
		// Other goroutines must not post pieces of a message to the same
		// peer and tag in between.
		w.splitMu.Lock()
	}
	ok := w.run(postP2P, r)
	if split {
		w.splitMu.Unlock()
	}
	switch {
	case !ok || r.closedHit:
		w.finish(r, fateRelease) // nothing was posted
		return nil, closedError(call)
	case r.code != 0:
		err := w.mpiError(call, r.code, r.describe(), peer)
		if r.posted == 0 {
			w.finish(r, fateRelease)
		} else if _, cerr := w.abort(r); cerr != nil {
			return nil, errors.Join(err, cerr)
		}
		return nil, err
	}
	r.mu.Unlock()
	return r, nil
}

// link puts r on the list of active requests, unless Close took the list.
func (w *World) link(r *request) bool {
	w.liveMu.Lock()
	defer w.liveMu.Unlock()
	if w.liveClosed {
		return false
	}
	r.prev, r.next, r.listed = nil, w.live, true
	if w.live != nil {
		w.live.prev = r
	}
	w.live = r
	return true
}

// unlink takes r off the list of active requests (under liveMu).
func (w *World) unlink(r *request) {
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		w.live = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	}
	r.prev, r.next, r.listed = nil, nil, false
}

// takeLive empties the list of active requests for good and returns what
// it held, each request marked closed once its owner's call in progress, if
// any, has returned.
func (w *World) takeLive() []*request {
	w.liveMu.Lock()
	w.liveClosed = true
	var taken []*request
	for w.live != nil {
		r := w.live
		w.unlink(r)
		taken = append(taken, r)
	}
	w.liveMu.Unlock()
	for _, r := range taken {
		r.mu.Lock()
		r.state = stateClosed
		r.mu.Unlock()
	}
	return taken
}

// closeWorld is World.Close in the mpi build (api.go).
func (w *World) closeWorld() error {
	err := w.shutdown()
	initMu.Lock()
	if current == w {
		current = nil
	}
	delete(dups, w)
	initMu.Unlock()
	return err
}

func (w *World) shutdown() error {
	w.closeOnce.Do(func() { w.closeErr = w.close() })
	return w.closeErr
}

func (w *World) close() error {
	w.leaveShm()
	taken := w.takeLive()
	for _, r := range taken {
		w.exec.progress.unwatch(r)
		// An owner parked in Wait wakes, and its Test finds r taken over.
		r.ready.Store(true)
		select {
		case r.wake <- struct{}{}:
		default:
		}
		w.run(cancelRequest, r) // best effort: a failure leaves r to the grace below
	}
	deadline := time.Now().Add(closeGrace)
	for {
		w.progressBackground()
		taken = w.progress(taken, (*request).unpin)
		if w.background()+len(taken) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	w.freeShm(deadline)
	w.bgMu.Lock()
	left := append(w.orphans, taken...)
	w.orphans = nil
	w.bgClosed = true
	splitting := len(w.splitting)
	w.bgMu.Unlock()
	var errs []error
	if len(left) > 0 {
		// Whatever happens below, MPI may still use their buffers.
		defer func() {
			abandonMu.Lock()
			abandoned = append(abandoned, left...)
			abandonMu.Unlock()
		}()
	}
	if splitting > 0 {
		// An MPI_Comm_split that has not returned (a process never made its
		// part) uses the communicators, and holds the World's lock or MPI's
		// main thread: they are left to MPI, as are the requests.
		w.closed.Store(true)
		return &Error{Call: "MPI_Comm_free", Err: ErrInFlight, Msg: fmt.Sprintf(
			"MPI_Comm_split still in progress after %v (a process never called it); the communicators and %d operations are left to MPI",
			closeGrace, len(left))}
	}
	if !w.cold(true, func() {
		w.closed.Store(true)
		// MPI lets a point-to-point request be freed while active (it then
		// completes on its own); a nonblocking collective's may not be.
		for _, r := range left {
			if r.kind >= kindCollective {
				continue
			}
			for i, q := range r.subs {
				if q != requestNull {
					cRequestFree(q)
					r.subs[i] = requestNull
				}
			}
		}
		w.noticeMu.Lock()
		for _, n := range w.notices {
			cRequestFree(n.req) // n.buf stays allocated: MPI may still read it
		}
		w.notices = nil
		w.noticeMu.Unlock()
		for _, c := range []cComm{w.comm, w.diag} {
			if code := cCommFree(c); code != 0 {
				errs = append(errs, w.mpiErrorLocked("MPI_Comm_free", code))
			}
		}
	}) {
		w.closed.Store(true)
		return closedError("MPI_Comm_free")
	}
	if len(left) > 0 {
		errs = append(errs, &Error{Call: "MPI_Comm_free", Err: ErrInFlight, Msg: fmt.Sprintf(
			"%d operations still held by MPI at Close (a peer never matched them); their buffers stay pinned", len(left))})
	}
	return errors.Join(errs...)
}

// mpiErrorLocked is mpiError for use inside cold(true, ...), on the MPI thread.
func (w *World) mpiErrorLocked(call string, code int) *Error {
	msg, class := cErrorString(code)
	return &Error{Call: call, Code: code, Class: class, Msg: msg}
}

// orphan leaves r to the World: MPI still holds it, nobody waits for it.
// Once Close has taken the orphans, r is kept for the life of the process.
func (w *World) orphan(r *request) {
	r.state = stateOrphan
	if r.native != nativeNone {
		w.nativeHeld.Add(1) // until releaseOrphan: never, if kept forever
	}
	w.bgMu.Lock()
	closed := w.bgClosed
	if !closed {
		w.orphans = append(w.orphans, r)
	}
	w.bgMu.Unlock()
	if closed {
		keepForever(r)
	}
}

// keepForever keeps r, pinned, for the life of the process: its World closed
// while MPI held it.
func keepForever(r *request) {
	abandonMu.Lock()
	abandoned = append(abandoned, r)
	abandonMu.Unlock()
}

// progressBackground completes what it can of the requests left to the
// World and of the arrival notices sent and received.
func (w *World) progressBackground() {
	w.progressOrphans()
	r := w.getRequest(kindCollective, "", -1, 0)
	w.run(drainNotices, r)
	r.release()
}

// progressOrphans tests the requests left to the World and releases those
// MPI completed.
func (w *World) progressOrphans() {
	w.bgMu.Lock()
	list := w.orphans
	w.orphans = nil
	w.bgMu.Unlock()
	if len(list) == 0 {
		return
	}
	if keep := w.progress(list, w.releaseOrphan); len(keep) > 0 {
		w.bgMu.Lock()
		w.orphans = append(w.orphans, keep...)
		w.bgMu.Unlock()
	}
}

// releaseOrphan releases an orphan MPI completed, first freeing the
// communicators of a Dup that timed out, or starting the MPI_Comm_split that
// follows the barrier of a Split that timed out (its result freed once made).
func (w *World) releaseOrphan(r *request) {
	switch r.kind {
	case kindDup:
		w.freeDupComms(r)
	case kindSplit:
		w.startSplit(r.seq, r.color, r.key, true)
	}
	if r.native != nativeNone {
		w.nativeHeld.Add(-1)
	}
	r.release()
}

// progress tests each request of list and hands those MPI completed to
// done; it returns the others, in list's storage.
func (w *World) progress(list []*request, done func(*request)) []*request {
	keep := list[:0]
	for _, r := range list {
		for {
			if !w.run(testRequest, r) || r.closedHit {
				keep = append(keep, r)
				break
			}
			if r.code != 0 {
				continue // that piece finished with an error nobody waits for
			}
			if r.pending == 0 {
				done(r)
			} else {
				keep = append(keep, r)
			}
			break
		}
	}
	clear(list[len(keep):])
	return keep
}

// background counts the requests, notices and MPI_Comm_split calls MPI
// still holds.
func (w *World) background() int {
	w.bgMu.Lock()
	n := len(w.orphans) + len(w.splitting)
	w.bgMu.Unlock()
	w.noticeMu.Lock()
	n += len(w.notices)
	w.noticeMu.Unlock()
	return n
}

// waitMPI is Wait in the mpi build (api.go).
func waitMPI(ctx context.Context, req backend.Request) error {
	start := time.Now()
	var (
		ended bool
		err   error
	)
	if r, ok := req.(*request); ok {
		ended, err = r.wait(ctx)
	} else {
		ended, err = poll(ctx, req.Test, nil)
	}
	if !ended {
		return err
	}
	e := &Error{Call: "MPI_Test", Err: err}
	desc := "request"
	if r, ok := req.(*request); ok {
		e.Call, e.Ranks, desc = r.call, r.ranks(), r.describe()
	}
	e.Msg = fmt.Sprintf("%s not complete after %v", desc, time.Since(start).Round(time.Microsecond))
	if h, ok := err.(*Error); ok {
		e.Err, e.Msg, e.ended = ErrHung, h.Msg, true // the peer stopped responding (hungError)
	}
	if cerr := req.Cancel(); cerr != nil {
		e.Err = errors.Join(err, cerr)
		e.Msg += "; cancel failed"
	} else {
		e.Msg += "; cancelled"
	}
	return e
}

// wait is Wait on one of the package's requests: it parks until the
// progress thread completes r, then Tests it, or returns ended and ctx's
// error when ctx ends first, or ended and hungError's when r's peer stopped
// responding (r is still the caller's, to cancel).
func (r *request) wait(ctx context.Context) (ended bool, err error) {
	done, start := ctx.Done(), time.Now()
	for {
		ok, err := r.test(true)
		if err != nil || ok {
			return false, err
		}
		// r is watched and not complete: park until the progress thread
		// completes it (or Close takes it over), or its peer hangs.
		switch r.await(done, nil) {
		case awaitDone:
			return true, ctx.Err()
		case awaitHung:
			if e := r.w.hungError(r.call, r, time.Since(start)); e != nil {
				return true, e
			}
		}
	}
}
