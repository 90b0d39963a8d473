package collective

import "context"

// AllToAll sends chunk j of every rank's send (len(send)/N elements from
// j*len(send)/N) to rank j, which stores it as chunk i of its recv (i the
// sender's rank): a transpose of the ranks' chunks, as ncclAllToAll or
// MPI_Alltoall with equal counts. len(send) = len(recv) = N x chunk on
// every rank, the chunk length the same everywhere. The exchange is
// pairwise: in step s (1..N-1) rank i sends to i+s and receives from i-s,
// slice by slice, so every link carries one message at a time and no rank
// waits on another's unrelated transfer.
func AllToAll[T Elem](ctx context.Context, c *Comm, send, recv []T) (err error) {
	if c == nil {
		return invalidArg("nil Comm")
	}
	u := c.uses(ctx)
	defer u.release()
	if err := u.slices(asBytes(send), asBytes(recv)); err != nil {
		return c.invalidCall(ctx, "AllToAll", err)
	}
	N := c.g.n
	if len(send) != len(recv) || len(send)%N != 0 {
		return c.invalidCall(ctx, "AllToAll", invalidArg("len(send)=%d and len(recv)=%d, want equal multiples of the group size (%d)", len(send), len(recv), N))
	}
	// In place (send == recv, MPI_IN_PLACE) works as it is: send is copied
	// into the device buffer before recv is written.
	if err := checkSliceAlias("AllToAll", asBytes(send), asBytes(recv), sameMem, 0); err != nil {
		return c.invalidCall(ctx, "AllToAll", err)
	}
	dt := dtypeOf[T]()
	m := len(send) / N
	owned, err := c.begin(ctx, "AllToAll", fingerprint{kind: collAllToAll, dt: dt, count: int64(m), strategy: Direct}, "AllToAll fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	c.adoptCall(asBytes(send), asBytes(recv))
	defer c.releaseAdopted()
	if m == 0 {
		return nil
	}
	k := &c.k
	n := N * m
	// The work buffer holds send in [0, n) and recv in [n, 2n).
	if err := c.prepare(k, dt, Sum, 2*n, asBytes(send), 0); err != nil {
		return c.fail(err, false, nil, nil)
	}
	i := c.rank
	if err := c.rec(c.dev.Stream().Copy(k.region(n+i*m, n+i*m+m), k.region(i*m, i*m+m))); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.pairwiseExchange(ctx, k, n, m); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.flush(ctx); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.download(ctx, k, n, asBytes(recv)); err != nil {
		return c.fail(err, true, nil, nil)
	}
	return nil
}

// pairwiseExchange moves chunk j of [0, n) to rank j, where it lands as
// chunk i of rank j's [n, 2n) (and chunk j of rank j's [0, n) arrives
// here as chunk j of [n, 2n)): N-1 shift steps of chunk length m, slice by slice.
func (c *Comm) pairwiseExchange(ctx context.Context, k *call, n, m int) error {
	N := c.g.n
	i := c.rank
	slice := c.g.slotBytes / k.es
	st := c.dev.Stream()
	for s := 1; s < N; s++ {
		to, from := mod(i+s, N), mod(i-s, N)
		for j := 0; j*slice < m; j++ {
			a, b := sliceRange(to*m, to*m+m, slice, j)
			if err := c.sendSlice(ctx, k, to, a, b); err != nil {
				return err
			}
			a, b = sliceRange(from*m, from*m+m, slice, j)
			if b <= a {
				continue
			}
			in, _, err := c.take(ctx, from, 0, msgCollective, (b-a)*k.es)
			if err != nil {
				return err
			}
			if err := c.rec(st.Copy(k.region(n+a, n+b), in)); err != nil {
				return err
			}
			if err := c.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// Gather collects every rank's send into root's recv, rank i's at
// [i*len(send), (i+1)*len(send)) (len(recv) = N x len(send) on root; other
// ranks' recv is not used and may be nil), as ncclGather / MPI_Gather.
func Gather[T Elem](ctx context.Context, c *Comm, send, recv []T, root int) (err error) {
	if c == nil {
		return invalidArg("nil Comm")
	}
	N := c.g.n
	if root < 0 || root >= N {
		return c.invalidCall(ctx, "Gather", invalidArg("root %d out of range [0, %d)", root, N))
	}
	if c.rank != root {
		recv = nil // not used
	}
	u := c.uses(ctx)
	defer u.release()
	if err := u.slices(asBytes(send), asBytes(recv)); err != nil {
		return c.invalidCall(ctx, "Gather", err)
	}
	if c.rank == root && len(recv) != len(send)*N {
		return c.invalidCall(ctx, "Gather", invalidArg("root's len(recv)=%d, want len(send)*%d=%d", len(recv), N, len(send)*N))
	}
	if err := checkSliceAlias("Gather", asBytes(send), asBytes(recv), sendInRecv, root*len(asBytes(send))); err != nil {
		return c.invalidCall(ctx, "Gather", err)
	}
	return gather(ctx, c, "Gather", "Gather fingerprint check", fingerprint{kind: collGather, dt: dtypeOf[T](), count: int64(len(send)), root: int32(root), strategy: Direct}, send, recv, root)
}

// gather is Gather's exchange after its checks, under fingerprint fp
// (phase names its rendezvous).
func gather[T Elem](ctx context.Context, c *Comm, name, phase string, fp fingerprint, send, recv []T, root int) (err error) {
	N := c.g.n
	dt := dtypeOf[T]()
	m := len(send)
	owned, err := c.begin(ctx, name, fp, phase)
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	c.adoptCall(asBytes(send), asBytes(recv))
	defer c.releaseAdopted()
	if m == 0 {
		return nil
	}
	k := &c.k
	n := N * m
	if err := c.prepare(k, dt, Sum, n, asBytes(send), c.rank*m); err != nil {
		return c.fail(err, false, nil, nil)
	}
	if err := c.gatherTo(ctx, k, c.g.all, root, n, m); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if c.rank == root {
		if err := c.download(ctx, k, 0, asBytes(recv)); err != nil {
			return c.fail(err, true, nil, nil)
		}
	}
	return nil
}

// Scatter sends chunk i of root's send (len(send)/N elements from
// i*len(send)/N) to rank i's recv (len(send) = N x len(recv) on root; other
// ranks' send is not used and may be nil), as ncclScatter / MPI_Scatter.
func Scatter[T Elem](ctx context.Context, c *Comm, send, recv []T, root int) (err error) {
	if c == nil {
		return invalidArg("nil Comm")
	}
	N := c.g.n
	if root < 0 || root >= N {
		return c.invalidCall(ctx, "Scatter", invalidArg("root %d out of range [0, %d)", root, N))
	}
	if c.rank != root {
		send = nil // not used
	}
	u := c.uses(ctx)
	defer u.release()
	if err := u.slices(asBytes(send), asBytes(recv)); err != nil {
		return c.invalidCall(ctx, "Scatter", err)
	}
	if c.rank == root && len(send) != len(recv)*N {
		return c.invalidCall(ctx, "Scatter", invalidArg("root's len(send)=%d, want len(recv)*%d=%d", len(send), N, len(recv)*N))
	}
	if err := checkSliceAlias("Scatter", asBytes(send), asBytes(recv), recvInSend, root*len(asBytes(recv))); err != nil {
		return c.invalidCall(ctx, "Scatter", err)
	}
	dt := dtypeOf[T]()
	m := len(recv)
	owned, err := c.begin(ctx, "Scatter", fingerprint{kind: collScatter, dt: dt, count: int64(m), root: int32(root), strategy: Direct}, "Scatter fingerprint check")
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	c.adoptCall(asBytes(send), asBytes(recv))
	defer c.releaseAdopted()
	if m == 0 {
		return nil
	}
	k := &c.k
	n := N * m
	var src []byte
	if c.rank == root {
		src = asBytes(send)
	}
	if err := c.prepare(k, dt, Sum, n, src, 0); err != nil {
		return c.fail(err, false, nil, nil)
	}
	if err := c.scatterFrom(ctx, k, root, n, m); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.download(ctx, k, c.rank*m, asBytes(recv)); err != nil {
		return c.fail(err, true, nil, nil)
	}
	return nil
}

// scatterFrom sends chunk q of root's [0, n) to rank q, into the same place
// of its buffer, slice by slice.
func (c *Comm) scatterFrom(ctx context.Context, k *call, root, n, m int) error {
	N := c.g.n
	slice := c.g.slotBytes / k.es
	for j := 0; j*slice < m; j++ {
		if c.rank == root {
			for q := 0; q < N; q++ {
				if q == root {
					continue
				}
				lo, hi := chunkRange(n, m, q)
				a, b := sliceRange(lo, hi, slice, j)
				if err := c.sendSlice(ctx, k, q, a, b); err != nil {
					return err
				}
			}
			continue
		}
		lo, hi := chunkRange(n, m, c.rank)
		a, b := sliceRange(lo, hi, slice, j)
		if b <= a {
			continue
		}
		in, _, err := c.take(ctx, root, 0, msgCollective, (b-a)*k.es)
		if err != nil {
			return err
		}
		if err := c.rec(c.dev.Stream().Copy(k.region(a, b), in)); err != nil {
			return err
		}
		if err := c.flush(ctx); err != nil {
			return err
		}
	}
	return nil
}
