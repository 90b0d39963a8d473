package backend

import "fmt"

// WireFormat is a compressed element format for exchanging f32 data.
type WireFormat int

const (
	// F16 is IEEE 754 binary16 (10-bit mantissa, range +-65504), rounded to
	// nearest even; values beyond the range become +-Inf.
	F16 WireFormat = iota + 1
	// BF16 is bfloat16 (the top 16 bits of binary32: 7-bit mantissa, the
	// f32 range), rounded to nearest even; NaN stays NaN.
	BF16
)

func (f WireFormat) String() string {
	switch f {
	case F16:
		return "half"
	case BF16:
		return "bfloat16"
	}
	return fmt.Sprintf("WireFormat(%d)", int(f))
}

// Compressor is implemented by streams that have compression kernels:
// conversion to and from 16-bit wire formats, and top-k selection by
// magnitude. Collectives use it when the stream offers it and fall back to
// the host otherwise.
type Compressor interface {
	// Pack records dst = f32 elements of src converted to f (2 bytes each;
	// dst.Len == src.Len/2).
	Pack(f WireFormat, dst, src Region) error
	// Unpack records dst = elements of src in format f converted to f32
	// (dst.Len == 2*src.Len).
	Unpack(f WireFormat, dst, src Region) error
	// TopK records the selection of the k elements of src (dt) with the
	// largest magnitude: NaN counts as an infinite magnitude (so it is
	// always selected and propagates), ties go to the lower index. Their indices (uint32) go to idx and their values to
	// val, in increasing index order. 1 <= k <= elements of src.
	TopK(dt DType, src Region, k int, idx, val Region) error
}
