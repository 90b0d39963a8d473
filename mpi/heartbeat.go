//go:build mpi && cgo

package mpi

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// The heartbeat tells a process that is alive but late (computing before it
// calls) from one that stopped (SIGSTOP, frozen, its MPI progress thread
// stuck): the progress thread of every process sends a heartbeat to every
// other process hbPerInterval times each interval, on a duplicate of
// MPI_COMM_WORLD of its own (MPI_Isend of 8 bytes: the sender's
// interval), and keeps one receive
// posted (MPI_Irecv from MPI_ANY_SOURCE) that it tests every hbCheck,
// recording when it heard from whom (liveness.go has the rule). A wait on
// other processes (a World's collective, Wait, a request's Hung) ends with
// an error matching ErrHung, naming them, once one of them counts as hung:
// a process alive but late keeps sending, and is waited for.
//
// The thread makes the calls itself, under serialMu at
// MPI_THREAD_SERIALIZED, so the heartbeat works at every thread level. A
// send to a process whose previous heartbeat has not completed is skipped,
// so a stopped process never accumulates more than one per sender.
type heartbeat struct {
	// Set by start (on the thread, inside the job that starts MPI) and
	// read by the thread; on, interval and the published state below are
	// also read by waiters.
	comm      cComm
	mode      mode // how the thread calls MPI
	me, size  int
	interval  time.Duration
	check     time.Duration
	sendBuf   unsafe.Pointer // C memory: the interval in ns, which every send reads
	recvBuf   unsafe.Pointer // C memory: the posted receive's
	sends     []cRequest     // per process: the heartbeat in flight, or requestNull
	recv      cRequest       // the posted receive
	src       []int32        // the heartbeats received by one drain
	val       []int64
	nextSend  int64
	nextCheck int64
	live      liveness

	// Published by the thread for the waiters.
	on       atomic.Bool
	hungNow  []atomic.Bool // per process (rank in MPI_COMM_WORLD)
	lastTick atomic.Int64  // when the thread last checked (Unix ns)
	alarmMu  sync.Mutex
	alarm    chan struct{} // closed, and replaced, when a process becomes hung
}

// hbTag is the heartbeats' tag on their communicator.
const hbTag = 1

// heartbeatStats counts the heartbeats this process sent, skipped (the
// previous one to that process still in flight) and received, the thread's
// checks and alarms, and keeps the most the thread checked after its time,
// its longest tick and the longest silence of a process that ended with a
// heartbeat: for tests, and the measures in docs/MPI.md.
var heartbeatStats struct {
	sent, skipped, received, checks, alarms atomic.Int64
	late                                    atomic.Int64 // the latest the thread checked after its time (ns)
	longest                                 atomic.Int64 // the longest tick (ns)
	silence                                 atomic.Int64 // the longest silence that ended with a heartbeat (ns)
}

// start makes the heartbeat's communicator (collective: every process's
// startMPI calls it) and, with a non-zero interval, turns the heartbeat on.
// It runs on the thread, which has not yet served a round. A process whose
// heartbeat is off still makes the communicator, so that the processes'
// MPI_Comm_dup calls match whatever their settings.
func (h *heartbeat) start(interval time.Duration, m mode) error {
	comm, me, size, call, code := cHeartbeatComm()
	if code != 0 {
		msg, class := cErrorString(code)
		return &Error{Call: call, Code: code, Class: class, Msg: "the heartbeat's communicator: " + msg}
	}
	h.comm, h.me, h.size, h.mode = comm, me, size, m
	h.hungNow = make([]atomic.Bool, size)
	h.alarm = make(chan struct{})
	h.recv = requestNull
	if interval <= 0 || size < 2 {
		return nil
	}
	h.interval, h.check = interval, hbCheck(interval)
	h.sendBuf, h.recvBuf = cMalloc(8), cMalloc(8)
	*(*int64)(h.sendBuf) = int64(interval)
	h.sends = make([]cRequest, size)
	for i := range h.sends {
		h.sends[i] = requestNull
	}
	h.src, h.val = make([]int32, 64), make([]int64, 64)
	// A pause of the checks longer than this is not listening (liveness).
	h.live = newLiveness(size, h.check+hbSlack/2)
	h.on.Store(true)
	return nil
}

// due reports whether the thread should tick now, or else in how long: the
// wait of a thread with nothing else to do (negative: never, the heartbeat
// is off).
func (h *heartbeat) due() (bool, time.Duration) {
	if !h.on.Load() {
		return false, -1
	}
	now := time.Now().UnixNano()
	return now >= h.nextCheck, time.Duration(h.nextCheck - now)
}

// tick sends the heartbeats when the interval has passed, receives those
// that arrived and judges the processes (on the thread, in the mode's way
// of calling MPI).
func (h *heartbeat) tick(now int64) {
	if h.mode == modeSerialized {
		lockSerial()
		defer unlockSerial()
	}
	if now >= h.nextSend {
		h.send()
		h.nextSend = now + int64(h.interval/hbPerInterval)
	}
	if h.nextCheck != 0 && now-h.nextCheck > heartbeatStats.late.Load() {
		heartbeatStats.late.Store(now - h.nextCheck)
	}
	h.nextCheck = now + int64(h.check)
	h.receive(now)
	if d := time.Now().UnixNano() - now; d > heartbeatStats.longest.Load() {
		heartbeatStats.longest.Store(d)
	}
}

// send sends a heartbeat to every other process whose previous one
// completed.
func (h *heartbeat) send() {
	for p := range h.sends {
		if p == h.me {
			continue
		}
		if q := h.sends[p]; q != requestNull {
			t := cTest(q)
			h.sends[p] = t.req
			if t.code == 0 && !t.done {
				heartbeatStats.skipped.Add(1)
				continue
			}
			if t.code != 0 && t.req != requestNull {
				cRequestFree(t.req)
				h.sends[p] = requestNull
			}
		}
		if q, code := cIsend(h.sendBuf, 8, p, hbTag, h.comm); code == 0 {
			h.sends[p] = q
			heartbeatStats.sent.Add(1)
		}
	}
}

// receive takes the heartbeats that arrived, then publishes which processes
// count as hung, and rings the alarm when one became so.
func (h *heartbeat) receive(now int64) {
	h.live.check(now)
	for {
		req, n, code := cHeartbeatDrain(h.comm, hbTag, h.recv, h.recvBuf, h.src, h.val)
		h.recv = req
		for i := range n {
			h.live.heard(int(h.src[i]), h.val[i])
		}
		heartbeatStats.received.Add(int64(n))
		heartbeatStats.silence.Store(h.live.maxGap)
		if code != 0 || n < len(h.src) {
			break
		}
	}
	heartbeatStats.checks.Add(1)
	h.lastTick.Store(now)
	rang := false
	for p := range h.hungNow {
		hung := h.live.hung(p)
		if h.hungNow[p].Swap(hung) != hung && hung {
			rang = true
		}
	}
	if rang {
		heartbeatStats.alarms.Add(1)
		h.alarmMu.Lock()
		close(h.alarm)
		h.alarm = make(chan struct{})
		h.alarmMu.Unlock()
	}
}

// stop turns the heartbeat off and frees what it holds, before
// MPI_Finalize (on the thread).
func (h *heartbeat) stop() {
	if h.hungNow == nil || h.comm == commNull {
		return // never started, or stopped
	}
	if h.mode == modeSerialized {
		lockSerial()
		defer unlockSerial()
	}
	h.on.Store(false)
	if h.recv != requestNull {
		cCancel(h.recv)
		for deadline := time.Now().Add(cancelGrace); ; {
			t := cTest(h.recv)
			h.recv = t.req
			if t.done || t.code != 0 || time.Now().After(deadline) {
				break
			}
		}
		if h.recv != requestNull {
			cRequestFree(h.recv)
		}
		h.recv = requestNull
	}
	for p, q := range h.sends {
		if q != requestNull {
			cRequestFree(q) // a send to a stopped process completes on its own
			h.sends[p] = requestNull
		}
	}
	cCommFree(h.comm)
	h.comm = commNull
	// The buffers stay: MPI may still read a freed send's.
}

// alarmed returns the channel the thread closes when a process becomes
// hung, nil while the heartbeat is off.
func (h *heartbeat) alarmed() <-chan struct{} {
	if !h.on.Load() {
		return nil
	}
	h.alarmMu.Lock()
	defer h.alarmMu.Unlock()
	return h.alarm
}

// hung reports whether process p (its rank in MPI_COMM_WORLD) counts as
// hung now: at the thread's latest check, if that check is recent (a
// thread that fell behind tells nothing).
func (h *heartbeat) hung(p int) bool {
	if !h.on.Load() || p < 0 || p >= len(h.hungNow) || !h.hungNow[p].Load() {
		return false
	}
	return time.Now().UnixNano()-h.lastTick.Load() < int64(h.check+hbSlack)
}

// proc is the rank in MPI_COMM_WORLD of w's process r.
func (w *World) proc(r int) int {
	switch {
	case w.noHB || r < 0 || r >= w.size:
		return -1
	case w.procs == nil:
		return r
	}
	return w.procs[r]
}

// hungFor reports whether a process r waits for counts as hung: its peer,
// or for a collective any other process of its World.
func (w *World) hungFor(r *request) bool {
	h := &w.exec.hb
	if !h.on.Load() {
		return false
	}
	if r.peer >= 0 {
		return h.hung(w.proc(r.peer))
	}
	for q := range w.size {
		if q != w.rank && h.hung(w.proc(q)) {
			return true
		}
	}
	return false
}

// hungError is the error of a wait for r that ended because processes it
// waits for are hung; nil when none is now.
func (w *World) hungError(call string, r *request, waited time.Duration) *Error {
	h := &w.exec.hb
	var hung []int
	for q := range w.size {
		if q != w.rank && (r.peer < 0 || q == r.peer) && h.hung(w.proc(q)) {
			hung = append(hung, q)
		}
	}
	if len(hung) == 0 {
		return nil
	}
	after := ""
	if waited > 0 {
		after = " after " + waited.Round(time.Microsecond).String()
	}
	return &Error{Call: call, Ranks: hung, Err: ErrHung, ended: true, Msg: fmt.Sprintf(
		"%s not complete on process %d of %d%s: process(es) %v stopped responding (hung: no heartbeat for more than %v, interval %v)",
		r.describe(), w.rank, w.size, after, hung, h.interval+hbSlack, h.interval)}
}

// Hung reports, for a point-to-point request, an error matching ErrHung
// (and backend.ErrTimeout) that names the peer once the peer stopped
// responding (backend.HangReporter), nil otherwise. A wait polling Test
// may end then instead of at its timeout; the request is still the
// caller's, to cancel.
func (r *request) Hung() error {
	w := r.w
	if w == nil || r.peer < 0 || !w.exec.hb.hung(w.proc(r.peer)) {
		return nil
	}
	if e := w.hungError(r.call, r, 0); e != nil {
		return e
	}
	return nil // alive again meanwhile
}
