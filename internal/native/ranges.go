package native

import "github.com/gocoll/gocoll/internal/callcheck"

// MoveKind is a collective that moves ranges between ranks, run between
// processes by Move.
type MoveKind uint8

const (
	NoMove MoveKind = iota
	AllToAll
	Gather
	Scatter
	AllToAllV // the V kinds from here: their counts differ by rank
	AllGatherV
	GatherV
	ScatterV
	ReduceScatterV
)

// V reports whether k's counts are the caller's, per rank (Move's Check).
func (k MoveKind) V() bool { return k >= AllToAllV }

// Call is a move as one rank calls it, in elements: its ranks, this
// rank, the root (rooted kinds), its send and recv lengths, and the
// ranges given (AllToAllV: SCounts and SDispls of send, Counts and Displs
// of recv; AllGatherV, GatherV and ReduceScatterV: Counts and Displs as
// the entry point takes them).
type Call struct {
	Kind                             MoveKind
	N, L, Rank, Root, NSend, NRecv   int
	Counts, Displs, SCounts, SDispls []int
}

// Block returns the most elements a process moves between processes, for
// Fits, and a fixed kind's block (its fingerprint's count), both the same
// on every rank; 0 and 0 for the V kinds (Move checks and agrees on their
// counts).
func (c *Call) Block() (n, count int) {
	switch c.Kind {
	case AllToAll:
		return c.L * c.NSend, c.NSend / c.N
	case Gather:
		return c.N * c.NSend, c.NSend
	case Scatter:
		return c.N * c.NRecv, c.NRecv
	}
	return 0, 0
}

// Ranges fills the rank's ranges by global rank (Move's SC, SD, RC, RD):
// those the V exchange takes for the V kinds, equal blocks between every
// pair or to and from the root for the others, and for ReduceScatterV the
// rank's block from every rank.
func (c *Call) Ranges(sc, sd, rc, rd []int) {
	switch c.Kind {
	case AllToAllV:
		copy(sc, c.SCounts)
		copy(sd, c.SDispls)
		copy(rc, c.Counts)
		copy(rd, c.Displs)
	case ReduceScatterV:
		copy(sc, c.Counts)
		copy(sd, c.Displs)
		for j := range rc {
			rc[j], rd[j] = c.NRecv, 0
		}
	case AllGatherV, GatherV, ScatterV:
		shape := callcheck.RecvRanges
		if c.Kind == ScatterV {
			shape = callcheck.SendRanges
		}
		callcheck.Spread(shape, c.Kind != AllGatherV, &callcheck.Call{N: c.N, Rank: c.Rank, Root: c.Root, NSend: c.NSend,
			NRecv: c.NRecv, Counts: c.Counts, Displs: c.Displs}, sc, sd, rc, rd)
	default:
		_, m := c.Block()
		for j := range c.N {
			sc[j], sd[j], rc[j], rd[j] = m, j*m, m, j*m
		}
		// Gather: one block from offset 0 to the root, received there.
		one, at, all := sc, sd, rc
		if c.Kind == Scatter {
			one, at, all = rc, rd, sc
		}
		if c.Kind != AllToAll {
			clear(one)
			clear(at)
			one[c.Root] = m
			if c.Rank != c.Root {
				clear(all)
			}
		}
	}
}
