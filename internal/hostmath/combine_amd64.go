package hostmath

import (
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// The loops of combine_amd64.s: acc[i] = acc[i] op x[i] for i < n, packed
// 64 bytes at a time, then element by element; every element rounds as
// Go's scalar operation does (IEEE 754 in the element type, no flush of
// subnormals), and of two NaNs acc's is the result.

//go:noescape
func addF32(acc, x *float32, n int)

//go:noescape
func mulF32(acc, x *float32, n int)

//go:noescape
func addF64(acc, x *float64, n int)

//go:noescape
func mulF64(acc, x *float64, n int)

// combinePacked computes acc = acc op x (op Sum or Prod) with the assembly
// loops and returns how many elements it did: all of them, or 0 for any
// other op.
func combinePacked[T Float](op backend.Op, acc, x []T) int {
	n := len(acc)
	if n == 0 || (op != backend.Sum && op != backend.Prod) {
		return 0
	}
	a, b := unsafe.Pointer(&acc[0]), unsafe.Pointer(&x[0])
	var z T
	switch {
	case unsafe.Sizeof(z) == 4 && op == backend.Sum:
		addF32((*float32)(a), (*float32)(b), n)
	case unsafe.Sizeof(z) == 4:
		mulF32((*float32)(a), (*float32)(b), n)
	case op == backend.Sum:
		addF64((*float64)(a), (*float64)(b), n)
	default:
		mulF64((*float64)(a), (*float64)(b), n)
	}
	return n
}
