package collective

import "context"

// Batch groups operations of one Comm so that they are posted together and
// waited for together, as ncclGroupStart/ncclGroupEnd do: Run posts every
// point-to-point operation of the batch first, whatever order they were
// added in and whatever collectives sit between them, then the
// collectives in the order added, then waits for all. So exchange patterns
// that deadlock as blocking calls (every rank sending first, rings and
// all-to-alls built from sends and receives, pipeline-parallel sends mixed
// with collectives in different orders on different ranks) complete, and
// a rank may send to and receive from itself in one batch (as NCCL requires
// a group for it). Every rank adds its collectives in the same order, as
// for plain calls.
type Batch struct {
	c     *Comm
	p2p   []desc
	colls []desc
	works []Work
}

// Batch starts an empty batch on c. A batch is used by c's goroutine; it
// may be reused after Run.
func (c *Comm) Batch() *Batch { return &Batch{c: c} }

// BatchSend adds Send(data to peer); data must not be modified until Run
// returns.
func BatchSend[T Elem](b *Batch, data []T, peer int) {
	b.p2p = append(b.p2p, p2pDesc(collSend, "SendAsync", data, peer))
}

// BatchRecv adds Recv(data from peer).
func BatchRecv[T Elem](b *Batch, data []T, peer int) {
	b.p2p = append(b.p2p, p2pDesc(collRecv, "RecvAsync", data, peer))
}

// BatchAllReduce adds AllReduce(data, op) (in place).
func BatchAllReduce[T Elem](b *Batch, data []T, op Op) {
	d := asBytes(data)
	b.colls = append(b.colls, desc{kind: collAllReduce, dt: dtypeOf[T](), op: op, send: d, recv: d})
}

// BatchBroadcast adds Broadcast(data, root).
func BatchBroadcast[T Elem](b *Batch, data []T, root int) {
	b.colls = append(b.colls, desc{kind: collBroadcast, dt: dtypeOf[T](), root: root, send: asBytes(data)})
}

// Run posts the batch (point-to-point first, then the collectives in the
// order added), waits for every operation within ctx, empties the batch
// and returns the first error: an *Error naming the rank and the
// operation that failed (its name and number: the sends and receives are
// numbered as point-to-point calls, the collectives as collectives). When
// ctx ends first, that is the operation's own *TimeoutError (ErrTimeout
// after a deadline, and the context's error). When it returns, no
// operation of the batch touches its memory any more.
func (b *Batch) Run(ctx context.Context) error {
	b.works = b.works[:0]
	for _, d := range b.p2p {
		b.works = append(b.works, b.c.start(ctx, d))
	}
	for _, d := range b.colls {
		b.works = append(b.works, b.c.start(ctx, d))
	}
	var first error
	for _, w := range b.works {
		err := w.Wait(ctx)
		if err != nil && err == ctx.Err() {
			// ctx ended first. Every operation was started with ctx and
			// ends on it (or on CommunicationTimeout), failing with its
			// own typed error: wait for that, so the memory is free on
			// return.
			err = w.Wait(context.Background())
		}
		if err != nil && first == nil {
			first = err
		}
	}
	clear(b.p2p)
	clear(b.colls)
	clear(b.works)
	b.p2p, b.colls, b.works = b.p2p[:0], b.colls[:0], b.works[:0]
	return first
}
