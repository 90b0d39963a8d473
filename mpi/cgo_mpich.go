//go:build mpi && cgo && mpich && !mpicustom

package mpi

// MPICH (-tags mpi,mpich): Debian's libmpich-dev installs mpich.pc.

// #cgo pkg-config: mpich
import "C"
