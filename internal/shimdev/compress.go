//go:build cgo

package shimdev

import (
	"math"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/cshim"
	"github.com/gocoll/gocoll/kernels"
)

// The stream implements backend.Compressor with the kernels pack, unpack and
// topk_f32/f64 (kernels/*.comp). Their results are bit for bit those of the
// host backend (host/compress.go): the conversions round to nearest even
// with integer arithmetic, and the top-k selection is exact.
//
// Top-k runs entirely on the device, as dispatches of the one submission:
// a radix select on the magnitude key (|x| as an unsigned integer, NaN
// mapped to the key of +Inf, as the host does: 8-bit digits, 4 passes for
// f32 and 8 for f64, each a histogram kernel and a one-work-group select
// kernel), then a stable compaction (per-block counts, a one-work-group scan
// of the blocks, a scatter), so indices and values come out in increasing
// index order. Its work buffer is owned by the stream, grown on demand and
// reused. src, idx and val must each fit one binding (MaxBindingBytes
// beyond their offset's alignment): a larger src gives an error wrapping
// backend.ErrUnsupported.
//
// Packed regions (Pack's dst, Unpack's src) and TopK's idx may start at any
// byte offset, as on the host; one not on a 4-byte boundary goes through a
// stream-owned temporary buffer and a copy command.
var _ backend.Compressor = (*Stream)(nil)

// Compression kernels, indexing compressState.
const (
	ckPack = iota
	ckUnpack
	ckTopKF32
	ckTopKF64
	numCK
)

var ckNames = [numCK]string{"pack", "unpack", "topk_f32", "topk_f64"}

// ckSpec is the name of each kernel's own specialization constant: the wire
// format (0 half, 1 bfloat16) of pack and unpack, the stage of topk.
var ckSpec = [numCK]string{"WIRE", "WIRE", "STAGE", "STAGE"}

// Top-k stages (kernels/topk.comp) and geometry.
const (
	topkInit = iota
	topkHist
	topkSelect
	topkCount
	topkScan
	topkScatter
	numTopKStages

	topkItems     = 16  // ITEMS: elements a thread owns in COUNT and SCATTER
	topkHistItems = 16  // elements a HIST invocation reads, at least
	topkBlocks    = 260 // BLOCKS: words of work before the per-block counts
)

// Push-constant layouts.
const (
	// pack, unpack: uint n, dst_off, src_off.
	ppN      = 0
	ppDstOff = 4
	ppSrcOff = 8
	// topk: uint n, k, shift, idx_off, val_off, src_off.
	ptN      = 0
	ptK      = 4
	ptShift  = 8
	ptIdxOff = 12
	ptValOff = 16
	ptSrcOff = 20
)

// tmpChunkElems is how many elements a Pack or Unpack of a misaligned
// packed region moves through the temporary buffer at a time.
const tmpChunkElems = 1 << 20

// compressState holds the compression kernels' pipelines and scratch
// buffers. Only the stream's goroutine touches it.
type compressState struct {
	ready  bool
	info   [numCK]kernels.Info
	specID [numCK]uint32
	// pipes caches pipelines by kernel and the value of its own constant.
	pipes [numCK][numTopKStages]*cshim.Kernel
	work  *Buffer // topk: histogram, state, per-block counts
	tmp   *Buffer // packed data or indices not on a 4-byte boundary
}

func (c *compressState) setup(d *Device) error {
	if c.ready {
		return nil
	}
	for k, name := range ckNames {
		info, err := kernels.Lookup(name)
		if err != nil {
			return d.errorf("%w", err)
		}
		found := false
		for _, sc := range info.Spec {
			if sc.Name == ckSpec[k] {
				c.specID[k], found = uint32(sc.ID), true
			}
		}
		if !found || info.WorkGroupSizeSpecID < 0 {
			return d.errorf("kernel %s lacks the %s or work-group size constant", name, ckSpec[k])
		}
		c.info[k] = info
	}
	c.ready = true
	return nil
}

// compressPipeline returns the cached pipeline of kernel ck with its own
// constant set to v, creating it on first use.
func (s *Stream) compressPipeline(ck int, v uint32) (*cshim.Kernel, error) {
	c := &s.comp
	if err := c.setup(s.d); err != nil {
		return nil, err
	}
	if p := c.pipes[ck][v]; p != nil {
		return p, nil
	}
	d := s.d
	info := &c.info[ck]
	spec := []cshim.SpecConstant{{ID: uint32(info.WorkGroupSizeSpecID), Value: d.wg}, {ID: c.specID[ck], Value: v}}
	p, err := d.newKernel(info, spec)
	if err != nil {
		return nil, d.errorf("pipeline %s (%s %d): %w", info.Name, ckSpec[ck], v, err)
	}
	c.pipes[ck][v] = p
	return p, nil
}

// grow returns *b, replaced by a new device-local buffer of at least n bytes
// when it is smaller (the old one is freed once the work using it is done).
func (s *Stream) grow(b **Buffer, n int) (*Buffer, error) {
	if *b != nil && (*b).n >= n {
		return *b, nil
	}
	size := max(n, 256)
	if *b != nil {
		size = max(size, 2*(*b).n)
	}
	nb, err := s.d.newBuffer(size, backend.DeviceLocal)
	if err != nil {
		return nil, err
	}
	if *b != nil {
		(*b).Close()
	}
	*b = nb
	return nb, nil
}

// overlap reports whether two non-empty regions share a byte.
func overlap(a, b backend.Region) bool {
	return a.Buf == b.Buf && a.Len > 0 && b.Len > 0 && a.Off < b.Off+b.Len && b.Off < a.Off+a.Len
}

func packedLen(n int) int { return (2*n + 3) &^ 3 }

func wireIndex(f backend.WireFormat) uint32 {
	if f == backend.BF16 {
		return 1
	}
	return 0
}

// checkWire is the common start of Pack and Unpack.
func (s *Stream) checkWire(op string, f backend.WireFormat) error {
	if s.d.closed.Load() {
		return s.d.errClosed(op)
	}
	if f != backend.F16 && f != backend.BF16 {
		return s.d.errorf("%s: unknown wire format %d: %w", op, int(f), backend.ErrInvalidArgument)
	}
	return nil
}

// Pack records dst = src (f32) converted to f, 2 bytes an element, the last
// word zero-padded for an odd count (dst.Len == (2n+3)&^3), with the pack
// kernel: one dispatch per piece that fits the binding limit.
func (s *Stream) Pack(f backend.WireFormat, dst, src backend.Region) error {
	const op = "pack"
	if err := s.checkWire(op, f); err != nil {
		return err
	}
	if _, err := s.region(op, "src", src, 4); err != nil {
		return err
	}
	if _, err := s.region(op, "dst", dst, 1); err != nil {
		return err
	}
	n := src.Len / 4
	if dst.Len != packedLen(n) {
		return s.d.errorf("pack: dst has %d bytes for %d elements, want %d: %w", dst.Len, n, packedLen(n), backend.ErrInvalidArgument)
	}
	if overlap(dst, src) {
		return s.d.errorf("pack: dst and src overlap: %w", backend.ErrInvalidArgument)
	}
	if n == 0 {
		return nil
	}
	if err := s.convert(ckPack, f, dst, src, n); err != nil {
		return err
	}
	s.d.counters.CountHost(dst, src)
	return s.d.check(op)
}

// Unpack records dst (f32) = src in format f converted to f32, with the
// unpack kernel.
func (s *Stream) Unpack(f backend.WireFormat, dst, src backend.Region) error {
	const op = "unpack"
	if err := s.checkWire(op, f); err != nil {
		return err
	}
	if _, err := s.region(op, "dst", dst, 4); err != nil {
		return err
	}
	if _, err := s.region(op, "src", src, 1); err != nil {
		return err
	}
	n := dst.Len / 4
	if src.Len != packedLen(n) {
		return s.d.errorf("unpack: src has %d bytes for %d elements, want %d: %w", src.Len, n, packedLen(n), backend.ErrInvalidArgument)
	}
	if overlap(dst, src) {
		return s.d.errorf("unpack: dst and src overlap: %w", backend.ErrInvalidArgument)
	}
	if n == 0 {
		return nil
	}
	if err := s.convert(ckUnpack, f, dst, src, n); err != nil {
		return err
	}
	s.d.counters.CountHost(dst, src)
	return s.d.check(op)
}

// convert records a pack (ck == ckPack: wide = src, packed = dst) or an
// unpack (wide = dst, packed = src) of n elements. A packed region off a
// 4-byte boundary goes through the temporary buffer in chunks.
func (s *Stream) convert(ck int, f backend.WireFormat, dst, src backend.Region, n int) error {
	k, err := s.compressPipeline(ck, wireIndex(f))
	if err != nil {
		return err
	}
	packed, wide := dst, src
	if ck == ckUnpack {
		packed, wide = src, dst
	}
	if packed.Off%4 == 0 {
		return s.convertRange(k, ck, packed, wide, 0, n)
	}
	d := s.d
	chunk := min(n, tmpChunkElems)
	tb, err := s.grow(&s.comp.tmp, packedLen(chunk))
	if err != nil {
		return err
	}
	for p := 0; p < n; p += chunk {
		m := min(chunk, n-p)
		bytes := packedLen(m) // the last chunk's includes the padding
		tmp := backend.Region{Buf: tb, Len: bytes}
		w := backend.Region{Buf: wide.Buf, Off: wide.Off + 4*p, Len: 4 * m}
		at := int64(packed.Off + 2*p)
		if ck == ckUnpack {
			if err := d.dev.CmdCopy(tb.b, 0, packed.Buf.(*Buffer).b, at, int64(bytes)); err != nil {
				return d.errorf("unpack: %w", err)
			}
			s.countCopy(bytes)
		}
		if err := s.convertRange(k, ck, tmp, w, 0, m); err != nil {
			return err
		}
		if ck == ckPack {
			if err := d.dev.CmdCopy(packed.Buf.(*Buffer).b, at, tb.b, 0, int64(bytes)); err != nil {
				return d.errorf("pack: %w", err)
			}
			s.countCopy(bytes)
		}
	}
	return nil
}

func (s *Stream) countCopy(bytes int) {
	s.recorded = true
	s.d.counters.Copies.Add(1)
	s.d.counters.BytesCopied.Add(int64(bytes))
}

// convertRange records pack or unpack dispatches over elements [p, n) of
// wide (4 bytes an element) and packed (2 bytes an element, on a 4-byte
// boundary), split so that both bindings fit the binding limit. Pieces but
// the last hold an even number of elements, so every piece starts on a
// whole packed word.
func (s *Stream) convertRange(k *cshim.Kernel, ck int, packed, wide backend.Region, p, n int) error {
	d := s.d
	info := &s.comp.info[ck]
	push := s.push[:info.PushConstantBytes]
	clear(push)
	fit := func(start int64) int64 { return (d.maxBind - start%d.align) / 4 }
	for p < n {
		left := n - p
		cnt := min(int64(left), fit(int64(wide.Off)+4*int64(p)), 2*fit(int64(packed.Off)+2*int64(p)), 1<<30)
		if cnt < int64(left) {
			cnt &^= 1
		}
		if cnt == 0 {
			return d.errorf("%s: MaxBindingBytes %d leaves no room for two elements past an offset aligned to %d: %w",
				info.Name, d.maxBind, d.align, backend.ErrUnsupported)
		}
		c := int(cnt)
		words := (c + 1) / 2
		// Binding 0 is the destination: the packed words (whole words from
		// element p on) for pack, the f32 elements for unpack.
		pi, wi := 0, 1
		if ck == ckUnpack {
			pi, wi = 1, 0
		}
		var off [2]uint32
		off[pi] = s.bindRegion(pi, packed, p/2, words, 4)
		off[wi] = s.bindRegion(wi, wide, p, c, 4)
		ne.PutUint32(push[ppN:], uint32(c))
		ne.PutUint32(push[ppDstOff:], off[0])
		ne.PutUint32(push[ppSrcOff:], off[1])
		groups := min((uint64(words)+uint64(d.wg)-1)/uint64(d.wg), uint64(d.maxGroups))
		if err := d.dev.CmdDispatch(k, [3]uint32{uint32(groups), 1, 1}, s.bind[:info.Bindings], push); err != nil {
			return d.errorf("%s: %w", info.Name, err)
		}
		s.recorded = true
		d.counters.Dispatches.Add(1)
		if ck == ckPack {
			d.counters.BytesReduced.Add(int64(4 * words))
		} else {
			d.counters.BytesReduced.Add(int64(4 * c))
		}
		p += c
	}
	return nil
}

// fitsBinding reports whether r fits one binding from its offset aligned
// down to minStorageBufferOffsetAlignment.
func (s *Stream) fitsBinding(r backend.Region) bool {
	return int64(r.Off)%s.d.align+int64(r.Len) <= s.d.maxBind
}

// TopK records the selection of the k elements of src with the largest
// magnitude (NaN as large as +-Inf, ties to the lower index), their indices
// (uint32) to idx and values to val in increasing index order: the same
// selection as the host's, made on the device (see the top of this file).
func (s *Stream) TopK(dt backend.DType, src backend.Region, k int, idx, val backend.Region) error {
	const op = "topk"
	d := s.d
	if d.closed.Load() {
		return d.errClosed(op)
	}
	es, _, _, err := s.dtype(op, dt)
	if err != nil {
		return err
	}
	if _, err := s.region(op, "src", src, es); err != nil {
		return err
	}
	n := src.Len / es
	if k < 1 || k > n {
		return d.errorf("topk: k=%d for %d elements: %w", k, n, backend.ErrInvalidArgument)
	}
	if _, err := s.region(op, "idx", idx, 1); err != nil {
		return err
	}
	if _, err := s.region(op, "val", val, es); err != nil {
		return err
	}
	if idx.Len != 4*k || val.Len != k*es {
		return d.errorf("topk: idx has %d bytes, val %d, for k=%d: %w", idx.Len, val.Len, k, backend.ErrInvalidArgument)
	}
	// The kernels read src while they write idx and val.
	if overlap(idx, src) || overlap(val, src) || overlap(idx, val) {
		return d.errorf("topk: src, idx and val overlap: %w", backend.ErrInvalidArgument)
	}
	if !s.fitsBinding(src) || !s.fitsBinding(val) || !s.fitsBinding(idx) || n > math.MaxInt32 {
		return d.errorf("topk: src of %d bytes (or idx, val) does not fit one %d-byte binding: %w",
			src.Len, d.maxBind, backend.ErrUnsupported)
	}
	ck := ckTopKF32
	if es == 8 {
		ck = ckTopKF64
	}
	var stages [numTopKStages]*cshim.Kernel
	for st := range stages {
		if stages[st], err = s.compressPipeline(ck, uint32(st)); err != nil {
			return err
		}
	}
	info := &s.comp.info[ck]
	block := int(d.wg) * topkItems
	nb := (n + block - 1) / block
	workBytes := 4 * (topkBlocks + 2*nb)
	wb, err := s.grow(&s.comp.work, workBytes)
	if err != nil {
		return err
	}
	out := idx
	if idx.Off%4 != 0 {
		tb, err := s.grow(&s.comp.tmp, idx.Len)
		if err != nil {
			return err
		}
		out = backend.Region{Buf: tb, Len: idx.Len}
	}

	push := s.push[:info.PushConstantBytes]
	clear(push)
	ne.PutUint32(push[ptN:], uint32(n))
	ne.PutUint32(push[ptK:], uint32(k))
	ne.PutUint32(push[ptIdxOff:], s.bindRegion(0, out, 0, k, 4))
	ne.PutUint32(push[ptValOff:], s.bindRegion(1, val, 0, k, es))
	s.bind[2] = cshim.Binding{Buffer: wb.b, Offset: 0, Range: int64(workBytes)}
	ne.PutUint32(push[ptSrcOff:], s.bindRegion(3, src, 0, n, es))

	dispatch := func(st int, groups int) error {
		g := min(uint64(max(groups, 1)), uint64(d.maxGroups))
		if err := d.dev.CmdDispatch(stages[st], [3]uint32{uint32(g), 1, 1}, s.bind[:info.Bindings], push); err != nil {
			return d.errorf("%s: %w", info.Name, err)
		}
		s.recorded = true
		d.counters.Dispatches.Add(1)
		return nil
	}
	if err := dispatch(topkInit, 1); err != nil {
		return err
	}
	// With k == n every element is selected: the threshold key 0 (set by
	// INIT) and rem = k select them all, so the radix passes are skipped.
	if k < n {
		histGroups := (n + int(d.wg)*topkHistItems - 1) / (int(d.wg) * topkHistItems)
		for shift := 56; shift >= 64-8*es; shift -= 8 {
			ne.PutUint32(push[ptShift:], uint32(shift))
			if err := dispatch(topkHist, histGroups); err != nil {
				return err
			}
			if err := dispatch(topkSelect, 1); err != nil {
				return err
			}
		}
	}
	for _, st := range [...]int{topkCount, topkScan, topkScatter} {
		g := nb
		if st == topkScan {
			g = 1
		}
		if err := dispatch(st, g); err != nil {
			return err
		}
	}
	if out != idx {
		if err := d.dev.CmdCopy(idx.Buf.(*Buffer).b, int64(idx.Off), out.Buf.(*Buffer).b, 0, int64(idx.Len)); err != nil {
			return d.errorf("topk: %w", err)
		}
		s.countCopy(idx.Len)
	}
	d.counters.CountHost(val, src)
	if idx.Buf.Memory() == backend.HostVisible {
		d.counters.BytesToHost.Add(int64(idx.Len))
	}
	return d.check(op)
}
