package host

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// buffer is Go memory owned by a Device.
type buffer struct {
	dev    *Device
	mem    backend.Memory
	data   []byte // len is the buffer's size, first byte 8-byte aligned
	closed atomic.Bool
}

// Len returns the size the buffer was allocated with.
func (b *buffer) Len() int { return len(b.data) }

// Memory returns the kind of memory the buffer was allocated as.
func (b *buffer) Memory() backend.Memory { return b.mem }

// Bytes returns the buffer's memory for a HostVisible buffer and nil for a
// DeviceLocal one (as on a GPU, whose device memory is not mapped), so code
// written against the host backend cannot come to depend on mapping device
// memory. It returns nil after Close.
func (b *buffer) Bytes() []byte {
	if b.mem != backend.HostVisible || b.closed.Load() {
		return nil
	}
	return b.data[:len(b.data):len(b.data)]
}

// Write copies p into the buffer at off. It does not wait for, or order
// itself after, submitted work: as on a GPU, the caller must not write bytes
// that submitted work still uses.
func (b *buffer) Write(off int, p []byte) error {
	if err := b.check(off, len(p), "write"); err != nil {
		return err
	}
	copy(b.data[off:], p)
	b.dev.counters.BytesWritten.Add(int64(len(p)))
	return nil
}

// Read copies the buffer at off into p.
func (b *buffer) Read(off int, p []byte) error {
	if err := b.check(off, len(p), "read"); err != nil {
		return err
	}
	copy(p, b.data[off:off+len(p)])
	b.dev.counters.BytesRead.Add(int64(len(p)))
	return nil
}

func (b *buffer) check(off, n int, what string) error {
	if b.dev.closed.Load() {
		return errClosed
	}
	if b.closed.Load() {
		return errBufferClosed
	}
	if off < 0 || off > len(b.data) || n > len(b.data)-off {
		return fmt.Errorf("host: %s of %d bytes at %d outside buffer of %d bytes: %w", what, n, off, len(b.data), backend.ErrInvalidArgument)
	}
	return nil
}

// Close marks the buffer closed: later Write, Read and commands naming it
// fail with an error wrapping backend.ErrClosed. Commands already recorded
// keep their reference to the memory, so closing a buffer that submitted
// work uses is safe; the Go garbage collector frees the memory once nothing
// refers to it. Close is idempotent.
func (b *buffer) Close() error {
	b.closed.Store(true)
	return nil
}

// unsafeBytes returns the first n bytes of w.
func unsafeBytes(w []uint64, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), n)
}

// float is the floating-point element types the kernels reduce in their own
// type.
type float interface{ ~float32 | ~float64 }

// integer is the integer element types (backend.I32 ... backend.U8, I16,
// U16).
type integer interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64
}

// elem is every Go type a buffer is viewed as: the float and integer element
// types (uint16 also holding the bits of backend.Half and backend.BFloat16).
type elem interface{ float | integer }

// view reinterprets b, whose first byte is aligned for T and whose length is
// a multiple of T's size, as a []T.
func view[T elem](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(zero)))
}
