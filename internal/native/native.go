// Package native runs the leader's part of a collective between processes
// through the transport's own collectives (backend.NativeCollectives:
// MPI's): the process's ranks' inputs combined on the CPU in rank order,
// then one native call among the processes' leaders; in deterministic mode
// the transport only moves raw blocks (an Alltoall by chunk, each chunk
// reduced in global rank order by one process, an all-gather of the
// chunks), so the result is the one-process deterministic result whatever
// the processes' layout; an all-gather is an Alltoallv of the leader's
// blocks to every process. The moves between ranks (Move: AllToAll(V),
// Gather(V), Scatter(V), AllGatherV, ReduceScatterV's raw blocks) are one
// native Alltoallv of the process's ranks' ranges, their counts agreed
// first where they differ by rank. Where the transport registered collectives
// through memory its processes share (Node: mpi's shared-memory window,
// for processes on one node) and they run, every collective here goes
// through them instead. The leader's host memory is pooled per comm, and a
// native call waits under the comm's wait context (the call's context, its
// timeout and the group breaking). A failed call waits, up to the drain
// limit, for the transport to release the memory it was given (MPI cannot
// cancel a collective); past that the transport is lost (Pools.Drain).
package native

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hostmath"
	"github.com/gocoll/gocoll/internal/memory"
	"github.com/gocoll/gocoll/internal/waitctx"
)

// maxBlock is the largest block of a native Alltoall or Allgather (one MPI
// call counts it in a C int).
const maxBlock = 1<<31 - 1

// Fits reports whether one native call moves the block of a collective of
// n elements of es bytes between processes (an AllReduce's, a
// ReduceScatter's (rs) or an AllGather's (ag) per-rank count; det: a
// reduction in deterministic mode, whose Alltoall moves every local rank's
// chunk) for L ranks per process and P processes. MPI_Iallreduce,
// MPI_Ireduce and MPI_Ibcast are split into calls that fit.
func Fits(rs, ag, det bool, L, P, n, es int) bool {
	block := 0
	if rs || ag {
		block = n
	}
	if det {
		block = L * ((n + P - 1) / P)
		if rs {
			block = L * n
		}
	}
	return block*es <= maxBlock
}

// Pools is a comm's pooled host memory for the leader's part, and whether
// the transport was declared lost on one of its calls (Drain).
type Pools struct {
	a, b, c, d, cm []byte    // d: a raw exchange's combined input (rawSends)
	e              []byte    // a split Move's round of data to send
	ints           []int     // a Move's counts and offsets between processes
	out            Outcome   // the last Move's
	one            [1][]byte // the combined input handed to a Node
	into           [1][]byte // combineIn's destination
	srcs           [][]byte  // combineIn's sources (the ranks' sends)
	view           []byte    // the last AllGather's blocks in a Node's memory (nil: in the leader's recv)
	stride         int       // view's distance between blocks
	wrote          bool      // the last AllGather or ReduceScatter wrote every local rank's result
	lost           atomic.Bool
}

// Gathered returns the last AllGather's blocks where they stayed in a
// Node's shared memory, block r at view[r*stride:] (each rank copies its
// result from there), or nil where the leader's recv holds the result.
func (p *Pools) Gathered() (view []byte, stride int) { return p.view, p.stride }

// WroteAll reports whether the last AllGather wrote every local rank's
// result itself (the others copy nothing), or the last ReduceScatter its
// one rank's result (Blocks does not hold it).
func (p *Pools) WroteAll() bool { return p.wrote }

// get returns (*p)[:n], growing the pooled memory when it is short.
func get(p *[]byte, n int) []byte {
	if cap(*p) < n {
		*p = make([]byte, n+n/4)
	}
	return (*p)[:n]
}

// Blocks is the memory a ReduceScatter's leader left its process's blocks
// in (block l: local rank l's).
func (p *Pools) Blocks() []byte { return p.b }

// Drain ends a failed native call (err, not nil) of the leader: it waits up
// to limit for nc (nil: none) to release the memory of the calls that
// returned early. Past the limit the transport holds that memory for good
// (it declared itself lost, and MPI may still write it): the pooled memory
// is given up to it, never reused or freed under it, the pools remember the
// loss, and err comes back as a *LostError.
func (p *Pools) Drain(nc backend.NativeCollectives, limit time.Duration, err error) error {
	if nc == nil || nc.Drain(limit) {
		return err
	}
	p.a, p.b, p.c, p.d, p.e, p.cm = nil, nil, nil, nil, nil, nil
	p.lost.Store(true)
	return &LostError{Err: err}
}

// Mark returns err as a *LostError once a call of the leader whose pools p
// are declared the transport lost (the process's other ranks' failures
// after the leader's: a Reduce's root may be one of them, its receive
// buffer in MPI's hands), else err.
func (p *Pools) Mark(err error) error {
	if err == nil || !p.lost.Load() {
		return err
	}
	return &LostError{Err: err}
}

// LostError is a native collective's failure (Err: the timeout, the
// context's end, the group broken) once the transport was declared lost:
// it still held the call's memory past the drain limit.
type LostError struct{ Err error }

func (e *LostError) Error() string {
	return e.Err.Error() + "; the transport between processes is declared lost: its collective still held this call's " +
		"memory past the drain limit, and MPI may still write the receive buffer (and memory the process's leader " +
		"gave it) at any time: do not reuse it"
}

// Is matches backend.ErrTransportLost.
func (e *LostError) Is(t error) bool { return t == backend.ErrTransportLost }

// Unwrap returns the failure.
func (e *LostError) Unwrap() error { return e.Err }

// Failure is a native call that failed: Err is the transport's error, Why
// what ended the wait (waitctx.ErrBroken, waitctx.ErrTimeout or the call's
// context's error; nil when the transport failed on its own).
type Failure struct {
	Call     string
	Err, Why error
}

func (f *Failure) Error() string { return f.Call + " between processes: " + f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// Leader is one call's leader: the group's layout, the process's ranks'
// published inputs and the comm's pools and wait context. A value made per
// call; it allocates nothing (but the pools' growth).
type Leader struct {
	NC      backend.NativeCollectives
	Tr      backend.Transport // Allgather, and this process's rank
	P, L, N int               // processes, ranks per process, ranks
	Det     bool              // deterministic mode: raw blocks, rank order
	Sends   [][]byte          // the process's ranks' inputs, in rank order
	Pools   *Pools
	W       *waitctx.Ctx
	Timeout time.Duration // the group's CommunicationTimeout

	// The call's combination, for Combined (combineFor).
	cdt backend.DType
	cop backend.Op
	cnb int
}

// call runs f, one native collective, under the wait context.
func (l *Leader) call(ctx context.Context, name string, f func(context.Context) error) error {
	l.W.Arm(ctx, l.Timeout)
	err := f(l.W)
	why := l.W.Disarm()
	if err == nil {
		return nil
	}
	return &Failure{Call: name, Err: err, Why: why}
}

// raw reports whether a reduction of dt with op ships raw blocks and
// reduces them here in rank order (det): in deterministic mode, and for a
// pair the transport does not reduce natively with the library's semantics
// (16- and 8-bit types, float max and min: NaN and signed zeros as the
// host's arithmetic has them), which the library's own arithmetic then
// reduces bit for bit as in one process.
func (l *Leader) raw(dt backend.DType, op backend.Op) bool {
	return l.Det || !l.NC.Reduces(dt, op)
}

// rawSends returns the inputs a raw exchange of nb bytes per rank ships,
// and how many there are per process: every local rank's in deterministic
// mode (reduced in global rank order), else the process's ranks combined
// first (L times fewer bytes between processes; the processes' partial
// results are then reduced in process order).
func (l *Leader) rawSends(dt backend.DType, op backend.Op, nb int) ([][]byte, int) {
	if l.Det || l.L == 1 {
		return l.Sends, l.L
	}
	l.Pools.one[0] = l.combineIn(&l.Pools.d, dt, op, nb)
	return l.Pools.one[:], 1
}

// combine returns the process's n-element inputs reduced in rank order (the
// partial result the transport then combines), in pooled memory where the
// process has several ranks.
func (l *Leader) combine(dt backend.DType, op backend.Op, nb int) []byte {
	return l.combineIn(&l.Pools.a, dt, op, nb)
}

// combineIn is combine in pool p.
func (l *Leader) combineIn(p *[]byte, dt backend.DType, op backend.Op, nb int) []byte {
	if l.L == 1 {
		return l.Sends[0][:nb]
	}
	gb := get(p, nb)
	srcs := l.Pools.srcs[:0]
	for _, s := range l.Sends {
		srcs = append(srcs, s[:nb])
	}
	l.Pools.into[0] = gb
	hostmath.ReduceMulti(dt, op, l.Pools.into[:], srcs, nb/dt.Size(), 1) // straight from the ranks' memory
	clear(srcs)
	l.Pools.srcs, l.Pools.into[0] = srcs, nil
	return gb
}

// Reduce is the leader's part of an all-reduce (root < 0) or a reduce to
// process root of n elements: the process's inputs reduced across every
// process into dst (nil on a reduce's other processes), scaled by scale (a
// mean's 1/N, else 1). It goes through the registered Node's Allreduce or
// Reduce where that runs (the processes share memory).
func (l *Leader) Reduce(ctx context.Context, dt backend.DType, op backend.Op, scale float64, n int, dst []byte, root int) error {
	switch {
	case node == nil:
	case root < 0 && node.Allreduce != nil:
		if ran, err := l.nodeReduce(ctx, dt, op, scale, n, dst); ran {
			return err
		}
	case root >= 0 && node.Reduce != nil:
		if ran, err := l.nodeRootReduce(ctx, dt, op, scale, n, dst, root); ran {
			return err
		}
	}
	if l.raw(dt, op) {
		return l.det(ctx, dt, op, scale, n, dst)
	}
	src := l.combine(dt, op, n*dt.Size())
	var err error
	if root < 0 {
		err = l.call(ctx, "MPI_Iallreduce", func(ctx context.Context) error { return l.NC.Allreduce(ctx, src, dst, dt, op) })
	} else {
		err = l.call(ctx, "MPI_Ireduce", func(ctx context.Context) error { return l.NC.Reduce(ctx, src, dst, dt, op, root) })
	}
	if err == nil && scale != 1 && dst != nil {
		hostmath.ReduceStrided(dt, op, dst, dst, 0, 0, 1, n, scale) // the mean's scale, as the kernels apply it
	}
	return err
}

// det is Reduce in deterministic mode: an Alltoall of the process's inputs
// by chunk, chunk q reduced in global rank order by process q, an
// all-gather of the chunks (allgather), the result copied into dst (if not nil).
func (l *Leader) det(ctx context.Context, dt backend.DType, op backend.Op, scale float64, n int, dst []byte) error {
	es := dt.Size()
	sends, L := l.rawSends(dt, op, n*es)
	P := l.P
	chunk := (n + P - 1) / P
	cb := chunk * es
	// Block q of sb: chunk q of each input in turn (the last chunk short,
	// its tail unused).
	sb := get(&l.Pools.a, P*L*cb)
	rb := get(&l.Pools.b, P*L*cb)
	for q := range P {
		lo, hi := min(q*chunk, n), min((q+1)*chunk, n)
		for i, s := range sends {
			hostmath.Copy(sb[(q*L+i)*cb:], s[lo*es:hi*es])
		}
	}
	if err := l.call(ctx, "MPI_Ialltoall", func(ctx context.Context) error { return l.NC.Alltoall(ctx, sb, rb) }); err != nil {
		return err
	}
	// rb holds, rank by rank in global order, every rank's chunk of this
	// process: reduce them in that order.
	me := l.Tr.Rank()
	cnt := min((me+1)*chunk, n) - min(me*chunk, n)
	mine := sb[:cb]
	clear(mine[cnt*es:])
	hostmath.ReduceStrided(dt, op, mine, rb, chunk, 0, P*L, cnt, scale)
	all := rb[:P*cb]
	if err := l.allgather(ctx, mine, all); err != nil {
		return err
	}
	hostmath.Copy(dst, all)
	return nil
}

// ReduceScatter is the leader's part of a ReduceScatter of m elements per
// rank: the blocks of the process's ranks, reduced across every rank, into
// Pools.Blocks (block l: local rank l's), or, where the process has one
// rank, straight into recv (its result) when a Node's call reads every
// input where it lies (Pools.WroteAll). recv may be the rank's block of
// its input (in place): that call reads each element of it before writing
// it, and no other process reads that block.
func (l *Leader) ReduceScatter(ctx context.Context, dt backend.DType, op backend.Op, scale float64, m int, recv []byte) error {
	es := dt.Size()
	L := l.L
	mb, nb := m*es, l.N*m*es
	res := get(&l.Pools.b, L*mb)
	l.Pools.wrote = false
	if L > 1 {
		recv = nil
	}
	if node != nil && node.ReduceScatter != nil {
		if ran, err := l.nodeReduceScatter(ctx, dt, op, scale, m, res, recv); ran {
			return err
		}
	}
	if l.raw(dt, op) {
		// Chunk q of the all-reduce's exchange is process q's ranks'
		// blocks: the same Alltoall, no Allgather.
		cb := L * mb
		sends, k := l.rawSends(dt, op, nb)
		sb := get(&l.Pools.a, l.P*k*cb)
		rb := get(&l.Pools.c, l.P*k*cb)
		for q := range l.P {
			for i, s := range sends {
				hostmath.Copy(sb[(q*k+i)*cb:(q*k+i+1)*cb], s[q*cb:(q+1)*cb])
			}
		}
		if err := l.call(ctx, "MPI_Ialltoall", func(ctx context.Context) error { return l.NC.Alltoall(ctx, sb, rb) }); err != nil {
			return err
		}
		hostmath.ReduceStrided(dt, op, res, rb, L*m, 0, l.P*k, L*m, scale)
		return nil
	}
	src := l.combine(dt, op, nb)
	if err := l.call(ctx, "MPI_Ireduce_scatter_block", func(ctx context.Context) error {
		return l.NC.ReduceScatterBlock(ctx, src, res, dt, op)
	}); err != nil {
		return err
	}
	if scale != 1 {
		hostmath.ReduceStrided(dt, op, res, res, 0, 0, 1, L*m, scale)
	}
	return nil
}

// AllGather is the leader's part of an AllGather of mb bytes per rank: the
// process's ranks' blocks gathered from every process into recv, or, with
// several ranks in the process and a call of one chunk through a Node, left
// in the Node's memory for every rank to copy (Pools.Gathered; recv is not
// written), or written into the other ranks' results (more) too
// (Pools.WroteAll).
func (l *Leader) AllGather(ctx context.Context, mb int, recv []byte, more [][]byte) error {
	// With several ranks, the process's ranks copy the blocks of a call of
	// one chunk out of the Node's memory at once (Gathered), instead of
	// from the leader's recv after the leader copied them there.
	l.Pools.view, l.Pools.wrote = nil, false
	if node != nil && node.Allgather != nil {
		if ran, err := l.nodeAllGather(ctx, mb, recv, more); ran {
			return err
		}
	}
	mine := l.Sends[0][:mb]
	if l.L > 1 || memory.Holds(recv, mine) {
		mine = get(&l.Pools.a, l.L*mb) // the ranks' blocks together; in place, off recv
		for i, s := range l.Sends {
			hostmath.Copy(mine[i*mb:], s[:mb])
		}
	}
	return l.allgather(ctx, mine, recv)
}

// allgather gathers every process's mine into all, in process order:
// MPI_Ialltoallv of mine to every process, straight from and into the
// memory given (the transport's Allgather goes through C memory: two more
// copies), where its offsets fit a C int.
func (l *Leader) allgather(ctx context.Context, mine, all []byte) error {
	P, n := l.P, len(mine)
	if P*n > maxBlock {
		return l.call(ctx, "MPI_Iallgather", func(ctx context.Context) error { return l.Tr.Allgather(ctx, mine, all) })
	}
	if cap(l.Pools.ints) < 4*P {
		l.Pools.ints = make([]int, 4*P)
	}
	ints := l.Pools.ints[:4*P]
	sc, sd, rc, rd := ints[:P], ints[P:2*P], ints[2*P:3*P], ints[3*P:]
	for q := range P {
		sc[q], sd[q], rc[q], rd[q] = n, 0, n, q*n
	}
	return l.call(ctx, "MPI_Ialltoallv", func(ctx context.Context) error {
		return l.NC.Alltoallv(ctx, mine, sc, sd, all, rc, rd)
	})
}

// Bcast is the leaders' broadcast of buf from process root.
func (l *Leader) Bcast(ctx context.Context, buf []byte, root int) error {
	if node != nil && node.Bcast != nil {
		if ran, err := l.nodeBcast(ctx, buf, root); ran {
			return err
		}
	}
	return l.call(ctx, "MPI_Ibcast", func(ctx context.Context) error { return l.NC.Bcast(ctx, buf, root) })
}
