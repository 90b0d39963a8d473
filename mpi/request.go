//go:build mpi && cgo

package mpi

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// cancelGrace is how long Cancel waits for MPI to let go of a request after
// MPI_Cancel before it leaves the request to the World (ErrInFlight).
var cancelGrace = 50 * time.Millisecond

type reqKind uint8

const (
	kindSend reqKind = iota
	kindRecv
	kindRecvUpTo   // IrecvUpTo: a shorter message is no error
	kindCollective // Allgather, Allreduce*, Barrier
	kindDup        // Dup's two MPI_Comm_idup, a collective too
	kindSplit      // the barrier before Split's MPI_Comm_split (split.go)
)

type reqState uint8

const (
	stateFree   reqState = iota // in the pool
	stateActive                 // owned by the caller
	stateOrphan                 // owned by the World until MPI completes it
	stateClosed                 // taken over by Close: out of the pool for good
)

// request is a started operation: one or more MPI requests over one buffer
// (a message longer than MPI's int count is split into several). Requests
// are pooled, so steady-state Isend/Irecv/Test allocate nothing: a request
// returns to the pool when Test reports completion or Cancel returns, and
// must not be used after that.
//
// A point-to-point request is on its World's list of active requests (prev,
// next, listed; under World.liveMu) from Isend or Irecv until its owner is
// done with it, so a request its owner drops stays reachable, and its pins
// never reach the garbage collector while MPI holds them. mu is held by the
// owner during each call and by Close while it takes the request over; it
// guards state against Close (stateActive to stateClosed).
type request struct {
	w     *World
	kind  reqKind
	state reqState
	call  string // the MPI call that started it, for errors
	peer  int    // -1 for collectives
	tag   int
	buf   unsafe.Pointer // the message (pinned Go memory, C memory, or nil when empty)
	n     int            // bytes of the message, or elements of a reduction
	subs  []cRequest     // MPI requests not yet completed; requestNull once done
	one   [1]cRequest    // subs' storage for the usual single request
	many  []cRequest     // subs' storage for split messages, kept across reuse
	pin   runtime.Pinner // keeps Go buffers in place while MPI holds them
	done  chan struct{}  // the executor's answer in funneled mode

	// The progress thread (progress.go). watched is the owner's: r was
	// handed to the thread and not taken back. ready is set by the thread
	// once it completed r (then it no longer touches r), or by Close when it
	// took r over; wake is signalled with it (capacity 1).
	watched bool
	widx    int // r's index in the thread's list, under its lock
	ready   atomic.Bool
	wake    chan struct{}
	doneAt  int64 // when the thread completed r (ns, set before ready), for the wake-up's latency

	// Ownership (see above).
	mu         sync.Mutex
	prev, next *request
	listed     bool

	// Filled by the functions run on the MPI thread.
	code      int // first MPI error of the last call
	posted    int // subs posted by the last post
	pending   int // subs found incomplete by the last test
	got       int // bytes received, summed over completed subs
	cancelled int // subs that completed cancelled
	closedHit bool

	// Collectives.
	seq   uint64         // the World's collective sequence number
	cmem  unsafe.Pointer // C staging memory, freed on release
	send  unsafe.Pointer // Allreduce source; nil for in place
	dt    backend.DType
	op    backend.Op
	limit int // elements or bytes per MPI call, fixed when posted

	// Native collectives (native.go): which one, and its root.
	native nativeKind
	root   int

	// Split: the arguments of the MPI_Comm_split that follows the barrier.
	color, key int
}

var requestPool = sync.Pool{New: func() any {
	return &request{done: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
}}

func (w *World) getRequest(kind reqKind, call string, peer, tag int) *request {
	r := requestPool.Get().(*request)
	r.w, r.kind, r.call, r.peer, r.tag = w, kind, call, peer, tag
	r.state = stateActive
	r.limit = w.limit
	return r
}

// setSubs sizes subs for a buffer of n units split at r.limit units per call.
func (r *request) setSubs(n int) {
	k := 1
	if n > r.limit {
		k = (n + r.limit - 1) / r.limit
	}
	r.useSubs(k)
}

// useSubs makes subs k null requests.
func (r *request) useSubs(k int) {
	if k == 1 {
		r.subs = r.one[:1]
	} else {
		if cap(r.many) < k {
			r.many = make([]cRequest, k)
		}
		r.subs = r.many[:k]
	}
	for i := range r.subs {
		r.subs[i] = requestNull
	}
}

// pinBuffer pins p's memory for as long as MPI holds it. Pin ignores memory
// that is not Go's (C or device mappings).
func (r *request) pinBuffer(p unsafe.Pointer) {
	if p != nil {
		r.pin.Pin(p)
	}
}

// release unpins the buffers, frees staging memory and returns r to the pool.
func (r *request) release() {
	r.unpin()
	// Keep the Pinner (its internal record is reused, so pinning again does
	// not allocate), the channels and the storage for split messages.
	pin, many, done, wake := r.pin, r.many, r.done, r.wake
	select {
	case <-wake: // a completion nobody waited for
	default:
	}
	*r = request{pin: pin, many: many, done: done, wake: wake}
	requestPool.Put(r)
}

// unpin unpins the buffers and frees staging memory, once MPI no longer
// holds r. Close uses it alone for the requests it took over: they stay out
// of the pool, as their former owner may still call them.
func (r *request) unpin() {
	r.pin.Unpin()
	if r.cmem != nil {
		cFree(r.cmem)
		r.cmem = nil
	}
}

// held reports whether MPI still holds part of r.
func (r *request) held() bool {
	for _, q := range r.subs {
		if q != requestNull {
			return true
		}
	}
	return false
}

// own locks r for one call of its owner. It returns an error matching
// ErrClosed when Close took r over, and panics when r went back to the pool.
func (r *request) own(method string) error {
	r.mu.Lock()
	state := r.state
	if state == stateActive {
		return nil
	}
	r.mu.Unlock()
	if state == stateClosed {
		return &Error{Call: "MPI_" + method, Ranks: r.ranks(), Err: backend.ErrClosed,
			Msg: r.describe() + ": the World was closed, and Close took the request over"}
	}
	panic("mpi: Request." + method + " called after the request completed or was cancelled " +
		"(a Request must not be used once Test reported completion or Cancel returned)")
}

// fate is what becomes of a request its owner is done with.
type fate uint8

const (
	fateRelease fate = iota // MPI let go of it: back to the pool
	fateOrphan              // MPI holds it: the World completes it in the background
	fateAbandon             // MPI holds it on a closed World: pinned for the process's life
)

// finish ends the owner's hold on r, whose mu the owner holds: it takes r
// off the World's active list, unlocks it and settles it as f says. When
// Close took r over meanwhile (r is no longer listed), Close settles it and
// finish only unlocks it.
func (w *World) finish(r *request, f fate) {
	w.liveMu.Lock()
	mine := r.listed
	if mine {
		w.unlink(r)
	}
	w.liveMu.Unlock()
	if !mine {
		r.mu.Unlock()
		return
	}
	if f == fateAbandon && !r.held() {
		f = fateRelease
	}
	switch f {
	case fateRelease:
		r.mu.Unlock()
		r.release()
	case fateOrphan:
		r.mu.Unlock()
		w.orphan(r)
	case fateAbandon:
		r.state = stateClosed
		r.mu.Unlock()
		keepForever(r)
	}
}

// describe names the operation for errors: "Irecv of 12 bytes from process 3 (tag 7)".
func (r *request) describe() string {
	switch r.kind {
	case kindSend:
		return fmt.Sprintf("Isend of %d bytes to process %d (tag %d)", r.n, r.peer, r.tag)
	case kindRecv:
		return fmt.Sprintf("Irecv of %d bytes from process %d (tag %d)", r.n, r.peer, r.tag)
	case kindRecvUpTo:
		return fmt.Sprintf("Irecv of up to %d bytes from process %d (tag %d)", r.n, r.peer, r.tag)
	}
	return fmt.Sprintf("%s (collective #%d)", r.call, r.seq)
}

func (r *request) ranks() []int {
	if r.peer < 0 {
		return nil
	}
	return []int{r.peer}
}

// Functions run on the MPI thread through World.run. Each checks that the
// World is still open; run keeps Close from freeing the communicators while
// they run.

// beginPost readies r for a post function: it clears the results of the
// last call and reports whether the World is still open (closedHit when not).
func (r *request) beginPost() bool {
	r.code, r.posted = 0, 0
	if r.w.closed.Load() {
		r.closedHit = true
		return false
	}
	return true
}

// record notes the outcome of posting sub-request i: req on success, or
// the error code, in which case the post function stops.
func (r *request) record(i int, req cRequest, code int) bool {
	if code != 0 {
		r.code = code
		return false
	}
	r.subs[i] = req
	r.posted++
	return true
}

// postP2P posts the MPI_Isend or MPI_Irecv calls of a message, in order, so
// that the pieces of a split message match in order at the peer.
func postP2P(r *request) {
	if !r.beginPost() {
		return
	}
	w := r.w
	off := 0
	for i := range r.subs {
		n := min(r.limit, r.n-off)
		p := unsafe.Add(r.buf, off)
		var req cRequest
		var code int
		if r.kind == kindSend {
			req, code = cIsend(p, n, r.peer, r.tag, w.comm)
		} else {
			req, code = cIrecv(p, n, r.peer, r.tag, w.comm)
		}
		if !r.record(i, req, code) {
			return
		}
		off += n
	}
}

// testRequest calls MPI_Test on every incomplete sub-request. It stops at the
// first error, leaving that sub-request finished.
func testRequest(r *request) {
	r.code, r.pending = 0, 0
	if r.w.closed.Load() {
		r.closedHit = true
		return
	}
	for i, q := range r.subs {
		if q == requestNull {
			continue
		}
		t := cTest(q)
		r.subs[i] = t.req
		if t.code != 0 {
			if t.req != requestNull {
				cRequestFree(t.req)
			}
			r.subs[i] = requestNull
			r.code = t.code
			return
		}
		switch {
		case !t.done:
			r.pending++
		case t.cancelled:
			r.cancelled++
		default:
			r.got += t.count
		}
	}
}

// cancelRequest calls MPI_Cancel on every incomplete sub-request.
func cancelRequest(r *request) {
	r.code = 0
	if r.w.closed.Load() {
		r.closedHit = true
		return
	}
	for _, q := range r.subs {
		if q != requestNull {
			if code := cCancel(q); code != 0 && r.code == 0 {
				r.code = code
			}
		}
	}
}

// Test is MPI_Test on the request (on each piece of a split message). It
// reports true once the request completed or failed; the request then goes
// back to a pool and must not be used again. A receive that got fewer bytes
// than its buffer holds fails with ErrMessageSize, as does one whose message
// was longer (MPI_ERR_TRUNCATE).
//
// When the World was closed while the request was active, Close took it
// over (cancelled it, and released it or kept it pinned): Test then reports
// true with an error matching backend.ErrClosed.
func (r *request) Test() (bool, error) { return r.test(false) }

// test is Test; with park, a request that is not complete is handed to the
// progress thread (watch), for a caller that parks until it completes.
func (r *request) test(park bool) (bool, error) {
	if err := r.own("Test"); err != nil {
		return true, err
	}
	w := r.w
	if r.watched {
		// The progress thread tests r: read what it found, after a round of
		// our own if the thread is not in one.
		if !r.ready.Load() {
			w.exec.progress.help(w.exec.finalized.Load(), 0)
		}
		if !r.ready.Load() {
			r.mu.Unlock()
			return false, nil
		}
		r.watched = false
	} else {
		progressStats.ownerTests.Add(1)
		if !w.run(testRequest, r) {
			r.closedHit = true
		}
	}
	if r.closedHit {
		w.finish(r, fateAbandon)
		return true, closedError("MPI_Test")
	}
	if r.code != 0 {
		err := w.mpiError("MPI_Test", r.code, r.describe(), r.ranks()...)
		if _, cerr := w.abort(r); cerr != nil {
			return true, errors.Join(err, cerr)
		}
		return true, err
	}
	if r.pending > 0 {
		if park {
			w.exec.progress.watch(r) // from now on the progress thread tests r
		}
		r.mu.Unlock()
		return false, nil
	}
	var err error
	if r.kind == kindRecv && r.cancelled == 0 && r.got != r.n {
		err = &Error{Call: "MPI_Irecv", Ranks: r.ranks(), Err: ErrMessageSize,
			Msg: fmt.Sprintf("%s: received %d bytes", r.describe(), r.got)}
	}
	w.finish(r, fateRelease)
	return true, err
}

// Cancel is MPI_Cancel, then MPI_Test until MPI lets go of the request. It
// returns nil once MPI no longer uses the buffer, whether the request was
// cancelled or completed meanwhile (a receive may then have consumed its
// message). Open MPI cannot cancel a send that has started; when MPI still
// holds the request after a short grace, Cancel returns an error matching
// ErrInFlight: the buffer stays pinned and in MPI's use until the peer
// matches the message, and the World completes the request in the
// background. Either way the request must not be used after Cancel. On a
// request that Close took over, Cancel returns an error matching
// backend.ErrClosed.
func (r *request) Cancel() error {
	_, err := r.cancel()
	return err
}

// cancel is Cancel, also reporting whether MPI cancelled the request
// (MPI_Test_cancelled) rather than completing it.
func (r *request) cancel() (cancelled bool, err error) {
	if err := r.own("Cancel"); err != nil {
		return false, err
	}
	return r.w.abort(r)
}

// abort cancels whatever of r is still pending and releases r, or leaves it
// to the World when MPI does not let go within cancelGrace. The caller holds
// r.mu; abort ends its hold (finish).
func (w *World) abort(r *request) (cancelled bool, err error) {
	w.exec.progress.unwatch(r)
	if !w.run(cancelRequest, r) || r.closedHit {
		w.finish(r, fateAbandon)
		return false, closedError("MPI_Cancel")
	}
	var cancelErr error
	if r.code != 0 {
		cancelErr = w.mpiError("MPI_Cancel", r.code, r.describe(), r.ranks()...)
	}
	deadline := time.Now().Add(cancelGrace)
	for {
		if !w.run(testRequest, r) || r.closedHit {
			w.finish(r, fateAbandon)
			return false, closedError("MPI_Cancel")
		}
		if r.code != 0 {
			continue // that piece finished (with an error); test the others
		}
		if r.pending == 0 {
			cancelled = r.cancelled > 0
			w.finish(r, fateRelease)
			return cancelled, cancelErr
		}
		if time.Now().After(deadline) {
			desc, ranks := r.describe(), r.ranks()
			w.finish(r, fateOrphan)
			return false, &Error{Call: "MPI_Cancel", Ranks: ranks, Err: errors.Join(ErrInFlight, cancelErr),
				Msg: desc + ": MPI still holds the buffer; it stays pinned until the peer matches the message"}
		}
		time.Sleep(20 * time.Microsecond)
	}
}
