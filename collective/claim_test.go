package collective

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// claimCall is one call of a claimKind on one rank: its synchronous and
// asynchronous forms on the same arguments, and the check of its result.
type claimCall struct {
	sync  func(ctx context.Context) error
	async func(ctx context.Context) Work
	check func() error
}

// claimKind makes rank c's call of variant v (0: the Async form, 1: the
// synchronous call, 2: a second goroutine's) in round i.
type claimKind struct {
	name string
	make func(t *testing.T, c *Comm, v, i int) claimCall
}

// claimVal is element k of what rank s sends towards rank j in variant v
// of round i: small integers, exact in float32 and in their sums.
func claimVal(v, i, s, j, k int) float32 {
	return float32(v*10000 + (i%5)*1000 + s*100 + j*10 + k%10)
}

// claimCount is rank j's count in variant v of round i; the second
// goroutine's (v == 2) differ from every other.
func claimCount(v, i, j int) int {
	if v == 2 {
		return 6 + j
	}
	return 1 + (i+2*j+v)%4
}

// claimLayout returns counts and displs of n ranks (one unused element
// between ranges) and the length they span.
func claimLayout(v, i, n int) (counts, displs []int, total int) {
	counts, displs = make([]int, n), make([]int, n)
	for j := range counts {
		counts[j], displs[j] = claimCount(v, i, j), total
		total += counts[j] + 1
	}
	return counts, displs, total
}

// filled returns n elements of -1 (never sent: the gaps stay so).
func filled(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = -1
	}
	return s
}

// gathered checks recv holds rank j's elements claimVal(v, i, j, to, k)
// (to < 0: to is the receiving rank r) at its range and -1 in the gaps.
func gathered(recv []float32, counts, displs []int, v, i, r, to int) error {
	if to < 0 {
		to = r
	}
	want := ranged(len(recv), counts, displs, func(j, k int) float32 { return claimVal(v, i, j, to, k) })
	for x := range want {
		if recv[x] != want[x] {
			return fmt.Errorf("rank %d, variant %d, round %d: recv[%d] = %v, want %v", r, v, i, x, recv[x], want[x])
		}
	}
	return nil
}

// ranged returns n elements holding val(j, k) at element k of range j
// [displs[j], +counts[j]), -1 elsewhere.
func ranged(n int, counts, displs []int, val func(j, k int) float32) []float32 {
	s := filled(n)
	for j := range counts {
		for k := 0; k < counts[j]; k++ {
			s[displs[j]+k] = val(j, k)
		}
	}
	return s
}

func sendOf(v, i, r, n int) []float32 {
	s := make([]float32, n)
	for k := range s {
		s[k] = claimVal(v, i, r, 0, k)
	}
	return s
}

var claimKinds = []claimKind{
	{"GatherV", func(t *testing.T, c *Comm, v, i int) claimCall {
		r, n, root := c.Rank(), c.Group().Size(), i%c.Group().Size()
		send := sendOf(v, i, r, claimCount(v, i, r))
		var recv []float32
		var counts, displs []int
		if r == root {
			var total int
			counts, displs, total = claimLayout(v, i, n)
			recv = filled(total)
		}
		return claimCall{
			sync:  func(ctx context.Context) error { return GatherV(ctx, c, send, recv, counts, displs, root) },
			async: func(ctx context.Context) Work { return GatherVAsync(ctx, c, send, recv, counts, displs, root) },
			check: func() error {
				if r != root {
					return nil
				}
				return gathered(recv, counts, displs, v, i, r, 0)
			},
		}
	}},
	{"ScatterV", func(t *testing.T, c *Comm, v, i int) claimCall {
		r, n, root := c.Rank(), c.Group().Size(), i%c.Group().Size()
		var send []float32
		var counts, displs []int
		if r == root {
			var total int
			counts, displs, total = claimLayout(v, i, n)
			send = ranged(total, counts, displs, func(j, k int) float32 { return claimVal(v, i, j, 0, k) })
		}
		recv := filled(claimCount(v, i, r))
		return claimCall{
			sync:  func(ctx context.Context) error { return ScatterV(ctx, c, send, recv, counts, displs, root) },
			async: func(ctx context.Context) Work { return ScatterVAsync(ctx, c, send, recv, counts, displs, root) },
			check: func() error {
				for k := range recv {
					if want := claimVal(v, i, r, 0, k); recv[k] != want {
						return fmt.Errorf("rank %d, variant %d, round %d: recv[%d] = %v, want %v", r, v, i, k, recv[k], want)
					}
				}
				return nil
			},
		}
	}},
	{"AllGatherV", func(t *testing.T, c *Comm, v, i int) claimCall {
		r, n := c.Rank(), c.Group().Size()
		send := sendOf(v, i, r, claimCount(v, i, r))
		counts, displs, total := claimLayout(v, i, n)
		recv := filled(total)
		return claimCall{
			sync:  func(ctx context.Context) error { return AllGatherV(ctx, c, send, recv, counts, displs) },
			async: func(ctx context.Context) Work { return AllGatherVAsync(ctx, c, send, recv, counts, displs) },
			check: func() error { return gathered(recv, counts, displs, v, i, r, 0) },
		}
	}},
	{"ReduceScatterV", func(t *testing.T, c *Comm, v, i int) claimCall {
		r, n := c.Rank(), c.Group().Size()
		counts, displs, total := claimLayout(v, i, n)
		send := ranged(total, counts, displs, func(j, k int) float32 { return claimVal(v, i, r, j, k) })
		recv := filled(counts[r])
		return claimCall{
			sync:  func(ctx context.Context) error { return ReduceScatterV(ctx, c, send, recv, counts, displs, Sum) },
			async: func(ctx context.Context) Work { return ReduceScatterVAsync(ctx, c, send, recv, counts, displs, Sum) },
			check: func() error { return reduced(recv, v, i, r, n) },
		}
	}},
	{"AllToAllV", func(t *testing.T, c *Comm, v, i int) claimCall {
		r, n := c.Rank(), c.Group().Size()
		// Rank s sends 1 + (i+s+2j+v)%3 elements to rank j.
		cnt := func(s, j int) int { return 1 + (i+s+2*j+v)%3 }
		scounts, sdispls := make([]int, n), make([]int, n)
		rcounts, rdispls := make([]int, n), make([]int, n)
		ns, nr := 0, 0
		for j := 0; j < n; j++ {
			scounts[j], sdispls[j] = cnt(r, j), ns
			ns += scounts[j]
			rcounts[j], rdispls[j] = cnt(j, r), nr
			nr += rcounts[j] + 1
		}
		send := ranged(ns, scounts, sdispls, func(j, k int) float32 { return claimVal(v, i, r, j, k) })
		recv := filled(nr)
		return claimCall{
			sync: func(ctx context.Context) error {
				return AllToAllV(ctx, c, send, scounts, sdispls, recv, rcounts, rdispls)
			},
			async: func(ctx context.Context) Work {
				return AllToAllVAsync(ctx, c, send, scounts, sdispls, recv, rcounts, rdispls)
			},
			check: func() error { return gathered(recv, rcounts, rdispls, v, i, r, -1) },
		}
	}},
	{"AllGatherVTensor", func(t *testing.T, c *Comm, v, i int) claimCall {
		r, n := c.Rank(), c.Group().Size()
		counts, displs, total := claimLayout(v, i, n)
		st := claimTensor(t, c, sendOf(v, i, r, claimCount(v, i, r)))
		rt := claimTensor(t, c, filled(total))
		return claimCall{
			sync:  func(ctx context.Context) error { return AllGatherVTensor(ctx, c, st, rt, counts, displs) },
			async: func(ctx context.Context) Work { return AllGatherVTensorAsync(ctx, c, st, rt, counts, displs) },
			check: func() error {
				recv := make([]float32, total)
				if err := rt.Download(recv); err != nil {
					return err
				}
				return gathered(recv, counts, displs, v, i, r, 0)
			},
		}
	}},
	{"ReduceScatterVTensor", func(t *testing.T, c *Comm, v, i int) claimCall {
		r, n := c.Rank(), c.Group().Size()
		counts, displs, total := claimLayout(v, i, n)
		send := ranged(total, counts, displs, func(j, k int) float32 { return claimVal(v, i, r, j, k) })
		st := claimTensor(t, c, send)
		rt := claimTensor(t, c, filled(counts[r]))
		return claimCall{
			sync:  func(ctx context.Context) error { return ReduceScatterVTensor(ctx, c, st, rt, counts, displs, Sum) },
			async: func(ctx context.Context) Work { return ReduceScatterVTensorAsync(ctx, c, st, rt, counts, displs, Sum) },
			check: func() error {
				recv := make([]float32, counts[r])
				if err := rt.Download(recv); err != nil {
					return err
				}
				return reduced(recv, v, i, r, n)
			},
		}
	}},
}

// reduced checks rank r's block of a sum over n ranks of claimVal.
func reduced(recv []float32, v, i, r, n int) error {
	for k := range recv {
		var want float32
		for s := 0; s < n; s++ {
			want += claimVal(v, i, s, r, k)
		}
		if recv[k] != want {
			return fmt.Errorf("rank %d, variant %d, round %d: recv[%d] = %v, want %v", r, v, i, k, recv[k], want)
		}
	}
	return nil
}

func claimTensor(t *testing.T, c *Comm, data []float32) *Tensor[float32] {
	x, err := NewTensor[float32](c, len(data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	if err := x.Upload(data); err != nil {
		t.Fatal(err)
	}
	return x
}

// A call claims its comm before it touches anything the comm owns (the V
// kinds' pooled counts and offsets above all). Each round, every rank
// starts a call's Async form and makes the synchronous call at once, so
// the synchronous call is made while the comm's worker still runs the
// first; and while rank 0's synchronous call holds its comm (waiting for
// its peers at the rendezvous), a second goroutine calls the same
// collective on it with other counts, and is refused with
// ErrConcurrentUse, in both forms. Every result is exact: neither the
// worker's call nor the second goroutine's changed the counts of the call
// that holds the comm.
func TestConcurrentVCallsClaimFirst(t *testing.T) {
	rounds := 60
	if testing.Short() {
		rounds = 20
	}
	for _, k := range claimKinds {
		t.Run(k.name, func(t *testing.T) {
			g := openGroup(t, "host", 3)
			for i := 0; i < rounds; i++ {
				if err := claimRound(t, g, k, i); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
			}
		})
	}
}

func claimRound(t *testing.T, g *Group, k claimKind, i int) error {
	ctx := context.Background()
	n := g.Size()
	calls := make([][3]claimCall, n)
	for r := 0; r < n; r++ {
		for v := 0; v < 3; v++ {
			if v < 2 || r == 0 {
				calls[r][v] = k.make(t, g.Comm(r), v, i)
			}
		}
	}
	// The synchronous call's number: after the round's Async one.
	seq := g.Comm(0).seq + 2
	release := make(chan struct{})
	intruded := make(chan error, 1)
	go func() {
		defer close(release)
		intruded <- intrude(ctx, g, calls[0][2], seq)
	}()
	errs := onRanks(g, func(c *Comm) error {
		cs := &calls[c.Rank()]
		w := cs[0].async(ctx)
		if c.Rank() != 0 {
			// Held back until the second goroutine on rank 0 was
			// refused: rank 0's call waits for them meanwhile.
			<-release
		}
		serr := cs[1].sync(ctx)
		if err := w.Wait(ctx); err != nil {
			return fmt.Errorf("%sAsync: %w", k.name, err)
		}
		if serr != nil {
			return fmt.Errorf("%s: %w", k.name, serr)
		}
		if err := cs[0].check(); err != nil {
			return fmt.Errorf("%sAsync: %w", k.name, err)
		}
		return cs[1].check()
	})
	if err := <-intruded; err != nil {
		return err
	}
	return errors.Join(errs...)
}

// intrude waits until rank 0's call number seq holds its comm, waiting for
// its peers at the fingerprint check, then makes x's calls from this
// goroutine: both must be refused with ErrConcurrentUse.
func intrude(ctx context.Context, g *Group, x claimCall, seq uint64) error {
	deadline := time.Now().Add(10 * time.Second)
	for !waitingAt(g, 0, seq) {
		if time.Now().After(deadline) {
			return fmt.Errorf("rank 0 never waited in call %d", seq)
		}
		time.Sleep(50 * time.Microsecond)
	}
	if err := x.sync(ctx); !errors.Is(err, ErrConcurrentUse) {
		return fmt.Errorf("a second goroutine's call: %v, want ErrConcurrentUse", err)
	}
	if err := x.async(ctx).Wait(ctx); !errors.Is(err, ErrConcurrentUse) {
		return fmt.Errorf("a second goroutine's Async call: %v, want ErrConcurrentUse", err)
	}
	return nil
}

// waitingAt reports whether rank r waits for its peers in its collective
// call number seq.
func waitingAt(g *Group, r int, seq uint64) bool {
	for _, p := range g.Pending() {
		if p.Rank == r && !p.P2P && p.Seq == seq {
			return true
		}
	}
	return false
}
