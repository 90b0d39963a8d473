package native

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/board"
	"github.com/gocoll/gocoll/internal/hostmath"
)

// Move is one call's exchange of ranges between ranks (AllToAll(V),
// Gather(V), Scatter(V), AllGatherV, and ReduceScatterV's raw blocks), as
// the leader sees it: each local rank l's ranges in elements, indexed by
// global rank (SC[l][j] elements from SD[l][j] of its send go to rank j;
// RC[l][j] elements from rank j land at RD[l][j] of its recv), and each
// local rank's recv.
type Move struct {
	SC, SD, RC, RD [][]int
	Recvs          [][]byte
	ES             int // bytes per element
	// Check: the counts are not known to agree (the V kinds; a fixed
	// kind's agree through the call's fingerprint).
	Check bool
	// Reduce (ReduceScatterV): local rank l receives RC[l][j] = its block's
	// elements from every rank j and reduces them, in rank order, into its
	// recv (RD is ignored).
	Reduce bool
	DT     backend.DType
	Op     backend.Op
	Scale  float64
}

// Mismatch is a local rank's first sender whose count is not the one it
// expects (Peer -1: none).
type Mismatch struct{ Peer, Want, Got int }

// Outcome is what the last Move found before any data moved: the counts
// disagreed somewhere (every process learned it: Bad names this process's
// ranks' own disagreements), or a process's data between processes
// exceeds one native call (TooLarge, matching backend.ErrUnsupported).
// Nothing moved then.
type Outcome struct {
	Disagree bool
	Bad      []Mismatch
	TooLarge error
}

// errTooLarge is Outcome.TooLarge.
var errTooLarge = fmt.Errorf("a process's data between processes exceeds one MPI call (2^31-1 bytes; run strategy direct): %w",
	backend.ErrUnsupported)

// MoveOutcome is the last Move's Outcome (the leader's pools: the
// process's other ranks read it after the call's local meeting), and local
// rank l's Mismatch (Peer -1 where the counts agreed or were not checked).
func (p *Pools) MoveOutcome(l int) (*Outcome, Mismatch) {
	if l < len(p.out.Bad) {
		return &p.out, p.out.Bad[l]
	}
	return &p.out, Mismatch{Peer: -1}
}

// Move is the leader's part of an exchange of ranges between ranks: one
// native Alltoallv among the processes of the process's ranks' ranges,
// packed process by process (sender by sender, then receiver by
// receiver), unpacked into the local ranks' recvs once it completed (a
// failed call writes none of them). With Check, the ranks' counts are
// agreed first (a native Alltoall of the counts each process's ranks
// send another's, checked by the receivers, and an Allgather of each
// process's verdict): a disagreement, or a process whose data exceeds one
// native call, moves nothing and is left in MoveOutcome on every process.
// With Reduce, each local rank's blocks are reduced in global rank order
// with hostmath's arithmetic: bitwise the one-process rank-ordered result,
// in every mode.
func (l *Leader) Move(ctx context.Context, mv *Move) error {
	P, L, N, es := l.P, l.L, l.N, mv.ES
	p := l.Pools
	p.out = Outcome{Bad: p.out.Bad[:0]}
	ints := grow(&p.ints, 4*P)
	sc, sd, rc, rd := ints[:P], ints[P:2*P], ints[2*P:3*P], ints[3*P:]
	S, R := 0, 0
	for q := range P {
		sd[q], rd[q] = S, R
		for i := range L {
			for j := range L {
				S += mv.SC[i][q*L+j] * es
				R += mv.RC[j][q*L+i] * es
			}
		}
		sc[q], rc[q] = S-sd[q], R-rd[q]
	}
	if mv.Check {
		if err := l.agree(ctx, mv, max(S, R)); err != nil || p.out.Disagree || p.out.TooLarge != nil {
			return err
		}
	}
	sb, rb := get(&p.a, S), get(&p.c, R)
	at := 0
	for q := range P {
		for i, s := range l.Sends {
			for j := range L {
				if n := mv.SC[i][q*L+j] * es; n > 0 {
					from := mv.SD[i][q*L+j] * es
					hostmath.Copy(sb[at:at+n], s[from:from+n])
					at += n
				}
			}
		}
	}
	if err := l.call(ctx, "MPI_Ialltoallv", func(ctx context.Context) error {
		return l.NC.Alltoallv(ctx, sb, sc, sd, rb, rc, rd)
	}); err != nil {
		return err
	}
	if !mv.Reduce {
		at = 0
		for s := range N {
			for j, r := range mv.Recvs {
				if n := mv.RC[j][s] * es; n > 0 {
					to := mv.RD[j][s] * es
					hostmath.Copy(r[to:to+n], rb[at:at+n])
					at += n
				}
			}
		}
		return nil
	}
	// Each local rank's blocks, in global rank order, then reduced.
	for j, r := range mv.Recvs {
		mb := mv.RC[j][0] * es
		stage := get(&p.b, N*mb)
		at = 0
		for s := range N {
			for k := range L {
				n := mv.RC[k][s] * es
				if k == j {
					hostmath.Copy(stage[s*mb:(s+1)*mb], rb[at:at+n])
				}
				at += n
			}
		}
		hostmath.ReduceStrided(mv.DT, mv.Op, r[:mb], stage, mb/es, 0, N, mb/es, mv.Scale)
	}
	return nil
}

// MoveOn is Move of kind on the ranges and recvs the process's ranks
// published on b (elements, by global rank), with element type dt; op and
// scale reduce ReduceScatterV's blocks.
func (l *Leader) MoveOn(ctx context.Context, b *board.Board, kind MoveKind, dt backend.DType, op backend.Op, scale float64) error {
	lo, hi := l.Tr.Rank()*l.L, (l.Tr.Rank()+1)*l.L
	return l.Move(ctx, &Move{SC: b.SCounts[lo:hi], SD: b.SDispls[lo:hi], RC: b.RCounts[lo:hi], RD: b.RDispls[lo:hi], Recvs: b.Recv[lo:hi],
		ES: dt.Size(), Check: kind.V(), Reduce: kind == ReduceScatterV, DT: dt, Op: op, Scale: scale})
}

// agree checks the ranks' counts between processes (Move's Check) and
// whether this process's bytes (nb, sent or received) fit one native call,
// leaving the verdict in the pools' Outcome, the same on every process.
func (l *Leader) agree(ctx context.Context, mv *Move, nb int) error {
	P, L := l.P, l.L
	p := l.Pools
	// Block q: what each local rank i sends each rank j of process q, as
	// 8-byte integers, i by i.
	blk := L * L * 8
	cm := get(&p.cm, 2*P*blk+P+1)
	send, recv, verdict, mine := cm[:P*blk], cm[P*blk:2*P*blk], cm[2*P*blk:2*P*blk+P], cm[2*P*blk+P:]
	for q := range P {
		for i := range L {
			for j := range L {
				binary.LittleEndian.PutUint64(send[q*blk+(i*L+j)*8:], uint64(mv.SC[i][q*L+j]))
			}
		}
	}
	if err := l.call(ctx, "MPI_Ialltoall", func(ctx context.Context) error { return l.NC.Alltoall(ctx, send, recv) }); err != nil {
		return err
	}
	mine[0] = 0
	for j := range L {
		bad := Mismatch{Peer: -1}
		for s := range l.N { // block s/L, its sender s%L, receiver j
			got := int(int64(binary.LittleEndian.Uint64(recv[(s*L+j)*8:])))
			if want := mv.RC[j][s]; got != want && bad.Peer < 0 {
				bad, mine[0] = Mismatch{Peer: s, Want: want, Got: got}, 1
			}
		}
		p.out.Bad = append(p.out.Bad, bad)
	}
	if nb > maxBlock && mine[0] == 0 {
		mine[0] = 2
	}
	if err := l.call(ctx, "MPI_Iallgather", func(ctx context.Context) error {
		return l.Tr.Allgather(ctx, mine, verdict)
	}); err != nil {
		return err
	}
	for _, v := range verdict {
		switch v {
		case 1:
			p.out.Disagree = true
		case 2:
			p.out.TooLarge = errTooLarge
		}
	}
	return nil
}

// grow returns (*p)[:n], growing the pooled ints when they are short.
func grow(p *[]int, n int) []int {
	if cap(*p) < n {
		*p = make([]int, n)
	}
	return (*p)[:n]
}
