// Package premul is the arithmetic and the handles of PreMulSum (NCCL's
// ncclRedOpCreatePreMulSum): a comm's table of the scalars its op handles
// stand for, the rule a scalar meets for an element type, and one rank's
// input multiplied by its scalar on the CPU (the kernels' Scale, bit for
// bit, for the float types) into pooled memory, before the sum.
package premul

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
)

// Base is the first handle: every handle is Base plus a number issued once
// per process, so a handle names one table (one comm) and is never reused.
const Base = 1 << 24

// issued counts the handles of the process.
var issued atomic.Int64

// IsHandle reports whether op is in the handles' range (made by some
// table, perhaps released since).
func IsHandle(op int) bool { return op >= Base }

// Table is a comm's live handles and their scalars. Its methods are safe
// for concurrent use.
type Table struct {
	mu sync.Mutex
	m  map[int]float64
}

// Create returns a new handle standing for scalar.
func (t *Table) Create(scalar float64) (int, error) {
	id := issued.Add(1)
	if id > math.MaxInt32-Base { // an Op is an int: 32 bits on some platforms
		return 0, fmt.Errorf("the process made %d PreMulSum handles: no more", id-1)
	}
	h := Base + int(id)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[int]float64)
	}
	t.m[h] = scalar
	return h, nil
}

// Destroy releases handle h; it reports whether h was live in t.
func (t *Table) Destroy(h int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.m[h]
	delete(t.m, h)
	return ok
}

// Scalar returns the scalar of handle h, and whether h is live in t.
func (t *Table) Scalar(h int) (float64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[h]
	return s, ok
}

// Check returns an error where scalar is not one element type dt takes: an
// integer type takes an integral value representable in the type (the
// product then wraps, as the sum does); the float types take any value.
func Check(dt backend.DType, scalar float64) error {
	if !dt.IsInt() {
		return nil
	}
	bits := 8 * dt.Size()
	lo, hi := 0.0, math.Ldexp(1, bits) // [lo, hi)
	if dt.Signed() {
		lo, hi = -math.Ldexp(1, bits-1), math.Ldexp(1, bits-1)
	}
	if scalar != math.Trunc(scalar) || scalar < lo || scalar >= hi {
		return fmt.Errorf("PreMulSum scalar %v is not an integer of type %s (in [%v, %v])", scalar, dt, lo, hi-1)
	}
	return nil
}

// Scale sets dst to src (elements of dt) multiplied by scalar, as the rule
// of PreMulSum has it: float32 and float64 multiplied in their own type by
// the scalar converted to it, the 16- and 8-bit floats widened to float32,
// multiplied there and rounded once to the type (to nearest even); a scalar
// of exactly 1 copies, and one of exactly 1/N (backend.Divisor) divides by
// N, correctly rounded, as the kernels' Scale does. Integers multiply by
// the integral scalar (Check) and wrap. dst and src have the same length;
// dst may be src.
func Scale(dt backend.DType, dst, src []byte, scalar float64) {
	n := len(src) / dt.Size()
	if !dt.IsInt() {
		hostmath.ReduceStrided(dt, backend.Sum, dst, src, n, 0, 1, n, scalar)
		return
	}
	muls[dt](dst, src, scalar)
}

// Fill sets every element of dst (elements of the integer type dt) to the
// integral scalar (Check): the second operand of a Prod kernel that
// multiplies a tensor by it.
func Fill(dt backend.DType, dst []byte, scalar float64) {
	es := dt.Size()
	if len(dst) < es {
		return
	}
	clear(dst[:es])
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		dst[0] = 1
	} else {
		dst[es-1] = 1
	}
	for n := es; n < len(dst); n *= 2 {
		copy(dst[n:], dst[:n])
	}
	muls[dt](dst, dst, scalar)
}

// Filled is what a pooled buffer of an integer scalar (the second operand
// of the Prod kernel a tensor is multiplied by) holds, so a call with the
// same scalar, type and buffer reuses it instead of writing it again: a
// comm's PreMulSum op keeps its scalar for its life, so a training loop's
// repeated calls fill the buffer once.
type Filled struct {
	buf    backend.Buffer
	dt     backend.DType
	scalar uint64 // the scalar's bits
	n      int    // the elements filled (0: none)
	// Fills counts the times the buffer was written.
	Fills uint64
}

// Fill makes the first n elements of buf, a host-visible buffer of at
// least n elements of the integer type dt, hold the integral scalar
// (Check), writing them only where buf does not hold them already: another
// buffer (a grown one), another type or scalar, or more elements than were
// filled.
func (f *Filled) Fill(buf backend.Buffer, dt backend.DType, n int, scalar float64) {
	bits := math.Float64bits(scalar)
	if buf == f.buf && dt == f.dt && bits == f.scalar && n <= f.n {
		return
	}
	Fill(dt, buf.Bytes()[:n*dt.Size()], scalar)
	f.buf, f.dt, f.scalar, f.n = buf, dt, bits, n
	f.Fills++
}

// muls multiplies the elements of each integer type by an integral scalar.
var muls = [backend.NumDTypes]func(dst, src []byte, scalar float64){
	backend.I8: mulSigned[int8], backend.I16: mulSigned[int16], backend.I32: mulSigned[int32], backend.I64: mulSigned[int64],
	backend.U8: mulUnsigned[uint8], backend.U16: mulUnsigned[uint16], backend.U32: mulUnsigned[uint32], backend.U64: mulUnsigned[uint64],
}

// mulSigned multiplies elements of a signed type by scalar.
func mulSigned[T hostmath.Integer](dst, src []byte, scalar float64) {
	mul(hostmath.View[T](dst), hostmath.View[T](src), T(int64(scalar)))
}

// mulUnsigned multiplies elements of an unsigned type by scalar.
func mulUnsigned[T hostmath.Integer](dst, src []byte, scalar float64) {
	mul(hostmath.View[T](dst), hostmath.View[T](src), T(uint64(scalar)))
}

// mul sets dst[i] = src[i] * s, wrapping.
func mul[T hostmath.Integer](dst, src []T, s T) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = v * s
	}
}

// Scratch is pooled host memory a rank's scaled input is written into:
// grown on demand, reused while large enough, aligned for every element
// type. One goroutine uses it at a time.
type Scratch struct {
	words []uint64
}

// Bytes returns n bytes of the scratch (nil for 0).
func (s *Scratch) Bytes(n int) []byte {
	if n == 0 {
		return nil
	}
	w := (n + 7) / 8
	if cap(s.words) < w {
		s.words = make([]uint64, w+w/4)
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s.words))), n)
}
