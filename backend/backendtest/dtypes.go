package backendtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// The element types beyond f32 and f64: integers (I32, U32, I64, U64, I8,
// U8, I16, U16), reduced in their own type with wrapping Sum and Prod, a
// mean's scale 1/N dividing the wrapped result once, truncated toward zero,
// and Half, BFloat16, F8E4M3 and F8E5M2, reduced in float32
// and rounded once to the type (the 8-bit ones saturating a finite
// overflow). A device takes those in its Info().Kernels; for the others the
// suite checks that Reduce, ReduceMulti and Scale refuse them.
//
// The references here work on the bits of each element, zero-extended to a
// uint64, and owe nothing to a backend's code: integer sums and products are
// computed in uint64 and truncated to the type's width (the low bits of a
// sum or product depend only on the low bits of its terms), comparisons
// sign-extend signed types, 16- and 8-bit float values are decoded from
// their fields and rounded to nearest even by searching the ordered positive
// values of the type, and the float32 reduction and scale are ref.go's combine and
// scaleRef. Results are compared bit for bit (any NaN matching any NaN).

// SeedEnv names the environment variable that fixes the seed of the DTypes
// tests' random cases (a decimal uint64); without it the seed is drawn from
// the clock. The seed is logged either way, so that a failure can be
// repeated.
const SeedEnv = "GOCOLL_BACKENDTEST_SEED"

// newDTypes are the element types the DTypes tests check.
var newDTypes = []backend.DType{
	backend.I32, backend.U32, backend.I64, backend.U64, backend.I8, backend.U8,
	backend.Half, backend.BFloat16, backend.I16, backend.U16, backend.F8E4M3, backend.F8E5M2,
}

// dtypeSizes are the element counts of the random cases: empty, one, odd,
// around a work group of 256 and the host's block of 1024, and several
// blocks and a tail.
var dtypeSizes = []int{0, 1, 2, 7, 255, 256, 257, 1023, 1024, 1025, 4099}

// RandomSeed returns the seed of a test's random cases: the decimal uint64
// in the environment variable env, else one drawn from the clock. It logs
// the seed either way, so that a failure can be repeated.
func RandomSeed(t *testing.T, env string) uint64 {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", env, v, err)
		}
		t.Logf("random cases from seed %d (%s)", seed, env)
		return seed
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("random cases from seed %d (%s=%d repeats them)", seed, env, seed)
	return seed
}

// testDTypes runs the checks of every type of newDTypes: refusal where the
// device has no kernels for it, else hand-written cases, random reductions
// and multi-destination reductions against the references, Scale, the
// refusal of an integer scale other than 1 and 1/N, and the split of a kernel under
// a lowered MaxBindingBytes with its counters.
func (s *suite) testDTypes(t *testing.T) {
	seed := RandomSeed(t, SeedEnv)
	for _, dt := range newDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			if raceEnabled && s.opts.Short && dt != backend.I32 && dt != backend.Half {
				// The race detector checks synchronisation: one integer
				// and one 16-bit type take every path; the run without it
				// checks every type's arithmetic.
				t.Skip("-short under the race detector: int32 and half only")
			}
			if !hasKernels(s.info, dt) {
				t.Run("Refused", func(t *testing.T) { testRefused(t, s.dev, dt) })
			}
			t.Run("Table", func(t *testing.T) { testDTypeTable(t, s.dev, dt) })
			if !slices.Contains(s.opts.CoveredTypes, dt) {
				t.Run("Reduce", func(t *testing.T) { testDTypeReduce(t, s, dt, newRand(seed+uint64(dt))) })
				t.Run("ReduceMulti", func(t *testing.T) { testDTypeMulti(t, s.dev, dt, newRand(seed^uint64(dt)<<32), s.opts.Sample) })
				t.Run("Scale", func(t *testing.T) { testDTypeScale(t, s.dev, dt, newRand(seed+uint64(dt)<<40)) })
			}
			if dt.IsInt() {
				t.Run("ScaleRefused", func(t *testing.T) { testIntScaleRefused(t, s.dev, dt) })
			}
			t.Run("SteadyState", func(t *testing.T) { testDTypeSteady(t, s.dev, dt) })
			t.Run("Split", func(t *testing.T) {
				needDType(t, s.dev, dt)
				testDTypeSplit(t, s.open(t, backend.OpenOptions{MaxBindingBytes: 4096}), dt, newRand(seed+uint64(dt)<<48))
			})
		})
	}
}

// testRefused checks that a device without kernels for dt refuses it in
// Reduce, ReduceMulti and Scale with an error (wrapping
// backend.ErrInvalidArgument or backend.ErrUnsupported), never a panic, and
// records nothing.
func testRefused(t *testing.T, dev backend.Device, dt backend.DType) {
	a := alloc(t, dev, 64, backend.DeviceLocal)
	r := func(off int) backend.Region { return backend.Region{Buf: a, Off: off, Len: 16} }
	st := dev.Stream()
	before := dev.Counters().Snapshot()
	calls := []struct {
		name string
		call func() error
	}{
		{"Reduce", func() error { return st.Reduce(backend.Sum, dt, r(0), []backend.Region{r(16), r(32)}, 1) }},
		{"Scale", func() error { return st.Scale(dt, r(0), r(16), 1) }},
	}
	if mr, ok := st.(backend.MultiReducer); ok {
		calls = append(calls, struct {
			name string
			call func() error
		}{"ReduceMulti", func() error {
			return mr.ReduceMulti(backend.Sum, dt, []backend.Region{r(0), r(48)}, []backend.Region{r(16), r(32)}, 1)
		}})
	}
	for _, c := range calls {
		err := noPanic(t, c.name, c.call)
		switch {
		case err == nil:
			t.Errorf("%s of %v on a device without %v kernels: no error", c.name, dt, dt)
		case !errors.Is(err, backend.ErrInvalidArgument) && !errors.Is(err, backend.ErrUnsupported):
			t.Errorf("%s of %v on a device without %v kernels: %q wraps neither ErrInvalidArgument nor ErrUnsupported", c.name, dt, dt, err)
		}
	}
	if d := dev.Counters().Snapshot().Sub(before); d.Dispatches != 0 || d.BytesReduced != 0 {
		t.Errorf("refused calls were counted: %d dispatches, %d bytes reduced", d.Dispatches, d.BytesReduced)
	}
	submitWait(t, st)
}

// The references.

// intMask is the mask of an integer type's bits.
func intMask(dt backend.DType) uint64 { return ^uint64(0) >> (64 - 8*dt.Size()) }

// signExtend returns the value of the w-bit two's complement bits x.
func signExtend(x uint64, w int) int64 { return int64(x<<(64-w)) >> (64 - w) }

// refInt is op(a, b) for integers of dt, a and b their bits: the sum or
// product in uint64 truncated to the type's width (wrapping), the larger or
// smaller value, compared signed or unsigned as dt is, the AND, OR or XOR of
// the bits, or for the logical operators 1 or 0 as (a != 0) op (b != 0) is
// true or false.
func refInt(dt backend.DType, op backend.Op, a, b uint64) uint64 {
	bit := func(v bool) uint64 {
		if v {
			return 1
		}
		return 0
	}
	switch op {
	case backend.Sum:
		return (a + b) & intMask(dt)
	case backend.Prod:
		return (a * b) & intMask(dt)
	case backend.BAnd:
		return a & b
	case backend.BOr:
		return a | b
	case backend.BXor:
		return a ^ b
	case backend.LAnd:
		return bit(a != 0 && b != 0)
	case backend.LOr:
		return bit(a != 0 || b != 0)
	case backend.LXor:
		return bit((a != 0) != (b != 0))
	}
	less := a < b
	if dt.Signed() {
		less = signExtend(a, 8*dt.Size()) < signExtend(b, 8*dt.Size())
	}
	if (op == backend.Max) == less {
		return b
	}
	return a
}

// refIntDiv is a, an element of the integer type dt, divided by N where
// scale is 1/N (backend.Divisor: a mean, NCCL's ncclAvg on integers), in
// int64 or uint64 arithmetic: Go's / truncates toward zero, as NCCL's
// division of the magnitude with the sign put back does. Any other scale
// leaves a.
func refIntDiv(dt backend.DType, a uint64, scale float64) uint64 {
	n := backend.Divisor(scale)
	if n == 0 {
		return a
	}
	if dt.Signed() {
		return uint64(signExtend(a, 8*dt.Size())/int64(n)) & intMask(dt)
	}
	return a / uint64(n)
}

// halfInf and bf16Inf are the bits of +Inf; halfOver and bf16Over the value
// the rounding weighs +Inf as: the next exponent's first value.
const (
	halfInf  = 0x7c00
	bf16Inf  = 0x7f80
	halfOver = 0x1p16
	bf16Over = 0x1p128
)

// to32 is the value of the 16- or 8-bit element h of dt, exactly: bfloat16
// is the top half of a binary32; binary16 is a sign, a 5-bit exponent of
// bias 15 and a 10-bit fraction; the fp8 types as fp8Value decodes them.
func to32(dt backend.DType, h uint16) float32 {
	if dt.Is8() {
		return float32(fp8Value(dt, uint8(h)))
	}
	if dt == backend.BFloat16 {
		return math.Float32frombits(uint32(h) << 16)
	}
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, f := int(h>>10)&0x1f, float64(h&0x3ff)
	switch e {
	case 0x1f:
		if f != 0 {
			return float32(math.NaN())
		}
		return float32(sign * math.Inf(1))
	case 0:
		return float32(sign * math.Ldexp(f, -24))
	}
	return float32(sign * math.Ldexp(1024+f, e-25))
}

// IsNaN16 reports whether h is a NaN of the 16- or 8-bit float type dt.
func IsNaN16(dt backend.DType, h uint16) bool {
	if dt.Is8() {
		v := fp8Value(dt, uint8(h))
		return v != v
	}
	if dt == backend.BFloat16 {
		return h&0x7f80 == 0x7f80 && h&0x7f != 0
	}
	return h&0x7c00 == 0x7c00 && h&0x3ff != 0
}

// IsNaNBits reports whether x holds the bits of a NaN of the narrow float
// type dt (false for every other type).
func IsNaNBits(dt backend.DType, x uint64) bool {
	return dt.IsNarrowFloat() && IsNaN16(dt, uint16(x))
}

// fp8 formats: E4M3 (FN) has 3 fraction bits, bias 7, no infinities and
// only S.1111.111 as NaN, largest finite 0x7e (448); E5M2 has 2 fraction
// bits, bias 15, IEEE's infinities and NaNs, largest finite 0x7b (57344).
func fp8Format(dt backend.DType) (mbits, bias int, maxFin uint8) {
	if dt == backend.F8E5M2 {
		return 2, 15, 0x7b
	}
	return 3, 7, 0x7e
}

// fp8Value is the value of the fp8 bits h of dt, from its fields.
func fp8Value(dt backend.DType, h uint8) float64 {
	mbits, bias, _ := fp8Format(dt)
	sign := 1.0
	if h&0x80 != 0 {
		sign = -1
	}
	e, m := int(h&0x7f)>>mbits, float64(h&(1<<mbits-1))
	switch {
	case dt == backend.F8E5M2 && e == 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	case dt == backend.F8E4M3 && h&0x7f == 0x7f:
		return math.NaN()
	case e == 0:
		return sign * math.Ldexp(m, 1-bias-mbits)
	}
	return sign * math.Ldexp(float64(int(1)<<mbits)+m, e-bias-mbits)
}

// fp8From rounds x to the fp8 type dt, to nearest even: of the non-negative
// finite values (whose bits order them, 0 up to the largest) the largest
// not above |x| and the next one, the nearer, on a tie the one whose bits
// are even; from the largest finite value up (and +-Inf in E4M3, which has
// none) it saturates to the largest. +-Inf stays +-Inf in E5M2; a NaN gives
// a NaN; the sign is x's.
func fp8From(dt backend.DType, x float64) uint8 {
	_, _, maxFin := fp8Format(dt)
	if x != x {
		if dt == backend.F8E5M2 {
			return 0x7e
		}
		return 0x7f
	}
	var sign uint8
	if math.Signbit(x) {
		sign = 0x80
	}
	a := math.Abs(x)
	if math.IsInf(a, 1) && dt == backend.F8E5M2 {
		return sign | 0x7c
	}
	lo := uint8(sort.Search(int(maxFin)+1, func(i int) bool { return fp8Value(dt, uint8(i)) > a }) - 1)
	if lo == maxFin {
		return sign | maxFin
	}
	hi := lo + 1
	dlo, dhi := a-fp8Value(dt, lo), fp8Value(dt, hi)-a
	if dlo < dhi || dlo == dhi && lo%2 == 0 {
		return sign | lo
	}
	return sign | hi
}

// from32 rounds x to dt, to nearest even: of the positive values of dt
// (whose bits order them, 0 up to +Inf) the largest not above |x| and the
// next one, the nearer, on a tie the one whose bits are even; +Inf counts as
// halfOver or bf16Over, so values from halfway to it on round to +Inf. The
// sign is x's; a NaN gives a NaN.
func from32(dt backend.DType, x float32) uint16 {
	if dt.Is8() {
		return uint16(fp8From(dt, float64(x)))
	}
	inf, over := uint16(halfInf), halfOver
	if dt == backend.BFloat16 {
		inf, over = bf16Inf, bf16Over
	}
	if x != x {
		if dt == backend.BFloat16 {
			return 0x7fc0
		}
		return 0x7e00
	}
	var sign uint16
	if math.Signbit(float64(x)) {
		sign = 0x8000
	}
	a := math.Abs(float64(x))
	val := func(h uint16) float64 {
		if h == inf {
			return over
		}
		return float64(to32(dt, h))
	}
	lo := uint16(sort.Search(int(inf)+1, func(i int) bool { return val(uint16(i)) > a }) - 1)
	if lo == inf {
		return sign | inf
	}
	hi := lo + 1
	// Both differences are exact: val(lo) <= a < val(hi) <= 2*val(lo) or
	// val(lo) = 0.
	dlo, dhi := a-val(lo), val(hi)-a
	if dlo < dhi || dlo == dhi && lo%2 == 0 {
		return sign | lo
	}
	return sign | hi
}

// refElem is element i of the reduction of in by op, scaled by scale:
// integers left to right with refInt, then divided by N where scale is 1/N
// (refIntDiv); 16-bit types
// converted to float32, reduced left to right in float32 and scaled as the
// f32 kernels do (combine, scaleRef), then rounded once (from32).
func refElem(dt backend.DType, op backend.Op, in [][]uint64, i int, scale float64) uint64 {
	if dt.IsInt() {
		acc := in[0][i]
		for _, s := range in[1:] {
			acc = refInt(dt, op, acc, s[i])
		}
		return refIntDiv(dt, acc, scale)
	}
	acc := to32(dt, uint16(in[0][i]))
	for _, s := range in[1:] {
		acc = combine(op, acc, to32(dt, uint16(s[i])))
	}
	return uint64(from32(dt, scaleRef(acc, scale)))
}

// sameElem reports whether got is want: the same bits, or for a 16-bit type
// both NaN (payloads are not compared).
func sameElem(dt backend.DType, got, want uint64) bool {
	if dt.IsNarrowFloat() && IsNaN16(dt, uint16(want)) {
		return IsNaN16(dt, uint16(got))
	}
	return got == want
}

// FmtElem formats the element bits x of dt.
func FmtElem(dt backend.DType, x uint64) string {
	switch {
	case dt.IsNarrowFloat():
		return fmt.Sprintf("%v (%#04x)", to32(dt, uint16(x)), x)
	case dt.Signed():
		return strconv.FormatInt(signExtend(x, 8*dt.Size()), 10)
	}
	return strconv.FormatUint(x, 10)
}

// EncodeElems returns the elements v of dt (the bits of each, zero-extended
// to a uint64) as memory, in the host's byte order.
func EncodeElems(dt backend.DType, v []uint64) []byte {
	es := dt.Size()
	p := make([]byte, len(v)*es)
	for i, x := range v {
		switch es {
		case 1:
			p[i] = byte(x)
		case 2:
			binary.NativeEndian.PutUint16(p[2*i:], uint16(x))
		case 4:
			binary.NativeEndian.PutUint32(p[4*i:], uint32(x))
		default:
			binary.NativeEndian.PutUint64(p[8*i:], x)
		}
	}
	return p
}

// DecodeElems is the inverse of EncodeElems.
func DecodeElems(dt backend.DType, p []byte) []uint64 {
	es := dt.Size()
	v := make([]uint64, len(p)/es)
	for i := range v {
		switch es {
		case 1:
			v[i] = uint64(p[i])
		case 2:
			v[i] = uint64(binary.NativeEndian.Uint16(p[2*i:]))
		case 4:
			v[i] = uint64(binary.NativeEndian.Uint32(p[4*i:]))
		default:
			v[i] = binary.NativeEndian.Uint64(p[8*i:])
		}
	}
	return v
}

// writeElems writes the elements v of dt into b at byte offset off.
func writeElems(t *testing.T, b backend.Buffer, off int, dt backend.DType, v []uint64) {
	t.Helper()
	if err := b.Write(off, EncodeElems(dt, v)); err != nil {
		t.Fatalf("Write(%d, %d bytes): %v", off, len(v)*dt.Size(), err)
	}
}

// readElems reads the n elements of dt of region r.
func readElems(t *testing.T, r backend.Region, dt backend.DType) []uint64 {
	t.Helper()
	p := make([]byte, r.Len)
	if err := r.Buf.Read(r.Off, p); err != nil {
		t.Fatalf("Read(%d, %d bytes): %v", r.Off, r.Len, err)
	}
	return DecodeElems(dt, p)
}

// Random inputs.

// intSpecials are the integer values drawIn favours, as int64 (truncated
// to the type): 0, +-1, 2, and the extremes of every width, which wrap.
var intSpecials = []int64{0, 1, -1, 2, math.MaxInt8, math.MinInt8, math.MaxUint8, math.MaxInt16, math.MinInt16,
	math.MaxUint16, math.MaxInt32, math.MinInt32, math.MaxUint32, math.MaxInt64, math.MinInt64}

// half16 and bf16Specials are the 16-bit values drawIn favours: NaN, +-Inf,
// +-0, the least and largest subnormal, the least normal, the largest finite
// value (whose sums overflow to Inf), 1, 0.5 and 2.
var (
	halfSpecials = []uint16{0x7e00, 0xfe00, 0x7c00, 0xfc00, 0, 0x8000, 1, 0x8001, 0x3ff, 0x83ff, 0x400,
		0x7bff, 0xfbff, 0x3c00, 0xbc00, 0x3800, 0x4000}
	bf16Specials = []uint16{0x7fc0, 0xffc0, 0x7f80, 0xff80, 0, 0x8000, 1, 0x8001, 0x7f, 0x807f, 0x80,
		0x7f7f, 0xff7f, 0x3f80, 0xbf80, 0x3f00, 0x4000}
)

// drawIn returns a random element of dt: for integers the specials,
// values near the type's extremes, small values and any bits; for 16-bit
// types the specials, any bits (NaNs of every payload included), subnormals,
// values near the largest finite one, and values of magnitude 0.25..4.
func drawIn(r *rand.Rand, dt backend.DType) uint64 {
	if dt.IsInt() {
		mask := intMask(dt)
		top := mask >> 1 // the largest signed value
		if !dt.Signed() {
			top = mask
		}
		switch r.IntN(8) {
		case 0:
			return uint64(intSpecials[r.IntN(len(intSpecials))]) & mask
		case 1:
			return (top - uint64(r.IntN(4))) & mask // near the largest value
		case 2:
			return (top + 1 + uint64(r.IntN(4))) & mask // near the least value (0 if unsigned)
		case 3, 4:
			return uint64(int64(r.IntN(9)-4)) & mask
		}
		return r.Uint64() & mask
	}
	if dt.Is8() {
		return drawFP8(r, dt)
	}
	specials, mant, maxFin, one := halfSpecials, 10, uint16(0x7bff), uint16(0x3c00)
	if dt == backend.BFloat16 {
		specials, mant, maxFin, one = bf16Specials, 7, 0x7f7f, 0x3f80
	}
	sign := uint16(r.IntN(2)) << 15
	switch r.IntN(10) {
	case 0, 1:
		return uint64(specials[r.IntN(len(specials))])
	case 2:
		return uint64(uint16(r.Uint32()))
	case 3:
		return uint64(sign | uint16(1+r.IntN(1<<mant-1)))
	case 4:
		return uint64(sign | (maxFin - uint16(r.IntN(8))))
	}
	// 0.25 <= |x| < 4: the exponents of 1/4, 1/2, 1 and 2.
	e := r.IntN(4) - 2
	return uint64(sign | uint16(int(one)+e<<mant) | uint16(r.IntN(1<<mant)))
}

// drawFP8 returns a random fp8 element of dt: any bits (NaN, Inf,
// subnormals included), values near the largest finite one (whose sums
// saturate), or values of magnitude 0.5..2, whose sums round.
func drawFP8(r *rand.Rand, dt backend.DType) uint64 {
	mbits, bias, maxFin := fp8Format(dt)
	sign := uint8(r.IntN(2)) << 7
	switch r.IntN(4) {
	case 0:
		return uint64(r.IntN(256))
	case 1:
		return uint64(sign | (maxFin - uint8(r.IntN(4))))
	}
	e := bias - 1 + r.IntN(2)
	return uint64(sign | uint8(e<<mbits) | uint8(r.IntN(1<<mbits)))
}

// DrawInputs returns k sources of n elements of dt, each the bits draw
// returns.
func DrawInputs(r *rand.Rand, dt backend.DType, k, n int, draw func(*rand.Rand, backend.DType) uint64) [][]uint64 {
	in := make([][]uint64, k)
	for i := range in {
		in[i] = make([]uint64, n)
		for j := range in[i] {
			in[i][j] = draw(r, dt)
		}
	}
	return in
}

// Hand-written cases.

// dtRow is one hand-written reduction: its sources' elements, its scale
// and the result, worked out by hand.
type dtRow struct {
	dt    backend.DType
	op    backend.Op
	in    []uint64
	scale float64
	want  uint64
	why   string
}

var dtTable = []dtRow{
	// A mean of integers (scale 1/N): the sum wrapped in the type, divided
	// once by N, truncated toward zero for the signed types (NCCL's ncclAvg).
	{backend.I32, backend.Sum, []uint64{0xfffffff9, 0}, 0.5, 0xfffffffd, "-7/2 truncates toward zero: -3"},
	{backend.I32, backend.Sum, []uint64{0xfffffff9, 0, 0}, 1.0 / 3, 0xfffffffe, "-7/3 truncates toward zero: -2"},
	{backend.I32, backend.Sum, []uint64{0x7fffffff, 1}, 0.5, 0xc0000000, "MaxInt32+1 wraps to MinInt32, /2"},
	{backend.U32, backend.Sum, []uint64{0xffffffff, 0xffffffff, 0xffffffff}, 1.0 / 3, 0x55555554, "3*MaxUint32 wraps to 2^32-3, /3"},
	{backend.I64, backend.Sum, []uint64{1 << 63, 0xffffffffffffffff}, 0.5, 0x3fffffffffffffff, "MinInt64-1 wraps to MaxInt64, /2"},
	{backend.I64, backend.Sum, []uint64{0xfffffffffffffff9, 0}, 0.5, 0xfffffffffffffffd, "-7/2: -3"},
	{backend.U64, backend.Sum, []uint64{0xffffffffffffffff, 2}, 1.0 / 7, 0, "MaxUint64+2 wraps to 1, /7"},
	{backend.U64, backend.Sum, []uint64{0xffffffffffffffff, 0}, 0.5, 0x7fffffffffffffff, "MaxUint64/2"},
	{backend.I8, backend.Sum, []uint64{0x7f, 0x7f}, 0.5, 0xff, "127+127 wraps to -2, /2: -1"},
	{backend.I8, backend.Sum, []uint64{0x80, 0x80, 0x80}, 1.0 / 3, 0xd6, "3*-128 wraps to -128, /3: -42"},
	{backend.I8, backend.Sum, []uint64{0x80, 0xff}, 0.5, 0x3f, "-128-1 wraps to 127, /2: 63"},
	{backend.U8, backend.Sum, []uint64{0xff, 0x03}, 0.5, 0x01, "255+3 wraps to 2, /2"},
	{backend.I16, backend.Sum, []uint64{0x8000, 0xffff}, 0.5, 0x3fff, "-32768-1 wraps to 32767, /2"},
	{backend.I16, backend.Sum, []uint64{0xfff9, 0x0000}, 0.5, 0xfffd, "-7/2: -3"},
	{backend.U16, backend.Sum, []uint64{0xffff, 0xffff, 0xffff}, 1.0 / 3, 0x5554, "3*65535 wraps to 65533, /3"},
	{backend.I32, backend.Sum, []uint64{0x7fffffff, 1}, 1, 0x80000000, "MaxInt32+1 wraps to MinInt32"},
	{backend.I32, backend.Sum, []uint64{0x80000000, 0xffffffff}, 1, 0x7fffffff, "MinInt32-1 wraps to MaxInt32"},
	{backend.I32, backend.Prod, []uint64{0x10000, 0x10000}, 1, 0, "2^16*2^16 wraps to 0"},
	{backend.I32, backend.Prod, []uint64{0x80000000, 0xffffffff}, 1, 0x80000000, "MinInt32*-1 is MinInt32"},
	{backend.I32, backend.Max, []uint64{0xffffffff, 0}, 1, 0, "max(-1, 0), signed"},
	{backend.I32, backend.Min, []uint64{0x7fffffff, 0x80000000}, 1, 0x80000000, "min(MaxInt32, MinInt32)"},
	{backend.I32, backend.Sum, []uint64{0x7fffffff, 0x7fffffff, 2}, 1, 0, "wraps, and wraps back"},
	{backend.U32, backend.Sum, []uint64{0xffffffff, 1}, 1, 0, "MaxUint32+1 wraps to 0"},
	{backend.U32, backend.Prod, []uint64{0xffffffff, 0xffffffff}, 1, 1, "(2^32-1)^2 mod 2^32"},
	{backend.U32, backend.Max, []uint64{0xffffffff, 0}, 1, 0xffffffff, "max, unsigned"},
	{backend.U32, backend.Min, []uint64{0xffffffff, 1}, 1, 1, "min, unsigned"},
	{backend.I64, backend.Sum, []uint64{math.MaxInt64, 1}, 1, 1 << 63, "MaxInt64+1 wraps to MinInt64"},
	{backend.I64, backend.Prod, []uint64{1 << 63, math.MaxUint64}, 1, 1 << 63, "MinInt64*-1 is MinInt64"},
	{backend.I64, backend.Max, []uint64{math.MaxUint64, 0}, 1, 0, "max(-1, 0), signed"},
	{backend.I64, backend.Min, []uint64{math.MaxInt64, 1 << 63}, 1, 1 << 63, "min(MaxInt64, MinInt64)"},
	{backend.U64, backend.Sum, []uint64{math.MaxUint64, 1}, 1, 0, "MaxUint64+1 wraps to 0"},
	{backend.U64, backend.Prod, []uint64{1 << 32, 1 << 32}, 1, 0, "2^32*2^32 wraps to 0"},
	{backend.U64, backend.Max, []uint64{math.MaxUint64, 0}, 1, math.MaxUint64, "max, unsigned"},
	{backend.U64, backend.Min, []uint64{math.MaxUint64, 1}, 1, 1, "min, unsigned"},
	{backend.I8, backend.Sum, []uint64{0x7f, 1}, 1, 0x80, "127+1 wraps to -128"},
	{backend.I8, backend.Sum, []uint64{100, 100, 0x9c}, 1, 100, "100+100-100: wraps, and wraps back"},
	{backend.I8, backend.Prod, []uint64{16, 16}, 1, 0, "16*16 wraps to 0"},
	{backend.I8, backend.Prod, []uint64{0x80, 0xff}, 1, 0x80, "-128*-1 is -128"},
	{backend.I8, backend.Max, []uint64{0x80, 0x7f}, 1, 0x7f, "max(-128, 127), signed"},
	{backend.I8, backend.Min, []uint64{0xff, 0}, 1, 0xff, "min(-1, 0), signed"},
	{backend.U8, backend.Sum, []uint64{255, 1}, 1, 0, "255+1 wraps to 0"},
	{backend.U8, backend.Sum, []uint64{200, 100}, 1, 44, "300 mod 256"},
	{backend.U8, backend.Prod, []uint64{255, 255}, 1, 1, "255^2 mod 256"},
	{backend.U8, backend.Max, []uint64{255, 0}, 1, 255, "max, unsigned"},
	{backend.U8, backend.Min, []uint64{0x80, 0x7f}, 1, 0x7f, "min(128, 127), unsigned"},
	{backend.I16, backend.Sum, []uint64{0x7fff, 1}, 1, 0x8000, "32767+1 wraps to -32768"},
	{backend.I16, backend.Sum, []uint64{20000, 20000, 0xb1e0}, 1, 20000, "20000+20000-20000: wraps, and wraps back"},
	{backend.I16, backend.Prod, []uint64{256, 256}, 1, 0, "256*256 wraps to 0"},
	{backend.I16, backend.Prod, []uint64{0x8000, 0xffff}, 1, 0x8000, "-32768*-1 is -32768"},
	{backend.I16, backend.Prod, []uint64{0xff, 0x101}, 1, 0xffff, "255*257 = 65535 wraps to -1"},
	{backend.I16, backend.Max, []uint64{0x8000, 0x7fff}, 1, 0x7fff, "max(-32768, 32767), signed"},
	{backend.I16, backend.Min, []uint64{0xffff, 0, 0x80}, 1, 0xffff, "min(-1, 0, 128), signed"},
	{backend.U16, backend.Sum, []uint64{0xffff, 1}, 1, 0, "65535+1 wraps to 0"},
	{backend.U16, backend.Sum, []uint64{40000, 30000}, 1, 4464, "70000 mod 65536"},
	{backend.U16, backend.Prod, []uint64{0xffff, 0xffff}, 1, 1, "65535^2 mod 65536"},
	{backend.U16, backend.Max, []uint64{0xffff, 0x7fff}, 1, 0xffff, "max, unsigned"},
	{backend.U16, backend.Min, []uint64{0x8000, 0x7fff}, 1, 0x7fff, "min(32768, 32767), unsigned"},

	{backend.I32, backend.BAnd, []uint64{0xffffffff, 0x80000001}, 1, 0x80000001, "-1 & x is x"},
	{backend.I32, backend.BAnd, []uint64{0xf0f0f0f0, 0x0ff00ff0, 0xffff0000}, 1, 0x00f00000, "three sources"},
	{backend.I32, backend.BOr, []uint64{0x80000000, 1}, 1, 0x80000001, "MinInt32 | 1"},
	{backend.I32, backend.BXor, []uint64{0xffffffff, 0x0f0f0f0f}, 1, 0xf0f0f0f0, "-1 ^ x is ^x"},
	{backend.I32, backend.BXor, []uint64{5, 3, 6}, 1, 0, "5^3^6"},
	{backend.I32, backend.LAnd, []uint64{0x80000000, 0xffffffff}, 1, 1, "negatives are true"},
	{backend.I32, backend.LAnd, []uint64{5, 0}, 1, 0, "5 && 0"},
	{backend.I32, backend.LOr, []uint64{0, 0x80000000}, 1, 1, "MinInt32 is true"},
	{backend.I32, backend.LOr, []uint64{0, 0, 0}, 1, 0, "all false"},
	{backend.I32, backend.LXor, []uint64{7, 0xffffffff}, 1, 0, "both true"},
	{backend.I32, backend.LXor, []uint64{2, 3, 4}, 1, 1, "three true: odd"},
	{backend.U32, backend.BAnd, []uint64{0xffffffff, 0x12345678}, 1, 0x12345678, "all ones & x"},
	{backend.U32, backend.BOr, []uint64{0x80000000, 0x7fffffff}, 1, 0xffffffff, "disjoint halves"},
	{backend.U32, backend.BXor, []uint64{0xffffffff, 0xffffffff}, 1, 0, "x ^ x"},
	{backend.U32, backend.LAnd, []uint64{0x80000000, 1}, 1, 1, "both true"},
	{backend.U32, backend.LOr, []uint64{0, 0}, 1, 0, "both false"},
	{backend.U32, backend.LXor, []uint64{0x80000000, 0}, 1, 1, "one true"},
	{backend.I64, backend.BAnd, []uint64{1 << 63, math.MaxUint64}, 1, 1 << 63, "MinInt64 & -1"},
	{backend.I64, backend.BOr, []uint64{1 << 63, 1}, 1, 1<<63 | 1, "MinInt64 | 1"},
	{backend.I64, backend.BXor, []uint64{math.MaxUint64, 0x0f0f0f0f0f0f0f0f}, 1, 0xf0f0f0f0f0f0f0f0, "-1 ^ x is ^x"},
	{backend.I64, backend.LAnd, []uint64{1 << 32, 1 << 63}, 1, 1, "true by the high words alone"},
	{backend.I64, backend.LOr, []uint64{0, 1 << 40}, 1, 1, "true by the high word"},
	{backend.I64, backend.LXor, []uint64{1 << 32, 1}, 1, 0, "both true"},
	{backend.U64, backend.BAnd, []uint64{0xffffffff00000000, 0xffffffff}, 1, 0, "disjoint halves"},
	{backend.U64, backend.BOr, []uint64{0xffffffff00000000, 0xffffffff}, 1, math.MaxUint64, "disjoint halves"},
	{backend.U64, backend.BXor, []uint64{1 << 63, 1<<63 | 1}, 1, 1, "the top bits cancel"},
	{backend.U64, backend.LAnd, []uint64{1 << 63, 0}, 1, 0, "one false"},
	{backend.U64, backend.LOr, []uint64{1 << 33, 0}, 1, 1, "true by the high word"},
	{backend.U64, backend.LXor, []uint64{0, 1 << 63}, 1, 1, "one true"},
	{backend.I8, backend.BAnd, []uint64{0x80, 0xff}, 1, 0x80, "-128 & -1"},
	{backend.I8, backend.BOr, []uint64{0x80, 0x7f}, 1, 0xff, "-128 | 127 is -1"},
	{backend.I8, backend.BXor, []uint64{0xff, 0x0f}, 1, 0xf0, "-1 ^ 15 is -16"},
	{backend.I8, backend.LAnd, []uint64{0x80, 0xff}, 1, 1, "negatives are true"},
	{backend.I8, backend.LOr, []uint64{0, 0}, 1, 0, "both false"},
	{backend.I8, backend.LXor, []uint64{0x80, 1}, 1, 0, "both true"},
	{backend.I8, backend.LXor, []uint64{0, 0x80}, 1, 1, "one true"},
	{backend.U8, backend.BAnd, []uint64{0xf0, 0x3c}, 1, 0x30, "0xf0 & 0x3c"},
	{backend.U8, backend.BOr, []uint64{0x80, 0x01}, 1, 0x81, "0x80 | 1"},
	{backend.U8, backend.BXor, []uint64{0xff, 0x80, 0x01}, 1, 0x7e, "three sources"},
	{backend.U8, backend.LAnd, []uint64{0x80, 0x40}, 1, 1, "both true"},
	{backend.U8, backend.LOr, []uint64{0, 0, 0x80}, 1, 1, "the last true"},
	{backend.U8, backend.LXor, []uint64{0x80, 0x80, 0x80}, 1, 1, "three true: odd"},
	{backend.I16, backend.BAnd, []uint64{0x8000, 0xffff}, 1, 0x8000, "-32768 & -1"},
	{backend.I16, backend.BOr, []uint64{0x8000, 0x7fff}, 1, 0xffff, "-32768 | 32767 is -1"},
	{backend.I16, backend.BXor, []uint64{0xffff, 0x00ff}, 1, 0xff00, "-1 ^ 255 is -256"},
	{backend.I16, backend.LAnd, []uint64{0x8000, 0x0100}, 1, 1, "true by the high byte alone"},
	{backend.I16, backend.LOr, []uint64{0, 0}, 1, 0, "both false"},
	{backend.I16, backend.LXor, []uint64{0x8000, 1}, 1, 0, "both true"},
	{backend.U16, backend.BAnd, []uint64{0xff00, 0x0ff0}, 1, 0x0f00, "0xff00 & 0x0ff0"},
	{backend.U16, backend.BOr, []uint64{0x8000, 0x0001}, 1, 0x8001, "0x8000 | 1"},
	{backend.U16, backend.BXor, []uint64{0xffff, 0x8000, 0x0001}, 1, 0x7ffe, "three sources"},
	{backend.U16, backend.LAnd, []uint64{0x0100, 0}, 1, 0, "one false"},
	{backend.U16, backend.LOr, []uint64{0, 0, 0x0100}, 1, 1, "the last true, by its high byte"},
	{backend.U16, backend.LXor, []uint64{0x0100, 0x0100, 0x0100}, 1, 1, "three true: odd"},

	{backend.Half, backend.Sum, []uint64{0x7bff, 0x7bff}, 1, 0x7c00, "65504+65504 overflows to +Inf"},
	{backend.Half, backend.Sum, []uint64{0xfbff, 0xfbff}, 1, 0xfc00, "-65504-65504 overflows to -Inf"},
	{backend.Half, backend.Sum, []uint64{0x7bff, 0x4c00}, 1, 0x7c00, "65504+16 = 65520, halfway to 2^16: even, +Inf"},
	{backend.Half, backend.Sum, []uint64{0x7bff, 0x4b80}, 1, 0x7bff, "65504+15 rounds down to 65504"},
	{backend.Half, backend.Sum, []uint64{0x7bff, 0x7bff, 0xfbff}, 1, 0x7bff, "65504+65504-65504 in float32: no overflow before the one rounding"},
	{backend.Half, backend.Sum, []uint64{0x7bff, 0x7bff}, 0.5, 0x7bff, "mean of 65504 and 65504: scaled before the rounding"},
	{backend.Half, backend.Sum, []uint64{0x3c00, 0x4000}, 1.0 / 3, 0x3c00, "mean of 1 and 2, divided by 3"},
	{backend.Half, backend.Sum, []uint64{0x3c00, 0x1000}, 1, 0x3c00, "1+2^-11, a tie: even, 1"},
	{backend.Half, backend.Sum, []uint64{0x3c01, 0x1000}, 1, 0x3c02, "1+2^-10+2^-11, a tie: even, 1+2^-9"},
	{backend.Half, backend.Sum, []uint64{0x3c00, 0x1000, 0x1000}, 1, 0x3c01, "1+2^-11+2^-11 = 1+2^-10: accumulated in float32, rounded once"},
	{backend.Half, backend.Sum, []uint64{0x0001, 0x0001}, 1, 0x0002, "subnormals add exactly"},
	{backend.Half, backend.Sum, []uint64{0x03ff, 0x0001}, 1, 0x0400, "largest subnormal + least: least normal"},
	{backend.Half, backend.Prod, []uint64{0x0001, 0x3800}, 1, 0x0000, "2^-24*0.5, a tie between 0 and 2^-24: even, +0"},
	{backend.Half, backend.Prod, []uint64{0x8001, 0x3800}, 1, 0x8000, "-2^-24*0.5 rounds to -0"},
	{backend.Half, backend.Prod, []uint64{0x0003, 0x3800}, 1, 0x0002, "3*2^-25, a tie between 2^-24 and 2^-23: even"},
	{backend.Half, backend.Sum, []uint64{0x7c00, 0xfc00}, 1, 0x7e00, "Inf-Inf is NaN"},
	{backend.Half, backend.Sum, []uint64{0x8000, 0x8000}, 1, 0x8000, "-0 + -0 = -0"},
	{backend.Half, backend.Max, []uint64{0x7e00, 0x3c00}, 1, 0x7e00, "max(NaN, 1) is NaN"},
	{backend.Half, backend.Min, []uint64{0x3c00, 0x7e00}, 1, 0x7e00, "min(1, NaN) is NaN"},
	{backend.Half, backend.Max, []uint64{0x8000, 0x0000}, 1, 0x0000, "max(-0, +0) = +0"},
	{backend.Half, backend.Min, []uint64{0x0000, 0x8000}, 1, 0x8000, "min(+0, -0) = -0"},
	{backend.Half, backend.Max, []uint64{0xfc00, 0xfbff}, 1, 0xfbff, "max(-Inf, -65504)"},
	{backend.Half, backend.Min, []uint64{0x7bff, 0x7c00}, 1, 0x7bff, "min(65504, +Inf)"},
	{backend.BFloat16, backend.Sum, []uint64{0x3f80, 0x3b80}, 1, 0x3f80, "1+2^-8, a tie: even, 1"},
	{backend.BFloat16, backend.Sum, []uint64{0x3f80, 0x3b80, 0x3b80}, 1, 0x3f81, "1+2^-8+2^-8 = 1+2^-7: accumulated in float32, rounded once"},
	{backend.BFloat16, backend.Sum, []uint64{0x7f7f, 0x7f7f}, 1, 0x7f80, "largest+largest overflows float32: +Inf"},
	{backend.BFloat16, backend.Sum, []uint64{0x7f7f, 0x7f7f, 0xff7f}, 1, 0x7f80, "the float32 accumulator overflowed: +Inf stays"},
	{backend.BFloat16, backend.Sum, []uint64{0x7f7f, 0x7b00}, 1, 0x7f80, "largest + half its ulp, a tie: even, +Inf"},
	{backend.BFloat16, backend.Sum, []uint64{0x7f7f, 0x7f7f}, 0.5, 0x7f80, "the sum overflowed in float32 before the scale"},
	{backend.BFloat16, backend.Sum, []uint64{0x0001, 0x0001}, 1, 0x0002, "subnormals add exactly"},
	{backend.BFloat16, backend.Prod, []uint64{0x0001, 0x3f00}, 1, 0x0000, "2^-133*0.5, a tie between 0 and 2^-133: even, +0"},
	{backend.BFloat16, backend.Max, []uint64{0x7fc0, 0x3f80}, 1, 0x7fc0, "max(NaN, 1) is NaN"},
	{backend.BFloat16, backend.Min, []uint64{0x0000, 0x8000}, 1, 0x8000, "min(+0, -0) = -0"},
	{backend.BFloat16, backend.Prod, []uint64{0x7f80, 0}, 1, 0x7fc0, "Inf*0 is NaN"},

	{backend.F8E4M3, backend.Sum, []uint64{0x7e, 0x7e}, 1, 0x7e, "448+448 saturates to 448"},
	{backend.F8E4M3, backend.Sum, []uint64{0xfe, 0xfe}, 1, 0xfe, "-448-448 saturates to -448"},
	{backend.F8E4M3, backend.Sum, []uint64{0x7e, 0x7e, 0xfe}, 1, 0x7e, "448+448-448 in float32: no saturation before the one rounding"},
	{backend.F8E4M3, backend.Sum, []uint64{0x7e, 0x7e}, 0.5, 0x7e, "mean of 448 and 448: scaled before the rounding"},
	{backend.F8E4M3, backend.Sum, []uint64{0x7d, 0x58}, 1, 0x7e, "416+16 = 432, a tie: even, 448"},
	{backend.F8E4M3, backend.Sum, []uint64{0x7e, 0x58}, 1, 0x7e, "448+16 = 464, halfway to 480 (no such value): 448"},
	{backend.F8E4M3, backend.Prod, []uint64{0x7e, 0x40}, 1, 0x7e, "448*2 saturates to 448"},
	{backend.F8E4M3, backend.Sum, []uint64{0x38, 0x18}, 1, 0x38, "1+1/16, a tie: even, 1"},
	{backend.F8E4M3, backend.Sum, []uint64{0x39, 0x18}, 1, 0x3a, "1.125+1/16, a tie: even, 1.25"},
	{backend.F8E4M3, backend.Sum, []uint64{0x38, 0x18, 0x18}, 1, 0x39, "1+1/16+1/16 = 1.125: accumulated in float32, rounded once"},
	{backend.F8E4M3, backend.Sum, []uint64{0x38, 0x30}, 1.0 / 3, 0x30, "1.5 divided by 3"},
	{backend.F8E4M3, backend.Sum, []uint64{0x01, 0x01}, 1, 0x02, "subnormals add exactly"},
	{backend.F8E4M3, backend.Sum, []uint64{0x07, 0x01}, 1, 0x08, "largest subnormal + least: least normal"},
	{backend.F8E4M3, backend.Prod, []uint64{0x01, 0x30}, 1, 0x00, "2^-9*0.5, a tie between 0 and 2^-9: even, +0"},
	{backend.F8E4M3, backend.Prod, []uint64{0x81, 0x30}, 1, 0x80, "-2^-9*0.5 rounds to -0"},
	{backend.F8E4M3, backend.Prod, []uint64{0x03, 0x30}, 1, 0x02, "3*2^-10, a tie between 2^-9 and 2^-8: even"},
	{backend.F8E4M3, backend.Sum, []uint64{0x7f, 0x38}, 1, 0x7f, "NaN+1 is NaN"},
	{backend.F8E4M3, backend.Max, []uint64{0x38, 0xff}, 1, 0x7f, "max(1, NaN) is NaN"},
	{backend.F8E4M3, backend.Max, []uint64{0x80, 0x00}, 1, 0x00, "max(-0, +0) = +0"},
	{backend.F8E4M3, backend.Min, []uint64{0x00, 0x80}, 1, 0x80, "min(+0, -0) = -0"},
	{backend.F8E4M3, backend.Min, []uint64{0xfe, 0xfd}, 1, 0xfe, "min(-448, -416)"},
	{backend.F8E5M2, backend.Sum, []uint64{0x7b, 0x7b}, 1, 0x7b, "57344+57344 saturates to 57344"},
	{backend.F8E5M2, backend.Sum, []uint64{0xfb, 0xfb}, 1, 0xfb, "-57344-57344 saturates to -57344"},
	{backend.F8E5M2, backend.Sum, []uint64{0x7a, 0x6c}, 1, 0x7a, "49152+4096, a tie: even, 49152"},
	{backend.F8E5M2, backend.Sum, []uint64{0x7b, 0x6c}, 1, 0x7b, "57344+4096, halfway to 65536 (Inf): 57344"},
	{backend.F8E5M2, backend.Sum, []uint64{0x7c, 0x3c}, 1, 0x7c, "Inf+1 is Inf"},
	{backend.F8E5M2, backend.Sum, []uint64{0x7c, 0xfc}, 1, 0x7e, "Inf-Inf is NaN"},
	{backend.F8E5M2, backend.Prod, []uint64{0x7c, 0}, 1, 0x7e, "Inf*0 is NaN"},
	{backend.F8E5M2, backend.Max, []uint64{0xfc, 0xfb}, 1, 0xfb, "max(-Inf, -57344)"},
	{backend.F8E5M2, backend.Min, []uint64{0x7b, 0x7c}, 1, 0x7b, "min(57344, +Inf)"},
	{backend.F8E5M2, backend.Max, []uint64{0x7e, 0x3c}, 1, 0x7e, "max(NaN, 1) is NaN"},
	{backend.F8E5M2, backend.Sum, []uint64{0x3c, 0x30}, 1, 0x3c, "1+1/8, a tie: even, 1"},
	{backend.F8E5M2, backend.Sum, []uint64{0x3c, 0x30, 0x30}, 1, 0x3d, "1+1/8+1/8 = 1.25: accumulated in float32, rounded once"},
	{backend.F8E5M2, backend.Sum, []uint64{0x01, 0x02}, 1, 0x03, "subnormals add exactly"},
	{backend.F8E5M2, backend.Prod, []uint64{0x01, 0x38}, 1, 0x00, "2^-16*0.5, a tie between 0 and 2^-16: even, +0"},
	{backend.F8E5M2, backend.Sum, []uint64{0x7b, 0x7b}, 0.5, 0x7b, "mean of 57344 and 57344"},
}

// testDTypeTable checks dtTable's rows of dt, each a reduction of one
// element per source, recorded in one submission.
func testDTypeTable(t *testing.T, dev backend.Device, dt backend.DType) {
	needDType(t, dev, dt)
	es := dt.Size()
	var rows []dtRow
	for _, row := range dtTable {
		if row.dt == dt {
			rows = append(rows, row)
		}
	}
	const maxK = 3
	src := alloc(t, dev, maxK*len(rows)*es, backend.DeviceLocal)
	dst := alloc(t, dev, len(rows)*es, backend.HostVisible)
	st := dev.Stream()
	for j, row := range rows {
		if row.want != refElem(dt, row.op, columns(row.in), 0, row.scale) {
			t.Errorf("%v %v%v: the reference gives %s, the table %s (%s)", dt, row.op, fmtElems(dt, row.in), FmtElem(dt, refElem(dt, row.op, columns(row.in), 0, row.scale)), FmtElem(dt, row.want), row.why)
		}
		srcs := make([]backend.Region, len(row.in))
		for i, x := range row.in {
			srcs[i] = backend.Region{Buf: src, Off: (i*len(rows) + j) * es, Len: es}
			writeElems(t, src, srcs[i].Off, dt, []uint64{x})
		}
		must(t, st.Reduce(row.op, dt, backend.Region{Buf: dst, Off: j * es, Len: es}, srcs, row.scale), "Reduce")
	}
	submitWait(t, st)
	got := readElems(t, backend.Region{Buf: dst, Len: len(rows) * es}, dt)
	for j, row := range rows {
		if !sameElem(dt, got[j], row.want) {
			t.Errorf("%v %v%v * %.6g: got %s, want %s (%s)", dt, row.op, fmtElems(dt, row.in), row.scale, FmtElem(dt, got[j]), FmtElem(dt, row.want), row.why)
		}
	}
}

// columns turns one element per source into sources of one element.
func columns(v []uint64) [][]uint64 {
	c := make([][]uint64, len(v))
	for i, x := range v {
		c[i] = []uint64{x}
	}
	return c
}

func fmtElems(dt backend.DType, v []uint64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = FmtElem(dt, x)
	}
	return "(" + strings.Join(s, ", ") + ")"
}

// Random cases.

// dtCase is one random reduction.
type dtCase struct {
	op      backend.Op
	k, n    int
	m       int // destinations of a ReduceMulti; 0 for Reduce
	scale   float64
	inPlace bool // the first destinations are the first sources
	off     int  // each region's offset in its buffer, in elements
}

func (c dtCase) String() string {
	s := fmt.Sprintf("%v/K=%d/n=%d", c.op, c.k, c.n)
	if c.m > 0 {
		s = fmt.Sprintf("%v/M=%d/K=%d/n=%d", c.op, c.m, c.k, c.n)
	}
	if c.scale != 1 {
		s += fmt.Sprintf("/scale=%.4g", c.scale)
	}
	if c.inPlace {
		s += "/in-place"
	}
	if c.off != 0 {
		s += fmt.Sprintf("/off=%d", c.off)
	}
	return s
}

// drawScale returns the scale of case c of dt: mostly 1, else a mean's 1/k
// (a division), and for the float types 0.3 (a multiply); integers take
// only 1 and 1/N.
func drawScale(dt backend.DType, c, k int) float64 {
	switch {
	case c%3 == 0:
		return 1
	case c%3 == 1 || dt.IsInt():
		return 1 / float64(max(k, 2))
	}
	return 0.3
}

// testDTypeReduce runs random reductions of dt: every size of dtypeSizes
// with every op of dt (opsOf: the bitwise and logical ones too for
// integers), K = 1..9 sources, one of 17 (three passes) per op, in place or
// not, at element offsets 0..3; and unless short one of 70001 elements
// (large enough to be split across work groups or goroutines). With
// Options.Sample half of the size and op pairs (a different half for the
// next type), every size and every op still among them.
func testDTypeReduce(t *testing.T, s *suite, dt backend.DType, r *rand.Rand) {
	needDType(t, s.dev, dt)
	var cases []dtCase
	ops := opsOf(dt)
	nc := len(dtypeSizes) * len(ops)
	for c := range nc + len(ops) {
		if s.opts.Sample && c < nc && (c/len(dtypeSizes)+int(dt))%2 != 0 {
			// Options.Sample: half the rounds of len(dtypeSizes) cases,
			// each of which takes every size and op (the draws below
			// change with it).
			continue
		}
		k := 1 + c%9
		if c >= nc {
			k = 17
		}
		cases = append(cases, dtCase{
			op: ops[c%len(ops)], k: k, n: dtypeSizes[c%len(dtypeSizes)],
			scale: drawScale(dt, c, k), inPlace: r.IntN(3) == 0, off: r.IntN(4),
		})
	}
	if !s.opts.Short {
		cases = append(cases, dtCase{op: ops[r.IntN(len(ops))], k: 3, n: 70001, scale: drawScale(dt, 1, 3), off: 1})
	}
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { runDTCase(t, s.dev, dt, r, c) })
	}
}

// testDTypeMulti runs random multi-destination reductions of dt (when the
// stream is a backend.MultiReducer): M = 1..9 destinations and K = 1..9
// sources (sample: Options.Sample's pairs), sizes and ops cycling, in place
// (dsts[j] == srcs[j]) or not.
func testDTypeMulti(t *testing.T, dev backend.Device, dt backend.DType, r *rand.Rand, sample bool) {
	needDType(t, dev, dt)
	if _, ok := dev.Stream().(backend.MultiReducer); !ok {
		t.Skipf("%s streams have no ReduceMulti", dev.Info().Backend)
	}
	c := 0
	ops := opsOf(dt)
	for m := 1; m <= 9; m++ {
		for k := 1; k <= 9; k++ {
			c++
			if sample && (m > 3 && m < 8 || k > 3 && k < 8) {
				continue
			}
			dc := dtCase{
				op: ops[c%len(ops)], k: k, m: m, n: dtypeSizes[c%len(dtypeSizes)],
				scale: drawScale(dt, c, k), inPlace: c%2 == 0, off: r.IntN(3),
			}
			t.Run(dc.String(), func(t *testing.T) { runDTCase(t, dev, dt, r, dc) })
		}
	}
}

// runDTCase writes c's random sources, records the reduction (ReduceMulti
// when c.m > 0) in one submission, and checks every destination against
// refElem bit for bit, that the sources that are not destinations are
// untouched, and the counters.
func runDTCase(t *testing.T, dev backend.Device, dt backend.DType, r *rand.Rand, c dtCase) {
	es := dt.Size()
	in := DrawInputs(r, dt, c.k, c.n, drawIn)
	srcs := make([]backend.Region, c.k)
	for i := range srcs {
		b := alloc(t, dev, (c.off+c.n)*es, alternate(i))
		srcs[i] = backend.Region{Buf: b, Off: c.off * es, Len: c.n * es}
		writeElems(t, b, srcs[i].Off, dt, in[i])
	}
	m := max(c.m, 1)
	dsts := make([]backend.Region, m)
	for j := range dsts {
		if c.inPlace && j < c.k {
			dsts[j] = srcs[j]
			continue
		}
		b := alloc(t, dev, (c.off+c.n)*es, alternate(j+1))
		dsts[j] = backend.Region{Buf: b, Off: c.off * es, Len: c.n * es}
		writeElems(t, b, dsts[j].Off, dt, DrawInputs(r, dt, 1, c.n, drawIn)[0]) // old contents
	}
	st := dev.Stream()
	before := dev.Counters().Snapshot()
	if c.m > 0 {
		must(t, st.(backend.MultiReducer).ReduceMulti(c.op, dt, dsts, srcs, c.scale), "ReduceMulti")
	} else {
		must(t, st.Reduce(c.op, dt, dsts[0], srcs, c.scale), "Reduce")
	}
	got := dev.Counters().Snapshot().Sub(before)
	submitWait(t, st)

	want := make([]uint64, c.n)
	for i := range want {
		want[i] = refElem(dt, c.op, in, i, c.scale)
	}
	mis := mismatches{t: t, what: fmt.Sprintf("%v %v", dt, c)}
	for j, d := range dsts {
		out := readElems(t, d, dt)
		for i := range out {
			if !sameElem(dt, out[i], want[i]) {
				args := make([]uint64, c.k)
				for s := range in {
					args[s] = in[s][i]
				}
				mis.add("dsts[%d][%d] = %s, want %s, from %s", j, i, FmtElem(dt, out[i]), FmtElem(dt, want[i]), fmtElems(dt, args))
			}
		}
	}
	for i := range srcs {
		if c.inPlace && i < m {
			continue // a destination
		}
		out := readElems(t, srcs[i], dt)
		for j := range out {
			if out[j] != in[i][j] {
				mis.add("source %d element %d was overwritten: %s, was %s", i, j, FmtElem(dt, out[j]), FmtElem(dt, in[i][j]))
				break
			}
		}
	}
	mis.done()

	if c.n == 0 {
		if got.Dispatches != 0 || got.BytesReduced != 0 {
			t.Errorf("empty reduction counted %d dispatches, %d bytes reduced", got.Dispatches, got.BytesReduced)
		}
		return
	}
	bytes := int64(c.n * es)
	p := passes(c.k)
	if c.m > 0 {
		if want := (p - 1 + int64(m)) * bytes; got.BytesReduced != want {
			t.Errorf("BytesReduced %d, want %d ((passes-1+M) x %d bytes)", got.BytesReduced, want, bytes)
		}
		if least := (p + int64((m-1)/8)) * pieces(c.n, es, dev.Info().MaxBindingBytes); got.Dispatches < least {
			t.Errorf("%d dispatches, want at least %d", got.Dispatches, least)
		}
		return
	}
	if want := p * bytes; got.BytesReduced != want {
		t.Errorf("BytesReduced %d, want %d (%d passes x %d bytes)", got.BytesReduced, want, p, bytes)
	}
	// A region that does not start on a binding boundary may cost a GPU an
	// extra piece per pass (it binds from an aligned-down offset): only the
	// least count is checked then.
	if want, extra := p*pieces(c.n, es, dev.Info().MaxBindingBytes), tails(p, c.n, es); got.Dispatches < want || c.off == 0 && got.Dispatches > want+extra {
		t.Errorf("%d dispatches, want %d (%d passes x pieces) or up to %d more tails", got.Dispatches, want, p, extra)
	}
}

// testDTypeScale checks Scale of dt: for 16-bit types by 1 (a copy), 0.25
// and 0.3 (multiplies), 1/3 and 1/7 (divisions) and 1e5 (overflowing to
// Inf), out of place and in place, against the element converted to
// float32, scaled as f32 is and rounded once; for integers by 1, a copy,
// bit for bit.
func testDTypeScale(t *testing.T, dev backend.Device, dt backend.DType, r *rand.Rand) {
	needDType(t, dev, dt)
	es := dt.Size()
	const n = 1031
	in := DrawInputs(r, dt, 1, n, drawIn)[0]
	src := alloc(t, dev, n*es, backend.HostVisible)
	writeElems(t, src, 0, dt, in)
	whole := func(b backend.Buffer) backend.Region { return backend.Region{Buf: b, Len: n * es} }
	scales := []float64{1}
	if dt.IsNarrowFloat() {
		scales = append(scales, 0.25, 0.3, 1.0/3, 1.0/7, 1e5)
	}
	if dt.IsInt() {
		scales = append(scales, 0.5, 1.0/3, 1.0/7, 1.0/4096) // a mean's 1/N: a division
	}
	st := dev.Stream()
	type out struct {
		what  string
		scale float64
		buf   backend.Buffer
	}
	var outs []out
	for _, sc := range scales {
		b := alloc(t, dev, n*es, backend.DeviceLocal)
		before := dev.Counters().Snapshot()
		must(t, st.Scale(dt, whole(b), whole(src), sc), "Scale")
		if got := dev.Counters().Snapshot().Sub(before); got.BytesReduced != int64(n*es) {
			t.Errorf("Scale by %v: BytesReduced %d, want %d", sc, got.BytesReduced, n*es)
		}
		outs = append(outs, out{"Scale", sc, b})
		p := alloc(t, dev, n*es, alternate(len(outs)))
		must(t, st.Copy(whole(p), whole(src)), "Copy")
		must(t, st.Scale(dt, whole(p), whole(p), sc), "Scale in place")
		outs = append(outs, out{"Scale in place", sc, p})
	}
	submitWait(t, st)
	for _, o := range outs {
		got := readElems(t, whole(o.buf), dt)
		mis := mismatches{t: t, what: fmt.Sprintf("%v %s by %.6g", dt, o.what, o.scale)}
		for i, x := range in {
			want := x
			switch {
			case dt.IsInt():
				want = refIntDiv(dt, x, o.scale)
			case o.scale != 1:
				want = uint64(from32(dt, scaleRef(to32(dt, uint16(x)), o.scale)))
			}
			if !sameElem(dt, got[i], want) {
				mis.add("element %d (%s): got %s, want %s", i, FmtElem(dt, x), FmtElem(dt, got[i]), FmtElem(dt, want))
			}
		}
		mis.done()
	}
}

// testIntScaleRefused checks that integers take only the scales 1 and a
// mean's 1/N (backend.IntScale): Reduce, ReduceMulti and Scale of dt with
// any other scale (1/N for an N no backend divides by exactly among them)
// fail with an error wrapping backend.ErrInvalidArgument, record nothing,
// and leave work recorded before them intact.
func testIntScaleRefused(t *testing.T, dev backend.Device, dt backend.DType) {
	needDType(t, dev, dt)
	es := dt.Size()
	const n = 8
	a := alloc(t, dev, 4*n*es, backend.DeviceLocal)
	reg := func(i int) backend.Region { return backend.Region{Buf: a, Off: i * n * es, Len: n * es} }
	in := []uint64{1, 2, 3, 4, 5, 6, 7, intMask(dt)}
	writeElems(t, a, 0, dt, in)
	st := dev.Stream()
	must(t, st.Reduce(backend.Sum, dt, reg(1), []backend.Region{reg(0), reg(0)}, 1), "Reduce with scale 1")
	must(t, st.Scale(dt, reg(2), reg(0), 1), "Scale by 1")
	before := dev.Counters().Snapshot()
	for _, sc := range []float64{0.3, 0.25 + 1e-9, 1.0 / 4097, 2, 0, -1, math.NaN(), math.Inf(1)} {
		what := fmt.Sprintf("Reduce of %v * %v", dt, sc)
		isErr(t, noPanic(t, what, func() error {
			return st.Reduce(backend.Sum, dt, reg(3), []backend.Region{reg(0), reg(1)}, sc)
		}), backend.ErrInvalidArgument, what)
		what = fmt.Sprintf("Scale of %v by %v", dt, sc)
		isErr(t, noPanic(t, what, func() error { return st.Scale(dt, reg(3), reg(0), sc) }), backend.ErrInvalidArgument, what)
		if mr, ok := st.(backend.MultiReducer); ok {
			what = fmt.Sprintf("ReduceMulti of %v * %v", dt, sc)
			isErr(t, noPanic(t, what, func() error {
				return mr.ReduceMulti(backend.Sum, dt, []backend.Region{reg(3), reg(2)}, []backend.Region{reg(0), reg(1)}, sc)
			}), backend.ErrInvalidArgument, what)
		}
	}
	if d := dev.Counters().Snapshot().Sub(before); d.Dispatches != 0 || d.BytesReduced != 0 {
		t.Errorf("refused calls were counted: %d dispatches, %d bytes reduced", d.Dispatches, d.BytesReduced)
	}
	submitWait(t, st)
	sum, copied := readElems(t, reg(1), dt), readElems(t, reg(2), dt)
	for i, x := range in {
		if want := refInt(dt, backend.Sum, x, x); sum[i] != want || copied[i] != x {
			t.Errorf("element %d (%s): sum %s, copy %s; want %s, %s", i, FmtElem(dt, x), FmtElem(dt, sum[i]), FmtElem(dt, copied[i]), FmtElem(dt, want), FmtElem(dt, x))
		}
	}
}

// testDTypeSplit checks reductions and Scale of dt on a device whose
// bindings hold at most 4096 bytes: the results, and one dispatch per pass
// per piece.
func testDTypeSplit(t *testing.T, dev backend.Device, dt backend.DType, r *rand.Rand) {
	needDType(t, dev, dt)
	es := dt.Size()
	limit := dev.Info().MaxBindingBytes
	if limit <= 0 || limit > 4096 {
		t.Fatalf("OpenOptions{MaxBindingBytes: 4096}: Info().MaxBindingBytes is %d, want 1..4096", limit)
	}
	for _, n := range []int{4096 / es, 4096/es + 1, 3*4096/es + 5} {
		for _, k := range []int{1, 3, 9, 17} {
			c := dtCase{op: allOps[(n+k)%len(allOps)], k: k, n: n, scale: drawScale(dt, k, k), off: 1}
			t.Run(c.String(), func(t *testing.T) {
				runDTCase(t, dev, dt, r, c)
				if t.Failed() {
					return
				}
				// Scale: one dispatch per piece.
				b := alloc(t, dev, n*es, backend.DeviceLocal)
				whole := backend.Region{Buf: b, Len: n * es}
				st := dev.Stream()
				before := dev.Counters().Snapshot()
				must(t, st.Scale(dt, whole, whole, 1), "Scale")
				got := dev.Counters().Snapshot().Sub(before)
				submitWait(t, st)
				if p := pieces(n, es, limit); got.Dispatches < p || got.Dispatches > p+tails(1, n, es) {
					t.Errorf("Scale of %d bytes, limit %d: %d dispatches, want %d (or one more tail)", n*es, limit, got.Dispatches, p)
				}
			})
		}
	}
}

// testDTypeSteady checks that Reduce, ReduceMulti (where the stream has it)
// and Scale of dt, submitted and waited for, allocate nothing in steady
// state, on sizes that take one block and several goroutines or work
// groups. Skipped under the race detector and -asan.
func testDTypeSteady(t *testing.T, dev backend.Device, dt backend.DType) {
	needDType(t, dev, dt)
	if raceEnabled || asanEnabled {
		t.Skip("allocation counts are meaningless under -race and -asan")
	}
	es := dt.Size()
	scale := 1.0
	if dt.IsNarrowFloat() {
		scale = 1.0 / 3
	}
	st := dev.Stream()
	mr, _ := st.(backend.MultiReducer)
	for _, n := range []int{1000, 1 << 17} {
		regs := make([]backend.Region, 4)
		for i := range regs {
			regs[i] = backend.Region{Buf: alloc(t, dev, n*es, alternate(i)), Len: n * es}
		}
		var err error
		step := func() {
			if err != nil {
				return
			}
			if err = st.Reduce(backend.Sum, dt, regs[0], regs[:3], scale); err != nil {
				return
			}
			if mr != nil {
				if err = mr.ReduceMulti(backend.Max, dt, regs[2:], regs[:2], 1); err != nil {
					return
				}
			}
			if err = st.Scale(dt, regs[1], regs[3], 1); err != nil {
				return
			}
			var f backend.Fence
			if f, err = st.Submit(); err != nil {
				return
			}
			err = f.Wait(context.Background())
		}
		for range 5 {
			step()
		}
		allocs := testing.AllocsPerRun(20, step)
		must(t, err, "Reduce+ReduceMulti+Scale+Submit+Wait")
		if allocs != 0 {
			t.Errorf("n=%d: %v allocations per Reduce+ReduceMulti+Scale+Submit+Wait of %v, want 0", n, allocs, dt)
		}
	}
}
