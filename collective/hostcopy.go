package collective

import (
	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// Large copies between Go memory and mapped device memory are spread over
// the cores by the process's one worker pool (internal/parreduce, shared
// with the CPU's reductions); each comm waits for its own (c.copying).
type copyBatch = parreduce.Batch

// copyIn starts buf[off:] = p (Buffer.Write); copyOut starts p =
// buf[off:] (Buffer.Read). copyWait copies what no worker took and waits
// for every copy started.
func (c *Comm) copyIn(buf backend.Buffer, off int, p []byte) { c.copying.Start(buf, off, p, false) }

func (c *Comm) copyOut(buf backend.Buffer, off int, p []byte) { c.copying.Start(buf, off, p, true) }

func (c *Comm) copyWait() error { return c.copying.Wait() }
