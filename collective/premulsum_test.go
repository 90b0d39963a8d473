package collective

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// preMulRef is one rank's element x multiplied by scalar s as PreMulSum's
// rule states it, computed apart from the library's arithmetic in float64
// (exact for every product of a float32 or narrower element and a float32
// scalar), rounded once to float32 and then to a narrower type: a scalar
// of 1 copies, one of exactly 1/N (N up to 4096) divides by N; integers
// wrap.
func preMulRef[T Elem](x T, s float64) T {
	if s == 1 {
		return x
	}
	div := 0.0
	for n := 2; n <= 4096; n++ {
		if 1/float64(n) == s {
			div = float64(n)
		}
	}
	f32 := func(v float32) float32 {
		if div != 0 {
			return float32(float64(v) / div)
		}
		return float32(float64(v) * float64(float32(s)))
	}
	var out any
	switch v := any(x).(type) {
	case float32:
		out = f32(v)
	case float64:
		if div != 0 {
			out = v / div
		} else {
			out = v * s
		}
	case Float16:
		out = Float16From(f32(v.Float32()))
	case BFloat16:
		out = BFloat16From(f32(v.Float32()))
	case Float8E4M3:
		out = Float8E4M3From(f32(v.Float32()))
	case Float8E5M2:
		out = Float8E5M2From(f32(v.Float32()))
	default:
		return intMul(x, s)
	}
	return out.(T)
}

// preMulDraw draws n elements of T: integers over their whole range (so
// products and sums wrap) and small, floats of either sign over several
// binades (finite, in the narrow types' range).
func preMulDraw[T Elem](rng *rand.Rand, n int) []T {
	out := make([]T, n)
	for i := range out {
		f := float32((rng.Float64()*2 - 1) * math.Pow(2, float64(rng.IntN(12)-4)))
		var v any
		switch any(out[i]).(type) {
		case float32:
			v = f
		case float64:
			v = float64(f) + rng.Float64()*1e-9
		case Float16:
			v = Float16From(f)
		case BFloat16:
			v = BFloat16From(f)
		case Float8E4M3:
			v = Float8E4M3From(f)
		case Float8E5M2:
			v = Float8E5M2From(f)
		default:
			u := rng.Uint64()
			if rng.IntN(2) == 0 {
				u = uint64(rng.IntN(19) - 9)
			}
			v = intOf[T](u)
		}
		out[i] = v.(T)
	}
	return out
}

// intOf converts the bits u to the integer type T (truncating).
func intOf[T Elem](u uint64) any {
	var x T
	v := reflect.ValueOf(&x).Elem()
	if v.CanInt() {
		v.SetInt(int64(u))
	} else {
		v.SetUint(u)
	}
	return x
}

// intMul is x * s in the integer type T, wrapping.
func intMul[T Elem](x T, s float64) T {
	v := reflect.ValueOf(&x).Elem()
	if v.CanInt() {
		v.SetInt(v.Int() * int64(s))
	} else {
		v.SetUint(v.Uint() * uint64(int64(s)))
	}
	return x
}

// preMulScalars returns N scalars for T, one per rank, all different where
// N allows: for floats multiplies (0.3, -2.5, 1e-3, 3), a copy (1) and
// divisions (1/2, 1/3, 1/7); for integers integral values (negative ones
// for the signed types).
func preMulScalars[T Elem](N int) []float64 {
	all := []float64{0.3, 1.0 / 3, -2.5, 1, 0.5, 1e-3, 1.0 / 7}
	dt := dtypeOf[T]()
	if dt.IsInt() {
		all = []float64{3, 1, 0, 2, 7, 5, 255}
		if dt.Signed() {
			all = []float64{3, -1, 1, 0, -7, 2, 5}
		}
	}
	out := make([]float64, N)
	for r := range out {
		out[r] = all[r%len(all)]
	}
	return out
}

// wrappedSum is the sum of ins' column e in T (integers: wrapped), in rank
// order.
func wrappedSum[T Integer](ins [][]T, e int) T {
	var s T
	for _, in := range ins {
		s += in[e]
	}
	return s
}

// preMulCase runs PreMulSum of T on g, each rank with its own scalar, in
// every form of every reduction on host slices (AllReduce in place and its
// Into, With (every strategy), Async and Batch forms, over HostBuffers too,
// ReduceScatter in place, ReduceScatterV, Reduce in place, Scan, Exscan),
// and checks each result bit for bit against the same call with Sum on the
// ranks' products computed by preMulRef (and, for integers, against the
// wrapped sum of the products itself), and that the caller's send is left
// as it was.
func preMulCase[T Elem](t *testing.T, g *Group, rng *rand.Rand, n int, strategies []Strategy) {
	t.Helper()
	N := g.Size()
	ctx := context.Background()
	scalars := preMulScalars[T](N)
	ins := make([][]T, N)
	scaled := make([][]T, N)
	for r := range ins {
		ins[r] = preMulDraw[T](rng, n*N)
		scaled[r] = make([]T, n*N)
		for e, x := range ins[r] {
			scaled[r][e] = preMulRef(x, scalars[r])
		}
	}
	ops := make([]Op, N)
	noErrors(t, onRanks(g, func(c *Comm) error {
		var err error
		ops[c.Rank()], err = c.PreMulSum(scalars[c.Rank()])
		return err
	}))
	defer onRanks(g, func(c *Comm) error { return c.DestroyOp(ops[c.Rank()]) })
	what := fmt.Sprintf("%T N=%d n=%d scalars %v", *new(T), N, n, scalars)
	same := func(coll string, r int, got, want []T) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s %s: rank %d: %d elements, want %d", what, coll, r, len(got), len(want))
		}
		for e := range want {
			if !sameBits(got[e:e+1], want[e:e+1]) {
				t.Fatalf("%s %s: rank %d element %d = %v, want %v (inputs %v)", what, coll, r, e, got[e], want[e], column(ins, e))
			}
		}
	}
	// form runs one collective on every rank twice, with PreMulSum on the
	// inputs and with Sum on the products, and compares the results;
	// run(c, send, op) returns the rank's result.
	form := func(coll string, ranks []int, run func(c *Comm, send []T, op Op) ([]T, error)) {
		t.Helper()
		got, want := make([][]T, N), make([][]T, N)
		noErrors(t, onRanks(g, func(c *Comm) error {
			r := c.Rank()
			send := slices.Clone(ins[r])
			var err error
			if got[r], err = run(c, send, ops[r]); err != nil {
				return err
			}
			if !sameBits(send, ins[r]) && !aliases(send, got[r]) {
				return fmt.Errorf("%s: the send was written", coll)
			}
			want[r], err = run(c, slices.Clone(scaled[r]), Sum)
			return err
		}))
		if ranks == nil {
			ranks = make([]int, N)
			for r := range ranks {
				ranks[r] = r
			}
		}
		for _, r := range ranks {
			same(coll, r, got[r], want[r])
		}
	}
	for _, s := range strategies {
		form(fmt.Sprintf("AllReduceWith %v", s), nil, func(c *Comm, send []T, op Op) ([]T, error) {
			out := make([]T, len(send))
			return out, AllReduceWith(ctx, c, send, out, op, s)
		})
	}
	form("AllReduce in place", nil, func(c *Comm, send []T, op Op) ([]T, error) {
		return send, AllReduce(ctx, c, send, op)
	})
	form("AllReduceInto", nil, func(c *Comm, send []T, op Op) ([]T, error) {
		out := make([]T, len(send))
		return out, AllReduceInto(ctx, c, send, out, op)
	})
	form("AllReduceAsync", nil, func(c *Comm, send []T, op Op) ([]T, error) {
		return send, AllReduceAsync(ctx, c, send, op).Wait(ctx)
	})
	form("BatchAllReduce", nil, func(c *Comm, send []T, op Op) ([]T, error) {
		b := c.Batch()
		BatchAllReduce(b, send, op)
		return send, b.Run(ctx)
	})
	form("AllReduce of a HostBuffer", nil, func(c *Comm, send []T, op Op) ([]T, error) {
		hb, err := NewHostBuffer[T](len(send))
		if err != nil {
			return nil, err
		}
		defer hb.Close()
		copy(hb.Data, send)
		if err := AllReduce(ctx, c, hb.Data, op); err != nil {
			return nil, err
		}
		return slices.Clone(hb.Data), nil
	})
	form("ReduceScatter in place", nil, func(c *Comm, send []T, op Op) ([]T, error) {
		r := c.Rank()
		return send[r*n : (r+1)*n], ReduceScatter(ctx, c, send, send[r*n:(r+1)*n], op)
	})
	counts, displs := make([]int, N), make([]int, N)
	at := 0
	for r := range counts {
		counts[r] = (r*7 + 3) % (n + 1)
		displs[r] = at
		at += counts[r]
	}
	form("ReduceScatterVAsync", nil, func(c *Comm, send []T, op Op) ([]T, error) {
		out := make([]T, counts[c.Rank()])
		return out, ReduceScatterVAsync(ctx, c, send[:at], out, counts, displs, op).Wait(ctx)
	})
	root := rng.IntN(N)
	form(fmt.Sprintf("Reduce in place to %d", root), []int{root}, func(c *Comm, send []T, op Op) ([]T, error) {
		return send, Reduce(ctx, c, send, send, op, root)
	})
	form("Scan", nil, func(c *Comm, send []T, op Op) ([]T, error) {
		out := make([]T, len(send))
		return out, Scan(ctx, c, send, out, op)
	})
	above0 := make([]int, N-1) // rank 0's Exscan recv is left untouched
	for r := range above0 {
		above0[r] = r + 1
	}
	form("Exscan in place", above0, func(c *Comm, send []T, op Op) ([]T, error) {
		return send, Exscan(ctx, c, send, send, op)
	})
	// The tensor forms: send uploaded into a tensor (downloaded again into
	// send after the call, so the check above covers the tensor), the
	// result downloaded.
	tensors := func(c *Comm, send []T, m int, call func(st, rt *Tensor[T]) error) ([]T, error) {
		st, err := NewTensor[T](c, len(send))
		if err != nil {
			return nil, err
		}
		defer st.Close()
		rt, err := NewTensor[T](c, m)
		if err != nil {
			return nil, err
		}
		defer rt.Close()
		if err := st.Upload(send); err != nil {
			return nil, err
		}
		if err := call(st, rt); err != nil {
			return nil, err
		}
		out := make([]T, m)
		if err := rt.Download(out); err != nil {
			return nil, err
		}
		return out, st.Download(send)
	}
	if g.kernels.Has(dtypeOf[T]()) {
		for _, s := range strategies {
			form(fmt.Sprintf("AllReduceTensor %v", s), nil, func(c *Comm, send []T, op Op) ([]T, error) {
				t, err := NewTensor[T](c, len(send))
				if err != nil {
					return nil, err
				}
				defer t.Close()
				if err := t.Upload(send); err != nil {
					return nil, err
				}
				if err := AllReduceTensorAsync(ctx, c, t, op, s).Wait(ctx); err != nil {
					return nil, err
				}
				out := make([]T, len(send))
				return out, t.Download(out)
			})
		}
	}
	form("ReduceScatterTensor", nil, func(c *Comm, send []T, op Op) ([]T, error) {
		return tensors(c, send, n, func(st, rt *Tensor[T]) error { return ReduceScatterTensor(ctx, c, st, rt, op) })
	})
	form("ReduceScatterVTensor", nil, func(c *Comm, send []T, op Op) ([]T, error) {
		return tensors(c, send[:at], counts[c.Rank()], func(st, rt *Tensor[T]) error {
			return ReduceScatterVTensor(ctx, c, st, rt, counts, displs, op)
		})
	})
	form(fmt.Sprintf("ReduceTensor to %d", root), []int{root}, func(c *Comm, send []T, op Op) ([]T, error) {
		return tensors(c, send, len(send), func(st, rt *Tensor[T]) error { return ReduceTensor(ctx, c, st, rt, op, root) })
	})
	if ints, ok := any(scaled).([][]int32); ok {
		// Exact, without the library's Sum: the wrapped sum of the products.
		got := make([][]T, N)
		noErrors(t, onRanks(g, func(c *Comm) error {
			got[c.Rank()] = slices.Clone(ins[c.Rank()])
			return AllReduce(ctx, c, got[c.Rank()], ops[c.Rank()])
		}))
		for r := range got {
			for e := range got[r] {
				if w := wrappedSum(ints, e); any(got[r][e]).(int32) != w {
					t.Fatalf("%s: rank %d element %d = %v, want %v", what, r, e, got[r][e], w)
				}
			}
		}
	}
}

// aliases reports whether b's memory is in a's (an in-place call's
// result).
func aliases[T Elem](a, b []T) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	p, q := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return q >= p && q < p+uintptr(len(asBytes(a)))
}

// TestPreMulSum checks PreMulSum on every element type, 1 to 7 ranks (each
// with its own scalar), sizes 0, 1, odd and around the 256-wide work group,
// every strategy, on host and lavapipe, against preMulRef's products summed
// as Sum sums them. On lavapipe 1, 2, 3, 5 and 7 ranks (5 and 7 only in
// full runs: 3 has uneven local groups too, and host runs every rank count;
// each rank's device compiles its kernels), -short 3.
func TestPreMulSum(t *testing.T) {
	arithmetic(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x9e3))
	allStrategies := []Strategy{Auto, Ring, Tree, Hierarchical, Pipelined, Direct, Host}
	for _, bk := range backendsUnderTest(t) {
		ranks := []int{1, 2, 3, 4, 5, 6, 7}
		sizes := []int{0, 1, 5, 85, 86}
		if bk != "host" {
			ranks = []int{1, 2, 3, 5, 7}
			sizes = []int{0, 1, 86}
			if !fullRun() {
				ranks = []int{1, 2, 3}
			}
			if testing.Short() {
				ranks = []int{3}
			}
		}
		for _, N := range ranks {
			g := openGroup(t, bk, N, func(o *Options) { o.ChunkBytes = 256; o.Config.LocalGroupSize = 2 })
			for _, n := range sizes {
				strategies := []Strategy{Auto}
				if n == sizes[len(sizes)-1] {
					strategies = allStrategies
				}
				t.Run(fmt.Sprintf("%s/N=%d/n=%d", bk, N, n), func(t *testing.T) {
					preMulCase[float32](t, g, rng, n, strategies)
					preMulCase[float64](t, g, rng, n, strategies)
					preMulCase[Float16](t, g, rng, n, strategies)
					preMulCase[BFloat16](t, g, rng, n, strategies)
					preMulCase[Float8E4M3](t, g, rng, n, strategies)
					preMulCase[Float8E5M2](t, g, rng, n, strategies)
					preMulCase[int8](t, g, rng, n, strategies)
					preMulCase[uint8](t, g, rng, n, strategies)
					preMulCase[int16](t, g, rng, n, strategies)
					preMulCase[uint16](t, g, rng, n, strategies)
					preMulCase[int32](t, g, rng, n, strategies)
					preMulCase[uint32](t, g, rng, n, strategies)
					preMulCase[int64](t, g, rng, n, strategies)
					preMulCase[uint64](t, g, rng, n, strategies)
				})
			}
		}
	}
}

// TestPreMulSumExamples: hand-worked products and sums.
func TestPreMulSumExamples(t *testing.T) {
	ctx := context.Background()
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3)
		f := [][]float32{{1, 2, 3}, {4, 8, -1}, {10, 0, 0.5}}
		i := [][]int8{{1, 100, -128}, {2, 1, 1}, {3, 0, 0}}
		fs, is := []float64{2, 0.25, -1}, []float64{1, 3, -2}
		wantF := []float32{2 + 1 - 10, 4 + 2, 6 - 0.25 - 0.5}
		wantI := []int8{1 + 6 - 6, 100 + 3, -128 + 3} // 103; -125
		noErrors(t, onRanks(g, func(c *Comm) error {
			r := c.Rank()
			fo, err := c.PreMulSum(fs[r])
			if err != nil {
				return err
			}
			io, err := c.PreMulSum(is[r])
			if err != nil {
				return err
			}
			if err := AllReduce(ctx, c, f[r], fo); err != nil {
				return err
			}
			if err := AllReduce(ctx, c, i[r], io); err != nil {
				return err
			}
			if !slices.Equal(f[r], wantF) || !slices.Equal(i[r], wantI) {
				return fmt.Errorf("got %v and %v, want %v and %v", f[r], i[r], wantF, wantI)
			}
			if err := c.DestroyOp(fo); err != nil {
				return err
			}
			return c.DestroyOp(io)
		}))
	}
}

// TestPreMulSumRefused: an op of another comm, a destroyed op, a value in
// the ops' range no comm made, PreMulSum's fingerprint value passed as an
// Op, and a scalar an integer type cannot take fail with
// ErrInvalidArgument on every rank, before any data moves; a rank passing
// Sum while the others pass their PreMulSum op is a mismatch; DestroyOp
// of anything but a live op of the comm is ErrInvalidArgument; the group
// stays usable.
func TestPreMulSumRefused(t *testing.T) {
	ctx := context.Background()
	g := openGroup(t, "host", 3)
	other := openGroup(t, "host", 3)
	foreign, err := other.Comm(0).PreMulSum(2)
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]Op, 3)
	for r := range ops {
		if ops[r], err = g.Comm(r).PreMulSum(float64(r + 1)); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := g.Comm(0).PreMulSum(3)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Comm(0).DestroyOp(dead); err != nil {
		t.Fatal(err)
	}
	half, err := g.Comm(0).PreMulSum(0.5)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name string
		op   Op
		int  bool
	}{
		{"another comm's op", foreign, false},
		{"a destroyed op", dead, false},
		{"an op no comm made", Op(1<<30 + 1), false},
		{"the fingerprint's value", opPreMulSum, false},
		{"0.5 on int32", half, true},
	} {
		data := [][]float32{{1, 2}, {3, 4}, {5, 6}}
		idata := [][]int32{{1, 2}, {3, 4}, {5, 6}}
		errs := onRanks(g, func(c *Comm) error {
			op := ops[c.Rank()]
			if c.Rank() == 0 {
				op = bad.op
			}
			if bad.int {
				return AllReduce(ctx, c, idata[c.Rank()], op)
			}
			return AllReduce(ctx, c, data[c.Rank()], op)
		})
		for r, err := range errs {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s: rank %d: %v, want ErrInvalidArgument", bad.name, r, err)
			}
		}
		if data[0][0] != 1 || data[1][0] != 3 || idata[2][1] != 6 {
			t.Errorf("%s: data written: %v %v", bad.name, data, idata)
		}
	}
	errs := onRanks(g, func(c *Comm) error {
		op := ops[c.Rank()]
		if c.Rank() == 1 {
			op = Sum
		}
		return AllReduce(ctx, c, []float32{1, 2}, op)
	})
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("Sum against PreMulSum: rank %d: %v, want ErrMismatch", r, err)
		}
	}
	for _, op := range []Op{dead, foreign, Sum, Op(1 << 24)} {
		if err := g.Comm(0).DestroyOp(op); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("DestroyOp(%d): %v, want ErrInvalidArgument", int(op), err)
		}
	}
	var nilComm *Comm
	if _, err := nilComm.PreMulSum(1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil Comm's PreMulSum: %v", err)
	}
	if s := ops[0].String(); s != "premulsum" {
		t.Errorf("String() = %q, want premulsum", s)
	}
	// Still usable.
	noErrors(t, onRanks(g, func(c *Comm) error {
		x := []float32{1, 1}
		if err := AllReduce(ctx, c, x, ops[c.Rank()]); err != nil {
			return err
		}
		if x[0] != 6 {
			return fmt.Errorf("got %v, want 6", x[0])
		}
		return nil
	}))
}

// TestPreMulSumZeroAllocs: steady-state PreMulSum all-reduces of slices and
// tensors (float32 and int32) and a ReduceScatter allocate nothing: the
// products' memory is pooled.
func TestPreMulSumZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3)
		const n = 4099
		data := make([][]float32, 3)
		ops := make([]Op, 3)
		for r := range data {
			data[r] = make([]float32, 3*n)
			var err error
			if ops[r], err = g.Comm(r).PreMulSum(0.5); err != nil {
				t.Fatal(err)
			}
		}
		ctx := context.Background()
		ft, it := make([]*Tensor[float32], 3), make([]*Tensor[int32], 3)
		iops := make([]Op, 3)
		for r := range ft {
			var err error
			if ft[r], err = NewTensor[float32](g.Comm(r), n); err != nil {
				t.Fatal(err)
			}
			if it[r], err = NewTensor[int32](g.Comm(r), n); err != nil {
				t.Fatal(err)
			}
			if iops[r], err = g.Comm(r).PreMulSum(-3); err != nil {
				t.Fatal(err)
			}
		}
		call := func(c *Comm) error {
			r := c.Rank()
			if err := AllReduce(ctx, c, data[r], ops[r]); err != nil {
				return err
			}
			if err := AllReduceTensor(ctx, c, ft[r], ops[r], Auto); err != nil {
				return err
			}
			if err := AllReduceTensor(ctx, c, it[r], iops[r], Ring); err != nil {
				return err
			}
			return ReduceScatter(ctx, c, data[r], data[r][r*n:(r+1)*n], ops[r])
		}
		l := loopRanks(g, call)
		step := func() error { return call(g.Comm(0)) }
		for range 3 {
			if err := l.step(step); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		a := testing.AllocsPerRun(20, func() {
			if e := l.step(step); e != nil {
				err = e
			}
		})
		l.stop()
		for r := range ft {
			ft[r].Close()
			it[r].Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		if a != 0 {
			t.Errorf("%s: %v allocations per PreMulSum AllReduce and ReduceScatter, want 0", bk, a)
		}
	}
}
