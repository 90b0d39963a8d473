package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
)

// Wire compression: the ring all-reduce of f32 data with every exchanged
// slice converted to a 16-bit format (half or bfloat16) on the device before
// it leaves and converted back after it arrives, halving the bytes moved.
// Reductions stay in f32; each hop rounds the partial sum it forwards, so
// the error grows with the rank count (see WireErrorBound). The owner of
// each reduced chunk rounds its own copy too, so all ranks still end
// bitwise identical.
//
// With Config.Deterministic the reduce-scatter is rank-ordered instead (as
// AllReduce's): every rank's input is rounded to the format once, the owner
// of each chunk sums the rounded inputs in rank order (rank 0 + rank 1 +
// ...), scales, and rounds the result once for the all-gather. The result
// is then a function of the inputs alone, W(op_r W(x_r)) with W the
// rounding, whatever the chunking, slot size or chunk owner.
//
// The algorithm is internal/algo's ring all-reduce; the call's exchange
// format (steps.Exchange.Wire) makes its steps (internal/steps) pack what
// they send, unpack what they receive and round each owned chunk.

// WireErrorBound is the documented bound of wire compression for a sum of
// N ranks' inputs x_r: |result - exact| <= N * u * sum_r |x_r| (+ the f32
// summation error), with u = 2^-11 for half and 2^-8 for bfloat16, as long
// as no partial sum leaves the format's range (half: 65504).
func WireErrorBound(f backend.WireFormat, ranks int, sumAbs float64) float64 {
	u := 0x1p-11
	if f == backend.BF16 {
		u = 0x1p-8
	}
	return float64(ranks) * (u + 0x1p-24) * sumAbs
}

// AllReduceWire all-reduces f32 data in place with a ring whose exchange
// is compressed to f (backend.F16 or backend.BF16). The backend must offer
// compression kernels (backend.Compressor): host and vulkan do. With
// Config.Deterministic the reduction is in rank order, as AllReduce's (see
// above).
func AllReduceWire(ctx context.Context, c *Comm, data []float32, op Op, f backend.WireFormat) error {
	b := asBytes(data)
	return c.run(ctx, &desc{kind: collAllReduceWire, dt: backend.F32, op: op, send: b, recv: b, wire: f})
}

// allReduceWire runs AllReduceWire's call d, checked (call.go), in the
// work buffer (move).
func (c *Comm) allReduceWire(ctx context.Context, d *desc) (err error) {
	sp := &callSpecs[d.kind]
	n := len(d.send) / 4
	owned, err := c.begin(ctx, sp.name, fingerprint{kind: collAllReduce, op: d.op, dt: backend.F32, count: int64(n), root: int32(d.wire), strategy: Ring, path: pathSlice}, sp.phases[0])
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	if n == 0 || c.g.n == 1 {
		return nil
	}
	return c.move(ctx, d, d.op, n, d.send, 0, func(k *call) error {
		k.xc.Wire, k.xc.Comp = d.wire, c.dev.Stream().(backend.Compressor)
		return c.algo(k).RingAllReduce(ctx, c.g.all, n)
	}, d.recv, 0)
}
