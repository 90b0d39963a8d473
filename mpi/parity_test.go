//go:build mpi && cgo

package mpi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/collective"
)

// The element types, ops and collectives beyond float32/float64 across
// processes: every integer type (8 to 64 bits, signed and unsigned) and
// the 16- and 8-bit float types through AllReduce (every op defined on the
// type), ReduceScatter, AllGather, Reduce, BroadcastInto, Scan, Exscan (and their tensor forms),
// GatherV, ScatterV and SendRecv (to oneself, and a ring through every
// process), roots in another process. Every result is checked against a
// reference computed here from every global rank's known inputs.

// etype is one element type of the tests.
type etype[T collective.Elem] struct {
	name string
	// ops are the ops AllReduce runs on the type.
	ops []collective.Op
	// in is global rank r's element i for op.
	in func(op collective.Op, r, i int) T
	// ref reduces xs (the inputs of ranks 0, 1, ... in rank order) with op.
	ref func(op collective.Op, xs []T) T
	// near reports whether got is an accepted result where want is the
	// reference: equal, or one unit in the last place apart for Mean of a
	// 16- or 8-bit float.
	near func(op collective.Op, got, want T) bool
	// mark is a value the inputs of Sum never take (for floats) or rarely
	// take (for integers): what untouched memory holds.
	mark T
}

// intOps is every op, the bitwise and logical ones included.
var intOps = []collective.Op{
	collective.Sum, collective.Mean, collective.Max, collective.Min, collective.Prod,
	collective.BAnd, collective.BOr, collective.BXor, collective.LAnd, collective.LOr, collective.LXor,
}

// mix64 is a 64-bit hash of (r, i) (splitmix64's finaliser).
func mix64(r, i int) uint64 {
	h := uint64(r+1)*0x9E3779B97F4A7C15 ^ uint64(i+1)*0xC2B2AE3D27D4EB4F
	h ^= h >> 30
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 27
	h *= 0x94D049BB133111EB
	return h ^ h>>31
}

// intIn is global rank r's element i of an integer type: the low bits of
// a hash (negative values for the signed types, sums and products that
// wrap), 0 for one element in eight (so that the logical ops see both
// truth values). The same inputs serve every op.
func intIn[T collective.Integer](_ collective.Op, r, i int) T {
	h := mix64(r, i)
	if h>>61 == 0 {
		return 0
	}
	return T(h)
}

// truth is x as a logical value: 1 or 0.
func truth[T collective.Integer](x T) T {
	if x != 0 {
		return 1
	}
	return 0
}

// intRef is the exact reduction of xs in T: Sum and Prod wrap, Mean is the
// wrapped sum divided by len(xs) (Go's integer division truncates toward
// zero, as NCCL's ncclAvg and collective document), the logical ops give 1
// or 0.
func intRef[T collective.Integer](op collective.Op, xs []T) T {
	acc := xs[0]
	switch op {
	case collective.LAnd, collective.LOr, collective.LXor:
		acc = truth(acc)
	}
	for _, x := range xs[1:] {
		switch op {
		case collective.Sum, collective.Mean:
			acc += x
		case collective.Prod:
			acc *= x
		case collective.Max:
			acc = max(acc, x)
		case collective.Min:
			acc = min(acc, x)
		case collective.BAnd:
			acc &= x
		case collective.BOr:
			acc |= x
		case collective.BXor:
			acc ^= x
		case collective.LAnd:
			acc &= truth(x)
		case collective.LOr:
			acc |= truth(x)
		case collective.LXor:
			acc ^= truth(x)
		}
	}
	if op == collective.Mean {
		acc /= T(len(xs))
	}
	return acc
}

// intType is the test type of integer type T.
func intType[T collective.Integer](name string) etype[T] {
	return etype[T]{
		name: name,
		ops:  intOps,
		in:   intIn[T],
		ref:  intRef[T],
		near: func(_ collective.Op, got, want T) bool { return got == want },
		mark: T(markBits),
	}
}

// markBits are the bits of the integer types' mark (truncated to the type).
var markBits uint64 = 0x5a5a5a5a5a5a5a5a

// smallFloat is one of the 16- and 8-bit float types: its conversions
// from and to float64 and its bit pattern.
type smallFloat[T collective.Elem] struct {
	from func(float64) T
	to   func(T) float64
	bits func(T) uint16
}

// smallIn is global rank r's element i of a 16- or 8-bit float for op,
// chosen so that every reduction is exact in the type whatever the order
// and grouping of the steps (Float8E5M2, the narrowest, holds the integers
// up to 8 and 2^-16..2^15 exactly): Sum and Mean -1, 0 or 1 (every partial
// sum over up to 8 ranks is an integer in [-8, 8]); Prod +-1, +-2 or +-1/2
// (every partial product is +-2^k, |k| <= 8); Max and Min quarters in
// [-2.75, 2.75], rounded to the type (a max or min is one of the inputs).
func smallIn(op collective.Op, r, i int) float64 {
	switch op {
	case collective.Prod:
		return [...]float64{1, -1, 2, -0.5, 1, 0.5, -2, -1}[(i*3+r*5)%8]
	case collective.Max, collective.Min:
		return float64((i*7+r*13)%23-11) / 4
	}
	return float64((i*7+r*13)%3 - 1)
}

// floatType is the test type of a 16- or 8-bit float. The reference
// reduces the decoded inputs in float64 and rounds once to the type: the
// exact result (smallIn), except Mean, whose sum is exact but whose
// division by N may round differently in float32 before the rounding to
// the type, so that one unit in the last place is accepted.
func floatType[T collective.Elem](name string, f smallFloat[T]) etype[T] {
	return etype[T]{
		name: name,
		ops:  []collective.Op{collective.Sum, collective.Mean, collective.Max, collective.Min, collective.Prod},
		in:   func(op collective.Op, r, i int) T { return f.from(smallIn(op, r, i)) },
		ref: func(op collective.Op, xs []T) T {
			acc := f.to(xs[0])
			for _, x := range xs[1:] {
				acc = step64(op, acc, f.to(x))
			}
			if op == collective.Mean {
				acc /= float64(len(xs))
			}
			return f.from(acc)
		},
		near: func(op collective.Op, got, want T) bool {
			if got == want {
				return true
			}
			g, w := int(f.bits(got)), int(f.bits(want))
			return op == collective.Mean && (g == w+1 || g == w-1) && math.Signbit(f.to(got)) == math.Signbit(f.to(want))
		},
		mark: f.from(-123),
	}
}

var (
	f16 = smallFloat[collective.Float16]{
		from: func(x float64) collective.Float16 { return collective.Float16From(float32(x)) },
		to:   func(x collective.Float16) float64 { return float64(x.Float32()) },
		bits: func(x collective.Float16) uint16 { return uint16(x) },
	}
	bf16 = smallFloat[collective.BFloat16]{
		from: func(x float64) collective.BFloat16 { return collective.BFloat16From(float32(x)) },
		to:   func(x collective.BFloat16) float64 { return float64(x.Float32()) },
		bits: func(x collective.BFloat16) uint16 { return uint16(x) },
	}
	e4m3 = smallFloat[collective.Float8E4M3]{
		from: func(x float64) collective.Float8E4M3 { return collective.Float8E4M3From(float32(x)) },
		to:   func(x collective.Float8E4M3) float64 { return float64(x.Float32()) },
		bits: func(x collective.Float8E4M3) uint16 { return uint16(x.Bits()) },
	}
	e5m2 = smallFloat[collective.Float8E5M2]{
		from: func(x float64) collective.Float8E5M2 { return collective.Float8E5M2From(float32(x)) },
		to:   func(x collective.Float8E5M2) float64 { return float64(x.Float32()) },
		bits: func(x collective.Float8E5M2) uint16 { return uint16(x.Bits()) },
	}
)

// parityType runs the checks of one element type on a group. newer marks
// the types the issue of peer parity added (int16, uint16 and the fp8
// types), which the light jobs run on the GPU backends too.
type parityType struct {
	name  string
	newer bool
	// run runs AllReduce with every op of the type (on a GPU backend, the
	// ops typeCase was given) and, when all, the other checks.
	run func(t *testing.T, w *World, g *collective.Group, gpu, all bool)
}

// typeCase is the parityType of e. On a GPU backend every (type, op) pair
// is a kernel that lavapipe compiles at its first use (the fp8 ones take
// about a second each on a CI core), so AllReduce runs only gpuOps there;
// the host backend runs every op, and collective's own tests run every
// kernel on lavapipe.
func typeCase[T collective.Elem](e etype[T], newer bool, gpuOps ...collective.Op) parityType {
	return parityType{e.name, newer, func(t *testing.T, w *World, g *collective.Group, gpu, all bool) {
		if gpu {
			e.ops = gpuOps
		}
		runParity(t, w, g, e, all)
	}}
}

var (
	sumMean     = []collective.Op{collective.Sum, collective.Mean}
	sumMeanMax  = []collective.Op{collective.Sum, collective.Mean, collective.Max}
	sumMeanBXor = []collective.Op{collective.Sum, collective.Mean, collective.BXor}
	parityTypes = []parityType{
		typeCase(intType[int8]("int8"), false, sumMeanBXor...),
		typeCase(intType[uint8]("uint8"), false, sumMeanBXor...),
		typeCase(intType[int16]("int16"), true, intOps...),
		typeCase(intType[uint16]("uint16"), true, intOps...),
		typeCase(intType[int32]("int32"), false, sumMeanBXor...),
		typeCase(intType[uint32]("uint32"), false, sumMeanBXor...),
		typeCase(intType[int64]("int64"), false, sumMeanBXor...),
		typeCase(intType[uint64]("uint64"), false, sumMeanBXor...),
		typeCase(floatType("float16", f16), false, sumMean...),
		typeCase(floatType("bfloat16", bf16), false, sumMean...),
		typeCase(floatType("fp8e4m3", e4m3), true, sumMeanMax...),
		typeCase(floatType("fp8e5m2", e5m2), true, sumMeanMax...),
	}
)

// TestGroupParity runs, across the processes, every element type but
// float32/float64 (which TestGroupAllReduce and TestGroupCollectives run)
// through AllReduce with every op defined on it, the other reductions,
// Scan/Exscan, BroadcastInto, GatherV/ScatterV and SendRecv to oneself and
// along a ring, and the refusals (checkRefusals): on host with 1 and 2 local ranks and on vulkan (lavapipe
// under CI) with 2. On vulkan, AllReduce runs a few ops of each type
// (typeCase says why) and the older types run AllReduce only (the other
// checks move data as they do for the newer types); the light jobs run the
// newer types only there, and host with 2 local ranks only.
func TestGroupParity(t *testing.T) {
	w := needWorld(t)
	onGroups(t, w, func(t *testing.T, bk string, g *collective.Group) {
		start := time.Now()
		for _, pt := range parityTypes {
			if light() && bk != "host" && !pt.newer {
				continue
			}
			pt.run(t, w, g, bk != "host", bk == "host" || pt.newer)
		}
		checkRefusals(t, w, g)
		if w.Rank() == 0 {
			t.Logf("%d processes x %d local ranks on %s in %v", w.Size(), g.LocalSize(), bk, time.Since(start).Round(time.Millisecond))
		}
	})
}

// ins is the inputs for op of global ranks 0..n-1 at element i.
func ins[T collective.Elem](e etype[T], op collective.Op, n, i int) []T {
	xs := make([]T, n)
	for r := range xs {
		xs[r] = e.in(op, r, i)
	}
	return xs
}

// filled is n elements of f(i).
func filled[T any](n int, f func(i int) T) []T {
	x := make([]T, n)
	for i := range x {
		x[i] = f(i)
	}
	return x
}

// firstWrong compares got[i] with want(i) (near for op) and describes the
// first element that differs, or returns "".
func firstWrong[T collective.Elem](e etype[T], op collective.Op, got []T, want func(i int) T) string {
	for i, g := range got {
		if w := want(i); !e.near(op, g, w) {
			return fmt.Sprintf("element %d: %v, want %v", i, g, w)
		}
	}
	return ""
}

// runParity runs one element type's AllReduce check, and the others when
// all, on every local rank and agrees on the outcome with the other
// processes.
func runParity[T collective.Elem](t *testing.T, w *World, g *collective.Group, e etype[T], all bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	checks := []func(context.Context, etype[T], *collective.Comm) error{parityAllReduce[T]}
	if all {
		checks = append(checks, parityReductions[T], parityScan[T], parityBroadcastInto[T], parityGatherScatterV[T], paritySendRecv[T], parityPreMulSum[T])
	}
	errs := onLocal(g, func(c *collective.Comm) error {
		for _, f := range checks {
			if err := f(ctx, e, c); err != nil {
				return err
			}
		}
		return nil
	})
	ok := true
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: rank %d: %v", e.name, g.Comm(i).Rank(), err)
			ok = false
		}
	}
	agree(t, w, ok, e.name)
}

// parityAllReduce: every op of e.ops, 1003 elements (N+1 for Sum and
// Max too), out of place (AllReduceInto, the send buffer checked
// unwritten) and in place alternately.
func parityAllReduce[T collective.Elem](ctx context.Context, e etype[T], c *collective.Comm) error {
	N, r := c.Size(), c.Rank()
	for k, op := range e.ops {
		sizes := []int{1003}
		if op == collective.Sum || op == collective.Max {
			sizes = append(sizes, N+1)
		}
		for _, n := range sizes {
			send := filled(n, func(i int) T { return e.in(op, r, i) })
			recv := send
			if k%2 == 0 {
				recv = filled(n, func(int) T { return e.mark })
				if err := collective.AllReduceInto(ctx, c, send, recv, op); err != nil {
					return fmt.Errorf("AllReduceInto %s n=%d: %w", op, n, err)
				}
				if !slices.Equal(send, filled(n, func(i int) T { return e.in(op, r, i) })) {
					return fmt.Errorf("AllReduceInto %s n=%d: the send buffer was written", op, n)
				}
			} else if err := collective.AllReduce(ctx, c, recv, op); err != nil {
				return fmt.Errorf("AllReduce %s n=%d: %w", op, n, err)
			}
			if s := firstWrong(e, op, recv, func(i int) T { return e.ref(op, ins(e, op, N, i)) }); s != "" {
				return fmt.Errorf("AllReduce %s n=%d: %s", op, n, s)
			}
		}
	}
	return nil
}

// roots are the roots of the rooted collectives: process 1's first rank
// and the last rank (the last process).
func roots(c *collective.Comm) []int {
	L := c.Group().LocalSize()
	return []int{L % c.Size(), c.Size() - 1}
}

// parityReductions: ReduceScatter (Sum), AllGather, and Reduce (Sum and
// Max) to each root.
func parityReductions[T collective.Elem](ctx context.Context, e etype[T], c *collective.Comm) error {
	const m = 301 // elements per rank's chunk
	N, r := c.Size(), c.Rank()
	send := filled(m*N, func(i int) T { return e.in(collective.Sum, r, i) })
	part := filled(m, func(int) T { return e.mark })
	if err := collective.ReduceScatter(ctx, c, send, part, collective.Sum); err != nil {
		return fmt.Errorf("ReduceScatter: %w", err)
	}
	if s := firstWrong(e, collective.Sum, part, func(i int) T { return e.ref(collective.Sum, ins(e, collective.Sum, N, r*m+i)) }); s != "" {
		return fmt.Errorf("ReduceScatter: chunk %d: %s", r, s)
	}
	all := filled(m*N, func(int) T { return e.mark })
	if err := collective.AllGather(ctx, c, send[:m], all); err != nil {
		return fmt.Errorf("AllGather: %w", err)
	}
	if s := firstWrong(e, collective.Sum, all, func(j int) T { return e.in(collective.Sum, j/m, j%m) }); s != "" {
		return fmt.Errorf("AllGather: %s", s)
	}
	for _, root := range roots(c) {
		for _, op := range []collective.Op{collective.Sum, collective.Max} {
			in := filled(m, func(i int) T { return e.in(op, r, i) })
			var recv []T
			if r == root {
				recv = filled(m, func(int) T { return e.mark })
			}
			if err := collective.Reduce(ctx, c, in, recv, op, root); err != nil {
				return fmt.Errorf("Reduce %s to %d: %w", op, root, err)
			}
			if s := firstWrong(e, op, recv, func(i int) T { return e.ref(op, ins(e, op, N, i)) }); s != "" {
				return fmt.Errorf("Reduce %s to %d: %s", op, root, s)
			}
		}
	}
	return nil
}

// parityPreMulSum: AllReduceInto, ReduceScatter and AllReduceTensor (Auto
// and Ring) with each rank's own PreMulSum op (nccl-tests' scalars: 1 on the even ranks, 2 on the odd
// ones), against the sum of the products (x+x for 2x: exact for Sum's
// inputs); the fp8 types, whose doubled sums leave the integers they hold
// exactly, are left out.
func parityPreMulSum[T collective.Elem](ctx context.Context, e etype[T], c *collective.Comm) error {
	if strings.HasPrefix(e.name, "fp8") {
		return nil
	}
	const m = 257 // elements per rank's chunk
	N, r := c.Size(), c.Rank()
	op, err := c.PreMulSum(float64(1 + r%2))
	if err != nil {
		return err
	}
	defer c.DestroyOp(op)
	want := func(i int) T {
		xs := ins(e, collective.Sum, N, i)
		for q := 1; q < N; q += 2 {
			xs[q] = e.ref(collective.Sum, []T{xs[q], xs[q]})
		}
		return e.ref(collective.Sum, xs)
	}
	in := func(i int) T { return e.in(collective.Sum, r, i) }
	send := filled(m*N, in)
	recv := filled(m*N, func(int) T { return e.mark })
	if err := collective.AllReduceInto(ctx, c, send, recv, op); err != nil {
		return fmt.Errorf("AllReduceInto premulsum: %w", err)
	}
	if s := firstWrong(e, collective.Sum, recv, want); s != "" {
		return fmt.Errorf("AllReduceInto premulsum: %s", s)
	}
	if !slices.Equal(send, filled(m*N, in)) {
		return errors.New("AllReduceInto premulsum: the send buffer was written")
	}
	part := filled(m, func(int) T { return e.mark })
	if err := collective.ReduceScatter(ctx, c, send, part, op); err != nil {
		return fmt.Errorf("ReduceScatter premulsum: %w", err)
	}
	if s := firstWrong(e, collective.Sum, part, func(i int) T { return want(r*m + i) }); s != "" {
		return fmt.Errorf("ReduceScatter premulsum: chunk %d: %s", r, s)
	}
	// The tensor form: the products made on the rank's device, then
	// all-reduced across the processes in place in the tensor.
	t, err := collective.NewTensor[T](c, m*N)
	if err != nil {
		return err
	}
	defer t.Close()
	for _, s := range []collective.Strategy{collective.Auto, collective.Ring} {
		if err := t.Upload(send); err != nil {
			return err
		}
		if err := collective.AllReduceTensor(ctx, c, t, op, s); err != nil {
			return fmt.Errorf("AllReduceTensor premulsum %s: %w", s, err)
		}
		got := filled(m*N, func(int) T { return e.mark })
		if err := t.Download(got); err != nil {
			return err
		}
		if w := firstWrong(e, collective.Sum, got, want); w != "" {
			return fmt.Errorf("AllReduceTensor premulsum %s: %s", s, w)
		}
	}
	return nil
}

// parityScan: Scan and Exscan with Sum, Max and (integers) BXor; rank 0's
// Exscan recv is untouched, as collective documents (MPI leaves it
// undefined).
func parityScan[T collective.Elem](ctx context.Context, e etype[T], c *collective.Comm) error {
	const n = 517
	r := c.Rank()
	ops := []collective.Op{collective.Sum, collective.Max}
	if slices.Contains(e.ops, collective.BXor) {
		ops = append(ops, collective.BXor)
	}
	for _, op := range ops {
		send := filled(n, func(i int) T { return e.in(op, r, i) })
		recv := filled(n, func(int) T { return e.mark })
		if err := collective.Scan(ctx, c, send, recv, op); err != nil {
			return fmt.Errorf("Scan %s: %w", op, err)
		}
		if s := firstWrong(e, op, recv, func(i int) T { return e.ref(op, ins(e, op, r+1, i)) }); s != "" {
			return fmt.Errorf("Scan %s: %s", op, s)
		}
		recv = filled(n, func(int) T { return e.mark })
		if err := collective.Exscan(ctx, c, send, recv, op); err != nil {
			return fmt.Errorf("Exscan %s: %w", op, err)
		}
		want := func(int) T { return e.mark }
		if r > 0 {
			want = func(i int) T { return e.ref(op, ins(e, op, r, i)) }
		}
		if s := firstWrong(e, op, recv, want); s != "" {
			return fmt.Errorf("Exscan %s (rank 0's recv untouched): %s", op, s)
		}
		if err := parityScanTensor(ctx, e, c, op, send, want); err != nil {
			return err
		}
	}
	return nil
}

// parityScanTensor: ExscanTensor and ScanTensor (Async) of send on the
// rank's device, against the slice forms' references (want: Exscan's).
func parityScanTensor[T collective.Elem](ctx context.Context, e etype[T], c *collective.Comm, op collective.Op, send []T, want func(int) T) error {
	n, r := len(send), c.Rank()
	st, err := collective.NewTensor[T](c, n)
	if err != nil {
		return err
	}
	defer st.Close()
	rt, err := collective.NewTensor[T](c, n)
	if err != nil {
		return err
	}
	defer rt.Close()
	recv := filled(n, func(int) T { return e.mark })
	if err := errors.Join(st.Upload(send), rt.Upload(recv)); err != nil {
		return err
	}
	if err := collective.ExscanTensor(ctx, c, st, rt, op); err != nil {
		return fmt.Errorf("ExscanTensor %s: %w", op, err)
	}
	if err := rt.Download(recv); err != nil {
		return err
	}
	if s := firstWrong(e, op, recv, want); s != "" {
		return fmt.Errorf("ExscanTensor %s (rank 0's recv untouched): %s", op, s)
	}
	if err := collective.ScanTensorAsync(ctx, c, st, st, op).Wait(ctx); err != nil {
		return fmt.Errorf("ScanTensorAsync %s in place: %w", op, err)
	}
	if err := st.Download(recv); err != nil {
		return err
	}
	if s := firstWrong(e, op, recv, func(i int) T { return e.ref(op, ins(e, op, r+1, i)) }); s != "" {
		return fmt.Errorf("ScanTensorAsync %s in place: %s", op, s)
	}
	return nil
}

// parityBroadcastInto: out-of-place broadcast from each root (the others
// pass a nil send), the root's send left as it was.
func parityBroadcastInto[T collective.Elem](ctx context.Context, e etype[T], c *collective.Comm) error {
	const n = 1001
	r := c.Rank()
	for _, root := range roots(c) {
		want := func(i int) T { return e.in(collective.Sum, root, i) }
		var send []T
		if r == root {
			send = filled(n, want)
		}
		recv := filled(n, func(int) T { return e.mark })
		if err := collective.BroadcastInto(ctx, c, send, recv, root); err != nil {
			return fmt.Errorf("BroadcastInto from %d: %w", root, err)
		}
		if s := firstWrong(e, collective.Sum, recv, want); s != "" {
			return fmt.Errorf("BroadcastInto from %d: %s", root, s)
		}
		if r == root && !slices.Equal(send, filled(n, want)) {
			return fmt.Errorf("BroadcastInto from %d: the root's send was written", root)
		}
	}
	return nil
}

// vLayout is the counts and displacements of the V-form tests: rank j has
// 7j mod 11 elements (rank 0 none), placed in reverse rank order with a
// gap of 2 elements after each; total is the length of the whole buffer.
func vLayout(N int) (counts, displs []int, total int) {
	counts, displs = make([]int, N), make([]int, N)
	for j := N - 1; j >= 0; j-- {
		counts[j] = 7 * j % 11
		displs[j] = total
		total += counts[j] + 2
	}
	return counts, displs, total
}

// parityGatherScatterV: GatherV and ScatterV with each root; the gaps of
// root's GatherV recv are left untouched.
func parityGatherScatterV[T collective.Elem](ctx context.Context, e etype[T], c *collective.Comm) error {
	N, r := c.Size(), c.Rank()
	counts, displs, total := vLayout(N)
	for _, root := range roots(c) {
		send := filled(counts[r], func(i int) T { return e.in(collective.Sum, r, i) })
		var recv []T
		if r == root {
			recv = filled(total, func(int) T { return e.mark })
		}
		if err := collective.GatherV(ctx, c, send, recv, counts, displs, root); err != nil {
			return fmt.Errorf("GatherV to %d: %w", root, err)
		}
		if r == root {
			want := filled(total, func(int) T { return e.mark })
			for j := range N {
				for i := range counts[j] {
					want[displs[j]+i] = e.in(collective.Sum, j, i)
				}
			}
			if s := firstWrong(e, collective.Sum, recv, func(i int) T { return want[i] }); s != "" {
				return fmt.Errorf("GatherV to %d: %s", root, s)
			}
		}
		// ScatterV: root's send holds rank j's element i at displs[j]+i.
		var all []T
		if r == root {
			all = filled(total, func(int) T { return e.mark })
			for j := range N {
				for i := range counts[j] {
					all[displs[j]+i] = e.in(collective.Max, j, i)
				}
			}
		}
		mine := filled(counts[r], func(int) T { return e.mark })
		if err := collective.ScatterV(ctx, c, all, mine, counts, displs, root); err != nil {
			return fmt.Errorf("ScatterV from %d: %w", root, err)
		}
		if s := firstWrong(e, collective.Sum, mine, func(i int) T { return e.in(collective.Max, r, i) }); s != "" {
			return fmt.Errorf("ScatterV from %d: %s", root, s)
		}
	}
	return nil
}

// paritySendRecv: SendRecv to oneself, then along a ring through every
// rank (r sends to r+1, receives from r-1; the ring crosses from process
// to process), messages of several exchange slots.
func paritySendRecv[T collective.Elem](ctx context.Context, e etype[T], c *collective.Comm) error {
	var z T
	n := groupChunk/int(unsafe.Sizeof(z)) + 17
	N, r := c.Size(), c.Rank()
	msg := filled(n, func(i int) T { return e.in(collective.Sum, r, i) })
	got := filled(n, func(int) T { return e.mark })
	if err := collective.SendRecv(ctx, c, msg, r, got, r); err != nil {
		return fmt.Errorf("SendRecv to itself: %w", err)
	}
	if !slices.Equal(got, msg) {
		return fmt.Errorf("SendRecv to itself: %s", firstWrong(e, collective.Sum, got, func(i int) T { return msg[i] }))
	}
	to, from := (r+1)%N, (r-1+N)%N
	got = filled(n, func(int) T { return e.mark })
	if err := collective.SendRecv(ctx, c, msg, to, got, from); err != nil {
		return fmt.Errorf("SendRecv to %d from %d: %w", to, from, err)
	}
	if s := firstWrong(e, collective.Sum, got, func(i int) T { return e.in(collective.Sum, from, i) }); s != "" {
		return fmt.Errorf("SendRecv from %d: %s", from, s)
	}
	return nil
}

// checkRefusals: Scan and Exscan with Mean, and a bitwise op on a float
// type, are refused on every rank (ErrInvalidArgument: collective documents
// dividing rank r's Sum by r+1 instead, and the bitwise and logical ops as
// integer-only), the recv untouched, and the group stays usable.
func checkRefusals(t *testing.T, w *World, g *collective.Group) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := onLocal(g, func(c *collective.Comm) error {
		for _, f := range []func(context.Context, *collective.Comm, []int32, []int32, collective.Op) error{
			collective.Scan[int32], collective.Exscan[int32],
		} {
			recv := []int32{-7, -7}
			err := f(ctx, c, []int32{1, 2}, recv, collective.Mean)
			if !errors.Is(err, collective.ErrInvalidArgument) {
				return fmt.Errorf("Scan/Exscan Mean: %v, want ErrInvalidArgument", err)
			}
			if !slices.Equal(recv, []int32{-7, -7}) {
				return fmt.Errorf("Scan/Exscan Mean wrote its recv: %v", recv)
			}
		}
		h := []collective.Float16{collective.Float16From(1)}
		if err := collective.AllReduce(ctx, c, h, collective.BAnd); !errors.Is(err, collective.ErrInvalidArgument) {
			return fmt.Errorf("AllReduce BAnd of Float16: %v, want ErrInvalidArgument", err)
		}
		if h[0] != collective.Float16From(1) {
			return fmt.Errorf("AllReduce BAnd of Float16 wrote its data: %v", h[0])
		}
		x := []int32{int32(c.Rank())}
		if err := collective.AllReduce(ctx, c, x, collective.Sum); err != nil {
			return fmt.Errorf("AllReduce after the refusals: %w", err)
		}
		if n := int32(c.Size()); x[0] != n*(n-1)/2 {
			return fmt.Errorf("AllReduce after the refusals: %d, want %d", x[0], n*(n-1)/2)
		}
		return nil
	})
	agree(t, w, errors.Join(errs...) == nil, fmt.Sprintf("refusals: %v", errors.Join(errs...)))
}
