package collective

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// typeSizes are element counts around the work-group size, the 16-byte
// alignment of chunks and a few slots.
var typeSizes = []int{0, 1, 2, 3, 7, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000, 4097}

// typeCase draws values of one element type and reduces them with the
// specification's arithmetic, independently of the library.
type typeCase[T Elem] struct {
	name string
	ops  []Op
	// draw returns an input for op on nranks ranks.
	draw func(rng *rand.Rand, op Op, nranks int) T
	// ref reduces vals (rank order) with op.
	ref func(op Op, vals []T) T
}

// intCase: full-range values; Sum and Prod wrap, as Go's arithmetic does.
func intCase[T int8 | uint8 | int16 | uint16 | int32 | uint32 | int64 | uint64](name string) typeCase[T] {
	return typeCase[T]{
		name: name,
		ops:  []Op{Sum, Prod, Max, Min},
		draw: func(rng *rand.Rand, op Op, _ int) T {
			switch rng.IntN(8) {
			case 0:
				return T(0) - 1 // -1, or the maximum of an unsigned type
			case 1:
				var z T
				return z
			}
			return T(rng.Uint64())
		},
		ref: func(op Op, vals []T) T {
			acc := vals[0]
			for _, v := range vals[1:] {
				switch op {
				case Sum:
					acc += v
				case Prod:
					acc *= v
				case Max:
					if v > acc {
						acc = v
					}
				case Min:
					if v < acc {
						acc = v
					}
				}
			}
			return acc
		},
	}
}

// halfCase: small integers, whose sums and products over up to 5 ranks are
// exact in both 16-bit types, so every strategy's result is exact whatever
// the order and the number of rounding steps; Mean rounds the exact sum's
// quotient to float32 and then to the 16-bit type.
func halfCase[T Float16 | BFloat16](name string, from func(float32) T, to func(T) float32) typeCase[T] {
	return narrowCase(name, from, to, 8)
}

// fp8Case: as halfCase, the sums' inputs in [-m, m] with m*5 within the
// integers the format holds exactly (E4M3: 16, E5M2: 8), so that every
// partial sum is exact; products of [-2, 2] over 5 ranks are too.
func fp8Case[T Float8E4M3 | Float8E5M2](name string, from func(float32) T, to func(T) float32) typeCase[T] {
	m := 3
	if _, ok := any(*new(T)).(Float8E5M2); ok {
		m = 1
	}
	return narrowCase(name, from, to, m)
}

// narrowCase is halfCase and fp8Case: sums of inputs in [-m, m].
func narrowCase[T Float16 | BFloat16 | Float8E4M3 | Float8E5M2](name string, from func(float32) T, to func(T) float32, m int) typeCase[T] {
	return typeCase[T]{
		name: name,
		ops:  []Op{Sum, Prod, Max, Min, Mean},
		draw: func(rng *rand.Rand, op Op, _ int) T {
			if op == Prod {
				return from(float32(rng.IntN(5) - 2))
			}
			return from(float32(rng.IntN(2*m+1) - m))
		},
		ref: func(op Op, vals []T) T {
			acc := float64(to(vals[0]))
			for _, v := range vals[1:] {
				x := float64(to(v))
				switch op {
				case Sum, Mean:
					acc += x
				case Prod:
					acc *= x
				case Max:
					acc = math.Max(acc, x)
				case Min:
					acc = math.Min(acc, x)
				}
			}
			if op == Mean {
				acc = float64(float32(acc / float64(len(vals))))
			}
			return from(float32(acc))
		},
	}
}

// TestElementTypes: every integer, 16-bit and 8-bit float type through every collective
// that reduces or moves data, at random sizes, ops and strategies on 1 to 5
// ranks, against the reference (exact), on the host backend and on Vulkan
// (kernels for every type where the device has the storage features they
// need, else the exact host paths).
func TestElementTypes(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, bk := range backendsUnderTest(t) {
		rng := rand.New(rand.NewPCG(seed, 7))
		for _, ranks := range []int{1, 2, 3, 5} {
			if bk != "host" && !fullRun() && ranks == 5 {
				continue // lavapipe: up to 3 ranks (full runs: 5 too)
			}
			g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 1024; o.Config.LocalGroupSize = 2 })
			t.Run(fmt.Sprintf("%s/%d", bk, ranks), func(t *testing.T) {
				// lavapipe and the race run: 3 random calls a type (full
				// runs: 6, as on host).
				trials := 6
				if (bk != "host" || raceShort()) && !fullRun() {
					trials = 3
				}
				runTypeCase(t, g, rng, trials, intCase[int32]("int32"))
				runTypeCase(t, g, rng, trials, intCase[uint32]("uint32"))
				runTypeCase(t, g, rng, trials, intCase[int64]("int64"))
				runTypeCase(t, g, rng, trials, intCase[uint64]("uint64"))
				runTypeCase(t, g, rng, trials, intCase[int8]("int8"))
				runTypeCase(t, g, rng, trials, intCase[uint8]("uint8"))
				runTypeCase(t, g, rng, trials, intCase[int16]("int16"))
				runTypeCase(t, g, rng, trials, intCase[uint16]("uint16"))
				runTypeCase(t, g, rng, trials, halfCase("half", Float16From, Float16.Float32))
				runTypeCase(t, g, rng, trials, halfCase("bfloat16", BFloat16From, BFloat16.Float32))
				runTypeCase(t, g, rng, trials, fp8Case("f8e4m3", Float8E4M3From, Float8E4M3.Float32))
				runTypeCase(t, g, rng, trials, fp8Case("f8e5m2", Float8E5M2From, Float8E5M2.Float32))
			})
		}
	}
}

var typeStrategies = []Strategy{Auto, Direct, Pipelined, Ring, Tree, Hierarchical, Host}

func runTypeCase[T Elem](t *testing.T, g *Group, rng *rand.Rand, trials int, tc typeCase[T]) {
	t.Helper()
	N := g.Size()
	for trial := 0; trial < trials; trial++ {
		n := typeSizes[rng.IntN(len(typeSizes))]
		op := tc.ops[rng.IntN(len(tc.ops))]
		s := typeStrategies[rng.IntN(len(typeStrategies))]
		in := make([][]T, N)
		for r := range in {
			in[r] = make([]T, N*n)
			for i := range in[r] {
				in[r][i] = tc.draw(rng, op, N)
			}
		}
		want := make([]T, N*n)
		vals := make([]T, N)
		for i := range want {
			for r := range in {
				vals[r] = in[r][i]
			}
			want[i] = tc.ref(op, vals)
		}
		where := fmt.Sprintf("%s n=%d op=%s", tc.name, n, op)
		same := func(what string, r int, got, want []T) {
			t.Helper()
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s %s: rank %d element %d: got %v, want %v", where, what, r, i, got[i], want[i])
				}
			}
		}
		// AllReduce, out of place, with the drawn strategy.
		out := make([][]T, N)
		noErrors(t, onRanks(g, func(c *Comm) error {
			out[c.Rank()] = make([]T, N*n)
			return AllReduceWith(context.Background(), c, in[c.Rank()], out[c.Rank()], op, s)
		}))
		for r := range out {
			same("AllReduce/"+s.String(), r, out[r], want)
		}
		// ReduceScatter: block r of the reduction at rank r.
		noErrors(t, onRanks(g, func(c *Comm) error {
			out[c.Rank()] = make([]T, n)
			return ReduceScatter(context.Background(), c, in[c.Rank()], out[c.Rank()], op)
		}))
		for r := range out {
			same("ReduceScatter", r, out[r], want[r*n:(r+1)*n])
		}
		// Reduce to a drawn root.
		root := rng.IntN(N)
		noErrors(t, onRanks(g, func(c *Comm) error {
			out[c.Rank()] = make([]T, N*n)
			return Reduce(context.Background(), c, in[c.Rank()], out[c.Rank()], op, root)
		}))
		same("Reduce", root, out[root], want)
		// Data movement, bit for bit: AllGather, Broadcast, AllToAll.
		noErrors(t, onRanks(g, func(c *Comm) error {
			out[c.Rank()] = make([]T, N*n)
			return AllGather(context.Background(), c, in[c.Rank()][:n], out[c.Rank()])
		}))
		for r := range out {
			for q := 0; q < N; q++ {
				same("AllGather", r, out[r][q*n:(q+1)*n], in[q][:n])
			}
		}
		noErrors(t, onRanks(g, func(c *Comm) error {
			out[c.Rank()] = slices.Clone(in[c.Rank()])
			return Broadcast(context.Background(), c, out[c.Rank()], root)
		}))
		for r := range out {
			same("Broadcast", r, out[r], in[root])
		}
		noErrors(t, onRanks(g, func(c *Comm) error {
			out[c.Rank()] = make([]T, N*n)
			return AllToAll(context.Background(), c, in[c.Rank()], out[c.Rank()])
		}))
		for r := range out {
			for q := 0; q < N; q++ {
				same("AllToAll", r, out[r][q*n:(q+1)*n], in[q][r*n:(r+1)*n])
			}
		}
	}
}

// TestElementTypeErrors: an integer-only op of a float type is an invalid
// argument on every rank (the group stays usable), Mean of an integer type
// the wrapped sum divided by N; a device-resident all-reduce of a type the
// device has no kernels for is unsupported.
func TestElementTypeErrors(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 2)
		errs := onRanks(g, func(c *Comm) error {
			return AllReduce(context.Background(), c, make([]float32, 10), BXor)
		})
		for r, err := range errs {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%s: rank %d: BXor of float32: %v, want ErrInvalidArgument", bk, r, err)
			}
		}
		data := [][]uint8{{1, 200, 7}, {2, 100, 250}}
		noErrors(t, onRanks(g, func(c *Comm) error {
			return AllReduce(context.Background(), c, data[c.Rank()], Sum)
		}))
		if want := []uint8{3, 44, 1}; !slices.Equal(data[0], want) || !slices.Equal(data[1], want) {
			t.Fatalf("%s: uint8 sum after a rejected call: %v %v, want %v (wrapping)", bk, data[0], data[1], want)
		}
		means := [][]int32{{-7, 3, math.MaxInt32}, {0, 4, 1}}
		noErrors(t, onRanks(g, func(c *Comm) error {
			return AllReduce(context.Background(), c, means[c.Rank()], Mean)
		}))
		if want := []int32{-3, 3, math.MinInt32 / 2}; !slices.Equal(means[0], want) || !slices.Equal(means[1], want) {
			t.Fatalf("%s: int32 mean: %v %v, want %v (wrapped sum / 2, truncated)", bk, means[0], means[1], want)
		}
		if g.kernels.Has(backend.I64) {
			// Devices with int64 kernels (the host backend, Vulkan with
			// shaderInt64): tensors too.
			got := make([][]int64, 2)
			noErrors(t, onRanks(g, func(c *Comm) error {
				tn, err := NewTensor[int64](c, 3)
				if err != nil {
					return err
				}
				defer tn.Close()
				in := []int64{math.MaxInt64, int64(c.Rank()) - 5, 1 << 40}
				if err := tn.Upload(in); err != nil {
					return err
				}
				if err := AllReduceTensor(context.Background(), c, tn, Sum, Auto); err != nil {
					return err
				}
				got[c.Rank()] = make([]int64, 3)
				return tn.Download(got[c.Rank()])
			}))
			want := []int64{-2, -9, 1 << 41} // 2 x MaxInt64 wraps to -2
			for r := range got {
				if !slices.Equal(got[r], want) {
					t.Fatalf("%s: int64 tensor all-reduce: rank %d got %v, want %v", bk, r, got[r], want)
				}
			}
			continue
		}
		errs = onRanks(g, func(c *Comm) error {
			tn, err := NewTensor[int64](c, 8)
			if err != nil {
				return err
			}
			defer tn.Close()
			return AllReduceTensor(context.Background(), c, tn, Sum, Auto)
		})
		for r, err := range errs {
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("rank %d: int64 tensor all-reduce without int64 kernels: %v, want ErrUnsupported", r, err)
			}
		}
	}
	// A tensor all-reduce of a type without kernels is ErrUnsupported on
	// every rank (f64 with the kernels turned off).
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 2, func(o *Options) { o.DisableFloat64 = true })
		errs := onRanks(g, func(c *Comm) error {
			tn, err := NewTensor[float64](c, 8)
			if err != nil {
				return err
			}
			defer tn.Close()
			return AllReduceTensor(context.Background(), c, tn, Sum, Auto)
		})
		for r, err := range errs {
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("%s: rank %d: f64 tensor all-reduce without f64 kernels: %v, want ErrUnsupported", bk, r, err)
			}
		}
	}
}

// TestHalfSpecials: NaN and Inf propagate and a sum beyond the type's range
// overflows to Inf, on every strategy (the results do not depend on the
// order or the rounding steps).
func TestHalfSpecials(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3, func(o *Options) { o.ChunkBytes = 1024 })
		for _, s := range typeStrategies {
			in := [][]float32{
				{1, nan, inf, 65504, -inf, 3e38, 2},
				{2, 1, 1, 65504, -1, 3e38, nan},
				{3, 1, 2, 1, 1, 3e38, 2},
			}
			wantHalf := []float32{6, nan, inf, inf, -inf, inf, nan}
			wantBF := []float32{6, nan, inf, 131072, -inf, inf, nan}
			checkSpecial(t, g, s, bk+"/half", in, wantHalf, Float16From, Float16.Float32)
			checkSpecial(t, g, s, bk+"/bfloat16", in, wantBF, BFloat16From, BFloat16.Float32)
		}
	}
}

func checkSpecial[T Float16 | BFloat16](t *testing.T, g *Group, s Strategy, where string, in [][]float32, want []float32, from func(float32) T, to func(T) float32) {
	t.Helper()
	data := make([][]T, len(in))
	for r := range in {
		data[r] = make([]T, len(in[r]))
		for i, v := range in[r] {
			data[r][i] = from(v)
		}
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		return AllReduceWith(context.Background(), c, data[c.Rank()], data[c.Rank()], Sum, s)
	}))
	for r := range data {
		for i, w := range want {
			got := to(data[r][i])
			if w != w {
				if got == got {
					t.Fatalf("%s %s: rank %d element %d: got %v, want NaN", where, s, r, i, got)
				}
				continue
			}
			if got != w {
				t.Fatalf("%s %s: rank %d element %d: got %v, want %v", where, s, r, i, got, w)
			}
		}
	}
}
