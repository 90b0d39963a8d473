//go:build mpi && cgo

package mpi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// splitMembers is the reference for Split: the ranks of 0..n-1 with color
// col, by key, then by rank.
func splitMembers(n, col int, color, key func(r int) int) []int {
	var m []int
	for r := range n {
		if color(r) == col {
			m = append(m, r)
		}
	}
	slices.SortStableFunc(m, func(a, b int) int { return key(a) - key(b) })
	return m
}

// TestWorldSplit: World.Split by process parity with keys reversing the
// order, the last process left out when there are more than 2 (color -1
// gets nil). Each sub-World's rank and size, an Allgather and a ring
// exchange on it are checked, while the World runs Allgathers and exchanges
// with the same tag at the same time.
func TestWorldSplit(t *testing.T) {
	w, ctx := begin(t, 30*time.Second)
	P := w.Size()
	color := func(p int) int {
		if p == P-1 && P > 2 {
			return -1
		}
		return p % 2
	}
	key := func(p int) int { return -p }
	tr, err := w.Split(ctx, color(w.Rank()), key(w.Rank()))
	ok := err == nil
	if err != nil {
		t.Errorf("Split: %v", err)
	}
	// The World's traffic (every process) while the sub-Worlds work.
	errc := make(chan error, 1)
	go func() { errc <- dupTraffic(ctx, w, 1, 3, 5) }()
	switch {
	case !ok:
	case color(w.Rank()) < 0:
		if tr != nil {
			t.Errorf("Split with color -1 = %v, want nil", tr)
			ok = false
		}
	default:
		d := tr.(*World)
		members := splitMembers(P, color(w.Rank()), color, key)
		if d.Size() != len(members) || d.Rank() != slices.Index(members, w.Rank()) || !registered(d) {
			t.Errorf("sub-World rank %d of %d, want %d of %d (members %v)", d.Rank(), d.Size(), slices.Index(members, w.Rank()), len(members), members)
			ok = false
		}
		const m = 16
		all := make([]byte, m*d.Size())
		if err := d.Allgather(ctx, pattern(w.Rank(), m, 1), all); err != nil {
			t.Errorf("Allgather on the sub-World: %v", err)
			ok = false
		}
		for i, p := range members {
			if !bytes.Equal(all[i*m:(i+1)*m], pattern(p, m, 1)) {
				t.Errorf("sub-World Allgather: slot %d does not hold process %d's data", i, p)
				ok = false
			}
		}
		if d.Size() > 1 {
			next, prev := neighbours(d)
			got := make([]byte, 100)
			err := exchange(ctx, d, pattern(w.Rank(), 100, 2), got, next, prev, 5)
			if err != nil || !bytes.Equal(got, pattern(members[prev], 100, 2)) {
				t.Errorf("sub-World exchange with processes %d and %d: %v", members[next], members[prev], err)
				ok = false
			}
		}
		if err := d.Close(); err != nil || registered(d) {
			t.Errorf("Close of the sub-World: %v", err)
			ok = false
		}
	}
	if err := <-errc; err != nil {
		t.Errorf("the World's traffic meanwhile: %v", err)
		ok = false
	}
	if _, err := w.Split(ctx, maxInt+1, 0); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Split with a color beyond a C int = %v, want ErrInvalidArgument", err)
		ok = false
	}
	agree(t, w, ok, "World.Split")
}

// TestWorldSplitTimeout: only process 0 calls Split, with a deadline, on a
// duplicate made for the test. It must time out within the deadline +
// 250 ms, naming the others; a Barrier behind it times out without being
// posted. The others, told so, call Split late: process 0 then makes its
// MPI_Comm_split in the background (and frees what it made) while its next
// collective waits, and the duplicate is in step again.
func TestWorldSplitTimeout(t *testing.T) {
	w, ctx := begin(t, 30*time.Second)
	d := dup(t, ctx, w)
	const deadline = 300 * time.Millisecond
	const timedOutTag = 804
	if w.Rank() == 0 {
		sctx, cancel := context.WithTimeout(ctx, deadline)
		start := time.Now()
		got, err := d.Split(sctx, 0, 0)
		elapsed := time.Since(start)
		cancel()
		t.Logf("Split without the others: after %v: %v", elapsed.Round(time.Millisecond), err)
		if got != nil || !errors.Is(err, backend.ErrTimeout) {
			t.Fatalf("Split without the others = %v, %v; want ErrTimeout", got, err)
		}
		if elapsed > deadline+250*time.Millisecond {
			t.Errorf("returned after %v, deadline %v + 250 ms", elapsed, deadline)
		}
		var e *Error
		others := make([]int, 0, w.Size()-1)
		for p := 1; p < w.Size(); p++ {
			others = append(others, p)
		}
		if !errors.As(err, &e) || e.Call != "MPI_Comm_split" || !slices.Equal(e.Ranks, others) {
			t.Errorf("error names call %q and processes %v, want MPI_Comm_split and %v", e.Call, e.Ranks, others)
		}
		bctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err = d.Barrier(bctx)
		cancel()
		if !errors.Is(err, backend.ErrTimeout) || !errors.As(err, &e) || e.Call != "MPI_Ibarrier" {
			t.Errorf("Barrier behind the Split that timed out = %v; want ErrTimeout", err)
		}
		for p := 1; p < w.Size(); p++ {
			if err := send(ctx, w, nil, p, timedOutTag); err != nil {
				t.Fatalf("telling process %d: %v", p, err)
			}
		}
	} else {
		if err := recv(ctx, w, nil, 0, timedOutTag); err != nil {
			t.Fatalf("waiting for process 0 to time out: %v", err)
		}
		late, err := d.Split(ctx, 0, 0)
		if err != nil {
			t.Fatalf("late Split: %v", err)
		}
		if late.Size() != w.Size() {
			t.Errorf("late Split made a World of %d processes, want %d", late.Size(), w.Size())
		}
		if err := late.Close(); err != nil {
			t.Errorf("Close of the late sub-World: %v", err)
		}
	}
	if err := d.Barrier(ctx); err != nil {
		t.Fatalf("Barrier after the timeout: %v", err)
	}
	if err := dupTraffic(ctx, d, 3, 2, 1); err != nil {
		t.Error(err)
	}
	waitBackground(t, d)
	if err := d.Close(); err != nil {
		t.Errorf("Close of the duplicate: %v", err)
	}
}

// splitCase is one way of splitting the group's ranks.
type splitCase struct {
	name       string
	color, key func(r int) int
	nest       bool // split each sub-group again, by the parity of its ranks
	// nestFirst, when not nil, makes the other colors' nested Splits wait in
	// each process until those of color 0 there have returned: the
	// documented workaround for the funneled and serialized levels, where
	// two MPI_Comm_splits at once on communicators sharing processes can
	// deadlock (docs/MPI.md, Split).
	nestFirst *sync.WaitGroup
}

// TestGroupSplit: a host group of 8 ranks (P processes of 8/P local ranks;
// 6 ranks, 2 per process, in the job of 3 processes) splits three ways:
// color r/4 (2 x 4), r%2 (2 x 4, interleaved) and r%4 with keys reversing
// the order (4 x 2: a process's first member can be in a later process, and
// a process has ranks in several sub-groups, each a sub-communicator of its
// own). Sub-groups are in one process or span several, as the layout makes
// them. Every sub-group then runs its own collective at the same time as
// the others (by color: AllReduce of float32, AllGather of int32,
// ReduceScatter of float64), then a Broadcast from its last rank, and every
// result is checked exactly against a plain Go reference; the r%2
// sub-groups split again by the parity of their ranks. The parent works
// afterwards. TestGroupSplitEightProcesses runs it with 8 processes of 1.
func TestGroupSplit(t *testing.T) {
	w, _ := begin(t, 60*time.Second)
	P := w.Size()
	L := max(1, 8/P)
	if 8%P != 0 {
		L = 2
	}
	// A group an earlier test dropped without Close frees its World when
	// the collector finds it unreachable, once its goroutines have ended:
	// let that happen before counting.
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	open := openWorlds()
	g := openTestGroup(t, w, "host", L, 30*time.Second)
	n := g.Size()
	cases := []splitCase{
		{"r/4", func(r int) int { return r / 4 }, func(r int) int { return r }, false, nil},
		{"r%2", func(r int) int { return r % 2 }, func(r int) int { return r }, true, nil},
		{"r%4,key=-r", func(r int) int { return r % 4 }, func(r int) int { return -r }, false, nil},
	}
	for _, sc := range cases {
		start := time.Now()
		if sc.nest && w.ThreadLevel() < ThreadMultiple {
			sc.nestFirst = new(sync.WaitGroup)
			for i := range g.LocalSize() {
				if sc.color(g.Comm(i).Rank()) == 0 {
					sc.nestFirst.Add(1)
				}
			}
		}
		errs := onLocal(g, func(c *collective.Comm) error {
			return runSplitCase(c, n, L, sc)
		})
		ok := true
		for i, err := range errs {
			if err != nil {
				t.Errorf("%s: rank %d: %v", sc.name, g.Comm(i).Rank(), err)
				ok = false
			}
		}
		if w.Rank() == 0 {
			t.Logf("%d x %d ranks (processes x local), color %s: split and collectives in %v", P, L, sc.name, time.Since(start).Round(time.Millisecond))
		}
		agree(t, w, ok, "split "+sc.name)
	}
	// The parent still works.
	errs := onLocal(g, func(c *collective.Comm) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		x := []int32{int32(c.Rank()), 1}
		if err := collective.AllReduce(ctx, c, x, collective.Sum); err != nil {
			return err
		}
		if x[0] != int32(n*(n-1)/2) || x[1] != int32(n) {
			return fmt.Errorf("parent AllReduce after the splits = %v", x)
		}
		return nil
	})
	agree(t, w, errors.Join(errs...) == nil, fmt.Sprintf("parent after the splits: %v", errors.Join(errs...)))
	// Closing the parent closes the sub-groups and frees their Worlds.
	err := g.Close()
	if err != nil {
		t.Errorf("Close: %v", err)
	}
	if now := openWorlds(); now != open {
		t.Errorf("%d Worlds made by Dup or Split open after closing the group, %d before", now, open)
	}
	agree(t, w, err == nil && !t.Failed(), "closing the group")
}

// openWorlds counts the Worlds made by Dup and Split still open.
func openWorlds() int {
	initMu.Lock()
	defer initMu.Unlock()
	return len(dups)
}

// runSplitCase splits c's group as sc says, checks the sub-group's
// numbering and layout, and runs its collectives.
func runSplitCase(c *collective.Comm, n, L int, sc splitCase) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := c.Rank()
	col := sc.color(r)
	if sc.nestFirst != nil && col == 0 {
		defer sc.nestFirst.Done()
	}
	sub, err := c.Split(ctx, col, sc.key(r))
	if err != nil {
		return fmt.Errorf("Split: %w", err)
	}
	members := splitMembers(n, col, sc.color, sc.key)
	m := len(members)
	// The reference layout: processes in the order of their first members,
	// the same number of members in each.
	var procs []int
	for _, x := range members {
		if !slices.Contains(procs, x/L) {
			procs = append(procs, x/L)
		}
	}
	if sub.Rank() != slices.Index(members, r) || sub.Size() != m ||
		sub.Group().Processes() != len(procs) || sub.Group().LocalSize() != m/len(procs) {
		return fmt.Errorf("color %d: rank %d of %d in %d processes of %d ranks; want %d of %d (members %v) in %d processes (%v) of %d",
			col, sub.Rank(), sub.Size(), sub.Group().Processes(), sub.Group().LocalSize(),
			slices.Index(members, r), m, members, len(procs), procs, m/len(procs))
	}
	const blk = 20011 // elements per member's block: several exchange slots
	switch col % 3 {
	case 0: // AllReduce of float32
		x := make([]float32, blk)
		for i := range x {
			x[i] = float32((r + 1) * (i%97 + 1))
		}
		if err := collective.AllReduce(ctx, sub, x, collective.Sum); err != nil {
			return fmt.Errorf("color %d: AllReduce: %w", col, err)
		}
		s := 0
		for _, x := range members {
			s += x + 1
		}
		for i, v := range x {
			if want := float32(s * (i%97 + 1)); v != want {
				return fmt.Errorf("color %d: AllReduce element %d = %v, want %v", col, i, v, want)
			}
		}
	case 1: // AllGather of int32
		in := func(x, i int) int32 { return int32(x*100000 + i) }
		send := make([]int32, blk)
		for i := range send {
			send[i] = in(r, i)
		}
		all := make([]int32, blk*m)
		if err := collective.AllGather(ctx, sub, send, all); err != nil {
			return fmt.Errorf("color %d: AllGather: %w", col, err)
		}
		for j, v := range all {
			if want := in(members[j/blk], j%blk); v != want {
				return fmt.Errorf("color %d: AllGather element %d = %v, want %v", col, j, v, want)
			}
		}
	case 2: // ReduceScatter of float64
		send := make([]float64, blk*m)
		for i := range send {
			send[i] = float64((r + 1) * (i%13 + 1))
		}
		part := make([]float64, blk)
		if err := collective.ReduceScatter(ctx, sub, send, part, collective.Sum); err != nil {
			return fmt.Errorf("color %d: ReduceScatter: %w", col, err)
		}
		s := 0
		for _, x := range members {
			s += x + 1
		}
		for i, v := range part {
			if want := float64(s * ((sub.Rank()*blk+i)%13 + 1)); v != want {
				return fmt.Errorf("color %d: ReduceScatter element %d = %v, want %v", col, i, v, want)
			}
		}
	}
	// Broadcast from the last member.
	root := m - 1
	b := make([]float32, blk)
	for i := range b {
		b[i] = -1
		if sub.Rank() == root {
			b[i] = float32(members[root]*7 + i)
		}
	}
	if err := collective.Broadcast(ctx, sub, b, root); err != nil {
		return fmt.Errorf("color %d: Broadcast: %w", col, err)
	}
	for i, v := range b {
		if want := float32(members[root]*7 + i); v != want {
			return fmt.Errorf("color %d: Broadcast element %d = %v, want %v", col, i, v, want)
		}
	}
	if !sc.nest {
		return nil
	}
	// Split the sub-group again (its transport splits too).
	if sc.nestFirst != nil && col != 0 {
		sc.nestFirst.Wait()
	}
	nested, err := sub.Split(ctx, sub.Rank()%2, sub.Rank())
	if err != nil {
		return fmt.Errorf("color %d: nested Split: %w", col, err)
	}
	var want []int
	s := 0
	for i, x := range members {
		if i%2 == sub.Rank()%2 {
			want = append(want, x)
			s += x
		}
	}
	x := []int32{int32(r), 1}
	if err := collective.AllReduce(ctx, nested, x, collective.Sum); err != nil {
		return fmt.Errorf("color %d: nested AllReduce: %w", col, err)
	}
	if nested.Rank() != slices.Index(want, r) || nested.Size() != len(want) || x[0] != int32(s) || x[1] != int32(len(want)) {
		return fmt.Errorf("color %d: nested sub-group: rank %d of %d, AllReduce %v; want %d of %d (%v), [%d %d]",
			col, nested.Rank(), nested.Size(), x, slices.Index(want, r), len(want), want, s, len(want))
	}
	return nil
}

// TestGroupSplitUnsupported: layouts a sub-group across processes cannot
// have (members of a process not contiguous in key order; unequal numbers of
// members per process) fail on every rank, NoColor ranks included, with an
// error matching ErrUnsupported that names the color, and the parent works
// on; then a supported split in which most ranks pass NoColor: they get
// nil, the others a sub-group of one rank per process that works; closing
// it early leaves the parent working.
func TestGroupSplitUnsupported(t *testing.T) {
	w, _ := begin(t, 60*time.Second)
	const L = 2
	P := w.Size()
	g := openTestGroup(t, w, "host", L, 30*time.Second)
	n := g.Size()
	cases := []splitCase{
		// Every rank in color 3, ordered local index first: process 0, 1,
		// ..., then process 0 again.
		{name: "interleaved", color: func(int) int { return 3 }, key: func(r int) int { return (r%L)*P + r/L }},
		// Color 5: both ranks of process 0, one of every other process.
		{name: "unequal", color: func(r int) int {
			if r < L || r%L == 0 {
				return 5
			}
			return collective.NoColor
		}, key: func(r int) int { return r }},
	}
	parent := func(c *collective.Comm) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		x := []float64{float64(c.Rank())}
		if err := collective.AllReduce(ctx, c, x, collective.Sum); err != nil {
			return fmt.Errorf("parent AllReduce: %w", err)
		}
		if x[0] != float64(n*(n-1)/2) {
			return fmt.Errorf("parent AllReduce = %v, want %d", x[0], n*(n-1)/2)
		}
		return nil
	}
	for _, sc := range cases {
		errs := onLocal(g, func(c *collective.Comm) error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sub, err := c.Split(ctx, sc.color(c.Rank()), sc.key(c.Rank()))
			want := fmt.Sprintf("color %d", sc.color(0))
			if sub != nil || !errors.Is(err, collective.ErrUnsupported) || !strings.Contains(fmt.Sprint(err), want) {
				return fmt.Errorf("Split = %v, %v; want ErrUnsupported naming %s", sub, err, want)
			}
			if c.Rank() == 0 {
				t.Logf("%s: %v", sc.name, err)
			}
			return parent(c)
		})
		agree(t, w, errors.Join(errs...) == nil, fmt.Sprintf("%s: %v", sc.name, errors.Join(errs...)))
	}
	// Local rank 0 of each process in color 0, key reversing the process
	// order; the other ranks NoColor.
	subs := make([]*collective.Comm, L)
	errs := onLocal(g, func(c *collective.Comm) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r := c.Rank()
		color := collective.NoColor
		if r%L == 0 {
			color = 0
		}
		sub, err := c.Split(ctx, color, -r)
		if err != nil {
			return err
		}
		if (sub == nil) != (color == collective.NoColor) {
			return fmt.Errorf("color %d: sub-group %v", color, sub)
		}
		subs[r%L] = sub
		if sub == nil {
			return nil
		}
		if want := P - 1 - r/L; sub.Rank() != want || sub.Size() != P || sub.Group().LocalSize() != 1 {
			return fmt.Errorf("rank %d of %d (%d local), want %d of %d (1 local)", sub.Rank(), sub.Size(), sub.Group().LocalSize(), want, P)
		}
		x := []int32{int32(r)}
		all := make([]int32, P)
		if err := collective.AllGather(ctx, sub, x, all); err != nil {
			return err
		}
		for i, v := range all {
			if want := int32((P - 1 - i) * L); v != want {
				return fmt.Errorf("AllGather = %v, want rank %d at %d", all, want, i)
			}
		}
		return nil
	})
	agree(t, w, errors.Join(errs...) == nil, fmt.Sprintf("split with NoColor: %v", errors.Join(errs...)))
	if err := subs[0].Group().Close(); err != nil {
		t.Errorf("Close of the sub-group: %v", err)
	}
	errs = onLocal(g, parent)
	agree(t, w, errors.Join(errs...) == nil, fmt.Sprintf("after closing the sub-group: %v", errors.Join(errs...)))
}

// TestGroupSplitEightProcesses runs TestGroupSplit in a job of 8
// processes of 1 rank each (every sub-group spans processes).
func TestGroupSplitEightProcesses(t *testing.T) {
	j := ownJob(t, 8, nil, "^TestGroupSplit$", "TestGroupSplit")
	if j.err != nil {
		t.Fatalf("mpirun -np 8: %v", j.err)
	}
	if !bytes.Contains(j.out, []byte("--- PASS: TestGroupSplit ")) {
		t.Errorf("the job did not pass TestGroupSplit")
	}
}
