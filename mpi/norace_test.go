//go:build mpi && cgo && !race

package mpi

const raceEnabled = false
