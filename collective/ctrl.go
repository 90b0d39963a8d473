package collective

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
	"weak"

	"github.com/gocoll/gocoll/backend"
)

// Control messages between the processes of a group. When a group breaks
// in one process (Abort, a timeout, a device failure), that process tells
// the others over the transport, so their ranks fail at once with the
// cause instead of at their own timeout. Each process keeps one receive
// posted per other process on the control tag; a poller goroutine tests
// them. The poller holds the group weakly, so a Group dropped without
// Close can still be collected (its cleanup stops the poller).

// ctrlBytes is the size of a control message: kind, origin rank, cause.
const ctrlBytes = 512

// ctrlPoll is how often the poller tests the control receives.
const ctrlPoll = 2 * time.Millisecond

// Control message flags (byte 0).
const (
	ctrlAbort   = 1 // Group.Abort
	ctrlTimeout = 2 // the failure was a timeout
	ctrlInvalid = 4 // the failure was a call's invalid argument
	ctrlClosed  = 8 // the failure was memory (or a device) closed
)

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
// and a call refused there ErrInvalidArgument (and ErrClosed, for memory
// it was handed closed), as they match in the process where the group
// broke.
func (e *RemoteError) Is(t error) bool {
	return e.Aborted && t == ErrAborted || e.Timeout && t == ErrTimeout ||
		e.invalid && t == ErrInvalidArgument || e.closed && t == ErrClosed
}

type ctrl struct {
	tr    backend.Transport
	owned bool // tr is the group's own duplicate: close it with the group
	tag   int
	me    int
	recvs []backend.Request // one per other process; nil for this one
	rbufs [][]byte
	group weak.Pointer[Group]
	stop  chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	sent   bool
	sbuf   []byte
	sends  []backend.Request
	closed bool
}

// startCtrl posts the control receives and starts the poller.
func (g *Group) startCtrl(owned bool) error {
	k := &ctrl{tr: g.tr, owned: owned, tag: 2 * g.nl * g.nl, me: g.tr.Rank(), group: weak.Make(g),
		stop: make(chan struct{}), done: make(chan struct{})}
	k.recvs = make([]backend.Request, g.nproc)
	k.rbufs = make([][]byte, g.nproc)
	for p := range k.recvs {
		if p == k.me {
			continue
		}
		k.rbufs[p] = make([]byte, ctrlBytes)
		r, err := k.tr.Irecv(k.rbufs[p], p, k.tag)
		if err != nil {
			k.closeRequests()
			return fmt.Errorf("collective: posting the control receive from process %d: %w", p, err)
		}
		k.recvs[p] = r
	}
	g.ctrl = k
	go k.poll()
	return nil
}

// poll tests the control receives until stopped or the group is gone.
func (k *ctrl) poll() {
	defer close(k.done)
	t := time.NewTicker(ctrlPoll)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
		if k.group.Value() == nil {
			return // dropped without Close: its cleanup ends the requests
		}
		for p, r := range k.recvs {
			if r == nil {
				continue
			}
			ok, err := r.Test()
			if !ok && err == nil {
				continue
			}
			k.recvs[p] = nil
			g := k.group.Value()
			if g == nil {
				return
			}
			var cause error
			if err != nil {
				cause = fmt.Errorf("control channel from process %d failed: %w", p, err)
			} else {
				cause = decodeCtrl(p, k.rbufs[p])
			}
			g.breakGroup(&BrokenError{Rank: -1, Op: fmt.Sprintf("process %d", p), Cause: cause, remote: true})
		}
		k.mu.Lock()
		for i, r := range k.sends {
			if r != nil {
				if ok, _ := r.Test(); ok {
					k.sends[i] = nil
				}
			}
		}
		k.mu.Unlock()
	}
}

func decodeCtrl(p int, b []byte) error {
	n := min(int(binary.LittleEndian.Uint16(b[5:])), len(b)-7)
	return &RemoteError{Process: p, Rank: int(int32(binary.LittleEndian.Uint32(b[1:]))), Aborted: b[0]&ctrlAbort != 0,
		Timeout: b[0]&ctrlTimeout != 0, invalid: b[0]&ctrlInvalid != 0, closed: b[0]&ctrlClosed != 0, Msg: string(b[7 : 7+n])}
}

// broadcast tells the other processes that the group broke (once).
func (k *ctrl) broadcast(b *BrokenError) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sent || k.closed {
		return
	}
	k.sent = true
	k.sbuf = make([]byte, ctrlBytes)
	aborted := b.Rank < 0 && b.Op == "Abort"
	msg := b.Error()
	if aborted {
		k.sbuf[0] |= ctrlAbort
		msg = b.Cause.Error()
	}
	if errors.Is(b.Cause, ErrTimeout) {
		k.sbuf[0] |= ctrlTimeout
	}
	if errors.Is(b.Cause, ErrInvalidArgument) {
		k.sbuf[0] |= ctrlInvalid
	}
	if errors.Is(b.Cause, ErrClosed) {
		k.sbuf[0] |= ctrlClosed
	}
	binary.LittleEndian.PutUint32(k.sbuf[1:], uint32(int32(b.Rank)))
	n := copy(k.sbuf[7:], msg)
	binary.LittleEndian.PutUint16(k.sbuf[5:], uint16(n))
	k.sends = make([]backend.Request, len(k.recvs))
	for p := range k.recvs {
		if p == k.me {
			continue
		}
		// Best effort: a process that cannot be told times out instead.
		if r, err := k.tr.Isend(k.sbuf, p, k.tag); err == nil {
			k.sends[p] = r
		}
	}
}

// close stops the poller and ends the control requests: receives are
// cancelled; sends get a moment to complete, then are cancelled (a send the
// transport keeps holds only the control buffer, Go memory it keeps alive).
func (k *ctrl) close() error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	k.mu.Unlock()
	close(k.stop)
	<-k.done
	k.closeRequests()
	if k.owned {
		return k.tr.Close()
	}
	return nil
}

func (k *ctrl) closeRequests() {
	for p, r := range k.recvs {
		if r != nil {
			r.Cancel()
			k.recvs[p] = nil
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	deadline := time.Now().Add(100 * time.Millisecond)
	for i, r := range k.sends {
		for r != nil {
			ok, err := r.Test()
			if ok || err != nil {
				r = nil
				break
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		if r != nil {
			r.Cancel() // on failure the transport keeps the request and its buffer
		}
		k.sends[i] = nil
	}
}
