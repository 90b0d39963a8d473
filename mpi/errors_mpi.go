//go:build mpi && cgo

package mpi

import (
	"fmt"

	"github.com/gocoll/gocoll/backend"
)

// classSentinel is the sentinel an MPI error of class matches
// (Error.Is): backend.ErrInvalidArgument, backend.ErrOutOfMemory or
// ErrMessageSize; nil for the other classes.
func classSentinel(class int) error {
	switch class {
	case classBuffer, classCount, classType, classTag, classComm, classRank, classRoot, classOp, classArg:
		return backend.ErrInvalidArgument
	case classNoMem:
		return backend.ErrOutOfMemory
	case classTruncate:
		return ErrMessageSize
	}
	return nil
}

// mpiError describes code, which call returned while doing what, with
// MPI_Error_string and MPI_Error_class.
func (w *World) mpiError(call string, code int, what string, ranks ...int) *Error {
	e := &Error{Call: call, Code: code, Ranks: ranks}
	var msg string
	// MPI_Error_string and MPI_Error_class work after the World's
	// communicators are freed, as long as MPI is not finalized.
	w.cold(false, func() { msg, e.Class = cErrorString(code) })
	if msg == "" {
		msg = "MPI error"
	}
	if what != "" {
		msg = what + ": " + msg
	}
	e.Msg = msg
	return e
}

func closedError(call string) *Error {
	return &Error{Call: call, Msg: "the World is closed", Err: backend.ErrClosed}
}

// lostError is what a call on a World declared lost returns (World.Drain).
func lostError(call string) *Error {
	return &Error{Call: call, Err: backend.ErrTransportLost, Msg: "the World was declared lost: a native collective whose " +
		"context ended was still in flight past the drain limit (Drain reported false); MPI may still write the memory " +
		"it was given, which stays pinned: do not reuse it"}
}

func argError(call, format string, args ...any) *Error {
	return &Error{Call: call, Msg: fmt.Sprintf(format, args...), Err: backend.ErrInvalidArgument}
}
