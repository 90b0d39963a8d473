package faultinject_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/faultinject"
)

// TestReduceMulti: the wrapped host stream keeps ReduceMulti (and
// Compressor), forwards it with the regions unwrapped, and the plan can fail
// it as a recorded command.
func TestReduceMulti(t *testing.T) {
	d, _ := open(t, faultinject.Plan{})
	st := d.Stream()
	mr, ok := st.(backend.MultiReducer)
	if !ok {
		t.Fatalf("wrapped stream %T has no ReduceMulti", st)
	}
	if _, ok := st.(backend.Compressor); !ok {
		t.Fatalf("wrapped stream %T lost Compressor", st)
	}
	regs := make([]backend.Region, 3)
	for i := range regs {
		b, err := d.Alloc(8, backend.HostVisible)
		if err != nil {
			t.Fatal(err)
		}
		p := b.Bytes()
		for e := range 2 {
			binaryPut(p[4*e:], float32(i+1+10*e))
		}
		regs[i] = backend.Region{Buf: b, Len: 8}
	}
	if err := mr.ReduceMulti(backend.Sum, backend.F32, regs, regs, 1); err != nil {
		t.Fatal(err)
	}
	f, err := st.Submit()
	if err == nil {
		err = f.Wait(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	for j, r := range regs {
		p := r.Buf.Bytes()
		if a, b := binaryGet(p), binaryGet(p[4:]); a != 6 || b != 36 {
			t.Errorf("dsts[%d] = %v, %v; want 6, 36", j, a, b)
		}
	}

	d, _ = open(t, faultinject.Plan{Kind: faultinject.FailRecord, K: 1})
	b, err := d.Alloc(8, backend.HostVisible)
	if err != nil {
		t.Fatal(err)
	}
	r := []backend.Region{{Buf: b, Len: 8}}
	err = d.Stream().(backend.MultiReducer).ReduceMulti(backend.Sum, backend.F32, r, r, 1)
	if !errors.Is(err, backend.ErrOutOfMemory) {
		t.Errorf("ReduceMulti under FailRecord: %v, want an injected failure", err)
	}
}

func binaryPut(p []byte, x float32) { binary.NativeEndian.PutUint32(p, math.Float32bits(x)) }

func binaryGet(p []byte) float32 { return math.Float32frombits(binary.NativeEndian.Uint32(p)) }
