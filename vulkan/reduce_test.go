//go:build cgo && !novulkan

package vulkan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

var ops = []backend.Op{backend.Sum, backend.Prod, backend.Max, backend.Min}

// exactValues are inputs whose sums of up to 10 terms and products of up to
// 10 factors are exact in f32 and f64.
var exactValues = []float64{-2, -1.5, -1, -0.5, 0.5, 1, 1.5, 2, 3, -3}

// sources returns k inputs of n elements, drawn by gen.
func sources[T float](k, n int, gen func(i, j int) T) [][]T {
	s := make([][]T, k)
	for i := range s {
		s[i] = make([]T, n)
		for j := range s[i] {
			s[i][j] = gen(i, j)
		}
	}
	return s
}

func TestInfo(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	in := d.Info()
	if in.Backend != "vulkan" || in.Name == "" || in.APIVersion == "" || in.Driver == "" {
		t.Errorf("Info() = %+v: missing names", in)
	}
	if in.MaxBindingBytes <= 0 || in.MaxAllocBytes <= 0 || in.MaxWorkGroupSize <= 0 || len(in.Heaps) == 0 {
		t.Errorf("Info() = %+v: missing limits", in)
	}
	// maxStorageBufferRange rounded down to whole 16-byte vectors (NVIDIA
	// reports 4 GiB - 1): shimdev.MaxBinding.
	if want := int64(d.Raw().MaxStorageBufferRange) &^ 15; in.MaxBindingBytes != want {
		t.Errorf("MaxBindingBytes = %d, want maxStorageBufferRange %d rounded down to a multiple of 16, %d", in.MaxBindingBytes, d.Raw().MaxStorageBufferRange, want)
	}
	if in.Float64 != d.Raw().ShaderFloat64 || (!in.Float64 && in.Float64Reason == "") {
		t.Errorf("Float64 = %v (%q), device shaderFloat64 = %v", in.Float64, in.Float64Reason, d.Raw().ShaderFloat64)
	}
	devs, err := Backend{}.Devices()
	if err != nil || len(devs) == 0 || devs[0].Name != in.Name {
		t.Errorf("Devices() = %v, %v", devs, err)
	}
	t.Logf("%s: %s, Vulkan %s, %s, f64 %v, binding limit %d, alignment %d, subgroup %d",
		in.Name, in.Type, in.APIVersion, in.Driver, in.Float64, in.MaxBindingBytes, d.Align(), in.SubgroupSize)
}

// TestReduceExact runs every op x dtype x source count 1..10 (more than 8
// takes several passes) x size, out of place, with inputs in device-local
// and host-visible memory and destinations at odd element offsets, against
// Go loops in the element type (bit for bit) and in float64 (exactly).
func TestReduceExact(t *testing.T) {
	arithmetic(t)
	d := openDevice(t, backend.OpenOptions{})
	t.Run("f32", func(t *testing.T) { reduceExact[float32](t, d) })
	t.Run("f64", func(t *testing.T) {
		if !d.Info().Float64 {
			t.Skip(d.Info().Float64Reason)
		}
		reduceExact[float64](t, d)
	})
}

func reduceExact[T float](t *testing.T, d *device) {
	const maxK, maxN = 10, 65537
	es := int(dtypeOf[T]().Size())
	rng := rand.New(rand.NewPCG(1, 2))
	srcs := sources(maxK, maxN, func(i, j int) T { return T(exactValues[rng.IntN(len(exactValues))]) })
	bufs := make([]backend.Buffer, maxK)
	for i := range bufs {
		mem := backend.DeviceLocal
		if i%2 == 1 {
			mem = backend.HostVisible
		}
		bufs[i] = alloc(t, d, maxN*es, mem)
		put(t, bufs[i], 0, srcs[i])
	}
	slots := len(ops) * maxK
	out := alloc(t, d, slots*maxN*es+es, backend.HostVisible)
	s := d.Stream()
	for _, n := range []int{0, 1, 255, 256, 257, maxN} {
		// Each (op, k) writes its own slot, one element past a multiple of
		// n: offsets are rarely aligned to minStorageBufferOffsetAlignment.
		for oi, op := range ops {
			for k := 1; k <= maxK; k++ {
				regs := make([]backend.Region, k)
				for i := range regs {
					regs[i] = backend.Region{Buf: bufs[i], Len: n * es}
				}
				dst := backend.Region{Buf: out, Off: ((oi*maxK+k-1)*n + 1) * es, Len: n * es}
				if err := s.Reduce(op, dtypeOf[T](), dst, regs, scaleFor(k)); err != nil {
					t.Fatalf("n=%d %v k=%d: %v", n, op, k, err)
				}
			}
		}
		wait(t, s)
		// The reference for k sources is the one for k-1 combined with
		// source k: reduce left to right incrementally, in T and in float64.
		acc, acc64 := make([]T, n), make([]float64, n)
		for oi, op := range ops {
			for k := 1; k <= maxK; k++ {
				for i := range acc {
					if k == 1 {
						acc[i], acc64[i] = srcs[0][i], float64(srcs[0][i])
					} else {
						acc[i], acc64[i] = combine(op, acc[i], srcs[k-1][i]), combine(op, acc64[i], float64(srcs[k-1][i]))
					}
				}
				sc := scaleFor(k)
				got := get[T](t, out, ((oi*maxK+k-1)*n+1)*es, n)
				what := fmt.Sprintf("n=%d %v k=%d scale %v", n, op, k, sc)
				want := acc
				if sc != 1 {
					want = make([]T, n)
					for i := range want {
						want[i] = acc[i] * T(sc)
					}
				}
				compare(t, what, got, want)
				for i := range got {
					if float64(got[i]) != acc64[i]*sc {
						t.Fatalf("%s: element %d = %v, exact %v", what, i, got[i], acc64[i]*sc)
					}
				}
			}
		}
	}
}

// scaleFor makes every third source count also scale (by 0.25: exact).
func scaleFor(k int) float64 {
	if k%3 == 0 {
		return 0.25
	}
	return 1
}

// TestReduceRandom reduces random inputs bit for bit against the same order
// in the element type, and checks sums against the standard bound
// |err| <= (k-1) * eps * sum|x_i| around a double-double (about 106-bit)
// reference.
func TestReduceRandom(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	t.Run("f32", func(t *testing.T) { reduceRandom[float32](t, d, 0x1p-24) })
	t.Run("f64", func(t *testing.T) {
		if !d.Info().Float64 {
			t.Skip(d.Info().Float64Reason)
		}
		reduceRandom[float64](t, d, 0x1p-53)
	})
}

func reduceRandom[T float](t *testing.T, d *device, eps float64) {
	const k, n = 10, 65537
	es := int(dtypeOf[T]().Size())
	rng := rand.New(rand.NewPCG(3, 4))
	srcs := sources(k, n, func(i, j int) T { return T(rng.NormFloat64() * math.Exp2(float64(rng.IntN(20)-10))) })
	regs := make([]backend.Region, k)
	for i := range regs {
		regs[i] = backend.Region{Buf: alloc(t, d, n*es, backend.DeviceLocal), Len: n * es}
		put(t, regs[i].Buf, 0, srcs[i])
	}
	out := alloc(t, d, n*es, backend.DeviceLocal)
	dst := backend.Region{Buf: out, Len: n * es}
	for _, op := range []backend.Op{backend.Sum, backend.Max, backend.Min} {
		if err := d.Stream().Reduce(op, dtypeOf[T](), dst, regs, 1); err != nil {
			t.Fatal(err)
		}
		wait(t, d.Stream())
		got := get[T](t, out, 0, n)
		compare(t, op.String(), got, reduceRef(op, srcs, 1))
		if op != backend.Sum {
			continue
		}
		worst := 0.0
		for i := range got {
			abs, hi, lo := 0.0, 0.0, 0.0
			for _, s := range srcs {
				abs += math.Abs(float64(s[i]))
				hi, lo = twoSum(hi, lo, float64(s[i]))
			}
			bound := float64(k-1) * eps * abs * 1.0001
			e := math.Abs((float64(got[i]) - hi) - lo)
			if e > bound {
				t.Fatalf("sum element %d = %v, exact %v: error %g > bound %g", i, got[i], hi+lo, e, bound)
			}
			if abs > 0 {
				worst = max(worst, e/(eps*abs))
			}
		}
		t.Logf("sum of %d: worst error %.2f eps*sum|x| (bound %d)", k, worst, k-1)
	}
}

// twoSum adds x to the double-double hi+lo (Knuth's TwoSum, error-free).
func twoSum(hi, lo, x float64) (float64, float64) {
	s := hi + x
	bb := s - hi
	e := (hi - (s - bb)) + (x - bb)
	return s, lo + e
}

// TestReduceLarge runs a few combinations of 1M+3 elements: more than
// maxComputeWorkGroupCount[0] groups of 256 would cover (grid stride).
func TestReduceLarge(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	const n = 1<<20 + 3
	t.Run("f32 sum k=10", func(t *testing.T) { reduceLarge[float32](t, d, backend.Sum, 10, n) })
	t.Run("f64 max k=3", func(t *testing.T) {
		if !d.Info().Float64 {
			t.Skip(d.Info().Float64Reason)
		}
		reduceLarge[float64](t, d, backend.Max, 3, n)
	})
}

func reduceLarge[T float](t *testing.T, d *device, op backend.Op, k, n int) {
	es := int(dtypeOf[T]().Size())
	// Integers in [-1000, 1000], cheap to make (1M+3 x k of them).
	srcs := make([][]T, k)
	for i := range srcs {
		srcs[i] = make([]T, n)
		x := uint32(2*i + 1)
		for j := range srcs[i] {
			x = x*1664525 + 1013904223
			srcs[i][j] = T(int(x>>16)%2001 - 1000)
		}
	}
	regs := make([]backend.Region, k)
	for i := range regs {
		regs[i] = backend.Region{Buf: alloc(t, d, n*es, backend.HostVisible), Len: n * es}
		put(t, regs[i].Buf, 0, srcs[i])
	}
	out := alloc(t, d, n*es, backend.HostVisible)
	before := d.Counters().Snapshot()
	if err := d.Stream().Reduce(op, dtypeOf[T](), backend.Region{Buf: out, Len: n * es}, regs, 1); err != nil {
		t.Fatal(err)
	}
	wait(t, d.Stream())
	passes := 1 // 8 sources, then 7 more per pass
	if k > 8 {
		passes += (k - 8 + 6) / 7
	}
	if got := d.Counters().Snapshot().Sub(before).BytesReduced; got != int64(passes*n*es) {
		t.Errorf("BytesReduced = %d, want %d (%d passes)", got, passes*n*es, passes)
	}
	compare(t, op.String(), get[T](t, out, 0, n), reduceRef(op, srcs, 1))
}

// TestSpecialValues checks NaN and infinity propagation and the signed
// zeros of max and min (IEEE 754-2019: max(-0, +0) = +0, min = -0), in one
// pass (k=2) and several (k=9).
func TestSpecialValues(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	t.Run("f32", func(t *testing.T) { specialValues[float32](t, d) })
	t.Run("f64", func(t *testing.T) {
		if !d.Info().Float64 {
			t.Skip(d.Info().Float64Reason)
		}
		specialValues[float64](t, d)
	})
}

func specialValues[T float](t *testing.T, d *device) {
	nan, inf, negz := T(math.NaN()), T(math.Inf(1)), T(math.Copysign(0, -1))
	// Column j of a and b is one case; the other sources hold 1 (neutral
	// for prod, harmless for sum/max/min checks, which the reference
	// computes anyway).
	a := []T{nan, 1, nan, inf, -inf, inf, negz, 0, negz, 0, 1, -inf, 5}
	b := []T{1, nan, nan, 1, -1, -inf, 0, negz, negz, 0, inf, 2, -inf}
	es := int(dtypeOf[T]().Size())
	n := len(a)
	for _, k := range []int{2, 9} {
		srcs := make([][]T, k)
		regs := make([]backend.Region, k)
		buf := alloc(t, d, k*n*es, backend.HostVisible)
		for i := range srcs {
			switch i {
			case 0:
				srcs[i] = a
			case 1:
				srcs[i] = b
			default:
				// Later sources repeat a's signed zeros so max/min of
				// zeros stay exercised across passes.
				srcs[i] = make([]T, n)
				for j := range srcs[i] {
					srcs[i][j] = a[j]
					if a[j] != a[j] || math.IsInf(float64(a[j]), 0) {
						srcs[i][j] = 1
					}
				}
			}
			put(t, buf, i*n*es, srcs[i])
			regs[i] = backend.Region{Buf: buf, Off: i * n * es, Len: n * es}
		}
		out := alloc(t, d, n*es, backend.HostVisible)
		for _, op := range ops {
			if err := d.Stream().Reduce(op, dtypeOf[T](), backend.Region{Buf: out, Len: n * es}, regs, 1); err != nil {
				t.Fatal(err)
			}
			wait(t, d.Stream())
			got := get[T](t, out, 0, n)
			compare(t, fmt.Sprintf("%v k=%d", op, k), got, reduceRef(op, srcs, 1))
		}
	}
	// The signed-zero rules, stated outright.
	for _, c := range []struct {
		op   backend.Op
		x, y T
		want T
	}{
		{backend.Max, negz, 0, 0}, {backend.Max, 0, negz, 0},
		{backend.Min, negz, 0, negz}, {backend.Min, 0, negz, negz},
		{backend.Max, nan, 1, nan}, {backend.Min, 1, nan, nan},
	} {
		buf := alloc(t, d, 3*es, backend.HostVisible)
		put(t, buf, 0, []T{c.x, c.y})
		regs := []backend.Region{{Buf: buf, Off: 0, Len: es}, {Buf: buf, Off: es, Len: es}}
		if err := d.Stream().Reduce(c.op, dtypeOf[T](), backend.Region{Buf: buf, Off: 2 * es, Len: es}, regs, 1); err != nil {
			t.Fatal(err)
		}
		wait(t, d.Stream())
		if got := get[T](t, buf, 2*es, 1)[0]; !sameBits(got, c.want) {
			t.Errorf("%v(%v, %v) = %v (sign %v), want %v", c.op, c.x, c.y, got, math.Signbit(float64(got)), c.want)
		}
	}
}

// TestFloat64Exact checks that f64 is reduced in f64: values f32 cannot
// hold survive exactly.
func TestFloat64Exact(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	if !d.Info().Float64 {
		t.Skip(d.Info().Float64Reason)
	}
	x := 1 + 0x1p-40
	a := []float64{x, x, -x, 0x1p-60, 1e300}
	b := []float64{0, x, x, 1, 1e-300}
	buf := alloc(t, d, 3*len(a)*8, backend.DeviceLocal)
	put(t, buf, 0, a)
	put(t, buf, len(a)*8, b)
	regs := []backend.Region{{Buf: buf, Len: len(a) * 8}, {Buf: buf, Off: len(a) * 8, Len: len(a) * 8}}
	dst := backend.Region{Buf: buf, Off: 2 * len(a) * 8, Len: len(a) * 8}
	for _, op := range ops {
		if err := d.Stream().Reduce(op, backend.F64, dst, regs, 1); err != nil {
			t.Fatal(err)
		}
		wait(t, d.Stream())
		got := get[float64](t, buf, dst.Off, len(a))
		compare(t, op.String(), got, reduceRef(op, [][]float64{a, b}, 1))
		if op == backend.Sum && got[0] != x {
			t.Errorf("sum(1+2^-40, 0) = %v, want %v", got[0], x)
		}
	}
	// Scaling too stays in f64.
	if err := d.Stream().Scale(backend.F64, dst, regs[0], 1+0x1p-45); err != nil {
		t.Fatal(err)
	}
	wait(t, d.Stream())
	if got, want := get[float64](t, buf, dst.Off, 1)[0], x*(1+0x1p-45); got != want {
		t.Errorf("scale: %v, want %v", got, want)
	}
}

// TestSplitBindings lowers the binding limit to 4 KiB so that a region is
// split across dispatches, with offsets that are not aligned; the
// Dispatches counter proves the split.
func TestSplitBindings(t *testing.T) {
	const limit = 4096
	d := openDevice(t, backend.OpenOptions{MaxBindingBytes: limit})
	if got := d.Info().MaxBindingBytes; got != limit {
		t.Fatalf("MaxBindingBytes = %d, want %d", got, limit)
	}
	t.Run("f32", func(t *testing.T) { splitBindings[float32](t, d, limit) })
	t.Run("f64", func(t *testing.T) {
		if !d.Info().Float64 {
			t.Skip(d.Info().Float64Reason)
		}
		splitBindings[float64](t, d, limit)
	})
}

func splitBindings[T float](t *testing.T, d *device, limit int) {
	const n = 5000
	es := int(dtypeOf[T]().Size())
	// Aligned regions take limit/es elements per dispatch; a misaligned one
	// binds from up to align-es bytes before its data, so it may need one
	// dispatch more, never more than with align-es bytes lost per piece.
	fewest := (n + limit/es - 1) / (limit / es)
	per := (limit - max(int(d.Align())-es, 0)) / es
	most := (n + per - 1) / per
	if fewest < 2 {
		t.Fatalf("%d elements of %d bytes fit one %d-byte binding: the test proves nothing", n, es, limit)
	}
	for _, k := range []int{3, 10} {
		for _, aligned := range []bool{true, false} {
			rng := rand.New(rand.NewPCG(7, uint64(k)))
			srcs := sources(k, n, func(i, j int) T { return T(exactValues[rng.IntN(len(exactValues))]) })
			slot := (n + 3 + int(d.Align())) &^ (int(d.Align()) - 1) // elements, aligned in bytes
			buf := alloc(t, d, (k+1)*slot*es, backend.DeviceLocal)
			regs := make([]backend.Region, k)
			shift := func(i int) int {
				if aligned {
					return 0
				}
				return 1 + i%3 // 1..3 elements past an aligned offset
			}
			for i := range regs {
				off := (i*slot + shift(i)) * es
				put(t, buf, off, srcs[i])
				regs[i] = backend.Region{Buf: buf, Off: off, Len: n * es}
			}
			dst := backend.Region{Buf: buf, Off: (k*slot + shift(k+1)) * es, Len: n * es}
			passes := 1
			if k > 8 {
				passes = 2
			}
			before := d.Counters().Snapshot()
			if err := d.Stream().Reduce(backend.Sum, dtypeOf[T](), dst, regs, 0.25); err != nil {
				t.Fatal(err)
			}
			wait(t, d.Stream())
			got := d.Counters().Snapshot().Sub(before)
			what := fmt.Sprintf("k=%d aligned=%v", k, aligned)
			lo, hi := int64(passes*fewest), int64(passes*most)
			if aligned {
				hi = lo
			}
			if got.Dispatches < lo || got.Dispatches > hi {
				t.Errorf("%s: %d dispatches, want %d..%d (%d passes, %d-byte bindings)", what, got.Dispatches, lo, hi, passes, limit)
			}
			if want := int64(passes * n * es); got.BytesReduced != want {
				t.Errorf("%s: BytesReduced %d, want %d (dst once per pass)", what, got.BytesReduced, want)
			}
			compare(t, what, get[T](t, buf, dst.Off, n), reduceRef(backend.Sum, srcs, 0.25))
		}
	}
	// Scale splits the same way.
	buf := alloc(t, d, (2*n+1)*es, backend.HostVisible)
	src := sources(1, n, func(i, j int) T { return T(j) })[0]
	put(t, buf, es, src)
	before := d.Counters().Snapshot()
	if err := d.Stream().Scale(dtypeOf[T](), backend.Region{Buf: buf, Off: (n + 1) * es, Len: n * es},
		backend.Region{Buf: buf, Off: es, Len: n * es}, 0.5); err != nil {
		t.Fatal(err)
	}
	wait(t, d.Stream())
	if got := d.Counters().Snapshot().Sub(before).Dispatches; got < int64(fewest) || got > int64(most) {
		t.Errorf("scale: %d dispatches, want %d..%d", got, fewest, most)
	}
	want := make([]T, n)
	for i := range want {
		want[i] = src[i] * 0.5
	}
	compare(t, "scale", get[T](t, buf, (n+1)*es, n), want)
}

// TestUnalignedOffsets puts every region 1, 2 or 3 elements past an
// aligned offset, in one buffer and across buffers.
func TestUnalignedOffsets(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	const n, k = 1001, 4
	for _, shift := range []int{1, 2, 3} {
		srcs := sources(k, n, func(i, j int) float32 { return float32((i+1)*j%97 - 40) })
		shared := alloc(t, d, (k+1)*(n+8)*4, backend.HostVisible)
		regs := make([]backend.Region, k)
		for i := range regs {
			b, off := shared, (i*(n+8)+shift)*4
			if i%2 == 1 {
				b, off = alloc(t, d, (n+8)*4, backend.DeviceLocal), (shift+i)*4
			}
			put(t, b, off, srcs[i])
			regs[i] = backend.Region{Buf: b, Off: off, Len: n * 4}
		}
		dst := backend.Region{Buf: shared, Off: (k*(n+8) + shift) * 4, Len: n * 4}
		if err := d.Stream().Reduce(backend.Sum, backend.F32, dst, regs, 1); err != nil {
			t.Fatal(err)
		}
		wait(t, d.Stream())
		compare(t, fmt.Sprintf("shift %d", shift), get[float32](t, shared, dst.Off, n), reduceRef(backend.Sum, srcs, 1))
	}
}

// TestScale checks Scale with scale 1 (a copy) and 0.25, out of place and in
// place.
func TestScale(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	t.Run("f32", func(t *testing.T) { scale[float32](t, d) })
	t.Run("f64", func(t *testing.T) {
		if !d.Info().Float64 {
			t.Skip(d.Info().Float64Reason)
		}
		scale[float64](t, d)
	})
}

func scale[T float](t *testing.T, d *device) {
	const n = 3001
	es := int(dtypeOf[T]().Size())
	rng := rand.New(rand.NewPCG(8, 9))
	src := sources(1, n, func(i, j int) T { return T(rng.NormFloat64()) })[0]
	src[0], src[1], src[2] = T(math.Inf(1)), T(math.Copysign(0, -1)), T(math.NaN())
	for _, sc := range []float64{1, 0.25} {
		a := alloc(t, d, n*es, backend.DeviceLocal)
		b := alloc(t, d, (n+1)*es, backend.HostVisible)
		put(t, a, 0, src)
		want := make([]T, n)
		for i := range want {
			want[i] = src[i]
			if sc != 1 {
				want[i] *= T(sc)
			}
		}
		ra, rb := backend.Region{Buf: a, Len: n * es}, backend.Region{Buf: b, Off: es, Len: n * es}
		if err := d.Stream().Scale(dtypeOf[T](), rb, ra, sc); err != nil {
			t.Fatal(err)
		}
		wait(t, d.Stream())
		compare(t, fmt.Sprintf("scale %v out of place", sc), get[T](t, b, es, n), want)

		if err := d.Stream().Scale(dtypeOf[T](), ra, ra, sc); err != nil {
			t.Fatal(err)
		}
		wait(t, d.Stream())
		compare(t, fmt.Sprintf("scale %v in place", sc), get[T](t, a, 0, n), want)
	}
}

// TestInPlace reduces into one of the sources: srcs[0] for every source
// count, and a source read by a later pass (srcs[9] of 10, srcs[8] of 9),
// which needs scratch space for the partial result.
func TestInPlace(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	const n = 777
	cases := []struct{ k, at int }{{1, 0}, {2, 1}, {8, 7}, {9, 0}, {9, 8}, {10, 0}, {10, 5}, {10, 9}}
	for _, c := range cases {
		for _, op := range ops {
			rng := rand.New(rand.NewPCG(10, uint64(c.k)))
			srcs := sources(c.k, n, func(i, j int) float32 { return float32(exactValues[rng.IntN(len(exactValues))]) })
			regs := make([]backend.Region, c.k)
			for i := range regs {
				regs[i] = backend.Region{Buf: alloc(t, d, n*4, backend.DeviceLocal), Len: n * 4}
				put(t, regs[i].Buf, 0, srcs[i])
			}
			want := reduceRef(op, srcs, 0.5)
			if err := d.Stream().Reduce(op, backend.F32, regs[c.at], regs, 0.5); err != nil {
				t.Fatal(err)
			}
			wait(t, d.Stream())
			compare(t, fmt.Sprintf("%v k=%d into src %d", op, c.k, c.at), get[float32](t, regs[c.at].Buf, 0, n), want)
		}
	}
	// Every source the same region as dst: 10 x dst.
	buf := alloc(t, d, n*4, backend.HostVisible)
	ones := sources(1, n, func(i, j int) float32 { return float32(j % 5) })[0]
	put(t, buf, 0, ones)
	r := backend.Region{Buf: buf, Len: n * 4}
	regs := []backend.Region{r, r, r, r, r, r, r, r, r, r}
	if err := d.Stream().Reduce(backend.Sum, backend.F32, r, regs, 1); err != nil {
		t.Fatal(err)
	}
	wait(t, d.Stream())
	want := make([]float32, n)
	for i := range want {
		want[i] = 10 * ones[i]
	}
	compare(t, "10 x dst", get[float32](t, buf, 0, n), want)
}
