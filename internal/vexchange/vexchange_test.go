package vexchange

import (
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/internal/board"
)

func TestRanges(t *testing.T) {
	eq := Ranges{M: 3}
	if lo, hi := eq.Send(2); lo != 6 || hi != 9 {
		t.Errorf("equal send range 2: [%d, %d)", lo, hi)
	}
	if lo, hi := eq.Recv(1); lo != 3 || hi != 6 {
		t.Errorf("equal recv range 1: [%d, %d)", lo, hi)
	}
	v := Ranges{SCounts: []int{1, 2}, SDispls: []int{4, 0}, RCounts: []int{3, 0}, RDispls: []int{1, 9}}
	if lo, hi := v.Send(0); lo != 4 || hi != 5 {
		t.Errorf("send range 0: [%d, %d)", lo, hi)
	}
	if lo, hi := v.Recv(0); lo != 1 || hi != 4 {
		t.Errorf("recv range 0: [%d, %d)", lo, hi)
	}
	if lo, hi := v.Recv(1); lo != 9 || hi != 9 {
		t.Errorf("recv range 1: [%d, %d)", lo, hi)
	}
}

func TestAligned(t *testing.T) {
	cases := []struct {
		m, es, n int
		displs   string
		total    int
	}{
		{3, 4, 3, "[0 4 8]", 12},  // 12 bytes: blocks 16 bytes apart
		{4, 4, 2, "[0 4]", 8},     // 16 bytes: back to back
		{5, 2, 3, "[0 8 16]", 24}, // 10 bytes: 16 apart
		{0, 8, 3, "[0 0 0]", 0},   // empty blocks
		{17, 1, 2, "[0 32]", 64},  // 17 bytes: 32 apart
		{3, 8, 2, "[0 4]", 8},     // 24 bytes: 32 apart
		{1, 8, 4, "[0 2 4 6]", 8}, // 8 bytes: 16 apart
	}
	for _, c := range cases {
		counts, displs := make([]int, c.n), make([]int, c.n)
		total := Aligned(counts, displs, c.m, c.es)
		for q := range counts {
			if counts[q] != c.m {
				t.Errorf("m %d es %d: count %d is %d", c.m, c.es, q, counts[q])
			}
			if displs[q]*c.es%16 != 0 {
				t.Errorf("m %d es %d: block %d at byte %d, not aligned", c.m, c.es, q, displs[q]*c.es)
			}
		}
		if fmt.Sprint(displs) != c.displs || total != c.total {
			t.Errorf("m %d es %d: displs %v, total %d; want %s, %d", c.m, c.es, displs, total, c.displs, c.total)
		}
	}
}

func TestDisagree(t *testing.T) {
	if j := Disagree([]float64{1, 2, 3}, []int{1, 2, 3}); j != -1 {
		t.Errorf("agreeing counts: %d", j)
	}
	if j := Disagree([]float64{1, 5, 4}, []int{1, 2, 3}); j != 1 {
		t.Errorf("got %d, want the first rank that disagrees (1)", j)
	}
}

// The four slices of Ints are apart (writing one never shows in another),
// and the scratch is reused: a second call of the same size allocates
// nothing.
func TestScratch(t *testing.T) {
	var s Scratch
	sc, sd, rc, rd := s.Ints(3)
	for i, v := range [][]int{sc, sd, rc, rd} {
		if len(v) != 3 || cap(v) != 3 {
			t.Fatalf("slice %d: len %d cap %d", i, len(v), cap(v))
		}
		for j := range v {
			v[j] = 10*i + j
		}
	}
	if fmt.Sprint(sc, sd, rc, rd) != "[0 1 2] [10 11 12] [20 21 22] [30 31 32]" {
		t.Fatalf("slices overlap: %v %v %v %v", sc, sd, rc, rd)
	}
	if a := testing.AllocsPerRun(10, func() {
		s.Ints(3)
		s.Counts(6)
		s.Blocks(64)
	}); a != 0 {
		t.Errorf("%v allocations per reuse", a)
	}
	if b := s.Blocks(100); len(b) != 100 {
		t.Errorf("Blocks(100): len %d", len(b))
	}
}

// Each rank publishes its counts and ranges on the board, copied into its
// own scratch; every rank reads what each sends it.
func TestPublish(t *testing.T) {
	const n = 3
	var b board.Board
	b.Init(n)
	s := make([]Scratch, n)
	for r := range n {
		// Rank r sends 10*r + j elements to rank j, from offset j.
		counts, displs := make([]int, n), make([]int, n)
		for j := range counts {
			counts[j], displs[j] = 10*r+j, j
		}
		s[r].PublishCounts(&b, r, counts)
		s[r].PublishRanges(&b, r, displs, []int{r, r, r})
		counts[0], displs[0] = -1, -1 // published copies are the scratch's
	}
	got := make([]float64, n)
	CountsTo(&b, 2, got)
	if fmt.Sprint(got) != "[2 12 22]" {
		t.Errorf("counts to rank 2: %v", got)
	}
	if fmt.Sprint(b.SDispls[1], b.RDispls[2]) != "[0 1 2] [2 2 2]" {
		t.Errorf("ranges: %v %v", b.SDispls[1], b.RDispls[2])
	}
}
