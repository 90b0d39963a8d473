package procjoin

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// net is the processes' meeting point: each Allgather call k of every
// process meets on calls[k].
type net struct {
	size  int
	mu    sync.Mutex
	calls map[int]*call
}

type call struct {
	n    int
	in   [][]byte
	done chan struct{}
}

// tr is one process's end of a net.
type tr struct {
	n       *net
	rank    int
	ncall   int
	closed  bool
	dup     *net  // where a dupTr's Dup meets
	dupErr  error // a dupTr's Dup fails with it
	dupMade *tr   // what a dupTr's Dup made
}

func newNet(size int) *net { return &net{size: size, calls: map[int]*call{}} }

func (t *tr) Name() string { return "loop" }
func (t *tr) Rank() int    { return t.rank }
func (t *tr) Size() int    { return t.n.size }
func (t *tr) Isend(p []byte, peer, tag int) (backend.Request, error) {
	return nil, errors.New("unused")
}
func (t *tr) Irecv(p []byte, peer, tag int) (backend.Request, error) {
	return nil, errors.New("unused")
}
func (t *tr) Close() error { t.closed = true; return nil }

func (t *tr) Allgather(ctx context.Context, mine, all []byte) error {
	t.n.mu.Lock()
	c := t.n.calls[t.ncall]
	if c == nil {
		c = &call{in: make([][]byte, t.n.size), done: make(chan struct{})}
		t.n.calls[t.ncall] = c
	}
	t.ncall++
	c.in[t.rank] = append([]byte(nil), mine...)
	if c.n++; c.n == t.n.size {
		close(c.done)
	}
	t.n.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	for p, b := range c.in {
		copy(all[p*len(mine):], b)
	}
	return nil
}

// dupTr is a tr that duplicates itself onto its dup net.
type dupTr struct{ *tr }

func (t dupTr) Dup(ctx context.Context) (backend.Transport, error) {
	if t.dupErr != nil {
		return nil, t.dupErr
	}
	t.dupMade = &tr{n: t.dup, rank: t.rank}
	return t.dupMade, nil
}

// joinAll runs Join on every process with its options; it returns each
// one's transport, dup and error.
func joinAll(trs []backend.Transport, opts []Options) ([]backend.Transport, []bool, []error) {
	ts, dups, errs := make([]backend.Transport, len(trs)), make([]bool, len(trs)), make([]error, len(trs))
	var wg sync.WaitGroup
	for p := range trs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts[p], dups[p], errs[p] = Join(context.Background(), trs[p], opts[p])
		}()
	}
	wg.Wait()
	return ts, dups, errs
}

func same(n int, o Options) []Options {
	out := make([]Options, n)
	for i := range out {
		out[i] = o
	}
	return out
}

var base = Options{Local: 2, Slot: 4096, MaxRanks: 1 << 14, Timeout: time.Second}

// TestJoinDuplicates: over a Duplicator every process works on its
// duplicate (the group's to close); over its own transport, or one that
// cannot duplicate, on the transport itself.
func TestJoinDuplicates(t *testing.T) {
	n, d := newNet(3), newNet(3)
	var trs []backend.Transport
	for p := 0; p < 3; p++ {
		trs = append(trs, dupTr{&tr{n: n, rank: p, dup: d}})
	}
	ts, dups, errs := joinAll(trs, same(3, base))
	for p := range trs {
		if errs[p] != nil || !dups[p] || ts[p] != trs[p].(dupTr).dupMade {
			t.Fatalf("process %d: %v, %v, %v: want its duplicate", p, ts[p], dups[p], errs[p])
		}
	}
	if len(d.calls) != 1 || len(n.calls) != 0 {
		t.Fatalf("the agreement ran on the original (%d calls) or not on the duplicate (%d)", len(n.calls), len(d.calls))
	}
	o := base
	o.Own = true
	ts, dups, errs = joinAll(trs, same(3, o))
	for p := range trs {
		if errs[p] != nil || dups[p] || ts[p] != trs[p] {
			t.Fatalf("own, process %d: %v, %v, %v: want the transport itself", p, ts[p], dups[p], errs[p])
		}
	}
	if len(n.calls) != 1 {
		t.Fatalf("own: the agreement did not run on the transport itself")
	}
	plain := newNet(3)
	trs = []backend.Transport{&tr{n: plain, rank: 0}, &tr{n: plain, rank: 1}, &tr{n: plain, rank: 2}}
	ts, dups, errs = joinAll(trs, same(3, base))
	for p := range trs {
		if errs[p] != nil || dups[p] || ts[p] != trs[p] {
			t.Fatalf("no Duplicator, process %d: %v, %v, %v: want the transport itself", p, ts[p], dups[p], errs[p])
		}
	}
}

// TestJoinDisagreement: processes with different local ranks or slot sizes
// fail with a *ShapeError naming the field; a duplicate made is closed.
func TestJoinDisagreement(t *testing.T) {
	for _, c := range []struct {
		field string
		set   func(*Options)
	}{
		{"Ranks", func(o *Options) { o.Local = 3 }},
		{"ChunkBytes", func(o *Options) { o.Slot = 8192 }},
	} {
		n, d := newNet(2), newNet(2)
		trs := []backend.Transport{dupTr{&tr{n: n, rank: 0, dup: d}}, dupTr{&tr{n: n, rank: 1, dup: d}}}
		opts := same(2, base)
		c.set(&opts[1])
		_, _, errs := joinAll(trs, opts)
		for p, err := range errs {
			var se *ShapeError
			if !errors.As(err, &se) || se.Field != c.field || !strings.Contains(se.Reason, "every process needs the same") {
				t.Fatalf("%s: process %d: %v, want a *ShapeError of %s", c.field, p, err, c.field)
			}
			if !trs[p].(dupTr).dupMade.closed {
				t.Fatalf("%s: process %d: the duplicate was not closed", c.field, p)
			}
		}
	}
}

// TestJoinShape: a rank outside the transport and too many ranks are
// *ShapeErrors before any call on the transport.
func TestJoinShape(t *testing.T) {
	n := newNet(2)
	if _, _, err := Join(context.Background(), &tr{n: n, rank: 2}, base); !isShape(err, "Transport") {
		t.Fatalf("rank 2 of 2: %v", err)
	}
	o := base
	o.MaxRanks = 3
	if _, _, err := Join(context.Background(), &tr{n: n, rank: 0}, o); !isShape(err, "Ranks") || !strings.Contains(err.Error(), "exceed the 3 supported") {
		t.Fatalf("4 ranks of at most 3: %v", err)
	}
	if len(n.calls) != 0 {
		t.Fatal("a refused shape called the transport")
	}
}

func isShape(err error, field string) bool {
	var se *ShapeError
	return errors.As(err, &se) && se.Field == field
}

// TestJoinFailures: a Dup that fails, and an agreement a process never
// joins (a timeout), are *StepErrors naming the phase; only the timeout is
// one.
func TestJoinFailures(t *testing.T) {
	boom := errors.New("boom")
	n := newNet(2)
	_, _, err := Join(context.Background(), dupTr{&tr{n: n, rank: 0, dupErr: boom}}, base)
	var se *StepError
	if !errors.As(err, &se) || se.Timeout || se.Phase != "duplicating the transport" || !errors.Is(err, boom) || err.Error() != "duplicating loop: boom" {
		t.Fatalf("a failed Dup: %v", err)
	}
	_, _, err = Join(context.Background(), dupTr{&tr{n: n, rank: 0, dupErr: backend.ErrTimeout}}, base)
	if !errors.As(err, &se) || !se.Timeout {
		t.Fatalf("a Dup that timed out: %v, want a timeout", err)
	}
	o := base
	o.Timeout = 10 * time.Millisecond
	_, _, err = Join(context.Background(), &tr{n: n, rank: 0}, o)
	if !errors.As(err, &se) || !se.Timeout || se.Phase != "joining the processes" || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.HasPrefix(err.Error(), "joining 2 processes over loop: ") {
		t.Fatalf("an agreement without the other process: %v", err)
	}
}
