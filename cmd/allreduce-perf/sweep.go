package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/diag"
)

// float is the float and double element types (the wire types run on
// float32 data).
type float interface{ float32 | float64 }

// testHookAfterCheck, when set, runs on every rank right after the verified
// collective and before the result is checked, with the rank's output (a
// slice of the sweep's element type: []float32, []int8, []collective.Float16,
// ...). Tests use it to corrupt a result on purpose.
var testHookAfterCheck func(rank int, inPlace bool, result any)

// result is one timed and verified run (out-of-place or in-place) of a size.
type result struct {
	time         time.Duration // per iteration, of the slowest rank
	algbw, busbw float64       // GB/s
	wrong        int64         // -1 when checking is off
	counters     []backend.CounterSnapshot
}

// table is one table of rows: a collective run with one strategy.
type table struct {
	coll     coll
	strategy collective.Strategy // as asked (Auto: the collective's default, or the cost model for all-reduce)
}

// runner holds what every table of a run shares: the group, the output and
// the totals for the footer.
type runner struct {
	o        *options
	g        *collective.Group
	out      io.Writer
	progress *progress
	records  []record
	// arena is memory the node's processes share (mpi.AllocShared), for
	// the buffers of every sweep in turn; nil: the Go heap.
	arena []byte
	// Totals over every row, for the footer.
	wrong   int64
	busbw   float64
	nbusbws int
}

// sweep runs the rows of one table for one element type on this process's
// ranks. In one process they are every rank of the group; across processes
// (the mpi build) they are local ranks first, first+1, ... of the group's
// N, and every reference still covers all N ranks. The methods take a
// local index i (comms[i], send[i], recv[i]); its group rank is first+i.
type sweep[T collective.Elem] struct {
	*runner
	t     table
	dt    dtype
	vals  values[T]
	ranks []int // 0, 1, ..., N-1: the group's ranks, which every reduction covers
	first int   // the group rank of comms[0]: 0 in one process
	comms []*collective.Comm
	send  [][]T // each local rank's send buffer, sized for maxBytes
	recv  [][]T // each local rank's receive (and in-place) buffer
	rep   int   // advances for every verified run, so stale results never pass
	// pinned holds the --pinned buffers, freed by close.
	pinned []*collective.HostBuffer[T]
	// premul is each local rank's op for -o premulsum (rankOp).
	premul []collective.Op
}

// newSweep allocates each local rank's buffers for the largest size: on the
// Go heap, or with --pinned in pinned host memory (release them with close).
func newSweep[T collective.Elem](rn *runner, t table, dt dtype) (*sweep[T], error) {
	L := rn.g.LocalSize()
	s := &sweep[T]{runner: rn, t: t, dt: dt, vals: valuesFor[T](dt), ranks: ranksUpTo(rn.g.Size()), premul: make([]collective.Op, L)}
	if L > 0 {
		s.first = rn.g.Comm(0).Rank()
	}
	maxCount := rn.o.maxBytes / dt.size()
	used := 0
	alloc := func() ([]T, error) {
		if nb := int(maxCount) * int(dt.size()); !rn.o.pinned && used+nb <= len(rn.arena) {
			b := rn.arena[used : used+nb]
			used += (nb + 63) &^ 63
			return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), maxCount), nil
		}
		if !rn.o.pinned {
			return make([]T, maxCount), nil
		}
		hb, err := collective.NewHostBuffer[T](int(maxCount))
		if err != nil {
			return nil, err
		}
		s.pinned = append(s.pinned, hb)
		return hb.Data, nil
	}
	for i := 0; i < L; i++ {
		send, err := alloc()
		if err != nil {
			s.close()
			return nil, err
		}
		recv, err := alloc()
		if err != nil {
			s.close()
			return nil, err
		}
		s.comms = append(s.comms, rn.g.Comm(i))
		s.send = append(s.send, send)
		s.recv = append(s.recv, recv)
	}
	return s, nil
}

// close frees pinned buffers (and every device's import of them), and
// destroys the ranks' premulsum ops. No call may be using them.
func (s *sweep[T]) close() error {
	var first error
	for i, op := range s.premul {
		if op != 0 {
			if err := s.comms[i].DestroyOp(op); err != nil && first == nil {
				first = err
			}
		}
	}
	for _, hb := range s.pinned {
		if err := hb.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.pinned = nil
	return first
}

// shape is what one size means for the table's collective, as nccl-tests
// defines it.
type shape struct {
	count int64 // the count column: elements of one rank's call (nccl-tests' paramcount)
	bytes int64 // the size column and algbw's numerator: the full buffer
	total int64 // elements of the full buffer (reduce-scatter's send, all-gather's recv)
}

func (s *sweep[T]) shapeOf(size int64) shape {
	return shapeFor(s.t.coll, size, s.dt.size(), int64(len(s.ranks)))
}

// shapeFor is nccl-tests' setupArgs with the collective's GetCollByteCount,
// for a size of size bytes, elements of elt bytes (1, 2, 4 or 8) and n
// ranks: count = size/elt elements; the collectives that split the buffer
// among the ranks give each rank count/n elements rounded down to whole
// 16-byte groups ((count/nranks) & -(16/eltSize)), and their size column
// is the full buffer (max(sendBytes, expectedBytes)). So rows match
// nccl-tests' one to one: on 3 ranks, 1 KiB of float reduce-scatter is
// count 84, size 1008.
func shapeFor(c coll, size, elt, n int64) shape {
	count := size / elt
	switch c {
	case collReduceScatter, collAllGather, collAllToAll, collGather, collScatter:
		m := count / n &^ (16/elt - 1)
		return shape{count: m, bytes: m * n * elt, total: m * n}
	}
	return shape{count: count, bytes: count * elt, total: count}
}

// onRanks runs f on every local rank, each in its own goroutine, as the
// library requires. The first error cancels the others' context and is
// returned.
func (s *sweep[T]) onRanks(ctx context.Context, f func(ctx context.Context, i int) error) error {
	return onRanks(ctx, len(s.comms), f)
}

func onRanks(ctx context.Context, n int, f func(ctx context.Context, r int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx, r); err != nil {
				once.Do(func() {
					first = fmt.Errorf("rank %d: %w", r, err)
					cancel(first)
				})
			}
		}()
	}
	wg.Wait()
	return first
}

// call runs the table's collective once on local rank i. Where gocoll has
// no out-of-place form (the wire-compressed all-reduce, broadcast), out of
// place is a host copy of send into recv, then the in-place call on recv;
// the copy is timed with it, as NCCL's out-of-place broadcast copies too.
func (s *sweep[T]) call(ctx context.Context, i int, sh shape, op collective.Op, root int, inPlace bool) error {
	c, r := s.comms[i], s.first+i
	send, recv := s.send[i], s.recv[i]
	n, m := sh.count, sh.count
	op, err := s.rankOp(i, op)
	if err != nil {
		return err
	}
	switch s.t.coll {
	case collAllReduce:
		if f := s.dt.wire(); f != 0 {
			data := recv[:n]
			if !inPlace {
				copy(data, send[:n])
			}
			return collective.AllReduceWire(ctx, c, any(data).([]float32), op, f)
		}
		if inPlace {
			return collective.AllReduceWith(ctx, c, recv[:n], recv[:n], op, s.t.strategy)
		}
		return collective.AllReduceWith(ctx, c, send[:n], recv[:n], op, s.t.strategy)
	case collReduceScatter:
		// In place, as in NCCL: the result lands in the rank's own chunk
		// of the full buffer.
		if inPlace {
			return collective.ReduceScatter(ctx, c, recv[:sh.total], recv[int64(r)*m:int64(r+1)*m], op)
		}
		return collective.ReduceScatter(ctx, c, send[:sh.total], recv[:m], op)
	case collAllGather:
		// In place: the rank's contribution already sits in its chunk.
		if inPlace {
			return collective.AllGather(ctx, c, recv[int64(r)*m:int64(r+1)*m], recv[:sh.total])
		}
		return collective.AllGather(ctx, c, send[:m], recv[:sh.total])
	case collBroadcast:
		if !inPlace && r == root {
			copy(recv[:n], send[:n])
		}
		return collective.Broadcast(ctx, c, recv[:n], root)
	case collReduce:
		if inPlace {
			return collective.Reduce(ctx, c, recv[:n], recv[:n], op, root)
		}
		return collective.Reduce(ctx, c, send[:n], recv[:n], op, root)
	case collAllToAll:
		// gocoll's AllToAll is out of place only: in place copies the
		// buffer to send first (timed with it).
		if inPlace {
			copy(send[:sh.total], recv[:sh.total])
		}
		return collective.AllToAll(ctx, c, send[:sh.total], recv[:sh.total])
	case collGather:
		// In place: the rank's contribution already sits in its chunk.
		if inPlace {
			return collective.Gather(ctx, c, recv[int64(r)*m:int64(r+1)*m], recv[:sh.total], root)
		}
		return collective.Gather(ctx, c, send[:m], recv[:sh.total], root)
	case collScatter:
		// In place: root scatters its full buffer, each rank keeps its chunk.
		if inPlace {
			return collective.Scatter(ctx, c, recv[:sh.total], recv[int64(r)*m:int64(r+1)*m], root)
		}
		return collective.Scatter(ctx, c, send[:sh.total], recv[:m], root)
	case collScan:
		if inPlace {
			return collective.Scan(ctx, c, recv[:n], recv[:n], op)
		}
		return collective.Scan(ctx, c, send[:n], recv[:n], op)
	case collExscan:
		if inPlace {
			return collective.Exscan(ctx, c, recv[:n], recv[:n], op)
		}
		return collective.Exscan(ctx, c, send[:n], recv[:n], op)
	case collSendRecv:
		// nccl-tests' ring shift; in place sends and receives one buffer
		// (the library sends what it held when the call started).
		to, from := s.peers(r)
		if inPlace {
			return collective.SendRecv(ctx, c, recv[:n], to, recv[:n], from)
		}
		return collective.SendRecv(ctx, c, send[:n], to, recv[:n], from)
	}
	return fmt.Errorf("unknown collective %d", int(s.t.coll))
}

// peers are the ranks rank r's sendrecv sends to and receives from:
// (r+1) mod N and (r-1+N) mod N, r itself on one rank.
func (s *sweep[T]) peers(r int) (to, from int) {
	n := len(s.ranks)
	return (r + 1) % n, (r - 1 + n) % n
}

// reduced is how many ranks' inputs rank r's result reduces: every rank's,
// but for scan (ranks 0..r) and exscan (0..r-1: none on rank 0).
func (s *sweep[T]) reduced(r int) int {
	switch s.t.coll {
	case collScan:
		return r + 1
	case collExscan:
		return r
	}
	return len(s.ranks)
}

// warmup runs the warm-up iterations (out of place) at shape sh.
func (s *sweep[T]) warmup(ctx context.Context, sh shape, op collective.Op, root int) error {
	return s.onRanks(ctx, func(ctx context.Context, i int) error {
		for k := 0; k < s.o.warmup; k++ {
			if err := s.call(ctx, i, sh, op, root, false); err != nil {
				return err
			}
		}
		return nil
	})
}

// opName is the redop column: nccl-tests prints "none" for the
// collectives that do not reduce.
func (s *sweep[T]) opName(op collective.Op) string {
	if !s.t.coll.hasOp() {
		return "none"
	}
	return opString(op)
}

// rankOp is op as local rank i passes it: for -o premulsum the rank's own
// op of Comm.PreMulSum, of scalar premulScalar of its rank, made at its
// first call (close destroys it).
func (s *sweep[T]) rankOp(i int, op collective.Op) (collective.Op, error) {
	if op != opPreMulSum {
		return op, nil
	}
	if s.premul[i] == 0 {
		o, err := s.comms[i].PreMulSum(premulScalar(s.comms[i].Rank()))
		if err != nil {
			return 0, err
		}
		s.premul[i] = o
	}
	return s.premul[i], nil
}

// rootCol is the root column: -1 for the collectives without a root.
func (s *sweep[T]) rootCol(root int) int {
	if !s.t.coll.hasRoot() {
		return -1
	}
	return root
}

// run sweeps every size for op and root, printing one row per size.
func (s *sweep[T]) run(ctx context.Context, op collective.Op, root int) error {
	return s.rows(ctx, op, root, s.bench, func(sh shape, res [2]result) error {
		writeRow(s.out, sh.bytes, sh.count, s.dt.String(), s.opName(op), s.rootCol(root), res)
		alg := s.algorithm(sh)
		for i, r := range res {
			s.records = append(s.records, s.record(sh, op, root, i == 1, alg, r))
		}
		return nil
	})
}

// benchFunc times and verifies one mode at one size: sweep.bench, or the
// mpi build's across processes.
type benchFunc func(ctx context.Context, sh shape, op collective.Op, root int, inPlace bool) (result, error)

// rows is nccl-tests' TimeTest for op and root: warm-up at the largest and
// smallest size, then per size bench of the out-of-place and the in-place
// run, and row with both results.
func (s *sweep[T]) rows(ctx context.Context, op collective.Op, root int, bench benchFunc, row func(sh shape, res [2]result) error) error {
	if err := s.warmup(ctx, s.shapeOf(s.o.maxBytes), op, root); err != nil {
		return err
	}
	if err := s.warmup(ctx, s.shapeOf(s.o.minBytes), op, root); err != nil {
		return err
	}
	for _, size := range s.o.sizes() {
		sh := s.shapeOf(size)
		s.progress.step(fmt.Sprintf("%s %s %s %s", humanBytes(sh.bytes), s.dt, s.opName(op), s.t.label()))
		var res [2]result
		for i, inPlace := range []bool{false, true} {
			var err error
			if res[i], err = bench(ctx, sh, op, root, inPlace); err != nil {
				return err
			}
		}
		s.progress.done()
		if err := row(sh, res); err != nil {
			return err
		}
	}
	return nil
}

// bench times one mode at one size, then verifies it (nccl-tests' BenchTime).
func (s *sweep[T]) bench(ctx context.Context, sh shape, op collective.Op, root int, inPlace bool) (result, error) {
	slowest, counters, err := s.timed(ctx, sh, op, root, inPlace)
	if err != nil {
		return result{}, err
	}
	res := s.rate(sh, slowest)
	res.counters = counters
	s.busbw += res.busbw
	s.nbusbws++
	if s.o.check > 0 {
		if res.wrong, err = s.check(ctx, sh, op, root, inPlace); err != nil {
			return result{}, err
		}
		s.wrong += res.wrong
	}
	return res, nil
}

// timed runs o.iters calls of one mode at one size on every local rank and
// returns the slowest rank's time for them all, and each rank's counters.
func (s *sweep[T]) timed(ctx context.Context, sh shape, op collective.Op, root int, inPlace bool) (time.Duration, []backend.CounterSnapshot, error) {
	L := len(s.comms)
	elapsed := make([]time.Duration, L)
	counters := make([]backend.CounterSnapshot, L)
	err := s.onRanks(ctx, func(ctx context.Context, i int) error {
		// One untimed call, then line the ranks up so the clock starts
		// together on every rank.
		if err := s.call(ctx, i, sh, op, root, inPlace); err != nil {
			return err
		}
		if err := collective.Barrier(ctx, s.comms[i]); err != nil {
			return err
		}
		before := diag.Counters(s.g, i)
		start := time.Now()
		for k := 0; k < s.o.iters; k++ {
			if err := s.call(ctx, i, sh, op, root, inPlace); err != nil {
				return err
			}
		}
		elapsed[i] = time.Since(start)
		counters[i] = diag.Counters(s.g, i).Sub(before)
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	var slowest time.Duration
	for _, d := range elapsed {
		slowest = max(slowest, d)
	}
	return slowest, counters, nil
}

// rate is the result of o.iters calls at shape sh that took the slowest
// rank elapsed: nccl-tests' *GetBw, algbw over the full buffer, busbw
// scaled by the collective's factor for the group's N ranks. Its wrong is
// -1 (not checked).
func (s *sweep[T]) rate(sh shape, elapsed time.Duration) result {
	res := result{time: elapsed / time.Duration(s.o.iters), wrong: -1}
	if sec := res.time.Seconds(); sec > 0 {
		res.algbw = float64(sh.bytes) / 1e9 / sec
		res.busbw = res.algbw * s.t.coll.busFactor(len(s.ranks))
	}
	return res
}

// check verifies one mode at one size o.check times, or until a run finds
// wrong values, and returns the wrong values counted on this process's
// ranks. The buffers keep the last verified run's results.
func (s *sweep[T]) check(ctx context.Context, sh shape, op collective.Op, root int, inPlace bool) (int64, error) {
	var wrong int64
	for c := 0; c < s.o.check && wrong == 0; c++ {
		w, err := s.verify(ctx, sh, op, root, inPlace)
		if err != nil {
			return 0, err
		}
		wrong += w
	}
	return wrong, nil
}

// input is rank r's element i of verified run rep for this sweep's type.
func (s *sweep[T]) input(op collective.Op, r int, i int64, rep int) T {
	return s.vals.input(op, r, i, rep)
}

// output is local rank i's output region (what the test hook sees).
func (s *sweep[T]) output(i int, sh shape, inPlace bool) []T {
	m, r, recv := sh.count, int64(s.first+i), s.recv[i]
	switch s.t.coll {
	case collReduceScatter, collScatter:
		if inPlace {
			return recv[r*m : (r+1)*m]
		}
		return recv[:m]
	case collAllGather, collAllToAll, collGather:
		return recv[:sh.total]
	}
	return recv[:sh.count]
}

// fill sets local rank loc's inputs for run rep. Every region the call
// must write is first filled with the type's poison (NaN for the float
// types), so a call that leaves it alone fails.
func (s *sweep[T]) fill(loc int, sh shape, op collective.Op, root int, inPlace bool, rep int) {
	r := s.first + loc
	// The collectives that reduce hold op's results; the others copies of
	// the inputs (set with op Sum).
	poison := s.vals.poison(op, s.reduced(r), s.t.coll.hasOp())
	send, recv := s.send[loc], s.recv[loc]
	setPoison := func(x []T) {
		for i := range x {
			x[i] = poison
		}
	}
	setInput := func(x []T, op collective.Op, rank int) {
		for i := range x {
			x[i] = s.input(op, rank, int64(i), rep)
		}
	}
	m := sh.count
	switch s.t.coll {
	case collAllReduce, collReduceScatter, collReduce, collScan, collExscan:
		if inPlace {
			setInput(recv[:sh.total], op, r)
		} else {
			setInput(send[:sh.total], op, r)
			setPoison(recv[:sh.total])
		}
	case collAllGather:
		setPoison(recv[:sh.total])
		if inPlace {
			setInput(recv[int64(r)*m:int64(r+1)*m], collective.Sum, r)
		} else {
			setInput(send[:m], collective.Sum, r)
		}
	case collBroadcast, collScatter:
		setPoison(recv[:sh.total])
		if r == root {
			if inPlace {
				setInput(recv[:sh.total], collective.Sum, r)
			} else {
				setInput(send[:sh.total], collective.Sum, r)
			}
		}
	case collAllToAll, collSendRecv:
		if inPlace {
			setInput(recv[:sh.total], collective.Sum, r)
		} else {
			setInput(send[:sh.total], collective.Sum, r)
			setPoison(recv[:sh.total])
		}
	case collGather:
		setPoison(recv[:sh.total])
		if inPlace {
			setInput(recv[int64(r)*m:int64(r+1)*m], collective.Sum, r)
		} else {
			setInput(send[:m], collective.Sum, r)
		}
	}
}

// verify sets fresh inputs, runs the collective once and counts the elements
// that differ from the reference on every local rank. Out of place, the
// send buffer must come back unchanged (it is never written).
func (s *sweep[T]) verify(ctx context.Context, sh shape, op collective.Op, root int, inPlace bool) (int64, error) {
	s.rep++
	rep := s.rep
	err := s.onRanks(ctx, func(ctx context.Context, i int) error {
		s.fill(i, sh, op, root, inPlace, rep)
		if err := s.call(ctx, i, sh, op, root, inPlace); err != nil {
			return err
		}
		if testHookAfterCheck != nil {
			testHookAfterCheck(s.first+i, inPlace, s.output(i, sh, inPlace))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return s.countWrong(sh, op, root, rep, inPlace), nil
}

// countWrong checks every local rank's buffers against the exact reference
// (see values), split over the CPUs.
func (s *sweep[T]) countWrong(sh shape, op collective.Op, root int, rep int, inPlace bool) int64 {
	var wrong atomic.Int64
	workers := int64(runtime.GOMAXPROCS(0))
	chunk := max((sh.total+workers-1)/workers, 1)
	var wg sync.WaitGroup
	for loc := range s.comms {
		for lo := int64(0); lo < sh.total; lo += chunk {
			hi := min(lo+chunk, sh.total)
			wg.Add(1)
			go func() {
				defer wg.Done()
				wrong.Add(s.checkRange(loc, lo, hi, sh, op, root, rep, inPlace))
			}()
		}
	}
	wg.Wait()
	return wrong.Load()
}

// checkRange counts the wrong elements among local rank loc's (group rank
// r's) elements [lo, hi) of the full buffer, following nccl-tests'
// expectations per collective:
//   - all-reduce: every rank holds the reduction, bitwise equal to local
//     rank 0's (across processes, the mpi build compares hashes with group
//     rank 0's);
//   - reduce-scatter: rank r holds chunk r of the reduction;
//   - all-gather: every rank holds every rank's contribution, in rank order;
//   - broadcast: every rank holds root's input;
//   - reduce: root holds the reduction; the other ranks' receive buffers
//     are not written (in place: their input is left as it was);
//   - alltoall: chunk q of rank r's output is chunk r of rank q's input;
//   - gather: root holds every rank's contribution, in rank order;
//   - scatter: rank r holds chunk r of root's input;
//   - scan: rank r holds the reduction of ranks 0..r's inputs, in the
//     type's exact reference (the library's Scan is rounded once, so exact);
//   - exscan: rank r > 0 holds the reduction of ranks 0..r-1's inputs; rank
//     0's receive buffer is left untouched, as the library defines it (out
//     of place: still the poison; in place: its own input);
//   - sendrecv: rank r holds rank (r-1+N) mod N's input.
//
// Out of place, a send element that changed is wrong too.
func (s *sweep[T]) checkRange(loc int, lo, hi int64, sh shape, op collective.Op, root int, rep int, inPlace bool) int64 {
	n, r := len(s.ranks), s.first+loc
	send, recv := s.send[loc], s.recv[loc]
	in := func(op collective.Op, rank int, i int64) T { return s.input(op, rank, i, rep) }
	var w int64
	m := sh.count
	switch s.t.coll {
	case collAllReduce:
		for i := lo; i < hi; i++ {
			got := recv[i]
			if !s.right(got, op, n, i, rep) || (loc > 0 && !sameBits(got, s.recv[0][i])) {
				w++
			}
			if !inPlace && send[i] != in(op, r, i) {
				w++
			}
		}
	case collReduceScatter:
		base := int64(r) * m
		for i := lo; i < hi; i++ {
			if i < m {
				got := recv[i]
				if inPlace {
					got = recv[base+i]
				}
				if !s.right(got, op, n, base+i, rep) {
					w++
				}
			}
			if !inPlace && send[i] != in(op, r, i) {
				w++
			}
		}
	case collAllGather:
		for i := lo; i < hi; i++ {
			if recv[i] != in(collective.Sum, int(i/m), i%m) {
				w++
			}
			if !inPlace && i < m && send[i] != in(collective.Sum, r, i) {
				w++
			}
		}
	case collBroadcast:
		for i := lo; i < hi; i++ {
			if recv[i] != in(collective.Sum, root, i) {
				w++
			}
			if !inPlace && r == root && send[i] != in(collective.Sum, root, i) {
				w++
			}
		}
	case collAllToAll:
		for i := lo; i < hi; i++ {
			q, e := int(i/m), i%m
			if recv[i] != in(collective.Sum, q, int64(r)*m+e) {
				w++
			}
			if !inPlace && send[i] != in(collective.Sum, r, i) {
				w++
			}
		}
	case collGather:
		for i := lo; i < hi; i++ {
			if r == root && recv[i] != in(collective.Sum, int(i/m), i%m) {
				w++
			}
			if !inPlace && i < m && send[i] != in(collective.Sum, r, i) {
				w++
			}
		}
	case collScatter:
		for i := lo; i < hi; i++ {
			if i < m {
				got := recv[i]
				if inPlace {
					got = recv[int64(r)*m+i]
				}
				if got != in(collective.Sum, root, int64(r)*m+i) {
					w++
				}
			}
			if !inPlace && r == root && send[i] != in(collective.Sum, root, i) {
				w++
			}
		}
	case collSendRecv:
		_, from := s.peers(r)
		for i := lo; i < hi; i++ {
			if recv[i] != in(collective.Sum, from, i) {
				w++
			}
			if !inPlace && send[i] != in(collective.Sum, r, i) {
				w++
			}
		}
	case collReduce, collScan, collExscan:
		// Rank r holds the reduction of ranks 0..k-1; with k 0 (reduce's
		// other ranks, exscan's rank 0) its buffer is left as it was.
		k := s.reduced(r)
		if s.t.coll == collReduce && r != root {
			k = 0
		}
		for i := lo; i < hi; i++ {
			switch {
			case k > 0:
				if !s.right(recv[i], op, k, i, rep) {
					w++
				}
			case inPlace:
				if !sameBits(recv[i], in(op, r, i)) {
					w++
				}
			default:
				if !s.vals.isPoison(recv[i], op, s.reduced(r), true) { // written
					w++
				}
			}
			if !inPlace && send[i] != in(op, r, i) {
				w++
			}
		}
	}
	return w
}

// right reports whether got is element i of the reduction over ranks
// 0..n-1 (all of them, or a scan's prefix):
// the type's exact reference (see values; float and double avg: within 1
// ulp), or, for the wire types, within the documented bound of wire
// compression (see wireBound).
func (s *sweep[T]) right(got T, op collective.Op, n int, i int64, rep int) bool {
	if f := s.dt.wire(); f != 0 {
		want, sumAbs := referenceOf(wireInput, op, n, i, rep)
		g := float64(any(got).(float32))
		return !math.IsNaN(g) && math.Abs(g-want) <= wireBound(f, op, n, want, sumAbs)
	}
	return s.vals.match(got, s.vals.reduce(op, s.ranks[:n], i, rep), op)
}

// wireBound is how far a wire-compressed all-reduce may be from the exact
// result, from collective.WireErrorBound (|error| <= N*(u+2^-24)*sum|x_r|
// for a sum of N ranks): the bound itself for sum, max and min (each hop
// rounds a partial result no larger than sum|x_r|); for avg, the sum's
// bound over N plus one more rounding of the average, i.e.
// WireErrorBound(f, N+1, sum|x_r|/N); for prod, a relative bound of N
// roundings, WireErrorBound(f, N, |result|).
func wireBound(f backend.WireFormat, op collective.Op, n int, want, sumAbs float64) float64 {
	switch op {
	case collective.Prod:
		return collective.WireErrorBound(f, n, math.Abs(want))
	case collective.Mean:
		return collective.WireErrorBound(f, n+1, sumAbs/float64(n))
	}
	return collective.WireErrorBound(f, n, sumAbs)
}

// input is rank r's element i in verified run rep, chosen (as nccl-tests'
// are) so that every reduction is exact: small integers in [-5, 5] for sum,
// avg, max and min (a sum of N ranks stays below 2^24 for any sane N), and
// ±1, 2 or 1/2 for prod, so a product of N ranks is ±2^k with |k| <= N, exact
// in float up to 126 ranks.
func input(op collective.Op, r int, i int64, rep int) float64 {
	k := uint64(i)*7 + uint64(r)*13 + uint64(rep)*5
	if op == collective.Prod {
		return [...]float64{1, 2, 0.5, -1}[k%4]
	}
	return float64(int64(k%11) - 5)
}

// wireInput is input for the wire-compressed types: the user data is
// float32, so the sum, avg, max and min inputs carry tenths (0.1 to 0.7,
// rounded to float32) that a 16-bit wire cannot hold exactly, and the
// result is checked against the bound, not for equality. Prod keeps
// input's powers of two, exact in both formats.
func wireInput(op collective.Op, r int, i int64, rep int) float64 {
	if op == collective.Prod {
		return input(op, r, i, rep)
	}
	k := uint64(i)*7 + uint64(r)*13 + uint64(rep)*5
	return float64(float32(float64(int64(k%11)-5) + float64((k/11)%8)/10))
}

// reference reduces element i over n ranks in float64, in a plain loop over
// the inputs: independent of the library.
func reference(op collective.Op, n int, i int64, rep int) float64 {
	v, _ := referenceOf(input, op, n, i, rep)
	return v
}

// referenceOf is reference over the inputs in (premulsum: each times its
// rank's scalar), and also returns sum_r |x_r| (for the wire bound).
func referenceOf(in func(collective.Op, int, int64, int) float64, op0 collective.Op, n int, i int64, rep int) (ref, sumAbs float64) {
	op, k := scaled(op0, 0)
	acc := in(op0, 0, i, rep) * k
	sumAbs = math.Abs(acc)
	for r := 1; r < n; r++ {
		_, k := scaled(op0, r)
		x := in(op0, r, i, rep) * k
		sumAbs += math.Abs(x)
		switch op {
		case collective.Sum, collective.Mean:
			acc += x
		case collective.Prod:
			acc *= x
		case collective.Max:
			acc = math.Max(acc, x)
		case collective.Min:
			acc = math.Min(acc, x)
		}
	}
	if op == collective.Mean {
		acc /= float64(n)
	}
	return acc, sumAbs
}

// matches reports whether got is right: exactly want, or within 1 ulp for avg.
func matches[T float](got, want T, op collective.Op) bool {
	if got == want {
		return true
	}
	return op == collective.Mean && ulpDistance(got, want) <= 1
}

// ulpDistance returns how many representable values of T lie between a and
// b (0 for equal values, +0 and -0 included; the maximum for NaN).
func ulpDistance[T float](a, b T) uint64 {
	if a != a || b != b {
		return math.MaxUint64
	}
	var x, y int64
	switch fa := any(a).(type) {
	case float32:
		x, y = ordered32(fa), ordered32(any(b).(float32))
	case float64:
		x, y = ordered64(fa), ordered64(any(b).(float64))
	}
	if x < y {
		x, y = y, x
	}
	return uint64(x) - uint64(y)
}

// ordered32 maps a float32 to an integer with the same order, adjacent
// floats mapping to adjacent integers.
func ordered32(f float32) int64 {
	b := int32(math.Float32bits(f))
	if b < 0 {
		b = math.MinInt32 - b
	}
	return int64(b)
}

func ordered64(f float64) int64 {
	b := int64(math.Float64bits(f))
	if b < 0 {
		b = math.MinInt64 - b
	}
	return b
}

// algorithm is the algorithm the library runs for a row, for the JSON
// record: the cost model's choice under auto, and what a collective or a
// type without kernels on some device (reduced on the host) runs whatever
// -a says.
func (s *sweep[T]) algorithm(sh shape) string {
	hostReduce := !groupKernels(s.g).Has(s.dt.elem())
	switch s.t.coll {
	case collAllReduce:
		if s.dt.wire() != 0 {
			return collective.Ring.String()
		}
		st := s.t.strategy
		if st == collective.Auto {
			st = s.g.Strategy()
		}
		if st == collective.Auto {
			st, _ = diag.AutoChoice(s.g.Comm(0), int(sh.count)*int(s.dt.size()), s.dt.elem())
		}
		if hostReduce && st != collective.Pipelined {
			st = collective.Direct
		}
		return st.String()
	case collReduceScatter:
		if hostReduce || s.g.Strategy() == collective.Direct {
			return collective.Direct.String()
		}
		return collective.Ring.String()
	case collReduce:
		if hostReduce {
			return collective.Direct.String()
		}
	}
	return s.t.coll.algorithms()[0].String()
}

// label names the table: its collective and strategy.
func (t table) label() string {
	return t.coll.String() + " " + t.algorithmName()
}

// algorithmName is the strategy a table runs, as its header says it.
func (t table) algorithmName() string {
	if t.coll == collAllReduce {
		return t.strategy.String()
	}
	if t.strategy != collective.Auto {
		return t.strategy.String()
	}
	return t.coll.algorithms()[0].String()
}

// writeRow prints one size as nccl-tests does: size, count, type, redop,
// root (-1 for collectives without one), then out-of-place and in-place
// time, algbw, busbw and #wrong.
func writeRow(w io.Writer, size, count int64, typ, op string, root int, res [2]result) {
	fmt.Fprintf(w, "%12d  %12d  %8s  %6s  %6d", size, count, typ, op, root)
	for _, r := range res {
		wrong := "N/A"
		if r.wrong >= 0 {
			wrong = fmt.Sprint(r.wrong)
		}
		fmt.Fprintf(w, "  %7s  %6.2f  %6.2f  %5s", timeString(r.time), r.algbw, r.busbw, wrong)
	}
	fmt.Fprintln(w)
}

// timeString formats a time in microseconds with nccl-tests' precision.
func timeString(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case us >= 10000:
		return fmt.Sprintf("%7.0f", us)
	case us >= 100:
		return fmt.Sprintf("%7.1f", us)
	}
	return fmt.Sprintf("%7.2f", us)
}

// humanBytes writes a byte count with binary units: 8 B, 4 KiB, 1.5 MiB.
func humanBytes(b int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, u := float64(b), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f %s", v, units[u])
	}
	return fmt.Sprintf("%.3g %s", v, units[u])
}
