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

// World is this process's view of MPI_COMM_WORLD: a backend.Transport over
// a duplicate of it, with MPI's collectives as baselines. Its methods may be
// called from any goroutine; collectives (Allgather, Allreduce*, Barrier)
// from one goroutine at a time, in the same order on every process, as MPI
// requires.
type World struct {
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

	mu        sync.RWMutex // see run: readers are MPI calls, the writer is Close
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	splitMu sync.Mutex // keeps the pieces of a split message together

	collMu sync.Mutex // held by the collective in progress
	seq    uint64     // collectives started, under collMu

	bgMu    sync.Mutex // guards orphans; never held while calling MPI
	orphans []*request // requests MPI still holds that nobody waits for

	noticeMu sync.Mutex // guards notices and seen; taken only on the MPI thread
	notices  []notice
	seen     []uint64 // seen[p]: the latest collective process p announced arriving at
}

// Init starts MPI and returns the World; later calls return the same World
// until it is closed, then a new one over the same MPI. It calls
// MPI_Init_thread once per process, asking for MPI_THREAD_MULTIPLE (or the
// level in GOCOLL_MPI_THREAD: single, funneled, serialized, multiple), on a
// dedicated OS thread that stays MPI's main thread until Finalize. When MPI
// provides less than MPI_THREAD_MULTIPLE, the World serializes its calls
// (MPI_THREAD_SERIALIZED) or makes all of them on that thread (FUNNELED,
// SINGLE). It sets MPI_ERRORS_RETURN on MPI_COMM_WORLD so failures come back
// as errors, and duplicates MPI_COMM_WORLD (MPI_Comm_dup, collective: every
// process must call Init). When something else initialized MPI already, Init
// uses it (MPI_Query_thread) if it provides MPI_THREAD_SERIALIZED or more.
func Init() (*World, error) {
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
	w := &World{exec: mainThread, mode: modeFor(provided), level: provided, limit: maxInt}
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
	e := startExecutor()
	var (
		prov          ThreadLevel
		here, wasDone bool
		code          int
	)
	e.do(func() { prov, here, wasDone, code = cInit(required) })
	fail := func(err error) error {
		close(e.quit)
		return err
	}
	switch {
	case wasDone:
		return fail(&Error{Call: "MPI_Init_thread", Msg: "MPI was finalized already and cannot start again", Err: backend.ErrClosed})
	case code != 0:
		return fail(&Error{Call: "MPI_Init_thread", Code: code, Msg: "MPI failed to start"})
	case !here && prov < ThreadSerialized:
		return fail(&Error{Call: "MPI_Query_thread", Err: backend.ErrUnsupported, Msg: fmt.Sprintf(
			"MPI was initialized elsewhere with %v; without its main thread this package needs MPI_THREAD_SERIALIZED or more", prov)})
	}
	mainThread, initHere, provided = e, here, min(prov, required)
	return nil
}

// Finalize closes the open World and calls MPI_Finalize on MPI's main
// thread, if this package initialized MPI. MPI cannot start again in this
// process: later calls of every World method fail with backend.ErrClosed and
// Init fails. MPI_Finalize is collective in practice: it returns once every
// process has called it. Finalize is idempotent.
func Finalize() error {
	initMu.Lock()
	defer initMu.Unlock()
	if finalized || mainThread == nil {
		return nil
	}
	var errs []error
	if current != nil {
		errs = append(errs, current.shutdown())
		current = nil
	}
	finalized = true
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
	return errors.Join(errs...)
}

// Name returns "mpi".
func (w *World) Name() string { return "mpi" }

// Rank is MPI_Comm_rank of the World's communicator.
func (w *World) Rank() int { return w.rank }

// Size is MPI_Comm_size of the World's communicator.
func (w *World) Size() int { return w.size }

// ThreadLevel is the thread level the World works under: what
// MPI_Init_thread provided, capped at the level asked for.
func (w *World) ThreadLevel() ThreadLevel { return w.level }

// LibraryVersion is MPI_Get_library_version, such as "Open MPI v4.1.4, ...".
func (w *World) LibraryVersion() string { return w.version }

// Isend starts sending p to process peer with tag (MPI_Isend of MPI_BYTE on
// the World's communicator; a message longer than MPI's int count goes as
// several, matched in order by Irecv). MPI reads p until the request
// completes: p stays pinned until then, and the caller must not modify it
// before Test reports completion or Cancel returns nil.
func (w *World) Isend(p []byte, peer, tag int) (backend.Request, error) {
	r, err := w.startP2P(kindSend, "MPI_Isend", p, peer, tag)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Irecv starts receiving exactly len(p) bytes from process peer with tag
// (MPI_Irecv of MPI_BYTE). MPI writes p until the request completes: p stays
// pinned until then, and the caller must not read or modify it before Test
// reports completion or Cancel returns nil.
func (w *World) Irecv(p []byte, peer, tag int) (backend.Request, error) {
	r, err := w.startP2P(kindRecv, "MPI_Irecv", p, peer, tag)
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
	r := w.getRequest(kind, call, peer, tag)
	r.n = len(p)
	r.buf = unsafe.Pointer(unsafe.SliceData(p))
	if r.n == 0 {
		r.buf = nil
	}
	r.pinBuffer(r.buf)
	r.setSubs(r.n)
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
		r.release()
		return nil, closedError(call)
	case r.code != 0:
		err := w.mpiError(call, r.code, r.describe(), peer)
		if r.posted == 0 {
			r.release()
		} else if _, cerr := w.abort(r); cerr != nil {
			return nil, errors.Join(err, cerr)
		}
		return nil, err
	}
	return r, nil
}

// Close releases the World: it waits up to half a second for background
// work (requests that Cancel or a timed-out collective left to MPI), frees
// what remains that MPI allows to free, and frees the World's communicators
// (MPI_Comm_free). It does not finalize MPI (Finalize does): a later Init
// returns a new World. Requests still held by MPI keep their buffers pinned
// for the life of the process, and Close reports them with an error matching
// ErrInFlight. Close is idempotent.
func (w *World) Close() error {
	err := w.shutdown()
	initMu.Lock()
	if current == w {
		current = nil
	}
	initMu.Unlock()
	return err
}

func (w *World) shutdown() error {
	w.closeOnce.Do(func() { w.closeErr = w.close() })
	return w.closeErr
}

func (w *World) close() error {
	for deadline := time.Now().Add(closeGrace); ; {
		w.progressBackground()
		if w.background() == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	w.bgMu.Lock()
	left := w.orphans
	w.orphans = nil
	w.bgMu.Unlock()
	var errs []error
	if !w.cold(true, func() {
		w.closed.Store(true)
		// MPI lets a point-to-point request be freed while active (it then
		// completes on its own); a nonblocking collective's may not be.
		for _, r := range left {
			if r.kind == kindCollective {
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
		abandonMu.Lock()
		abandoned = append(abandoned, left...)
		abandonMu.Unlock()
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
func (w *World) orphan(r *request) {
	r.state = stateOrphan
	w.bgMu.Lock()
	w.orphans = append(w.orphans, r)
	w.bgMu.Unlock()
}

// abandon keeps r, pinned, for the life of the process: its World closed
// while MPI held it.
func (w *World) abandon(r *request) {
	for _, q := range r.subs {
		if q != requestNull {
			r.state = stateOrphan
			abandonMu.Lock()
			abandoned = append(abandoned, r)
			abandonMu.Unlock()
			return
		}
	}
	r.release()
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
	var keep []*request
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
				r.release()
			} else {
				keep = append(keep, r)
			}
			break
		}
	}
	if len(keep) > 0 {
		w.bgMu.Lock()
		w.orphans = append(w.orphans, keep...)
		w.bgMu.Unlock()
	}
}

// background counts the requests and notices MPI still holds.
func (w *World) background() int {
	w.bgMu.Lock()
	n := len(w.orphans)
	w.bgMu.Unlock()
	w.noticeMu.Lock()
	n += len(w.notices)
	w.noticeMu.Unlock()
	return n
}

// Wait polls req.Test until the request completes or fails, or ctx ends (a
// short spin, then sleeps of 50 to 200 µs). When ctx ends first, Wait cancels
// req (Request.Cancel) and returns an *Error that matches backend.ErrTimeout
// when the deadline passed, wraps ctx's error, and names the peer.
func Wait(ctx context.Context, req backend.Request) error {
	start := time.Now()
	ended, err := poll(ctx, req.Test, nil)
	if !ended {
		return err
	}
	e := &Error{Call: "MPI_Test", Err: err}
	desc := "request"
	if r, ok := req.(*request); ok {
		e.Call, e.Ranks, desc = r.call, r.ranks(), r.describe()
	}
	e.Msg = fmt.Sprintf("%s not complete after %v", desc, time.Since(start).Round(time.Microsecond))
	if cerr := req.Cancel(); cerr != nil {
		e.Err = errors.Join(err, cerr)
		e.Msg += "; cancel failed"
	} else {
		e.Msg += "; cancelled"
	}
	return e
}
