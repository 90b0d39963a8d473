package splitplan

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// group is a group's ranks as Plan sees them: n ranks, localSize in each
// process, each rank's color and key, and whether its process's transport
// splits.
type group struct {
	n, localSize int
	color, key   func(r int) int
	splits       func(r int) bool
}

// plan runs Plan on what the ranks of g gather.
func (g group) plan() (*Layout, error) {
	all := make([]int64, 3*g.n)
	for r := 0; r < g.n; r++ {
		all[3*r], all[3*r+1] = int64(g.color(r)), int64(g.key(r))
		if g.splits(r) {
			all[3*r+2] = 1
		}
	}
	return Plan(all, g.n, g.localSize, "loopback")
}

func always(int) bool { return true }

// TestPlan: hand-worked layouts, within one process and across processes.
func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name string
		group
		colors, spans []int
		members       map[int][]int
		procs         map[int][]int
	}{
		{
			name:   "one process",
			group:  group{n: 4, localSize: 4, color: func(r int) int { return []int{1, 0, 1, NoColor}[r] }, key: func(r int) int { return []int{5, 3, 2, 0}[r] }, splits: func(int) bool { return false }},
			colors: []int{0, 1}, members: map[int][]int{0: {1}, 1: {2, 0}}, procs: map[int][]int{},
		},
		{
			name:   "ties keep the parent's order",
			group:  group{n: 5, localSize: 5, color: func(int) int { return 3 }, key: func(r int) int { return []int{1, 0, 1, 0, 1}[r] }, splits: always},
			colors: []int{3}, members: map[int][]int{3: {1, 3, 0, 2, 4}}, procs: map[int][]int{},
		},
		{
			name:   "each process its own",
			group:  group{n: 4, localSize: 2, color: func(r int) int { return r / 2 }, key: func(r int) int { return -r }, splits: func(int) bool { return false }}, // no Splitter needed
			colors: []int{0, 1}, members: map[int][]int{0: {1, 0}, 1: {3, 2}}, procs: map[int][]int{},
		},
		{
			name:   "across two processes",
			group:  group{n: 4, localSize: 2, color: func(r int) int { return r % 2 }, key: func(r int) int { return r }, splits: always},
			colors: []int{0, 1}, members: map[int][]int{0: {0, 2}, 1: {1, 3}},
			spans: []int{0, 1}, procs: map[int][]int{0: {0, 1}, 1: {0, 1}},
		},
		{
			name:   "processes ranked by their first member",
			group:  group{n: 6, localSize: 3, color: func(r int) int { return []int{0, 0, 1, 0, 0, 1}[r] }, key: func(r int) int { return -r }, splits: always},
			colors: []int{0, 1}, members: map[int][]int{0: {4, 3, 1, 0}, 1: {5, 2}},
			spans: []int{0, 1}, procs: map[int][]int{0: {1, 0}, 1: {1, 0}},
		},
		{
			name:   "some colors span, some do not",
			group:  group{n: 6, localSize: 2, color: func(r int) int { return []int{4, 4, 2, NoColor, 2, 9}[r] }, key: func(r int) int { return 0 }, splits: always},
			colors: []int{2, 4, 9}, members: map[int][]int{2: {2, 4}, 4: {0, 1}, 9: {5}},
			spans: []int{2}, procs: map[int][]int{2: {1, 2}},
		},
	} {
		l, err := tc.plan()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		want := &Layout{Colors: tc.colors, Members: tc.members, Spans: tc.spans, Procs: tc.procs}
		if !reflect.DeepEqual(l, want) {
			t.Errorf("%s: Plan = %+v, want %+v", tc.name, l, want)
		}
	}
}

// TestPlanUnsupported: layouts a sub-group across processes cannot have,
// and a transport that cannot split, fail with ErrUnsupported naming the
// first such color.
func TestPlanUnsupported(t *testing.T) {
	for _, tc := range []struct {
		name string
		group
		want string
	}{
		{
			name:  "interleaved",
			group: group{n: 4, localSize: 2, color: func(int) int { return 7 }, key: func(r int) int { return (r%2)*2 + r/2 }, splits: always},
			want:  "color 7: in key order its members are in processes [0 x1, 1 x1, 0 x1, 1 x1]; a sub-group across processes needs each process's members contiguous",
		},
		{
			name:  "a process twice",
			group: group{n: 6, localSize: 3, color: func(int) int { return 0 }, key: func(r int) int { return []int{0, 1, 4, 2, 3, 5}[r] }, splits: always},
			want:  "color 0: in key order its members are in processes [0 x2, 1 x2, 0 x1, 1 x1]",
		},
		{
			name:  "unequal",
			group: group{n: 4, localSize: 2, color: func(r int) int { return map[bool]int{true: 2, false: NoColor}[r < 3] }, key: func(r int) int { return r }, splits: always},
			want:  "color 2: process 0 has 2 of its members, process 1 has 1; a sub-group across processes needs the same number in each",
		},
		{
			name:  "no Splitter",
			group: group{n: 4, localSize: 2, color: func(r int) int { return r % 2 }, key: func(r int) int { return r }, splits: func(r int) bool { return r < 2 }},
			want:  "color 0: it spans processes [0 1], and the transport of process 1 (loopback) cannot split (no backend.Splitter)",
		},
		{
			name:  "the first color, ascending",
			group: group{n: 8, localSize: 2, color: func(r int) int { return []int{5, 5, 5, NoColor, 3, 3, 3, 3}[r] }, key: func(r int) int { return r%2*10 + r }, splits: always},
			want:  "color 3: in key order its members are in processes [2 x1, 3 x1, 2 x1, 3 x1]",
		},
	} {
		l, err := tc.plan()
		if !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("%s: Plan = %+v, %v; want ErrUnsupported", tc.name, l, err)
			continue
		}
		if l != nil {
			t.Errorf("%s: Plan returned a layout with its error: %+v", tc.name, l)
		}
		if !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want it to start %q", tc.name, err, tc.want)
		}
	}
}

// TestPlanErrorText: the whole text of an unsupported layout's error.
func TestPlanErrorText(t *testing.T) {
	_, err := group{n: 4, localSize: 2, color: func(r int) int { return map[bool]int{true: 2, false: NoColor}[r < 3] }, key: func(r int) int { return r }, splits: always}.plan()
	want := "color 2: process 0 has 2 of its members, process 1 has 1; a sub-group across processes needs the same number in each: " + backend.ErrUnsupported.Error()
	if err == nil || err.Error() != want {
		t.Fatalf("Plan error %v, want %q", err, want)
	}
}

func TestLocal(t *testing.T) {
	l := &Layout{Members: map[int][]int{0: {5, 1, 4, 0, 3}}}
	if got, want := l.Local(0, 3, 3), []int{5, 4, 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("Local(0, 3, 3) = %v, want %v", got, want)
	}
	if got, want := l.Local(0, 0, 3), []int{1, 0}; !reflect.DeepEqual(got, want) {
		t.Errorf("Local(0, 0, 3) = %v, want %v", got, want)
	}
	if got := l.Local(1, 0, 3); got != nil {
		t.Errorf("Local of a color without members = %v", got)
	}
}

func TestProcRuns(t *testing.T) {
	for _, tc := range []struct {
		localSize int
		members   []int
		want      string
	}{
		{2, []int{0, 1, 2, 3, 4, 5}, "[0 x2, 1 x2, 2 x2]"},
		{3, []int{0, 1, 3, 4, 2, 5}, "[0 x2, 1 x2, 0 x1, 1 x1]"},
		{4, []int{7}, "[1 x1]"},
		{4, nil, "[]"},
	} {
		if got := procRuns(tc.localSize, tc.members); got != tc.want {
			t.Errorf("procRuns(%d, %v) = %q, want %q", tc.localSize, tc.members, got, tc.want)
		}
	}
}

func TestOutcomes(t *testing.T) {
	for o, want := range map[Outcome]string{OK: "", Timeout: "timed out", Unsupported: "unsupported", Invalid: "invalid argument",
		Closed: "closed", Failed: "failed", Failed + 1: ""} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String() = %q, want %q", byte(o), got, want)
		}
	}
	if got := Failures([]byte{byte(OK), byte(Closed), byte(OK), byte(Timeout)}); !reflect.DeepEqual(got, []int{1, 3}) {
		t.Errorf("Failures = %v, want [1 3]", got)
	}
	if got := Failures([]byte{byte(OK), byte(OK)}); got != nil {
		t.Errorf("Failures of all OK = %v, want none", got)
	}
}
