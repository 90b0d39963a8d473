//go:build mpi && !cgo

package mpi

// The mpi package binds the MPI C library with cgo: building it with -tags
// mpi and CGO_ENABLED=0 stops here with an error that names the problem.
var _ = the_mpi_build_tag_needs_cgo__set_CGO_ENABLED_1
