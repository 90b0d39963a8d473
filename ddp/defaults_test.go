package ddp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// testSeed returns the seed of a randomised test, logged so that a failure
// can be replayed with GOCOLL_TEST_SEED.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("GOCOLL_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("GOCOLL_TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (GOCOLL_TEST_SEED=%d replays it)", seed, seed)
	return seed
}

// rankOrderMean is the reference of a Mean all-reduce by a rank-order
// strategy, as collective defines Mean: the kernels sum the ranks' f32
// values in f32, rank 0 + rank 1 + ..., and divide the sum by N correctly
// rounded (backend.ApplyScale32 with collective's scale 1/N).
func rankOrderMean(in [][]float32, i int) float32 {
	acc := in[0][i]
	for r := 1; r < len(in); r++ {
		acc += in[r][i]
	}
	return backend.ApplyScale32(acc, 1/float64(len(in)))
}

// TestReproducibleDefault: with the default Options on a group whose
// strategy is Auto, random gradients of several sizes give every rank
// bitwise the same result, bitwise the rank-order mean, and the Sync only
// ran rank-order strategies (the cost model's best among them). The race
// run (-short) leaves out the 1M+1-element size: the race detector checks
// synchronisation, and slows the element loops tenfold.
func TestReproducibleDefault(t *testing.T) {
	seed := testSeed(t)
	sizes := []int{1, 1023, 4096, 1<<16 + 3, 1<<20 + 1}
	if raceEnabled && testing.Short() {
		sizes = sizes[:4]
	}
	for _, bk := range backendsUnderTest(t) {
		for _, ranks := range []int{2, 3, 4} {
			g := openGroup(t, bk, ranks)
			if s := g.Config().Strategy; s != collective.Auto {
				t.Fatalf("default group strategy %s, want auto", s)
			}
			ss := newSyncs[float32](t, g, Options{})
			rng := rand.New(rand.NewPCG(seed, uint64(ranks)))
			in := make([][][]float32, len(sizes)) // [size][rank][element]
			out := make([][][]float32, len(sizes))
			for k, n := range sizes {
				in[k], out[k] = make([][]float32, ranks), make([][]float32, ranks)
				for r := range in[k] {
					in[k][r] = make([]float32, n)
					for i := range in[k][r] {
						in[k][r][i] = float32(math.Ldexp(rng.NormFloat64(), rng.IntN(17)-8))
					}
					out[k][r] = append([]float32(nil), in[k][r]...)
				}
			}
			noErrors(t, onRanks(g, func(c *collective.Comm) error {
				for k := range sizes {
					if err := ss[c.Rank()].Sync(context.Background(), out[k][c.Rank()]); err != nil {
						return err
					}
				}
				return nil
			}))
			for k, n := range sizes {
				for r := 1; r < ranks; r++ {
					if !bitsEqual(out[k][r], out[k][0]) {
						t.Fatalf("%s ranks=%d n=%d: rank %d differs bitwise from rank 0", bk, ranks, n, r)
					}
				}
				wrong := 0
				for i := range n {
					if want := rankOrderMean(in[k], i); math.Float32bits(out[k][0][i]) != math.Float32bits(want) {
						if wrong < 5 {
							t.Errorf("%s ranks=%d n=%d element %d: %v, want the rank-order mean %v", bk, ranks, n, i, out[k][0][i], want)
						}
						wrong++
					}
				}
				if wrong > 0 {
					t.Fatalf("%s ranks=%d n=%d: %d elements differ from the rank-order mean", bk, ranks, n, wrong)
				}
			}
			var used []collective.Strategy
			for r, s := range ss {
				s.mu.Lock()
				if s.cur != collective.Auto {
					t.Errorf("%s ranks=%d rank %d: current strategy %s, want the group's (auto)", bk, ranks, r, s.cur)
				}
				for _, n := range sizes {
					st, ok := s.pick[n*4]
					if !ok {
						t.Errorf("%s ranks=%d rank %d n=%d: no strategy picked", bk, ranks, r, n)
					} else if st != ss[0].pick[n*4] {
						t.Errorf("%s ranks=%d n=%d: rank %d picked %s, rank 0 %s", bk, ranks, n, r, st, ss[0].pick[n*4])
					}
					if r == 0 {
						used = append(used, st)
					}
				}
				last := s.pick[sizes[len(sizes)-1]*4]
				s.mu.Unlock()
				st := s.Stats()
				if st.CurrentStrategy != last {
					t.Errorf("%s ranks=%d rank %d: current strategy %s, want %s (what the last step ran)", bk, ranks, r, st.CurrentStrategy, last)
				}
				ran := int64(0)
				for x, n := range st.ByStrategy {
					ran += n
					switch x {
					case collective.Direct, collective.Pipelined, collective.Host:
					default:
						t.Errorf("%s ranks=%d rank %d: ran %s, not a rank-order strategy", bk, ranks, r, x)
					}
				}
				if ran != st.Operations {
					t.Errorf("%s ranks=%d rank %d: %d all-reduces by strategy (%v), %d operations", bk, ranks, r, ran, st.ByStrategy, st.Operations)
				}
			}
			t.Logf("%s ranks=%d: strategies by size %v", bk, ranks, used)
			// Whichever rank-order strategy the cost model picks on another
			// machine gives the same bits.
			for _, st := range []collective.Strategy{collective.Direct, collective.Pipelined, collective.Host} {
				noErrors(t, onRanks(g, func(c *collective.Comm) error {
					for k := range sizes {
						x := append([]float32(nil), in[k][c.Rank()]...)
						if err := collective.AllReduceWith(context.Background(), c, x, x, collective.Mean, st); err != nil {
							return err
						}
						if !bitsEqual(x, out[k][c.Rank()]) {
							return fmt.Errorf("%s ranks=%d n=%d: strategy %s differs from the Sync's result", bk, ranks, sizes[k], st)
						}
					}
					return nil
				}))
			}
		}
	}
}

// TestArena: an Arena's views are laid out in order, contiguous, with
// capacity = length, and Flat covers them; one Sync of Flat on every rank
// averages every view; Close is idempotent; a negative size is refused.
func TestArena(t *testing.T) {
	sizes := []int{3, 0, 5, 1, 0, 1000, 7, 4099}
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3)
		ss32 := newSyncs[float32](t, g, Options{})
		ss64 := newSyncs[float64](t, g, Options{})
		noErrors(t, onRanks(g, func(c *collective.Comm) error {
			if err := arenaCase(c, ss32[c.Rank()], sizes); err != nil {
				return err
			}
			return arenaCase(c, ss64[c.Rank()], sizes)
		}))
	}
	a, err := NewArena[float32]()
	if err != nil {
		t.Fatal(err)
	}
	if a.Len() != 0 || len(a.Flat()) != 0 {
		t.Errorf("empty arena: %d views, %d elements", a.Len(), len(a.Flat()))
	}
	if err := errors.Join(a.Close(), a.Close()); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]int{{-1}, {4, 0, -3, 5}} {
		if a, err := NewArena[float64](bad...); !errors.Is(err, collective.ErrInvalidArgument) || a != nil {
			t.Errorf("NewArena(%v): %v, %v, want ErrInvalidArgument", bad, a, err)
		}
	}
}

func arenaCase[T collective.Float](c *collective.Comm, s *Sync[T], sizes []int) error {
	a, err := NewArena[T](sizes...)
	if err != nil {
		return err
	}
	defer a.Close()
	flat := a.Flat()
	total := 0
	for _, n := range sizes {
		total += n
	}
	if a.Len() != len(sizes) || len(flat) != total || cap(flat) != total {
		return errors.New("arena: wrong number of views or elements")
	}
	off := 0
	for i, n := range sizes {
		v := a.View(i)
		if len(v) != n || cap(v) != n {
			return errors.New("arena: a view's length or capacity is not its size")
		}
		if n > 0 && unsafe.SliceData(v) != &flat[off] {
			return errors.New("arena: views are not contiguous and in order")
		}
		for j := range v {
			v[j] = T(c.Rank() + i + j%11) // exact: the mean is i + j%11 + 1
		}
		off += n
	}
	if err := s.Sync(context.Background(), a.Flat()); err != nil {
		return err
	}
	for i := range sizes {
		for j, x := range a.View(i) {
			if want := T(i + j%11 + 1); x != want {
				return errors.New("arena: view " + strconv.Itoa(i) + " element " + strconv.Itoa(j) + " is not the mean")
			}
		}
	}
	if err := a.Close(); err != nil {
		return err
	}
	if err := a.Close(); err != nil {
		return err
	}
	if a.Flat() != nil || a.Len() != 0 {
		return errors.New("arena: views left after Close")
	}
	return nil
}

// TestSyncAllocs: a steady-state Sync of 4096 float32 with the default
// Options allocates nothing.
func TestSyncAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	g := openGroup(t, "host", 2)
	ss := newSyncs[float32](t, g, Options{})
	data := [][]float32{make([]float32, 4096), make([]float32, 4096)}
	allocs := allocsPerStep(t, func(r int) error { return ss[r].Sync(context.Background(), data[r]) })
	if allocs != 0 {
		t.Errorf("%v allocations per Sync, want 0", allocs)
	}
}

// TestQuietByDefault: without a Logger and with GOCOLL_DEBUG unset nothing
// reaches slog.Default over 250 steps, although the monitor's interval
// passes many times and the adaptive selector probes and switches; with
// GOCOLL_DEBUG set the lines go to slog.Default.
func TestQuietByDefault(t *testing.T) {
	t.Setenv("GOCOLL_DEBUG", "")
	def := countDefault(t)
	// The ring, slowed down (it submits twice per call at 2 ranks, direct
	// once), is left for a faster strategy.
	g := openGroup(t, "host", 2, func(o *collective.Options) { o.Config.Strategy = collective.Ring })
	setDelay(t, g, 300*time.Microsecond)
	o := Options{Adaptive: true, AnyOrder: true, LogEvery: 3, SwitchCooldown: 1, ProbeSteps: 1, ProbeLimit: 1e9}
	ss := make([]*Sync[float32], 2)
	for r := range ss {
		s, err := New[float32](g.Comm(r), o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		ss[r] = s
	}
	const steps = 250
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		x := make([]float32, 256)
		for s := 0; s < steps; s++ {
			var err error
			if s%2 == 0 {
				err = ss[c.Rank()].Sync(context.Background(), x)
			} else {
				err = ss[c.Rank()].SyncAll(context.Background(), [][]float32{x[:100], x[100:]})
			}
			if err != nil {
				return err
			}
		}
		return nil
	}))
	if n := def.count(); n != 0 {
		t.Errorf("%d records reached slog.Default without a Logger or GOCOLL_DEBUG", n)
	}
	if st := ss[0].Stats(); st.Steps != steps || st.ProbeSteps == 0 || st.Switches == 0 {
		t.Errorf("%+v: want %d steps, probes and a switch (the lines that were not logged)", st, steps)
	}
	// GOCOLL_DEBUG set: the monitor's lines go to slog.Default.
	t.Setenv("GOCOLL_DEBUG", "INFO")
	dbg := make([]*Sync[float32], 2)
	for r := range dbg {
		s, err := New[float32](g.Comm(r), Options{LogEvery: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		dbg[r] = s
	}
	noErrors(t, onRanks(g, func(c *collective.Comm) error {
		for s := 0; s < 3; s++ {
			if err := dbg[c.Rank()].Sync(context.Background(), make([]float32, 8)); err != nil {
				return err
			}
		}
		return nil
	}))
	if n := def.count(); n < 6 {
		t.Errorf("GOCOLL_DEBUG set: %d records on slog.Default, want one a step a rank (6)", n)
	}
}

// TestCloseThenUse: Close waits for the asynchronous steps and is
// idempotent; afterwards Sync and SyncAll return ErrClosed and SyncAsync's
// Work fails with it.
func TestCloseThenUse(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 2)
		for _, o := range []Options{{}, {TopK: 0.5}} {
			ss := newSyncs[float32](t, g, o)
			res := make([][]float32, 2)
			noErrors(t, onRanks(g, func(c *collective.Comm) error {
				s := ss[c.Rank()]
				x := []float32{float32(2 * c.Rank()), 0, 0, 0}
				if err := s.Sync(context.Background(), x); err != nil {
					return err
				}
				y := []float32{float32(2 * c.Rank()), 4, 0, 0}
				w := s.SyncAsync(context.Background(), y)
				if err := s.Close(context.Background()); err != nil {
					return err
				}
				if !w.Done() {
					return errors.New("Close returned before the asynchronous step ended")
				}
				res[c.Rank()] = y
				if err := s.Close(context.Background()); err != nil {
					return errors.New("second Close: " + err.Error())
				}
				if err := s.Sync(context.Background(), x); !errors.Is(err, ErrClosed) {
					return errors.New("Sync after Close: " + errString(err))
				}
				if err := s.SyncAll(context.Background(), [][]float32{x}); !errors.Is(err, ErrClosed) {
					return errors.New("SyncAll after Close: " + errString(err))
				}
				if err := s.SyncAsync(context.Background(), x).Wait(context.Background()); !errors.Is(err, ErrClosed) {
					return errors.New("SyncAsync after Close: " + errString(err))
				}
				if err := s.Wait(context.Background()); err != nil {
					return errors.New("Wait after Close: " + err.Error())
				}
				return nil
			}))
			for r := range res {
				if res[r][0] != 1 || res[r][1] != 4 {
					t.Errorf("%s %+v rank %d: the step before Close gave %v", bk, o, r, res[r])
				}
			}
			if st := ss[0].Stats(); st.Steps != 2 {
				t.Errorf("%s %+v: %d steps counted, want 2 (none after Close)", bk, o, st.Steps)
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

var _ = slog.Default
