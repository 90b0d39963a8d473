package collective

import (
	"runtime"
	"sync"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/tuning"
)

// Parallel host copies: a single core moves ~10 GB/s, far below what the
// memory (and PCIe) can take, so large copies between Go memory and mapped
// device memory are cut into pieces that a process-wide pool of goroutines
// (one per core) runs at once. Small copies run inline: no goroutine hop,
// no allocation.
const (
	parCopyMin   = tuning.ParCopyMin
	parCopyPiece = 256 << 10
)

type copyTask struct {
	c    *Comm
	buf  backend.Buffer
	off  int
	p    []byte
	read bool
}

var copyPool struct {
	once sync.Once
	ch   chan copyTask
}

func copyTasks() chan copyTask {
	copyPool.once.Do(func() {
		n := runtime.GOMAXPROCS(0)
		copyPool.ch = make(chan copyTask, 4*n)
		for i := 0; i < n; i++ {
			go copyWorker(copyPool.ch)
		}
	})
	return copyPool.ch
}

func copyWorker(ch chan copyTask) {
	for t := range ch {
		t.c.runCopy(t)
	}
}

func (c *Comm) runCopy(t copyTask) {
	var err error
	if t.read {
		err = t.buf.Read(t.off, t.p)
	} else {
		err = t.buf.Write(t.off, t.p)
	}
	if err != nil {
		c.copyMu.Lock()
		if c.copyErr == nil {
			c.copyErr = err
		}
		c.copyMu.Unlock()
	}
	c.copyWG.Done()
}

// copyIn starts buf[off:] = p (Buffer.Write); copyOut starts p =
// buf[off:] (Buffer.Read). copyWait waits for every copy started.
func (c *Comm) copyIn(buf backend.Buffer, off int, p []byte) { c.startCopy(buf, off, p, false) }

func (c *Comm) copyOut(buf backend.Buffer, off int, p []byte) { c.startCopy(buf, off, p, true) }

func (c *Comm) startCopy(buf backend.Buffer, off int, p []byte, read bool) {
	if len(p) < parCopyMin || runtime.GOMAXPROCS(0) < 2 {
		c.copyWG.Add(1)
		c.runCopy(copyTask{c: c, buf: buf, off: off, p: p, read: read})
		return
	}
	ch := copyTasks()
	for i := 0; i < len(p); i += parCopyPiece {
		j := min(i+parCopyPiece, len(p))
		t := copyTask{c: c, buf: buf, off: off + i, p: p[i:j], read: read}
		c.copyWG.Add(1)
		select {
		case ch <- t:
		default:
			c.runCopy(t) // the pool is busy: help
		}
	}
}

func (c *Comm) copyWait() error {
	c.copyWG.Wait()
	c.copyMu.Lock()
	err := c.copyErr
	c.copyErr = nil
	c.copyMu.Unlock()
	return err
}
