package collective

import (
	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/pcopy"
)

// Large copies between Go memory and mapped device memory are spread over
// the cores by a process-wide pool (internal/pcopy); each comm waits for
// its own (c.copying).
const parCopyMin = pcopy.Min

type copyBatch = pcopy.Batch

var copyPool = pcopy.Pool{Worker: copyWorker}

// copyWorker is the pool's goroutines' function; the leak checks know them
// by its name.
func copyWorker(tasks <-chan pcopy.Task) {
	for t := range tasks {
		t.Run()
	}
}

// copyIn starts buf[off:] = p (Buffer.Write); copyOut starts p =
// buf[off:] (Buffer.Read). copyWait waits for every copy started.
func (c *Comm) copyIn(buf backend.Buffer, off int, p []byte) {
	c.copying.Start(&copyPool, buf, off, p, false)
}

func (c *Comm) copyOut(buf backend.Buffer, off int, p []byte) {
	c.copying.Start(&copyPool, buf, off, p, true)
}

func (c *Comm) copyWait() error { return c.copying.Wait() }
