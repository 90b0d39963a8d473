//go:build !mpi

package main

// Built without -tags mpi: no MPI. --mpi and --mpi-baseline say so and
// exit 2; a process that an MPI launcher started runs on its own, and says
// that too (each process then opens its own group, as nccl-tests built
// without MPI does).

import (
	"fmt"
	"io"
	"os"
	"regexp"
)

// mpiFlag matches the mpi build's flags: --mpi, -mpi, --mpi-baseline, with
// an optional =value.
var mpiFlag = regexp.MustCompile(`^--?mpi(-baseline)?(=.*)?$`)

func init() {
	if code, ok := mpiOmitted(os.Args[0], os.Args[1:], os.Stderr); ok {
		os.Exit(code)
	}
}

// mpiOmitted returns exit status 2 and ok when args ask for MPI, after one
// line on stderr; it warns when an MPI launcher started the process.
func mpiOmitted(prog string, args []string, stderr io.Writer) (code int, ok bool) {
	name := programName(prog)
	for _, a := range args {
		if mpiFlag.MatchString(a) {
			fmt.Fprintf(stderr, "%s: %s: built without -tags mpi (rebuild with go build -tags mpi ./cmd/allreduce-perf; see docs/MPI.md)\n", name, a)
			return 2, true
		}
	}
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"} {
		if os.Getenv(v) != "" {
			fmt.Fprintf(stderr, "%s: started by an MPI launcher (%s is set) but built without -tags mpi: this process runs its own group\n", name, v)
			break
		}
	}
	return 0, false
}
