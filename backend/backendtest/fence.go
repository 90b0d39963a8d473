package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// testFences checks several submissions in flight, each reading what the
// previous one wrote (submissions run in order), waited for in reverse order;
// waits after success; and the signalled fence of an empty submission.
func (s *suite) testFences(t *testing.T) {
	const n, depth = 65537, 8
	dev, st := s.dev, s.dev.Stream()
	bufs := make([]backend.Buffer, depth+1)
	for i := range bufs {
		bufs[i] = alloc(t, dev, 4*n, alternate(i))
	}
	in := make([]float32, n)
	fillExact(newRand(21), in)
	writeT(t, bufs[0], 0, in)
	whole := func(b backend.Buffer) backend.Region { return backend.Region{Buf: b, Len: 4 * n} }

	before := dev.Counters().Snapshot()
	fences := make([]backend.Fence, depth)
	for i := range depth {
		must(t, st.Scale(backend.F32, whole(bufs[i+1]), whole(bufs[i]), 2), "Scale")
		f, err := st.Submit()
		must(t, err, "Submit")
		fences[i] = f
	}
	if got := dev.Counters().Snapshot().Sub(before).Submits; got != depth {
		t.Errorf("counted %d submits, want %d", got, depth)
	}
	for i := depth - 1; i >= 0; i-- {
		wait(t, fences[i])
	}
	for i := 1; i <= depth; i++ {
		got := readT[float32](t, bufs[i], 0, n)
		m := &mismatches{t: t, what: "chain of submissions"}
		for j := range n {
			if want := in[j] * float32(int(1)<<i); got[j] != want {
				m.add("buffer %d element %d: got %v, want %v", i, j, got[j], want)
			}
		}
		m.done()
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for i, f := range fences {
		if err := f.Wait(context.Background()); err != nil {
			t.Errorf("second Wait of fence %d: %v", i, err)
		}
		if err := f.Wait(cancelled); err != nil {
			t.Errorf("Wait of finished fence %d with a cancelled context: %v, want nil", i, err)
		}
	}

	f, err := st.Submit()
	must(t, err, "empty Submit")
	if f == nil {
		t.Fatal("empty Submit returned a nil fence")
	}
	if err := f.Wait(cancelled); err != nil {
		t.Errorf("the fence of an empty submission is not signalled: Wait with a cancelled context: %v", err)
	}
}

// testCancel checks that Wait honours its context while work runs: it
// returns ctx.Err() promptly when the context is already cancelled, is
// cancelled while waiting, or passes its deadline. The submission is sized
// by measuring the device, so it lasts a few hundred milliseconds anywhere.
func (s *suite) testCancel(t *testing.T) {
	const n, k = 1 << 18, 8
	const target = 300 * time.Millisecond
	dev, st := s.dev, s.dev.Stream()
	regs := make([]backend.Region, k)
	for i := range regs {
		regs[i] = backend.Region{Buf: alloc(t, dev, 4*n, backend.DeviceLocal), Len: 4 * n}
	}
	dst := backend.Region{Buf: alloc(t, dev, 4*n, backend.DeviceLocal), Len: 4 * n}
	record := func(reps int) backend.Fence {
		t.Helper()
		for range reps {
			must(t, st.Reduce(backend.Sum, backend.F32, dst, regs, 1), "Reduce")
		}
		f, err := st.Submit()
		must(t, err, "Submit")
		return f
	}
	// Calibrate, once the buffers have been touched.
	wait(t, record(1))
	const probe = 4
	start := time.Now()
	wait(t, record(probe))
	per := max(time.Since(start)/probe, time.Microsecond)
	reps := int(min(max(int64(target/per), 1), 4000))
	t.Logf("one reduction of %d x %d f32 takes %v; long submissions record %d", k, n, per, reps)

	// attempt submits reps reductions and waits for them with a context
	// that end() ends, returning when it ended. It reports false when the
	// work finished before the context ended, so nothing could be checked.
	// The context is made after recording, so slow recording (a validation
	// layer) does not eat into a deadline.
	attempt := func(name string, mk func() (context.Context, func() time.Time), want error) bool {
		t.Helper()
		f := record(reps)
		ctx, end := mk()
		ended := make(chan time.Time, 1)
		go func() { ended <- end() }()
		err := f.Wait(ctx)
		returned := time.Now()
		endedAt := <-ended
		defer wait(t, f) // let the work finish before the next attempt
		late := returned.Sub(endedAt)
		switch {
		case err == nil && late > 200*time.Millisecond:
			t.Errorf("%s: Wait returned nil %v after its context ended: it does not honour the context", name, late)
		case err == nil:
			return false
		case !errors.Is(err, want):
			t.Errorf("%s: Wait returned %v, want %v", name, err, want)
		case late > 200*time.Millisecond:
			t.Errorf("%s: Wait returned %v after its context ended, want promptly", name, late)
		}
		return true
	}
	// run repeats an attempt with longer work until the work outlasts the
	// context.
	run := func(name string, mk func() (context.Context, func() time.Time), want error) {
		t.Helper()
		for range 4 {
			if attempt(name, mk, want) {
				return
			}
			reps = min(4*reps, 16000)
			t.Logf("%s: the work finished before the context ended; retrying with %d reductions", name, reps)
		}
		t.Errorf("%s: the work always finished before the context ended; nothing was checked", name)
	}

	run("already cancelled", func() (context.Context, func() time.Time) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		at := time.Now()
		return ctx, func() time.Time { return at }
	}, context.Canceled)
	run("cancelled while waiting", func() (context.Context, func() time.Time) {
		ctx, cancel := context.WithCancel(context.Background())
		return ctx, func() time.Time {
			time.Sleep(target / 10)
			at := time.Now()
			cancel()
			return at
		}
	}, context.Canceled)
	run("deadline", func() (context.Context, func() time.Time) {
		at := time.Now().Add(target / 10)
		ctx, cancel := context.WithDeadline(context.Background(), at)
		t.Cleanup(cancel)
		return ctx, func() time.Time { return at }
	}, context.DeadlineExceeded)
}
