package collective

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/hang"
	"github.com/gocoll/gocoll/internal/relay"
)

// Sentinel errors. Every error a collective returns is an *Error (rank,
// operation, sequence number) that satisfies errors.Is with one of these,
// with one exception: on the rank whose own context ended, a cancellation
// matches context.Canceled and none of these (a deadline matches both
// context.DeadlineExceeded and ErrTimeout); the other ranks get
// ErrGroupBroken. Work.Wait returns its own ctx's error as it is when that
// ctx ends before the operation. The sentinels the backends share are the
// backend package's own values, so errors.Is(err, collective.ErrClosed)
// and errors.Is(err, backend.ErrClosed) are the same test.
var (
	// ErrInvalidConfig: a Config or Options field is out of range (*ConfigError).
	ErrInvalidConfig = errors.New("invalid config")
	// ErrInvalidArgument: a bad call (nil Comm, mismatched lengths, unknown op, bad root).
	ErrInvalidArgument = backend.ErrInvalidArgument
	// ErrMismatch: ranks called different collectives (*MismatchError).
	ErrMismatch = errors.New("ranks disagree")
	// ErrTimeout: peers or the device did not finish in time (*TimeoutError).
	ErrTimeout = backend.ErrTimeout
	// ErrGroupBroken: a failure (or Abort) broke the group (*BrokenError).
	ErrGroupBroken = errors.New("group broken")
	// ErrClosed: the group (or a buffer, tensor or device) was closed.
	ErrClosed = backend.ErrClosed
	// ErrConcurrentUse: two goroutines used one Comm at once.
	ErrConcurrentUse = errors.New("concurrent use of one Comm")
	// ErrBackendUnavailable: the requested backend cannot run here.
	ErrBackendUnavailable = backend.ErrUnavailable
	// ErrUnsupported: the backend or build lacks what the call needs.
	ErrUnsupported = backend.ErrUnsupported
	// ErrDeviceLost: a device failed or did not finish its work within the
	// drain limit (Options.DrainLimit); its memory is leaked, never freed
	// while it might still be used.
	ErrDeviceLost = backend.ErrDeviceLost
	// ErrTransportLost: a native collective between processes (strategy
	// Native, over MPI) whose wait ended still held the call's memory past
	// the drain limit (Options.DrainLimit): the transport is declared lost,
	// the memory stays pinned and MPI may still write it, so do not reuse it.
	ErrTransportLost = backend.ErrTransportLost
	// ErrOutOfMemory: a device (or host) allocation failed.
	ErrOutOfMemory = backend.ErrOutOfMemory
	// ErrValidation: the API validation layer (Options.Validation) reported
	// a message about the call's device work.
	ErrValidation = backend.ErrValidation
	// ErrAborted is the cause Abort records when it is given nil.
	ErrAborted = errors.New("aborted")
	// ErrRankGone: a rank waited for is gone and will never arrive: its
	// function in Group.Run returned or panicked, or its Comm was closed
	// (*RankGoneError). The rank that noticed breaks the group with it.
	ErrRankGone = errors.New("rank gone")
	// ErrDeadlock: ranks of one process wait for each other in blocking
	// point-to-point calls, a cycle no rank can leave (*DeadlockError).
	ErrDeadlock = errors.New("deadlock")
)

// Error is what every call returns on failure, synchronous or
// asynchronous (Work.Wait), point-to-point or batched: which rank, which
// operation and which call of the rank failed, and why. Seq numbers the
// rank's collectives from 1; point-to-point calls (Send, Recv, SendRecv,
// SendAsync, RecvAsync, and each send and receive of a Batch) are numbered
// in their own sequence, also from 1, and have P2P set. Seq 0: the call
// failed before it was numbered (a bad argument, a closed group, the comm
// in use). Err is one of the typed errors below or a backend error.
type Error struct {
	Rank int
	Op   string
	Seq  uint64
	P2P  bool // Seq is the call's number among the rank's point-to-point calls
	Err  error
}

func (e *Error) Error() string {
	return fmt.Sprintf("collective: rank %d: %s (%s #%d): %v", e.Rank, e.Op, callKind(e.P2P), e.Seq, e.Err)
}

// callKind names the sequence a call number belongs to.
func callKind(p2p bool) string {
	if p2p {
		return "point-to-point call"
	}
	return "call"
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// plural writes a count with its noun: "1 process", "2 processes".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// MismatchError says that two ranks made different calls at the same
// sequence number (Seq; 0 for point-to-point calls, which pair by
// direction, not by number). Nothing was moved.
type MismatchError struct {
	Seq      uint64
	Rank     int
	Call     string
	Peer     int
	PeerCall string
	invalid  bool // Rank's own arguments were invalid
}

func (e *MismatchError) Error() string {
	s := fmt.Sprintf("rank %d called %s but rank %d called %s (nothing was moved)", e.Rank, e.Call, e.Peer, e.PeerCall)
	if e.Seq == 0 {
		// Point-to-point calls: each rank's *Error names its own number.
		return s
	}
	return fmt.Sprintf("call #%d: %s", e.Seq, s)
}

// Is makes errors.Is(err, ErrMismatch) true, and errors.Is(err,
// ErrInvalidArgument) too where the rank named first refused its own
// arguments (every rank of a collective then matches ErrInvalidArgument).
func (e *MismatchError) Is(t error) bool {
	return t == ErrMismatch || (t == ErrInvalidArgument && e.invalid)
}

// TimeoutError says which ranks did not arrive at a collective in time, or
// that the caller's context ended while it waited.
type TimeoutError struct {
	Seq     uint64 // the call's sequence number in the group
	Phase   string // where the wait was
	Missing []int  // ranks that had not arrived (empty for device work)
	LastSeq []int64
	// Ctx is the context's error when the caller's context ended first
	// (context.DeadlineExceeded or context.Canceled), else nil.
	Ctx error
}

func (e *TimeoutError) Error() string { return hang.Ended(e.Phase, e.Missing, e.LastSeq, e.Ctx) }

// Is makes errors.Is(err, ErrTimeout) true unless the caller cancelled (a
// cancellation is not a timeout), and errors.Is(err, ctx error) true when
// the caller's context ended.
func (e *TimeoutError) Is(t error) bool {
	return (t == ErrTimeout && e.Ctx != context.Canceled) || (e.Ctx != nil && t == e.Ctx)
}

// Unwrap returns the context error, if any.
func (e *TimeoutError) Unwrap() error { return e.Ctx }

// BrokenError is returned by every call on a group that a failure (or
// Abort, or Close) broke, except the call that failed first. It names the
// first failure: the rank, operation and call number where it happened
// (Rank -1: Abort or Close; Op "Run": the rank's function in Group.Run
// returned an error or panicked; P2P: a point-to-point call's number, as
// in Error) and its cause. errors.Is(err, cause) holds, but
// a context error of the rank that failed first is not passed on: only that
// rank's own error matches context.Canceled or context.DeadlineExceeded.
type BrokenError struct {
	Rank  int
	Op    string
	Seq   uint64
	P2P   bool
	Cause error
	// hideCtx keeps the cause's context errors from unwrapping.
	hideCtx bool
	// remote: the group broke in another process (not told again).
	remote bool
}

func (e *BrokenError) Error() string {
	if e.Op == opRun {
		return fmt.Sprintf("group broken by rank %d's function in Group.Run: %v", e.Rank, e.Cause)
	}
	if e.Rank < 0 {
		return fmt.Sprintf("group broken by %s: %v", e.Op, e.Cause)
	}
	return fmt.Sprintf("group broken by rank %d's %s (%s #%d): %v", e.Rank, e.Op, callKind(e.P2P), e.Seq, e.Cause)
}

// Is makes errors.Is(err, ErrGroupBroken) true.
func (e *BrokenError) Is(t error) bool { return t == ErrGroupBroken }

// Unwrap returns the cause; relayed from another rank (internal/relay),
// its context errors are hidden, and its *TimeoutError, which describes
// that rank's wait (its Missing ranks are from that rank's view), is
// reached only through Cause.
func (e *BrokenError) Unwrap() error {
	if e.hideCtx {
		return relay.Cause[*TimeoutError]{Err: e.Cause}
	}
	return e.Cause
}

// RankGoneError says that the rank waited for is gone: it will never
// reach the call, or send or receive what this rank waits for.
type RankGoneError struct {
	Rank    int    // the rank that is gone
	Reason  string // why: GoneReturned, GoneFailed, GonePanicked or GoneClosed
	LastSeq uint64 // its last collective call number (0: none)
	LastP2P uint64 // its last point-to-point call number (0: none)
	Phase   string // where this rank waited for it
}

func (e *RankGoneError) Error() string {
	return hang.Gone(e.Rank, e.Reason, e.Reason == GoneClosed, e.LastSeq, e.LastP2P, e.Phase)
}

// Is makes errors.Is(err, ErrRankGone) true.
func (e *RankGoneError) Is(t error) bool { return t == ErrRankGone }

// DeadlockError says that ranks of this process are blocked in
// point-to-point calls that wait for each other: Ranks[i] waits in
// Calls[i] for Ranks[i+1], the last for the first. None of them could
// return before the timeout.
type DeadlockError struct {
	Ranks []int
	Calls []string
	hint  string
}

func (e *DeadlockError) Error() string {
	var b strings.Builder
	b.WriteString("deadlock: ")
	for i, r := range e.Ranks {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "rank %d waits in %s", r, e.Calls[i])
	}
	if e.hint != "" {
		fmt.Fprintf(&b, ": %s", e.hint)
	}
	b.WriteString(" (use SendRecv, SendAsync and RecvAsync, or a Batch)")
	return b.String()
}

// Is makes errors.Is(err, ErrDeadlock) true.
func (e *DeadlockError) Is(t error) bool { return t == ErrDeadlock }

// PanicError is what Group.Run returns for a rank whose function panicked
// (find it with errors.As): the rank, the value passed to panic and the
// stack of the rank's goroutine where it panicked. It unwraps to the value
// when that is an error.
type PanicError struct {
	Rank  int
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("collective: rank %d: panic: %v", e.Rank, e.Value)
}

// Unwrap returns the panic value if it is an error, else nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// DataError is a failure after data started moving: an in-place buffer is
// then undefined (an out-of-place send buffer is never written). A
// SendRecv whose receive delivered its data before its send failed returns
// one too (Touched; Strategy Auto: point-to-point has none).
type DataError struct {
	Rank     int
	InPlace  bool
	Cause    error
	Touched  bool
	Strategy Strategy
}

func (e *DataError) Error() string {
	s := e.Cause.Error() // a point-to-point call's has no strategy (Auto)
	if e.Strategy != Auto {
		s = fmt.Sprintf("%s: %v", e.Strategy, e.Cause)
	}
	if e.InPlace && e.Touched {
		s += " (the in-place buffer is undefined)"
	} else if e.Touched {
		s += " (the receive buffer is undefined)" // an out-of-place send is never written
	}
	return s
}

// Unwrap returns the cause (a backend error).
func (e *DataError) Unwrap() error { return e.Cause }

func invalidArg(format string, a ...any) error {
	return fmt.Errorf(format+": %w", append(a, ErrInvalidArgument)...)
}

// isCtxErr reports whether err is a context error.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
