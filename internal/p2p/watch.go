package p2p

import (
	"context"
	"weak"
)

// The asynchronous operations' contexts and records. An asynchronous
// operation is posted with no allocation in the steady state:
//
//   - Its record is reused (Engine.newOp): once its handle was completed
//     (Env.Complete) and no lane's pass holds it (see Op), nor does the
//     list of operations whose context ended (e.attn), it goes back to the
//     engine's free records.
//   - Its context is watched through a registration (context.AfterFunc)
//     shared by every pending operation posted under a context of the same
//     Done channel (a watch), kept while the engine is open: a comm's
//     operations usually run under one context (Group.Run's, or one made
//     before a loop), so posting registers nothing. A watch that no pending
//     operation uses is moved to the next context of another Done channel;
//     one goroutine per context never runs. The registration reaches the
//     engine through a weak pointer (a long-lived context must not keep a
//     group dropped without Close alive) and Release ends every one.

// watch is the registration on the end of a context (its Done channel
// done) of the pending operations ops (linked through Op.cl; n of them).
type watch struct {
	done <-chan struct{}
	stop func() bool
	ops  list
	n    int
}

// newOp returns a free asynchronous operation record, or a new one.
func (e *Engine) newOp() *Op {
	e.mu.Lock()
	defer e.mu.Unlock()
	if k := len(e.free); k > 0 {
		o := e.free[k-1]
		e.free[k-1] = nil
		e.free = e.free[:k-1]
		return o
	}
	return new(Op)
}

// reuse frees the asynchronous operation o once nothing holds it (see
// above); e.mu held.
func (e *Engine) reuse(o *Op) {
	if !o.completed || o.held || o.attn {
		return
	}
	o.completed = false
	o.Data, o.Ctx, o.Work = nil, nil, nil
	e.free = append(e.free, o)
}

// dropAttn empties e.attn (its operations were taken for the lane's pass,
// or ended); e.mu held.
func (e *Engine) dropAttn() {
	for _, o := range e.attn {
		o.attn = false
		e.reuse(o)
	}
	clear(e.attn)
	e.attn = e.attn[:0]
}

// watchCtx adds the asynchronous operation o to the watch of its context's
// Done channel (nil: its context never ends), made or moved as needed;
// e.mu held. AfterFunc never runs its function before it returns, so the
// registration is made under e.mu.
func (e *Engine) watchCtx(o *Op) {
	done := o.Ctx.Done()
	if done == nil {
		return
	}
	var w, idle *watch
	for _, x := range e.watches {
		if x.done == done {
			w = x
			break
		}
		if x.n == 0 && idle == nil {
			idle = x
		}
	}
	if w == nil {
		if w = idle; w == nil {
			w = new(watch)
			e.watches = append(e.watches, w)
		} else if w.stop != nil {
			w.stop()
		}
		wp := weak.Make(e)
		w.done = done
		w.stop = context.AfterFunc(o.Ctx, func() {
			if e := wp.Value(); e != nil {
				e.ctxEnded(w, done)
			}
		})
	}
	w.n++
	w.ops.Push(o, &o.cl)
	o.watch = w
}

// unwatch takes o off its watch; e.mu held.
func (e *Engine) unwatch(o *Op) {
	if w := o.watch; w != nil {
		w.ops.Remove(&o.cl)
		w.n--
		o.watch = nil
	}
}

// ctxEnded asks the lane to fail the operations of watch w, whose context
// (of Done channel done) ended.
func (e *Engine) ctxEnded(w *watch, done <-chan struct{}) {
	e.mu.Lock()
	add := false
	if w.done == done {
		for o := w.ops.Head(); o != nil; o = o.cl.Next() {
			if o.live && !o.done && !o.attn {
				o.attn, add = true, true
				e.attn = append(e.attn, o)
			}
		}
	}
	e.mu.Unlock()
	if add {
		e.pokeLane()
	}
}

// Release ends every registration on a context's end (the comm closes;
// nothing is pending).
func (e *Engine) Release() {
	e.mu.Lock()
	var stops []func() bool
	for _, w := range e.watches {
		if w.stop != nil {
			stops = append(stops, w.stop)
		}
		w.stop, w.done = nil, nil
	}
	e.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// Watches returns the number of registrations on a context's end the
// engine holds (tests).
func (e *Engine) Watches() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, w := range e.watches {
		if w.stop != nil {
			n++
		}
	}
	return n
}
