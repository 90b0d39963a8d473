//go:build cgo && !novulkan

package vulkan

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/kernels"
)

// vecSpecial are the inputs whose handling the 16-byte kernels must keep
// per component: NaNs (with payloads and both signs), infinities and zeros.
var vecSpecial = []float64{math.NaN(), -math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1, -1}

func vecValue[T float](rng *rand.Rand) T {
	if rng.IntN(4) == 0 {
		v := vecSpecial[rng.IntN(len(vecSpecial))]
		if v != v && rng.IntN(2) == 0 {
			// A NaN with another payload.
			var z T
			if any(z) == any(float32(0)) {
				return T(math.Float32frombits(0x7fc00000 | uint32(rng.IntN(1<<22))))
			}
			return T(math.Float64frombits(0xfff8000000000000 | uint64(rng.Int64N(1<<51))))
		}
		return T(v)
	}
	return T(rng.NormFloat64() * math.Exp2(float64(rng.IntN(40)-20)))
}

// vecRun runs do twice, with the 16-byte kernels allowed and with the
// scalar kernels only, into dstV and dstS, and returns how many dispatches
// each took and how many of the first were 16-byte ones.
func vecRun(t *testing.T, d *device, do func(dst backend.Buffer) error, dstV, dstS backend.Buffer) (vec, scalar, vecDispatches int64) {
	t.Helper()
	s := d.Stream()
	before, vb := d.Counters().Snapshot(), d.VecDispatches()
	if err := do(dstV); err != nil {
		t.Fatal(err)
	}
	wait(t, s)
	mid, vm := d.Counters().Snapshot(), d.VecDispatches()
	d.ScalarOnly(true)
	err := do(dstS)
	d.ScalarOnly(false)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, s)
	if d.VecDispatches() != vm {
		t.Fatal("a 16-byte kernel ran with the 16-byte kernels off")
	}
	return mid.Sub(before).Dispatches, d.Counters().Snapshot().Sub(mid).Dispatches, vm - vb
}

// sameBytes fails t unless the n elements at off in a and b are the same
// bit for bit, or both NaN: a GPU need not preserve NaN payloads (Vulkan
// leaves them undefined), and on NVIDIA the two kernels' NaN bits differ.
func sameBytes[T float](t *testing.T, what string, a, b backend.Buffer, off, n int) {
	t.Helper()
	ga, gb := get[T](t, a, off, n), get[T](t, b, off, n)
	if !bytes.Equal(asBytes(ga), asBytes(gb)) {
		for i := range ga {
			if ga[i] != ga[i] && gb[i] != gb[i] {
				continue
			}
			if !bytes.Equal(asBytes(ga[i:i+1]), asBytes(gb[i:i+1])) {
				t.Fatalf("%s: element %d: 16-byte kernel %v (%x), scalar %v (%x)", what, i, ga[i], asBytes(ga[i:i+1]), gb[i], asBytes(gb[i:i+1]))
			}
		}
	}
}

// TestVecMatchesScalar: the 16-byte reduce and scale kernels give the scalar
// kernels' results bit for bit (NaN payloads aside), for every op x dtype x
// source count, with NaNs, infinities and signed zeros, and run exactly when
// every region is 16-byte aligned and whole vectors long; otherwise the
// scalar kernel runs alone. Both take the same number of dispatches.
func TestVecMatchesScalar(t *testing.T) {
	arithmetic(t)
	d := openDevice(t, backend.OpenOptions{})
	t.Run("f32", func(t *testing.T) { vecMatches[float32](t, d) })
	t.Run("f64", func(t *testing.T) {
		if !d.Info().Float64 {
			t.Skip(d.Info().Float64Reason)
		}
		vecMatches[float64](t, d)
	})
}

func vecMatches[T float](t *testing.T, d *device) {
	const maxK, pad = 9, 16
	es := int(dtypeOf[T]().Size())
	vw := 16 / es
	sizes := []int{4, 8, 1024, 65536 + 4, 1 << 20, 1, 3, 5, 1023, 65537}
	maxN := sizes[4]
	rng := rand.New(rand.NewPCG(5, 6))
	srcs := sources(maxK, maxN+pad, func(i, j int) T { return vecValue[T](rng) })
	bufs := make([]backend.Buffer, maxK)
	for i := range bufs {
		mem := backend.DeviceLocal
		if i%2 == 1 {
			mem = backend.HostVisible
		}
		bufs[i] = alloc(t, d, (maxN+pad)*es, mem)
		put(t, bufs[i], 0, srcs[i])
	}
	dstV := alloc(t, d, (maxN+pad)*es, backend.HostVisible)
	dstS := alloc(t, d, (maxN+pad)*es, backend.DeviceLocal)
	s := d.Stream()
	// Element offsets: aligned ones (different multiples of 16 bytes per
	// region), all misaligned, or only the last source or dst misaligned.
	layouts := []struct {
		name    string
		src     func(i int) int
		dst     int
		aligned bool
	}{
		{"aligned", func(i int) int { return (i % 3) * vw }, 2 * vw, true},
		{"misaligned", func(i int) int { return i%vw + 1 }, 1, false},
		{"last src misaligned", func(i int) int {
			if i == maxK-1 {
				return 1
			}
			return vw
		}, 0, false},
		{"dst misaligned", func(i int) int { return 0 }, vw - 1, false},
	}
	total := int64(0)
	for _, n := range sizes {
		for _, lay := range layouts {
			whole := n%vw == 0
			for oi, op := range ops {
				for _, k := range []int{1, 2, 3, 8, 9} {
					sc := 1.0
					if (oi+k)%2 == 1 {
						sc = -0.75
					}
					regs := make([]backend.Region, k)
					for i := range regs {
						regs[i] = backend.Region{Buf: bufs[i], Off: lay.src(i) * es, Len: n * es}
					}
					what := fmt.Sprintf("n=%d %s %v k=%d scale %v", n, lay.name, op, k, sc)
					if lay.name == "last src misaligned" && k < maxK {
						continue // same as aligned
					}
					v, sd, vd := vecRun(t, d, func(dst backend.Buffer) error {
						return s.Reduce(op, dtypeOf[T](), backend.Region{Buf: dst, Off: lay.dst * es, Len: n * es}, regs, sc)
					}, dstV, dstS)
					sameBytes[T](t, what, dstV, dstS, lay.dst*es, n)
					// Aligned regions with a tail split each pass: the
					// 16-byte kernel on the body, one more dispatch of the
					// scalar kernel on the tail.
					split := !whole && n >= vw
					passes := int64(1)
					if k > kernels.MaxSources {
						passes = 2
					}
					switch {
					case lay.name == "last src misaligned":
						// The first pass reads aligned sources only; the
						// second, with the misaligned one, runs scalar.
						if n < vw {
							if v != sd || vd != 0 {
								t.Errorf("%s: %d dispatches (%d 16-byte), scalar kernel %d: want none 16-byte (no whole vector)", what, v, vd, sd)
							}
							break
						}
						extra := int64(0)
						if split {
							extra = 1
						}
						if v != sd+extra || vd == 0 || vd == v {
							t.Errorf("%s: %d dispatches (%d 16-byte), scalar kernel %d: want the first pass's body 16-byte", what, v, vd, sd)
						}
					case lay.aligned && whole:
						if vd != v || v == 0 || v != sd {
							t.Errorf("%s: %d of %d dispatches 16-byte (scalar kernel %d), want all", what, vd, v, sd)
						}
					case lay.aligned && split:
						if v != sd+passes || vd != v-passes {
							t.Errorf("%s: %d dispatches (%d 16-byte), scalar kernel %d: want %d tails", what, v, vd, sd, passes)
						}
					case vd != 0 || v != sd:
						t.Errorf("%s: %d of %d dispatches 16-byte (scalar kernel %d), want none", what, vd, v, sd)
					}
					total += vd
					if n <= 65537 && oi%2 == 0 && k >= 8 {
						// And the Go reference (NaN payloads aside).
						in := make([][]T, k)
						for i := range in {
							in[i] = srcs[i][lay.src(i) : lay.src(i)+n]
						}
						compare(t, what, get[T](t, dstV, lay.dst*es, n), reduceRef(op, in, sc))
					}
				}
			}
			// Scale out of place and in place, copy and scaling.
			for _, sc := range []float64{1, 0.5, -3} {
				src := backend.Region{Buf: bufs[1], Off: lay.src(1) * es, Len: n * es}
				what := fmt.Sprintf("scale n=%d %s by %v", n, lay.name, sc)
				v, sd, vd := vecRun(t, d, func(dst backend.Buffer) error {
					return s.Scale(dtypeOf[T](), backend.Region{Buf: dst, Off: lay.dst * es, Len: n * es}, src, sc)
				}, dstV, dstS)
				sameBytes[T](t, what, dstV, dstS, lay.dst*es, n)
				checkScale := func(what string, v, sd, vd int64, aligned bool) {
					t.Helper()
					switch {
					case aligned && whole:
						if v != sd || vd != v {
							t.Errorf("%s: %d dispatches (%d 16-byte), scalar kernel %d; want all 16-byte", what, v, vd, sd)
						}
					case aligned && n >= vw:
						if v != sd+1 || vd != v-1 {
							t.Errorf("%s: %d dispatches (%d 16-byte), scalar kernel %d; want the body 16-byte and one tail", what, v, vd, sd)
						}
					case v != sd || vd != 0:
						t.Errorf("%s: %d dispatches (%d 16-byte), scalar kernel %d; want none 16-byte", what, v, vd, sd)
					}
				}
				checkScale(what, v, sd, vd, lay.src(1)%vw == 0 && lay.dst%vw == 0)
				total += vd
				ref := make([]T, n)
				for i := range ref {
					ref[i] = srcs[1][lay.src(1)+i]
					if sc != 1 {
						ref[i] *= T(sc)
					}
				}
				compare(t, what, get[T](t, dstV, lay.dst*es, n), ref)

				what = fmt.Sprintf("in-place scale n=%d %s by %v", n, lay.name, sc)
				in := srcs[2][:n]
				v, sd, vd = vecRun(t, d, func(dst backend.Buffer) error {
					put(t, dst, lay.dst*es, in)
					r := backend.Region{Buf: dst, Off: lay.dst * es, Len: n * es}
					return s.Scale(dtypeOf[T](), r, r, sc)
				}, dstV, dstS)
				sameBytes[T](t, what, dstV, dstS, lay.dst*es, n)
				checkScale(what, v, sd, vd, lay.dst%vw == 0)
				total += vd
			}
		}
	}
	if total == 0 {
		t.Fatal("the 16-byte kernels never ran")
	}
	t.Logf("%d dispatches of 16-byte kernels", total)
}

// TestVecSplit: under a small binding limit the 16-byte kernels split at the
// same bytes as the scalar ones (a limit that is a multiple of 16), or do
// not run (one that is not), and give the same results.
func TestVecSplit(t *testing.T) {
	for _, limit := range []int64{4 << 10, 4<<10 + 4} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			d := openDevice(t, backend.OpenOptions{MaxBindingBytes: limit})
			const n, k = 10000 + 4, 9
			rng := rand.New(rand.NewPCG(7, 8))
			regs := make([]backend.Region, k)
			for i := range regs {
				off := 16 * (i % 5)
				regs[i] = backend.Region{Buf: alloc(t, d, n*4+off, backend.DeviceLocal), Off: off, Len: n * 4}
				v := make([]float32, n)
				for j := range v {
					v[j] = vecValue[float32](rng)
				}
				put(t, regs[i].Buf, off, v)
			}
			dstV, dstS := alloc(t, d, n*4+32, backend.HostVisible), alloc(t, d, n*4+32, backend.HostVisible)
			s := d.Stream()
			for _, op := range ops {
				for _, kk := range []int{2, 9} {
					v, sd, vd := vecRun(t, d, func(dst backend.Buffer) error {
						return s.Reduce(op, backend.F32, backend.Region{Buf: dst, Off: 32, Len: n * 4}, regs[:kk], 0.5)
					}, dstV, dstS)
					what := fmt.Sprintf("%v k=%d limit %d", op, kk, limit)
					sameBytes[float32](t, what, dstV, dstS, 32, n)
					if v != sd || v < (n*4)/limit {
						t.Errorf("%s: %d dispatches, scalar %d", what, v, sd)
					}
					if want := limit%16 == 0; (vd == v) != want {
						t.Errorf("%s: %d of %d dispatches 16-byte, want all: %v", what, vd, v, want)
					}
				}
			}
		})
	}
}

// TestVecSteadyState: the 16-byte path allocates nothing and creates no
// Vulkan object once its pipelines exist.
func TestVecSteadyState(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{MaxBindingBytes: 64 << 10})
	const n = 50000
	regs := make([]backend.Region, 10)
	for i := range regs {
		regs[i] = backend.Region{Buf: alloc(t, d, n*4+16, backend.HostVisible), Off: 16, Len: n * 4}
	}
	dst := backend.Region{Buf: alloc(t, d, n*4, backend.DeviceLocal), Len: n * 4}
	s := d.Stream()
	ctx := context.Background()
	var runErr error
	run := func() {
		for _, k := range []int{2, 10} {
			if err := s.Reduce(backend.Sum, backend.F32, dst, regs[:k], 0.5); err != nil {
				runErr = err
				return
			}
		}
		if err := s.Scale(backend.F32, dst, dst, 2); err != nil {
			runErr = err
			return
		}
		f, err := s.Submit()
		if err == nil {
			err = f.Wait(ctx)
		}
		if err != nil {
			runErr = err
		}
	}
	run()
	before, vb := d.Counters().Snapshot(), d.VecDispatches()
	allocs := testing.AllocsPerRun(20, run)
	if runErr != nil {
		t.Fatal(runErr)
	}
	after := d.Counters().Snapshot().Sub(before)
	if allocs != 0 && !asanEnabled {
		t.Errorf("%v Go allocations per iteration, want 0", allocs)
	}
	if after.ObjectsCreated != 0 {
		t.Errorf("%d Vulkan objects created in steady state, want 0", after.ObjectsCreated)
	}
	if vd := d.VecDispatches() - vb; vd != after.Dispatches || vd == 0 {
		t.Errorf("%d of %d dispatches 16-byte, want all", vd, after.Dispatches)
	}
}
