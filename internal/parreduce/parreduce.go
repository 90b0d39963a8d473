// Package parreduce runs a large element-wise host computation (a
// reduction, a scaling, a copy) as chunks spread over the process's one
// pool of GOMAXPROCS worker goroutines: synchronously (Job.Run) or as a
// batch of copies between Go memory and a buffer started and waited for
// together (Batch). A call takes helpers only from the workers idle at the
// time (a Run's caller counts as a busy one; a Batch's waiter, which copies
// only in Wait, does not), so ranks that reduce or copy at the same time
// share the cores instead of oversubscribing them.
//
// A chunk is computed by exactly one goroutine, and the caller's Ranger
// computes every element from its own sources alone, so the result is the
// same bits whatever the chunking and however many workers took part.
package parreduce

import (
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

// ChunkBytes is the smallest chunk worth a worker: at memory speed a few
// tens of microseconds of work, well above the cost of handing it over. A
// multiple of 64, so chunks of any element size up to 64 bytes start on a
// cache line where the buffer does.
const ChunkBytes = 256 << 10

// Ranger computes elements [lo, hi) of a job. Calls on disjoint ranges run
// concurrently.
type Ranger interface{ Range(lo, hi int) }

// Knob caps the goroutines (the caller included) that one call of a class
// of callers uses: 0, the default, means the pool's size (GOMAXPROCS when
// the pool started), 1 the caller alone (the serial computation).
// Benchmarks set it to compare the two.
type Knob struct{ n atomic.Int32 }

// Set sets the cap to n (0: the default) and returns the previous value.
func (k *Knob) Set(n int) int { return int(k.n.Swap(int32(max(n, 0)))) }

// Get returns the cap (0: the default).
func (k *Knob) Get() int { return int(k.n.Load()) }

// Limit returns the cap a call takes: the knob's, else the process's
// share (SetShare), else 0 (the pool's size).
func (k *Knob) Limit() int {
	if n := k.Get(); n != 0 {
		return n
	}
	return int(share.Load())
}

// share is SetShare's cap.
var share atomic.Int32

// SetShare caps the goroutines of one call of every class whose knob is at
// its default (0) at n (0: the pool's size), and returns the previous
// share. The mpi package sets it to the node's cores divided by the job's
// processes on the node: a process that may run on every core of a node
// it shares with other processes then leaves them theirs, where each
// process's pool alone would take all of them (8 processes on 16 cores,
// each copying over 16 workers at once).
func SetShare(n int) int { return int(share.Swap(int32(max(n, 0)))) }

// The classes of callers. Reduce and Device start at GOCOLL_HOST_WORKERS
// where the environment gives a positive number (1: every reduction on its
// caller alone), else 0; Copy starts at 0.
var (
	// Reduce caps internal/hostmath's reductions (collective's CPU
	// reductions: Scan, Exscan, Reduce of a type without kernels).
	Reduce Knob
	// Device caps the host backend's kernels (each device's worker).
	Device Knob
	// Copy caps each of a Batch's copies (collective's large host copies:
	// a comm's staging and the direct exchange's gathers).
	Copy Knob
)

func init() {
	if n, ok := envWorkers(os.Getenv("GOCOLL_HOST_WORKERS")); ok {
		Reduce.Set(n)
		Device.Set(n)
	}
}

// envWorkers parses GOCOLL_HOST_WORKERS: a positive number of workers.
func envWorkers(v string) (int, bool) {
	n, err := strconv.Atoi(v)
	return n, err == nil && n > 0 && n <= math.MaxInt32
}

// Job is one caller's state for Run, kept by the caller and reused so that a
// call allocates nothing. The zero value is ready; a Job runs one call at a
// time and must not be copied.
type Job struct {
	r      Ranger
	n      int
	chunk  int
	chunks int64
	// want is the helpers the call may take, helpers those it took (the
	// caller's alone).
	want, helpers int
	next          atomic.Int64 // the next chunk to claim
	// state is the helpers inside the call, and closed once the caller has
	// found no chunk left: a helper that arrives later does not enter, so
	// the caller never waits for one that has not started (a worker the
	// scheduler is slow to run, on a machine busy with other work).
	state atomic.Int64
	done  chan struct{} // the last helper to leave a closed call signals here
}

// closed is state's flag of a closed call; the bits below count helpers.
const closed = 1 << 62

// Run calls r.Range over [0, n) in chunks of chunk elements (the last one
// shorter), the caller and up to k.Get()-1 (at most the pool's size) pool
// workers claiming chunks until none are left, and returns when every chunk
// is computed. A job of one chunk, or a cap of 1, runs r.Range(0, n) on the
// caller alone. Workers are taken only while the process has idle ones: a
// caller counts itself as one busy worker, and ranks that reduce at once
// divide the pool among them as its workers come free.
func (j *Job) Run(k *Knob, r Ranger, n, chunk int) {
	if !j.open(k, r, n, chunk) {
		if n > 0 {
			r.Range(0, n)
		}
		return
	}
	p := procPool
	p.idle.Add(-1) // the caller is a busy worker while it computes chunks
	j.drain(p)
	p.idle.Add(1)
	j.close()
}

// open prepares a call computed in chunks on the pool and reports whether
// it is one (false: the call runs on its caller alone). The call is open
// to helpers when open returns; none has been asked for yet.
func (j *Job) open(k *Knob, r Ranger, n, chunk int) bool {
	chunk = max(chunk, 1)
	chunks := (n + chunk - 1) / chunk
	limit := k.Limit()
	if limit == 1 || chunks <= 1 || n <= 0 {
		return false
	}
	p := thePool()
	if limit == 0 || limit > p.size {
		limit = p.size
	}
	if j.done == nil {
		j.done = make(chan struct{}, 1)
	}
	j.r, j.n, j.chunk, j.chunks = r, n, chunk, int64(chunks)
	j.want, j.helpers = min(limit, chunks)-1, 0
	j.next.Store(0)
	j.state.Store(0) // open, after the fields a helper reads once inside
	return true
}

// ask hands the call to idle workers, up to its share, while chunks are
// left for them beside its caller's.
func (j *Job) ask(p *pool) {
	for j.helpers < j.want && j.chunks-j.next.Load() > int64(j.helpers+1) && p.take() {
		j.helpers++
		p.jobs <- j
	}
}

// drain is the caller's part: compute chunks until none are left, asking
// between chunks for helpers (a worker that comes free later still joins).
func (j *Job) drain(p *pool) {
	for {
		j.ask(p)
		if !j.claim() {
			return
		}
	}
}

// close closes the call, its chunks all claimed, and waits for the helpers
// still inside to leave (each is computing its last chunk).
func (j *Job) close() {
	if j.state.Or(closed) != 0 {
		<-j.done // helpers still inside: the last to leave signals
	}
	j.r = nil // hold no reference to the caller's memory
}

// help is a pool worker's part in a call of j it was handed: enter unless
// the call is closed (its caller found no chunk left, and may have returned
// and started another call, which the worker then helps), compute chunks
// until none are left, leave.
func (j *Job) help() {
	for {
		s := j.state.Load()
		if s&closed != 0 {
			return
		}
		if j.state.CompareAndSwap(s, s+1) {
			break
		}
	}
	for j.claim() {
	}
	if j.state.Add(-1) == closed {
		j.done <- struct{}{}
	}
}

// claim computes the next unclaimed chunk and reports whether there was one.
func (j *Job) claim() bool {
	c := j.next.Add(1) - 1
	if c >= j.chunks {
		return false
	}
	lo := int(c) * j.chunk
	j.r.Range(lo, min(lo+j.chunk, j.n))
	return true
}

// pool is the process's workers. idle counts the workers not busy: it starts
// at size, each caller of a parallel Run holds one while it computes and each
// helper it takes holds one, so helpers plus callers stay at most size
// (idle may go below zero when more callers than size run at once: then they
// get no helpers). A helper's ticket is in the jobs channel, whose capacity
// is size, so a send never blocks.
type pool struct {
	size int
	idle atomic.Int32
	jobs chan *Job
}

// take takes an idle worker, if there is one.
func (p *pool) take() bool {
	for {
		n := p.idle.Load()
		if n <= 0 {
			return false
		}
		if p.idle.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

var (
	poolOnce sync.Once
	procPool *pool
)

// thePool starts the pool on first use: GOMAXPROCS goroutines, living as
// long as the process.
func thePool() *pool {
	poolOnce.Do(func() {
		size := runtime.GOMAXPROCS(0)
		procPool = &pool{size: size, jobs: make(chan *Job, size)}
		procPool.idle.Store(int32(size))
		for range size {
			go worker(procPool)
		}
	})
	return procPool
}

// worker computes chunks of the jobs it is handed until each has none left.
func worker(p *pool) {
	for j := range p.jobs {
		j.help()
		p.idle.Add(1)
	}
}
