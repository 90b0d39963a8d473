package callcheck

import (
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	rs := Rule{Size: Times, At: AtRank}                                // ReduceScatter
	ag := Rule{Size: Times, Checked: Recv, At: AtRank}                 // AllGather
	ga := Rule{Size: Times, Checked: Recv, RootOnly: true, At: AtRoot} // Gather
	sv := Rule{Ranges: SendOwnRecv, At: AtDispl}                       // ReduceScatterV
	cases := []struct {
		name string
		rule Rule
		c    Call
		at   int
		err  string
	}{
		{"equal", Rule{Size: Equal}, Call{N: 4, NSend: 3, NRecv: 3}, 0, ""},
		{"equal bad", Rule{Size: Equal}, Call{N: 4, NSend: 3, NRecv: 2}, 0, "len(send)=3 != len(recv)=2"},
		{"equal tensor", Rule{Size: Equal, Checked: Recv}, Call{N: 4, NSend: 3, NRecv: 2, Tensor: true}, 0, "recv.Len()=2 != send.Len()=3"},
		{"reduce-scatter", rs, Call{N: 4, Rank: 2, NSend: 8, NRecv: 2}, 4, ""},
		{"reduce-scatter bad", rs, Call{N: 4, Rank: 2, NSend: 7, NRecv: 2}, 0, "len(send)=7, want len(recv)*4=8"},
		{"all-gather", ag, Call{N: 4, Rank: 3, NSend: 2, NRecv: 8}, 6, ""},
		{"gather root", ga, Call{N: 4, Rank: 1, Root: 1, NSend: 2, NRecv: 8}, 2, ""},
		{"gather root bad", ga, Call{N: 4, Rank: 1, Root: 1, NSend: 2, NRecv: 7}, 0, "root's len(recv)=7, want len(send)*4=8"},
		{"gather non-root", ga, Call{N: 4, Rank: 0, Root: 1, NSend: 2}, 0, ""},
		{"multiples", Rule{Size: Multiples}, Call{N: 4, NSend: 8, NRecv: 8}, 0, ""},
		{"multiples bad", Rule{Size: Multiples}, Call{N: 4, NSend: 6, NRecv: 6}, 0, "want equal multiples of the group size (4)"},
		{"ranges", sv, Call{N: 2, Rank: 1, NSend: 5, NRecv: 3, Counts: []int{2, 3}, Displs: []int{0, 2}}, 2, ""},
		{"own count", sv, Call{N: 2, Rank: 1, NSend: 5, NRecv: 2, Counts: []int{2, 3}, Displs: []int{0, 2}}, 0, "len(recv)=2, want counts[1]=3"},
		{"counts length", sv, Call{N: 2, NSend: 5, Counts: []int{2}, Displs: []int{0, 2}}, 0, "1 send counts and 2 offsets, want 2 each"},
		{"range outside", Rule{Ranges: SendRanges}, Call{N: 2, NSend: 4, Counts: []int{2, 3}, Displs: []int{0, 2}}, 0, "send range 1 [2, +3) outside the 4-element slice"},
		{"recv overlap", Rule{Ranges: RecvRanges}, Call{N: 2, NRecv: 4, Counts: []int{2, 2}, Displs: []int{0, 1}}, 0, "recv ranges 0 and 1 overlap"},
		{"recv empty ranges may coincide", Rule{Ranges: RecvRanges}, Call{N: 2, NRecv: 4, Counts: []int{0, 2}, Displs: []int{1, 1}}, 0, ""},
		{"both", Rule{Ranges: BothRanges}, Call{N: 2, NSend: 2, NRecv: 2, SCounts: []int{1, 1}, SDispls: []int{0, 0}, Counts: []int{1, 1}, Displs: []int{0, 0}}, 0, "recv ranges 0 and 1 overlap"},
		{"negative displ", Rule{Ranges: SendRanges}, Call{N: 1, NSend: 4, Counts: []int{1}, Displs: []int{-1}}, 0, "outside"},
		{"overflowing count", Rule{Ranges: SendRanges}, Call{N: 1, NSend: 4, Counts: []int{int(^uint(0) >> 1)}, Displs: []int{1}}, 0, "outside"},
	}
	for _, tc := range cases {
		at, err := Check(tc.rule, &tc.c)
		if tc.err == "" {
			if err != nil || at != tc.at {
				t.Errorf("%s: got %d, %v; want %d, nil", tc.name, at, err, tc.at)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: got %v; want an error with %q", tc.name, err, tc.err)
		}
	}
}

// Spread gives each rank the ranges it sends and receives where the call
// gives one side's counts and offsets: the other side is the rank's whole
// buffer, with every rank, or with the root only; stale entries are
// overwritten.
func TestSpread(t *testing.T) {
	counts, displs := []int{1, 2, 3}, []int{5, 0, 2}
	none := []int{0, 0, 0}
	cases := []struct {
		name           string
		r              Ranges
		rooted         bool
		c              Call
		sc, sd, rc, rd []int
	}{
		{"all-gather-v", RecvRanges, false, Call{N: 3, Rank: 1, NSend: 2, NRecv: 8, Counts: counts, Displs: displs},
			[]int{2, 2, 2}, none, counts, displs},
		{"gather-v root", RecvRanges, true, Call{N: 3, Rank: 2, Root: 2, NSend: 3, NRecv: 8, Counts: counts, Displs: displs},
			[]int{0, 0, 3}, none, counts, displs},
		{"gather-v non-root", RecvRanges, true, Call{N: 3, Rank: 0, Root: 2, NSend: 1, Counts: counts, Displs: displs},
			[]int{0, 0, 1}, none, none, none},
		{"scatter-v root", SendRanges, true, Call{N: 3, Rank: 1, Root: 1, NSend: 8, NRecv: 2, Counts: counts, Displs: displs},
			counts, displs, []int{0, 2, 0}, none},
		{"scatter-v non-root", SendRanges, true, Call{N: 3, Rank: 2, Root: 1, NRecv: 3, Counts: counts, Displs: displs},
			none, none, []int{0, 3, 0}, none},
	}
	for _, tc := range cases {
		sc, sd, rc, rd := []int{9, 9, 9}, []int{9, 9, 9}, []int{9, 9, 9}, []int{9, 9, 9}
		Spread(tc.r, tc.rooted, &tc.c, sc, sd, rc, rd)
		for _, g := range []struct {
			what      string
			got, want []int
		}{{"send counts", sc, tc.sc}, {"send offsets", sd, tc.sd}, {"recv counts", rc, tc.rc}, {"recv offsets", rd, tc.rd}} {
			if !slices.Equal(g.got, g.want) {
				t.Errorf("%s: %s = %v, want %v", tc.name, g.what, g.got, g.want)
			}
		}
	}
}

func TestPeers(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"peer", Peer(1, 0, 2, true, "Send"), ""},
		{"peer out of range", Peer(2, 0, 2, true, "Send"), "bad peer 2"},
		{"peer none", Peer(-1, 0, 2, false, "Recv"), "bad peer -1"},
		{"blocking self", Peer(0, 0, 2, true, "Recv"), "a blocking Recv with this rank itself (0)"},
		{"async self", Peer(0, 0, 2, false, "RecvAsync"), ""},
		{"sendrecv", Peers(1, -1, 0, 2), ""},
		{"sendrecv none", Peers(-1, -1, 0, 2), "bad peers"},
		{"sendrecv out of range", Peers(0, 2, 1, 2), "bad peers"},
		{"sendrecv self half", Peers(0, 1, 0, 2), "SendRecv to 0 and from 1"},
		{"sendrecv self", Peers(0, 0, 0, 2), ""},
		{"root", Root(1, 2), ""},
		{"root out of range", Root(2, 2), "root 2 out of range [0, 2)"},
		{"root negative", Root(-1, 2), "root -1 out of range"},
	}
	for _, tc := range cases {
		if tc.want == "" {
			if tc.err != nil {
				t.Errorf("%s: %v", tc.name, tc.err)
			}
		} else if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: got %v; want an error with %q", tc.name, tc.err, tc.want)
		}
	}
}
