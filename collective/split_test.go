package collective

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// TestSplit: 8 ranks split into 2 x 4 (color r/4) and 4 x 2 (color r%4,
// keys reversing the order); the sub-groups of each split run different
// collectives at the same time and every result is exact; ranks are
// ordered by key; NoColor gets a nil Comm; the parent keeps working.
func TestSplit(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 8)
		ctx := context.Background()
		type res struct {
			sub      *Comm
			rank     int
			size     int
			got      []float32
			gathered []float32
		}
		for _, mode := range []string{"2x4", "4x2"} {
			out := make([]res, 8)
			noErrors(t, onRanks(g, func(c *Comm) error {
				r := c.Rank()
				color, key := r/4, r
				if mode == "4x2" {
					color, key = r%4, -r // reversed order inside each pair
				}
				sub, err := c.Split(ctx, color, key)
				if err != nil {
					return err
				}
				o := &out[r]
				o.sub, o.rank, o.size = sub, sub.Rank(), sub.Size()
				// Color 0 all-reduces, the others all-gather, concurrently.
				if color == 0 {
					o.got = []float32{float32(r), 1}
					return AllReduce(ctx, sub, o.got, Sum)
				}
				o.gathered = make([]float32, sub.Size())
				return AllGather(ctx, sub, []float32{float32(r)}, o.gathered)
			}))
			for r, o := range out {
				color := r / 4
				members := []int{color * 4, color*4 + 1, color*4 + 2, color*4 + 3}
				if mode == "4x2" {
					color = r % 4
					members = []int{color + 4, color} // key -r: the higher parent rank first
				}
				want := -1
				for i, m := range members {
					if m == r {
						want = i
					}
				}
				if o.rank != want || o.size != len(members) {
					t.Fatalf("%s %s: rank %d is %d of %d in its sub-group, want %d of %d", bk, mode, r, o.rank, o.size, want, len(members))
				}
				if color == 0 {
					s := float32(0)
					for _, m := range members {
						s += float32(m)
					}
					if o.got[0] != s || o.got[1] != float32(len(members)) {
						t.Fatalf("%s %s: rank %d all-reduce = %v, want [%v %d]", bk, mode, r, o.got, s, len(members))
					}
				} else {
					for i, m := range members {
						if o.gathered[i] != float32(m) {
							t.Fatalf("%s %s: rank %d all-gather = %v, want members %v", bk, mode, r, o.gathered, members)
						}
					}
				}
			}
		}
		// NoColor, and the parent still works.
		noErrors(t, onRanks(g, func(c *Comm) error {
			color := 0
			if c.Rank()%2 == 1 {
				color = NoColor
			}
			sub, err := c.Split(ctx, color, 0)
			if err != nil {
				return err
			}
			if (sub == nil) != (color == NoColor) {
				return fmt.Errorf("color %d: sub-group %v", color, sub)
			}
			if sub != nil {
				if err := Barrier(ctx, sub); err != nil {
					return err
				}
			}
			return AllReduce(ctx, c, make([]float32, 3), Sum)
		}))
		errs := onRanks(g, func(c *Comm) error { _, err := c.Split(ctx, -5, 0); return err })
		for r, err := range errs {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s rank %d, color -5: %v", bk, r, err)
			}
		}
	}
}

// splitTr is a loopback transport that splits (backend.Splitter): each
// process's k-th Split on a network meets the others' k-th, as
// MPI_Comm_split does, and faults can be injected.
type splitTr struct {
	*loopTr
	w      *splitWorld
	nsplit int
	agErr  error // Allgather fails with it after taking part (once)
}

// splitWorld is what the split transports of one test share.
type splitWorld struct {
	mu    sync.Mutex
	nets  map[splitNetKey]*loopNet
	made  []*splitTr  // every transport Split made
	calls map[int]int // Split calls so far, by process of the root network
	// failProc's failCall-th Split fails with failErr after its collective
	// part; agFailProc's first transport made by Split fails its first
	// Allgather with agErr (after taking part). -1: none.
	failProc, failCall int
	failErr            error
	agFailProc         int
	agErr              error
	// delayProc's first Split waits delay (or until its ctx ends) first.
	delayProc int
	delay     time.Duration
}

type splitNetKey struct {
	parent      *loopNet
	call, color int
}

func newSplitWorld() *splitWorld {
	return &splitWorld{nets: map[splitNetKey]*loopNet{}, calls: map[int]int{}, failProc: -1, agFailProc: -1, delayProc: -1}
}

func (s *splitTr) Dup(ctx context.Context) (backend.Transport, error) {
	d, err := s.loopTr.Dup(ctx)
	if err != nil {
		return nil, err
	}
	return &splitTr{loopTr: d.(*loopTr), w: s.w}, nil
}

func (s *splitTr) Allgather(ctx context.Context, mine, all []byte) error {
	err := s.loopTr.Allgather(ctx, mine, all)
	if err == nil && s.agErr != nil {
		err, s.agErr = s.agErr, nil
	}
	return err
}

func (s *splitTr) Split(ctx context.Context, color, key int) (backend.Transport, error) {
	s.w.mu.Lock()
	var delay time.Duration
	if s.rank == s.w.delayProc {
		delay, s.w.delay = s.w.delay, 0
	}
	s.w.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	mine := make([]byte, 16)
	binary.LittleEndian.PutUint64(mine, uint64(int64(color)))
	binary.LittleEndian.PutUint64(mine[8:], uint64(int64(key)))
	all := make([]byte, 16*s.Size())
	if err := s.loopTr.Allgather(ctx, mine, all); err != nil {
		return nil, err
	}
	call := s.nsplit
	s.nsplit++
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls[s.rank]++
	if w.failErr != nil && s.rank == w.failProc && w.calls[s.rank] == w.failCall {
		return nil, w.failErr
	}
	if color < 0 {
		return nil, nil
	}
	var members []int
	for p := 0; p < s.Size(); p++ {
		if int64(binary.LittleEndian.Uint64(all[16*p:])) == int64(color) {
			members = append(members, p)
		}
	}
	keyOf := func(p int) int64 { return int64(binary.LittleEndian.Uint64(all[16*p+8:])) }
	sort.SliceStable(members, func(a, b int) bool { return keyOf(members[a]) < keyOf(members[b]) })
	k := splitNetKey{s.net, call, color}
	n := w.nets[k]
	if n == nil {
		n = &loopNet{queues: map[[3]int][][]byte{}, size: len(members)}
		w.nets[k] = n
	}
	t := &splitTr{loopTr: &loopTr{net: n, rank: slices.Index(members, s.rank)}, w: w}
	if s.rank == w.agFailProc && w.agErr != nil {
		t.agErr, w.agErr = w.agErr, nil
	}
	w.made = append(w.made, t)
	return t, nil
}

// openSplitProcesses opens one group per simulated process over split
// transports.
func openSplitProcesses(t *testing.T, w *splitWorld, procs, local int, timeout time.Duration) []*Group {
	t.Helper()
	trs := newLoopNet(procs)
	gs := make([]*Group, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for p := range gs {
		wg.Go(func() {
			cfg := testConfig()
			cfg.CommunicationTimeout = timeout
			gs[p], errs[p] = NewGroup(context.Background(), Options{Ranks: local, Backend: "host", Config: cfg,
				Transport: &splitTr{loopTr: trs[p], w: w}, ChunkBytes: 4096})
		})
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", p, err)
		}
	}
	t.Cleanup(func() {
		for _, g := range gs {
			g.Close()
		}
	})
	return gs
}

// TestSplitProcesses: Split of groups that span simulated processes over a
// loopback transport that splits. 2 x 4 and 4 x 2 ranks split by r/4, r%2
// and r%4 with reversed keys: each sub-group's numbering and layout (one
// process, or several with the same number of ranks each, ranked by their
// first members) is checked, and the sub-groups run different collectives
// at once, every result exact.
func TestSplitProcesses(t *testing.T) {
	ctx := context.Background()
	for _, shape := range [][2]int{{2, 4}, {4, 2}} {
		P, L := shape[0], shape[1]
		gs := openSplitProcesses(t, newSplitWorld(), P, L, 20*time.Second)
		n := P * L
		for _, sc := range []struct {
			name       string
			color, key func(r int) int
		}{
			{"r/4", func(r int) int { return r / 4 }, func(r int) int { return r }},
			{"r%2", func(r int) int { return r % 2 }, func(r int) int { return r }},
			{"r%4,key=-r", func(r int) int { return r % 4 }, func(r int) int { return -r }},
		} {
			name := fmt.Sprintf("%dx%d/%s", P, L, sc.name)
			errs := onAllRanks(gs, func(c *Comm) error {
				r := c.Rank()
				col := sc.color(r)
				sub, err := c.Split(ctx, col, sc.key(r))
				if err != nil {
					return err
				}
				var members, procs []int
				for x := range n {
					if sc.color(x) == col {
						members = append(members, x)
					}
				}
				sort.SliceStable(members, func(a, b int) bool { return sc.key(members[a]) < sc.key(members[b]) })
				for _, x := range members {
					if !slices.Contains(procs, x/L) {
						procs = append(procs, x/L)
					}
				}
				m := len(members)
				if sub.Rank() != slices.Index(members, r) || sub.Size() != m || sub.Group().Processes() != len(procs) ||
					sub.Group().LocalSize() != m/len(procs) {
					return fmt.Errorf("color %d: rank %d of %d, %d processes of %d; want %d of %d (%v), %d processes (%v)",
						col, sub.Rank(), sub.Size(), sub.Group().Processes(), sub.Group().LocalSize(), slices.Index(members, r), m, members, len(procs), procs)
				}
				if col%2 == 0 {
					x := []float32{float32(r), 1, 2}
					if err := AllReduce(ctx, sub, x, Sum); err != nil {
						return err
					}
					s := 0
					for _, y := range members {
						s += y
					}
					if x[0] != float32(s) || x[1] != float32(m) || x[2] != float32(2*m) {
						return fmt.Errorf("color %d: AllReduce = %v, want [%d %d %d]", col, x, s, m, 2*m)
					}
					return nil
				}
				all := make([]int32, 2*m)
				if err := AllGather(ctx, sub, []int32{int32(r), int32(-r)}, all); err != nil {
					return err
				}
				for i, y := range members {
					if all[2*i] != int32(y) || all[2*i+1] != int32(-y) {
						return fmt.Errorf("color %d: AllGather = %v, want members %v", col, all, members)
					}
				}
				return nil
			})
			if len(errs) > 0 {
				t.Fatalf("%s: %v", name, errs)
			}
		}
	}
}

// TestSplitProcessesUnsupported: layouts a sub-group across processes
// cannot have, and a transport that cannot split, fail with ErrUnsupported
// on every rank, naming the color; the parent works on; sub-groups within
// one process need no Splitter.
func TestSplitProcessesUnsupported(t *testing.T) {
	ctx := context.Background()
	split := openSplitProcesses(t, newSplitWorld(), 2, 2, 20*time.Second)
	plain := openProcesses(t, "host", 2, 2)
	for _, tc := range []struct {
		name       string
		gs         []*Group
		color, key func(r int) int
		want       string
	}{
		{"interleaved", split, func(int) int { return 7 }, func(r int) int { return (r%2)*2 + r/2 }, "color 7: in key order its members are in processes [0 x1, 1 x1, 0 x1, 1 x1]"},
		{"unequal", split, func(r int) int { return map[bool]int{true: 2, false: NoColor}[r < 3] }, func(r int) int { return r }, "color 2: process 0 has 2 of its members, process 1 has 1"},
		{"no Splitter", plain, func(r int) int { return r % 2 }, func(r int) int { return r }, "color 0: it spans processes [0 1], and the transport of process 0 (loopback) cannot split"},
	} {
		errs := onAllRanks(tc.gs, func(c *Comm) error {
			sub, err := c.Split(ctx, tc.color(c.Rank()), tc.key(c.Rank()))
			if sub != nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(fmt.Sprint(err), tc.want) {
				return fmt.Errorf("Split = %v, %v; want ErrUnsupported: %s", sub, err, tc.want)
			}
			x := []float32{float32(c.Rank())}
			if err := AllReduce(ctx, c, x, Sum); err != nil || x[0] != 6 {
				return fmt.Errorf("parent AllReduce = %v, %v", x, err)
			}
			return nil
		})
		if len(errs) > 0 {
			t.Errorf("%s: %v", tc.name, errs)
		}
	}
	// Within one process, no transport is needed.
	errs := onAllRanks(plain, func(c *Comm) error {
		sub, err := c.Split(ctx, c.Rank()/2, -c.Rank())
		if err != nil {
			return err
		}
		if sub.Size() != 2 || sub.Rank() != 1-c.Rank()%2 || sub.Group().Processes() != 1 {
			return fmt.Errorf("rank %d of %d in %d processes", sub.Rank(), sub.Size(), sub.Group().Processes())
		}
		return Barrier(ctx, sub)
	})
	if len(errs) > 0 {
		t.Errorf("in-process sub-groups over a transport without Splitter: %v", errs)
	}
}

// TestSplitProcessesFailure: a transport split that fails in one process
// (after the others made theirs), and then a sub-group that fails to open in
// one process (after the others opened theirs), make Split fail on every
// rank, the failing process with its own error, the others with a
// RemoteError that carries its class; every transport the splits made is
// closed again, and the parent works on. A NoColor rank gets the error too.
func TestSplitProcessesFailure(t *testing.T) {
	ctx := context.Background()
	w := newSplitWorld()
	gs := openSplitProcesses(t, w, 2, 4, 20*time.Second)
	injected := fmt.Errorf("injected split failure: %w", ErrInvalidArgument)
	w.failProc, w.failCall, w.failErr = 1, 3, injected
	color := func(r int) int {
		if r == 7 {
			return NoColor
		}
		return r % 4
	}
	check := func(what string, wantMine, wantOthers func(error) bool) {
		t.Helper()
		start := time.Now()
		errs := onAllRanks(gs, func(c *Comm) error {
			sub, err := c.Split(ctx, color(c.Rank()), c.Rank())
			want := wantOthers
			if c.Rank()/4 == 1 {
				want = wantMine
			}
			if sub != nil || !want(err) {
				return fmt.Errorf("Split = %v, %v", sub, err)
			}
			if c.Rank() == 0 || c.Rank() == 4 {
				t.Logf("%s: rank %d: %v", what, c.Rank(), err)
			}
			x := []int32{int32(c.Rank())}
			if err := AllReduce(ctx, c, x, Sum); err != nil || x[0] != 28 {
				return fmt.Errorf("parent AllReduce = %v, %v", x, err)
			}
			return nil
		})
		if len(errs) > 0 {
			t.Fatalf("%s: %v", what, errs)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%s: took %v: a process waited for the failed one", what, el)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for i, tr := range w.made {
			if !tr.closed.Load() {
				t.Errorf("%s: transport %d made by Split (process %d of %d) still open", what, i, tr.rank, tr.Size())
			}
		}
		if len(w.made) == 0 {
			t.Errorf("%s: no transport made", what)
		}
		w.made = nil
	}
	check("a transport split fails", func(err error) bool { return errors.Is(err, injected) },
		func(err error) bool {
			var re *RemoteError
			return errors.Is(err, ErrInvalidArgument) && errors.As(err, &re) && re.Process == 1
		})
	// Process 1's first sub-group over a transport fails to open after
	// joining the others.
	opening := errors.New("injected open failure")
	w.agFailProc, w.agErr = 1, opening
	check("a sub-group fails to open", func(err error) bool { return errors.Is(err, opening) },
		func(err error) bool { var re *RemoteError; return errors.As(err, &re) && re.Process == 1 })
	// And then a Split that works.
	errs := onAllRanks(gs, func(c *Comm) error {
		sub, err := c.Split(ctx, color(c.Rank()), c.Rank())
		if err != nil || (sub == nil) != (c.Rank() == 7) {
			return fmt.Errorf("Split = %v, %v", sub, err)
		}
		if sub != nil {
			return Barrier(ctx, sub)
		}
		return nil
	})
	if len(errs) > 0 {
		t.Fatalf("Split after the failures: %v", errs)
	}
}

// TestSplitProcessesTimeout: a process that is late to the transport split
// makes the others time out within CommunicationTimeout; that breaks the
// parent (its transport may be out of step), which tells the late process,
// whose Split then fails at once too. Every rank gets an error matching
// ErrTimeout, and the parent's later calls fail with ErrGroupBroken.
func TestSplitProcessesTimeout(t *testing.T) {
	ctx := context.Background()
	w := newSplitWorld()
	gs := openSplitProcesses(t, w, 2, 2, 300*time.Millisecond)
	w.delayProc, w.delay = 1, 5*time.Second
	start := time.Now()
	errs := onAllRanks(gs, func(c *Comm) error {
		sub, err := c.Split(ctx, c.Rank()%2, 0)
		if sub != nil || !errors.Is(err, ErrTimeout) {
			return fmt.Errorf("Split = %v, %v; want ErrTimeout", sub, err)
		}
		if c.Rank()%2 == 0 {
			t.Logf("rank %d: %v", c.Rank(), err)
		}
		return nil
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Split failed after %v (CommunicationTimeout 300 ms)", el)
	}
	errs = onAllRanks(gs, func(c *Comm) error {
		if err := Barrier(ctx, c); !errors.Is(err, ErrGroupBroken) {
			return fmt.Errorf("Barrier after the timeout = %v, want ErrGroupBroken", err)
		}
		return nil
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
}

// A sub-group runs on its parent's devices and takes over its parent's cost
// model instead of measuring them again: measured by the parent before the
// Split, or by the first sub-group that needs it (then the parent and the
// other sub-groups have it too); the slot size and links are its own.
func TestSplitSharesCostModel(t *testing.T) {
	for _, first := range []string{"parent", "sub-group"} {
		g := openGroup(t, "host", 4, func(o *Options) { o.Config = Config{} })
		subs := make([]*Comm, 4)
		errs := onRanks(g, func(c *Comm) error {
			if first == "parent" {
				if err := AllReduce(context.Background(), c, make([]float32, 8), Sum); err != nil {
					return err
				}
			}
			sub, err := c.Split(context.Background(), c.Rank()%2, 0)
			if err != nil {
				return err
			}
			subs[c.Rank()] = sub
			return AllReduce(context.Background(), sub, make([]float32, 8), Sum)
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("%s first: %v", first, err)
		}
		pm := &g.model
		if !pm.Done() || pm.Err != nil || pm.Measured == 0 {
			t.Fatalf("%s first: the parent's model: done %v, err %v, measured in %v", first, pm.Done(), pm.Err, pm.Measured)
		}
		for _, r := range []int{0, 1} {
			sg := subs[r].Group()
			m := &sg.model
			if !m.Done() || m.Measured != 0 || m.Memcpy != pm.Memcpy || m.Handoff != pm.Handoff || m.Submit != pm.Submit ||
				m.SlotBytes != sg.slotBytes || m.Links != linkPathOf(sg) {
				t.Errorf("%s first: sub-group of color %d: model %+v; want the parent's (%+v) with its own slots and links, not measured again",
					first, r, m.Model, pm.Model)
			}
		}
		g.Close()
	}
}
