package pin

import (
	"testing"
	"time"
)

// A Buffer is in the set from New; Close waits for its users, closes the
// imports, and takes it out of the set (its range recorded as closed),
// once; a leaked Buffer stays in the set, closed.
func TestBufferClose(t *testing.T) {
	n0 := Buffers()
	b, err := New(4096)
	if err != nil {
		t.Fatal(err)
	}
	p := b.Bytes()[100:200]
	if Lookup(p) != b || Buffers() != n0+1 {
		t.Fatal("a new Buffer is not in the set")
	}
	if !b.Own.Acquire() {
		t.Fatal("Acquire of an open Buffer failed")
	}
	done := make(chan struct{})
	go func() {
		first, leak, err := b.Close()
		if !first || leak || err != nil {
			t.Errorf("Close: first %v, leak %v, err %v", first, leak, err)
		}
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("Close did not wait for the Buffer's user")
	case <-time.After(20 * time.Millisecond):
	}
	b.Own.Release()
	<-done
	if e, ok, closed := Find(p); ok || e != nil || (!closed && Buffers() != n0) {
		t.Fatalf("after Close: Find %v, %v, %v", e, ok, closed)
	}
	if first, _, _ := b.Close(); first {
		t.Fatal("a second Close closed it again")
	}

	var log []string
	lost := true
	r := NewRank(fakeDev{log: &log}, func() bool { return lost })
	b2, err := New(4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.Region(b2.Mem, b2.Bytes()); !ok || err != nil {
		t.Fatalf("Region: %v, %v", ok, err)
	}
	if first, leak, _ := b2.Close(); !first || !leak {
		t.Fatalf("Close of a Buffer a lost rank imported: first %v, leak %v; want a leak", first, leak)
	}
	if Lookup(b2.Bytes()) != b2 || b2.Own.Acquire() {
		t.Fatal("a leaked Buffer left the set, or is open")
	}
}
