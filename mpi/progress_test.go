//go:build mpi && cgo

package mpi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// progressCounts is a snapshot of progressStats.
type progressCounts struct{ rounds, naps, yields, completed, wakeups, ownerTests int64 }

func readProgress() progressCounts {
	s := &progressStats
	return progressCounts{s.rounds.Load(), s.naps.Load(), s.yields.Load(), s.completed.Load(), s.wakeups.Load(), s.ownerTests.Load()}
}

func (c progressCounts) sub(o progressCounts) progressCounts {
	return progressCounts{c.rounds - o.rounds, c.naps - o.naps, c.yields - o.yields, c.completed - o.completed,
		c.wakeups - o.wakeups, c.ownerTests - o.ownerTests}
}

// TestProgressManyWaits runs many Waits at once over two Worlds (the World
// and a duplicate): 8 goroutines on each, every one exchanging messages
// around the ring of processes on its own tag and waiting with Wait, once
// with the progress thread spinning, yielding, easing (yielding, then
// sleeping once rounds come up empty) and backing off. Every message must
// arrive intact, and the progress thread must do the waiting: a Wait makes
// at most one MPI_Test of its own (before it parks) and wakes at most once
// (its completion), not once per sleep of a polling loop; a spinning or
// yielding thread never sleeps.
func TestProgressManyWaits(t *testing.T) {
	w, ctx := begin(t, 60*time.Second)
	d := dup(t, ctx, w)
	pr := &w.exec.progress
	auto, autoNap, autoEase := pr.spin.Load(), pr.nap.Load(), pr.ease.Load()
	defer func() { pr.spin.Store(auto); pr.nap.Store(autoNap); pr.ease.Store(autoEase) }()
	for _, m := range []struct{ spin, nap, ease bool }{{true, false, false}, {false, false, false}, {false, false, true}, {false, true, false}} {
		pr.spin.Store(m.spin)
		pr.nap.Store(m.nap)
		pr.ease.Store(m.ease)
		manyWaits(t, ctx, w, d, m.spin, m.nap || m.ease)
	}
	agree(t, w, !t.Failed(), "many waits")
}

// manyWaits runs the exchanges of TestProgressManyWaits once; nap: the
// thread may sleep between rounds.
func manyWaits(t *testing.T, ctx context.Context, w, d *World, spin, nap bool) {
	const goroutines, iters = 8, 20
	next, prev := neighbours(w)
	if err := w.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	before := readProgress()
	errs := make(chan error, 2*goroutines)
	var wg sync.WaitGroup
	for i, x := range []*World{w, d} {
		for g := range goroutines {
			wg.Go(func() {
				tag := 1000 + g
				salt := i*goroutines + g
				for it := range iters {
					n := 1 + (it*131+salt*17)%3000
					recv := make([]byte, n)
					if err := exchange(ctx, x, pattern(x.Rank()*100+salt, n, it), recv, next, prev, tag); err != nil {
						errs <- fmt.Errorf("spin %v: world %d, goroutine %d, exchange %d: %w", spin, i, g, it, err)
						return
					}
					if !bytes.Equal(recv, pattern(prev*100+salt, n, it)) {
						errs <- fmt.Errorf("spin %v: world %d, goroutine %d, exchange %d: wrong contents from process %d", spin, i, g, it, prev)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c := readProgress().sub(before)
	waits := int64(2 * 2 * goroutines * iters) // two Worlds, a send and a receive per exchange
	pr := &w.exec.progress
	t.Logf("process %d (%v, %d processes on %d cores, spinning: %v, sleeping: %v): %d Waits: %d completions, %d wake-ups, "+
		"%d rounds of MPI_Testsome, %d naps, %d yields, %d MPI_Test by owners",
		w.Rank(), w.ThreadLevel(), pr.local, pr.cores, spin, nap, waits, c.completed, c.wakeups, c.rounds, c.naps, c.yields, c.ownerTests)
	// One MPI_Test per Wait before it parks; the counters are the
	// process's, so a group an earlier test left polling may add a few. A
	// polling Wait would make several per Wait.
	if c.ownerTests > 2*waits {
		t.Errorf("spin %v: MPI_Test called %d times by owners for %d Waits; the progress thread should test parked requests",
			spin, c.ownerTests, waits)
	}
	if c.completed+c.ownerTests < waits {
		t.Errorf("spin %v: %d requests completed by the progress thread and %d tests by their owners, for %d Waits",
			spin, c.completed, c.ownerTests, waits)
	}
	if c.wakeups > waits {
		t.Errorf("spin %v: %d wake-ups for %d Waits: a Wait should wake at most once, on completion", spin, c.wakeups, waits)
	}
	if !nap && c.naps != 0 {
		t.Errorf("spin %v: the progress thread slept %d times where it should spin or yield", spin, c.naps)
	}
	if spin && c.yields != 0 {
		t.Errorf("the spinning progress thread yielded %d times", c.yields)
	}
}

// TestSerializedLockProcessWide checks that at MPI_THREAD_SERIALIZED no two
// MPI calls of the process overlap, even from two Worlds (the World and a
// duplicate, each driven by its own goroutine): the probe in lockSerial
// counts the calls in progress. At the other levels the traffic runs and
// the probe stays unused.
func TestSerializedLockProcessWide(t *testing.T) {
	w, ctx := begin(t, 60*time.Second)
	d := dup(t, ctx, w)
	serialMu.Lock()
	serialProbe.in.Store(0)
	serialProbe.most.Store(0)
	serialProbe.on.Store(true)
	serialMu.Unlock()
	defer func() {
		serialMu.Lock()
		serialProbe.on.Store(false)
		serialMu.Unlock()
	}()
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for g, x := range []*World{w, d} {
		wg.Go(func() { errs <- dupTraffic(ctx, x, g, 50, 11) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	serialMu.Lock()
	most, in := serialProbe.most.Load(), serialProbe.in.Load()
	serialMu.Unlock()
	if w.ThreadLevel() == ThreadSerialized {
		t.Logf("process %d: at most %d MPI call(s) at once", w.Rank(), most)
		if most != 1 || in != 0 {
			t.Errorf("at MPI_THREAD_SERIALIZED: %d MPI calls at once at most (want 1), %d in progress after (want 0)", most, in)
		}
	} else if most != 0 {
		t.Errorf("at %v the serialized lock counted %d calls", w.ThreadLevel(), most)
	}
	agree(t, w, !t.Failed(), "serialized lock")
}

// TestProgressWaitCancel ends the ctx of Waits that the progress thread is
// watching: a receive nobody sends to, once by deadline and once by cancel
// from another goroutine. Wait returns the same errors as it always did
// (an *Error for the peer matching backend.ErrTimeout and
// context.DeadlineExceeded, or context.Canceled), cancels the receive, and
// the tag works afterwards; a request polled with Test completes as before.
func TestProgressWaitCancel(t *testing.T) {
	w, ctx := begin(t, 30*time.Second)
	next, prev := neighbours(w)
	buf := make([]byte, 32)
	rr, err := w.Irecv(buf, prev, 1100)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, 80*time.Millisecond)
	err = Wait(dctx, rr)
	elapsed := time.Since(start)
	cancel()
	var e *Error
	if !errors.Is(err, backend.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) ||
		!slices.Equal(e.Ranks, []int{prev}) {
		t.Errorf("Wait past its deadline = %v; want an *Error matching ErrTimeout and DeadlineExceeded naming process %d", err, prev)
	}
	if elapsed < 80*time.Millisecond || elapsed > 500*time.Millisecond {
		t.Errorf("Wait with an 80 ms deadline returned after %v", elapsed)
	}

	rr, err = w.Irecv(buf, prev, 1101)
	if err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	go func() {
		time.Sleep(30 * time.Millisecond)
		stop()
	}()
	err = Wait(cctx, rr)
	if !errors.Is(err, context.Canceled) || errors.Is(err, backend.ErrTimeout) || !errors.As(err, &e) {
		t.Errorf("Wait whose ctx is cancelled = %v; want an *Error matching context.Canceled, not ErrTimeout", err)
	}
	if err := w.Barrier(ctx); err != nil {
		t.Fatal(err)
	}

	// The cancelled receives took nothing: both tags carry a message now.
	for _, tag := range []int{1100, 1101} {
		if err := exchange(ctx, w, pattern(w.Rank(), 32, tag), buf, next, prev, tag); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, pattern(prev, 32, tag)) {
			t.Errorf("tag %d after a cancelled Wait: wrong contents", tag)
		}
	}

	// Polled with Test, never parked on.
	rr, err = w.Irecv(buf, prev, 1102)
	if err != nil {
		t.Fatal(err)
	}
	if err := send(ctx, w, pattern(w.Rank(), 32, 1102), next, 1102); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		done, err := rr.Test()
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("receive not complete after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	if !bytes.Equal(buf, pattern(prev, 32, 1102)) {
		t.Errorf("receive tested after completion: wrong contents")
	}
	agree(t, w, !t.Failed(), "wait cancel")
}

// TestProgressMode checks how the progress thread behaves while requests are
// pending, for each policy and node: spin where every local process can have
// two cores (and the process may run on two), ease (yield, then sleep once
// rounds come up empty) only where the processes outnumber the cores, yield
// in between; the forced policies whatever the node.
func TestProgressMode(t *testing.T) {
	for _, tc := range []struct {
		policy                      progressPolicy
		local, cores, ncpu          int
		wantSpin, wantNap, wantEase bool
	}{
		{policyAuto, 2, 16, 16, true, false, false},
		{policyAuto, 8, 16, 16, true, false, false},
		{policyAuto, 2, 16, 1, false, false, false}, // bound to one core
		{policyAuto, 9, 16, 16, false, false, false},
		{policyAuto, 16, 16, 16, false, false, false},
		{policyAuto, 17, 16, 16, false, false, true},
		{policyAuto, 1, 2, 2, true, false, false},
		{policyAuto, 2, 2, 2, false, false, false},
		{policyAuto, 3, 2, 2, false, false, true},
		{policyAuto, 4, 2, 1, false, false, true},
		{policyAuto, 0, 2, 2, false, false, false}, // node unknown
		{policyAuto, 3, 0, 2, false, false, false},
		{policySpin, 4, 2, 1, true, false, false},
		{policyYield, 4, 2, 2, false, false, false},
		{policyYield, 1, 16, 16, false, false, false},
		{policyBackoff, 4, 2, 2, false, true, false},
		{policyBackoff, 1, 16, 16, false, true, false},
	} {
		spin, nap, ease := progressMode(tc.policy, tc.local, tc.cores, tc.ncpu)
		if spin != tc.wantSpin || nap != tc.wantNap || ease != tc.wantEase {
			t.Errorf("policy %d, %d processes on %d cores, %d usable: spin %v, nap %v, ease %v; want %v, %v, %v",
				tc.policy, tc.local, tc.cores, tc.ncpu, spin, nap, ease, tc.wantSpin, tc.wantNap, tc.wantEase)
		}
	}
}

// TestParseHelp: GOCOLL_MPI_HELP's values, and the bad ones refused.
func TestParseHelp(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", defaultHelpFor, true}, {"0", 0, true}, {"100us", 100 * time.Microsecond, true},
		{"100ms", 100 * time.Millisecond, true}, {"1s", time.Second, true},
		{"2s", 0, false}, {"-1ms", 0, false}, {"1", 0, false}, {"long", 0, false},
	} {
		got, err := parseHelp(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseHelp(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestParseBytes: the window's sizes (GOCOLL_MPI_SHM_SLOT, _PIECE,
// GOCOLL_MPI_ZC_MIN, GOCOLL_MPI_ZC_GATHER_MIN), and the bad ones refused
// with the default kept.
func TestParseBytes(t *testing.T) {
	const def = 12345
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"", def, true}, {"1", 1, true}, {"4096", 4096, true}, {"64K", 64 << 10, true}, {"64k", 64 << 10, true},
		{"2M", 2 << 20, true}, {"1G", 1 << 30, true}, {"1024G", 1 << 40, true},
		{"0", def, false}, {"-1", def, false}, {"K", def, false}, {"1T", def, false}, {"1.5M", def, false},
		{"1025G", def, false}, {"big", def, false},
	} {
		got, err := parseBytes(tc.in, def)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseBytes(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestProgressLateRequest posts a request while another goroutine's round
// tests in C for a long while (a waiter driving MPI, up to helpSlice while
// nothing completes; helpSlice and helpFor raised here to 10 s): on process
// 0 one goroutine waits in a barrier of a duplicate World that the other
// processes enter only after 1.5 s, and another then receives a message that
// process 1 sends after 300 ms. The receive must not wait for the first
// goroutine's round to end: a request posted meanwhile ends the round
// (progress.news), and the next round tests it.
func TestProgressLateRequest(t *testing.T) {
	w, ctx := begin(t, 60*time.Second)
	d := dup(t, ctx, w)
	pr := &w.exec.progress
	if pr.mode == modeFunneled {
		t.Skip("at MPI_THREAD_FUNNELED only the progress thread tests requests")
	}
	auto, autoNap, autoEase := pr.spin.Load(), pr.nap.Load(), pr.ease.Load()
	pr.spin.Store(false) // yield: a waiter drives MPI itself (await)
	pr.nap.Store(false)
	pr.ease.Store(false)
	slice, help := helpSlice, helpFor.Load()
	helpSlice = 10 * time.Second
	helpFor.Store(int64(10 * time.Second))
	defer func() {
		helpSlice = slice
		helpFor.Store(help)
		pr.spin.Store(auto)
		pr.nap.Store(autoNap)
		pr.ease.Store(autoEase)
	}()
	const sendAt, late = 300 * time.Millisecond, 1500 * time.Millisecond
	msg := pattern(1, 64, 5)
	var err error
	switch w.Rank() {
	case 0:
		barrier := make(chan error, 1)
		go func() { barrier <- d.Barrier(ctx) }()
		time.Sleep(100 * time.Millisecond) // the barrier's waiter is in its round by now
		start := time.Now()
		got := make([]byte, len(msg))
		if err := recv(ctx, w, got, 1, 5); err != nil {
			t.Errorf("receive: %v", err)
		} else if !bytes.Equal(got, msg) {
			t.Error("receive: wrong contents from process 1")
		}
		took := time.Since(start)
		t.Logf("the receive took %v (the message was sent after about %v)", took, sendAt-100*time.Millisecond)
		if took > late/2 {
			t.Errorf("the receive took %v while another goroutine's round tested in C: it waited for that round", took)
		}
		err = <-barrier
	case 1:
		time.Sleep(sendAt)
		if err := send(ctx, w, msg, 0, 5); err != nil {
			t.Errorf("send: %v", err)
		}
		fallthrough
	default:
		time.Sleep(late)
		err = d.Barrier(ctx)
	}
	if err != nil {
		t.Errorf("Barrier of the duplicate: %v", err)
	}
	agree(t, w, !t.Failed(), "late request")
}
