package collective

import (
	"context"
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/memory"
	"github.com/gocoll/gocoll/internal/shareddev"
)

// Tensor is n elements of T that live on one rank's device (device-local
// memory). Collectives on tensors run their algorithms in place on the
// tensor's buffer: no upload or download of the tensor itself, only the
// exchange slices between ranks cross host memory.
//
// A framework computes on a tensor through its backend buffer (Buffer); the
// vulkan package exposes the Vulkan handles behind it. WrapTensor adopts a
// buffer the framework allocated on the rank's device.
type Tensor[T Elem] struct {
	tcore
}

// tcore is a Tensor without its type parameter: what the call pipeline
// (call.go) reads of it.
type tcore struct {
	c     *Comm
	buf   backend.Buffer
	off   int // byte offset of element 0 in buf
	n     int
	es    int // element size
	owned bool
	own   *memory.Owner // the calls that resolved the tensor
}

// core returns t's tcore (nil for a nil Tensor).
func (t *Tensor[T]) core() *tcore {
	if t == nil {
		return nil
	}
	return &t.tcore
}

// life of a nil *Tensor reaches tcore's as a nil *tcore (a promoted
// method would dereference the nil Tensor).
func (t *Tensor[T]) life() *memory.Owner { return t.core().life() }

// life returns the tensor's owner (nil for a nil or zero Tensor).
func (t *tcore) life() *memory.Owner {
	if t == nil {
		return nil
	}
	return t.own
}

// region returns elements [lo, hi) of t.
func (t *tcore) region(lo, hi int) backend.Region {
	return backend.Region{Buf: t.buf, Off: t.off + lo*t.es, Len: (hi - lo) * t.es}
}

// whole returns all of t's elements as a region; nothing for a nil tensor
// or where use is false (a tensor the collective does not use on this rank).
func (t *tcore) whole(use bool) backend.Region {
	if t == nil || !use {
		return backend.Region{}
	}
	return t.region(0, t.n)
}

// NewTensor allocates a tensor of n elements on c's device.
func NewTensor[T Elem](c *Comm, n int) (*Tensor[T], error) {
	if c == nil {
		return nil, invalidArg("nil Comm")
	}
	es := dtypeOf[T]().Size()
	if n < 0 || n > maxAlloc/es {
		return nil, invalidArg("rank %d: NewTensor: length %d out of range [0, %d]", c.rank, n, maxAlloc/es)
	}
	b, err := c.dev.Alloc(n*es, backend.DeviceLocal)
	if err != nil {
		return nil, fmt.Errorf("collective: rank %d: NewTensor(%d): %w", c.rank, n, err)
	}
	return &Tensor[T]{tcore{c: c, buf: b, n: n, es: es, owned: true, own: new(memory.Owner)}}, nil
}

// WrapTensor makes a tensor of n elements of T at byte offset off of a
// buffer that already lives on c's device (for example one a framework
// created there; see the vulkan package for wrapping a native buffer). The
// buffer stays the caller's: Close does not free it.
func WrapTensor[T Elem](c *Comm, buf backend.Buffer, off, n int) (*Tensor[T], error) {
	if c == nil {
		return nil, invalidArg("nil Comm")
	}
	es := dtypeOf[T]().Size()
	if buf == nil || off < 0 || n < 0 || n > maxAlloc/es || off%es != 0 || off > buf.Len() || n*es > buf.Len()-off {
		return nil, invalidArg("rank %d: WrapTensor: %d elements at byte %d do not fit the buffer", c.rank, n, off)
	}
	return &Tensor[T]{tcore{c: c, buf: buf, off: off, n: n, es: dtypeOf[T]().Size(), own: new(memory.Owner)}}, nil
}

// Len returns the number of elements.
func (t *Tensor[T]) Len() int { return t.n }

// Comm returns the rank the tensor belongs to.
func (t *Tensor[T]) Comm() *Comm { return t.c }

// Buffer returns the backend buffer and the byte offset of element 0.
func (t *Tensor[T]) Buffer() (backend.Buffer, int) { return t.buf, t.off }

// Upload copies src (len(src) == Len()) into the tensor.
func (t *Tensor[T]) Upload(src []T) error {
	if len(src) != t.n {
		return invalidArg("Tensor.Upload: len(src)=%d != Len()=%d", len(src), t.n)
	}
	if t.n == 0 {
		return nil
	}
	return t.buf.Write(t.off, asBytes(src))
}

// Download copies the tensor into dst (len(dst) == Len()).
func (t *Tensor[T]) Download(dst []T) error {
	if len(dst) != t.n {
		return invalidArg("Tensor.Download: len(dst)=%d != Len()=%d", len(dst), t.n)
	}
	if t.n == 0 {
		return nil
	}
	return t.buf.Read(t.off, asBytes(dst))
}

// Close frees the tensor's memory if NewTensor allocated it. A call that
// resolved the tensor before Close (any tensor collective, synchronous or
// queued) is waited for first, as are the operations queued on its Comm
// (Comm.Go work may use it); each is bounded by its context,
// CommunicationTimeout and the drain limit. A call handed the tensor after
// Close fails with ErrClosed. Idempotent; safe to call from any goroutine.
func (t *Tensor[T]) Close() error {
	if t == nil || t.own == nil || !t.own.Close() {
		return nil
	}
	t.own.Wait()
	if t.c != nil {
		_ = t.c.waitQueue(context.Background())
	}
	buf := t.buf
	t.buf = nil
	if t.owned && buf != nil {
		return buf.Close()
	}
	return nil
}

func (t *tcore) check(c *Comm, name string) error {
	if c == nil || t == nil {
		return invalidArg("%s: nil Comm or Tensor", name)
	}
	if t.own == nil {
		return invalidArg("rank %d: %s: a Tensor not made by NewTensor or WrapTensor", c.rank, name)
	}

	if t.c != c {
		return invalidArg("rank %d: %s: the tensor belongs to rank %d", c.rank, name, t.c.rank)
	}
	return nil
}

// allReduceTensor is allReduce on a tensor with strategy s (why: the
// reason it was chosen): through the ranks' shared device memory, or the
// strategy in place in the tensor.
func (c *Comm) allReduceTensor(ctx context.Context, d *desc, s Strategy, why string) error {
	t, dt, op := d.st, d.dt, d.op
	fp := fingerprint{kind: collAllReduce, op: op, dt: dt, count: int64(t.n), strategy: s, path: pathTensor}
	if c.g.sharedMem && (s == Direct || s == Pipelined) {
		// Through device memory, in place in every rank's tensor.
		c.g.pub.SendT[c.rank] = t.whole(true)
		return c.sharedRun(ctx, "AllReduceTensor", d.phase(0), fp, why, shareddev.AllReduce, t.n, 0)
	}
	if err := c.arrive(ctx, fp, d.phase(0)); err != nil {
		return err
	}
	if c.g.logCalls {
		c.logCall(ctx, "AllReduceTensor", t.n, dt, op, s, why)
	}
	if t.n == 0 || c.g.n == 1 {
		return nil
	}
	if err := c.ensureWork(0, dt); err != nil {
		return c.fail(err, false, nil, nil)
	}
	k := &c.k
	*k = call{dt: dt, es: dt.Size(), op: kernelOp(op), scale: scaleFor(op, c.g.n), work: t.buf, base: t.off}
	if err := c.runAllReduce(ctx, k, s, t.n); err != nil {
		return c.failInPlace(err)
	}
	return nil
}
