//go:build !mpi

package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestMPIWithoutTag: built without -tags mpi, --mpi and --mpi-baseline
// exit 2 with one line that says so; other arguments run as usual.
func TestMPIWithoutTag(t *testing.T) {
	for _, args := range [][]string{{"--mpi"}, {"-g", "2", "-mpi"}, {"--mpi-baseline"}, {"--mpi=true", "-b", "8"}} {
		var errOut bytes.Buffer
		code, ok := mpiOmitted("allreduce-perf", args, &errOut)
		if !ok || code != 2 || !strings.Contains(errOut.String(), "built without -tags mpi") || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%q: exit %d (ok %v), stderr %q; want 2 and one line saying built without -tags mpi", args, code, ok, errOut.String())
		}
	}
	for _, args := range [][]string{{"-b", "8"}, {"--mpix"}, {"-J", "mpi.json"}} {
		var errOut bytes.Buffer
		if _, ok := mpiOmitted("allreduce-perf", args, &errOut); ok {
			t.Errorf("%q: taken for an MPI flag", args)
		}
	}
}
