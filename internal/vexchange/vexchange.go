// Package vexchange is the ranges of a V exchange (AllToAllV, and the
// kinds that run as one: AllGatherV, GatherV, ScatterV, ReduceScatterV,
// ReduceScatter without kernels) and where they live between calls: what
// a rank sends each rank and where what each rank sends it lands (Ranges),
// the aligned blocks a reducing exchange receives, the check of the counts
// the peers announced, and a comm's pooled scratch for them (Scratch),
// which holds the copies of the counts and offsets a rank publishes on its
// group's board (internal/board). It holds plain ints; moving the data is
// the caller's.
package vexchange

import "github.com/gocoll/gocoll/internal/board"

// Ranges are the ranges of a V exchange: send's [SDispls[j], +SCounts[j])
// go to rank j, and rank j's land at [RDispls[j], +RCounts[j]) of the
// receive space. Without SCounts, the ranges are the equal chunks of M
// elements: chunk j goes to rank j, and rank j's lands as chunk j.
type Ranges struct {
	SCounts, SDispls []int
	RCounts, RDispls []int
	M                int
}

// Send is the range of send that goes to rank j.
func (v *Ranges) Send(j int) (int, int) {
	if v.SCounts == nil {
		return j * v.M, j*v.M + v.M
	}
	return v.SDispls[j], v.SDispls[j] + v.SCounts[j]
}

// Recv is the range of the receive space where rank j's lands.
func (v *Ranges) Recv(j int) (int, int) {
	if v.SCounts == nil {
		return j * v.M, j*v.M + v.M
	}
	return v.RDispls[j], v.RDispls[j] + v.RCounts[j]
}

// Aligned fills counts and displs with the ranges of len(counts) blocks
// of m elements of es bytes each, every block starting at a multiple of 16
// bytes (so that a kernel reads each aligned), and returns the elements
// they span.
func Aligned(counts, displs []int, m, es int) int {
	stride := ((m*es + 15) &^ 15) / es
	for q := range counts {
		counts[q], displs[q] = m, q*stride
	}
	return len(counts) * stride
}

// Disagree returns the first rank j whose announced count got[j] is not
// the count want[j] expected from it, or -1.
func Disagree(got []float64, want []int) int {
	for j, n := range want {
		if int(got[j]) != n {
			return j
		}
	}
	return -1
}

// Scratch is a comm's pooled memory of its V exchanges, reused across
// calls (one call at a time; a call's slices are valid until the next
// call asks for them).
type Scratch struct {
	ints   []int
	counts []float64
	pub    []int // the send counts published (PublishCounts)
	pubV   []int // the send and receive offsets published (PublishRanges)
	blocks []byte
}

// Ints returns four slices of n entries: send counts and offsets,
// receive counts and offsets.
func (s *Scratch) Ints(n int) (sc, sd, rc, rd []int) {
	v := grow(&s.ints, 4*n)
	return v[:n:n], v[n : 2*n : 2*n], v[2*n : 3*n : 3*n], v[3*n:]
}

// Counts returns n float64s: the counts as they travel through devices.
func (s *Scratch) Counts(n int) []float64 { return grow(&s.counts, n) }

// Blocks returns n bytes of host memory for the blocks a rank gathers to
// reduce on the CPU.
func (s *Scratch) Blocks(n int) []byte { return grow(&s.blocks, n) }

// grow returns (*p)[:n], growing *p to n first (its old contents are not
// kept when it grows).
func grow[T any](p *[]T, n int) []T {
	if cap(*p) < n {
		*p = make([]T, n)
	}
	return (*p)[:n]
}

// PublishCounts publishes on b a copy of rank r's send counts, kept in s:
// b.SCounts[r][i] is what rank r sends rank i.
func (s *Scratch) PublishCounts(b *board.Board, r int, scounts []int) {
	p := grow(&s.pub, len(b.SCounts))
	copy(p, scounts)
	b.SCounts[r] = p
}

// PublishRanges publishes on b copies of rank r's send and receive
// offsets, kept in s (for the leader of a collective among ranks that
// share device memory; its send counts are PublishCounts').
func (s *Scratch) PublishRanges(b *board.Board, r int, sdispls, rdispls []int) {
	n := len(b.SCounts)
	p := grow(&s.pubV, 2*n)
	copy(p, sdispls)
	copy(p[n:], rdispls)
	b.SDispls[r], b.RDispls[r] = p[:n], p[n:]
}

// CountsTo sets got[j] to what rank j published on b it sends rank i.
func CountsTo(b *board.Board, i int, got []float64) {
	for j, sc := range b.SCounts {
		got[j] = float64(sc[i])
	}
}
