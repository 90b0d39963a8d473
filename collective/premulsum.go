package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/premul"
)

// PreMulSum returns a reduction op of c that multiplies each element of
// this rank's input by scalar, then sums the ranks' products (NCCL's
// ncclRedOpCreatePreMulSum; averaging with loss scaling uses it). Each rank
// makes its own op on its own comm, with its own scalar: the ranks of a
// call may pass different scalars, and their calls match (the op is
// "premulsum" in every rank's fingerprint; a rank passing Sum with it is a
// mismatch). The op works with every reduction taking an op (AllReduce in
// all its forms, Reduce, ReduceScatter, ReduceScatterV, Scan and Exscan, on
// slices, HostBuffers and tensors, their Async forms and BatchAllReduce)
// on c only: on another comm, after DestroyOp, or with an unknown value a
// call fails with ErrInvalidArgument on every rank before any data moves.
//
// The scalar is a float64, one op for every element type: it is converted
// at each call to the call's type, as NCCL stores it in the reduction's
// type. The products are rounded as the kernels' Scale rounds: float32 and
// float64 elements are multiplied in their own type by the scalar
// converted to it (float32(scalar) for float32), rounded once; Float16,
// BFloat16 and the fp8 types are widened to float32, multiplied there by
// float32(scalar), rounded to float32 and then to the type (to nearest
// even, fp8 saturating as their Sum does); a scalar of exactly 1 copies
// the element, and one of exactly 1/N (1/float64(N) for an integer N that
// backend.Divisor accepts: every N up to 4096) divides by N, correctly
// rounded, as Mean's scale does. For an integer type the scalar must be an
// integral value the type represents (else ErrInvalidArgument); the
// product wraps, as the sum does. The products are then summed exactly as
// Sum sums the ranks' inputs (the same strategy, order and rounding), so
// the result is the Sum of the ranks' products, bit for bit on every
// backend.
//
// Each rank's products are written into the comm's pooled memory (host
// memory for slices and HostBuffers, a device buffer for tensors) when the
// call starts: the caller's send is never written (in-place calls work, and
// a failed call leaves the caller's data as Sum would), and a
// steady-state call allocates nothing. An op is a handle as NCCL's
// ncclRedOp_t is: release it with DestroyOp; an op is never reused.
func (c *Comm) PreMulSum(scalar float64) (Op, error) {
	if c == nil {
		return 0, invalidArg("nil Comm")
	}
	h, err := c.preMul.Create(scalar)
	if err != nil {
		return 0, invalidArg("rank %d: PreMulSum: %v", c.rank, err)
	}
	return Op(h), nil
}

// DestroyOp releases op, made by c's PreMulSum (ncclRedOpDestroy); a call
// given op afterwards fails with ErrInvalidArgument. An op that is not a
// live one of c's is ErrInvalidArgument. A call started with op before
// DestroyOp (an Async form) resolves op when it runs.
func (c *Comm) DestroyOp(op Op) error {
	if c == nil {
		return invalidArg("nil Comm")
	}
	if !premul.IsHandle(int(op)) || !c.preMul.Destroy(int(op)) {
		return invalidArg("rank %d: DestroyOp: %v is not a live PreMulSum op of this comm", c.rank, int(op))
	}
	return nil
}

// opPreMulSum is the op of a PreMulSum call once its handle is resolved:
// in fingerprints and logs; the kernels sum (kernelOp).
const opPreMulSum = LXor + 1

// reduceOp checks the op of d, a reduction, for its type (checkOp); a
// PreMulSum handle is resolved to its scalar, checked for the type, and
// d's op becomes opPreMulSum.
func (c *Comm) reduceOp(d *desc) error {
	if !premul.IsHandle(int(d.op)) {
		return checkOp(d.op, d.dt, c.g.n)
	}
	s, ok := c.preMul.Scalar(int(d.op))
	if !ok {
		return invalidArg("op %d is not a live PreMulSum op of rank %d's comm (made by another comm, or destroyed)", int(d.op), c.rank)
	}
	if err := premul.Check(d.dt, s); err != nil {
		return invalidArg("%v", err)
	}
	d.op, d.scalar = opPreMulSum, s
	return nil
}

// preScale replaces the send of d, a PreMulSum call, by this rank's input
// multiplied by its scalar in the comm's pooled memory (internal/premul);
// run calls it once the comm is claimed. A tensor's products are made on
// the device (preScaleTensor).
func (c *Comm) preScale(ctx context.Context, d *desc) error {
	if d.tensor {
		return c.preScaleTensor(ctx, d)
	}
	b := c.preMulBuf.Bytes(len(d.send))
	premul.Scale(d.dt, b, d.send, d.scalar)
	d.send = b
	return nil
}

// preScaleTensor replaces the send tensor of d, a PreMulSum call, by the
// comm's pooled device buffer holding its elements multiplied by the
// scalar, submitted and waited for: a float type by the Scale kernel, an
// integer type by a Prod kernel with a pooled buffer of the scalar (filled
// once while the scalar, type and length allow: premul.Filled), and a
// type without kernels on the host (read, premul.Scale, written back). A
// failure (memory, the device, the context) breaks the group, as one
// inside the collective would: the peers, already on their way to the
// collective, fail with ErrGroupBroken instead of meeting a refusal.
func (c *Comm) preScaleTensor(ctx context.Context, d *desc) (err error) {
	in, es := d.st, d.dt.Size()
	c.preMulIn, c.preMulT = in, tcore{c: c, buf: c.preMulDev, es: es, own: in.own}
	d.st = &c.preMulT
	if in.n == 0 {
		return nil
	}
	if _, err := c.enter(ctx, d.name(), false); err != nil {
		return err
	}
	defer c.leave(false, &err)
	if err := c.scaleTensor(ctx, d.dt, in, d.scalar); err != nil {
		return c.failAfter(err, nil, nil)
	}
	return nil
}

// scaleTensor sets the comm's pooled device buffer (preMulT) to the n
// elements of tensor in multiplied by scalar (preScaleTensor).
func (c *Comm) scaleTensor(ctx context.Context, dt backend.DType, in *tcore, scalar float64) error {
	n, es := in.n, dt.Size()
	if err := c.ensureMem(&c.preMulDev, n*es, backend.DeviceLocal); err != nil {
		return err
	}
	c.preMulT.buf, c.preMulT.n = c.preMulDev, n
	dst, src := c.preMulT.whole(true), in.whole(true)
	st := c.dev.Stream()
	var err error
	switch {
	case c.noKernels(dt):
		b := c.preMulBuf.Bytes(n * es)
		if err := in.buf.Read(in.off, b); err != nil {
			return err
		}
		premul.Scale(dt, b, b, scalar)
		return c.preMulDev.Write(0, b)
	case dt.IsInt():
		if err := c.ensure(&c.preMulFill, n*es); err != nil {
			return err
		}
		c.preMulFilled.Fill(c.preMulFill, dt, n, scalar)
		c.preMulSrcs = [2]backend.Region{src, {Buf: c.preMulFill, Len: n * es}}
		err = st.Reduce(backend.Prod, dt, dst, c.preMulSrcs[:], 1)
	default:
		err = st.Scale(dt, dst, src, scalar)
	}
	if err := c.rec(err); err != nil {
		return err
	}
	return c.flush(ctx)
}

// preMulBack copies the result of AllReduceTensor with a PreMulSum op
// (err nil), reduced in the comm's pooled buffer, into the caller's
// tensor; a failure of that copy leaves the tensor undefined (a
// *DataError with Touched set) and breaks the group.
func (c *Comm) preMulBack(ctx context.Context, d *desc, err error) error {
	if err != nil || d.op != opPreMulSum || d.st.n == 0 {
		return err
	}
	if _, err := c.enter(ctx, d.name(), false); err != nil {
		return err
	}
	defer c.leave(false, &err)
	return c.deliver(ctx, c.preMulIn.whole(true), d.st.whole(true))
}
