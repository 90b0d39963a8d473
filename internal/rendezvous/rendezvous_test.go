package rendezvous

import (
	"reflect"
	"sync"
	"testing"
	"time"
)

type fp struct {
	call    int
	invalid bool
}

func (f fp) Invalid() bool { return f.invalid }

type result struct{ rank, peer int }

// Every rank of a generation sees it complete with the completer's result
// and the AND of the flags; the next generation starts empty.
func TestGenerations(t *testing.T) {
	const n = 4
	var b Barrier[fp, result]
	b.Init(n)
	var wg sync.WaitGroup
	for gen := uint64(0); gen < 3; gen++ {
		for r := 0; r < n; r++ {
			b.Lock(r%2 == 0)
			g, last := b.Arrive(r, fp{call: 7}, gen != 1 || r != 2, int64(gen))
			if g != gen || last != (r == n-1) {
				t.Fatalf("gen %d rank %d: Arrive = %d, %v", gen, r, g, last)
			}
			if last {
				if _, _, differ := b.Differ(); differ {
					t.Fatal("equal fingerprints differ")
				}
				b.Complete(nil, b.AllFlags())
			}
			b.Unlock()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.Lock(false)
			defer b.Unlock()
			res, all, ok := b.Result(gen)
			if !ok || res != nil || all != (gen != 1) || b.Seen() != gen+1 || b.Present(0) {
				t.Errorf("gen %d: Result = %v, %v, %v", gen, res, all, ok)
			}
		}()
		wg.Wait()
	}
	if b.LastSeq(3) != 2 {
		t.Fatalf("LastSeq(3) = %d, want 2", b.LastSeq(3))
	}
}

// A mismatch names rank 0 and the first rank unlike it, or first a rank
// whose own arguments were invalid.
func TestDiffer(t *testing.T) {
	for _, c := range []struct {
		fps        []fp
		rank, peer int
		ok         bool
	}{
		{[]fp{{call: 1}, {call: 1}, {call: 1}}, 0, 0, false},
		{[]fp{{call: 1}, {call: 1}, {call: 2}}, 0, 2, true},
		{[]fp{{call: 1}, {call: 2}, {invalid: true}}, 2, 0, true},
		{[]fp{{invalid: true}, {call: 2}, {invalid: true}}, 0, 1, true},
	} {
		var b Barrier[fp, result]
		b.Init(len(c.fps))
		for r, f := range c.fps {
			b.Arrive(r, f, true, 0)
		}
		if rank, peer, ok := b.Differ(); rank != c.rank || peer != c.peer || ok != c.ok {
			t.Errorf("%v: Differ = %d, %d, %v; want %d, %d, %v", c.fps, rank, peer, ok, c.rank, c.peer, c.ok)
		}
	}
}

// Missing names the ranks not yet arrived (from base) with their last call
// numbers; Spin returns once the generation completes, or false after its
// time.
func TestMissingAndSpin(t *testing.T) {
	var b Barrier[fp, result]
	b.Init(3)
	b.Arrive(1, fp{}, true, 5)
	if ranks, last := b.Missing(10); !reflect.DeepEqual(ranks, []int{10, 12}) || !reflect.DeepEqual(last, []int64{-1, -1}) {
		t.Fatalf("Missing(10) = %v, %v; want [10 12], [-1 -1]", ranks, last)
	}
	if b.Spin(0, time.Millisecond) {
		t.Fatal("Spin on an open generation returned true")
	}
	b.Arrive(0, fp{}, true, 6)
	b.Arrive(2, fp{}, true, 7)
	b.Complete(nil, true)
	b.Arrive(0, fp{}, true, 8)
	if ranks, last := b.Missing(0); !reflect.DeepEqual(ranks, []int{1, 2}) || !reflect.DeepEqual(last, []int64{5, 7}) {
		t.Fatalf("Missing(0) = %v, %v; want [1 2], [5 7]", ranks, last)
	}
	if !b.Spin(0, time.Hour) {
		t.Fatal("Spin on a completed generation returned false")
	}
}
