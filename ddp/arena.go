package ddp

import (
	"fmt"

	"github.com/gocoll/gocoll/collective"
)

// Arena is one flat allocation of pinned host memory (a
// collective.HostBuffer) holding a model's gradients, with a view per
// tensor: a framework points its gradient tensors at the views (gorgonia's
// tensor.WithBacking, a gonum mat.NewDense over the slice), and a step
// syncs the whole model with Sync(ctx, arena.Flat()): one collective, no
// bucket copies, and no staging copy where the device imports host memory.
//
// Views are laid out in order, contiguous, and never move; writing a view
// between steps is the framework's backward pass.
type Arena[T Grad] struct {
	buf   *collective.HostBuffer[T]
	views [][]T
}

// NewArena allocates an Arena with one view per size (in elements), zeroed.
func NewArena[T Grad](sizes ...int) (*Arena[T], error) {
	total := 0
	for i, n := range sizes {
		if n < 0 {
			return nil, fmt.Errorf("ddp.NewArena: size %d is negative (%d): %w", i, n, collective.ErrInvalidArgument)
		}
		total += n
	}
	buf, err := collective.NewHostBuffer[T](total)
	if err != nil {
		return nil, err
	}
	a := &Arena[T]{buf: buf, views: make([][]T, len(sizes))}
	off := 0
	for i, n := range sizes {
		a.views[i] = buf.Data[off : off+n : off+n]
		off += n
	}
	return a, nil
}

// Flat returns every view, concatenated: what Sync takes.
func (a *Arena[T]) Flat() []T {
	if a.buf == nil {
		return nil
	}
	return a.buf.Data
}

// View returns tensor i's slice of the arena (capacity = length).
func (a *Arena[T]) View(i int) []T { return a.views[i] }

// Len returns the number of views.
func (a *Arena[T]) Len() int { return len(a.views) }

// Close frees the memory (see collective.HostBuffer.Close); the views must
// not be used afterwards. Idempotent.
func (a *Arena[T]) Close() error {
	if a.buf == nil {
		return nil
	}
	err := a.buf.Close()
	a.buf, a.views = nil, nil
	return err
}
