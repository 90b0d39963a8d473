package collective

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/parreduce"
	"github.com/gocoll/gocoll/internal/pin"
)

// HostBuffer is a slice of T in pinned host memory (like torch's
// pin_memory): page-aligned memory outside the Go heap that each rank's
// device imports once, the first time a collective sees it, and then reads
// and writes by DMA, with no staging copy. Pass Data (or any sub-slice of
// it) to the collectives as a plain slice. Devices that cannot import host
// memory stage it like any other slice.
type HostBuffer[T Elem] struct {
	Data []T
	ent  *pin.Buffer
}

// NewHostBuffer allocates n elements of pinned host memory, zeroed.
func NewHostBuffer[T Elem](n int) (*HostBuffer[T], error) {
	es := dtypeOf[T]().Size()
	if n < 0 || n > maxAlloc/es {
		return nil, invalidArg("NewHostBuffer: length %d out of range [0, %d]", n, maxAlloc/es)
	}
	e, err := pin.New(n * es)
	if err != nil {
		return nil, fmt.Errorf("collective: NewHostBuffer(%d): %w", n, err)
	}
	mem := e.Bytes()
	data := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(mem))), n)
	return &HostBuffer[T]{Data: data, ent: e}, nil
}

// maxAlloc bounds the bytes of one allocation (a HostBuffer, a Tensor, a
// pooled buffer): sizes past it are ErrInvalidArgument, never an
// overflowed product.
const maxAlloc = 1 << 48

// Close releases the memory and every device's import of it. A call that
// resolved the memory before Close (any collective, point-to-point or
// asynchronous form, queued or running, given Data or a sub-slice of it)
// is waited for first; each is bounded by its context,
// CommunicationTimeout and the drain limit. A call handed the memory after
// Close fails with ErrClosed without touching it. If a device that
// imported it was declared lost (ErrDeviceLost), the memory is leaked
// instead of freed, since that device may still write it, and Close says
// so. Idempotent; safe to call from any goroutine.
func (h *HostBuffer[T]) Close() error {
	if h.ent == nil {
		return nil
	}
	// The buffer stays in the set of pinned memory, closed, until its
	// memory is retired: a call resolving it meanwhile gets ErrClosed.
	// Retired, the addresses stay reserved while the record of closed
	// ranges holds them: a stale slice of this buffer is refused, never
	// read, and no other mapping can be mistaken for it.
	first, leak, err := h.ent.Close()
	if first {
		h.Data = nil
	}
	if leak {
		return fmt.Errorf("collective: HostBuffer.Close: a device that imported it was declared lost; the memory is leaked: %w", ErrDeviceLost)
	}
	return err
}

// lookupPinned returns the HostBuffer memory that holds b entirely, or nil.
func lookupPinned(b []byte) *pin.Buffer { return pin.Lookup(b) }

// pinnedRegion returns b as a region of this rank's import of its
// HostBuffer, importing it on first use, or of the rank's imported Go slice
// that holds it; ok is false for other plain slices or devices that cannot
// import.
func (c *Comm) pinnedRegion(b []byte) (backend.Region, bool) {
	if r, ok := c.goImp.Region(b); ok {
		return r, true // a Go slice the call adopted (goimport.go)
	}
	if pin.Lookup(b) == nil {
		return backend.Region{}, false // a plain slice the call did not adopt
	}
	r, ok, _ := c.importRegion(b)
	return r, ok
}

// importRegion is pinnedRegion that also returns why an import failed, and
// that takes another rank's imported Go slice too (the direct algorithms
// read every rank's memory inside a call they all take part in).
func (c *Comm) importRegion(b []byte) (backend.Region, bool, error) {
	if _, isImp := c.dev.(backend.Importer); !isImp {
		return backend.Region{}, false, nil
	}
	e := pin.Lookup(b)
	if e == nil {
		return c.goImp.PeerRegion(b) // a peer's imported Go slice (goimport.go), imported here first if needed
	}
	return c.pins.Region(e.Mem, b)
}

// isLost reports whether the comm's device was declared lost.
func (c *Comm) isLost() bool {
	c.g.brokenMu.Lock()
	defer c.g.brokenMu.Unlock()
	return c.lost != nil
}

// upload puts send into the device buffer at element at: a DMA copy from
// pinned memory (recorded: it runs before whatever is recorded next), else
// a staged write.
func (c *Comm) upload(k *call, at int, send []byte) error {
	dst := backend.Region{Buf: k.work, Off: k.base + at*k.es, Len: len(send)}
	if r, ok := c.pinnedRegion(send); ok {
		c.unsubmitted = true
		return c.dev.Stream().Copy(dst, r)
	}
	if parallelStage(len(send)) {
		// Large: the host copy into the pooled staging buffer spread over
		// the cores (a staged Buffer.Write copies on one), then one device
		// copy recorded with the collective's work.
		if err := c.ensure(&c.stage, at*k.es+len(send)); err != nil {
			return err
		}
		c.copyIn(c.stage, at*k.es, send)
		if err := c.copyWait(); err != nil {
			return err
		}
		c.unsubmitted = true
		return c.dev.Stream().Copy(dst, backend.Region{Buf: c.stage, Off: at * k.es, Len: len(send)})
	}
	return k.work.Write(k.base+at*k.es, send)
}

// parallelStage reports whether a host copy of n bytes between Go memory
// and a device-local buffer goes through the comm's staging buffer with
// parallel host copies.
func parallelStage(n int) bool { return parreduce.ParallelCopy(n) }

// download copies the device buffer from element at into recv: a DMA copy
// into pinned memory, else a staged read.
func (c *Comm) download(ctx context.Context, k *call, at int, recv []byte) error {
	if r, ok := c.pinnedRegion(recv); ok {
		if err := c.dev.Stream().Copy(r, backend.Region{Buf: k.work, Off: k.base + at*k.es, Len: len(recv)}); err != nil {
			return err
		}
		return c.flush(ctx)
	}
	if parallelStage(len(recv)) {
		if err := c.ensure(&c.stage, at*k.es+len(recv)); err != nil {
			return err
		}
		if err := c.dev.Stream().Copy(backend.Region{Buf: c.stage, Off: at * k.es, Len: len(recv)},
			backend.Region{Buf: k.work, Off: k.base + at*k.es, Len: len(recv)}); err != nil {
			return err
		}
		if err := c.flush(ctx); err != nil {
			return err
		}
		c.copyOut(c.stage, at*k.es, recv)
		return c.copyWait()
	}
	// A staged read goes through the queue by itself: a pinned upload
	// still only recorded must be submitted first, so the read follows it.
	if c.unsubmitted {
		if err := c.flush(ctx); err != nil {
			return err
		}
	}
	return k.work.Read(k.base+at*k.es, recv)
}
