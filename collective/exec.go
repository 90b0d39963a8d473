package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
)

// Go queues fn on the comm's stream and returns at once: fn runs after
// every operation queued on c before it (collectives, point-to-point and
// other Go calls, synchronous or not) and before any queued after it, on
// the comm's worker goroutine, with a context derived from ctx. Collectives
// that fn calls on c with that context run inline, in order. This is how a
// layer above collective (ddp's asynchronous gradient steps) makes a
// sequence of collectives one stream operation. The Work reports fn's
// error, wrapped with the rank and name like a collective's.
//
// uses names the memory fn touches outside the collectives it calls
// (HostBuffers, Tensors, slices through Mem): it is resolved now, so
// closing it waits until fn returned, and memory closed already fails the
// Work with ErrClosed. The collectives fn calls resolve their own
// arguments; memory named here counts as theirs too.
func (c *Comm) Go(ctx context.Context, name string, fn func(ctx context.Context) error, uses ...Memory) Work {
	if fn == nil {
		return failedWork(invalidArg("Comm.Go: nil function"))
	}
	if c == nil {
		return failedWork(invalidArg("nil Comm"))
	}
	w := c.newRec(false)
	w.fn = fn
	for _, m := range uses {
		if err := m.resolveInto(&w.mem); err != nil {
			w.mem.Release()
			return failedWork(c.wrapErr(name, 0, err))
		}
	}
	return c.enqueue(ctx, name, w)
}

// Memory is memory a Comm.Go or Comm.Exec operation uses: a *HostBuffer, a
// *Tensor, or a slice through Mem. Naming it makes its Close wait for the
// operation.
type Memory interface {
	resolveInto(u *memUse) error
}

// Mem names a slice for Comm.Go and Comm.Exec (a slice of a HostBuffer
// resolves to that HostBuffer; other slices have no owner to wait for).
func Mem[T Elem](s []T) Memory { return sliceMem(asBytes(s)) }

type sliceMem []byte

func (s sliceMem) resolveInto(u *memUse) error { return u.slice(s) }

func (h *HostBuffer[T]) resolveInto(u *memUse) error {
	if h == nil || h.ent == nil {
		return nil
	}
	return u.add(&h.ent.Own, "the HostBuffer")
}

func (t *Tensor[T]) resolveInto(u *memUse) error { return u.tensor(t.life()) }

// Exec records device work on the comm's stream in order with its
// collectives: record adds commands to the stream (copies, kernels, the
// backend's optional interfaces such as backend.Compressor); Exec submits
// them and waits, within ctx and Config.CommunicationTimeout. When Exec
// returns, the device no longer uses any memory the commands touched: on a
// timeout or a lost device it drains first, and a failure after the
// submission breaks the group as a failed collective does. An error from
// record is returned as is. record must not keep the stream. uses names the
// memory the commands touch, as for Go: closing it waits until Exec
// returned, and memory closed already fails Exec with ErrClosed.
func (c *Comm) Exec(ctx context.Context, name string, record func(s backend.Stream) error, uses ...Memory) (err error) {
	if record == nil {
		return invalidArg("Comm.Exec: nil function")
	}
	if c == nil {
		return invalidArg("nil Comm")
	}
	u := c.uses(ctx)
	defer u.Release()
	for _, m := range uses {
		if err := m.resolveInto(&u); err != nil {
			return c.wrapErr(name, 0, err)
		}
	}
	owned, err := c.claim(ctx, name)
	if err != nil {
		return err
	}
	defer c.release(owned)
	if _, err := c.enter(ctx, name, false); err != nil {
		return err
	}
	defer c.leave(false, &err)
	if err := record(c.dev.Stream()); err != nil {
		return err
	}
	f, err := c.submitWork()
	if err != nil {
		return c.failAfter(err, nil, nil)
	}
	return c.waitFence(ctx, f)
}
