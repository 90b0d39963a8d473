package waitrec

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A record holds no wait until Begin, then the wait Begin recorded, with
// the time it returned, and none again after End; End without a wait does
// nothing.
func TestRecord(t *testing.T) {
	var w Record
	if _, on := w.Snapshot(); on {
		t.Fatal("a new record holds a wait")
	}
	w.End()
	if _, on := w.Snapshot(); on {
		t.Fatal("End without a wait made one")
	}
	for _, want := range []Snap{
		{Op: "AllReduce", Phase: "reduce", Seq: 3, Peer: 2},
		{Op: "Barrier", Phase: "rendezvous", Seq: 4, Peer: Barrier, Gen: 9},
		{Op: "SendRecv", Seq: 1, P2P: true, Peer: P2P},
		{Op: "SendRecv", Seq: 1, P2P: true, Peer: P2P}, // nothing changed
	} {
		before := Now()
		now := w.Begin(want.Op, want.Phase, want.Seq, want.P2P, want.Peer, want.Gen)
		if now < before || now > Now() {
			t.Errorf("Begin returned %v, not a time between %v and now", now, before)
		}
		want.Since = Base().Add(now)
		got, on := w.Snapshot()
		if !on || got != want {
			t.Errorf("Snapshot() = %+v, %v; want %+v, true", got, on, want)
		}
		w.End()
		if s, on := w.Snapshot(); on {
			t.Errorf("after End, Snapshot() = %+v, true", s)
		}
		w.End()
	}
}

// Now counts from Base on the monotonic clock.
func TestNow(t *testing.T) {
	a := Now()
	b := time.Since(Base())
	if c := Now(); a > b || b > c {
		t.Errorf("Now() %v, time.Since(Base()) %v, Now() %v: not in order", a, b, c)
	}
}

func TestLogInterval(t *testing.T) {
	for _, tc := range []struct{ timeout, want time.Duration }{
		{10 * time.Minute, 30 * time.Second},
		{time.Minute, 15 * time.Second},
		{time.Second, 250 * time.Millisecond},
		{time.Millisecond, 10 * time.Millisecond},
		{0, 10 * time.Millisecond},
	} {
		if got := LogInterval(tc.timeout); got != tc.want {
			t.Errorf("LogInterval(%v) = %v, want %v", tc.timeout, got, tc.want)
		}
	}
}

// A writer records waits whose fields all derive from one number while
// readers take snapshots: a reader never sees the fields of two waits
// mixed (run it with -race too; Group.Pending reads records so).
func TestPendingSnapshotNotTorn(t *testing.T) {
	const n = 64
	ops := make([]string, n)
	phases := make([]string, n)
	for i := range ops {
		ops[i] = fmt.Sprintf("op%d", i)
		phases[i] = fmt.Sprintf("phase of wait %d", i*i)
	}
	var w Record
	var stop atomic.Bool
	var wg sync.WaitGroup
	var seen atomic.Int64
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				s, on := w.Snapshot()
				if !on {
					continue
				}
				seen.Add(1)
				i := int(s.Seq)
				if i < 0 || i >= n {
					t.Errorf("torn record: seq %d", s.Seq)
					return
				}
				if s.Op != ops[i] || s.Phase != phases[i] || s.P2P != (i%2 == 1) || s.Peer != i-2 || s.Gen != uint64(3*i) {
					t.Errorf("torn record: %+v for wait %d", s, i)
					return
				}
			}
		}()
	}
	d := time.Second
	if testing.Short() {
		d = 200 * time.Millisecond
	}
	for k, end := 0, time.Now().Add(d); k%1024 != 0 || time.Now().Before(end); k++ {
		i := k % n
		w.Begin(ops[i], phases[i], uint64(i), i%2 == 1, i-2, uint64(3*i))
		if k%3 != 0 {
			w.End()
		}
	}
	stop.Store(true)
	wg.Wait()
	if seen.Load() == 0 {
		t.Error("the readers saw no wait")
	}
}

// Begin, End and Snapshot allocate nothing.
func TestAlloc(t *testing.T) {
	var w Record
	a := testing.AllocsPerRun(100, func() {
		w.Begin("AllReduce", "reduce", 7, false, 1, 0)
		if _, on := w.Snapshot(); !on {
			t.Fatal("no wait")
		}
		w.End()
	})
	if a != 0 {
		t.Errorf("a wait allocates %v times", a)
	}
}
