// Package procjoin is the meeting of a group's processes when it opens:
// the group's own communicator (a duplicate of the transport, so groups over
// one transport never see each other's messages and may run at the same
// time), and the processes' agreement on the group's shape: every process
// has the same number of local ranks and exchanges in slots of the same
// size (messages between processes travel in slots).
package procjoin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// Options are one process's part of the group's shape.
type Options struct {
	Local    int           // the ranks in this process
	Slot     int           // the exchange slot size in bytes
	MaxRanks int           // the most ranks the group may have, every process's
	Own      bool          // the transport is the group's own already: it is used as it is
	Timeout  time.Duration // the bound of each collective call on the transport
}

// ShapeError is a group's shape that the processes cannot run: a field of
// the group's options and why.
type ShapeError struct {
	Field  string // "Transport", "Ranks" or "ChunkBytes"
	Reason string
}

func (e *ShapeError) Error() string { return e.Field + ": " + e.Reason }

// StepError is the failure of a collective call on the transport.
type StepError struct {
	Phase   string // what the call was: "duplicating the transport", "joining the processes"
	What    string // the same, naming the transport and the processes
	Timeout bool   // it timed out or its context ended (a process did not arrive)
	Err     error
}

func (e *StepError) Error() string { return e.What + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// Join is this process's part of the group's opening over tr: it returns
// the communicator the group works on, tr's duplicate (dup true: the group
// closes it) when tr is a backend.Duplicator of several processes and not
// the group's own already, else tr. A failure is a *ShapeError or a
// *StepError; a duplicate made is then closed.
func Join(ctx context.Context, tr backend.Transport, o Options) (t backend.Transport, dup bool, err error) {
	nproc := tr.Size()
	if d, ok := tr.(backend.Duplicator); ok && nproc > 1 && !o.Own {
		cctx, cancel := context.WithTimeout(ctx, o.Timeout)
		t, err := d.Dup(cctx)
		cancel()
		if err != nil {
			return nil, false, step("duplicating the transport", "duplicating "+tr.Name(), err)
		}
		if err := agree(ctx, t, nproc, o); err != nil {
			t.Close()
			return nil, false, err
		}
		return t, true, nil
	}
	return tr, false, agree(ctx, tr, nproc, o)
}

// agree checks the shape and that every process has the same.
func agree(ctx context.Context, tr backend.Transport, nproc int, o Options) error {
	if nproc < 1 || tr.Rank() < 0 || tr.Rank() >= nproc {
		return &ShapeError{"Transport", fmt.Sprintf("rank %d of %s", tr.Rank(), processes(nproc))}
	}
	if o.Local*nproc > o.MaxRanks {
		return &ShapeError{"Ranks", fmt.Sprintf("%d ranks in %s exceed the %d supported", o.Local*nproc, processes(nproc), o.MaxRanks)}
	}
	mine := make([]byte, 16)
	binary.LittleEndian.PutUint64(mine, uint64(o.Local))
	binary.LittleEndian.PutUint64(mine[8:], uint64(o.Slot))
	all := make([]byte, 16*nproc)
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := tr.Allgather(cctx, mine, all); err != nil {
		return step("joining the processes", fmt.Sprintf("joining %s over %s", processes(nproc), tr.Name()), err)
	}
	for p := 0; p < nproc; p++ {
		if n := int(binary.LittleEndian.Uint64(all[16*p:])); n != o.Local {
			return &ShapeError{"Ranks", fmt.Sprintf("process %d has %d local ranks, process %d has %d: every process needs the same number", p, n, tr.Rank(), o.Local)}
		}
		if s := int(binary.LittleEndian.Uint64(all[16*p+8:])); s != o.Slot {
			return &ShapeError{"ChunkBytes", fmt.Sprintf("process %d uses %d-byte slots, process %d uses %d: every process needs the same ChunkBytes", p, s, tr.Rank(), o.Slot)}
		}
	}
	return nil
}

// step is the *StepError of a collective call on the transport that failed
// with err.
func step(phase, what string, err error) *StepError {
	timeout := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, backend.ErrTimeout)
	return &StepError{Phase: phase, What: what, Timeout: timeout, Err: err}
}

// processes writes a count of processes.
func processes(n int) string {
	if n == 1 {
		return "1 process"
	}
	return fmt.Sprintf("%d processes", n)
}
