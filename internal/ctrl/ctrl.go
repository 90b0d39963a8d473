// Package ctrl carries the control messages between the processes of a
// group: when the group breaks in one process, that process tells the
// others over the transport, so their ranks fail at once with the cause
// instead of at their own timeout.
//
// A Poller keeps one receive posted per other process on the control tag
// and a goroutine that tests them; it hands each message that arrives (or
// the failure of its receive) to a callback, with its owner. It holds the
// owner weakly, so an owner dropped without Close can still be collected
// (a cleanup of the owner should then Close the Poller). Broadcast sends
// one message to every other process, once.
package ctrl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
	"weak"

	"github.com/gocoll/gocoll/backend"
)

// Bytes is the size of a control message: flags, origin rank, text.
const Bytes = 512

// header is the size of a message's fixed part: flags (1 byte), rank (4),
// text length (2).
const header = 7

// PollInterval is how often the poller tests the control receives.
const PollInterval = 2 * time.Millisecond

// Flags of a message (byte 0).
const (
	flagAbort    = 1  // the group was broken by an Abort
	flagTimeout  = 2  // the failure was a timeout
	flagInvalid  = 4  // the failure was a call's invalid argument
	flagClosed   = 8  // the failure was memory (or a device) closed
	flagMismatch = 16 // the failure was a mismatch of two ranks' calls
)

// Msg is a control message: why the group broke in the sending process.
type Msg struct {
	Rank     int    // the rank that broke the group, or -1
	Abort    bool   // the group was broken by an Abort
	Timeout  bool   // the failure was a timeout
	Invalid  bool   // the failure was a call's invalid argument
	Closed   bool   // the failure was memory (or a device) closed
	Mismatch bool   // the failure was a mismatch of two ranks' calls
	Text     string // the cause, as text (cut to Bytes-7 bytes)
}

// ErrMalformed is the error of Decode for a buffer too short for a message.
var ErrMalformed = errors.New("ctrl: malformed control message")

// Encode writes m into b (at least Bytes long: Bytes are written); the text
// is cut to what fits.
func Encode(b []byte, m Msg) {
	b = b[:Bytes]
	clear(b)
	if m.Abort {
		b[0] |= flagAbort
	}
	if m.Timeout {
		b[0] |= flagTimeout
	}
	if m.Invalid {
		b[0] |= flagInvalid
	}
	if m.Closed {
		b[0] |= flagClosed
	}
	if m.Mismatch {
		b[0] |= flagMismatch
	}
	binary.LittleEndian.PutUint32(b[1:], uint32(int32(m.Rank)))
	n := copy(b[header:], m.Text)
	binary.LittleEndian.PutUint16(b[5:], uint16(n))
}

// Decode reads a message from b. A text length beyond b is cut to b; a b
// shorter than the fixed part is ErrMalformed. Unknown flags are ignored.
func Decode(b []byte) (Msg, error) {
	if len(b) < header {
		return Msg{}, ErrMalformed
	}
	n := min(int(binary.LittleEndian.Uint16(b[5:])), len(b)-header)
	return Msg{Rank: int(int32(binary.LittleEndian.Uint32(b[1:]))), Abort: b[0]&flagAbort != 0,
		Timeout: b[0]&flagTimeout != 0, Invalid: b[0]&flagInvalid != 0, Closed: b[0]&flagClosed != 0,
		Mismatch: b[0]&flagMismatch != 0, Text: string(b[header : header+n])}, nil
}

// Handler is called by the poller, on its goroutine, for each control
// receive that completes: with the owner, the sending process, and its
// message, or the error of the receive. It must not hold the owner itself
// (pass a function that captures nothing of it).
type Handler[T any] func(owner *T, process int, m Msg, err error)

// Poller is one process's end of a group's control messages.
type Poller[T any] struct {
	tr     backend.Transport
	owned  bool // tr is the owner's own: Close closes it
	tag    int
	me     int
	recvs  []backend.Request // one per other process; nil for this one
	rbufs  [][]byte
	owner  weak.Pointer[T]
	handle Handler[T]
	stop   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	started bool
	sent    bool
	sbuf    []byte
	sends   []backend.Request
	closed  bool
}

// Post posts the control receives from the other processes of tr (all
// nproc of them but tr.Rank()) on tag; Start starts the poller. owned
// makes Close close tr. On failure the receives posted are cancelled (tr
// is not closed).
func Post[T any](tr backend.Transport, owned bool, tag, nproc int, owner *T, handle Handler[T]) (*Poller[T], error) {
	k := &Poller[T]{tr: tr, owned: owned, tag: tag, me: tr.Rank(), owner: weak.Make(owner), handle: handle,
		stop: make(chan struct{}), done: make(chan struct{})}
	k.recvs = make([]backend.Request, nproc)
	k.rbufs = make([][]byte, nproc)
	for p := range k.recvs {
		if p == k.me {
			continue
		}
		k.rbufs[p] = make([]byte, Bytes)
		r, err := k.tr.Irecv(k.rbufs[p], p, k.tag)
		if err != nil {
			k.closeRequests()
			return nil, fmt.Errorf("posting the control receive from process %d: %w", p, err)
		}
		k.recvs[p] = r
	}
	return k, nil
}

// Start starts the poller goroutine (once).
func (k *Poller[T]) Start() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.started || k.closed {
		return
	}
	k.started = true
	go k.poll()
}

// poll tests the control receives until stopped or the owner is gone.
func (k *Poller[T]) poll() {
	defer close(k.done)
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
		if k.owner.Value() == nil {
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
			o := k.owner.Value()
			if o == nil {
				return
			}
			var m Msg
			if err != nil {
				err = fmt.Errorf("control channel from process %d failed: %w", p, err)
			} else {
				m, err = Decode(k.rbufs[p])
			}
			k.handle(o, p, m, err)
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

// Broadcast sends m to the other processes, once: later calls, and calls
// after Close, do nothing. It is best effort: a process that cannot be
// told times out instead.
func (k *Poller[T]) Broadcast(m Msg) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sent || k.closed {
		return
	}
	k.sent = true
	k.sbuf = make([]byte, Bytes)
	Encode(k.sbuf, m)
	k.sends = make([]backend.Request, len(k.recvs))
	for p := range k.recvs {
		if p == k.me {
			continue
		}
		if r, err := k.tr.Isend(k.sbuf, p, k.tag); err == nil {
			k.sends[p] = r
		}
	}
}

// Close stops the poller and ends the control requests: receives are
// cancelled; sends get a moment to complete, then are cancelled (a send the
// transport keeps holds only the control buffer, Go memory it keeps alive).
// It closes the transport if owned. Later calls do nothing.
func (k *Poller[T]) Close() error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	started := k.started
	k.mu.Unlock()
	close(k.stop)
	if started {
		<-k.done
	}
	k.closeRequests()
	if k.owned {
		return k.tr.Close()
	}
	return nil
}

func (k *Poller[T]) closeRequests() {
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
