//go:build mpi && cgo

package mpi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// gocoll's collectives over this transport: one collective.Group per
// process (Options.Transport = the World), each with L local ranks, run
// inside the mpirun jobs TestMain starts (2, 3 and 4 processes, and the
// funneled and serialized jobs on a trimmed matrix). Every check that one
// process makes is agreed on with the others (an Allgather of a status),
// so that all processes fail at the same point and the World's collectives
// stay in step.

// groupChunk is the exchange slot of the test groups: small enough that
// 1M+3 elements and the Send/Recv messages take several slots.
const groupChunk = 64 << 10

// light reports whether this job runs the trimmed matrix: under the race
// detector (it checks synchronisation, not arithmetic), in the jobs that
// check the lower thread levels (they exercise the transport's other call
// paths, which the trimmed matrix covers) and in the 2- and 4-process jobs
// unless the run is full (GOCOLL_MPI_LIGHT; the 3-process job runs the
// whole matrix).
func light() bool {
	return raceEnabled || os.Getenv("GOCOLL_MPI_THREAD") != "" || os.Getenv("GOCOLL_MPI_LIGHT") != ""
}

// groupBackends returns the backends the group tests run on: host always,
// vulkan when it is available (under CI it must be).
func groupBackends(t *testing.T) []string {
	out := []string{"host"}
	b, err := backend.Lookup("vulkan")
	if err == nil {
		err = b.Available()
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("vulkan backend unavailable under CI: %v", err)
		}
		t.Logf("vulkan not tested: %v", err)
		return out
	}
	return append(out, "vulkan")
}

// agree gathers every process's ok and fails the test on every process, at
// the same point, if any process is not ok.
func agree(t *testing.T, w *World, ok bool, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mine := []byte{0}
	if !ok {
		mine[0] = 1
	}
	all := make([]byte, w.Size())
	if err := w.Allgather(ctx, mine, all); err != nil {
		t.Fatalf("%s: agreeing on the outcome: %v", what, err)
	}
	var bad []int
	for p, b := range all {
		if b != 0 {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%s: failed on process(es) %v", what, bad)
	}
}

// openTestGroup opens a group of local ranks on backend bk in every
// process, closed when the test ends.
func openTestGroup(t *testing.T, w *World, bk string, local int, timeout time.Duration) *collective.Group {
	t.Helper()
	cfg := collective.DefaultConfig()
	cfg.CommunicationTimeout = timeout
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g, err := collective.NewGroup(ctx, collective.Options{
		Ranks: local, Backend: bk, Transport: w, Config: cfg, ChunkBytes: groupChunk,
	})
	if err != nil {
		t.Errorf("NewGroup(%s, %d local ranks): %v", bk, local, err)
	}
	agree(t, w, err == nil, "NewGroup")
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if g.Size() != w.Size()*local || g.LocalSize() != local || g.Processes() != w.Size() {
		t.Errorf("group of %d ranks, %d local, %d processes; want %d, %d, %d",
			g.Size(), g.LocalSize(), g.Processes(), w.Size()*local, local, w.Size())
	}
	for i := 0; i < local; i++ {
		if r := g.Comm(i).Rank(); r != w.Rank()*local+i {
			t.Errorf("local rank %d has global rank %d, want %d", i, r, w.Rank()*local+i)
		}
	}
	agree(t, w, !t.Failed(), "group numbering")
	return g
}

// onLocal runs f on every local rank, each in its own goroutine, and
// returns the errors by local index.
func onLocal(g *collective.Group, f func(c *collective.Comm) error) []error {
	errs := make([]error, g.LocalSize())
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = f(g.Comm(i)) })
	}
	wg.Wait()
	return errs
}

// exactIn is global rank r's element i for op: small integers (sum, avg,
// max, min) or signed powers of two (prod), so that every reduction over up
// to 8 ranks is exact in float32 and float64.
func exactIn(op collective.Op, r, i int) float64 {
	if op == collective.Prod {
		return [...]float64{1, 2, -1, 0.5, 1, -2, 0.25, 4}[(i*3+r*5)%8]
	}
	return float64((i*7+r*13)%23 - 11)
}

// period is the period in i of exactIn(op, r, i), for every r.
func period(op collective.Op) int {
	if op == collective.Prod {
		return 8
	}
	return 23
}

// tile sets dst[i] = f(i) for one period p and repeats it (f is periodic).
func tile[T any](dst []T, f func(i int) T, p int) {
	for i := 0; i < min(p, len(dst)); i++ {
		dst[i] = f(i)
	}
	for k := p; k < len(dst); k *= 2 {
		copy(dst[k:], dst[:k])
	}
}

// fillInput sets x to global rank r's inputs for op.
func fillInput[T float](x []T, op collective.Op, r int) {
	tile(x, func(i int) T { return T(exactIn(op, r, i)) }, period(op))
}

// isInput reports whether x still holds global rank r's inputs for op.
func isInput[T float](x []T, op collective.Op, r int) bool {
	want := make([]T, len(x))
	fillInput(want, op, r)
	return slices.Equal(x, want)
}

// refReduce is the float64 reference of element i over ranks 0..n-1,
// computed from the known inputs of every rank.
func refReduce(op collective.Op, n, i int) float64 {
	acc := exactIn(op, 0, i)
	for r := 1; r < n; r++ {
		acc = step64(op, acc, exactIn(op, r, i))
	}
	if op == collective.Mean {
		acc /= float64(n)
	}
	return acc
}

// step64 is one step of the float64 reference reductions: acc op x (Mean
// sums; the callers divide).
func step64(op collective.Op, acc, x float64) float64 {
	switch op {
	case collective.Sum, collective.Mean:
		return acc + x
	case collective.Prod:
		return acc * x
	case collective.Max:
		return math.Max(acc, x)
	case collective.Min:
		return math.Min(acc, x)
	}
	panic(fmt.Sprintf("no float64 reference for op %v", op))
}

type float interface{ float32 | float64 }

func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

func fnv64[T float](s []T) uint64 {
	h := fnv.New64a()
	h.Write(bytesOf(s))
	return h.Sum64()
}

// wrongElems counts the elements of got that differ from want rounded to T
// (avg: more than 1 ulp, since it multiplies by 1/N), and describes the first.
func wrongElems[T float](got []T, want []float64, op collective.Op) (int, string) {
	n, first := 0, ""
	for i, w := range want {
		g, wt := got[i], T(w)
		if g == wt || (op == collective.Mean && ulpApart(float64(g), float64(wt), unsafe.Sizeof(g) == 8)) {
			continue
		}
		if n == 0 {
			first = fmt.Sprintf("[%d] = %v, want %v", i, g, wt)
		}
		n++
	}
	return n, first
}

// ulpApart reports whether a and b are at most one ulp of their type apart.
func ulpApart(a, b float64, f64 bool) bool {
	if f64 {
		return math.Nextafter(b, a) == a
	}
	return math.Nextafter32(float32(b), float32(a)) == float32(a)
}

// gatherHashes gathers every rank's 64-bit hashes (k per rank) across
// processes, in global rank order.
func gatherHashes(ctx context.Context, w *World, local [][]uint64) ([][]uint64, error) {
	k := len(local[0])
	mine := make([]byte, 0, 8*k*len(local))
	for _, hs := range local {
		for _, h := range hs {
			mine = binary.LittleEndian.AppendUint64(mine, h)
		}
	}
	all := make([]byte, len(mine)*w.Size())
	if err := w.Allgather(ctx, mine, all); err != nil {
		return nil, err
	}
	out := make([][]uint64, len(local)*w.Size())
	for r := range out {
		out[r] = make([]uint64, k)
		for j := range out[r] {
			out[r][j] = binary.LittleEndian.Uint64(all[8*(r*k+j):])
		}
	}
	return out, nil
}

// differFrom0 lists the global ranks whose hashes differ from rank 0's.
func differFrom0(all [][]uint64) []int {
	var bad []int
	for r := 1; r < len(all); r++ {
		if !slices.Equal(all[r], all[0]) {
			bad = append(bad, r)
		}
	}
	return bad
}

type arCase struct {
	s  collective.Strategy
	op collective.Op
	n  int
}

var allStrategies = []collective.Strategy{
	collective.Auto, collective.Ring, collective.Tree, collective.Hierarchical, collective.Direct, collective.Pipelined,
}

var allOps = []collective.Op{collective.Sum, collective.Mean, collective.Max, collective.Min, collective.Prod}

// arCases is the all-reduce matrix of one group: every strategy x op x
// size {0, 1, N+1, 5003}, and 1M+3 elements on a couple of combinations;
// trimmed on vulkan (lavapipe) and in the light jobs.
func arCases(bk string, n int) []arCase {
	ops, sizes := allOps, []int{0, 1, n + 1, 5003}
	big := []arCase{{collective.Auto, collective.Sum, 1<<20 + 3}, {collective.Hierarchical, collective.Min, 1<<20 + 3}}
	switch {
	case light() && bk != "host":
		ops, sizes, big = []collective.Op{collective.Sum}, []int{n + 1}, nil
	case light():
		ops, sizes, big = []collective.Op{collective.Sum, collective.Max}, []int{1, n + 1, 5003}, nil
	case bk != "host":
		ops, sizes = []collective.Op{collective.Sum, collective.Mean, collective.Prod}, []int{0, 1, n + 1, 5003}
		big = big[:1]
	}
	var cs []arCase
	for _, s := range allStrategies {
		for _, op := range ops {
			for _, m := range sizes {
				cs = append(cs, arCase{s, op, m})
			}
		}
	}
	return append(cs, big...)
}

// TestGroupAllReduce runs gocoll's all-reduce across the processes for
// each backend and L in {1, 2} local ranks: every op x float32/float64 x
// strategy x size, checked against the float64 reference computed here
// from every global rank's known inputs, and every rank's result checked
// bitwise identical across processes (an Allgather of 64-bit FNV hashes).
func TestGroupAllReduce(t *testing.T) {
	w := needWorld(t)
	for _, bk := range groupBackends(t) {
		for _, local := range []int{1, 2} {
			if light() && bk != "host" && local == 1 {
				continue
			}
			t.Run(fmt.Sprintf("%s/L=%d", bk, local), func(t *testing.T) {
				_, _ = begin(t, 20*time.Second)
				g := openTestGroup(t, w, bk, local, 30*time.Second)
				start := time.Now()
				cases := arCases(bk, g.Size())
				for k, tc := range cases {
					// Alternate out of place and in place, crosswise for the two types.
					runAllReduceCase(t, w, g, tc, k%2 == 0)
				}
				if w.Rank() == 0 {
					t.Logf("%d processes x %d local ranks on %s: %d cases (x float32, float64) in %v",
						w.Size(), local, bk, len(cases), time.Since(start).Round(time.Millisecond))
				}
			})
		}
	}
}

// runAllReduceCase runs one case on every local rank (float32 out of place
// and float64 in place, or the reverse), checks it and agrees on the
// outcome with the other processes.
func runAllReduceCase(t *testing.T, w *World, g *collective.Group, tc arCase, inPlace32 bool) {
	t.Helper()
	name := fmt.Sprintf("%s/%s/n=%d", tc.s, tc.op, tc.n)
	N := g.Size()
	want := make([]float64, tc.n)
	tile(want, func(i int) float64 { return refReduce(tc.op, N, i) }, period(tc.op))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	local := g.LocalSize()
	res32, res64 := make([][]float32, local), make([][]float64, local)
	errs := onLocal(g, func(c *collective.Comm) error {
		r := c.Rank()
		s32, s64 := make([]float32, tc.n), make([]float64, tc.n)
		fillInput(s32, tc.op, r)
		fillInput(s64, tc.op, r)
		r32, r64 := s32, s64
		if !inPlace32 {
			r32 = make([]float32, tc.n)
			for i := range r32 {
				r32[i] = float32(math.NaN())
			}
		} else {
			r64 = make([]float64, tc.n)
			for i := range r64 {
				r64[i] = math.NaN()
			}
		}
		if err := collective.AllReduceWith(ctx, c, s32, r32, tc.op, tc.s); err != nil {
			return fmt.Errorf("float32: %w", err)
		}
		if err := collective.AllReduceWith(ctx, c, s64, r64, tc.op, tc.s); err != nil {
			return fmt.Errorf("float64: %w", err)
		}
		// Out of place, the send buffer is never written.
		if !inPlace32 && !isInput(s32, tc.op, r) || inPlace32 && !isInput(s64, tc.op, r) {
			return fmt.Errorf("out of place: the send buffer was written")
		}
		res32[c.Rank()-g.Comm(0).Rank()], res64[c.Rank()-g.Comm(0).Rank()] = r32, r64
		return nil
	})
	ok := true
	hashes := make([][]uint64, local)
	for i, err := range errs {
		hashes[i] = []uint64{0, 0}
		if err != nil {
			t.Errorf("%s: rank %d: %v", name, g.Comm(i).Rank(), err)
			ok = false
			continue
		}
		if k, first := wrongElems(res32[i], want, tc.op); k > 0 {
			t.Errorf("%s: rank %d: float32: %d of %d elements wrong, first %s", name, g.Comm(i).Rank(), k, tc.n, first)
			ok = false
		}
		if k, first := wrongElems(res64[i], want, tc.op); k > 0 {
			t.Errorf("%s: rank %d: float64: %d of %d elements wrong, first %s", name, g.Comm(i).Rank(), k, tc.n, first)
			ok = false
		}
		hashes[i] = []uint64{fnv64(res32[i]), fnv64(res64[i])}
	}
	all, err := gatherHashes(ctx, w, hashes)
	if err != nil {
		t.Fatalf("%s: gathering result hashes: %v", name, err)
	}
	if bad := differFrom0(all); len(bad) > 0 {
		t.Errorf("%s: the results of rank(s) %v are not bitwise identical to rank 0's", name, bad)
		ok = false
	}
	agree(t, w, ok, name)
}

// TestGroupCollectives runs ReduceScatter, AllGather, Broadcast and Reduce
// (roots in another process: process 1's first rank and the last rank) and
// Send/Recv between ranks of different processes, in float32 and float64.
func TestGroupCollectives(t *testing.T) {
	w := needWorld(t)
	onGroups(t, w, func(t *testing.T, _ string, g *collective.Group) {
		runCollectives[float32](t, w, g)
		runCollectives[float64](t, w, g)
	})
}

// onGroups runs f in a subtest per backend and number of local ranks, on
// a group opened for it: 2 local ranks, and 1 too on host outside the
// light jobs.
func onGroups(t *testing.T, w *World, f func(t *testing.T, bk string, g *collective.Group)) {
	for _, bk := range groupBackends(t) {
		for _, local := range []int{1, 2} {
			if (light() || bk != "host") && local == 1 {
				continue
			}
			t.Run(fmt.Sprintf("%s/L=%d", bk, local), func(t *testing.T) {
				_, _ = begin(t, 20*time.Second)
				f(t, bk, openTestGroup(t, w, bk, local, 30*time.Second))
			})
		}
	}
}

func runCollectives[T float](t *testing.T, w *World, g *collective.Group) {
	t.Helper()
	var z T
	typ := fmt.Sprintf("float%d", 8*unsafe.Sizeof(z))
	N, L := g.Size(), g.LocalSize()
	roots := []int{L % N, N - 1} // process 1's first rank, the last rank (process P-1)
	const m = 1001               // elements per rank's chunk
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nan := T(math.NaN())
	errs := onLocal(g, func(c *collective.Comm) error {
		r := c.Rank()
		in := func(rank, i int) T { return T(exactIn(collective.Sum, rank, i)) }
		send := make([]T, m*N)
		for i := range send {
			send[i] = in(r, i)
		}
		// ReduceScatter: rank r gets chunk r of the sum.
		part := make([]T, m)
		if err := collective.ReduceScatter(ctx, c, send, part, collective.Sum); err != nil {
			return fmt.Errorf("ReduceScatter: %w", err)
		}
		for i, v := range part {
			if want := T(refReduce(collective.Sum, N, r*m+i)); v != want {
				return fmt.Errorf("ReduceScatter element %d: %v, want %v", r*m+i, v, want)
			}
		}
		// AllGather: every rank gets every rank's part, in rank order.
		all := make([]T, m*N)
		if err := collective.AllGather(ctx, c, send[:m], all); err != nil {
			return fmt.Errorf("AllGather: %w", err)
		}
		for j, v := range all {
			if want := in(j/m, j%m); v != want {
				return fmt.Errorf("AllGather element %d: %v, want %v (rank %d's)", j, v, want, j/m)
			}
		}
		for _, root := range roots {
			// Broadcast from root.
			b := make([]T, 3*m)
			for i := range b {
				b[i] = nan
				if r == root {
					b[i] = in(root, i)
				}
			}
			if err := collective.Broadcast(ctx, c, b, root); err != nil {
				return fmt.Errorf("Broadcast from %d: %w", root, err)
			}
			for i, v := range b {
				if v != in(root, i) {
					return fmt.Errorf("Broadcast from %d: element %d: %v, want %v", root, i, v, in(root, i))
				}
			}
			// Reduce to root, max and sum.
			for _, op := range []collective.Op{collective.Max, collective.Sum} {
				var recv []T
				if r == root {
					recv = make([]T, len(send))
					for i := range recv {
						recv[i] = nan
					}
				}
				if err := collective.Reduce(ctx, c, send, recv, op, root); err != nil {
					return fmt.Errorf("Reduce %s to %d: %w", op, root, err)
				}
				for i, v := range recv {
					if want := T(refReduce(op, N, i)); v != want {
						return fmt.Errorf("Reduce %s to %d: element %d: %v, want %v", op, root, i, v, want)
					}
				}
			}
		}
		// Point-to-point across processes: rank r sends to the same local
		// index in the next process and receives from the previous one
		// (SendRecv: a blocking Send before the Recv on every rank would be
		// the callers' deadlock); the message takes two exchange slots.
		if N > L {
			n := groupChunk/int(unsafe.Sizeof(z)) + 17
			msg := make([]T, n)
			for i := range msg {
				msg[i] = in(r, i)
			}
			to, from := (r+L)%N, (r-L+N)%N
			got := make([]T, n)
			if err := collective.SendRecv(ctx, c, msg, to, got, from); err != nil {
				return fmt.Errorf("SendRecv to %d from %d: %w", to, from, err)
			}
			for i, v := range got {
				if v != in(from, i) {
					return fmt.Errorf("Recv from %d: element %d: %v, want %v", from, i, v, in(from, i))
				}
			}
		}
		return collective.Barrier(ctx, c)
	})
	ok := true
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: rank %d: %v", typ, g.Comm(i).Rank(), err)
			ok = false
		}
	}
	agree(t, w, ok, typ+" collectives")
}

// TestGroupAbsentProcess: the last process opens the group but never calls
// the all-reduce the others call. The others must fail with an error that
// matches collective.ErrTimeout within CommunicationTimeout + 250 ms and
// names the absent process; they then close their groups. The absent
// process closes its group without calling, then completes the one
// collective the others left posted on the World (the Allgather of their
// rendezvous fingerprints: MPI cannot cancel it) with an Allgather of the
// same size, after which the World is in step: a new group works.
func TestGroupAbsentProcess(t *testing.T) {
	w, ctx := begin(t, 60*time.Second)
	const timeout = 800 * time.Millisecond
	const timedOutTag = 900
	absent := w.Size() - 1
	local := 2
	g := openTestGroup(t, w, "host", local, timeout)
	// Everyone takes part once, so buffers and links exist.
	errs := onLocal(g, func(c *collective.Comm) error {
		return collective.AllReduce(ctx, c, []float32{1, 2, 3}, collective.Sum)
	})
	agree(t, w, errors.Join(errs...) == nil, fmt.Sprintf("first all-reduce: %v", errors.Join(errs...)))

	if w.Rank() == absent {
		// Wait (on the side) until every other process has timed out and
		// closed its group, then close this group without calling.
		for p := 0; p < absent; p++ {
			if err := recv(ctx, w, nil, p, timedOutTag); err != nil {
				t.Fatalf("waiting for process %d to time out: %v", p, err)
			}
		}
		start := time.Now()
		if err := g.Close(); err != nil {
			t.Errorf("Close of the absent process's group: %v", err)
		}
		t.Logf("process %d (absent): Close took %v", w.Rank(), time.Since(start).Round(time.Microsecond))
		// The others' rendezvous Allgather stays posted on the group's own
		// communicator (MPI cannot cancel a collective): it went with the
		// group and never blocks the World's later collectives.
	} else {
		var mu sync.Mutex
		elapsed := make([]time.Duration, local)
		errs := onLocal(g, func(c *collective.Comm) error {
			start := time.Now()
			err := collective.AllReduce(ctx, c, []float32{1, 2, 3}, collective.Sum)
			mu.Lock()
			elapsed[c.Rank()-g.Comm(0).Rank()] = time.Since(start)
			mu.Unlock()
			return err
		})
		wantRanks := make([]int, local)
		for i := range wantRanks {
			wantRanks[i] = absent*local + i
		}
		named := regexp.MustCompile(fmt.Sprintf(`not seen to arrive: \[%d\]`, absent))
		for i, err := range errs {
			r := g.Comm(i).Rank()
			if i == 0 {
				t.Logf("process %d, rank %d: after %v: %v", w.Rank(), r, elapsed[i].Round(time.Millisecond), err)
			}
			if !errors.Is(err, collective.ErrTimeout) {
				t.Errorf("rank %d: all-reduce without process %d = %v, want collective.ErrTimeout", r, absent, err)
				continue
			}
			if elapsed[i] > timeout+250*time.Millisecond {
				t.Errorf("rank %d: returned after %v, CommunicationTimeout %v + 250 ms", r, elapsed[i], timeout)
			}
			if !named.MatchString(err.Error()) {
				t.Errorf("rank %d: the error does not name process %d as the one not seen to arrive: %v", r, absent, err)
			}
			// The transport names the process; when the group fills in
			// the ranks too, they must be the absent process's.
			var te *collective.TimeoutError
			if errors.As(err, &te) && len(te.Missing) > 0 && !slices.Equal(te.Missing, wantRanks) {
				t.Errorf("rank %d: TimeoutError.Missing = %v, want process %d's ranks %v", r, te.Missing, absent, wantRanks)
			}
		}
		start := time.Now()
		if err := g.Close(); err != nil {
			t.Errorf("Close after the timeout: %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Close after the timeout took %v", d)
		}
		if err := send(ctx, w, nil, absent, timedOutTag); err != nil {
			t.Fatalf("telling process %d: %v", absent, err)
		}
	}
	// The World is in step (the collective left posted was the group's
	// own), and a new group works.
	if err := w.Barrier(ctx); err != nil {
		t.Fatalf("Barrier after the timeout: %v", err)
	}
	waitBackground(t, w)
	agree(t, w, !t.Failed(), "the absent process's all-reduce")
	g2 := openTestGroup(t, w, "host", local, 10*time.Second)
	errs = onLocal(g2, func(c *collective.Comm) error {
		x := []float64{float64(c.Rank())}
		if err := collective.AllReduce(ctx, c, x, collective.Sum); err != nil {
			return err
		}
		if n := float64(g2.Size()); x[0] != n*(n-1)/2 {
			return fmt.Errorf("sum of ranks = %v, want %v", x[0], n*(n-1)/2)
		}
		return nil
	})
	agree(t, w, errors.Join(errs...) == nil, fmt.Sprintf("all-reduce on a new group: %v", errors.Join(errs...)))
}

// TestGroupProcessDeath runs a job in which process 1 exits with status 3
// between two all-reduces of a group that spans the processes, while the
// others wait in the second: mpirun must end the job with a non-zero
// status and say which process failed.
func TestGroupProcessDeath(t *testing.T) {
	j := ownJob(t, 3, []string{"GOCOLL_MPI_TEST_DIE=group"}, "^TestHelperGroupDeath$", "process 1 exits with status 3 inside a group")
	l, out, err, elapsed := j.l, j.out, j.err, j.elapsed
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("mpirun: %v; want a non-zero exit status", err)
	}
	if l.openMPI {
		if !regexp.MustCompile(`Exit code:\s*3\b`).Match(out) || !strings.Contains(string(out), "non-zero status") ||
			!regexp.MustCompile(`Process name:\s*\[\[\d+,\d+\],1\]`).Match(out) {
			t.Errorf("Open MPI's output does not say that process 1 exited with non-zero status 3")
		}
	} else if exit.ExitCode() != 3 && !strings.Contains(string(out), "BAD TERMINATION") {
		t.Errorf("mpirun exited with status %d and did not report a failed process", exit.ExitCode())
	}
	if !strings.Contains(string(out), "process 1 exits with status 3") {
		t.Errorf("the job did not reach the exit")
	}
	if elapsed > 30*time.Second {
		t.Errorf("the job took %v to end; the survivors wait up to 60 s, so mpirun did not end them", elapsed)
	}
}

// TestHelperGroupDeath is the job TestGroupProcessDeath starts.
func TestHelperGroupDeath(t *testing.T) {
	if os.Getenv("GOCOLL_MPI_TEST_DIE") != "group" {
		t.Skip("only in the job TestGroupProcessDeath starts")
	}
	w := needWorld(t)
	g := openTestGroup(t, w, "host", 2, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := onLocal(g, func(c *collective.Comm) error {
		return collective.AllReduce(ctx, c, make([]float32, 5003), collective.Sum)
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if w.Rank() == 1 {
		fmt.Println("process 1 exits with status 3")
		os.Exit(3)
	}
	errs = onLocal(g, func(c *collective.Comm) error {
		return collective.AllReduce(ctx, c, make([]float32, 5003), collective.Sum)
	})
	t.Errorf("all-reduce returned (%v) although process 1 exited; mpirun should have ended this process", errors.Join(errs...))
}
