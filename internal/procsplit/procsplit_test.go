package procsplit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/splitplan"
)

// net is an in-memory communicator of size processes: its Allgathers and
// Splits are collective calls that meet in call order.
type net struct {
	mu    sync.Mutex
	size  int
	calls map[int]*call // by call number
}

type call struct {
	done chan struct{}
	in   [][]byte
	n    int
	nets map[string]*net // Split: the sub-communicators made, by color
}

// tr is one process's end of a net.
type tr struct {
	n         *net
	rank      int
	ncall     int
	splitErr  error // the next Split fails with it, after its collective part
	closed    bool
	closedAll *int // counts the closes of the transports made by Split
	madeAll   *int // counts the transports made by Split
}

func newNet(size int) []*tr {
	n := &net{size: size, calls: map[int]*call{}}
	trs := make([]*tr, size)
	for p := range trs {
		trs[p] = &tr{n: n, rank: p, closedAll: new(int), madeAll: new(int)}
	}
	return trs
}

func (t *tr) Name() string                                    { return "test" }
func (t *tr) Rank() int                                       { return t.rank }
func (t *tr) Size() int                                       { return t.n.size }
func (t *tr) Isend([]byte, int, int) (backend.Request, error) { return nil, errors.New("unused") }
func (t *tr) Irecv([]byte, int, int) (backend.Request, error) { return nil, errors.New("unused") }
func (t *tr) Close() error {
	t.closed = true
	*t.closedAll++
	return nil
}

// meet is one collective call: it returns every process's contribution and
// the call's record.
func (t *tr) meet(ctx context.Context, mine []byte) ([][]byte, *call, error) {
	t.n.mu.Lock()
	k := t.ncall
	t.ncall++
	c := t.n.calls[k]
	if c == nil {
		c = &call{done: make(chan struct{}), in: make([][]byte, t.n.size), nets: map[string]*net{}}
		t.n.calls[k] = c
	}
	c.in[t.rank] = slices.Clone(mine)
	if c.n++; c.n == t.n.size {
		close(c.done)
	}
	t.n.mu.Unlock()
	select {
	case <-c.done:
		return c.in, c, nil
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("process(es) missing: %w", backend.ErrTimeout)
	}
}

func (t *tr) Allgather(ctx context.Context, mine, all []byte) error {
	in, _, err := t.meet(ctx, mine)
	if err != nil {
		return err
	}
	for p, b := range in {
		copy(all[p*len(mine):], b)
	}
	return nil
}

func (t *tr) Split(ctx context.Context, color, key int) (backend.Transport, error) {
	in, c, err := t.meet(ctx, []byte{byte(color + 1), byte(key)})
	if err != nil {
		return nil, err
	}
	if err, t.splitErr = t.splitErr, nil; err != nil {
		return nil, err
	}
	if color < 0 {
		return nil, nil
	}
	var members []int
	for p, b := range in {
		if int(b[0])-1 == color {
			members = append(members, p)
		}
	}
	sort.SliceStable(members, func(a, b int) bool { return in[members[a]][1] < in[members[b]][1] })
	t.n.mu.Lock()
	defer t.n.mu.Unlock()
	id := fmt.Sprint(color)
	n := c.nets[id]
	if n == nil {
		n = &net{size: len(members), calls: map[int]*call{}}
		c.nets[id] = n
	}
	*t.madeAll++
	return &tr{n: n, rank: slices.Index(members, t.rank), closedAll: t.closedAll, madeAll: t.madeAll}, nil
}

// kid is a sub-group as env opens it.
type kid struct {
	col    int
	local  []int
	t      backend.Transport
	closed bool
}

// env is a process's parent group: openErr fails the opening of a color.
type env struct {
	mu      sync.Mutex
	openErr map[int]error
	opened  []*kid
}

func (e *env) Open(ctx context.Context, col int, local []int, t backend.Transport) (*kid, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.openErr[col]; err != nil {
		if t != nil {
			t.Close()
		}
		return nil, err
	}
	k := &kid{col: col, local: local, t: t}
	e.opened = append(e.opened, k)
	return k, nil
}

func (e *env) Close(k *kid) {
	k.closed = true
	if k.t != nil {
		k.t.Close()
	}
}

func (e *env) Broken() error          { return nil }
func (e *env) Failed(err error) error { return fmt.Errorf("broke: %w", err) }
func (e *env) TimedOut(phase string, err, ctxErr error) error {
	return fmt.Errorf("timed out: %s: %w", phase, backend.ErrTimeout)
}
func (e *env) Remote(p int, timeout bool, msg string) error {
	return fmt.Errorf("process %d: %s", p, msg)
}

// run makes every process's part of the Split of a group of procs x local
// ranks where rank r passes color(r) and key -r.
func run(t *testing.T, procs, local int, color func(r int) int, envs []*env, trs []*tr) ([]map[int]*kid, []error) {
	t.Helper()
	n := procs * local
	all := make([]int64, 3*n)
	for r := range n {
		all[3*r], all[3*r+1], all[3*r+2] = int64(color(r)), int64(-r), 1
	}
	l, err := splitplan.Plan(all, n, local, "test")
	if err != nil {
		t.Fatal(err)
	}
	kids := make([]map[int]*kid, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for p := range procs {
		wg.Go(func() {
			s := Split[*kid]{Tr: trs[p], Base: p * local, Local: local, Timeout: 5 * time.Second, Env: envs[p]}
			kids[p], errs[p] = s.Make(context.Background(), l)
		})
	}
	wg.Wait()
	return kids, errs
}

func newEnvs(procs int) []*env {
	envs := make([]*env, procs)
	for p := range envs {
		envs[p] = &env{openErr: map[int]error{}}
	}
	return envs
}

// TestMake: 3 processes of 2 ranks; color 0 spans processes 0 and 1 (ranked
// 1 then 0 by the keys), color 1 lives in process 2, color 2 spans every
// process. Each process gets its sub-groups over transports that rank it as
// planned.
func TestMake(t *testing.T) {
	color := func(r int) int {
		switch {
		case r == 5:
			return 1
		case r%2 == 0:
			return 2
		case r < 4:
			return 0
		}
		return splitplan.NoColor
	}
	trs := newNet(3)
	kids, errs := run(t, 3, 2, color, newEnvs(3), trs)
	want := []map[int][2]int{ // color: rank and size of its transport (-1: none)
		{0: {1, 2}, 2: {2, 3}},
		{0: {0, 2}, 2: {1, 3}},
		{1: {-1, -1}, 2: {0, 3}},
	}
	for p := range 3 {
		if errs[p] != nil {
			t.Fatalf("process %d: %v", p, errs[p])
		}
		if len(kids[p]) != len(want[p]) {
			t.Errorf("process %d: sub-groups %v, want colors %v", p, kids[p], want[p])
		}
		for col, w := range want[p] {
			k := kids[p][col]
			switch {
			case k == nil:
				t.Errorf("process %d: no sub-group of color %d", p, col)
			case w[0] < 0 && k.t != nil:
				t.Errorf("process %d color %d: a transport for a sub-group of one process", p, col)
			case w[0] >= 0 && (k.t == nil || k.t.Rank() != w[0] || k.t.Size() != w[1]):
				t.Errorf("process %d color %d: transport %v, want rank %d of %d", p, col, k.t, w[0], w[1])
			}
		}
	}
}

// TestMakeFailure: a failure in one process, opening a sub-group or
// splitting the transport, fails the Split in every process, with its
// class; every process closes what it made.
func TestMakeFailure(t *testing.T) {
	color := func(r int) int { return r / 4 } // 0 spans processes 0 and 1, 1 spans 2 and 3
	for _, tc := range []struct {
		name  string
		setup func(envs []*env, trs []*tr)
		class error
	}{
		{"open", func(envs []*env, _ []*tr) { envs[3].openErr[1] = fmt.Errorf("no device: %w", backend.ErrUnsupported) }, backend.ErrUnsupported},
		{"split", func(_ []*env, trs []*tr) { trs[1].splitErr = fmt.Errorf("refused: %w", backend.ErrInvalidArgument) }, backend.ErrInvalidArgument},
		{"failed", func(envs []*env, _ []*tr) { envs[0].openErr[0] = errors.New("out of memory") }, nil},
	} {
		envs, trs := newEnvs(4), newNet(4)
		tc.setup(envs, trs)
		kids, errs := run(t, 4, 2, color, envs, trs)
		for p := range 4 {
			if errs[p] == nil || kids[p] != nil {
				t.Errorf("%s: process %d: %v, %v, want an error", tc.name, p, kids[p], errs[p])
			} else if tc.class != nil && !errors.Is(errs[p], tc.class) {
				t.Errorf("%s: process %d: %v, want one matching %v", tc.name, p, errs[p], tc.class)
			}
			for _, k := range envs[p].opened {
				if !k.closed {
					t.Errorf("%s: process %d: the sub-group of color %d was not closed", tc.name, p, k.col)
				}
			}
			if n, m := *trs[p].closedAll, *trs[p].madeAll; n != m {
				t.Errorf("%s: process %d: %d of the %d transports Split made closed", tc.name, p, n, m)
			}
		}
	}
}

// TestMakeTimeout: a process that never takes part makes the others' Split
// fail with a timeout, which Failed handles.
func TestMakeTimeout(t *testing.T) {
	trs := newNet(2)
	l, err := splitplan.Plan([]int64{0, 0, 1, 0, 0, 1}, 2, 1, "test")
	if err != nil {
		t.Fatal(err)
	}
	s := Split[*kid]{Tr: trs[0], Base: 0, Local: 1, Timeout: 50 * time.Millisecond, Env: &env{}}
	kids, err := s.Make(context.Background(), l)
	if kids != nil || !errors.Is(err, backend.ErrTimeout) || err.Error()[:6] != "broke:" {
		t.Fatalf("%v, %v: want a timeout the parent broke with", kids, err)
	}
}
