package collective

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gocoll/gocoll/backend"
)

// Sentinel errors. Every error a collective returns satisfies errors.Is with
// one of these (and, for backend failures, with the backend sentinel too).
var (
	// ErrInvalidConfig: a Config or Options field is out of range (*ConfigError).
	ErrInvalidConfig = errors.New("collective: invalid config")
	// ErrInvalidArgument: a bad call (nil Comm, mismatched lengths, unknown op, bad root).
	ErrInvalidArgument = errors.New("collective: invalid argument")
	// ErrMismatch: ranks called different collectives (*MismatchError).
	ErrMismatch = errors.New("collective: ranks disagree")
	// ErrTimeout: peers did not arrive in time (*TimeoutError).
	ErrTimeout = errors.New("collective: timeout")
	// ErrGroupBroken: an earlier failure broke the group; the error wraps the cause.
	ErrGroupBroken = errors.New("collective: group broken")
	// ErrClosed: the group was closed.
	ErrClosed = errors.New("collective: group closed")
	// ErrConcurrentUse: two goroutines used one Comm at once.
	ErrConcurrentUse = errors.New("collective: concurrent use of one Comm")
	// ErrBackendUnavailable: the requested backend cannot run here.
	ErrBackendUnavailable = errors.New("collective: backend unavailable")
	// ErrUnsupported: the backend or build lacks what the call needs.
	ErrUnsupported = errors.New("collective: unsupported")
)

// MismatchError says that two ranks made different calls at the same
// sequence number. Nothing was moved.
type MismatchError struct {
	Seq      uint64
	Rank     int
	Call     string
	Peer     int
	PeerCall string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("collective: call #%d: rank %d called %s but rank %d called %s (nothing was moved)",
		e.Seq, e.Rank, e.Call, e.Peer, e.PeerCall)
}

// Is makes errors.Is(err, ErrMismatch) true.
func (e *MismatchError) Is(t error) bool { return t == ErrMismatch }

// TimeoutError says which ranks did not arrive at a collective in time.
type TimeoutError struct {
	Seq     uint64 // the call's sequence number in the group
	Phase   string // where the wait was
	Missing []int  // ranks that had not arrived
	LastSeq []int64
	// Ctx is the context's error when the caller's context ended first
	// (context.DeadlineExceeded or context.Canceled), else nil.
	Ctx error
}

func (e *TimeoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "collective: call #%d: timed out in %s waiting for rank(s) %v", e.Seq, e.Phase, e.Missing)
	if len(e.LastSeq) == len(e.Missing) && len(e.Missing) > 0 {
		b.WriteString(" (their last call numbers:")
		for _, s := range e.LastSeq {
			if s < 0 {
				b.WriteString(" none")
			} else {
				fmt.Fprintf(&b, " #%d", s)
			}
		}
		b.WriteString(")")
	}
	if e.Ctx != nil {
		fmt.Fprintf(&b, ": %v", e.Ctx)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrTimeout) true, and errors.Is(err,
// context.DeadlineExceeded) when the caller's context expired.
func (e *TimeoutError) Is(t error) bool {
	return t == ErrTimeout || (e.Ctx != nil && t == e.Ctx)
}

// Unwrap returns the context error, if any.
func (e *TimeoutError) Unwrap() error { return e.Ctx }

// BrokenError is returned by every call on a group that an earlier failure
// broke. It wraps the original cause.
type BrokenError struct{ Cause error }

func (e *BrokenError) Error() string {
	return "collective: group broken by an earlier failure: " + e.Cause.Error()
}

// Is makes errors.Is(err, ErrGroupBroken) true.
func (e *BrokenError) Is(t error) bool { return t == ErrGroupBroken }

// Unwrap returns the original cause.
func (e *BrokenError) Unwrap() error { return e.Cause }

// DataError is a failure after data started moving: an in-place buffer is
// then undefined (an out-of-place send buffer is never written).
type DataError struct {
	Rank     int
	InPlace  bool
	Cause    error
	Touched  bool
	Strategy Strategy
}

func (e *DataError) Error() string {
	s := fmt.Sprintf("collective: rank %d: %v", e.Rank, e.Cause)
	if e.InPlace && e.Touched {
		s += " (the in-place buffer is undefined)"
	} else if e.Touched {
		s += " (the receive buffer is undefined; the send buffer is untouched)"
	}
	return s
}

// Unwrap returns the cause (a backend error).
func (e *DataError) Unwrap() error { return e.Cause }

func invalidArg(format string, a ...any) error {
	return fmt.Errorf("collective: "+format+": %w", append(a, ErrInvalidArgument)...)
}

// isCtxErr reports whether err is a context error.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

var _ = backend.ErrTimeout
