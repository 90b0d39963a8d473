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

	"github.com/gocoll/gocoll/collective"
)

// float is the element type of a sweep.
type float interface{ float32 | float64 }

// testHookAfterCheck, when set, runs on every rank right after the verified
// collective and before the result is checked, with the rank's result (a
// []float32 or []float64). Tests use it to corrupt a result on purpose.
var testHookAfterCheck func(rank int, inPlace bool, result any)

// result is one timed and verified run (out-of-place or in-place) of a size.
type result struct {
	time         time.Duration // per iteration, of the slowest rank
	algbw, busbw float64       // GB/s
	wrong        int64         // -1 when checking is off
}

// sweep runs the benchmark of one element type over a group.
type sweep[T float] struct {
	o     *options
	g     *collective.Group
	comms []*collective.Comm
	send  [][]T // each rank's send buffer, sized for maxBytes
	recv  [][]T // each rank's receive (and in-place) buffer
	rep   int   // advances for every verified run, so stale results never pass
	out   io.Writer
	// Totals over every row, for the footer.
	wrong   int64
	busbw   float64
	nbusbws int
}

func newSweep[T float](o *options, g *collective.Group, out io.Writer) *sweep[T] {
	s := &sweep[T]{o: o, g: g, out: out}
	maxCount := o.maxBytes / int64(eltSize[T]())
	for r := 0; r < g.Size(); r++ {
		s.comms = append(s.comms, g.Comm(r))
		s.send = append(s.send, make([]T, maxCount))
		s.recv = append(s.recv, make([]T, maxCount))
	}
	return s
}

func eltSize[T float]() int {
	var z T
	if _, ok := any(z).(float64); ok {
		return 8
	}
	return 4
}

func typeName[T float]() string {
	if eltSize[T]() == 8 {
		return dtDouble.String()
	}
	return dtFloat.String()
}

// onRanks runs f on every rank, each in its own goroutine, as the library
// requires. The first error cancels the others' context and is returned.
func (s *sweep[T]) onRanks(ctx context.Context, f func(ctx context.Context, r int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for r := range s.comms {
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

// call runs one all-reduce of count elements on rank r.
func (s *sweep[T]) call(ctx context.Context, r int, count int64, op collective.Op, inPlace bool) error {
	if inPlace {
		return collective.AllReduce(ctx, s.comms[r], s.recv[r][:count], op)
	}
	return collective.AllReduceInto(ctx, s.comms[r], s.send[r][:count], s.recv[r][:count], op)
}

// warmup runs the warm-up iterations (out of place) at count elements.
func (s *sweep[T]) warmup(ctx context.Context, count int64, op collective.Op) error {
	return s.onRanks(ctx, func(ctx context.Context, r int) error {
		for i := 0; i < s.o.warmup; i++ {
			if err := s.call(ctx, r, count, op, false); err != nil {
				return err
			}
		}
		return nil
	})
}

// run sweeps every size for op, printing one row per size (nccl-tests'
// TimeTest): warm-up at the largest and smallest size, then per size the
// out-of-place and the in-place run.
func (s *sweep[T]) run(ctx context.Context, op collective.Op) error {
	elt := int64(eltSize[T]())
	if err := s.warmup(ctx, s.o.maxBytes/elt, op); err != nil {
		return err
	}
	if err := s.warmup(ctx, s.o.minBytes/elt, op); err != nil {
		return err
	}
	for _, size := range s.o.sizes() {
		count := size / elt
		var res [2]result
		for i, inPlace := range []bool{false, true} {
			var err error
			if res[i], err = s.bench(ctx, count, op, inPlace); err != nil {
				return err
			}
		}
		writeRow(s.out, count*elt, count, typeName[T](), op.String(), res)
	}
	return nil
}

// bench times one mode at one size, then verifies it (nccl-tests' BenchTime).
func (s *sweep[T]) bench(ctx context.Context, count int64, op collective.Op, inPlace bool) (result, error) {
	n := len(s.comms)
	elapsed := make([]time.Duration, n)
	err := s.onRanks(ctx, func(ctx context.Context, r int) error {
		// One untimed call, then line the ranks up so the clock starts
		// together on every rank.
		if err := s.call(ctx, r, count, op, inPlace); err != nil {
			return err
		}
		if err := collective.Barrier(ctx, s.comms[r]); err != nil {
			return err
		}
		start := time.Now()
		for i := 0; i < s.o.iters; i++ {
			if err := s.call(ctx, r, count, op, inPlace); err != nil {
				return err
			}
		}
		elapsed[r] = time.Since(start)
		return nil
	})
	if err != nil {
		return result{}, err
	}
	var slowest time.Duration
	for _, d := range elapsed {
		slowest = max(slowest, d)
	}
	res := result{time: slowest / time.Duration(s.o.iters), wrong: -1}
	if sec := res.time.Seconds(); sec > 0 {
		// nccl-tests' AllReduceGetBw.
		res.algbw = float64(count*int64(eltSize[T]())) / 1e9 / sec
		res.busbw = res.algbw * 2 * float64(n-1) / float64(n)
	}
	s.busbw += res.busbw
	s.nbusbws++

	if s.o.check > 0 {
		res.wrong = 0
		for c := 0; c < s.o.check && res.wrong == 0; c++ {
			w, err := s.verify(ctx, count, op, inPlace)
			if err != nil {
				return result{}, err
			}
			res.wrong += w
		}
		s.wrong += res.wrong
	}
	return res, nil
}

// verify sets fresh inputs, runs the collective once and counts the elements
// that differ from the reference on every rank. Out of place, the receive
// buffer is first filled with NaN so a call that leaves it alone fails, and
// the send buffer must come back unchanged (it is never written).
func (s *sweep[T]) verify(ctx context.Context, count int64, op collective.Op, inPlace bool) (int64, error) {
	s.rep++
	rep, n := s.rep, len(s.comms)
	nan := T(math.NaN())
	err := s.onRanks(ctx, func(ctx context.Context, r int) error {
		in := s.recv[r][:count]
		if !inPlace {
			in = s.send[r][:count]
			recv := s.recv[r][:count]
			for i := range recv {
				recv[i] = nan
			}
		}
		for i := range in {
			in[i] = T(input(op, r, int64(i), rep))
		}
		if err := s.call(ctx, r, count, op, inPlace); err != nil {
			return err
		}
		if testHookAfterCheck != nil {
			testHookAfterCheck(r, inPlace, s.recv[r][:count])
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return countWrong(s.send, s.recv, count, n, op, rep, inPlace), nil
}

// countWrong compares every rank's result with the float64 reference,
// split over the CPUs. An element is wrong when it differs from the
// reference rounded to T (avg: by more than 1 ulp, since the library
// multiplies the sum by 1/N) or from rank 0's value (every rank must hold
// bitwise identical data). Out of place, a send element that changed is
// wrong too.
func countWrong[T float](send, recv [][]T, count int64, n int, op collective.Op, rep int, inPlace bool) int64 {
	var wrong atomic.Int64
	workers := int64(runtime.GOMAXPROCS(0))
	chunk := (count + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := int64(0); lo < count; lo += chunk {
		hi := min(lo+chunk, count)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var w int64
			for i := lo; i < hi; i++ {
				want := T(reference(op, n, i, rep))
				first := recv[0][i]
				for r := 0; r < n; r++ {
					got := recv[r][i]
					if !matches(got, want, op) || (r > 0 && !sameBits(got, first)) {
						w++
					}
					if !inPlace && send[r][i] != T(input(op, r, i, rep)) {
						w++
					}
				}
			}
			wrong.Add(w)
		}()
	}
	wg.Wait()
	return wrong.Load()
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

// reference reduces element i over n ranks in float64, in a plain loop over
// the inputs: independent of the library.
func reference(op collective.Op, n int, i int64, rep int) float64 {
	acc := input(op, 0, i, rep)
	for r := 1; r < n; r++ {
		x := input(op, r, i, rep)
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
	return acc
}

// matches reports whether got is right: exactly want, or within 1 ulp for avg.
func matches[T float](got, want T, op collective.Op) bool {
	if got == want {
		return true
	}
	return op == collective.Mean && ulpDistance(got, want) <= 1
}

// sameBits reports whether a and b are bitwise identical.
func sameBits[T float](a, b T) bool {
	switch x := any(a).(type) {
	case float32:
		return math.Float32bits(x) == math.Float32bits(any(b).(float32))
	case float64:
		return math.Float64bits(x) == math.Float64bits(any(b).(float64))
	}
	return false
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

// writeRow prints one size as nccl-tests does: size, count, type, redop,
// root (-1: all-reduce has none), then out-of-place and in-place time,
// algbw, busbw and #wrong.
func writeRow(w io.Writer, size, count int64, typ, op string, res [2]result) {
	fmt.Fprintf(w, "%12d  %12d  %8s  %6s  %6d", size, count, typ, op, -1)
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
