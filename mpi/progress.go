//go:build mpi && cgo

package mpi

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/internal/parreduce"
)

// MPI progresses only inside MPI calls. The executor (thread.go) is also the
// process's progress thread, shared by every World: the World's collectives
// from the moment they are posted, and the Isend and Irecv requests that a
// Wait parks on, are watched by it, and it tests all of them at once
// (MPI_Testsome) until MPI completes them, then signals the request's wake
// channel, on which the waiter parks. A request that its owner polls with
// Test (a group's transport waits do) is not handed over: Test makes its
// MPI_Test as before, and a Test on a watched request reads what the thread
// found (after a round of its own when the thread is between rounds).
//
// While requests are pending and waited for (hot), the thread spins when
// the node has cores to spare for it (setLocal); otherwise it tests once
// per round (no spin in C) and yields the processor between rounds that
// complete nothing (sched_yield: the process's other threads, and other
// processes on the same core, run first; with none runnable it tests
// again at once). MPI advances a large collective a fragment per test, so
// any sleep between tests stalls it. Where the node's processes outnumber
// its cores, though, a yielding thread is never alone on its core: every
// process's thread yields to the others' and back, and together they take
// the cores from the work they wait for (and from anything else on the
// node). There, after easeYields rounds in a row that complete nothing,
// the thread sleeps between rounds (nanosleep, from easeMin doubling to
// easeMax), and yields again from the next completion, post or parked
// waiter on. Sleeping between rounds from the first (from sleepMin
// doubling to sleepMax, collective.go's polling constants) is kept for
// GOCOLL_MPI_PROGRESS=backoff, for users who would rather spend less CPU
// than time; GOCOLL_MPI_PROGRESS=yield yields and never sleeps.
// Requests nobody waits for are tested every coldTick; with nothing pending
// the thread blocks on a channel.
//
// Thread levels: at MPI_THREAD_MULTIPLE it calls MPI_Testsome while other
// goroutines post; at MPI_THREAD_SERIALIZED it takes serialMu for each
// MPI_Testsome, as every other call does; at MPI_THREAD_FUNNELED (and
// SINGLE) it is MPI's main thread, and runs the other goroutines' calls
// (jobs) between its tests.
const (
	// spinRound is how long one MPI_Testsome round keeps testing in C
	// while nothing completes, before the thread looks at new requests,
	// jobs and serialMu's other users.
	spinRound = 5 * time.Microsecond
	// hotFor: requests posted within it, or with a waiter parked on them,
	// are waited for; the others (a group's control receives, pending for
	// the group's life and polled by their owner) are only tested every
	// coldTick, so an open group does not keep the thread spinning.
	hotFor   = 10 * time.Millisecond
	coldTick = time.Millisecond
	// Easing, where the node's processes outnumber its cores: easeYields
	// empty rounds, each followed by a yield, then sleeps from easeMin
	// doubling to easeMax between rounds. The package's tests (3- and
	// 4-process jobs on 2 cores) took 252 CPU-seconds instead of 293, in
	// 197 s against 188; sleeping up to 1 ms after 8 empty rounds saved
	// no more and took 40% longer, the shared-memory window's chains of
	// short steps up to 14 times as long (docs/MPI.md, Progress).
	easeYields = 16
	easeMin    = 10 * time.Microsecond
	easeMax    = 100 * time.Microsecond
	// defaultHelpFor is how long a waiter drives MPI itself before it
	// parks (await) without GOCOLL_MPI_HELP: longer than the collectives
	// of a few MiB. The thread sleeps meanwhile (it spins, or yields,
	// once the waiter parked), so waiting longer costs no more CPU. On
	// the 16-core host (bench/h100-2026-12-07, help/) a 4 MiB
	// MPI_Iallreduce of 4 processes took 1890 us with 100 ms against 2458
	// us with 1 ms (8 processes: 2742 against 2914 us; 1 and 16 MiB
	// within 4%): a call that outlasted the 1 ms parked, and the wake-up
	// took 20-300 us.
	defaultHelpFor = 100 * time.Millisecond
)

var (
	// helpSlice is how long one round of a driving waiter keeps testing in
	// C while nothing completes (await), before it looks at its context,
	// its timer and helpFor again; a request posted meanwhile ends the
	// round at once (progress.news). With rounds of one MPI_Testsome each
	// (a cgo call apiece) and the thread woken at each post, a 1 / 4 MiB
	// World.AllreduceF32 of 2 processes on 2 cores took 1.27-1.31 /
	// 1.14-1.19 times as long as MPI_Iallreduce and MPI_Test in a loop from
	// C in the same processes; with rounds of up to 1 ms and the thread
	// left asleep, 1.13-1.17 / 1.08-1.14 (medians of 5, three runs each,
	// alternating; on the 16-core host 1.18 -> 1.00 with 4 processes and
	// 1.49 -> 1.15 with 8 at 1 MiB; docs/MPI.md, Progress). Each return to
	// Go between tests and each wake-up of another thread took the core
	// from MPI's progress for a moment. A variable for the tests.
	helpSlice = time.Millisecond
)

// progressStats counts what the progress thread and the waiters did, for
// tests and GOCOLL_MPI_STATS: rounds of MPI_Testsome (threadRounds of
// them the thread's own, the others a driving waiter's), naps (backing off),
// yields, ticks (cold waits), completions signalled, waiters woken, and
// MPI_Test calls the requests' owners made themselves; awaits that found
// their request done while helping (helped) or after parking (parked), and
// the parked ones' time from the completion to the waiter running again
// (wakeNs in all, wakeMax the longest).
var progressStats struct {
	rounds, threadRounds, naps, yields, ticks, completed, wakeups, ownerTests atomic.Int64
	helped, parked, wakeNs, wakeMax                                           atomic.Int64
}

// printProgressStats writes progressStats to stderr, one line, where
// GOCOLL_MPI_STATS is set (at Finalize): what a slow wait is made of.
func printProgressStats() {
	if os.Getenv("GOCOLL_MPI_STATS") == "" {
		return
	}
	s := &progressStats
	mean := 0.0
	if n := s.parked.Load(); n > 0 {
		mean = float64(s.wakeNs.Load()) / float64(n) / 1e3
	}
	fmt.Fprintf(os.Stderr, "gocoll mpi stats (pid %d): rounds %d (the thread's %d), yields %d, naps %d, ticks %d, completed %d, owner tests %d; "+
		"awaits done while helping %d, after parking %d (wake-ups %d; from completion to the waiter running: mean %.1f us, max %.1f us)\n",
		os.Getpid(), s.rounds.Load(), s.threadRounds.Load(), s.yields.Load(), s.naps.Load(), s.ticks.Load(), s.completed.Load(), s.ownerTests.Load(),
		s.helped.Load(), s.parked.Load(), s.wakeups.Load(), mean, float64(s.wakeMax.Load())/1e3)
	if n := shmCalls.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "gocoll mpi stats (pid %d): shared-memory window: %d calls, %d fences, %d reading inputs where they lie (%d writing results straight); "+
			"per call %.1f us, of which %.1f us in fences and %.1f us reducing or copying inputs where they lie\n",
			os.Getpid(), n, shmFences.Load(), shmZeroCopy.Load(), shmDirect.Load(), float64(shmCallNs.Load())/float64(n)/1e3,
			float64(shmFenceNs.Load())/float64(n)/1e3, float64(shmWorkNs.Load())/float64(n)/1e3)
	}
}

// progress is the progress thread's state, part of the executor.
type progress struct {
	mu      sync.Mutex // held by the thread for each round, and by unwatch
	watched []*request // under mu: requests the thread tests
	reqs    []cRequest // under mu: their pieces, for MPI_Testsome
	who     []piece    // under mu: reqs[i] is piece who[i]
	out     []doneResult

	inMu     sync.Mutex
	incoming []*request // under inMu: watched requests the thread has not taken yet
	// news is set (in C memory, read by gm_testsome) while incoming holds
	// requests: a round testing in C for a while stops early, so a request
	// posted meanwhile is not left out of the tests for a whole slice.
	news *atomic.Int32
	wake chan struct{}

	mode         mode // how to call MPI, set by startMPI before any request is watched
	policy       progressPolicy
	local, cores int // processes and processors online on this node, for tests and docs
	spin         atomic.Bool
	nap          atomic.Bool  // not spinning: sleep between rounds (backoff) rather than yield
	ease         atomic.Bool  // not spinning: yield easeYields empty rounds, then sleep between rounds
	pending      atomic.Int64 // watched requests not yet completed
	helpers      atomic.Int32 // waiters driving MPI themselves (await): the thread stands back
	waiters      atomic.Int64 // goroutines parked in await
	lastPost     atomic.Int64 // when the last request was watched (Unix ns)
}

// piece is one MPI request of a watched request: request w of the round,
// sub-request s.
type piece struct{ w, s int32 }

// progressPolicy is GOCOLL_MPI_PROGRESS: "spin", "yield" or "backoff"
// forces the progress thread's behaviour while requests are pending; ""
// or "auto" decides between spin and yield from the node (setLocal).
type progressPolicy uint8

const (
	policyAuto progressPolicy = iota
	policySpin
	policyYield
	policyBackoff
)

// helpFor is how long a waiter drives MPI itself before it parks:
// GOCOLL_MPI_HELP, read at MPI's start (parseHelp), else defaultHelpFor.
var helpFor atomic.Int64

func init() { helpFor.Store(int64(defaultHelpFor)) }

// parseHelp reads GOCOLL_MPI_HELP: a duration from 0 (park at once) to 1 s,
// in Go's syntax ("100us", "1ms", "100ms"); "" is defaultHelpFor.
func parseHelp(s string) (time.Duration, error) {
	if s == "" {
		return defaultHelpFor, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > time.Second {
		return 0, fmt.Errorf("GOCOLL_MPI_HELP=%q: want a duration from 0 to 1s, such as 1ms or 100ms", s)
	}
	return d, nil
}

func parseProgressPolicy(s string) (progressPolicy, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return policyAuto, nil
	case "spin":
		return policySpin, nil
	case "yield":
		return policyYield, nil
	case "backoff":
		return policyBackoff, nil
	}
	return 0, fmt.Errorf("GOCOLL_MPI_PROGRESS=%q: want auto, spin, yield or backoff", s)
}

// setLocal decides whether the thread spins while requests are pending.
// Under the auto policy it spins when every process on this node (local,
// from MPI_Comm_split_type with MPI_COMM_TYPE_SHARED) can have two of its
// processors online (cores), one for its work and one for the thread, and
// this process may run on two or more (runtime.NumCPU, which counts the
// processors of its affinity mask): a process that mpirun bound to one core
// (Open MPI's default for 2 processes) would share that core between its
// work and a spinning thread. Spinning there, or with more threads than
// cores, made the all-reduce of 2 processes on 2 cores several times
// slower on a loaded machine (docs/MPI.md, Progress); there the thread
// yields between rounds instead. Sleeping between rounds (backoff) made
// a 1 MiB all-reduce of 2 processes, each bound to one core of a 16-core
// host, 23 times slower than MPI_Allreduce from C (6.6 ms against 0.29
// ms): each sleep stalls MPI's progress. Where the processes on the node
// outnumber its cores (local > cores), the auto policy eases: it yields
// while rounds complete, and sleeps between rounds once easeYields in a
// row completed nothing.
func (p *progress) setLocal(policy progressPolicy, local, cores int) {
	spin, nap, ease := progressMode(policy, local, cores, runtime.NumCPU())
	p.spin.Store(spin)
	p.nap.Store(nap)
	p.ease.Store(ease)
	p.local, p.cores = local, cores
	if local > 1 && cores > 0 {
		// The node's other processes of the job need their cores too: a
		// host copy or reduction of this process takes its share.
		parreduce.SetShare(max(1, cores/local))
	}
}

// progressMode is setLocal's choice for policy, local processes on a node
// of cores processors, and a process that may run on ncpu of them: spin,
// sleep between rounds (backoff), or yield and sleep once rounds come up
// empty (ease); none of them: yield.
func progressMode(policy progressPolicy, local, cores, ncpu int) (spin, nap, ease bool) {
	switch policy {
	case policySpin:
		return true, false, false
	case policyYield:
		return false, false, false
	case policyBackoff:
		return false, true, false
	}
	spin = local > 0 && 2*local <= cores && ncpu >= 2
	return spin, false, !spin && cores > 0 && local > cores
}

// watch hands r to the progress thread (r's owner holds r.mu, r's pieces
// are posted, and the owner is about to park on r.wake). From now until a round completes r (r.ready) or
// unwatch takes it back, only rounds test r: the thread's, or those a
// polling owner runs in help, under mu either way.
func (p *progress) watch(r *request) {
	r.watched = true
	p.pending.Add(1)
	p.lastPost.Store(time.Now().UnixNano())
	p.inMu.Lock()
	p.incoming = append(p.incoming, r)
	p.news.Store(1)
	p.inMu.Unlock()
	if p.drives() {
		// The owner drives MPI itself at once (await) and wakes the thread
		// when it stops: a thread woken now would only go back to sleep.
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// drives reports whether a waiter drives MPI itself before it parks
// (await): the thread level lets any thread call MPI, and the node has a
// core for each process's waiter (the thread spins, or yields with no more
// processes than cores).
func (p *progress) drives() bool {
	return p.mode != modeFunneled && (p.spin.Load() || !p.ease.Load() && !p.nap.Load())
}

// unwatch takes r back from the progress thread, if it has not completed
// it: after unwatch the caller alone tests r. It reports whether r was
// still watched.
func (p *progress) unwatch(r *request) bool {
	if !r.watched {
		return false
	}
	r.watched = false
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := r.widx; i >= 0 && i < len(p.watched) && p.watched[i] == r {
		last := len(p.watched) - 1
		p.watched[i] = p.watched[last]
		p.watched[i].widx = i
		p.watched[last] = nil
		p.watched = p.watched[:last]
		p.pending.Add(-1)
		return true
	}
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if i := slices.Index(p.incoming, r); i >= 0 {
		p.incoming = slices.Delete(p.incoming, i, i+1)
		p.pending.Add(-1)
		return true
	}
	return false // completed meanwhile (r.ready)
}

// help runs a round on the caller's goroutine (testing for up to spin while
// nothing completes) when the progress thread is between rounds and the
// thread level lets any thread call MPI: an owner
// that polls Test (rather than parking in Wait) then progresses MPI
// itself, as it did before the thread existed, and never waits for the
// thread to be scheduled (testing.AllocsPerRun, for one, runs with
// GOMAXPROCS=1, where a goroutine that polls in a loop holds the only P).
// Under MPI_THREAD_FUNNELED it yields instead, so the thread can run.
func (p *progress) help(finalized bool, spin time.Duration) {
	if p.mode == modeSerialized {
		spin = min(spin, spinRound) // a round holds serialMu, which every MPI call of the process takes
	}
	if p.mode != modeFunneled && p.mu.TryLock() {
		p.roundLocked(finalized, spin)
		p.mu.Unlock()
		return
	}
	select {
	case p.wake <- struct{}{}: // a round soon, even if the thread was idle
	default:
	}
	runtime.Gosched()
}

// busy reports whether any watched request is pending.
func (p *progress) busy() bool { return p.pending.Load() > 0 }

// round tests every watched request once: MPI_Testsome over all their
// pieces, repeated in C for up to spin while none completes. It completes
// the requests MPI finished, and those of a World that closed or of an MPI
// that finalized (closedHit), and reports how many.
func (p *progress) round(finalized bool, spin time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.roundLocked(finalized, spin)
}

func (p *progress) roundLocked(finalized bool, spin time.Duration) int {
	p.inMu.Lock()
	p.news.Store(0)
	for _, r := range p.incoming {
		r.widx = len(p.watched)
		p.watched = append(p.watched, r)
	}
	clear(p.incoming)
	p.incoming = p.incoming[:0]
	p.inMu.Unlock()
	p.reqs, p.who = p.reqs[:0], p.who[:0]
	for i, r := range p.watched {
		r.pending = 0
		if finalized || r.w.closed.Load() {
			r.closedHit = true
			continue
		}
		for s, q := range r.subs {
			if q != requestNull {
				p.reqs = append(p.reqs, q)
				p.who = append(p.who, piece{int32(i), int32(s)})
				r.pending++
			}
		}
	}
	if n := len(p.reqs); n > 0 {
		if cap(p.out) < n {
			p.out = make([]doneResult, n)
		}
		p.out = p.out[:n]
		progressStats.rounds.Add(1)
		if p.mode == modeSerialized {
			lockSerial()
		}
		k, _ := cTestsome(p.reqs, p.out, spin, unsafe.Pointer(p.news))
		if k < 0 {
			// MPI_Testsome failed as a whole: test the pieces one by one,
			// as MPI_Test reports each one's own error.
			k = p.testEach()
		}
		for _, d := range p.out[:k] {
			pc := p.who[d.index]
			r := p.watched[pc.w]
			q := p.reqs[d.index]
			if code := int(d.code); code != 0 {
				if q != requestNull {
					cRequestFree(q)
				}
				if r.code == 0 {
					r.code = code
				}
			} else if d.cancelled != 0 {
				r.cancelled++
			} else {
				r.got += int(d.count)
			}
			r.subs[pc.s] = requestNull
			r.pending--
		}
		if p.mode == modeSerialized {
			unlockSerial() // after MPI_Request_free above
		}
	}
	keep := p.watched[:0]
	done := 0
	for _, r := range p.watched {
		if r.pending > 0 && r.code == 0 {
			r.widx = len(keep)
			keep = append(keep, r)
			continue
		}
		r.widx = -1
		done++
		// Once ready is set the owner may release r (which rewrites its
		// fields): take the channel first. A wake that lands after the
		// release is one its next owner's await ignores (it loops on
		// ready).
		wake := r.wake
		r.doneAt = time.Now().UnixNano()
		r.ready.Store(true)
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	clear(p.watched[len(keep):])
	p.watched = keep
	if done > 0 {
		p.pending.Add(int64(-done))
		progressStats.completed.Add(int64(done))
	}
	return done
}

// testEach is the fallback of round when MPI_Testsome fails as a whole: MPI_Test
// of each piece, results written to p.out as gm_testsome writes them.
func (p *progress) testEach() int {
	k := 0
	for i, q := range p.reqs {
		t := cTest(q)
		p.reqs[i] = t.req
		if t.code == 0 && !t.done {
			continue
		}
		p.out[k] = makeDone(i, t)
		k++
	}
	return k
}

// serve is the executor's loop: jobs (funneled calls, MPI_Init_thread and
// MPI_Finalize) and, while requests are watched, rounds of tests.
func (e *executor) serve() {
	p := &e.progress
	var nap time.Duration
	empty := 0 // rounds in a row that completed nothing, while easing
	tick := time.NewTimer(time.Hour)
	tick.Stop()
	beat := time.NewTimer(time.Hour) // the heartbeat's next tick while idle
	beat.Stop()
	for {
		due, next := e.hb.due()
		if due {
			e.hb.tick(time.Now().UnixNano())
			continue
		}
		if !p.busy() || p.helpers.Load() > 0 {
			// Nothing to test, or a waiter drives MPI (await): its rounds
			// test every watched request, and it wakes the thread when it
			// parks or leaves (p.wake). A thread that kept testing, or
			// only yielding, took a core (or a hyperthread's sibling) from
			// the work: a 1 MiB MPI_Iallreduce of 4 and 8 processes on the
			// 16-core host took 1.3-1.5 times as long as from C; one that
			// slept on a timer woke Go's scheduler for nothing.
			var beatC <-chan time.Time
			if next > 0 {
				beat.Reset(next)
				beatC = beat.C
			}
			select {
			case j := <-e.jobs:
				e.runJob(j)
			case <-p.wake:
			case <-beatC:
			case <-e.quit:
				p.round(true, 0)
				return
			}
			beat.Stop()
			nap, empty = 0, 0
			continue
		}
		select {
		case j := <-e.jobs:
			e.runJob(j)
		case <-e.quit:
			p.round(true, 0) // completes every watched request as closed, without MPI
			return
		default:
		}
		spin := p.spin.Load()
		var roundSpin time.Duration
		if spin {
			roundSpin = spinRound
		}
		progressStats.threadRounds.Add(1)
		if p.round(e.finalized.Load(), roundSpin) > 0 {
			nap, empty = 0, 0
			continue
		}
		if !p.hot(time.Now()) {
			// Only requests nobody waits for, posted a while ago (a
			// group's control receives): test them now and then, and at
			// once when a request is posted or a waiter parks.
			progressStats.ticks.Add(1)
			if e.sleepTick(tick) {
				return
			}
			continue
		}
		if spin {
			continue
		}
		if p.ease.Load() {
			select {
			case <-p.wake: // a request posted or a waiter parked: yield again
				nap, empty = 0, 0
			default:
			}
			if empty >= easeYields {
				// The node's processes outnumber its cores, and a yield
				// would mostly hand the core to the other processes'
				// threads, yielding as well: sleep instead.
				nap = min(max(2*nap, easeMin), easeMax)
				progressStats.naps.Add(1)
				cNap(int64(nap))
				continue
			}
			empty++
		}
		if !p.nap.Load() {
			// No core to spare for spinning: every other runnable thread
			// on this core runs before the next round.
			progressStats.yields.Add(1)
			cYield()
			continue
		}
		// Backing off (GOCOLL_MPI_PROGRESS=backoff): less CPU, at the
		// cost of MPI's progress between tests.
		nap = min(max(2*nap, sleepMin), sleepMax)
		progressStats.naps.Add(1)
		cNap(int64(nap))
	}
}

// sleepTick blocks the thread for up to coldTick, until a job comes (run
// here), a request is posted or a waiter parks or leaves (p.wake); true
// when the executor quits (every watched request completed as closed).
func (e *executor) sleepTick(tick *time.Timer) (quit bool) {
	tick.Reset(coldTick)
	defer tick.Stop()
	select {
	case j := <-e.jobs:
		e.runJob(j)
	case <-e.progress.wake:
	case <-tick.C:
	case <-e.quit:
		e.progress.round(true, 0)
		return true
	}
	return false
}

// hot reports whether someone waits for the watched requests: a waiter is
// parked, or a request was posted within hotFor.
func (p *progress) hot(now time.Time) bool {
	return p.waiters.Load() > 0 || now.UnixNano()-p.lastPost.Load() < int64(hotFor)
}

// awaitEnd is why await returned.
type awaitEnd uint8

const (
	awaitReady awaitEnd = iota // r.ready: the thread completed r (or Close took it)
	awaitDone                  // the done channel closed first
	awaitTick                  // the timer fired first
	awaitHung                  // a process r waits for stopped responding (heartbeat.go)
)

// await parks until the progress thread completed r (r.ready), signalled
// on r.wake, or done closes, or tick fires, or a process r waits for counts
// as hung (the heartbeat's alarm rings for it). Where the node has a core
// for each process's waiter (the thread spins, or yields with no more
// processes than cores), the waiter first drives MPI itself for up to
// helpFor (help: rounds on its own goroutine, no sleep), and the thread
// stands back meanwhile (serve, p.helpers), as a C program's MPI_Test loop
// does: a completion is seen by the one who waits for it, with no hand-off
// between threads. Measured on a 16-core host, 4 and 8 processes: with the
// thread spinning and the waiter parked after 50 us, a 1 MiB
// MPI_Iallreduce took 1.9-4 times as long as from C, and each fence of the
// shared-memory window 80-280 us (1 and 4 MiB all-reduce). Where the
// node's processes outnumber its cores (ease) or under the backoff policy
// the waiter parks at once.
func (r *request) await(done <-chan struct{}, tick <-chan time.Time) awaitEnd {
	p := &r.w.exec.progress
	ticked := false // tick fired while this waiter drove MPI
	if p.drives() {
		p.helpers.Add(1)
		limit := time.Duration(helpFor.Load())
		one := runtime.GOMAXPROCS(0) == 1
		for start := time.Now(); !r.ready.Load(); {
			left := limit - time.Since(start)
			if left <= 0 {
				break
			}
			p.help(r.w.exec.finalized.Load(), min(left, helpSlice))
			if one {
				// With GOMAXPROCS=1 (a process bound to one core) the
				// process's other goroutines (its other ranks, the workers
				// of a copy) run between rounds. With more Ps they run on
				// the idle ones: a yield there wakes an idle P's thread
				// for nothing.
				runtime.Gosched()
			}
			select {
			case <-done:
				start = time.Time{} // park below, which sees done at once
			case <-tick:
				ticked, start = true, time.Time{}
			default:
			}
		}
		if p.helpers.Add(-1) == 0 && p.pending.Load() > 0 {
			select {
			case p.wake <- struct{}{}: // the thread tests the rest again
			default:
			}
		}
	}
	if r.ready.Load() {
		progressStats.helped.Add(1)
		return awaitReady
	}
	if ticked {
		return awaitTick
	}
	p.waiters.Add(1)
	defer p.waiters.Add(-1)
	select {
	case p.wake <- struct{}{}: // a thread testing only now and then tests at once
	default:
	}
	alarm := r.w.exec.hb.alarmed()
	for !r.ready.Load() {
		if alarm != nil && r.w.hungFor(r) {
			return awaitHung
		}
		select {
		case <-r.wake:
			progressStats.wakeups.Add(1)
		case <-done:
			if r.ready.Load() {
				return awaitReady
			}
			return awaitDone
		case <-tick:
			return awaitTick
		case <-alarm:
			alarm = r.w.exec.hb.alarmed()
		}
	}
	if d := time.Now().UnixNano() - r.doneAt; r.doneAt != 0 {
		progressStats.parked.Add(1)
		progressStats.wakeNs.Add(d)
		for m := progressStats.wakeMax.Load(); d > m && !progressStats.wakeMax.CompareAndSwap(m, d); m = progressStats.wakeMax.Load() {
		}
	}
	return awaitReady
}
