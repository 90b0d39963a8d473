package board

import (
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// A board has one empty entry per rank; DropSlices drops one rank's
// slices, Clear every slice and tensor, and the counts stay.
func TestBoard(t *testing.T) {
	var b Board
	b.Init(3)
	for _, n := range []int{len(b.Send), len(b.Recv), len(b.SendT), len(b.RecvT), len(b.SCounts), len(b.SDispls), len(b.RDispls)} {
		if n != 3 {
			t.Fatalf("an entry list of %d, want 3", n)
		}
	}
	for r := range 3 {
		b.Send[r], b.Recv[r] = []byte{1}, []byte{2}
		b.SendT[r], b.RecvT[r] = backend.Region{Len: 1}, backend.Region{Len: 2}
		b.SCounts[r] = []int{r}
	}
	b.DropSlices(1)
	b.DropSlices(7) // out of range: nothing
	if b.Send[1] != nil || b.Recv[1] != nil || b.Send[0] == nil || b.Recv[2] == nil || b.SendT[1].Len != 1 {
		t.Fatalf("DropSlices(1) left %+v", b)
	}
	b.Clear()
	for r := range 3 {
		if b.Send[r] != nil || b.Recv[r] != nil || b.SendT[r] != (backend.Region{}) || b.RecvT[r] != (backend.Region{}) {
			t.Fatalf("Clear left rank %d's entries: %+v", r, b)
		}
		if len(b.SCounts[r]) != 1 {
			t.Fatalf("Clear dropped rank %d's counts", r)
		}
	}
}
