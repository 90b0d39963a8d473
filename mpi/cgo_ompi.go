//go:build mpi && cgo && !mpich && !mpicustom

package mpi

// Open MPI (the default): its pkg-config file gives the include and library
// paths, as mpicc --showme:compile and --showme:link do.

// #cgo pkg-config: ompi-c
import "C"
