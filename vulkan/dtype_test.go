//go:build cgo && !novulkan

package vulkan

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/backend/backendtest"
	"github.com/gocoll/gocoll/host"
)

// The kernels of the types that need a device feature: int64 and uint64
// (shaderInt64), int8 and uint8 (storageBuffer8BitAccess), half, bfloat16,
// int16 and uint16 (storageBuffer16BitAccess), fp8 E4M3 and E5M2
// (storageBuffer8BitAccess), checked bit for bit against the host backend
// run on the same inputs, in the same regions of buffers laid out alike.

// featureTypes are the element types whose kernels need a device feature.
var featureTypes = []backend.DType{backend.I64, backend.U64, backend.I8, backend.U8, backend.Half, backend.BFloat16, backend.I16, backend.U16,
	backend.F8E4M3, backend.F8E5M2}

// seedEnv fixes the seed of the random cases (a decimal uint64); without it
// the seed comes from the clock. It is logged either way.
const seedEnv = "GOCOLL_VULKAN_TEST_SEED"

// needType fails (in CI, on lavapipe, which has every feature) or skips the
// test when d has no kernels for dt.
func needType(t *testing.T, d *device, dt backend.DType) {
	t.Helper()
	if d.Info().Kernels.Has(dt) {
		return
	}
	if os.Getenv("CI") == "true" && d.Info().Type == "cpu" {
		t.Fatalf("lavapipe reports no %v kernels (Info().Kernels %#x)", dt, uint32(d.Info().Kernels))
	}
	t.Skipf("%s has no %v kernels (it lacks the feature they need)", d.Info().Name, dt)
}

// Special inputs: the extremes of every integer width (each wraps in sums
// and products), and for the 16-bit types NaN (quiet, signalling, with
// payloads), +-Inf, +-0, the least and largest subnormals, the least normal,
// the largest finite value and its neighbours (sums overflow to Inf), 1.
var (
	intSpecials  = []int64{0, 1, -1, 2, -2, math.MaxInt8, math.MinInt8, math.MaxUint8, math.MaxInt16, math.MinInt16, math.MaxUint16, 1 << 15, math.MaxInt32, math.MinInt32, math.MaxUint32, math.MaxInt64, math.MinInt64, 1 << 32, 1 << 31, 1 << 7, 3}
	halfSpecials = []uint16{0x7e00, 0xfe00, 0x7c01, 0x7d55, 0xfc01, 0x7c00, 0xfc00, 0, 0x8000, 1, 0x8001, 2, 0x3ff, 0x83ff, 0x400,
		0x8400, 0x7bff, 0xfbff, 0x7bfe, 0x3c00, 0xbc00, 0x3c01, 0x0200, 0x1400}
	bf16Specials = []uint16{0x7fc0, 0xffc0, 0x7f81, 0x7fa5, 0xff81, 0x7f80, 0xff80, 0, 0x8000, 1, 0x8001, 2, 0x7f, 0x807f, 0x80,
		0x8080, 0x7f7f, 0xff7f, 0x7f7e, 0x3f80, 0xbf80, 0x3f81, 0x0040, 0x0c00}
)

// drawElem returns the bits of a random element of dt.
func drawElem(r *rand.Rand, dt backend.DType) uint64 {
	if dt.Is8() {
		return uint64(r.IntN(256)) // every pattern: NaN, Inf, subnormals, the largest
	}
	if !dt.Is16() {
		mask := ^uint64(0) >> (64 - 8*dt.Size())
		switch r.IntN(6) {
		case 0, 1:
			return uint64(intSpecials[r.IntN(len(intSpecials))]) & mask
		case 2:
			return uint64(int64(r.IntN(9)-4)) & mask
		}
		return r.Uint64() & mask
	}
	specials, mant, maxFin, one := halfSpecials, 10, uint16(0x7bff), uint16(0x3c00)
	if dt == backend.BFloat16 {
		specials, mant, maxFin, one = bf16Specials, 7, 0x7f7f, 0x3f80
	}
	sign := uint16(r.IntN(2)) << 15
	switch r.IntN(10) {
	case 0:
		return uint64(specials[r.IntN(len(specials))])
	case 1:
		return uint64(uint16(r.Uint32())) // any bits
	case 2:
		return uint64(sign | uint16(1+r.IntN(1<<mant-1))) // subnormal
	case 3:
		return uint64(sign | (maxFin - uint16(r.IntN(16)))) // near the largest
	case 4:
		return uint64(sign | uint16(r.IntN(3)<<mant) | uint16(r.IntN(1<<mant))) // the lowest normals
	}
	// 1/8 <= |x| < 8, whose sums and products round.
	e := r.IntN(6) - 3
	return uint64(sign | uint16(int(one)+e<<mant) | uint16(r.IntN(1<<mant)))
}

// twin is the Vulkan device under test and the host backend, the
// reference, with one source and one destination arena each; every case
// takes fresh regions of the arenas, at the same offsets on both.
type twin struct {
	t        *testing.T
	gpu      *device
	ref      *host.Device
	dt       backend.DType
	src, dst [2]backend.Buffer // [gpu, host]
	srcAt    int               // next free byte of the source arenas
	dstAt    int
	checks   []check
	mismatch int
}

// check is a destination region to compare after the batch.
type check struct {
	what  string
	reg   [2]backend.Region
	exact bool // NaN payloads too (max, min, unscaled; copies)
	in    [][]uint64
}

const arenaBytes = 8 << 20

func newTwin(t *testing.T, gpu *device, dt backend.DType) *twin {
	ref, err := host.Open(backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	tw := &twin{t: t, gpu: gpu, ref: ref, dt: dt}
	tw.src = [2]backend.Buffer{alloc(t, gpu, arenaBytes, backend.DeviceLocal), alloc(t, ref, arenaBytes, backend.HostVisible)}
	tw.dst = [2]backend.Buffer{alloc(t, gpu, arenaBytes, backend.HostVisible), alloc(t, ref, arenaBytes, backend.HostVisible)}
	return tw
}

// region takes n elements of an arena, misal elements past a 64-byte
// boundary (any byte alignment for 8-bit types), filled with v.
func (tw *twin) region(dst bool, n, misal int, v []uint64) [2]backend.Region {
	es := tw.dt.Size()
	at, bufs := &tw.srcAt, tw.src
	if dst {
		at, bufs = &tw.dstAt, tw.dst
	}
	off := (*at+63)&^63 + misal*es
	*at = off + n*es
	if *at > arenaBytes {
		tw.t.Fatalf("arena of %d bytes full", arenaBytes)
	}
	p := backendtest.EncodeElems(tw.dt, v)
	var out [2]backend.Region
	for i, b := range bufs {
		out[i] = backend.Region{Buf: b, Off: off, Len: n * es}
		if err := b.Write(off, p); err != nil {
			tw.t.Fatal(err)
		}
	}
	return out
}

// inputs draws k sources of n elements.
func (tw *twin) inputs(r *rand.Rand, k, n int) [][]uint64 {
	return backendtest.DrawInputs(r, tw.dt, k, n, drawElem)
}

// reduce records a reduction (ReduceMulti when m > 0) of in on both
// devices, the destinations to be checked after run. Source i starts
// (misal+i)%4 elements past a 64-byte boundary, destination j (misal+j+1)%4;
// misal -1 aligns every region (the 16-byte kernels of 64-bit types).
// inPlace makes the first destination the last source (a later pass's
// source when k > 8).
func (tw *twin) reduce(what string, op backend.Op, in [][]uint64, m int, scale float64, misal int, inPlace bool) {
	k, n := len(in), len(in[0])
	at := func(i int) int {
		if misal < 0 {
			return 0
		}
		return (misal + i) % 4
	}
	srcs := [2][]backend.Region{make([]backend.Region, k), make([]backend.Region, k)}
	for i := range in {
		reg := tw.region(false, n, at(i), in[i])
		srcs[0][i], srcs[1][i] = reg[0], reg[1]
	}
	nd := max(m, 1)
	dsts := [2][]backend.Region{make([]backend.Region, nd), make([]backend.Region, nd)}
	for j := range nd {
		reg := tw.region(true, n, at(j+1), tw.inputs(rand.New(rand.NewPCG(uint64(j), 1)), 1, n)[0])
		if j == 0 && inPlace {
			reg = [2]backend.Region{srcs[0][k-1], srcs[1][k-1]}
		}
		dsts[0][j], dsts[1][j] = reg[0], reg[1]
	}
	for i, dev := range []backend.Device{tw.gpu, tw.ref} {
		var err error
		if m > 0 {
			err = dev.Stream().(backend.MultiReducer).ReduceMulti(op, tw.dt, dsts[i], srcs[i], scale)
		} else {
			err = dev.Stream().Reduce(op, tw.dt, dsts[i][0], srcs[i], scale)
		}
		if err != nil {
			tw.t.Fatalf("%s on %s: %v", what, dev.Info().Backend, err)
		}
	}
	exact := tw.dt.IsNarrowFloat() && (op == backend.Max || op == backend.Min) && scale == 1
	for j := range nd {
		tw.checks = append(tw.checks, check{what: fmt.Sprintf("%s dsts[%d]", what, j), reg: [2]backend.Region{dsts[0][j], dsts[1][j]}, exact: exact, in: in})
	}
}

// scale records Scale of src by scale on both devices, out of place and in
// place.
func (tw *twin) scale(what string, in []uint64, scale float64, misal int) {
	n := len(in)
	src := tw.region(false, n, misal, in)
	dst := tw.region(true, n, (misal+1)%4, make([]uint64, n))
	inPlace := tw.region(false, n, (misal+2)%4, in)
	for i, dev := range []backend.Device{tw.gpu, tw.ref} {
		if err := dev.Stream().Scale(tw.dt, dst[i], src[i], scale); err != nil {
			tw.t.Fatalf("%s on %s: %v", what, dev.Info().Backend, err)
		}
		if err := dev.Stream().Scale(tw.dt, inPlace[i], inPlace[i], scale); err != nil {
			tw.t.Fatalf("%s in place on %s: %v", what, dev.Info().Backend, err)
		}
	}
	exact := scale == 1 // a copy of the bits
	tw.checks = append(tw.checks, check{what: what, reg: dst, exact: exact, in: [][]uint64{in}},
		check{what: what + " in place", reg: inPlace, exact: exact, in: [][]uint64{in}})
}

// run submits both devices' work, waits, compares every destination bit for
// bit (a NaN of a sum, product or scaled result matches any NaN: the host's
// NaN payloads are its CPU's), and starts a new batch.
func (tw *twin) run() {
	t := tw.t
	t.Helper()
	wait(t, tw.gpu.Stream())
	wait(t, tw.ref.Stream())
	for _, c := range tw.checks {
		var got [2][]uint64
		for i, reg := range c.reg {
			p := make([]byte, reg.Len)
			if err := reg.Buf.Read(reg.Off, p); err != nil {
				t.Fatal(err)
			}
			got[i] = backendtest.DecodeElems(tw.dt, p)
		}
		for e := range got[1] {
			g, w := got[0][e], got[1][e]
			if g == w || !c.exact && backendtest.IsNaNBits(tw.dt, g) && backendtest.IsNaNBits(tw.dt, w) {
				continue
			}
			tw.mismatch++
			if tw.mismatch <= 10 {
				args := make([]string, len(c.in))
				for s := range c.in {
					args[s] = backendtest.FmtElem(tw.dt, c.in[s][e])
				}
				t.Errorf("%v %s: element %d of %d: vulkan %s, host %s; inputs %v", tw.dt, c.what, e, len(got[1]), backendtest.FmtElem(tw.dt, g), backendtest.FmtElem(tw.dt, w), args)
			}
		}
	}
	tw.checks = tw.checks[:0]
	tw.srcAt, tw.dstAt = 0, 0
	if tw.mismatch > 10 {
		t.Fatalf("%d mismatches", tw.mismatch)
	}
}

// dtypeSizes are the element counts of the random cases: empty, one, odd,
// around the work-group size (256), and a few groups with a tail.
var dtypeSizes = []int{0, 1, 2, 7, 255, 256, 257, 1031}

// scales16 are the scales of the 16-bit cases: none, a mean's 1/K (a
// division), multiplies, one whose products are subnormal in float32 and
// one that overflows.
func scales16(k int) []float64 {
	return []float64{1, 1 / float64(max(k, 2)), 0.3, 1e-30, 3e4}
}

// TestDTypeKernels: Reduce of int64, uint64, int8, uint8, half and bfloat16
// on Vulkan against the host backend, bit for bit: every op, K = 1..10
// sources (9 and 10 take two passes, the 16-bit ones through float32
// partial results), sizes 0, 1, odd and around the work-group size, random
// inputs rich in special values, sources and destinations at every element
// misalignment, destinations in place (the last source); for the 16-bit
// types every scale of scales16 (a mean's division, multiplies, subnormal
// and overflowing results: unless full, each scale other than 1 on half the
// K and size pairs, a different half for the next scale); then aligned
// regions (the 16-byte kernels of int64 and uint64), ReduceMulti (M = 1, 3,
// 9) and Scale. Unless full (each source count is a pipeline lavapipe
// compiles), an op takes K = 1, 8, 9 and 10 and half of 2..7, the next op
// the other half, and ReduceMulti half of its M x K pairs, the next op the
// other half.
func TestDTypeKernels(t *testing.T) {
	arithmetic(t)
	d := openDevice(t, backend.OpenOptions{})
	seed := backendtest.RandomSeed(t, seedEnv)
	for _, dt := range featureTypes {
		t.Run(dt.String(), func(t *testing.T) {
			needType(t, d, dt)
			r := rand.New(rand.NewPCG(seed, uint64(dt)))
			tw := newTwin(t, d, dt)
			scales := func(k int) []float64 {
				if dt.IsNarrowFloat() {
					return scales16(k)
				}
				return []float64{1}
			}
			for oi, op := range ops {
				for k := 1; k <= 10; k++ {
					if !fullRun() && k > 1 && k < 8 && (k+oi)%2 != 0 {
						continue
					}
					for si, n := range dtypeSizes {
						for ci, sc := range scales(k) {
							if sc != 1 && n > 300 {
								continue
							}
							if ci > 0 && !fullRun() && (k+si+ci)%2 != 0 {
								continue
							}
							what := fmt.Sprintf("Reduce %v K=%d n=%d scale=%.3g", op, k, n, sc)
							tw.reduce(what, op, tw.inputs(r, k, n), 0, sc, (k+si)%4, (k+si)%3 == 0)
						}
					}
				}
				tw.run()
			}
			// Every region aligned: the 16-byte kernels where the type has
			// them (int64, uint64), with a scalar tail on odd sizes.
			vb := d.VecDispatches()
			for _, op := range ops {
				for _, k := range []int{1, 3, 9} {
					for _, m := range []int{0, 2} {
						n := 1031
						tw.reduce(fmt.Sprintf("aligned %v M=%d K=%d n=%d", op, m, k, n), op, tw.inputs(r, k, n), m, 1, -1, m == 0)
					}
				}
			}
			tw.run()
			if vec := d.VecDispatches() - vb; (vec > 0) != (dt.Size() == 8) {
				t.Errorf("aligned regions: %d 16-byte dispatches (int64 and uint64 have 16-byte kernels, the others not)", vec)
			}
			for oi, op := range ops {
				for mi, m := range []int{1, 3, 9} {
					for ki, k := range []int{1, 2, 8, 9, 10} {
						if !fullRun() && (oi+mi+ki)%2 != 0 {
							continue
						}
						sc := 1.0
						if dt.IsNarrowFloat() && (m+k)%2 == 0 {
							sc = 1 / float64(max(k, 2))
						}
						n := dtypeSizes[(m+k)%len(dtypeSizes)]
						what := fmt.Sprintf("ReduceMulti %v M=%d K=%d n=%d scale=%.3g", op, m, k, n, sc)
						tw.reduce(what, op, tw.inputs(r, k, n), m, sc, k%4, k%2 == 0)
					}
				}
				tw.run()
			}
			for _, sc := range scales(1) {
				for i, n := range []int{1, 257, 1031} {
					tw.scale(fmt.Sprintf("Scale n=%d by %.3g", n, sc), tw.inputs(r, 1, n)[0], sc, i)
				}
			}
			tw.run()
		})
	}
}

// TestDTypeOneRounding: a 16-bit reduction of more than 8 sources is rounded
// once, from float32, as the host's: half 2048 + 1 + ... + 1 (9 ones) is
// 2057 in float32, rounded to 2056; a partial result rounded to half after
// 8 sources (2055 -> 2056) would give 2058. bfloat16 likewise at 256.
func TestDTypeOneRounding(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	for _, c := range []struct {
		dt             backend.DType
		big, one, want uint64
	}{
		{backend.Half, 0x6800, 0x3c00, 0x6804},     // 2048 + 9 -> 2056
		{backend.BFloat16, 0x4380, 0x3f80, 0x4384}, // 256 + 9 -> 264
		{backend.F8E4M3, 0x58, 0x38, 0x5c},         // 16 + 9 = 25 -> 24 (16 + 7 -> 24, + 2 -> 26)
		{backend.F8E5M2, 0x44, 0x3c, 0x4a},         // 4 + 9 = 13 -> 12 (4 + 7 -> 12, + 2 -> 14)
	} {
		t.Run(c.dt.String(), func(t *testing.T) {
			needType(t, d, c.dt)
			tw := newTwin(t, d, c.dt)
			for _, m := range []int{0, 2} {
				in := [][]uint64{{c.big}}
				for range 9 {
					in = append(in, []uint64{c.one})
				}
				tw.reduce(fmt.Sprintf("M=%d", m), backend.Sum, in, m, 1, 0, false)
				chk := tw.checks[len(tw.checks)-1]
				tw.run()
				p := make([]byte, c.dt.Size())
				if err := chk.reg[0].Buf.Read(chk.reg[0].Off, p); err != nil {
					t.Fatal(err)
				}
				if got := backendtest.DecodeElems(c.dt, p)[0]; got != c.want {
					t.Errorf("M=%d: %s, want %s", m, backendtest.FmtElem(c.dt, got), backendtest.FmtElem(c.dt, c.want))
				}
			}
		})
	}
}

// TestDTypeScratchReused: the float32 partial results of 16-bit reductions
// of more than 8 sources live in the device's scratch buffer, allocated
// once for the largest and reused: no allocation in steady state.
func TestDTypeScratchReused(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	needType(t, d, backend.BFloat16)
	const n, k = 4099, 10
	srcs := make([]backend.Region, k)
	for i := range srcs {
		srcs[i] = backend.Region{Buf: alloc(t, d, 2*n, backend.DeviceLocal), Len: 2 * n}
	}
	dst := backend.Region{Buf: alloc(t, d, 2*n, backend.DeviceLocal), Len: 2 * n}
	s := d.Stream()
	mr := s.(backend.MultiReducer)
	step := func() {
		if err := s.Reduce(backend.Sum, backend.BFloat16, dst, srcs, 1.0/k); err != nil {
			t.Fatal(err)
		}
		if err := mr.ReduceMulti(backend.Max, backend.BFloat16, []backend.Region{dst, srcs[0]}, srcs, 1); err != nil {
			t.Fatal(err)
		}
		wait(t, s)
	}
	step()
	before := d.Counters().Snapshot()
	for range 3 {
		step()
	}
	if got := d.Counters().Snapshot().Sub(before); got.Allocs != 0 || got.ObjectsCreated != 0 {
		t.Errorf("steady state: %d allocations, %d objects created", got.Allocs, got.ObjectsCreated)
	}
}

// TestDTypeRefused: Info().Kernels lists each type whose feature the device
// has (lavapipe: all), as Devices() does; a type taken out of Kernels (as
// on a device without the feature) is refused by Reduce, ReduceMulti and
// Scale with ErrUnsupported, recording nothing, while the others still run.
func TestDTypeRefused(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	raw := d.Raw()
	for _, c := range []struct {
		feature bool
		types   []backend.DType
	}{
		{raw.ShaderInt64, []backend.DType{backend.I64, backend.U64}},
		{raw.StorageBuffer8Bit, []backend.DType{backend.I8, backend.U8, backend.F8E4M3, backend.F8E5M2}},
		{raw.StorageBuffer16Bit, []backend.DType{backend.Half, backend.BFloat16, backend.I16, backend.U16}},
	} {
		for _, dt := range c.types {
			if d.Info().Kernels.Has(dt) != c.feature {
				t.Errorf("Info().Kernels has %v: %v, the device's feature: %v", dt, d.Info().Kernels.Has(dt), c.feature)
			}
		}
	}
	devs, err := Backend{}.Devices()
	if err != nil || len(devs) == 0 || devs[0].Kernels != d.Info().Kernels {
		t.Errorf("Devices() Kernels differ from the open device's %#x: %v, %v", uint32(d.Info().Kernels), devs, err)
	}

	d.DropKernels(backend.I64.Bit() | backend.U8.Bit() | backend.Half.Bit())
	a := alloc(t, d, 64, backend.DeviceLocal)
	r := func(i int) backend.Region { return backend.Region{Buf: a, Off: 16 * i, Len: 16} }
	s := d.Stream()
	for _, dt := range []backend.DType{backend.I64, backend.U8, backend.Half} {
		if d.Info().Kernels.Has(dt) {
			t.Errorf("Info().Kernels has %v after DropKernels", dt)
		}
		for name, err := range map[string]error{
			"Scale":       s.Scale(dt, r(0), r(1), 1),
			"Reduce":      s.Reduce(backend.Sum, dt, r(0), []backend.Region{r(1), r(2)}, 1),
			"ReduceMulti": s.(backend.MultiReducer).ReduceMulti(backend.Sum, dt, []backend.Region{r(0), r(3)}, []backend.Region{r(1), r(2)}, 1),
		} {
			if !errors.Is(err, backend.ErrUnsupported) {
				t.Errorf("%s of %v: %v, want ErrUnsupported", name, dt, err)
			}
		}
	}
	if s.(*stream).Recorded() {
		t.Error("a refused call recorded work")
	}
	for _, dt := range []backend.DType{backend.U64, backend.I8, backend.BFloat16} {
		if !raw.ShaderInt64 && dt == backend.U64 || !raw.StorageBuffer8Bit && dt == backend.I8 || !raw.StorageBuffer16Bit && dt == backend.BFloat16 {
			continue
		}
		if err := s.Reduce(backend.Sum, dt, r(0), []backend.Region{r(1), r(2)}, 1); err != nil {
			t.Errorf("Reduce of %v after dropping others: %v", dt, err)
		}
	}
	wait(t, s)
}
