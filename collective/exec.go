package collective

import (
	"context"

	"github.com/gocoll/gocoll/backend"
)

// Go queues fn on the comm's stream and returns at once: fn runs after
// every operation queued on c before it (collectives, point-to-point and
// other Go calls, synchronous or not) and before any queued after it, on
// the comm's worker goroutine, with a context derived from ctx. Collectives
// that fn calls on c with that context run inline, in order. This is how a
// layer above collective (ddp's asynchronous gradient steps) makes a
// sequence of collectives one stream operation. The Work reports fn's
// error, wrapped with the rank and name like a collective's.
func (c *Comm) Go(ctx context.Context, name string, fn func(ctx context.Context) error) *Work {
	if fn == nil {
		return failedWork(invalidArg("Comm.Go: nil function"))
	}
	return c.submit(ctx, name, nil, fn)
}

// Exec records device work on the comm's stream in order with its
// collectives: record adds commands to the stream (copies, kernels, the
// backend's optional interfaces such as backend.Compressor); Exec submits
// them and waits, within ctx and Config.CommunicationTimeout. When Exec
// returns, the device no longer uses any memory the commands touched: on a
// timeout or a lost device it drains first, and a failure after the
// submission breaks the group as a failed collective does. An error from
// record is returned as is. record must not keep the stream.
func (c *Comm) Exec(ctx context.Context, name string, record func(s backend.Stream) error) (err error) {
	if record == nil {
		return invalidArg("Comm.Exec: nil function")
	}
	owned, err := c.enter(ctx, name, false)
	if err != nil {
		return err
	}
	defer c.leave(owned, &err)
	if err := record(c.dev.Stream()); err != nil {
		return err
	}
	f, err := c.submitWork()
	if err != nil {
		return c.failAfter(err, nil, nil)
	}
	return c.waitFence(ctx, f)
}
