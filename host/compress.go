package host

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
)

// The host stream implements backend.Compressor with the same arithmetic as
// the GPU kernels (kernels/pack.comp, unpack.comp, topk.comp): conversions
// round to nearest even with integer arithmetic, so every backend produces
// the same bits.

var _ backend.Compressor = (*stream)(nil)

// Pack records dst = src (f32) converted to f, 2 bytes an element, the last
// word zero-padded for an odd count.
func (s *stream) Pack(f backend.WireFormat, dst, src backend.Region) error {
	if err := s.checkWire(f); err != nil {
		return fmt.Errorf("host: pack: %w", err)
	}
	sb, err := s.resolveElems(src, backend.F32)
	if err != nil {
		return fmt.Errorf("host: pack: src: %w", err)
	}
	db, err := s.resolve(dst)
	if err != nil {
		return fmt.Errorf("host: pack: dst: %w", err)
	}
	n := src.Len / 4
	if dst.Len != (2*n+3)&^3 {
		return fmt.Errorf("host: pack: dst has %d bytes for %d elements, want %d: %w", dst.Len, n, (2*n+3)&^3, backend.ErrInvalidArgument)
	}
	if overlap(dst, src) {
		return fmt.Errorf("host: pack: dst and src overlap: %w", backend.ErrInvalidArgument)
	}
	if n == 0 {
		return nil
	}
	s.cur.cmds = append(s.cur.cmds, command{kind: cmdPack, wire: f, dst: db, src: sb})
	s.d.counters.Dispatches.Add(1)
	s.d.counters.BytesReduced.Add(int64(dst.Len))
	return nil
}

// Unpack records dst (f32) = src in format f converted to f32.
func (s *stream) Unpack(f backend.WireFormat, dst, src backend.Region) error {
	if err := s.checkWire(f); err != nil {
		return fmt.Errorf("host: unpack: %w", err)
	}
	db, err := s.resolveElems(dst, backend.F32)
	if err != nil {
		return fmt.Errorf("host: unpack: dst: %w", err)
	}
	sb, err := s.resolve(src)
	if err != nil {
		return fmt.Errorf("host: unpack: src: %w", err)
	}
	n := dst.Len / 4
	if src.Len != (2*n+3)&^3 {
		return fmt.Errorf("host: unpack: src has %d bytes for %d elements, want %d: %w", src.Len, n, (2*n+3)&^3, backend.ErrInvalidArgument)
	}
	if overlap(dst, src) {
		return fmt.Errorf("host: unpack: dst and src overlap: %w", backend.ErrInvalidArgument)
	}
	if n == 0 {
		return nil
	}
	s.cur.cmds = append(s.cur.cmds, command{kind: cmdUnpack, wire: f, dst: db, src: sb})
	s.d.counters.Dispatches.Add(1)
	s.d.counters.BytesReduced.Add(int64(dst.Len))
	return nil
}

// TopK records the selection of the k largest-magnitude elements of src.
func (s *stream) TopK(dt backend.DType, src backend.Region, k int, idx, val backend.Region) error {
	if err := s.checkType(dt); err != nil {
		return fmt.Errorf("host: topk: %w", err)
	}
	if dt != backend.F32 && dt != backend.F64 {
		return fmt.Errorf("host: topk: %v elements (top-k selects f32 and f64 only): %w", dt, backend.ErrUnsupported)
	}
	sb, err := s.resolveElems(src, dt)
	if err != nil {
		return fmt.Errorf("host: topk: src: %w", err)
	}
	n := src.Len / dt.Size()
	if k < 1 || k > n {
		return fmt.Errorf("host: topk: k=%d for %d elements: %w", k, n, backend.ErrInvalidArgument)
	}
	ib, err := s.resolve(idx)
	if err != nil {
		return fmt.Errorf("host: topk: idx: %w", err)
	}
	vb, err := s.resolveElems(val, dt)
	if err != nil {
		return fmt.Errorf("host: topk: val: %w", err)
	}
	if idx.Len != 4*k || val.Len != k*dt.Size() {
		return fmt.Errorf("host: topk: idx has %d bytes, val %d, for k=%d: %w", idx.Len, val.Len, k, backend.ErrInvalidArgument)
	}
	s.cur.cmds = append(s.cur.cmds, command{kind: cmdTopK, dt: dt, src: sb, dst: vb, idx: ib, k: k})
	s.d.counters.Dispatches.Add(1)
	return nil
}

func (s *stream) checkWire(f backend.WireFormat) error {
	if s.d.closed.Load() {
		return errClosed
	}
	if f != backend.F16 && f != backend.BF16 {
		return fmt.Errorf("unknown wire format %d: %w", int(f), backend.ErrInvalidArgument)
	}
	return nil
}

// execCompress runs a pack, unpack or top-k command.
func execCompress(c *command) {
	switch c.kind {
	case cmdPack:
		src := view[float32](c.src)
		for i := 0; i < len(src); i += 2 {
			lo := toWire(c.wire, src[i])
			var hi uint16
			if i+1 < len(src) {
				hi = toWire(c.wire, src[i+1])
			}
			binary.LittleEndian.PutUint32(c.dst[2*i:], uint32(lo)|uint32(hi)<<16)
		}
	case cmdUnpack:
		dst := view[float32](c.dst)
		for i := range dst {
			dst[i] = fromWire(c.wire, binary.LittleEndian.Uint16(c.src[2*i:]))
		}
	case cmdTopK:
		if c.dt == backend.F64 {
			topK(view[float64](c.src), c.k, c.idx, view[float64](c.dst))
		} else {
			topK(view[float32](c.src), c.k, c.idx, view[float32](c.dst))
		}
	}
}

func toWire(f backend.WireFormat, x float32) uint16 {
	if f == backend.BF16 {
		return F32ToBF16(x)
	}
	return F32ToF16(x)
}

func fromWire(f backend.WireFormat, h uint16) float32 {
	if f == backend.BF16 {
		return math.Float32frombits(uint32(h) << 16)
	}
	return F16ToF32(h)
}

// F32ToF16 converts to IEEE binary16, rounding to nearest even; overflow
// gives +-Inf, NaN stays a (quiet) NaN.
func F32ToF16(f float32) uint16 { return hostmath.F32ToF16(f) }

// F16ToF32 converts IEEE binary16 to f32 exactly.
func F16ToF32(h uint16) float32 { return hostmath.F16ToF32(h) }

// F32ToBF16 converts to bfloat16, rounding to nearest even; NaN stays NaN.
func F32ToBF16(f float32) uint16 { return hostmath.F32ToBF16(f) }

// topK writes the indices (uint32, increasing) and values of the k
// largest-magnitude elements of x (NaN largest, ties to the lower index).
func topK[T float](x []T, k int, idx []byte, val []T) {
	key := func(i int) float64 {
		v := float64(x[i])
		if v != v {
			return math.Inf(1)
		}
		return math.Abs(v)
	}
	order := make([]int, len(x))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return key(order[a]) > key(order[b]) })
	sel := order[:k]
	sort.Ints(sel)
	for j, i := range sel {
		binary.LittleEndian.PutUint32(idx[4*j:], uint32(i))
		val[j] = x[i]
	}
}
