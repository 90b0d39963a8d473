//go:build !mpi || !cgo

package mpi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/collective"
)

// Built without MPI, Init fails with an error that matches ErrUnsupported
// and says how to build with MPI, without allocating; Finalize has nothing
// to do; every World method fails alike.
func TestWithoutMPI(t *testing.T) {
	w, err := Init()
	if w != nil || !errors.Is(err, collective.ErrUnsupported) {
		t.Fatalf("Init() = %v, %v; want nil and an error matching ErrUnsupported", w, err)
	}
	for _, s := range []string{"-tags mpi", "cgo", "Open MPI", "docs/MPI.md"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Init's error %q does not mention %q", err, s)
		}
	}
	if n := testing.AllocsPerRun(10, func() { _, _ = Init() }); n != 0 {
		t.Errorf("Init allocates %v times", n)
	}
	if err := Finalize(); err != nil {
		t.Errorf("Finalize() = %v, want nil", err)
	}
	ctx := context.Background()
	w = &World{}
	_, e1 := w.Isend(nil, 0, 0)
	_, e2 := w.Irecv(nil, 0, 0)
	_, e3 := w.Dup(ctx)
	_, e4 := w.Split(ctx, 0, 0)
	for i, err := range []error{e1, e2, e3, e4, w.Allgather(ctx, nil, nil), w.Barrier(ctx),
		w.AllreduceF32(ctx, nil, nil, 0), w.AllreduceF64(ctx, nil, nil, 0), Wait(ctx, nil)} {
		if !errors.Is(err, collective.ErrUnsupported) {
			t.Errorf("call %d: %v, want an error matching ErrUnsupported", i, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Errorf("Close() = %v, want nil", err)
	}
}
