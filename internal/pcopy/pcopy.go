// Package pcopy spreads large host copies between Go memory and a backend
// buffer over the cores. A single core moves ~10 GB/s, far below what the
// memory (and PCIe) can take, so a copy of Min bytes or more is cut into
// Piece-sized pieces that a pool of goroutines (one per core) runs at once;
// a smaller copy, or any copy with a single core, runs inline. A Batch
// groups the copies its owner started and waits for them; in the steady
// state nothing allocates: no goroutine per copy, no closure.
package pcopy

import (
	"runtime"
	"sync"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/tuning"
)

const (
	Min   = tuning.ParCopyMin // the smallest copy spread over the cores
	Piece = 256 << 10         // the bytes one task copies
)

// Parallel says whether a copy of n bytes is spread over the cores.
func Parallel(n int) bool { return n >= Min && runtime.GOMAXPROCS(0) >= 2 }

// Task is one piece of a copy, for a pool's worker to Run.
type Task struct {
	b    *Batch
	buf  backend.Buffer
	off  int
	p    []byte
	read bool
}

// Run copies t's piece and records its error, if any, in t's Batch.
func (t Task) Run() {
	var err error
	if t.read {
		err = t.buf.Read(t.off, t.p)
	} else {
		err = t.buf.Write(t.off, t.p)
	}
	b := t.b
	if err != nil {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	b.wg.Done()
}

// Pool is a set of goroutines, one per core, started at its first parallel
// copy and kept. Each runs Worker, which must Run every task it receives
// until the channel closes (it never does); the owner names the function,
// so that the goroutines are recognisable by it.
type Pool struct {
	Worker func(tasks <-chan Task)
	once   sync.Once
	ch     chan Task
}

func (pl *Pool) tasks() chan Task {
	pl.once.Do(func() {
		n := runtime.GOMAXPROCS(0)
		pl.ch = make(chan Task, 4*n)
		for i := 0; i < n; i++ {
			go pl.Worker(pl.ch)
		}
	})
	return pl.ch
}

// Batch is a set of copies started together (Start) and waited for
// together (Wait). The zero Batch is ready to use; one goroutine starts
// and waits.
type Batch struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

// Start starts the copy buf[off:] = p (Buffer.Write), or p = buf[off:]
// (Buffer.Read) if read, on pl's goroutines if the copy is Parallel (the
// caller runs a piece itself where the pool is busy), else inline. p and
// buf must not be used until Wait.
func (b *Batch) Start(pl *Pool, buf backend.Buffer, off int, p []byte, read bool) {
	if !Parallel(len(p)) {
		b.wg.Add(1)
		Task{b: b, buf: buf, off: off, p: p, read: read}.Run()
		return
	}
	ch := pl.tasks()
	for i := 0; i < len(p); i += Piece {
		j := min(i+Piece, len(p))
		t := Task{b: b, buf: buf, off: off + i, p: p[i:j], read: read}
		b.wg.Add(1)
		select {
		case ch <- t:
		default:
			t.Run() // the pool is busy: help
		}
	}
}

// Wait waits for every copy started and returns the first error of those
// since the last Wait (nil: none).
func (b *Batch) Wait() error {
	b.wg.Wait()
	b.mu.Lock()
	err := b.err
	b.err = nil
	b.mu.Unlock()
	return err
}
