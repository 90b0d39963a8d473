package algo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gocoll/gocoll/internal/algo"
)

// net is N ranks' links: one Go channel per ordered pair.
type net struct {
	n     int
	links [][]chan []float64
}

func newNet(n int) *net {
	t := &net{n: n, links: make([][]chan []float64, n)}
	for a := range t.links {
		t.links[a] = make([]chan []float64, n)
		for b := range t.links[a] {
			t.links[a][b] = make(chan []float64, 1024)
		}
	}
	return t
}

// steps runs the steps on the host: the buffer is buf, a message a copy of
// a slice of it.
type steps struct {
	net    *net
	me     int
	slice  int
	buf    []float64
	scale  float64
	scaled bool
}

func (s *steps) Me() int    { return s.me }
func (s *steps) Slice() int { return s.slice }

func (s *steps) send(to, a, b int) {
	s.net.links[s.me][to] <- append([]float64(nil), s.buf[a:b]...)
}

func (s *steps) recv(from, a, b int) ([]float64, error) {
	m := <-s.net.links[from][s.me]
	if len(m) != b-a {
		return nil, fmt.Errorf("rank %d: %d elements from rank %d, want %d", s.me, len(m), from, b-a)
	}
	return m, nil
}

func (s *steps) Reduce(ctx context.Context, from []int, to, a, b int) error {
	for _, f := range from {
		m, err := s.recv(f, a, b)
		if err != nil {
			return err
		}
		for i, v := range m {
			s.buf[a+i] += v
		}
	}
	if to >= 0 {
		s.send(to, a, b)
	}
	return nil
}

func (s *steps) Copy(ctx context.Context, from int, to []int, a, b int) error {
	if from >= 0 {
		m, err := s.recv(from, a, b)
		if err != nil {
			return err
		}
		copy(s.buf[a:b], m)
	}
	for _, t := range to {
		s.send(t, a, b)
	}
	return nil
}

func (s *steps) Scatter(ctx context.Context, parts []algo.Part) error {
	for _, p := range parts {
		s.send(p.Rank, p.A, p.B)
	}
	return nil
}

func (s *steps) Gather(ctx context.Context, parts []algo.Part) error {
	for _, p := range parts {
		m, err := s.recv(p.Rank, p.A, p.B)
		if err != nil {
			return err
		}
		copy(s.buf[p.A:p.B], m)
	}
	return nil
}

func (s *steps) Ordered() {}

func (s *steps) ReduceOrdered(ctx context.Context, members []int, a, b int) error {
	sum := make([]float64, b-a)
	for _, r := range members {
		m := s.buf[a:b]
		if r != s.me {
			var err error
			if m, err = s.recv(r, a, b); err != nil {
				return err
			}
		}
		for i, v := range m {
			sum[i] += v
		}
	}
	copy(s.buf[a:b], sum)
	return nil
}

func (s *steps) Scale(ctx context.Context, lo, hi int) error {
	for i := lo; i < hi; i++ {
		s.buf[i] *= s.scale
	}
	return nil
}

// TestAllReduce runs every all-reduce schedule on 1 to 7 ranks and checks
// that every rank ends with the mean: each element reduced once, scaled
// once.
func TestAllReduce(t *testing.T) {
	type alg struct {
		name string
		det  bool
		run  func(r *algo.Rank, all []int, n int) error
	}
	algs := []alg{
		{"ring", false, func(r *algo.Rank, all []int, n int) error { return r.RingAllReduce(context.Background(), all, n) }},
		{"ring-det", true, func(r *algo.Rank, all []int, n int) error { return r.RingAllReduce(context.Background(), all, n) }},
		{"tree", false, func(r *algo.Rank, all []int, n int) error { return r.TreeAllReduce(context.Background(), all, n) }},
		{"tree-det", true, func(r *algo.Rank, all []int, n int) error { return r.TreeAllReduce(context.Background(), all, n) }},
		{"hier2", false, hier(2)},
		{"hier3", false, hier(3)},
	}
	for _, a := range algs {
		for N := 1; N <= 7; N++ {
			for _, n := range []int{0, 1, 5, 17, 40} {
				t.Run(fmt.Sprintf("%s/N%d/n%d", a.name, N, n), func(t *testing.T) {
					net := newNet(N)
					all := make([]int, N)
					want := make([]float64, n)
					ranks := make([]*steps, N)
					for r := range ranks {
						all[r] = r
						ranks[r] = &steps{net: net, me: r, slice: 3, buf: make([]float64, n), scale: 1 / float64(N)}
						for i := range ranks[r].buf {
							ranks[r].buf[i] = float64((r + 1) * (i + 1))
							want[i] += float64((r+1)*(i+1)) / float64(N)
						}
					}
					parallel(t, N, func(r int) error { return a.run(&algo.Rank{S: ranks[r], Det: a.det}, all, n) })
					for r := range ranks {
						if diff := cmp.Diff(want, ranks[r].buf, cmp.Comparer(approx)); diff != "" {
							t.Errorf("rank %d (-want +got):\n%s", r, diff)
						}
					}
				})
			}
		}
	}
}

func approx(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

// hier groups the ranks by size consecutive ranks.
func hier(size int) func(r *algo.Rank, all []int, n int) error {
	return func(r *algo.Rank, all []int, n int) error {
		me := r.S.Me()
		first := me / size * size
		grp := all[first:min(first+size, len(all))]
		var leaders []int
		for l := 0; l < len(all); l += size {
			leaders = append(leaders, l)
		}
		return r.HierAllReduce(context.Background(), grp, leaders, all, n)
	}
}

// TestGatherTo: the root ends with every member's chunk.
func TestGatherTo(t *testing.T) {
	members, ranks, chunk := rootedRanks()
	want := make([]float64, rootedN)
	for q, r := range members {
		lo, hi := algo.ChunkRange(rootedN, chunk, q)
		for i := lo; i < hi; i++ {
			ranks[r].buf[i] = float64(100*q + i)
			want[i] = float64(100*q + i)
		}
	}
	parallel(t, len(ranks), func(r int) error {
		return (&algo.Rank{S: ranks[r]}).GatherTo(context.Background(), members, rootedRoot, rootedN, chunk)
	})
	if diff := cmp.Diff(want, ranks[members[rootedRoot]].buf); diff != "" {
		t.Errorf("root (-want +got):\n%s", diff)
	}
}

// TestScatterFrom: every member ends with its chunk of the root's buffer.
func TestScatterFrom(t *testing.T) {
	members, ranks, chunk := rootedRanks()
	for i := range rootedN {
		ranks[members[rootedRoot]].buf[i] = float64(7 * i)
	}
	parallel(t, len(ranks), func(r int) error {
		return (&algo.Rank{S: ranks[r]}).ScatterFrom(context.Background(), members, rootedRoot, rootedN, chunk)
	})
	for q, r := range members {
		lo, hi := algo.ChunkRange(rootedN, chunk, q)
		for i := lo; i < hi; i++ {
			if got := ranks[r].buf[i]; got != float64(7*i) {
				t.Errorf("member %d element %d: %v, want %v", q, i, got, 7*i)
			}
		}
	}
}

// TestPairwise: with ranges of other sizes per pair, every rank ends with
// each member's range for it, in place of that member's in its buffer.
func TestPairwise(t *testing.T) {
	const N = 4
	net := newNet(N)
	members := []int{2, 0, 3, 1}
	size := func(from, to int) int { return 1 + (3*from+to)%4 } // elements member from sends member to
	ranks := make([]*steps, N)
	for r := range ranks {
		ranks[r] = &steps{net: net, me: r, slice: 2, buf: make([]float64, 2*N*4)}
	}
	// Member q's range for member j is [4j, 4j+size(q, j)); member j's
	// range for member q lands at [16+4j, 16+4j+size(j, q)).
	for q, r := range members {
		for j := range N {
			for e := range size(q, j) {
				ranks[r].buf[4*j+e] = float64(100*q + 10*j + e)
			}
		}
	}
	parallel(t, N, func(r int) error {
		q := algo.Position(members, r)
		send := func(j int) (int, int) { return 4 * j, 4*j + size(q, j) }
		recv := func(j int) (int, int) { return 16 + 4*j, 16 + 4*j + size(j, q) }
		return (&algo.Rank{S: ranks[r]}).Pairwise(context.Background(), members, send, recv)
	})
	for q, r := range members {
		for j := range N {
			if j == q {
				continue
			}
			for e := range size(j, q) {
				if got, want := ranks[r].buf[16+4*j+e], float64(100*j+10*q+e); got != want {
					t.Errorf("member %d, from member %d, element %d: %v, want %v", q, j, e, got, want)
				}
			}
		}
	}
}

// The rooted tests' layout: rootedN elements over 5 ranks in another
// order (member q is rank members[q]), rooted at member rootedRoot.
const rootedN, rootedRoot = 23, 2

func rootedRanks() (members []int, ranks []*steps, chunk int) {
	members = []int{4, 0, 3, 1, 2}
	net := newNet(len(members))
	ranks = make([]*steps, len(members))
	for r := range ranks {
		ranks[r] = &steps{net: net, me: r, slice: 2, buf: make([]float64, rootedN)}
	}
	return members, ranks, algo.CeilDiv(rootedN, len(members))
}

// parallel runs f for ranks 0 to n-1 at once and fails t on an error.
func parallel(t *testing.T, n int, f func(r int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}
