//go:build cgo

package shimdev

import (
	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/kernels"
)

// vecState picks the 16-byte kernels (reduce4_f32/f64/i32/u32/i64/u64,
// scale4_f32/f64: one vec4, dvec2, ivec4, uvec4, i64vec2 or u64vec2 per
// invocation and loop iteration; kindSpec.vec) over the scalar ones. The
// 8- and 16-bit types have none.
// 16-byte accesses reach the memory bandwidth where 4-byte ones do not
// (H200: f32 scale 2.5 -> ~4.1 TB/s, 2-input f32 reduce 3.2 -> ~4.3 TB/s).
type vecState struct {
	off        bool  // test hook: always use the scalar kernels
	dispatches int64 // dispatches of a 16-byte kernel
}

// use reports whether a pass over out and srcs (elements of es bytes) can
// run the 16-byte kernel instead, with the same dispatches:
//   - every region starts at a multiple of 16 bytes, so with a power-of-two
//     minStorageBufferOffsetAlignment each binding starts 16-byte aligned
//     and the data sits a whole number of vectors into it;
//   - the length is a multiple of 16 bytes, so there is no scalar tail;
//   - MaxBindingBytes is a multiple of 16, so a split by the binding limit
//     cuts at the same bytes as the scalar kernel's, and Dispatches counts
//     the same whichever kernel runs.
//
// Otherwise the scalar kernel runs the whole pass, unless only the tail is
// in the way (body).
func (v *vecState) use(d *Device, es int, out backend.Region, srcs []backend.Region) bool {
	const vb = kernels.VecBytes
	if v.off || es > vb || d.maxBind%vb != 0 || d.align&(d.align-1) != 0 {
		return false
	}
	if out.Off%vb != 0 || out.Len%vb != 0 {
		return false
	}
	for i := range srcs {
		if srcs[i].Off%vb != 0 {
			return false
		}
	}
	return true
}

// body returns, for a pass that use refuses only because its length is not
// a whole number of vectors (every region starts on 16 bytes), the bytes of
// its whole vectors (0 when there are none, or when use refuses for another
// reason): pass runs the 16-byte kernel on them and the scalar one on the
// rest, one more dispatch.
func (v *vecState) body(d *Device, es int, out backend.Region, srcs []backend.Region) int {
	const vb = kernels.VecBytes
	if out.Len%vb == 0 || out.Len < vb {
		return 0
	}
	b := out.Len &^ (vb - 1)
	if !v.use(d, es, backend.Region{Buf: out.Buf, Off: out.Off, Len: b}, srcs) {
		return 0
	}
	return b
}
