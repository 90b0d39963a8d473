package hostmath

import (
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// The packed loops (combine_amd64.s): acc[i] = acc[i] op x[i] for the
// first n elements, n a multiple of packedLen; every element rounds as
// Go's scalar operation does (IEEE 754 in the element type, no flush of
// subnormals), so the bits are the scalar loop's.

//go:noescape
func addF32(acc, x *float32, n int)

//go:noescape
func mulF32(acc, x *float32, n int)

//go:noescape
func addF64(acc, x *float64, n int)

//go:noescape
func mulF64(acc, x *float64, n int)

// packedLen is the elements of one iteration of the packed loops: 64 bytes.
func packedLen[T Float]() int {
	var z T
	return 64 / int(unsafe.Sizeof(z))
}

// combinePacked computes the leading whole iterations of acc = acc op x
// (op Sum or Prod) with the packed loops and returns how many elements it
// did (0 for any other op, or fewer than one iteration's elements).
func combinePacked[T Float](op backend.Op, acc, x []T) int {
	n := len(acc) &^ (packedLen[T]() - 1)
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
