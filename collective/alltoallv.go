package collective

import (
	"context"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// AllToAllV is AllToAll with per-peer counts and offsets (MPI_Alltoallv,
// NCCL's grouped send/recv pattern): rank i sends
// send[sdispls[j] : sdispls[j]+scounts[j]] to rank j, which stores it at
// recv[rdispls[i] : rdispls[i]+rcounts[i]]. Every slice has one entry per
// rank; scounts[j] on rank i must equal rcounts[i] on rank j. The ranks
// first exchange their counts and check them: a disagreement fails on
// every rank with a *MismatchError before any data moves, and the group
// stays usable. recv elements outside the received ranges are not written.
// Regions may not overlap within recv (send regions may).
//
// send and recv may be the same slice (MPI_IN_PLACE): the ranges sent are
// what it holds when the call starts. Any other overlap is refused.
func AllToAllV[T Elem](ctx context.Context, c *Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) error {
	if c == nil {
		return invalidArg("nil Comm")
	}
	u := c.uses(ctx)
	defer u.release()
	if err := u.slices(asBytes(send), asBytes(recv)); err != nil {
		return c.invalidCall(ctx, "AllToAllV", err)
	}
	if err := checkSliceAlias("AllToAllV", asBytes(send), asBytes(recv), sameMem, 0); err != nil {
		return c.invalidCall(ctx, "AllToAllV", err)
	}
	return allToAllV(ctx, c, "AllToAllV", collAllToAllV, Sum, send, scounts, sdispls, recv, rcounts, rdispls, nil)
}

// AllGatherV gathers every rank's send into every rank's recv, rank j's at
// recv[displs[j] : displs[j]+counts[j]] (MPI_Allgatherv): counts[j] is rank
// j's len(send), and counts and displs are the same on every rank. Checked
// as AllToAllV is.
func AllGatherV[T Elem](ctx context.Context, c *Comm, send []T, recv []T, counts, displs []int) error {
	if c == nil {
		return invalidArg("nil Comm")
	}
	u := c.uses(ctx)
	defer u.release()
	if err := u.slices(asBytes(send), asBytes(recv)); err != nil {
		return c.invalidCall(ctx, "AllGatherV", err)
	}
	N := c.g.n
	if len(counts) != N || len(displs) != N {
		return c.invalidCall(ctx, "AllGatherV", invalidArg("len(counts)=%d and len(displs)=%d, want one per rank (%d)", len(counts), len(displs), N))
	}
	if err := checkSliceAlias("AllGatherV", asBytes(send), asBytes(recv), sendInRecv, displs[c.rank]*dtypeOf[T]().Size()); err != nil {
		return c.invalidCall(ctx, "AllGatherV", err)
	}
	sc, sd := c.vScratch(N)
	for j := range sc {
		sc[j], sd[j] = len(send), 0
	}
	return allToAllV(ctx, c, "AllGatherV", collAllGatherV, Sum, send, sc, sd, recv, counts, displs, nil)
}

// vScratch returns the comm's pooled count and offset slices for
// AllGatherV (one goroutine per Comm uses them).
func (c *Comm) vScratch(n int) ([]int, []int) {
	if cap(c.vCounts) < n {
		c.vCounts, c.vDispls = make([]int, n), make([]int, n)
	}
	return c.vCounts[:n], c.vDispls[:n]
}

func checkV(name string, n, length int, counts, displs []int, what string) error {
	if len(counts) != n || len(displs) != n {
		return invalidArg("%s: %d %s counts and %d offsets, want %d each", name, len(counts), what, len(displs), n)
	}
	for j := range counts {
		if counts[j] < 0 || displs[j] < 0 || displs[j] > length || counts[j] > length-displs[j] {
			return invalidArg("%s: %s range %d [%d, +%d) outside the %d-element slice", name, what, j, displs[j], counts[j], length)
		}
	}
	return nil
}

// vPhases names the rendezvous of each V collective (static strings: no
// allocation per call).
var vPhases = map[collKind][3]string{
	collAllToAllV:      {"AllToAllV fingerprint check", "AllToAllV counts check", "AllToAllV counts exchange"},
	collAllGatherV:     {"AllGatherV fingerprint check", "AllGatherV counts check", "AllGatherV counts exchange"},
	collReduceScatterV: {"ReduceScatterV fingerprint check", "ReduceScatterV counts check", "ReduceScatterV counts exchange"},
}

// allToAllV moves send's ranges to their ranks and the ranges received into
// recv. With red set (ReduceScatterV on a device with kernels), recv is not
// used: the N blocks of len(red) received (rcounts and rdispls describe
// them) stay in the device buffer, where one kernel reduces them in rank
// order with op into red.
func allToAllV[T Elem](ctx context.Context, c *Comm, name string, kind collKind, op Op, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int, red []T) (err error) {
	if c == nil {
		return invalidArg("nil Comm")
	}
	N := c.g.n
	if e := checkV(name, N, len(send), scounts, sdispls, "send"); e != nil {
		return c.invalidCall(ctx, name, e)
	}
	R := len(recv)
	if red != nil {
		R = N * len(red)
	}
	if e := checkV(name, N, R, rcounts, rdispls, "recv"); e != nil {
		return c.invalidCall(ctx, name, e)
	}
	for a := 0; a < N; a++ {
		for b := a + 1; b < N; b++ {
			if rcounts[a] > 0 && rcounts[b] > 0 && rdispls[a] < rdispls[b]+rcounts[b] && rdispls[b] < rdispls[a]+rcounts[a] {
				return c.invalidCall(ctx, name, invalidArg("%s: recv ranges %d and %d overlap", name, a, b))
			}
		}
	}
	dt := dtypeOf[T]()
	fp := fingerprint{kind: kind, op: op, dt: dt, strategy: Direct}
	owned, err := c.begin(ctx, name, fp, vPhases[kind][0])
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	out := recv
	if red != nil {
		out = red
	}
	c.adoptCall(asBytes(send), asBytes(out))
	defer c.releaseAdopted()
	k := &c.k
	i := c.rank
	if err := c.agreeCounts(ctx, name, fp, vPhases[kind][2], vPhases[kind][1], scounts, rcounts); err != nil {
		return err
	}
	// The data: send in [0, S), recv in [S, S+R), red's result after it.
	S, M := len(send), len(red)
	if S+R == 0 {
		return nil
	}
	if err := c.prepare(k, dt, Sum, S+R+M, asBytes(send), 0); err != nil {
		return c.fail(err, false, nil, nil)
	}
	st := c.dev.Stream()
	if scounts[i] > 0 {
		if err := c.rec(st.Copy(k.region(S+rdispls[i], S+rdispls[i]+rcounts[i]), k.region(sdispls[i], sdispls[i]+scounts[i]))); err != nil {
			return c.failAfter(err, nil, nil)
		}
	}
	slice := c.g.slotBytes / k.es
	for s := 1; s < N; s++ {
		to, from := mod(i+s, N), mod(i-s, N)
		for j := 0; j*slice < max(scounts[to], rcounts[from]); j++ {
			a, b := sliceRange(sdispls[to], sdispls[to]+scounts[to], slice, j)
			if err := c.sendSlice(ctx, k, to, a, b); err != nil {
				return c.failAfter(err, nil, nil)
			}
			a, b = sliceRange(rdispls[from], rdispls[from]+rcounts[from], slice, j)
			if b <= a {
				continue
			}
			in, _, err := c.take(ctx, from, 0, msgCollective, (b-a)*k.es)
			if err != nil {
				return c.failAfter(err, nil, nil)
			}
			if err := c.rec(st.Copy(k.region(S+a, S+b), in)); err != nil {
				return c.failAfter(err, nil, nil)
			}
			if err := c.flush(ctx); err != nil {
				return c.failAfter(err, nil, nil)
			}
		}
	}
	if err := c.flush(ctx); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if red != nil {
		if M == 0 {
			return nil
		}
		srcs := c.regions(N)
		for q := range srcs {
			srcs[q] = k.region(S+rdispls[q], S+rdispls[q]+M)
		}
		if err := c.rec(st.Reduce(kernelOp(op), dt, k.region(S+R, S+R+M), srcs, scaleFor(op, N))); err != nil {
			return c.failAfter(err, nil, nil)
		}
		if err := c.flush(ctx); err != nil {
			return c.failAfter(err, nil, nil)
		}
		if err := c.download(ctx, k, S+R, asBytes(red)); err != nil {
			return c.fail(err, true, nil, nil)
		}
		return nil
	}
	for j := 0; j < N; j++ {
		if rcounts[j] == 0 {
			continue
		}
		if err := c.download(ctx, k, S+rdispls[j], asBytes(recv[rdispls[j]:rdispls[j]+rcounts[j]])); err != nil {
			return c.fail(err, true, nil, nil)
		}
	}
	return nil
}

// exchangeCounts sends scounts[j] to rank j through the devices (a pairwise
// exchange of one float64 each, as the data moves) and leaves what each
// rank j sends this one in cnt[N+j].
func (c *Comm) exchangeCounts(ctx context.Context, k *call, scounts []int, cnt []float64) error {
	N, i := c.g.n, c.rank
	if err := c.prepare(k, backend.F64, Sum, 2*N, nil, 0); err != nil {
		return c.fail(err, false, nil, nil)
	}
	for j := 0; j < N; j++ {
		cnt[j] = float64(scounts[j])
	}
	if err := c.upload(k, 0, asBytes(cnt[:N])); err != nil {
		return c.fail(err, false, nil, nil)
	}
	if err := c.rec(c.dev.Stream().Copy(k.region(N+i, N+i+1), k.region(i, i+1))); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.pairwiseExchange(ctx, k, N, 1); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.flush(ctx); err != nil {
		return c.failAfter(err, nil, nil)
	}
	if err := c.download(ctx, k, N, asBytes(cnt[N:2*N])); err != nil {
		return c.fail(err, false, nil, nil)
	}
	return nil
}

// vPubBuf returns the comm's pooled copy of its send counts, which the
// ranks of one process read (g.vCountsOf).
func (c *Comm) vPubBuf(n int) []int {
	if cap(c.vPub) < n {
		c.vPub = make([]int, n)
	}
	return c.vPub[:n]
}

// vCountBuf returns the comm's pooled float64 scratch for the counts
// exchange.
func (c *Comm) vCountBuf(n int) []float64 {
	if cap(c.vCnt) < n {
		c.vCnt = make([]float64, n)
	}
	return c.vCnt[:n]
}

// ReduceScatterV reduces every rank's send with op and leaves elements
// [displs[j], displs[j]+counts[j]) of the reduction in rank j's recv
// (len(recv) = counts[j]): ReduceScatter with per-rank block sizes. counts
// and displs are the same on every rank and describe ranges of send (whose
// length is the same on every rank). The blocks travel as in AllToAllV
// (counts agreed first) and each rank reduces the N blocks it receives in
// rank order with one kernel on its device (on the CPU, with the kernels'
// arithmetic, for a type some device has no kernels for): bitwise what
// ReduceScatter gives with Config.Deterministic, for every element type
// and op (Mean of Float16 and BFloat16 included: both divide the float32
// sum by N before the one rounding to 16 bits).
func ReduceScatterV[T Elem](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, op Op) error {
	if c == nil {
		return invalidArg("nil Comm")
	}
	u := c.uses(ctx)
	defer u.release()
	if err := u.slices(asBytes(send), asBytes(recv)); err != nil {
		return c.invalidCall(ctx, "ReduceScatterV", err)
	}
	if len(displs) == c.g.n {
		if err := checkSliceAlias("ReduceScatterV", asBytes(send), asBytes(recv), recvInSend, displs[c.rank]*dtypeOf[T]().Size()); err != nil {
			return c.invalidCall(ctx, "ReduceScatterV", err)
		}
	}
	return reduceScatterV(ctx, c, send, recv, counts, displs, op)
}

// reduceScatterV is ReduceScatterV after the memory is resolved (also
// ReduceScatter's path for types without kernels).
func reduceScatterV[T Elem](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, op Op) error {
	N := c.g.n
	if err := checkOp(op, dtypeOf[T]()); err != nil {
		return c.invalidCall(ctx, "ReduceScatterV", err)
	}
	if len(counts) != N || len(displs) != N {
		return c.invalidCall(ctx, "ReduceScatterV", invalidArg("%d counts and %d offsets, want %d each", len(counts), len(displs), N))
	}
	m := counts[c.rank]
	if m < 0 || len(recv) != m {
		return c.invalidCall(ctx, "ReduceScatterV", invalidArg("len(recv)=%d, want counts[%d]=%d", len(recv), c.rank, m))
	}
	rc, rd := c.vScratch(N)
	for q := range rc {
		rc[q], rd[q] = m, q*m
	}
	if !c.noKernels(dtypeOf[T]()) {
		if recv == nil {
			recv = []T{}
		}
		return allToAllV(ctx, c, "ReduceScatterV", collReduceScatterV, op, send, counts, displs, nil, rc, rd, recv)
	}
	es := dtypeOf[T]().Size()
	if cap(c.vBlocks) < N*m*es {
		c.vBlocks = make([]byte, N*m*es)
	}
	blocks := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(c.vBlocks))), N*m)
	if err := allToAllV(ctx, c, "ReduceScatterV", collReduceScatterV, op, send, counts, displs, blocks, rc, rd, nil); err != nil {
		return err
	}
	if m == 0 {
		return nil
	}
	reduceHost(dtypeOf[T](), asBytes(recv), asBytes(blocks), m, 0, N, m, op, scaleFor(op, N))
	return nil
}
