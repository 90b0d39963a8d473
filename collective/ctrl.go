package collective

import (
	"errors"
	"fmt"

	ictrl "github.com/gocoll/gocoll/internal/ctrl"
)

// Control messages between the processes of a group. When a group breaks
// in one process (Abort, a timeout, a device failure), that process tells
// the others over the transport, so their ranks fail at once with the
// cause instead of at their own timeout. internal/ctrl does the work (the
// message format, the posted receives and their poller, the broadcast);
// the poller holds the group weakly, so a Group dropped without Close can
// still be collected (its cleanup closes the poller).

// RemoteError is the cause a rank sees when the group broke in another
// process: that process's ranks report the failure itself.
type RemoteError struct {
	Process int    // the process where the group broke
	Rank    int    // the rank that broke it, or -1 (Abort)
	Aborted bool   // the group was broken by Group.Abort
	Timeout bool   // the failure was a timeout (a rank or process did not arrive)
	Msg     string // the cause, as text
	invalid bool   // the cause matched ErrInvalidArgument
	closed  bool   // the cause matched ErrClosed
	// mismatch: the cause matched ErrMismatch (a *MismatchError there:
	// a point-to-point message whose receiver expected another length or
	// type breaks the group, and the sender learns it so).
	mismatch bool
}

func (e *RemoteError) Error() string {
	what := "failure"
	if e.Aborted {
		what = "Abort"
	}
	if e.Rank >= 0 {
		return fmt.Sprintf("process %d (rank %d): %s: %s", e.Process, e.Rank, what, e.Msg)
	}
	return fmt.Sprintf("process %d: %s: %s", e.Process, what, e.Msg)
}

// Is makes a remote Abort match ErrAborted, a remote timeout ErrTimeout,
// a call refused there ErrInvalidArgument (and ErrClosed, for memory it was
// handed closed), and a mismatch there ErrMismatch, as they match in the
// process where the group broke.
func (e *RemoteError) Is(t error) bool {
	return e.Aborted && t == ErrAborted || e.Timeout && t == ErrTimeout ||
		e.invalid && t == ErrInvalidArgument || e.closed && t == ErrClosed || e.mismatch && t == ErrMismatch
}

// ctrl is a group's end of the control messages (internal/ctrl is
// imported as ictrl).
type ctrl struct {
	p *ictrl.Poller[Group]
}

// startCtrl posts the control receives and starts the poller.
func (g *Group) startCtrl(owned bool) error {
	p, err := ictrl.Post(g.tr, owned, 2*g.nl*g.nl, g.nproc, g, ctrlReceived)
	if err != nil {
		return fmt.Errorf("collective: %w", err)
	}
	g.ctrl = &ctrl{p: p}
	p.Start()
	return nil
}

// ctrlReceived breaks the group with the cause process p sent (or the
// failure of its control receive). It is the poller's callback: it must
// capture nothing, so the poller holds the group only weakly.
func ctrlReceived(g *Group, p int, m ictrl.Msg, err error) {
	cause := err
	if err == nil {
		cause = &RemoteError{Process: p, Rank: m.Rank, Aborted: m.Abort, Timeout: m.Timeout,
			invalid: m.Invalid, closed: m.Closed, mismatch: m.Mismatch, Msg: m.Text}
	}
	g.breakGroup(&BrokenError{Rank: -1, Op: fmt.Sprintf("process %d", p), Cause: cause, remote: true})
}

// broadcast tells the other processes that the group broke (once).
func (k *ctrl) broadcast(b *BrokenError) {
	m := ictrl.Msg{Rank: b.Rank, Abort: b.Rank < 0 && b.Op == "Abort", Timeout: errors.Is(b.Cause, ErrTimeout),
		Invalid: errors.Is(b.Cause, ErrInvalidArgument), Closed: errors.Is(b.Cause, ErrClosed),
		Mismatch: errors.Is(b.Cause, ErrMismatch)}
	if m.Abort {
		m.Text = b.Cause.Error()
	} else {
		m.Text = b.Error()
	}
	k.p.Broadcast(m)
}

// close stops the poller and ends the control requests (and closes the
// group's own transport duplicate).
func (k *ctrl) close() error { return k.p.Close() }
