package native

import (
	"context"
	"encoding/binary"

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
// ranks' own disagreements). Nothing moved then.
type Outcome struct {
	Disagree bool
	Bad      []Mismatch
}

// maxMove is the most bytes one native Alltoallv moves between two
// processes, and the largest offset it takes (MPI counts both in C ints);
// a variable for the tests, which make it small.
var maxMove = maxBlock

// SetMaxMoveForTest makes n the largest count and offset of one native
// Alltoallv of Move (0: 2^31-1) and returns the previous value, for tests
// of the split.
func SetMaxMoveForTest(n int) int {
	old := maxMove
	if n <= 0 {
		n = maxBlock
	}
	maxMove = n
	return old
}

// MoveOutcome is the last Move's Outcome (the leader's pools: the
// process's other ranks read it after the call's local meeting), and local
// rank l's Mismatch (Peer -1 where the counts agreed or were not checked).
func (p *Pools) MoveOutcome(l int) (*Outcome, Mismatch) {
	if l < len(p.out.Bad) {
		return &p.out, p.out.Bad[l]
	}
	return &p.out, Mismatch{Peer: -1}
}

// Move is the leader's part of an exchange of ranges between ranks: a
// native Alltoallv among the processes of the process's ranks' ranges,
// packed process by process (sender by sender, then receiver by
// receiver), unpacked into the local ranks' recvs once it completed (a
// failed call writes none of them). Where a pair of processes exchanges
// so much that the counts and offsets of one call would exceed a C int
// (P times the largest pair's bytes above 2^31-1), the exchange runs in
// rounds of Alltoallv, round k moving bytes [kW, (k+1)W) of every pair's
// data with W = (2^31-1)/P, the same rounds on every process: a fixed
// kind's largest pair is the same on every process (every rank sends
// alike), a V kind's is agreed with its counts. With Check, the ranks'
// counts are agreed first (a native Alltoall of the counts each process's
// ranks send another's, checked by the receivers, and an Allgather of each
// process's verdict and largest pair): a disagreement moves nothing and is
// left in MoveOutcome on every process. With Reduce, each local rank's
// blocks are reduced in global rank order with hostmath's arithmetic:
// bitwise the one-process rank-ordered result, in every mode.
func (l *Leader) Move(ctx context.Context, mv *Move) error {
	P, L, es := l.P, l.L, mv.ES
	p := l.Pools
	p.out = Outcome{Bad: p.out.Bad[:0]}
	ints := grow(&p.ints, 6*P)
	sc, rc := ints[:P], ints[P:2*P] // every pair's bytes, sent and received
	pair := 0                       // the largest pair's bytes, either way
	for q := range P {
		sc[q], rc[q] = 0, 0
		for i := range L {
			for j := range L {
				sc[q] += mv.SC[i][q*L+j] * es
				rc[q] += mv.RC[j][q*L+i] * es
			}
		}
		pair = max(pair, sc[q], rc[q])
	}
	if mv.Check {
		var err error
		if pair, err = l.agree(ctx, mv, pair); err != nil || p.out.Disagree {
			return err
		}
	}
	W, rounds := pair, 1
	if P*pair > maxMove {
		W = max(maxMove/P, 1)
		rounds = (pair + W - 1) / W
	}
	var stage []byte // Reduce: local rank j's blocks from every rank, in rank order, at stageAt(j)
	if mv.Reduce {
		stage = get(&p.b, l.stageAt(mv, L))
	}
	rsc, rsd, rrc, rrd := ints[2*P:3*P], ints[3*P:4*P], ints[4*P:5*P], ints[5*P:] // a round's
	// Every range is packed before any is received (a rank's recv may be
	// its send): pair q's data at sd(q) of all.
	S := 0
	for q := range P {
		S += sc[q]
	}
	all := get(&p.a, S)
	at := 0
	for q := range P {
		for i, s := range l.Sends {
			for j := range L {
				if n := mv.SC[i][q*L+j] * es; n > 0 {
					at += hostmath.Copy(all[at:at+n], s[mv.SD[i][q*L+j]*es:])
				}
			}
		}
	}
	for k := range rounds {
		lo := k * W
		S, R := 0, 0
		for q := range P {
			rsd[q], rrd[q] = S, R
			rsc[q], rrc[q] = min(W, max(sc[q]-lo, 0)), min(W, max(rc[q]-lo, 0))
			S, R = S+rsc[q], R+rrc[q]
		}
		sb, rb := all, get(&p.c, R)
		if rounds > 1 { // the round's part of each pair's data
			sb = get(&p.e, S)
			from := 0
			for q := range P {
				if rsc[q] > 0 {
					hostmath.Copy(sb[rsd[q]:rsd[q]+rsc[q]], all[from+lo:])
				}
				from += sc[q]
			}
		}
		if err := l.call(ctx, "MPI_Ialltoallv", func(ctx context.Context) error {
			return l.NC.Alltoallv(ctx, sb, rsc, rsd, rb, rrc, rrd)
		}); err != nil {
			return err
		}
		for q := range P {
			at, pos := rrd[q], 0
			for s := q * L; s < (q+1)*L; s++ {
				for j, r := range mv.Recvs {
					n := mv.RC[j][s] * es
					if n == 0 {
						continue
					}
					var dst []byte
					if mv.Reduce {
						dst = stage[l.stageAt(mv, j)+s*n:][:n]
					} else {
						dst = r[mv.RD[j][s]*es:][:n]
					}
					at += unpart(dst, rb[at:], pos, lo, lo+W)
					pos += n
				}
			}
		}
	}
	if mv.Reduce {
		for j, r := range mv.Recvs {
			mb := mv.RC[j][0] * es
			hostmath.ReduceStrided(mv.DT, mv.Op, r[:mb], stage[l.stageAt(mv, j):], mb/es, 0, l.N, mb/es, mv.Scale)
		}
	}
	return nil
}

// stageAt is where local rank j's blocks start in a Reduce's staging
// memory (j = L: its size): every local rank before it receives N blocks
// of its own block's size.
func (l *Leader) stageAt(mv *Move, j int) int {
	at := 0
	for k := range j {
		at += l.N * mv.RC[k][0] * mv.ES
	}
	return at
}

// unpart copies into piece, which starts at byte pos of a pair's data, its
// bytes that fall in [lo, hi) of that data, taken from src in order, and
// returns how many.
func unpart(piece, src []byte, pos, lo, hi int) int {
	a, b := max(lo-pos, 0), min(hi-pos, len(piece))
	if a >= b {
		return 0
	}
	return hostmath.Copy(piece[a:b], src[:b-a])
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
// agrees on the largest pair's bytes (this process's: pair), leaving the
// verdict in the pools' Outcome, the same on every process, and returning
// the largest pair of all processes.
func (l *Leader) agree(ctx context.Context, mv *Move, pair int) (int, error) {
	P, L := l.P, l.L
	p := l.Pools
	// Block q: what each local rank i sends each rank j of process q, as
	// 8-byte integers, i by i; then each process's verdict: its largest
	// pair, or -1 where a count disagreed.
	blk := L * L * 8
	cm := get(&p.cm, 2*P*blk+8*P+8)
	send, recv, verdict, mine := cm[:P*blk], cm[P*blk:2*P*blk], cm[2*P*blk:2*P*blk+8*P], cm[2*P*blk+8*P:]
	for q := range P {
		for i := range L {
			for j := range L {
				binary.LittleEndian.PutUint64(send[q*blk+(i*L+j)*8:], uint64(mv.SC[i][q*L+j]))
			}
		}
	}
	if err := l.call(ctx, "MPI_Ialltoall", func(ctx context.Context) error { return l.NC.Alltoall(ctx, send, recv) }); err != nil {
		return 0, err
	}
	v := int64(pair)
	for j := range L {
		bad := Mismatch{Peer: -1}
		for s := range l.N { // block s/L, its sender s%L, receiver j
			got := int(int64(binary.LittleEndian.Uint64(recv[(s*L+j)*8:])))
			if want := mv.RC[j][s]; got != want && bad.Peer < 0 {
				bad, v = Mismatch{Peer: s, Want: want, Got: got}, -1
			}
		}
		p.out.Bad = append(p.out.Bad, bad)
	}
	binary.LittleEndian.PutUint64(mine, uint64(v))
	if err := l.call(ctx, "MPI_Iallgather", func(ctx context.Context) error {
		return l.Tr.Allgather(ctx, mine, verdict)
	}); err != nil {
		return 0, err
	}
	for q := range P {
		switch v := int64(binary.LittleEndian.Uint64(verdict[8*q:])); {
		case v < 0:
			p.out.Disagree = true
		default:
			pair = max(pair, int(v))
		}
	}
	return pair, nil
}

// grow returns (*p)[:n], growing the pooled ints when they are short.
func grow(p *[]int, n int) []int {
	if cap(*p) < n {
		*p = make([]int, n)
	}
	return (*p)[:n]
}
