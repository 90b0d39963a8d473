package mpi

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gocoll/gocoll/backend"
)

// Errors of this package that backend has no sentinel for.
var (
	// ErrMPI matches every error an MPI call returned (Error.Code != 0).
	ErrMPI = errors.New("MPI call failed")
	// ErrMessageSize matches a receive whose message was longer
	// (MPI_ERR_TRUNCATE) or shorter than the receive buffer.
	ErrMessageSize = errors.New("message size differs from the receive buffer")
	// ErrInFlight matches a request that Cancel could not stop: MPI still
	// uses its buffer, and the World completes it in the background.
	ErrInFlight = errors.New("request still in flight")
	// ErrHung matches a wait that ended because a process it waited for
	// stopped responding: no heartbeat came from it for longer than its
	// interval plus half a second (the heartbeat is on where
	// GOCOLL_MPI_HEARTBEAT sets an interval; docs/MPI.md). It also matches
	// backend.ErrTimeout, and the *Error names the process
	// (MissingProcesses).
	ErrHung error = errHung{}
)

type errHung struct{}

func (errHung) Error() string { return "process stopped responding (no heartbeat)" }

// Is makes ErrHung match backend.ErrTimeout.
func (errHung) Is(target error) bool { return target == backend.ErrTimeout }

// Error is a failed or abandoned MPI operation.
type Error struct {
	// Call is the MPI function concerned, such as "MPI_Isend".
	Call string
	// Code is the error code MPI returned, 0 when MPI itself did not fail (a
	// deadline passed, the World was closed, an argument was refused here).
	Code int
	// Class is MPI_Error_class(Code), 0 when Code is 0.
	Class int
	// Msg is MPI_Error_string(Code), or what went wrong.
	Msg string
	// Ranks are the processes concerned where they are known: the peer of a
	// point-to-point request, or the processes not seen to arrive at a
	// collective that timed out.
	Ranks []int
	// Err is the cause when MPI did not report one: the context's error,
	// backend.ErrClosed, backend.ErrInvalidArgument, ErrMessageSize,
	// ErrInFlight. Nil for MPI's own errors.
	Err error

	// ended: a collective whose context ended first (Ranks are the
	// processes not seen to arrive), whatever error the context gave.
	ended bool
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("mpi: ")
	b.WriteString(e.Call)
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	if e.Code != 0 {
		fmt.Fprintf(&b, " (MPI error %d, class %d)", e.Code, e.Class)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// MissingProcesses returns the processes not seen to arrive at a collective
// that timed out or whose context ended, whatever error the context gave
// (backend.MissingProcesses), nil for other errors.
func (e *Error) MissingProcesses() []int {
	if e.Code != 0 || !(e.ended || errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, backend.ErrTimeout)) {
		return nil
	}
	return e.Ranks
}

// Unwrap returns the cause, so errors.Is(err, context.DeadlineExceeded) and
// the sentinels in Err match.
func (e *Error) Unwrap() error { return e.Err }

// Is maps the error onto backend's sentinels and this package's: an MPI error
// is ErrMPI, and by class backend.ErrInvalidArgument, backend.ErrOutOfMemory
// or ErrMessageSize; a passed deadline is backend.ErrTimeout.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrMPI:
		return e.Code != 0
	case backend.ErrTimeout:
		return errors.Is(e.Err, context.DeadlineExceeded)
	case backend.ErrInvalidArgument, backend.ErrOutOfMemory, ErrMessageSize:
		return e.Code != 0 && classSentinel(e.Class) == target
	}
	return false
}
