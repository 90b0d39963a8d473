package ddp

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/gocoll/gocoll/collective"
)

// defaultFusionBytes is the size of the buckets small tensors are packed
// into (Options.FusionBytes' default, and BroadcastParameters').
const defaultFusionBytes = 4 << 20

// BroadcastParameters copies rank root's params to every rank, in place,
// so that every rank starts training from bitwise the same model. Every
// rank of c's group calls it with the same root and tensors of the same
// lengths, in the same order (the values of the other ranks are
// overwritten). Tensors smaller than 4 MiB are packed into buckets of up
// to 4 MiB (one broadcast per bucket); larger ones are broadcast in place.
// An Arena's tensors are one broadcast, without a copy:
// BroadcastParameters(ctx, c, root, [][]T{arena.Flat()}).
//
// The ranks first agree on root and on the shapes (one small all-reduce):
// when the lengths differ every rank returns the same *ShapeError, and
// when the roots differ an error matching collective.ErrMismatch, before
// anything moved. A root outside the group fails every rank with
// collective.ErrInvalidArgument. Every error names BroadcastParameters.
func BroadcastParameters[T collective.Elem](ctx context.Context, c *collective.Comm, root int, params [][]T) error {
	const call = "BroadcastParameters"
	if c == nil {
		return fmt.Errorf("ddp.%s: nil Comm: %w", call, collective.ErrInvalidArgument)
	}
	lens := make([]int, len(params))
	for i, p := range params {
		lens[i] = len(p)
	}
	// The root, signed, mapped onto uint64 in order.
	const sign = 1 << 63
	vec := []uint64{2: uint64(root) ^ sign, 3: ^(uint64(root) ^ sign)}
	if err := agreeShapes(ctx, c, call, lens, vec); err != nil {
		return err
	}
	if lo, hi := int(^vec[3]^sign), int(vec[2]^sign); lo != hi {
		return fmt.Errorf("ddp.%s: ranks name different roots (%d and %d): %w", call, lo, hi, collective.ErrMismatch)
	}
	if root < 0 || root >= c.Size() {
		return fmt.Errorf("ddp.%s: root %d is not a rank of the group of %d: %w", call, root, c.Size(), collective.ErrInvalidArgument)
	}
	var z T
	per := max(defaultFusionBytes/int(unsafe.Sizeof(z)), 1)
	small := 0
	for _, p := range params {
		if len(p) <= per {
			small += len(p)
		}
	}
	bucket := make([]T, 0, min(per, small))
	first := 0 // the first tensor in the bucket
	flush := func(end int) error {
		if len(bucket) == 0 {
			return nil
		}
		if err := collective.Broadcast(ctx, c, bucket, root); err != nil {
			return fmt.Errorf("ddp.%s: %w", call, err)
		}
		if c.Rank() != root {
			off := 0
			for _, p := range params[first:end] {
				if len(p) <= per {
					off += copy(p, bucket[off:])
				}
			}
		}
		bucket = bucket[:0]
		return nil
	}
	for i, p := range params {
		if len(p) > per {
			if err := collective.Broadcast(ctx, c, p, root); err != nil {
				return fmt.Errorf("ddp.%s: %w", call, err)
			}
			continue
		}
		if len(bucket)+len(p) > per {
			if err := flush(i); err != nil {
				return err
			}
		}
		if len(bucket) == 0 {
			first = i
		}
		if c.Rank() == root {
			bucket = append(bucket, p...)
		} else {
			bucket = bucket[:len(bucket)+len(p)]
		}
	}
	return flush(len(params))
}
