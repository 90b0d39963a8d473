//go:build mpi && cgo

package mpi

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
)

// parseThreadLevel reads GOCOLL_MPI_THREAD: single, funneled, serialized or
// multiple (case-insensitive, with or without MPI_THREAD_).
func parseThreadLevel(s string) (ThreadLevel, error) {
	switch strings.TrimPrefix(strings.ToLower(s), "mpi_thread_") {
	case "", "multiple":
		return ThreadMultiple, nil
	case "serialized":
		return ThreadSerialized, nil
	case "funneled":
		return ThreadFunneled, nil
	case "single":
		return ThreadSingle, nil
	}
	return 0, fmt.Errorf("GOCOLL_MPI_THREAD=%q: want single, funneled, serialized or multiple", s)
}

// mode is how the World reaches MPI, chosen from the provided thread level.
type mode int

const (
	modeConcurrent mode = iota // MPI_THREAD_MULTIPLE: call from any goroutine
	modeSerialized             // MPI_THREAD_SERIALIZED: one call at a time in the process, behind serialMu
	modeFunneled               // MPI_THREAD_FUNNELED or SINGLE: every call on the executor's thread
)

func modeFor(l ThreadLevel) mode {
	switch {
	case l >= ThreadMultiple:
		return modeConcurrent
	case l == ThreadSerialized:
		return modeSerialized
	}
	return modeFunneled
}

// job is one piece of MPI work for the executor: fn(r) on the hot path (a
// top-level function and a pooled request, so sending it allocates nothing),
// or f on cold paths.
type job struct {
	fn   func(*request)
	r    *request
	f    func()
	done chan struct{}
}

// executor is the OS thread that initialized MPI: MPI's "main thread". It
// runs MPI_Init_thread and MPI_Finalize (which MPI wants on the same thread)
// and, in funneled mode, every other MPI call too. It is also the process's
// MPI progress thread (progress.go). There is one per process.
type executor struct {
	jobs      chan job
	quit      chan struct{} // closed when the executor stops, after MPI_Finalize
	finalized atomic.Bool
	progress  progress
	hb        heartbeat // heartbeat.go
}

func startExecutor() *executor {
	e := &executor{jobs: make(chan job), quit: make(chan struct{})}
	e.progress.wake = make(chan struct{}, 1)
	// C memory, never freed: a helper's round may read it until the process ends.
	e.progress.news = (*atomic.Int32)(cMalloc(8))
	e.progress.news.Store(0)
	e.progress.mode = modeFunneled // until startMPI knows the level
	go e.loop()
	return e
}

func (e *executor) loop() {
	// Never unlocked: the goroutine keeps MPI's main thread for itself until
	// MPI_Finalize, then exits, which ends the thread.
	runtime.LockOSThread()
	e.serve()
}

func (e *executor) runJob(j job) {
	if j.fn != nil {
		j.fn(j.r)
	} else {
		j.f()
	}
	j.done <- struct{}{}
}

// do runs f on the executor's thread and waits for it. It reports false,
// without running f, when the executor has stopped.
func (e *executor) do(f func()) bool {
	d := make(chan struct{}, 1)
	select {
	case e.jobs <- job{f: f, done: d}:
		<-d
		return true
	case <-e.quit:
		return false
	}
}

// serialMu serializes every MPI call of the process at MPI_THREAD_SERIALIZED.
// The standard forbids two threads inside MPI at once at that level, whatever
// the communicators, so one lock covers every World, duplicate and sub-World
// (and Close: no call runs while it frees the communicators).
var serialMu sync.Mutex

// serialProbe counts the MPI calls in progress under serialMu while a test
// turns it on, and keeps the most seen at once.
var serialProbe struct {
	on       atomic.Bool
	in, most atomic.Int32
}

// lockSerial takes serialMu for one MPI call (or several made as one).
func lockSerial() {
	serialMu.Lock()
	if serialProbe.on.Load() {
		n := serialProbe.in.Add(1)
		for m := serialProbe.most.Load(); n > m && !serialProbe.most.CompareAndSwap(m, n); m = serialProbe.most.Load() {
		}
	}
}

func unlockSerial() {
	if serialProbe.on.Load() {
		serialProbe.in.Add(-1)
	}
	serialMu.Unlock()
}

// run calls fn(r), where the thread level allows: on this goroutine
// (concurrent), under serialMu (serialized), or on the executor (funneled). fn
// checks w.closed itself; run guarantees Close cannot free the communicators
// while fn runs. It reports false, without running fn, when the executor
// has stopped (after MPI_Finalize; the World is closed before that, so in
// the other modes fn sees w.closed).
func (w *World) run(fn func(*request), r *request) bool {
	switch w.mode {
	case modeConcurrent:
		w.mu.RLock()
		fn(r)
		w.mu.RUnlock()
	case modeSerialized:
		lockSerial()
		fn(r)
		unlockSerial()
	default:
		select {
		case w.exec.jobs <- job{fn: fn, r: r, done: r.done}:
			<-r.done
		case <-w.exec.quit:
			return false
		}
	}
	return true
}

// cold runs f like run, for calls off the hot path (f may allocate). With
// exclusive, no other MPI call of this World runs at the same time, even with
// MPI_THREAD_MULTIPLE (Close frees the communicators that way).
func (w *World) cold(exclusive bool, f func()) bool {
	switch {
	case w.mode == modeFunneled:
		return w.exec.do(f)
	case w.mode == modeSerialized:
		lockSerial()
		defer unlockSerial()
	case exclusive:
		w.mu.Lock()
		defer w.mu.Unlock()
	default:
		w.mu.RLock()
		defer w.mu.RUnlock()
	}
	if w.exec.finalized.Load() {
		return false
	}
	f()
	return true
}
