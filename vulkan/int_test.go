//go:build cgo && !novulkan

package vulkan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/backend/backendtest"
)

// The 32-bit integer kernels (reduce_i32/u32, their 16-byte and
// multi-destination variants), checked against Go's int32 and uint32
// arithmetic, which wraps as the kernels must.

type int32s interface{ ~int32 | ~uint32 }

// intSpecial are the inputs that exercise wrapping and signedness: the
// extremes of both types, -1 (the largest uint32), powers of two whose
// products wrap to 0.
var intSpecial = []int64{0, 1, -1, 2, -2, math.MaxInt32, math.MinInt32, math.MaxInt32 - 1, math.MinInt32 + 1, 1 << 16, 1 << 31, 3, 7}

func intValue[T int32s](rng *rand.Rand) T {
	switch rng.IntN(4) {
	case 0:
		return T(intSpecial[rng.IntN(len(intSpecial))])
	case 1:
		return T(rng.IntN(9) - 4)
	}
	return T(rng.Uint32())
}

func intDType[T int32s]() backend.DType {
	var z T
	if z-1 > 0 {
		return backend.U32
	}
	return backend.I32
}

// combineInt is op in T: Go's + and * wrap, max and min compare in T.
func combineInt[T int32s](op backend.Op, a, b T) T {
	switch op {
	case backend.Sum:
		return a + b
	case backend.Prod:
		return a * b
	case backend.Max:
		return max(a, b)
	}
	return min(a, b)
}

func intRef[T int32s](op backend.Op, srcs [][]T) []T {
	out := append([]T(nil), srcs[0]...)
	for _, s := range srcs[1:] {
		for i := range out {
			out[i] = combineInt(op, out[i], s[i])
		}
	}
	return out
}

func putInt[T int32s](t testing.TB, b backend.Buffer, off int, v []T) {
	t.Helper()
	p := make([]byte, 4*len(v))
	for i, x := range v {
		binary.NativeEndian.PutUint32(p[4*i:], uint32(x))
	}
	if err := b.Write(off, p); err != nil {
		t.Fatal(err)
	}
}

func getInt[T int32s](t testing.TB, b backend.Buffer, off, n int) []T {
	t.Helper()
	p := make([]byte, 4*n)
	if err := b.Read(off, p); err != nil {
		t.Fatal(err)
	}
	v := make([]T, n)
	for i := range v {
		v[i] = T(binary.NativeEndian.Uint32(p[4*i:]))
	}
	return v
}

func compareInt[T int32s](t testing.TB, what string, got, want []T) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: element %d of %d: got %d, want %d", what, i, len(want), got[i], want[i])
		}
	}
}

// intPasses is how many passes Reduce takes for k sources: 8, then 7 more
// at a time.
func intPasses(k int) int64 {
	if k <= 8 {
		return 1
	}
	return 1 + int64((k-8+6)/7)
}

// intLayout places the regions of a reduction: element offsets of each
// source and of the destination.
type intLayout struct {
	name string
	src  func(i int) int
	dst  int
	vec  bool // every region starts on 16 bytes
	// last: only the last source is misaligned, so every pass but the
	// last (the one that reads it) runs the 16-byte kernel.
	last bool
}

var intLayouts = []intLayout{
	{"aligned", func(i int) int { return (i % 3) * 4 }, 8, true, false},
	{"misaligned", func(i int) int { return i%4 + 1 }, 1, false, false},
	{"dst misaligned", func(i int) int { return 4 }, 3, false, false},
	{"last src misaligned", func(i int) int { return 4 + 3*btoi(i == 16) }, 4, false, true},
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestIntReduce: Reduce of int32 and uint32 on the GPU for every op, 1 to
// 17 sources (more than 8 take several passes), with the 16-byte kernel on
// aligned regions (and the scalar one on a tail), the scalar kernel on
// misaligned ones, and in place (dst the first or the last source), bit for
// bit against Go's arithmetic; the same with the 16-byte kernels off.
func TestIntReduce(t *testing.T) {
	arithmetic(t)
	d := openDevice(t, backend.OpenOptions{})
	if k := d.Info().Kernels; !k.Has(backend.I32) || !k.Has(backend.U32) {
		t.Fatalf("Info().Kernels = %b: no int32/uint32", k)
	}
	t.Run("int32", func(t *testing.T) { intReduce[int32](t, d) })
	t.Run("uint32", func(t *testing.T) { intReduce[uint32](t, d) })
}

func intReduce[T int32s](t *testing.T, d *device) {
	const maxK, pad = 17, 16
	dt := intDType[T]()
	sizes := []int{1, 3, 4, 8, 1024, 1027, 65536 + 5}
	maxN := sizes[len(sizes)-1]
	rng := rand.New(rand.NewPCG(11, uint64(dt)))
	srcs := make([][]T, maxK)
	bufs := make([]backend.Buffer, maxK)
	for i := range srcs {
		srcs[i] = make([]T, maxN+pad)
		for j := range srcs[i] {
			srcs[i][j] = intValue[T](rng)
		}
		mem := backend.DeviceLocal
		if i%2 == 1 {
			mem = backend.HostVisible
		}
		bufs[i] = alloc(t, d, (maxN+pad)*4, mem)
		putInt(t, bufs[i], 0, srcs[i])
	}
	dst := alloc(t, d, (maxN+pad)*4, backend.HostVisible)
	s := d.Stream()
	for _, n := range sizes {
		for _, lay := range intLayouts {
			for oi, op := range ops {
				for _, k := range []int{1, 2, 3, 8, 9, 17} {
					if lay.name == "last src misaligned" && k < maxK {
						continue
					}
					if n > 2000 && (k == 2 || k == 3) && oi > 0 {
						continue // keep the large size to the cases that matter
					}
					regs := make([]backend.Region, k)
					in := make([][]T, k)
					for i := range regs {
						off := lay.src(i)
						regs[i] = backend.Region{Buf: bufs[i], Off: off * 4, Len: n * 4}
						in[i] = srcs[i][off : off+n]
					}
					want := intRef(op, in)
					out := backend.Region{Buf: dst, Off: lay.dst * 4, Len: n * 4}
					what := fmt.Sprintf("%v n=%d %s %v k=%d", dt, n, lay.name, op, k)
					for _, scalar := range []bool{false, true} {
						putInt(t, dst, 0, make([]T, maxN+pad))
						d.ScalarOnly(scalar)
						before, vb := d.Counters().Snapshot(), d.VecDispatches()
						err := s.Reduce(op, dt, out, regs, 1)
						d.ScalarOnly(false)
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						wait(t, s)
						got, vec := d.Counters().Snapshot().Sub(before), d.VecDispatches()-vb
						compareInt(t, fmt.Sprintf("%s scalar-only %v", what, scalar), getInt[T](t, dst, out.Off, n), want)
						p := intPasses(k)
						wantD, wantV := p, int64(0)
						if !scalar && n >= 4 {
							switch {
							case lay.vec:
								wantV = p
							case lay.last:
								wantV = p - 1
							}
							if n%4 != 0 {
								wantD += wantV // 16-byte bodies and scalar tails
							}
						}
						if got.Dispatches != wantD || vec != wantV {
							t.Errorf("%s scalar-only %v: %d dispatches (%d 16-byte), want %d (%d)", what, scalar, got.Dispatches, vec, wantD, wantV)
						}
						if w := p * int64(n*4); got.BytesReduced != w {
							t.Errorf("%s: BytesReduced %d, want %d", what, got.BytesReduced, w)
						}
					}
				}
			}
		}
	}
	// In place: dst is the first source, or the last of 17 (whose partial
	// results then go to scratch).
	for _, n := range []int{1027, 4096} {
		for _, op := range ops {
			for _, at := range []int{0, 16} {
				regs := make([]backend.Region, maxK)
				in := make([][]T, maxK)
				for i := range regs {
					regs[i] = backend.Region{Buf: bufs[i], Off: 4 * 4, Len: n * 4}
					in[i] = srcs[i][4 : 4+n]
				}
				want := intRef(op, in)
				if err := s.Reduce(op, dt, regs[at], regs, 1); err != nil {
					t.Fatal(err)
				}
				wait(t, s)
				compareInt(t, fmt.Sprintf("%v in place at %d n=%d %v", dt, at, n, op), getInt[T](t, bufs[at], regs[at].Off, n), want)
				putInt(t, bufs[at], 0, srcs[at]) // restore
			}
		}
	}
}

// TestIntReduceMulti: ReduceMulti of int32 and uint32, 1 to 9 destinations
// (in place: dsts[j] is srcs[j]) from 1 to 17 sources, aligned (16-byte
// reducem kernels) and not, against Go's arithmetic; sources that are not
// destinations stay untouched.
func TestIntReduceMulti(t *testing.T) {
	arithmetic(t)
	d := openDevice(t, backend.OpenOptions{})
	t.Run("int32", func(t *testing.T) { intReduceMulti[int32](t, d) })
	t.Run("uint32", func(t *testing.T) { intReduceMulti[uint32](t, d) })
}

func intReduceMulti[T int32s](t *testing.T, d *device) {
	dt := intDType[T]()
	rng := rand.New(rand.NewPCG(13, uint64(dt)))
	mr := d.Stream().(backend.MultiReducer)
	c := 0
	for _, n := range []int{5, 1024, 3001} {
		for _, off := range []int{0, 1} {
			for _, m := range []int{1, 3, 9} {
				for _, k := range []int{1, 2, 8, 9, 17} {
					for _, inPlace := range []bool{false, true} {
						c++
						op := ops[c%len(ops)]
						in := make([][]T, k)
						srcs := make([]backend.Region, k)
						for i := range srcs {
							in[i] = make([]T, n)
							for j := range in[i] {
								in[i][j] = intValue[T](rng)
							}
							mem := backend.DeviceLocal
							if i%2 == 1 {
								mem = backend.HostVisible
							}
							srcs[i] = backend.Region{Buf: alloc(t, d, (n+4)*4, mem), Off: off * 4, Len: n * 4}
							putInt(t, srcs[i].Buf, srcs[i].Off, in[i])
						}
						dsts := make([]backend.Region, m)
						for j := range dsts {
							if inPlace && j < k {
								dsts[j] = srcs[j]
								continue
							}
							dsts[j] = backend.Region{Buf: alloc(t, d, (n+4)*4, backend.HostVisible), Off: off * 4, Len: n * 4}
						}
						want := intRef(op, in)
						what := fmt.Sprintf("%v n=%d off=%d %v M=%d K=%d in place %v", dt, n, off, op, m, k, inPlace)
						vb := d.VecDispatches()
						if err := mr.ReduceMulti(op, dt, dsts, srcs, 1); err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						wait(t, d.Stream())
						if vec := d.VecDispatches() - vb; (vec > 0) != (off == 0) {
							t.Errorf("%s: %d 16-byte dispatches", what, vec)
						}
						for j, r := range dsts {
							compareInt(t, fmt.Sprintf("%s: dsts[%d]", what, j), getInt[T](t, r.Buf, r.Off, n), want)
						}
						for i := range srcs {
							if inPlace && i < m {
								continue
							}
							compareInt(t, fmt.Sprintf("%s: srcs[%d]", what, i), getInt[T](t, srcs[i].Buf, srcs[i].Off, n), in[i])
						}
					}
				}
			}
		}
	}
}

// TestIntScale: Scale of int32 and uint32 by 1 is a copy by the integer
// reduce kernel (a dispatch, its bytes in BytesReduced; in place too), with
// the 16-byte kernel where aligned; any scale but 1 and a mean's 1/N
// (backend.IntScale), in Scale, Reduce and ReduceMulti, is an invalid
// argument that records nothing (backendtest checks the divisions).
func TestIntScale(t *testing.T) {
	d := openDevice(t, backend.OpenOptions{})
	for _, dt := range []backend.DType{backend.I32, backend.U32} {
		t.Run(dt.String(), func(t *testing.T) {
			const n = 1027
			rng := rand.New(rand.NewPCG(17, uint64(dt)))
			in := make([]uint32, n)
			for i := range in {
				in[i] = intValue[uint32](rng)
			}
			s := d.Stream()
			for _, off := range []int{0, 1} {
				src := alloc(t, d, (n+1)*4, backend.HostVisible)
				dst := alloc(t, d, (n+1)*4, backend.DeviceLocal)
				putInt(t, src, off*4, in)
				sr := backend.Region{Buf: src, Off: off * 4, Len: n * 4}
				dr := backend.Region{Buf: dst, Off: off * 4, Len: n * 4}
				before, vb := d.Counters().Snapshot(), d.VecDispatches()
				if err := s.Scale(dt, dr, sr, 1); err != nil {
					t.Fatal(err)
				}
				if err := s.Scale(dt, sr, sr, 1); err != nil {
					t.Fatal(err)
				}
				wait(t, s)
				got, vec := d.Counters().Snapshot().Sub(before), d.VecDispatches()-vb
				wantD, wantV := int64(2), int64(0)
				if off == 0 {
					wantD, wantV = 4, 2 // 16-byte body and a scalar tail, twice
				}
				if got.Dispatches != wantD || vec != wantV || got.BytesReduced != 2*n*4 || got.Copies != 0 {
					t.Errorf("offset %d: %d dispatches (%d 16-byte), %d bytes reduced, %d copies; want %d (%d), %d, 0",
						off, got.Dispatches, vec, got.BytesReduced, got.Copies, wantD, wantV, 2*n*4)
				}
				compareInt(t, fmt.Sprintf("copy at offset %d", off), getInt[uint32](t, dst, off*4, n), in)
				compareInt(t, fmt.Sprintf("in place at offset %d", off), getInt[uint32](t, src, off*4, n), in)
			}

			a := alloc(t, d, 64, backend.DeviceLocal)
			r := func(i int) backend.Region { return backend.Region{Buf: a, Off: 16 * i, Len: 16} }
			mr := s.(backend.MultiReducer)
			before := d.Counters().Snapshot()
			for _, sc := range []float64{0.3, 1.0 / 4097, 2, 0, -1, math.NaN(), math.Inf(1)} {
				for name, err := range map[string]error{
					"Scale":       s.Scale(dt, r(0), r(1), sc),
					"Reduce":      s.Reduce(backend.Sum, dt, r(0), []backend.Region{r(1), r(2)}, sc),
					"ReduceMulti": mr.ReduceMulti(backend.Max, dt, []backend.Region{r(0), r(3)}, []backend.Region{r(1), r(2)}, sc),
				} {
					if !errors.Is(err, backend.ErrInvalidArgument) {
						t.Errorf("%s of %v by %v: %v, want ErrInvalidArgument", name, dt, sc, err)
					}
				}
			}
			if s.(*stream).Recorded() {
				t.Error("a refused call recorded work")
			}
			if got := d.Counters().Snapshot().Sub(before); got.Dispatches != 0 || got.BytesReduced != 0 {
				t.Errorf("refused calls counted %d dispatches, %d bytes", got.Dispatches, got.BytesReduced)
			}
		})
	}
}

// TestEveryPipeline creates every reduce, scale and multi-destination
// pipeline the stream can ask for (the integer ones included), so that a
// kernel the driver rejects fails by name. Unless full, of each kind and op
// the kernels of 1, 8 and one source count between drawn from the seed
// (each pipeline costs lavapipe a compilation; the other tests create the
// source counts they reduce with).
func TestEveryPipeline(t *testing.T) {
	arithmetic(t)
	var sample *rand.Rand
	if !fullRun() {
		sample = rand.New(rand.NewPCG(backendtest.RandomSeed(t, seedEnv), 0xe7e))
	}
	if err := openDevice(t, backend.OpenOptions{}).EveryPipeline(sample); err != nil {
		t.Fatal(err)
	}
}
