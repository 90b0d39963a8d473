package collective

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/internal/faultinject"
)

// Regression tests of the core's promises: right results on every chunking,
// no memory touched after a call returned, no hang, ordered streams, and the
// failure model (Abort, Run, which rank's error says what).

// Pipelined all-reduce with more chunks than 4-element groups: empty chunks
// must not skip copying out the chunk before them.
func TestPipelinedSmallTensors(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for _, ranks := range []int{2, 3} {
			for _, depth := range []int{2, 3, 4, 5, 8} {
				for _, n := range []int{1, 2, 5, 8, 16, 17, 31, 33, 64} {
					if bk == "vulkan" && !fullRun() && n != 16 && n != 33 {
						continue
					}
					g := openGroup(t, bk, ranks, func(o *Options) {
						o.Config.Strategy = Pipelined
						o.Config.PipelineDepth = depth
					})
					in := make([][]float64, ranks)
					data := make([][]float32, ranks)
					for r := range data {
						in[r] = make([]float64, n)
						data[r] = make([]float32, n)
						for i := range data[r] {
							in[r][i] = exactInput(Sum, r, i)
							data[r][i] = float32(in[r][i])
						}
					}
					want := refReduce(in, Sum)
					noErrors(t, onRanks(g, func(c *Comm) error {
						return AllReduce(context.Background(), c, data[c.Rank()], Sum)
					}))
					for r := range data {
						for i, v := range data[r] {
							if float64(v) != want[i] {
								t.Fatalf("%s ranks=%d depth=%d n=%d: rank %d element %d = %v, want %v", bk, ranks, depth, n, r, i, v, want[i])
							}
						}
					}
					g.Close()
				}
			}
		}
	}
}

// A rank whose context ends during a direct all-reduce returns only once no
// peer writes its buffer any more: its buffer does not change after the
// call returned.
func TestDirectCancelledRankNotWrittenAfterReturn(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		n := 4 << 20
		if raceEnabled || bk == "vulkan" {
			n = 1 << 18
		}
		directCancelled(t, bk, n)
	}
}

func directCancelled(t *testing.T, bk string, n int) {
	for _, strat := range []Strategy{Direct, Pipelined} {
		for _, pinnedMem := range []bool{false, true} {
			g := openGroup(t, bk, 4, func(o *Options) { o.Config.Strategy = strat })
			data := make([][]float32, 4)
			var bufs []*HostBuffer[float32]
			for r := range data {
				if pinnedMem {
					hb, err := NewHostBuffer[float32](n)
					if err != nil {
						t.Fatal(err)
					}
					bufs = append(bufs, hb)
					data[r] = hb.Data
				} else {
					data[r] = make([]float32, n)
				}
				for i := range data[r] {
					data[r][i] = 1
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			var snap []float32
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for r := 0; r < 4; r++ {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					cctx := context.Background()
					if r == 1 {
						cctx = ctx
					}
					errs[r] = AllReduce(cctx, g.Comm(r), data[r], Sum)
					if r == 1 {
						snap = append([]float32(nil), data[1]...)
					}
				}(r)
			}
			time.Sleep(time.Millisecond)
			cancel()
			wg.Wait()
			if errs[1] != nil {
				// Give late writers a chance to show themselves.
				time.Sleep(20 * time.Millisecond)
				for i := range snap {
					if data[1][i] != snap[i] {
						t.Fatalf("%s %v pinned=%v: element %d of the cancelled rank changed after its call returned (%v -> %v)",
							bk, strat, pinnedMem, i, snap[i], data[1][i])
					}
				}
				if !errors.Is(errs[1], context.Canceled) {
					t.Errorf("%v: cancelled rank: %v does not match context.Canceled", strat, errs[1])
				}
				for r, err := range errs {
					if r != 1 && err != nil && errors.Is(err, context.Canceled) {
						t.Errorf("%v: rank %d did not cancel but its error matches context.Canceled: %v", strat, r, err)
					}
				}
			}
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			for _, hb := range bufs {
				if err := hb.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// A host-slice call matched against a tensor call is a mismatch on both
// ranks, never a panic or a timeout.
func TestSliceAgainstTensorMismatch(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 2)
		tn, err := NewTensor[float32](g.Comm(1), 1000)
		if err != nil {
			t.Fatal(err)
		}
		defer tn.Close()
		send := make([]float32, 1000)
		recv := make([]float32, 1000)
		errs := onRanks(g, func(c *Comm) error {
			if c.Rank() == 0 {
				return AllReduceWith(context.Background(), c, send, recv, Sum, Direct)
			}
			return AllReduceTensor(context.Background(), c, tn, Sum, Direct)
		})
		for r, err := range errs {
			if !errors.Is(err, ErrMismatch) {
				t.Errorf("%s rank %d: %v, want ErrMismatch", bk, r, err)
			}
		}
	}
}

// Sync and async calls on one Comm run in call order.
func TestAsyncThenSyncOrdered(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3)
		a := make([][]float32, 3)
		b := make([][]float32, 3)
		for r := range a {
			a[r] = []float32{float32(r), 1, 2, 3}
			b[r] = []float32{10, float32(r), 1}
		}
		for iter := 0; iter < 20; iter++ {
			errs := onRanks(g, func(c *Comm) error {
				r := c.Rank()
				w1 := AllReduceAsync(context.Background(), c, a[r], Max)
				w2 := AllReduceAsync(context.Background(), c, b[r], Min)
				if err := AllReduce(context.Background(), c, b[r], Sum); err != nil {
					return err
				}
				if err := w1.Wait(context.Background()); err != nil {
					return fmt.Errorf("first async: %w", err)
				}
				return w2.Wait(context.Background())
			})
			noErrors(t, errs)
		}
		for r := range a {
			// max over ranks once, then 20 more times: idempotent.
			if a[r][0] != 2 || a[r][1] != 1 {
				t.Fatalf("%s rank %d: a = %v", bk, r, a[r])
			}
		}
	}
}

// A Work queued while (or after) the group breaks still ends.
func TestAsyncDuringBreakEnds(t *testing.T) {
	g := openGroup(t, "host", 2)
	c := g.Comm(0)
	var works []Work
	for i := 0; i < 50; i++ {
		works = append(works, AllReduceAsync(context.Background(), c, []float32{1}, Sum))
		if i == 10 {
			go g.Abort(errors.New("stop"))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, w := range works {
		if err := w.Wait(ctx); errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("work %d never finished", i)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	w := AllReduceAsync(context.Background(), c, []float32{1}, Sum)
	if err := w.Wait(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("async after Close: %v", err)
	}
}

// Abort wakes every blocked rank promptly, and later calls fail the same
// way; every error names the cause.
func TestAbort(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3, func(o *Options) { o.Config.CommunicationTimeout = time.Minute })
		cause := errors.New("operator said stop")
		start := time.Now()
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for r := 0; r < 2; r++ { // rank 2 never comes
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				errs[r] = AllReduce(context.Background(), g.Comm(r), []float32{1, 2}, Sum)
			}(r)
		}
		time.Sleep(50 * time.Millisecond)
		// Past 3 s, a dump of every goroutine says what Abort or a rank
		// waits for.
		dump := time.AfterFunc(3*time.Second, func() {
			buf := make([]byte, 4<<20)
			t.Logf("%s: not returned 3 s after Abort; goroutines:\n%s", bk, buf[:runtime.Stack(buf, true)])
		})
		g.Abort(cause)
		wg.Wait()
		dump.Stop()
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%s: Abort took %v", bk, el)
		}
		errs = append(errs, AllReduce(context.Background(), g.Comm(2), []float32{1, 2}, Sum))
		for r, err := range errs {
			var e *Error
			if !errors.Is(err, ErrGroupBroken) || !errors.Is(err, cause) || !errors.As(err, &e) || e.Rank != r {
				t.Errorf("%s rank %d: %v", bk, r, err)
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
				t.Errorf("%s rank %d: an abort is not a timeout or a cancellation: %v", bk, r, err)
			}
		}
	}
}

// Run runs a function per rank and aborts the group on the first error.
func TestRun(t *testing.T) {
	g := openGroup(t, "host", 4)
	data := make([][]float32, 4)
	for r := range data {
		data[r] = []float32{float32(r)}
	}
	err := g.Run(context.Background(), func(ctx context.Context, c *Comm) error {
		return AllReduce(ctx, c, data[c.Rank()], Sum)
	})
	if err != nil || data[3][0] != 6 {
		t.Fatalf("Run: %v, %v", err, data)
	}
	boom := errors.New("rank 2 failed to load its batch")
	start := time.Now()
	err = g.Run(context.Background(), func(ctx context.Context, c *Comm) error {
		if c.Rank() == 2 {
			return boom
		}
		return AllReduce(ctx, c, data[c.Rank()], Sum)
	})
	if !errors.Is(err, boom) || time.Since(start) > 5*time.Second {
		t.Fatalf("Run: %v after %v", err, time.Since(start))
	}
	if err := Barrier(context.Background(), g.Comm(0)); !errors.Is(err, boom) || !errors.Is(err, ErrGroupBroken) {
		t.Fatalf("after Run failed: %v", err)
	}
}

// Errors: the cancelling rank's error matches context.Canceled (and not
// ErrTimeout); the others' name it without matching context errors.
func TestErrorsNameTheFirstFailure(t *testing.T) {
	g := openGroup(t, "host", 3, func(o *Options) { o.Config.Strategy = Ring })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs := onRanks(g, func(c *Comm) error {
		cc := context.Background()
		if c.Rank() == 1 {
			cc = ctx
		}
		return AllReduce(cc, c, make([]float32, 100), Sum)
	})
	if !errors.Is(errs[1], context.Canceled) || errors.Is(errs[1], ErrTimeout) {
		t.Errorf("cancelled rank: %v", errs[1])
	}
	for _, r := range []int{0, 2} {
		err := errs[r]
		var be *BrokenError
		if !errors.Is(err, ErrGroupBroken) || errors.Is(err, context.Canceled) || !errors.As(err, &be) || be.Rank != 1 {
			t.Errorf("rank %d: %v", r, err)
		}
		var te *TimeoutError
		if errors.As(err, &te) && fmt.Sprint(te.Missing) == fmt.Sprintf("[%d]", r) {
			t.Errorf("rank %d reads as waiting for itself: %v", r, err)
		}
	}
	for r, err := range errs {
		if strings.Count(err.Error(), "collective:") != 1 {
			t.Errorf("rank %d: prefix not once: %v", r, err)
		}
		var e *Error
		if !errors.As(err, &e) || e.Rank != r || e.Op != "AllReduce" || e.Seq != 1 {
			t.Errorf("rank %d: %#v", r, e)
		}
	}
	g.Close()
	if _, err := NewTensor[float32](g.Comm(0), 4); !errors.Is(err, ErrClosed) {
		t.Errorf("NewTensor after Close: %v", err)
	}
}

// A cancellation reports context.Canceled, a deadline both ErrTimeout and
// context.DeadlineExceeded.
func TestTimeoutErrorKinds(t *testing.T) {
	te := &TimeoutError{Ctx: context.Canceled}
	if errors.Is(te, ErrTimeout) || !errors.Is(te, context.Canceled) {
		t.Error("cancelled")
	}
	te = &TimeoutError{Ctx: context.DeadlineExceeded}
	if !errors.Is(te, ErrTimeout) || !errors.Is(te, context.DeadlineExceeded) {
		t.Error("deadline")
	}
}

// f64 on devices without f64 kernels: reduce-scatter and reduce are reduced
// exactly on the host (values f32 cannot hold survive), on every rank alike.
func TestF64WithoutKernelsAgreed(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 2, func(o *Options) { o.DisableFloat64 = true })
		const tiny = 0x1p-40
		in := func(r int) []float64 { return []float64{1 + tiny, float64(r), 3, 4 + float64(r)*tiny} }
		out := make([][]float64, 2)
		noErrors(t, onRanks(g, func(c *Comm) error {
			out[c.Rank()] = make([]float64, 2)
			return ReduceScatter(context.Background(), c, in(c.Rank()), out[c.Rank()], Sum)
		}))
		if want := [][]float64{{2 + 2*tiny, 1}, {6, 8 + tiny}}; !slices.Equal(out[0], want[0]) || !slices.Equal(out[1], want[1]) {
			t.Errorf("%s: f64 ReduceScatter on the host path: %v, want %v", bk, out, want)
		}
		noErrors(t, onRanks(g, func(c *Comm) error {
			out[c.Rank()] = make([]float64, 4)
			return Reduce(context.Background(), c, in(c.Rank()), out[c.Rank()], Sum, 1)
		}))
		if want := []float64{2 + 2*tiny, 1, 6, 8 + tiny}; !slices.Equal(out[1], want) {
			t.Errorf("%s: f64 Reduce on the host path: %v, want %v", bk, out[1], want)
		}
		data := [][]float64{{1 + 0x1p-40, 2}, {1, 2}}
		noErrors(t, onRanks(g, func(c *Comm) error {
			return AllReduce(context.Background(), c, data[c.Rank()], Sum)
		}))
		if data[1][0] != 2+0x1p-40 {
			t.Errorf("%s: f64 all-reduce on the host path: %v", bk, data[1][0])
		}
	}
}

// Group memory and time grow linearly with the ranks; past MaxRanks a
// clear error.
func TestManyRanksLinear(t *testing.T) {
	if raceEnabled {
		t.Skip("memory measurement under the race detector is not meaningful")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	g, err := NewGroup(context.Background(), Options{Ranks: 2000, Backend: "host", Config: testConfig()})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	runtime.ReadMemStats(&after)
	heap := int64(after.TotalAlloc - before.TotalAlloc)
	g.Close()
	if heap > 64<<20 || el > 5*time.Second {
		t.Errorf("2000 ranks: %d MiB allocated in %v", heap>>20, el)
	}
	t.Logf("2000 ranks: %.1f MiB, %v", float64(heap)/(1<<20), el)
	_, err = NewGroup(context.Background(), Options{Ranks: MaxRanks + 1, Backend: "host", Config: testConfig()})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("MaxRanks+1: %v", err)
	}
}

// The cost model is measured as an operation of the Comm: from outside,
// while collectives run, it is refused (or refuses them) instead of racing.
func TestModelClaimsComm(t *testing.T) {
	g := openGroup(t, "host", 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			g.comms[0].AutoChoice(1<<16, 0)
		}
	}()
	err := g.Run(context.Background(), func(ctx context.Context, c *Comm) error {
		for i := 0; i < 20; i++ {
			if err := AllReduce(ctx, c, make([]float32, 1024), Sum); err != nil {
				return err
			}
		}
		return nil
	})
	wg.Wait()
	if err != nil && !errors.Is(err, ErrConcurrentUse) {
		t.Fatal(err)
	}
}

// A failure after data moved names the strategy that ran.
func TestDataErrorNamesStrategy(t *testing.T) {
	fi := faultBackend(t, "host")
	for _, s := range []Strategy{Ring, Tree, Hierarchical, Direct, Pipelined} {
		fi.Arm(faultinject.Plan{Kind: faultinject.FailRecord, Device: 0, K: 1})
		g := openGroup(t, "faultinject-host", 3, func(o *Options) { o.Config.Strategy = s; o.Config.LocalGroupSize = 2 })
		errs := onRanks(g, func(c *Comm) error {
			return AllReduce(context.Background(), c, make([]float32, 1000), Sum)
		})
		var de *DataError
		if !errors.As(errs[0], &de) || de.Strategy != s || !errors.Is(errs[0], ErrOutOfMemory) {
			t.Errorf("%v: rank 0: %v", s, errs[0])
		}
		for r := 1; r < 3; r++ {
			if !errors.Is(errs[r], ErrGroupBroken) || !errors.Is(errs[r], ErrOutOfMemory) {
				t.Errorf("%v: rank %d: %v", s, r, errs[r])
			}
		}
		g.Close()
	}
}

// Devices that disagree on f64 support: every rank takes the same decision
// (the exact host paths for all-reduce and reduce-scatter), never a
// mismatch between ranks.
func TestMixedF64DevicesAgree(t *testing.T) {
	fi := faultBackend(t, "host")
	fi.Arm(faultinject.Plan{Kind: faultinject.None, NoFloat64: []int{1}})
	g := openGroup(t, "faultinject-host", 3)
	data := [][]float64{{1 + 0x1p-40, 2}, {1, 2}, {1, -4}}
	noErrors(t, onRanks(g, func(c *Comm) error {
		return AllReduce(context.Background(), c, data[c.Rank()], Sum)
	}))
	for r := range data {
		if data[r][0] != 3+0x1p-40 || data[r][1] != 0 {
			t.Errorf("rank %d: %v", r, data[r])
		}
	}
	out := make([][]float64, 3)
	noErrors(t, onRanks(g, func(c *Comm) error {
		out[c.Rank()] = make([]float64, 2)
		in := []float64{1 + 0x1p-40, 1, 2, 2, 3, 3}
		return ReduceScatter(context.Background(), c, in, out[c.Rank()], Sum)
	}))
	for r, want := range [][]float64{{3 + 3*0x1p-40, 3}, {6, 6}, {9, 9}} {
		if !slices.Equal(out[r], want) {
			t.Errorf("ReduceScatter rank %d: %v, want %v", r, out[r], want)
		}
	}
}
