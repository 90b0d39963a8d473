package collective

import (
	"context"
	"fmt"

	"github.com/gocoll/gocoll/backend"
)

// begin enters a collective: argument checks done by the caller, it marks
// the comm busy, numbers the call and compares fingerprints.
func (c *Comm) begin(ctx context.Context, name string, fp fingerprint, phase string) (bool, error) {
	owned, err := c.enter(ctx, name, true)
	if err != nil {
		return false, err
	}
	c.strat = fp.strategy
	if err := c.arrive(ctx, fp, phase); err != nil {
		c.leave(owned, &err)
		return false, err
	}
	if c.g.logCalls {
		c.logCall(ctx, name, int(fp.count), fp.dt, fp.op, fp.strategy, "")
	}
	return owned, nil
}

// noKernels reports a call of an element type some rank's device cannot
// reduce in kernels (f64 without f64 kernels; the integer and 16-bit types
// on GPU backends).
func (c *Comm) noKernels(dt backend.DType) bool { return !c.g.kernels.Has(dt) }

func (c *Comm) unsupportedType(ctx context.Context, name string, dt backend.DType) error {
	why := "no " + dt.String() + " kernels"
	if dt == backend.F64 && c.info.Float64Reason != "" {
		why = c.info.Float64Reason
	}
	return c.invalidCall(ctx, name, fmt.Errorf("%s of %s needs %s kernels on every rank's device (%s: %s); AllReduce, AllGather, Broadcast and the exchanges work: %w",
		name, dt, dt, c.info.Name, why, ErrUnsupported))
}

// prepare sizes the device buffer for n elements and uploads src at element
// offset at (src may be empty).
func (c *Comm) prepare(k *call, dt backend.DType, op Op, n int, src []byte, at int) error {
	es := dt.Size()
	if err := c.ensureWork(n*es, dt); err != nil {
		return err
	}
	*k = call{dt: dt, es: es, op: kernelOp(op), scale: scaleFor(op, c.g.n), work: c.work}
	if len(src) > 0 {
		return c.upload(k, at, src)
	}
	return nil
}

// eqScratch returns the comm's counts and offsets of n equal blocks of m:
// the first two of vScratch's slices.
func (c *Comm) eqScratch(n, m int) ([]int, []int) {
	cnt, dsp, _, _ := c.vScratch(n)
	for q := range cnt {
		cnt[q], dsp[q] = m, q*m
	}
	return cnt, dsp
}
