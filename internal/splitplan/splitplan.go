// Package splitplan is the pure bookkeeping of Comm.Split, which every rank
// of a group works out alike from what the ranks gathered: the sub-groups
// (each color's members, ranked by key, then by rank in the parent), which
// of them span processes and over which processes, whether Split supports
// their layout (and why not), and the outcome codes the processes exchange
// to agree on each step of a Split across processes.
package splitplan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gocoll/gocoll/backend"
)

// NoColor leaves a rank out of every sub-group, as MPI_UNDEFINED does: the
// value of collective.NoColor.
const NoColor = -1

// Layout is what every rank works out alike from the gathered colors and
// keys.
type Layout struct {
	Colors  []int         // the colors that have members, ascending
	Members map[int][]int // each color's members (parent ranks), by key, then rank
	Spans   []int         // the colors whose members live in several processes, ascending
	Procs   map[int][]int // a spanning color's processes, in the order of their first members
}

// Plan sorts the members of every color and checks that each sub-group
// spanning processes has a supported layout. all holds three values for each
// of the n ranks of the group: its color, its key, and 1 when its process's
// transport can split (a backend.Splitter), else 0. Rank r lives in process
// r/localSize; a group of one process passes localSize n, and then no
// sub-group spans processes. transport names the group's transport, for the
// errors.
//
// A sub-group whose members live in several processes is supported when
// every process that has members of it has the same number of them, and each
// process's members are contiguous in the sub-group's order, over transports
// that can split. The error, which matches backend.ErrUnsupported and names
// the color, is the same on every rank: the first color, ascending, that
// cannot be made.
func Plan(all []int64, n, localSize int, transport string) (*Layout, error) {
	l := &Layout{Members: map[int][]int{}, Procs: map[int][]int{}}
	for r := 0; r < n; r++ {
		col := int(all[3*r])
		if col == NoColor {
			continue
		}
		if _, ok := l.Members[col]; !ok {
			l.Colors = append(l.Colors, col)
		}
		l.Members[col] = append(l.Members[col], r)
	}
	slices.Sort(l.Colors)
	for _, col := range l.Colors {
		m := l.Members[col]
		sort.SliceStable(m, func(a, b int) bool { return all[3*m[a]+1] < all[3*m[b]+1] })
	}
	if localSize >= n {
		return l, nil
	}
	procOf := func(r int) int { return r / localSize }
	noSplit := -1 // a process whose transport cannot split
	for r := 0; r < n && noSplit < 0; r++ {
		if all[3*r+2] == 0 {
			noSplit = procOf(r)
		}
	}
	for _, col := range l.Colors {
		m := l.Members[col]
		var procs []int // in the order of their first members
		count := map[int]int{}
		contiguous := true
		for i, r := range m {
			p := procOf(r)
			if count[p] == 0 {
				procs = append(procs, p)
			} else if procOf(m[i-1]) != p {
				contiguous = false
			}
			count[p]++
		}
		if len(procs) == 1 {
			continue // a sub-group of one process: no transport
		}
		unsupported := func(format string, a ...any) error {
			return fmt.Errorf("color %d: %s: %w", col, fmt.Sprintf(format, a...), backend.ErrUnsupported)
		}
		if !contiguous {
			return nil, unsupported("in key order its members are in processes %s; a sub-group across processes needs each process's members contiguous", procRuns(localSize, m))
		}
		for _, p := range procs[1:] {
			if count[p] != count[procs[0]] {
				return nil, unsupported("process %d has %d of its members, process %d has %d; a sub-group across processes needs the same number in each",
					procs[0], count[procs[0]], p, count[p])
			}
		}
		if noSplit >= 0 {
			return nil, unsupported("it spans processes %v, and the transport of process %d (%s) cannot split (no backend.Splitter)",
				procs, noSplit, transport)
		}
		l.Spans = append(l.Spans, col)
		l.Procs[col] = procs
	}
	return l, nil
}

// Local returns the members of color col that live in the process whose
// ranks are base to base+localSize-1, in the sub-group's order.
func (l *Layout) Local(col, base, localSize int) []int {
	var local []int
	for _, r := range l.Members[col] {
		if r >= base && r < base+localSize {
			local = append(local, r)
		}
	}
	return local
}

// procRuns describes the processes of members in order, as runs:
// "[0 x2, 1 x2, 0 x2]".
func procRuns(localSize int, members []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < len(members); {
		p, j := members[i]/localSize, i
		for j < len(members) && members[j]/localSize == p {
			j++
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d x%d", p, j-i)
		i = j
	}
	b.WriteByte(']')
	return b.String()
}

// Outcome is one process's outcome of a step of a Split across processes,
// as the processes exchange it (one byte each) to agree on it.
type Outcome byte

// Outcomes of one process's part of a Split, as the processes agree on them.
const (
	OK Outcome = iota
	Timeout
	Unsupported
	Invalid
	Closed
	Failed
)

// String says what went wrong, as an agreement's error words it: "timed
// out", "unsupported", ...; it is empty for OK and for a code it does not
// know.
func (o Outcome) String() string {
	return map[Outcome]string{Timeout: "timed out", Unsupported: "unsupported", Invalid: "invalid argument",
		Closed: "closed", Failed: "failed"}[o]
}

// Failures returns the processes whose outcome in all (one byte a process,
// in process order) is not OK, ascending.
func Failures(all []byte) []int {
	var bad []int
	for p, o := range all {
		if Outcome(o) != OK {
			bad = append(bad, p)
		}
	}
	return bad
}
