package waitfor

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// edges is a static graph: edges[r] are the ranks r waits for (-1: none);
// a rank with no edge is not blocked.
type edges [][2]int

func (e edges) Epoch(r int) uint64 { return 7 }
func (e edges) On(r, i int) int    { return e[r][i] }
func (e edges) Blocked(r int) bool { return e[r][0] >= 0 || e[r][1] >= 0 }

// Cycles through the starting rank are found, with the edge each rank
// waits by; paths that do not come back, and cycles that do not pass
// through the starting rank, are not cycles of its call.
func TestFind(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    edges
		from int
		want []Step
	}{
		{"two ranks", edges{{1, -1}, {0, -1}}, 0, []Step{{Rank: 0, Edge: 0, epoch: 7}, {Rank: 1, Edge: 0, epoch: 7}}},
		{"ring of three by the second edge", edges{{-1, 1}, {2, -1}, {-1, 0}}, 1,
			[]Step{{Rank: 1, Edge: 0, epoch: 7}, {Rank: 2, Edge: 1, epoch: 7}, {Rank: 0, Edge: 1, epoch: 7}}},
		{"dead end first", edges{{2, 1}, {0, -1}, {-1, -1}}, 0, []Step{{Rank: 0, Edge: 1, epoch: 7}, {Rank: 1, Edge: 0, epoch: 7}}},
		{"a path", edges{{1, -1}, {2, -1}, {-1, -1}}, 0, nil},
		{"a cycle elsewhere", edges{{1, -1}, {2, -1}, {1, -1}}, 0, nil},
		{"one rank", edges{{0, -1}}, 0, nil},
	} {
		var w Walker
		for range 2 { // the walker's scratch is reused
			got := w.Find(tc.g, len(tc.g), tc.from)
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(Step{})); d != "" {
				t.Errorf("%s: cycle (-want +got):\n%s", tc.name, d)
			}
		}
	}
}

// changing is a graph whose ranks change on every look: no cycle is
// confirmed.
type changing struct{ n uint64 }

func (c *changing) Epoch(r int) uint64 { c.n++; return c.n }
func (c *changing) On(r, i int) int {
	if i == 0 {
		return 1 - r
	}
	return -1
}
func (c *changing) Blocked(r int) bool { return true }

func TestFindUnconfirmed(t *testing.T) {
	var w Walker
	if got := w.Find(&changing{}, 2, 0); got != nil {
		t.Errorf("a cycle of ranks that keep changing: %v", got)
	}
}

// A cycle of Sends only, or of Recvs only, is named; a mixed one is not.
func TestHint(t *testing.T) {
	for _, tc := range []struct {
		n                int
		allSend, allRecv bool
		want             string
	}{
		{2, true, false, "both ranks Send before they Recv"},
		{2, false, true, "both ranks Recv before they Send"},
		{3, true, false, "every rank Sends before it Recvs"},
		{4, false, true, "every rank Recvs before it Sends"},
		{2, false, false, ""},
		{3, false, false, ""},
	} {
		if got := Hint(tc.n, tc.allSend, tc.allRecv); got != tc.want {
			t.Errorf("Hint(%d, %v, %v) = %q, want %q", tc.n, tc.allSend, tc.allRecv, got, tc.want)
		}
	}
}
