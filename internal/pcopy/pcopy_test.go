package pcopy

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// mem is a host buffer: Read and Write copy, and count the calls; one at
// offset failAt fails.
type mem struct {
	backend.Buffer
	b      []byte
	calls  atomic.Int64
	failAt int
}

var errFail = errors.New("injected failure")

func newMem(n int) *mem { return &mem{b: make([]byte, n), failAt: -1} }

func (m *mem) Write(off int, p []byte) error {
	m.calls.Add(1)
	if off == m.failAt {
		return errFail
	}
	copy(m.b[off:], p)
	return nil
}

func (m *mem) Read(off int, p []byte) error {
	m.calls.Add(1)
	if off == m.failAt {
		return errFail
	}
	copy(p, m.b[off:])
	return nil
}

func worker(tasks <-chan Task) {
	for t := range tasks {
		t.Run()
	}
}

var pool = Pool{Worker: worker}

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

// Copies in and out land where they should for sizes around the inline
// limit and the piece boundaries, at an offset, with several cores and
// with one.
func TestSizes(t *testing.T) {
	sizes := []int{0, 1, Piece - 1, Piece, Piece + 1, Min - 1, Min, Min + 1,
		Min + Piece - 1, Min + Piece, Min + Piece + 1, 3*Min + 12345}
	for _, procs := range []int{4, 1} {
		withProcs(t, procs)
		for _, n := range sizes {
			t.Run(fmt.Sprintf("procs%d/%d", procs, n), func(t *testing.T) {
				const off = 3
				m := newMem(n + off + 5)
				src := pattern(n, 1)
				var b Batch
				b.Start(&pool, m, off, src, false)
				if err := b.Wait(); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(m.b[off:off+n], src) || !bytes.Equal(m.b[:off], make([]byte, off)) ||
					!bytes.Equal(m.b[off+n:], make([]byte, 5)) {
					t.Fatal("the copy in wrote the wrong bytes")
				}
				wantCalls := int64(1)
				if procs > 1 && n >= Min {
					wantCalls = int64((n + Piece - 1) / Piece)
				}
				if got := m.calls.Load(); got != wantCalls {
					t.Fatalf("%d Buffer calls, want %d", got, wantCalls)
				}
				dst := make([]byte, n)
				b.Start(&pool, m, off, dst, true)
				if err := b.Wait(); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(dst, src) {
					t.Fatal("the copy out read the wrong bytes")
				}
			})
		}
	}
}

// Batches of several goroutines run on one pool at once, each waiting for
// its own copies only.
func TestConcurrentBatches(t *testing.T) {
	withProcs(t, 4)
	const batches, n = 8, 2*Min + 777
	var wg sync.WaitGroup
	errs := make(chan error, batches)
	for g := range batches {
		wg.Go(func() {
			m := newMem(2 * n)
			var b Batch
			for round := range 5 {
				src1, src2 := pattern(n, byte(g+round)), pattern(n, byte(g*round))
				b.Start(&pool, m, 0, src1, false)
				b.Start(&pool, m, n, src2, false)
				if err := b.Wait(); err != nil {
					errs <- err
					return
				}
				dst := make([]byte, 2*n)
				b.Start(&pool, m, 0, dst[:n], true)
				b.Start(&pool, m, n, dst[n:], true)
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
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Wait with nothing started returns at once, with no error.
func TestWaitNothing(t *testing.T) {
	var b Batch
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
}

// A failed piece's error is Wait's, once; the other pieces still ran.
func TestError(t *testing.T) {
	for _, procs := range []int{4, 1} {
		withProcs(t, procs)
		n := 2 * Min
		m := newMem(n)
		m.failAt = 0
		if procs > 1 {
			m.failAt = 3 * Piece
		}
		var b Batch
		src := pattern(n, 9)
		b.Start(&pool, m, 0, src, false)
		if err := b.Wait(); !errors.Is(err, errFail) {
			t.Fatalf("procs %d: Wait = %v, want the injected failure", procs, err)
		}
		if err := b.Wait(); err != nil {
			t.Fatalf("procs %d: a second Wait = %v", procs, err)
		}
		if procs > 1 && !bytes.Equal(m.b[:3*Piece], src[:3*Piece]) {
			t.Fatal("the pieces before the failed one were not copied")
		}
	}
}

// In the steady state a parallel copy allocates nothing.
func TestNoAlloc(t *testing.T) {
	withProcs(t, 4)
	n := 2*Min + 5
	m := newMem(n)
	src := pattern(n, 2)
	var b Batch
	b.Start(&pool, m, 0, src, false) // the pool starts
	_ = b.Wait()
	allocs := testing.AllocsPerRun(50, func() {
		b.Start(&pool, m, 0, src, false)
		b.Start(&pool, m, 0, src[:100], true)
		_ = b.Wait()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per copy", allocs)
	}
}
