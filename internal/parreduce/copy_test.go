package parreduce

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mem is host memory behind a Copier: Read and Write copy, and count the
// calls, the most in flight at once and the goroutines that made them; the
// one at offset failAt fails.
type mem struct {
	b             []byte
	calls         atomic.Int64
	running, peak atomic.Int32
	failAt        int
	mu            sync.Mutex
	by            map[uint64]int // calls per goroutine id (track only)
	track         bool
}

var errFail = errors.New("injected failure")

func newMem(n int) *mem { return &mem{b: make([]byte, n), failAt: -1} }

func (m *mem) enter() {
	m.calls.Add(1)
	n := m.running.Add(1)
	for {
		p := m.peak.Load()
		if n <= p || m.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if m.track {
		m.mu.Lock()
		m.by[goid()]++
		m.mu.Unlock()
	}
}

func (m *mem) Write(off int, p []byte) error {
	m.enter()
	defer m.running.Add(-1)
	if off == m.failAt {
		return errFail
	}
	copy(m.b[off:], p)
	return nil
}

func (m *mem) Read(off int, p []byte) error {
	m.enter()
	defer m.running.Add(-1)
	if off == m.failAt {
		return errFail
	}
	copy(p, m.b[off:])
	return nil
}

// goid is the calling goroutine's id, read from its stack header.
func goid() uint64 {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	var id uint64
	for _, c := range buf[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) + seed
	}
	return p
}

func withProcs(t *testing.T, n int) {
	old := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

// waitIdle waits until every worker of the pool is idle again (a helper
// handed a call after it closed leaves later than the call returned).
func waitIdle(t *testing.T) {
	t.Helper()
	p := thePool()
	deadline := time.Now().Add(10 * time.Second)
	for int(p.idle.Load()) != p.size && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := p.idle.Load(); int(n) != p.size {
		t.Fatalf("idle workers %d 10 s after the calls, want %d", n, p.size)
	}
}

// TestCopySizes: copies in and out land where they should for sizes around
// the inline limit and the piece boundaries, at an offset, with several
// cores and with one, and a ParallelCopy makes one Buffer call per piece.
func TestCopySizes(t *testing.T) {
	const piece = ChunkBytes
	sizes := []int{0, 1, piece - 1, piece, piece + 1, CopyMin - 1, CopyMin, CopyMin + 1,
		CopyMin + piece - 1, CopyMin + piece, CopyMin + piece + 1, 3*CopyMin + 12345}
	for _, procs := range []int{4, 1} {
		withProcs(t, procs)
		for _, n := range sizes {
			t.Run(fmt.Sprintf("procs%d/%d", procs, n), func(t *testing.T) {
				const off = 3
				m := newMem(n + off + 5)
				src := pattern(n, 1)
				var b Batch
				b.Start(m, off, src, false)
				if err := b.Wait(); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(m.b[off:off+n], src) || !bytes.Equal(m.b[:off], make([]byte, off)) ||
					!bytes.Equal(m.b[off+n:], make([]byte, 5)) {
					t.Fatal("the copy in wrote the wrong bytes")
				}
				wantCalls := int64(1)
				if procs > 1 && n >= CopyMin {
					wantCalls = int64((n + piece - 1) / piece)
				}
				if got := m.calls.Load(); got != wantCalls {
					t.Fatalf("%d Buffer calls, want %d", got, wantCalls)
				}
				dst := make([]byte, n)
				b.Start(m, off, dst, true)
				if err := b.Wait(); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(dst, src) {
					t.Fatal("the copy out read the wrong bytes")
				}
			})
		}
	}
	waitIdle(t)
}

// TestCopyConcurrent: batches of several goroutines, and synchronous
// Runs beside them, share the pool at once, each batch waiting for its own
// copies only; every worker is idle again afterwards.
func TestCopyConcurrent(t *testing.T) {
	withProcs(t, 4)
	const batches, n = 8, 2*CopyMin + 777
	var wg sync.WaitGroup
	errs := make(chan error, 2*batches)
	for g := range batches {
		wg.Go(func() {
			m := newMem(2 * n)
			var b Batch
			for round := range 5 {
				src1, src2 := pattern(n, byte(g+round)), pattern(n, byte(g*round))
				b.Start(m, 0, src1, false)
				b.Start(m, n, src2, false)
				if err := b.Wait(); err != nil {
					errs <- err
					return
				}
				dst := make([]byte, 2*n)
				b.Start(m, 0, dst[:n], true)
				b.Start(m, n, dst[n:], true)
				if err := b.Wait(); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(dst[:n], src1) || !bytes.Equal(dst[n:], src2) {
					errs <- fmt.Errorf("batch %d round %d: wrong bytes", g, round)
					return
				}
			}
		})
		wg.Go(func() {
			var j Job
			for range 5 {
				c := &counter{hits: make([]int32, 1<<14), chunk: 256}
				j.Run(&Reduce, c, len(c.hits), c.chunk)
				for i, h := range c.hits {
					if h != 1 {
						errs <- fmt.Errorf("Run beside batch %d: element %d computed %d times", g, i, h)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitIdle(t)
}

// TestCopyWaitNothing: Wait with nothing started returns at once, with no
// error.
func TestCopyWaitNothing(t *testing.T) {
	var b Batch
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestCopyError: a failed piece's error is Wait's, once; the other pieces
// still ran; an inline copy's failure too.
func TestCopyError(t *testing.T) {
	for _, procs := range []int{4, 1} {
		withProcs(t, procs)
		n := 2 * CopyMin
		m := newMem(n)
		m.failAt = 0
		if procs > 1 {
			m.failAt = 3 * ChunkBytes
		}
		var b Batch
		src := pattern(n, 9)
		b.Start(m, 0, src, false)
		if err := b.Wait(); !errors.Is(err, errFail) {
			t.Fatalf("procs %d: Wait = %v, want the injected failure", procs, err)
		}
		if err := b.Wait(); err != nil {
			t.Fatalf("procs %d: a second Wait = %v", procs, err)
		}
		if procs > 1 && (!bytes.Equal(m.b[:3*ChunkBytes], src[:3*ChunkBytes]) || !bytes.Equal(m.b[4*ChunkBytes:], src[4*ChunkBytes:])) {
			t.Fatal("the pieces beside the failed one were not copied")
		}
		small := newMem(10)
		small.failAt = 0
		b.Start(small, 0, src[:10], true)
		if err := b.Wait(); !errors.Is(err, errFail) {
			t.Fatalf("procs %d: Wait after a failed inline copy = %v", procs, err)
		}
	}
	waitIdle(t)
}

// TestCopyWaiterComputes: with no idle worker in the process (every one
// held), a batch's copies are done by its waiter alone, piece by piece, in
// Wait: it never waits for a worker while pieces are left.
func TestCopyWaiterComputes(t *testing.T) {
	withProcs(t, 4)
	p := thePool()
	waitIdle(t)
	held := 0
	for p.take() {
		held++
	}
	defer p.idle.Add(int32(held))
	m := newMem(3*CopyMin + 1)
	m.track, m.by = true, map[uint64]int{}
	src := pattern(len(m.b), 4)
	var b Batch
	b.Start(m, 0, src[:CopyMin], false)
	b.Start(m, CopyMin, src[CopyMin:], false)
	if c := m.calls.Load(); c != 0 {
		t.Fatalf("%d pieces copied before Wait with no idle worker", c)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.b, src) {
		t.Fatal("wrong bytes")
	}
	pieces := CopyMin/ChunkBytes + (2*CopyMin+1+ChunkBytes-1)/ChunkBytes
	if got := m.by[goid()]; len(m.by) != 1 || got != pieces {
		t.Fatalf("pieces by goroutine %v, want all %d by the waiter", m.by, pieces)
	}
}

// TestCopyCap: Copy's cap bounds the pieces in flight of one copy (1:
// inline, one Buffer call); by default a copy on a machine of several cores
// is spread over every idle worker and its waiter.
func TestCopyCap(t *testing.T) {
	withProcs(t, 4)
	defer Copy.Set(Copy.Set(0))
	size := thePool().size
	for _, limit := range []int{0, 1, 2} {
		Copy.Set(limit)
		want := capOf(limit, size)
		if limit == 0 {
			want = size + 1 // every pool worker, and the waiter
		}
		m := newMem(16 * CopyMin)
		var b Batch
		b.Start(m, 0, pattern(len(m.b), 3), false)
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		if p := int(m.peak.Load()); p > want {
			t.Errorf("cap %d, pool of %d: %d pieces at once", limit, size, p)
		}
		if limit == 1 && m.calls.Load() != 1 {
			t.Errorf("cap 1: %d Buffer calls, want 1 (inline)", m.calls.Load())
		}
		t.Logf("cap %d, pool of %d: at most %d pieces at once", limit, size, m.peak.Load())
	}
	waitIdle(t)
}

// TestCopyNoAlloc: in the steady state a batch of a parallel copy and an
// inline one allocates nothing.
func TestCopyNoAlloc(t *testing.T) {
	withProcs(t, 4)
	n := 2*CopyMin + 5
	m := newMem(n)
	src := pattern(n, 2)
	var b Batch
	b.Start(m, 0, src, false) // the pool starts
	_ = b.Wait()
	allocs := testing.AllocsPerRun(50, func() {
		b.Start(m, 0, src, false)
		b.Start(m, 0, src[:100], true)
		_ = b.Wait()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch", allocs)
	}
	if !bytes.Equal(m.b, src) {
		t.Fatal("wrong bytes")
	}
}

// TestCopyNoReference: after Wait the batch keeps no reference to the
// memory or the buffer it copied.
func TestCopyNoReference(t *testing.T) {
	withProcs(t, 4)
	m := newMem(2 * CopyMin)
	var b Batch
	b.Start(m, 0, pattern(len(m.b), 5), false)
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	for i, c := range b.copies {
		if c.buf != nil || c.p != nil || c.r != nil {
			t.Errorf("copy %d keeps a reference after Wait", i)
		}
	}
}
