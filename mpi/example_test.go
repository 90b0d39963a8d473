package mpi_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/mpi"
)

// An all-reduce across the processes of an MPI job (run under mpirun, built
// with -tags mpi), its buffers in memory the node's processes share: the
// shared-memory window reads every process's input where it lies instead of
// copying it in. Built without MPI, mpi.Init returns an error matching
// collective.ErrUnsupported.
func ExampleAllocShared() {
	w, err := mpi.Init()
	if err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: 1, Backend: "host", Transport: w})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	const n = 1 << 20
	grad, err := mpi.AllocShared[float32](ctx, w, n) // a collective of w: every process calls it
	if err != nil {
		log.Fatal(err)
	}
	for i := range grad {
		grad[i] = float32(w.Rank())
	}
	if err := collective.AllReduce(ctx, g.Comm(0), grad, collective.Sum); err != nil {
		log.Fatal(err)
	}
	fmt.Println(grad[0]) // 0 + 1 + ... + (processes - 1)
}
