// Package waitfor finds wait cycles among the ranks of one process blocked
// in synchronous calls: each blocked rank publishes the ranks its unmatched
// operations wait for (at most two: a SendRecv's), and the rank that closes
// a cycle finds it, confirmed unchanged a moment later, and names the
// cycle's usual cause (Hint).
package waitfor

import (
	"runtime"
	"time"
)

// Graph is the published state of the ranks 0..n-1.
type Graph interface {
	// Epoch counts the changes of what rank r published.
	Epoch(r int) uint64
	// Blocked reports whether r is blocked in a synchronous call.
	Blocked(r int) bool
	// On returns the rank that r's edge i (0 or 1) waits for, or -1.
	On(r, i int) int
}

// Step is a rank of a cycle and the edge by which it waits for the next.
type Step struct {
	Rank, Edge int
	epoch      uint64
}

// Walker finds cycles; its scratch is reused from one walk to the next.
// One goroutine at a time.
type Walker struct {
	mark  []uint32
	stamp uint32
	stack []frame
}

// frame is a step of the walk: a rank, its epoch when visited, and the
// next of its two edges to follow.
type frame struct {
	r     int
	epoch uint64
	edge  int
}

// Find returns a wait cycle through rank from among n ranks, starting with
// from, or nil: a cycle found must still hold a moment later, every rank of
// it blocked as it was; a walk that saw a rank change is tried again.
func (w *Walker) Find(g Graph, n, from int) []Step {
	if n < 2 {
		return nil
	}
	for try := 0; try < 64; try++ {
		cyc, ok := w.walk(g, n, from)
		if !ok {
			runtime.Gosched()
			continue
		}
		if cyc == nil {
			return nil
		}
		time.Sleep(time.Millisecond)
		if holds(g, cyc) {
			return cyc
		}
	}
	return nil
}

// walk follows the edges from rank from (out-degree at most 2) and returns
// a cycle through it, or nil. ok is false when a rank's state changed
// during the walk.
func (w *Walker) walk(g Graph, n, from int) (cycle []Step, ok bool) {
	if cap(w.mark) < n {
		w.mark = make([]uint32, n)
	}
	w.mark = w.mark[:n]
	w.stamp++
	if w.stamp == 0 {
		clear(w.mark)
		w.stamp = 1
	}
	stack := w.stack[:0]
	defer func() { w.stack = stack[:0] }()
	stack = append(stack, frame{r: from, epoch: g.Epoch(from)})
	w.mark[from] = w.stamp
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.edge == 2 {
			stack = stack[:len(stack)-1]
			continue
		}
		p := g.On(f.r, f.edge)
		f.edge++
		if p < 0 {
			continue
		}
		if p == from {
			for _, s := range stack {
				if g.Epoch(s.r) != s.epoch {
					return nil, false
				}
			}
			cycle = make([]Step, len(stack))
			for i, s := range stack {
				cycle[i] = Step{Rank: s.r, Edge: s.edge - 1, epoch: s.epoch}
			}
			return cycle, true
		}
		if w.mark[p] == w.stamp {
			continue
		}
		w.mark[p] = w.stamp
		if !g.Blocked(p) {
			continue // not blocked in a synchronous call
		}
		stack = append(stack, frame{r: p, epoch: g.Epoch(p)})
	}
	return nil, true
}

// holds reports whether every rank of cyc is still blocked as it was and
// still waits for the next.
func holds(g Graph, cyc []Step) bool {
	for i, s := range cyc {
		if g.Epoch(s.Rank) != s.epoch {
			return false
		}
		if g.On(s.Rank, s.Edge) != cyc[(i+1)%len(cyc)].Rank {
			return false
		}
	}
	return true
}

// Hint names the usual cause of a cycle of n ranks whose calls are all
// Sends (allSend) or all Recvs (allRecv), for its error; else "".
func Hint(n int, allSend, allRecv bool) string {
	switch {
	case allSend && n == 2:
		return "both ranks Send before they Recv"
	case allRecv && n == 2:
		return "both ranks Recv before they Send"
	case allSend:
		return "every rank Sends before it Recvs"
	case allRecv:
		return "every rank Recvs before it Sends"
	}
	return ""
}
