// Package board is what the ranks of one process publish to each other for
// the call they are in: each rank's host slices, device tensors, counts and
// offsets, written by the rank before the call's rendezvous and read by its
// peers after it, until the call's last rendezvous. One entry per rank of
// the group, indexed by the global rank; a rank writes only its own.
package board

import "github.com/gocoll/gocoll/backend"

// Board is a group's published entries, one per rank.
type Board struct {
	// Send and Recv are each rank's host slices (the direct all-reduce
	// reads and writes them in place).
	Send, Recv [][]byte
	// SendT and RecvT are each rank's tensors (the collectives of ranks
	// that share device memory).
	SendT, RecvT []backend.Region
	// SCounts are each rank's send counts (the V kinds in one process);
	// SDispls and RDispls its send and receive offsets (the V tensor kinds
	// in shared memory). With RCounts, its receive counts, they are also
	// each rank's ranges of a move between processes (strategy Native).
	SCounts, SDispls, RCounts, RDispls [][]int
}

// Init sizes b for n ranks, every entry empty.
func (b *Board) Init(n int) {
	*b = Board{Send: make([][]byte, n), Recv: make([][]byte, n), SendT: make([]backend.Region, n), RecvT: make([]backend.Region, n),
		SCounts: make([][]int, n), SDispls: make([][]int, n), RCounts: make([][]int, n), RDispls: make([][]int, n)}
}

// DropSlices drops rank r's host slices (its call is over; nothing for a
// rank out of range).
func (b *Board) DropSlices(r int) {
	if r < len(b.Send) {
		b.Send[r] = nil
	}
	if r < len(b.Recv) {
		b.Recv[r] = nil
	}
}

// Clear drops every rank's slices and tensors: the board keeps no memory
// of a caller alive.
func (b *Board) Clear() {
	clear(b.Send)
	clear(b.Recv)
	clear(b.SendT)
	clear(b.RecvT)
}
