package collective

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// The asynchronous paths of TestConformance's calls (pAsync, pAsyncPair,
// pTensorAsync, pTensorAsyncPair) and the ways of waiting for their Works
// (waitMode).

// callAsync runs collective c (not send/recv shifts) on an asynchronous
// path with rank cm's buffers b (the tensor paths: their tensors, made by
// callTensors): pAsync and pTensorAsync start its asynchronous form and
// wait; pAsyncPair and pTensorAsyncPair start it on b.async, then run the
// same collective on b, synchronously (Wait, Test) or asynchronously
// (WaitAll, WaitAny), before waiting. The enqueue ctx bounds the
// operations; the waits are unbounded (runConfCall's limit catches a
// hang).
func callAsync[T Elem](ctx context.Context, cm *Comm, c confCall, b *confBufs[T]) error {
	forms := confForms[T]
	if c.Path.tensor() {
		forms = confTensorForms[T]
	}
	run, start := forms(cm, c, b)
	if !c.Path.pair() {
		return waitWorks(c.Wait, true, start(ctx))
	}
	_, startFirst := forms(cm, c.asyncPart(), b.async)
	w := startFirst(ctx)
	if c.Wait == wWaitAll || c.Wait == wWaitAny {
		return waitWorks(c.Wait, true, w, start(ctx))
	}
	err := run(ctx)
	if done, _ := w.Test(); err == nil && !done {
		// A synchronous call waits for the comm's earlier operations.
		return &waitError{"the asynchronous call was not done when the synchronous call started after it returned"}
	}
	return cmp.Or(waitWorks(c.Wait, true, w), err)
}

// callShift runs a send/recv shift or permutation (cPermute): SendRecv
// (on one buffer where in place); on async SendAsync and RecvAsync (in
// either order), waited for as c.Wait says; on async+sync RecvAsync, then
// a blocking Send (to itself, which a blocking Send refuses: a Batch of
// the Send), or, for a permutation with bit 2 of the data seed set, a
// Batch of the send and the receive (in either order).
func callShift[T Elem](ctx context.Context, cm *Comm, c confCall, b *confBufs[T]) error {
	to, from := c.peers(cm.Group().Size(), cm.Rank())
	r := cm.Rank()
	if c.Path == pAsyncPair && c.Coll == cPermute && c.DataSeed&4 != 0 {
		bt := cm.Batch()
		if c.DataSeed&8 == 0 {
			BatchSend(bt, b.send, to)
			BatchRecv(bt, b.recv, from)
		} else {
			BatchRecv(bt, b.recv, from)
			BatchSend(bt, b.send, to)
		}
		return bt.Run(ctx)
	}
	switch c.Path {
	case pAsync:
		var ws, wr Work
		if c.DataSeed%2 == 0 {
			ws = SendAsync(ctx, cm, b.send, to)
			wr = RecvAsync(ctx, cm, b.recv, from)
		} else {
			wr = RecvAsync(ctx, cm, b.recv, from)
			ws = SendAsync(ctx, cm, b.send, to)
		}
		return waitWorks(c.Wait, false, ws, wr)
	case pAsyncPair:
		wr := RecvAsync(ctx, cm, b.recv, from)
		var err error
		if to == r {
			bt := cm.Batch()
			BatchSend(bt, b.send, to)
			err = bt.Run(ctx)
		} else {
			err = Send(ctx, cm, b.send, to)
		}
		return cmp.Or(err, waitWorks(c.Wait, false, wr))
	}
	return SendRecv(ctx, cm, b.send, to, b.recv, from)
}

// waitError is a disagreement between the ways of waiting for a Work (or
// with the order a comm runs its operations in).
type waitError struct{ msg string }

func (e *waitError) Error() string { return e.msg }

// waitWorks waits for works as mode says, checks that every way of asking
// agrees (Test, Done, Wait, WaitAll, WaitAny), and returns the first of
// their errors in the order of works. ordered: the works are collectives
// started on one comm in this order, which finish in it.
func waitWorks(mode waitMode, ordered bool, works ...Work) error {
	bg := context.Background()
	switch mode {
	case wWaitAll:
		err := WaitAll(bg, append([]Work{{}}, works...)...)
		failed := false
		for i, w := range works {
			if werr := w.Wait(bg); werr != nil {
				failed = true
				if !errors.Is(err, werr) {
					return &waitError{fmt.Sprintf("WaitAll returned %v, not the error of Work %d: %v", err, i, werr)}
				}
			}
		}
		if err != nil && !failed {
			return &waitError{fmt.Sprintf("WaitAll returned %v, but every Work succeeded", err)}
		}
	case wTest:
		for pending := true; pending; {
			pending = false
			for _, w := range works {
				if done, _ := w.Test(); !done {
					pending = true
				}
			}
			if pending {
				time.Sleep(20 * time.Microsecond)
			}
		}
		for i, w := range works {
			done, err := w.Test()
			if werr := w.Wait(bg); !done || !w.Done() || err != werr {
				return &waitError{fmt.Sprintf("Work %d: Test said done=%v, %v; Done %v; Wait %v", i, done, err, w.Done(), werr)}
			}
		}
	case wWaitAny:
		left := append([]Work{{}}, works...)
		for k := 0; ; k++ {
			i, err := WaitAny(bg, left...)
			if i < 0 {
				if err != nil || k != len(works) {
					return &waitError{fmt.Sprintf("WaitAny returned -1, %v after %d of %d Works", err, k, len(works))}
				}
				break
			}
			if i == 0 || left[i] == (Work{}) {
				return &waitError{fmt.Sprintf("WaitAny returned entry %d, nil or done before", i)}
			}
			w := left[i]
			if werr := w.Wait(bg); !w.Done() || err != werr {
				return &waitError{fmt.Sprintf("WaitAny returned Work %d with %v; Done %v; Wait %v", i-1, err, w.Done(), werr)}
			}
			if ordered && i-1 != k {
				return &waitError{fmt.Sprintf("WaitAny returned Work %d as finished first of those left, but the comm started Work %d before it", i-1, k)}
			}
			left[i] = Work{}
		}
		// Every Work done: the first in works.
		if i, err := WaitAny(bg, works...); i != 0 || err != works[0].Wait(bg) {
			return &waitError{fmt.Sprintf("WaitAny returned Work %d (%v) of %d Works all done", i, err, len(works))}
		}
	}
	var first error
	for _, w := range works {
		if err := w.Wait(bg); err != nil && first == nil {
			first = err
		}
	}
	return first
}
