package parreduce

import (
	"runtime"
	"sync"
)

// CopyMin is the size from which a Batch spreads a copy over the cores: a
// single core moves ~10 GB/s, far below what the memory (and PCIe) take;
// below it, handing pieces over costs more than it saves.
const CopyMin = 1 << 20

// ParallelCopy says whether a Batch spreads a copy of n bytes over the
// cores: n is CopyMin or more, the process runs on two cores or more and
// Copy's cap is not 1.
func ParallelCopy(n int) bool {
	return n >= CopyMin && runtime.GOMAXPROCS(0) >= 2 && Copy.Limit() != 1
}

// Copier is the memory a Batch copies into or out of: backend.Buffer's
// Write (buf[off:] = p) and Read (p = buf[off:]). Calls on disjoint ranges
// run concurrently.
type Copier interface {
	Write(off int, p []byte) error
	Read(off int, p []byte) error
}

// Batch is a set of copies between Go memory and a Copier that one
// goroutine starts (Start) and waits for together (Wait): the asynchronous
// form of Run, on the same pool and under the same count of idle workers.
// A ParallelCopy is a call of ChunkBytes pieces whose helpers are asked for
// at Start, so they copy while the caller starts the next: as many as
// there are idle workers (each helper holds one), up to the pool's size,
// or Copy's cap less one where a cap is set (the waiter copies too). In
// Wait the caller copies the pieces left itself, then waits for the
// helpers' last; the caller holds no worker (it copies only in Wait,
// memory-bound work beside the helpers). A smaller copy runs inline at Start. The zero Batch is ready; it is
// reused across Waits so that a steady state allocates nothing, and must
// not be copied.
type Batch struct {
	copies []*copyJob // the parallel copies' calls, reused across Waits
	n      int        // parallel copies started since the last Wait
	mu     sync.Mutex
	err    error // the first failure since the last Wait
}

// copyJob is one parallel copy: a Job whose Ranger is itself.
type copyJob struct {
	Job
	b    *Batch
	buf  Copier
	off  int
	p    []byte
	read bool
}

// Range copies bytes [lo, hi) of the copy and records a failure in its
// Batch.
func (c *copyJob) Range(lo, hi int) { c.b.record(copyBytes(c.buf, c.off+lo, c.p[lo:hi], c.read)) }

func copyBytes(buf Copier, off int, p []byte, read bool) error {
	if read {
		return buf.Read(off, p)
	}
	return buf.Write(off, p)
}

// record keeps err if it is the first failure since the last Wait.
func (b *Batch) record(err error) {
	if err == nil {
		return
	}
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

// Start starts the copy buf[off:] = p (Buffer.Write), or p = buf[off:]
// (Buffer.Read) if read: spread over idle pool workers if it is a
// ParallelCopy, else inline. p and buf must not be used until Wait.
func (b *Batch) Start(buf Copier, off int, p []byte, read bool) {
	if !ParallelCopy(len(p)) {
		b.record(copyBytes(buf, off, p, read))
		return
	}
	if b.n == len(b.copies) {
		b.copies = append(b.copies, &copyJob{b: b})
	}
	c := b.copies[b.n]
	c.buf, c.off, c.p, c.read = buf, off, p, read
	if !c.open(&Copy, c, len(p), ChunkBytes) {
		c.buf, c.p = nil, nil
		b.record(copyBytes(buf, off, p, read))
		return
	}
	b.n++
	if Copy.Limit() == 0 {
		// Uncapped: the waiter copies only in Wait, beside the helpers,
		// so a copy may take every idle worker (a 4 MiB copy out of a
		// buffer on 2 cores was 24% slower with one helper fewer).
		c.want++
	}
	c.ask(procPool)
}

// Wait copies the pieces of the started copies that no helper took, waits
// for the helpers' last ones, and returns the first error of the copies
// started since the last Wait (nil: none). It returns with no reference to
// a copy's memory kept.
func (b *Batch) Wait() error {
	if b.n > 0 {
		p := procPool
		for _, c := range b.copies[:b.n] {
			c.drain(p)
		}
		for _, c := range b.copies[:b.n] {
			c.close()
			c.buf, c.p = nil, nil
		}
		b.n = 0
	}
	b.mu.Lock()
	err := b.err
	b.err = nil
	b.mu.Unlock()
	return err
}
