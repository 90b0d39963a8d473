package memory

import (
	"testing"
	"time"
	"unsafe"
)

// TestOwner: Close refuses later users and Wait waits for the current
// ones.
func TestOwner(t *testing.T) {
	var o Owner
	if !o.Acquire() || !o.Acquire() {
		t.Fatal("Acquire of an open owner failed")
	}
	if !o.Close() || o.Close() {
		t.Fatal("Close: want true once, then false")
	}
	if o.Acquire() {
		t.Fatal("Acquire after Close succeeded")
	}
	done := make(chan struct{})
	go func() { o.Wait(); close(done) }()
	o.Release()
	select {
	case <-done:
		t.Fatal("Wait returned with a user left")
	case <-time.After(20 * time.Millisecond):
	}
	o.Release()
	<-done
	if !o.IsClosed() {
		t.Fatal("IsClosed false after Close")
	}
}

// TestAllowed: every layout against exact, partial and no overlap.
func TestAllowed(t *testing.T) {
	b := make([]byte, 64)
	blk := b[16:32]
	cases := []struct {
		s, r  []byte
		allow Layout
		at    int
		want  bool
	}{
		{b[:32], b[32:], NoOverlap, 0, true},
		{b, b, NoOverlap, 0, false},
		{b, b, SameMem, 0, true},
		{b[:32], b[8:40], SameMem, 0, false},
		{blk, b, SendInRecv, 16, true},
		{blk, b, SendInRecv, 8, false},
		{b, blk, RecvInSend, 16, true},
		{b, b[16:33], RecvInSend, 8, false},
		{b[:0], b, NoOverlap, 0, true},
	}
	for i, c := range cases {
		if got := Allowed(HostArea(c.s), HostArea(c.r), c.allow, c.at); got != c.want {
			t.Errorf("case %d (%s): Allowed = %v, want %v", i, c.allow, got, c.want)
		}
	}
	if !SameSlice(b, b) || SameSlice(b, b[:8]) || !Holds(b, blk) || Holds(blk, b) {
		t.Error("SameSlice or Holds wrong")
	}
}

type ent struct{ lo, hi uintptr }

func (e *ent) Bounds() (uintptr, uintptr) { return e.lo, e.hi }

// TestRegistry: lookups of held, partly held and closed ranges, and the
// record's bound on closed ranges.
func TestRegistry(t *testing.T) {
	var r Registry[*ent]
	mem := make([]byte, 4096)
	base := uintptr(unsafe.Pointer(&mem[0]))
	a := &ent{base, base + 1024}
	b := &ent{base + 2048, base + 4096}
	r.Add(a)
	r.Add(b)
	if e, ok := r.Lookup(mem[10:20]); !ok || e != a {
		t.Fatal("Lookup inside a failed")
	}
	if _, ok := r.Lookup(mem[1000:1100]); ok {
		t.Fatal("Lookup of a range past a's end succeeded")
	}
	if e, ok := r.Lookup(mem[3000:4096]); !ok || e != b {
		t.Fatal("Lookup inside b failed")
	}
	r.Remove(a, []byte{}) // retired: its range is recorded as closed
	if _, ok, closed := r.Find(mem[10:20]); ok || !closed {
		t.Fatalf("after Remove: ok %v closed %v, want false true", ok, closed)
	}
	r.Add(&ent{base, base + 512}) // new memory at the same addresses
	if _, ok, closed := r.Find(mem[700:800]); ok || closed {
		t.Fatalf("a range reused by new memory: ok %v closed %v, want false false", ok, closed)
	}
	r.Remove(b, nil) // not retired: nothing recorded
	if _, ok, closed := r.Find(mem[3000:3001]); ok || closed {
		t.Fatal("a removed, unretired range is still found")
	}
	for i := 0; i < ClosedSpans+10; i++ {
		e := &ent{base + 8192 + uintptr(2*i), base + 8192 + uintptr(2*i+1)}
		r.Add(e)
		r.Remove(e, []byte{})
	}
	if n := r.ClosedLen(); n > ClosedSpans {
		t.Fatalf("%d closed ranges recorded, want at most %d", n, ClosedSpans)
	}
}
