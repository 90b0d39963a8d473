package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
)

// The tensor collectives other than all-reduce among ranks that share
// device memory (g.sharedMem): as sharedAllReduce, every rank publishes its
// send and recv tensors and the leader records the whole collective on its
// queue, one submission of device copies and reduce kernels reading the
// peers' send tensors in place and writing their recv tensors; no slot, no
// host byte. Reductions run in rank order (srcs 0..N-1 in one kernel), as
// the deterministic algorithms do, so the result is bitwise what the other
// layouts give in deterministic mode.
//
// Overlaps: the in-place layouts the slice forms allow (a recv that is the
// rank's own chunk of send, or send that is the rank's own chunk of recv)
// read and write each element in one step or copy a region onto itself,
// which is skipped. Any other overlap of a rank's send and recv is staged:
// the leader first copies that send into its work buffer and reads it from
// there.
//
// Failure: a mismatch or timeout at the rendezvous fails before anything
// moves; a device error during the one submission leaves the recv tensors
// undefined (a DataError with Touched set), the group broken.

// sharedKind is the collective a shared-memory tensor call runs.
type sharedKind uint8

const (
	sharedAllReduce sharedKind = iota // in place (sharedReduce)
	sharedReduceScatter
	sharedAllGather
	sharedReduce
	sharedBroadcast
	sharedAllToAll
	sharedGather
	sharedScatter
	sharedAllToAllV      // AllToAllVTensor and AllGatherVTensor
	sharedReduceScatterV // ReduceScatterVTensor
)

// sharedColl runs a tensor collective through shared device memory: send
// and recv are this rank's tensors (whole; either may be empty where the
// collective does not use it), m the chunk length in elements (the
// per-rank block of the collective), root the root where there is one. The
// caller checked the arguments and claimed the comm (enter).
func (c *Comm) sharedColl(ctx context.Context, name, phase string, fp fingerprint, kind sharedKind, send, recv backend.Region, m, root int) error {
	g := c.g
	g.tensorOf[c.rank], g.tRecvOf[c.rank] = send, recv
	c.strat = fp.strategy
	return c.sharedRun(ctx, name, phase, fp, "the ranks share device memory", sharedJob{kind: kind, m: m, root: root})
}

// sharedJob is the leader's work of one shared-memory collective: its
// kind, the chunk length in elements (the whole tensor for an all-reduce
// or a broadcast) and the root.
type sharedJob struct {
	kind    sharedKind
	m, root int
}

// sharedWork is the leader's part of sharedRun: record job, submit it and
// wait for it.
func (c *Comm) sharedWork(ctx context.Context, fp fingerprint, job sharedJob) error {
	if job.m == 0 {
		return nil
	}
	if job.kind == sharedAllReduce {
		return c.sharedReduce(ctx, fp.dt, fp.op)
	}
	if err := c.sharedRecord(job.kind, fp.dt, fp.op, job.m, job.root); err != nil {
		return err
	}
	return c.flush(ctx)
}

// sharedRecord records the leader's work for one shared-memory collective
// (see sharedColl).
func (c *Comm) sharedRecord(kind sharedKind, dt backend.DType, op Op, m, root int) error {
	g := c.g
	N, es := g.n, dt.Size()
	st := c.dev.Stream()
	sends, recvs := c.dstRegions(N), g.tRecvOf
	copy(sends, g.tensorOf)
	// chunk returns elements [q*m, (q+1)*m) of r.
	chunk := func(r backend.Region, q int) backend.Region {
		return backend.Region{Buf: r.Buf, Off: r.Off + q*m*es, Len: m * es}
	}
	// Stage sends that overlap their rank's recv other than in the safe
	// in-place layouts.
	staged := 0
	for r := range N {
		s, d := sends[r], recvs[r]
		if s.Len == 0 || d.Len == 0 || !overlaps(s, d) || sharedSafe(kind, s, d, r, root, m*es) {
			continue
		}
		staged += s.Len
	}
	if staged > 0 {
		if err := c.ensureMem(&c.work, staged, backend.DeviceLocal); err != nil {
			return err
		}
		at := 0
		for r := range N {
			s, d := sends[r], recvs[r]
			if s.Len == 0 || d.Len == 0 || !overlaps(s, d) || sharedSafe(kind, s, d, r, root, m*es) {
				continue
			}
			w := backend.Region{Buf: c.work, Off: at, Len: s.Len}
			if err := st.Copy(w, s); err != nil {
				return c.rec(err)
			}
			sends[r], at = w, at+s.Len
		}
	}
	cp := func(dst, src backend.Region) error {
		if dst == src {
			return nil // in place
		}
		return c.rec(st.Copy(dst, src))
	}
	scale := scaleFor(op, N)
	srcs := c.regions(N)
	// at returns n elements of r from element off.
	at := func(r backend.Region, off, n int) backend.Region {
		return backend.Region{Buf: r.Buf, Off: r.Off + off*es, Len: n * es}
	}
	switch kind {
	case sharedAllToAllV:
		// Rank j's range for rank i: scounts and sdispls of j, placed at
		// rdispls of i (the counts agreed: rcounts of i say the same).
		for i := range N {
			for j := range N {
				if n := g.vCountsOf[j][i]; n > 0 {
					if err := cp(at(recvs[i], g.vRDOf[i][j], n), at(sends[j], g.vSDOf[j][i], n)); err != nil {
						return err
					}
				}
			}
		}
	case sharedReduceScatterV:
		// Rank i's recv is the rank-ordered reduction of every rank's
		// range for it.
		for i := range N {
			n := recvs[i].Len / es
			if n == 0 {
				continue
			}
			for q := range N {
				srcs[q] = at(sends[q], g.vSDOf[q][i], n)
			}
			if err := st.Reduce(kernelOp(op), dt, recvs[i], srcs, scale); err != nil {
				return c.rec(err)
			}
		}
	case sharedReduceScatter:
		for r := range N {
			for p := range N {
				srcs[p] = chunk(sends[p], r)
			}
			if err := st.Reduce(kernelOp(op), dt, recvs[r], srcs, scale); err != nil {
				return c.rec(err)
			}
		}
	case sharedReduce:
		if err := st.Reduce(kernelOp(op), dt, recvs[root], sends, scale); err != nil {
			return c.rec(err)
		}
	case sharedAllGather:
		for r := range N {
			for p := range N {
				if err := cp(chunk(recvs[r], p), sends[p]); err != nil {
					return err
				}
			}
		}
	case sharedBroadcast:
		for r := range N {
			if err := cp(sends[r], sends[root]); err != nil {
				return err
			}
		}
	case sharedAllToAll:
		for r := range N {
			for p := range N {
				if err := cp(chunk(recvs[r], p), chunk(sends[p], r)); err != nil {
					return err
				}
			}
		}
	case sharedGather:
		for p := range N {
			if err := cp(chunk(recvs[root], p), sends[p]); err != nil {
				return err
			}
		}
	case sharedScatter:
		for r := range N {
			if err := cp(recvs[r], chunk(sends[root], r)); err != nil {
				return err
			}
		}
	}
	return nil
}

// sharedSafe reports whether rank r's overlapping send s and recv d are an
// in-place layout the one-pass work of kind handles without staging (each
// element read and written by one step, or a region copied onto itself).
func sharedSafe(kind sharedKind, s, d backend.Region, r, root, chunkBytes int) bool {
	own := func(x backend.Region, q int) backend.Region {
		return backend.Region{Buf: x.Buf, Off: x.Off + q*chunkBytes, Len: chunkBytes}
	}
	switch kind {
	case sharedReduceScatter: // recv is the rank's chunk of send
		return d == own(s, r)
	case sharedAllGather: // send is the rank's chunk of recv
		return s == own(d, r)
	case sharedReduce: // root reduces onto its send
		return r == root && s == d
	case sharedGather:
		return r == root && s == own(d, r)
	case sharedScatter:
		return r == root && d == own(s, r)
	}
	return false
}

// tryShared runs a tensor collective through shared device memory where
// the ranks share it (sharedColl), claiming the comm; ok is false where
// they do not, and the caller runs the exchange.
func (c *Comm) tryShared(ctx context.Context, name, phase string, fp fingerprint, kind sharedKind, send, recv backend.Region, m, root int) (ok bool, err error) {
	if !c.g.sharedMem {
		return false, nil
	}
	owned, err := c.enter(ctx, name, true)
	if err != nil {
		return true, err
	}
	err = c.sharedColl(ctx, name, phase, fp, kind, send, recv, m, root)
	c.leave(owned, &err)
	return true, err
}

// publishV publishes copies of a V tensor collective's send offsets and
// receive counts and offsets for the leader (g.vSDOf, g.vRCOf, g.vRDOf;
// the send counts are published by agreeCounts), before the rendezvous
// that precedes its reads.
func (c *Comm) publishV(sdispls, rcounts, rdispls []int) {
	N := c.g.n
	if cap(c.vPubV) < 3*N {
		c.vPubV = make([]int, 3*N)
	}
	b := c.vPubV[:3*N]
	copy(b, sdispls)
	copy(b[N:], rcounts)
	copy(b[2*N:], rdispls)
	c.g.vSDOf[c.rank], c.g.vRCOf[c.rank], c.g.vRDOf[c.rank] = b[:N], b[N:2*N], b[2*N:]
}
