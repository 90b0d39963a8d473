//go:build mpi && cgo

package mpi

import (
	"context"
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/mpibase"
)

// TestIallreduceLoop: the loop in C that allreduce-perf times beside
// World.AllreduceF32 (mpibase.IallreduceLoop) gives the exact sums of
// every process's float32 and float64 inputs, 0 calls take no time, and
// bad arguments and a closed World are refused with typed errors before
// any MPI call.
func TestIallreduceLoop(t *testing.T) {
	w, ctx := begin(t, 30*time.Second)
	loop := mpibase.IallreduceLoop
	if loop == nil {
		t.Fatal("mpibase.IallreduceLoop is not set in the mpi build")
	}
	P, me := w.Size(), w.Rank()
	const n = 1000
	s32, r32 := make([]float32, n), make([]float32, n)
	s64, r64 := make([]float64, n), make([]float64, n)
	for i := range n {
		s32[i], s64[i] = float32(me*n+i), float64(me*n+i)+0.25
	}
	p := func(x any) unsafe.Pointer {
		switch v := x.(type) {
		case []float32:
			return unsafe.Pointer(unsafe.SliceData(v))
		case []float64:
			return unsafe.Pointer(unsafe.SliceData(v))
		}
		return nil
	}
	if took, err := loop(ctx, w, p(s32), p(r32), n, backend.F32, backend.Sum, 3); err != nil || took <= 0 {
		t.Fatalf("float32: %v, %v", took, err)
	}
	if _, err := loop(ctx, w, p(s64), p(r64), n, backend.F64, backend.Sum, 2); err != nil {
		t.Fatalf("float64: %v", err)
	}
	for i := range n {
		var w32 float32
		var w64 float64
		for q := range P {
			w32 += float32(q*n + i)
			w64 += float64(q*n+i) + 0.25
		}
		if r32[i] != w32 || r64[i] != w64 {
			t.Fatalf("element %d: %v and %v, want %v and %v", i, r32[i], r64[i], w32, w64)
		}
	}
	if took, err := loop(ctx, w, p(s32), p(r32), n, backend.F32, backend.Sum, 0); err != nil || took > time.Second {
		t.Errorf("0 calls: %v, %v", took, err)
	}
	for name, call := range map[string]func() error{
		"not a World": func() error { _, err := loop(ctx, 7, p(s32), p(r32), n, backend.F32, backend.Sum, 1); return err },
		"negative n":  func() error { _, err := loop(ctx, w, p(s32), p(r32), -1, backend.F32, backend.Sum, 1); return err },
		"bitwise op":  func() error { _, err := loop(ctx, w, p(s32), p(r32), n, backend.F32, backend.BAnd, 1); return err },
		"nil buffer":  func() error { _, err := loop(ctx, w, nil, p(r32), n, backend.F32, backend.Sum, 1); return err },
	} {
		if err := call(); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := loop(cctx, w, p(s32), p(r32), n, backend.F32, backend.Sum, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %v, want context.Canceled", err)
	}
	d, err := w.Dup(ctx)
	if err != nil {
		t.Fatalf("Dup: %v", err)
	}
	dw := d.(*World)
	if err := dw.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := loop(ctx, dw, p(s32), p(r32), n, backend.F32, backend.Sum, 1); !errors.Is(err, backend.ErrClosed) {
		t.Errorf("closed World: %v, want ErrClosed", err)
	}
}
