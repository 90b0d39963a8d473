// Package callcheck checks the shape of one rank's call of a collective
// before anything moves: its root and peers against the group, its
// lengths against each other, its per-rank counts and offsets against the
// slices they describe (ranges inside the slice, received ranges apart),
// all on plain ints; and it gives the offset of the one in-place block a
// kind's layout allows, and the ranges a rank sends and receives where a
// kind describes one side only (Spread). The rules of the kinds are data (Rule); the
// caller maps its collectives onto them.
package callcheck

import "fmt"

// Size is how a call's two lengths must relate.
type Size uint8

const (
	AnySize   Size = iota // no relation
	Equal                 // the checked buffer's length is the other's
	Times                 // the checked buffer's length is N times the other's
	Multiples             // both equal, a multiple of N (AllToAll)
)

// Side names one of a call's two buffers.
type Side uint8

const (
	Send Side = iota
	Recv
)

// Ranges is what a call's counts and offsets describe.
type Ranges uint8

const (
	NoRanges    Ranges = iota
	SendRanges         // counts and displs: ranges of send
	RecvRanges         // counts and displs: ranges of recv, apart
	BothRanges         // scounts and sdispls of send; counts and displs of recv, apart
	SendOwnRecv        // counts and displs: ranges of send; recv's length is counts[rank]
)

// At is where the in-place block of a kind's layout lies, in elements.
type At uint8

const (
	AtZero  At = iota
	AtRank     // rank x the length the checked one is compared with
	AtRoot     // root x that length
	AtDispl    // displs[rank]
)

// Rule is what a kind requires of a rank's call.
type Rule struct {
	Size     Size
	Checked  Side // the buffer whose length Size constrains (Equal, Times)
	RootOnly bool // checked on the root only (the buffers only the root uses)
	Ranges   Ranges
	At       At
}

// Call is one rank's call: the group's size, the rank, the root, the
// buffers' lengths in elements, the counts and offsets given.
type Call struct {
	N, Rank, Root    int
	NSend, NRecv     int
	SCounts, SDispls []int
	Counts, Displs   []int
	Tensor           bool // the buffers are tensors (named send.Len(), recv.Len())
}

// Check checks c against rule and returns the element offset of the
// in-place block (0 where the layout has none).
func Check(rule Rule, c *Call) (int, error) {
	if rule.RootOnly && c.Rank != c.Root {
		return 0, nil
	}
	ls, lr := "len(send)", "len(recv)"
	if c.Tensor {
		ls, lr = "send.Len()", "recv.Len()"
	}
	a, la, b, lb := c.NSend, ls, c.NRecv, lr
	if rule.Checked == Recv {
		a, la, b, lb = b, lb, a, la
	}
	who := ""
	if rule.RootOnly {
		who = "root's "
	}
	switch rule.Size {
	case Equal:
		if a != b {
			return 0, fmt.Errorf("%s%s=%d != %s=%d", who, la, a, lb, b)
		}
	case Times:
		if a != b*c.N {
			return 0, fmt.Errorf("%s%s=%d, want %s*%d=%d", who, la, a, lb, c.N, b*c.N)
		}
	case Multiples:
		if c.NSend != c.NRecv || c.NSend%c.N != 0 {
			return 0, fmt.Errorf("%s=%d and %s=%d, want equal multiples of the group size (%d)", ls, c.NSend, lr, c.NRecv, c.N)
		}
	}
	if err := checkRanges(rule.Ranges, c, lr); err != nil {
		return 0, err
	}
	switch rule.At {
	case AtRank:
		return c.Rank * b, nil
	case AtRoot:
		return c.Root * b, nil
	case AtDispl:
		return c.Displs[c.Rank], nil
	}
	return 0, nil
}

func checkRanges(r Ranges, c *Call, lr string) error {
	switch r {
	case SendRanges:
		return V(c.N, c.NSend, c.Counts, c.Displs, "send")
	case RecvRanges:
		return RecvV(c.N, c.NRecv, c.Counts, c.Displs)
	case BothRanges:
		if err := V(c.N, c.NSend, c.SCounts, c.SDispls, "send"); err != nil {
			return err
		}
		return RecvV(c.N, c.NRecv, c.Counts, c.Displs)
	case SendOwnRecv:
		if err := V(c.N, c.NSend, c.Counts, c.Displs, "send"); err != nil {
			return err
		}
		if c.NRecv != c.Counts[c.Rank] {
			return fmt.Errorf("%s=%d, want counts[%d]=%d", lr, c.NRecv, c.Rank, c.Counts[c.Rank])
		}
	}
	return nil
}

// Spread fills, for a kind whose counts and offsets describe one side of
// the exchange (RecvRanges: AllGatherV, GatherV; SendRanges: ScatterV), the
// elements rank c.Rank sends to each rank (sc, sd) and receives from each
// (rc, rd): on the described side c's counts and offsets (on the root only
// when rooted, zeros elsewhere), on the other its whole buffer as one block
// at offset 0, with every rank (with the root only when rooted).
func Spread(r Ranges, rooted bool, c *Call, sc, sd, rc, rd []int) {
	ranged, rangedD, one, oneD, own := rc, rd, sc, sd, c.NSend
	if r == SendRanges {
		ranged, rangedD, one, oneD, own = sc, sd, rc, rd, c.NRecv
	}
	clear(ranged)
	clear(rangedD)
	clear(oneD)
	if !rooted || c.Rank == c.Root {
		copy(ranged, c.Counts)
		copy(rangedD, c.Displs)
	}
	for j := range one {
		one[j] = 0
		if !rooted || j == c.Root {
			one[j] = own
		}
	}
}

// V checks n ranges [displs[j], +counts[j]) of a length-element slice
// (what names it in the error).
func V(n, length int, counts, displs []int, what string) error {
	if len(counts) != n || len(displs) != n {
		return fmt.Errorf("%d %s counts and %d offsets, want %d each", len(counts), what, len(displs), n)
	}
	for j := range counts {
		if counts[j] < 0 || displs[j] < 0 || displs[j] > length || counts[j] > length-displs[j] {
			return fmt.Errorf("%s range %d [%d, +%d) outside the %d-element slice", what, j, displs[j], counts[j], length)
		}
	}
	return nil
}

// RecvV is V of the ranges received, which may not overlap.
func RecvV(n, length int, counts, displs []int) error {
	if err := V(n, length, counts, displs, "recv"); err != nil {
		return err
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			if counts[a] > 0 && counts[b] > 0 && displs[a] < displs[b]+counts[b] && displs[b] < displs[a]+counts[a] {
				return fmt.Errorf("recv ranges %d and %d overlap", a, b)
			}
		}
	}
	return nil
}

// Root checks a rooted call's root.
func Root(root, n int) error {
	if root < 0 || root >= n {
		return fmt.Errorf("root %d out of range [0, %d)", root, n)
	}
	return nil
}

// Peer checks the peer of a Send or Recv (name) on rank of n ranks: a
// rank of the group; this rank itself only for an asynchronous call
// (blocking, nothing could post the matching operation while the call
// waits: a one-rank wait cycle).
func Peer(p, rank, n int, blocking bool, name string) error {
	if p < 0 || p >= n {
		return fmt.Errorf("bad peer %d", p)
	}
	if p == rank && blocking {
		return fmt.Errorf("a blocking %s with this rank itself (%d) waits for itself: use SendRecv to and from itself, "+
			"SendAsync and RecvAsync, or a Batch with both", name, rank)
	}
	return nil
}

// Peers checks a SendRecv's peers on rank of n ranks (-1: none, but not
// both): its send to itself and its receive from itself go together, the
// one matching the other (either alone would wait for itself).
func Peers(to, from, rank, n int) error {
	bad := func(p int) bool { return p < -1 || p >= n }
	if bad(to) || bad(from) || (to < 0 && from < 0) {
		return fmt.Errorf("bad peers: to %d, from %d", to, from)
	}
	if (to == rank) != (from == rank) {
		return fmt.Errorf("SendRecv to %d and from %d: a SendRecv with this rank itself (%d) sends to and receives from it "+
			"(or use SendAsync and RecvAsync, or a Batch with both)", to, from, rank)
	}
	return nil
}
