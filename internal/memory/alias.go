package memory

import (
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// Layout is the overlap of a rank's send and recv that a collective
// allows.
type Layout uint8

const (
	NoOverlap  Layout = iota // send and recv must not overlap
	SameMem                  // send == recv (same start, same length)
	SendInRecv               // send is recv's block at byte offset at
	RecvInSend               // recv is send's block at byte offset at
)

func (l Layout) String() string {
	switch l {
	case SameMem:
		return "send and recv may only be the same memory (in place)"
	case SendInRecv:
		return "send may only be recv's own block (in place)"
	case RecvInSend:
		return "recv may only be send's own block (in place)"
	}
	return "send and recv must not overlap"
}

// Area is a rank's argument as an address range: within a device buffer
// (tensors), or in host memory (Buf nil).
type Area struct {
	Buf    backend.Buffer
	Lo, Hi uintptr
}

// HostArea is the area of host memory b.
func HostArea(b []byte) Area {
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return Area{Lo: a, Hi: a + uintptr(len(b))}
}

// RegionArea is the area of a device region.
func RegionArea(r backend.Region) Area {
	return Area{Buf: r.Buf, Lo: uintptr(r.Off), Hi: uintptr(r.Off + r.Len)}
}

// Allowed is the one aliasing rule: send s and recv r either do not
// overlap, or overlap exactly in layout allow (at: the byte offset of the
// block).
func Allowed(s, r Area, allow Layout, at int) bool {
	if s.Lo == s.Hi || r.Lo == r.Hi || s.Buf != r.Buf || s.Hi <= r.Lo || r.Hi <= s.Lo {
		return true
	}
	switch allow {
	case SameMem:
		return s == r
	case SendInRecv:
		return s.Lo == r.Lo+uintptr(at)
	case RecvInSend:
		return r.Lo == s.Lo+uintptr(at)
	}
	return false
}

// SameSlice reports whether send and recv are the same memory.
func SameSlice(send, recv []byte) bool {
	return len(send) > 0 && len(send) == len(recv) && unsafe.SliceData(send) == unsafe.SliceData(recv)
}

// Holds reports whether a's memory holds b's, and more.
func Holds(a, b []byte) bool {
	if len(a) <= len(b) || len(b) == 0 {
		return false
	}
	pa := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	pb := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa <= pb && pb+uintptr(len(b)) <= pa+uintptr(len(a))
}
