package collective

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var subnormalSeedFlag = flag.Uint64("subnormal.seed", 0, "seed of TestSubnormalAllReduce (0: a random one, logged)")

// TestSubnormalAllReduce: all-reduces of float32, float16 and bfloat16
// inputs that are subnormal, alone, mixed with normals and with signed
// zeros, give the host backend's bits on every backend, bit for bit, under
// every strategy (Auto included, also at a size where on a GPU it reduces
// on the device) and on every data path (AllReduceWith into another slice,
// AllReduce in place, AllReduceTensor):
//   - deterministic mode, every op (Mean and Prod included): the
//     rank-order reduction (rankOrderRef, the host's arithmetic);
//   - the default mode, with data whose every reduction is exact in any
//     order (Sum and Mean of subnormals below an eighth of the least normal
//     and signed zeros; Max and Min of those mixed with normals): the same
//     reference.
//
// Each backend's results are also compared with the host backend's for the
// same call. A device that flushes subnormals to zero, in inputs or results,
// fails (the data makes many results subnormal, and the test checks that a
// flushing reduction would get them wrong). A failure names the seed;
// -subnormal.seed=S repeats it. On GPU backends the default run takes half
// the mode x type pairs (the default mode's float32 and bfloat16,
// deterministic float16; GOCOLL_TEST_FULL: all), the host backend all of
// them.
func TestSubnormalAllReduce(t *testing.T) {
	arithmetic(t)
	seed := *subnormalSeedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) & (1<<40 - 1)
	}
	t.Logf("seed %d (repeat with -subnormal.seed=%d)", seed, seed)
	ranksList := []int{3}
	if fullRun() {
		ranksList = []int{2, 3, 5}
	}
	hostGot := map[string][]uint64{}
	for _, bk := range backendsUnderTest(t) {
		for _, ranks := range ranksList {
			for _, det := range []bool{true, false} {
				g := openGroup(t, bk, ranks, func(o *Options) { o.Config.Deterministic = det })
				for ci, ct := range []confType{tF32, tF16, tBF16} {
					if bk != "host" && !fullRun() && (ci%2 == 0) == det {
						continue
					}
					name := fmt.Sprintf("%s/ranks=%d/deterministic=%v/%v", bk, ranks, det, ct)
					t.Run(name, func(t *testing.T) {
						switch ct {
						case tF32:
							subnormalCase[float32](t, g, bk, ct, det, seed, hostGot, name)
						case tF16:
							subnormalCase[Float16](t, g, bk, ct, det, seed, hostGot, name)
						case tBF16:
							subnormalCase[BFloat16](t, g, bk, ct, det, seed, hostGot, name)
						}
					})
				}
			}
		}
	}
}

func subB2U(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// subnormalLarge is a length at which Auto's cost model reduces on a GPU
// (far past where it picks the CPU): 4 Mi+3 elements; 256 Ki+3 on the host
// backend and a CPU driver, slow enough per byte.
func subnormalLarge(g *Group) int {
	if g.infos[0].Backend == "host" || g.infos[0].Type == "cpu" {
		return 1<<18 + 3
	}
	return 1<<22 + 3
}

// subnormalCase runs the calls of TestSubnormalAllReduce of one type on g.
// hostGot holds the host backend's results by call (the host runs first,
// on the same data: each call's inputs depend on the seed and the call).
func subnormalCase[T float32 | Float16 | BFloat16](t *testing.T, g *Group, bk string, ct confType, det bool, seed uint64, hostGot map[string][]uint64, name string) {
	ctx := context.Background()
	N := g.Size()
	ops := []Op{Sum, Mean, Max, Min, Prod}
	if !det {
		ops = []Op{Sum, Mean, Max, Min}
	}
	type call struct {
		path string
		s    Strategy
		n    int
	}
	var calls []call
	for _, n := range []int{7, 4099} {
		for _, s := range typeStrategies {
			calls = append(calls, call{"into", s, n}, call{"tensor", s, n})
		}
	}
	large := subnormalLarge(g)
	calls = append(calls, call{"in-place", Auto, 4099}, call{"into", Auto, large}, call{"tensor", Auto, large})
	var results, subnormal, flushedDiffer int
	for _, op := range ops {
		// One data set per op and length, shared by the calls.
		data := map[int][][]uint64{}
		want := map[int][]uint64{}
		for _, c := range calls {
			if _, ok := data[c.n]; ok {
				continue
			}
			// Drawn from the seed and the call's parameters alone, so that
			// every backend gets the same data for the same call, whatever
			// lengths it runs.
			rng := rand.New(rand.NewPCG(seed, uint64(N)<<40|subB2U(det)<<39|uint64(ct)<<32|uint64(op)<<28|uint64(c.n)))
			in := make([][]uint64, N)
			for r := range in {
				in[r] = make([]uint64, c.n)
				for i := range in[r] {
					in[r][i] = drawSubnormalBits(ct, rng, !det && (op == Sum || op == Mean))
				}
			}
			data[c.n] = in
			w := make([]uint64, c.n)
			vals := make([]uint64, N)
			for i := range w {
				for r := range vals {
					vals[r] = in[r][i]
				}
				w[i] = rankOrderRef(ct, op, vals)
				results++
				if subnormalBits(ct, w[i]) {
					subnormal++
				}
				if flushedRankOrder(ct, op, vals) != w[i] {
					flushedDiffer++
				}
			}
			want[c.n] = w
		}
		for _, c := range calls {
			in := data[c.n]
			send := make([][]T, N)
			recv := make([][]T, N)
			for r := range send {
				send[r] = make([]T, c.n)
				recv[r] = make([]T, c.n)
				for i, v := range in[r] {
					send[r][i] = subFromBits[T](v)
				}
			}
			before := g.devs[0].Counters().Snapshot()
			noErrors(t, onRanks(g, func(cm *Comm) error {
				r := cm.Rank()
				switch c.path {
				case "into":
					return AllReduceWith(ctx, cm, send[r], recv[r], op, c.s)
				case "in-place":
					copy(recv[r], send[r])
					return AllReduce(ctx, cm, recv[r], op)
				}
				tt, err := NewTensor[T](cm, c.n)
				if err != nil {
					return err
				}
				defer tt.Close()
				if err := tt.Upload(send[r]); err != nil {
					return err
				}
				if err := AllReduceTensor(ctx, cm, tt, op, c.s); err != nil {
					return err
				}
				return tt.Download(recv[r])
			}))
			if d := g.devs[0].Counters().Snapshot().Sub(before); bk != "host" && c.n == large && c.path == "into" {
				// Auto on a GPU reduces this size on the device; on a CPU
				// driver (lavapipe) its cost model may pick the CPU.
				switch {
				case d.Dispatches > 0:
					t.Logf("%s %v %s %v n=%d: %d dispatches", name, op, c.path, c.s, c.n, d.Dispatches)
				case g.infos[0].Type != "cpu":
					t.Errorf("%s %v %s %v n=%d: no kernel ran on the %s device", name, op, c.path, c.s, c.n, g.infos[0].Type)
				}
			}
			key := fmt.Sprintf("ranks=%d/det=%v/%v/%v/%s/%v/n=%d", N, det, ct, op, c.path, c.s, c.n)
			host, haveHost := hostGot[key]
			if bk == "host" {
				hostGot[key] = subBitsOf(recv[0])
			}
			bad := 0
			for r := range N {
				for i, v := range recv[r] {
					got := subToBits(v)
					w := want[c.n][i]
					if got == w && (!haveHost || host[i] == got) {
						continue
					}
					if bad++; bad <= 5 {
						args := make([]string, N)
						for q := range N {
							args[q] = ct.format(in[q][i])
						}
						hostSays := "not run"
						if haveHost {
							hostSays = ct.format(host[i])
						}
						t.Errorf("%s %v %s %v n=%d rank %d element %d: got %s, want %s (host backend: %s), from %v", name, op, c.path, c.s, c.n, r, i,
							ct.format(got), ct.format(w), hostSays, args)
					}
				}
			}
			if bad > 5 {
				t.Errorf("%s %v %s %v n=%d: %d elements wrong in all", name, op, c.path, c.s, c.n, bad)
			}
		}
	}
	fs, ss := float64(flushedDiffer)/float64(results), float64(subnormal)/float64(results)
	t.Logf("%d results: %.1f%% subnormal, %.1f%% wrong where float32 subnormals are flushed", results, 100*ss, 100*fs)
	if ss < 0.05 || ct != tF16 && fs < 0.1 {
		t.Errorf("the data does not test subnormals: %.1f%% of the results subnormal, %.1f%% wrong where flushed", 100*ss, 100*fs)
	}
}

// drawSubnormalBits returns the bits of a random value of the float type ct:
// subnormals (a third of them the least few), signed zeros, normals within
// a factor 8 of the least normal, values around 1, and for float32 values
// whose products of two are subnormal. With exact, only subnormals below an
// eighth of the least normal and signed zeros: any sum of up to 8 of them
// is exact, in any order.
func drawSubnormalBits(ct confType, rng *rand.Rand, exact bool) uint64 {
	mant, bias := 23, 127
	switch ct {
	case tF16:
		mant, bias = 10, 15
	case tBF16:
		mant, bias = 7, 127
	}
	sign := uint64(rng.IntN(2)) << (8*ct.size() - 1)
	sub := func(bits int) uint64 {
		if rng.IntN(3) == 0 {
			return sign | uint64(1+rng.IntN(4))
		}
		return sign | 1 + rng.Uint64N(1<<bits-1)
	}
	if exact {
		if rng.IntN(4) == 0 {
			return sign
		}
		return sub(mant - 3)
	}
	frac := func() uint64 { return rng.Uint64N(1 << mant) }
	switch rng.IntN(6) {
	case 0, 1:
		return sub(mant)
	case 2:
		return sign
	case 3:
		return sign | uint64(1+rng.IntN(3))<<mant | frac()
	case 4:
		if ct == tF32 {
			return sign | uint64(bias-73+rng.IntN(15))<<mant | frac()
		}
	}
	return sign | uint64(bias-4+rng.IntN(9))<<mant | frac()
}

// subnormalBits reports whether bits v of the float type ct are subnormal.
func subnormalBits(ct confType, v uint64) bool {
	mant := map[confType]uint{tF32: 23, tF16: 10, tBF16: 7}[ct]
	abs := v &^ (1 << (8*ct.size() - 1))
	return abs != 0 && abs < 1<<mant
}

// flushedRankOrder is rankOrderRef on a device that flushes float32
// subnormal inputs and results to zeros of their sign.
func flushedRankOrder(ct confType, op Op, vals []uint64) uint64 {
	ftz := func(x float32) float32 {
		if x != 0 && math.Abs(float64(x)) < 0x1p-126 {
			return float32(math.Copysign(0, float64(x)))
		}
		return x
	}
	acc := ftz(float32(ct.float(vals[0])))
	for _, v := range vals[1:] {
		x := ftz(float32(ct.float(v)))
		switch op {
		case Sum, Mean:
			acc = ftz(acc + x)
		case Prod:
			acc = ftz(acc * x)
		case Max:
			acc = float32(ieeeMax(float64(acc), float64(x)))
		default:
			acc = float32(ieeeMin(float64(acc), float64(x)))
		}
	}
	if op == Mean {
		acc = ftz(float32(float64(acc) / float64(len(vals))))
	}
	return ct.encode(float64(acc))
}

func subFromBits[T float32 | Float16 | BFloat16](v uint64) T {
	var z T
	switch any(z).(type) {
	case float32:
		return any(math.Float32frombits(uint32(v))).(T)
	}
	return T(v)
}

func subToBits[T float32 | Float16 | BFloat16](v T) uint64 {
	switch x := any(v).(type) {
	case float32:
		return uint64(math.Float32bits(x))
	case Float16:
		return uint64(x)
	case BFloat16:
		return uint64(x)
	}
	panic("unreachable")
}

func subBitsOf[T float32 | Float16 | BFloat16](v []T) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = subToBits(x)
	}
	return out
}
