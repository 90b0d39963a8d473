package collective

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/devopen"
	"github.com/gocoll/gocoll/internal/fpwire"
	"github.com/gocoll/gocoll/internal/procjoin"
	"github.com/gocoll/gocoll/internal/reqwait"
	"github.com/gocoll/gocoll/internal/waitctx"
)

// Groups that span processes: each process opens a Group with its local
// ranks and the same Transport (for example the mpi package's); global
// ranks are numbered process-major. Exchange between ranks of different
// processes goes through the transport from the host-visible slots the
// in-process exchange uses; rendezvous (fingerprints) take one Allgather
// among the processes after the local ranks met.

// joinProcesses meets the other processes (internal/procjoin): the
// group's own communicator, and the check that every process has the same
// number of local ranks and slot size; it numbers the ranks. own: tr is the
// group's own communicator already (see newGroup), used as it is.
func (g *Group) joinProcesses(ctx context.Context, tr backend.Transport, own bool) error {
	tr, dup, err := procjoin.Join(ctx, tr, procjoin.Options{Local: g.nl, Slot: devopen.SpanSlotBytes(g.opts.ChunkBytes),
		MaxRanks: 1 << 14, Own: own, Timeout: g.cfg.CommunicationTimeout})
	var se *procjoin.ShapeError
	var te *procjoin.StepError
	switch {
	case errors.As(err, &se):
		return &ConfigError{Field: se.Field, Reason: se.Reason}
	case errors.As(err, &te) && te.Timeout:
		return &TimeoutError{Phase: te.Phase + " (" + te.Err.Error() + ")", Ctx: ctx.Err()}
	case err != nil:
		return fmt.Errorf("collective: %w", err)
	}
	g.tr, g.trOwned, g.nproc = tr, own || dup, tr.Size()
	g.n = g.nl * g.nproc
	g.base = tr.Rank() * g.nl
	g.fpBuf = make([]byte, fpwire.Size)
	g.fpAll = make([]byte, fpwire.Size*g.nproc)
	return nil
}

// Processes returns the number of processes the group spans (1 without a
// Transport, and over a Transport of one process).
func (g *Group) Processes() int {
	if g.tr == nil {
		return 1
	}
	return g.nproc
}

func encodeFP(b []byte, f fingerprint, flag, localMismatch bool) {
	r := fpwire.Record{Kind: uint8(f.kind), Op: uint8(f.op), DT: uint8(f.dt), Strategy: uint8(f.strategy), Path: uint8(f.path),
		NoF64: f.noF64, Flag: flag, LocalMismatch: localMismatch, Root: f.root, Count: f.count}
	r.Put(b)
}

func decodeFP(b []byte) (f fingerprint, flag, localMismatch bool) {
	r := fpwire.Get(b)
	return fingerprint{kind: collKind(r.Kind), op: Op(r.Op), dt: backend.DType(r.DT), strategy: Strategy(r.Strategy), path: dataPath(r.Path),
		noF64: r.NoF64, root: r.Root, count: r.Count}, r.Flag, r.LocalMismatch
}

// crossProcess completes a rendezvous among the processes: called by the
// last local rank to arrive, with the local result. It returns the group's
// result: a mismatch anywhere, and the AND of every rank's flag.
func (c *Comm) crossProcess(ctx context.Context, fp fingerprint, local *MismatchError, flag bool, phase string) (*MismatchError, bool, error) {
	g := c.g
	encodeFP(g.fpBuf, fp, flag, local != nil)
	// The wait ends with ctx, CommunicationTimeout or the group breaking
	// (an Abort in any process).
	w := &c.wctx
	w.Arm(ctx, g.cfg.CommunicationTimeout)
	err := g.tr.Allgather(w, g.fpBuf, g.fpAll)
	why := w.Disarm()
	if err != nil && errors.Is(why, waitctx.ErrBroken) {
		return nil, false, c.brokenErr()
	}
	if err != nil && errors.Is(why, waitctx.ErrTimeout) {
		err = fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	if err != nil {
		if isCtxErr(err) || errors.Is(err, backend.ErrTimeout) {
			err = &TimeoutError{Seq: c.seq, Phase: phase + " across processes (" + err.Error() + ")", Ctx: ctx.Err(), Missing: g.ranksOf(err)}
		}
		c.breakWith(err)
		return nil, false, err
	}
	all := true
	var mism *MismatchError
	for p := 0; p < g.nproc; p++ {
		f, fl, lm := decodeFP(g.fpAll[p*fpwire.Size:])
		all = all && fl
		if mism == nil && (f != fp || lm) && local == nil {
			m := g.bar.Slot()
			*m = MismatchError{Rank: g.base, Call: fp.String(), Peer: p * g.nl, PeerCall: f.String(), invalid: fp.kind == collInvalid || f.kind == collInvalid}
			if lm && f == fp {
				m.PeerCall = "mismatched calls among its own ranks"
			}
			mism = m
		}
	}
	if local != nil {
		mism = local
	}
	return mism, all, nil
}

// procOf returns the process of global rank r.
func (g *Group) procOf(r int) int { return r / g.nl }

// tag is the transport tag of the link from global rank a to b.
func (g *Group) tag(a, b int) int { return (a%g.nl)*g.nl + b%g.nl }

// waitReq waits for a transport request (internal/reqwait) under the comm's
// timeout, ctx and the group breaking; a request that does not complete is
// cancelled, and its failure or timeout breaks the group.
//
// held is the Go buffer the request uses: when the request can be neither
// completed nor cancelled, the transport keeps it and *held is set to nil,
// so the link allocates a new one.
func (c *Comm) waitReq(ctx context.Context, req backend.Request, peer int, phase string, held *[]byte) error {
	g := c.g
	end, err := reqwait.Wait(ctx, req, g.cfg.CommunicationTimeout, g.brokenCh, held)
	var te *TimeoutError
	switch end {
	case reqwait.Done:
		return nil
	case reqwait.Failed:
		err = fmt.Errorf("%s with rank %d (process %d): %w", phase, peer, g.procOf(peer), err)
		c.breakWith(err)
		return err
	case reqwait.Broken:
		return c.brokenErr()
	case reqwait.Cancelled:
		te = &TimeoutError{Seq: c.seq, Phase: phase, Missing: []int{peer}, Ctx: ctx.Err()}
	default: // TimedOut, or Hung with the transport's error
		te = &TimeoutError{Seq: c.seq, Phase: reqwait.Phase(phase, err), Missing: []int{peer}}
	}
	c.breakWith(te)
	return te
}
