package collective

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// quietTr is loopTr's in-memory network with point-to-point messages that
// allocate nothing once warm, so that tests count the library's own
// allocations across processes: a message is copied into a buffer reused
// from the network's free ones, queued per (source, destination, tag) in a
// ring, and a receive's request is reused once it completed or was
// cancelled (every user drops a request then); Allgather's rounds reuse
// the network's buffer, the last process to arrive copying it out to every
// process's. Dup is loopTr's (it runs when a group opens, not per call).
type quietTr struct {
	*loopTr
	q *quietNet
}

type quietNet struct {
	mu     sync.Mutex
	size   int
	queues map[[3]int]*quietQueue
	// Allgather's round: its number, the processes arrived, the data and
	// each arrived process's output.
	agRound   uint64
	agArrived int
	agData    []byte
	agOuts    [][]byte
	free      [][]byte     // message buffers for reuse
	reqs      []*quietRecv // receive requests for reuse
}

// quietQueue is a ring of messages in order.
type quietQueue struct {
	msgs    [][]byte
	head, n int
}

func (q *quietQueue) push(m []byte) {
	if q.n == len(q.msgs) {
		grown := make([][]byte, max(8, 2*len(q.msgs)))
		for i := range q.n {
			grown[i] = q.msgs[(q.head+i)%len(q.msgs)]
		}
		q.msgs, q.head = grown, 0
	}
	q.msgs[(q.head+q.n)%len(q.msgs)] = m
	q.n++
}

func (q *quietQueue) pop() []byte {
	m := q.msgs[q.head]
	q.msgs[q.head] = nil
	q.head = (q.head + 1) % len(q.msgs)
	q.n--
	return m
}

var (
	quietMu   sync.Mutex
	quietNets = map[*loopNet]*quietNet{}
)

// newQuietNet returns size transports on one quiet network.
func newQuietNet(size int) []backend.Transport {
	out := make([]backend.Transport, size)
	for i, t := range newLoopNet(size) {
		out[i] = quiet(t)
	}
	return out
}

func quiet(t *loopTr) *quietTr {
	quietMu.Lock()
	defer quietMu.Unlock()
	q := quietNets[t.net]
	if q == nil {
		q = &quietNet{size: t.net.size, queues: map[[3]int]*quietQueue{}, agOuts: make([][]byte, t.net.size)}
		quietNets[t.net] = q
	}
	return &quietTr{loopTr: t, q: q}
}

func (t *quietTr) Dup(ctx context.Context) (backend.Transport, error) {
	d, err := t.loopTr.Dup(ctx)
	if err != nil {
		return nil, err
	}
	return quiet(d.(*loopTr)), nil
}

func (n *quietNet) queue(k [3]int) *quietQueue {
	q := n.queues[k]
	if q == nil {
		q = &quietQueue{}
		n.queues[k] = q
	}
	return q
}

func (t *quietTr) Isend(p []byte, peer, tag int) (backend.Request, error) {
	n := t.q
	n.mu.Lock()
	defer n.mu.Unlock()
	var m []byte
	for i := len(n.free) - 1; i >= 0; i-- {
		if cap(n.free[i]) >= len(p) {
			m = n.free[i][:len(p)]
			n.free[i] = n.free[len(n.free)-1]
			n.free[len(n.free)-1] = nil
			n.free = n.free[:len(n.free)-1]
			break
		}
	}
	if m == nil {
		m = make([]byte, len(p))
	}
	copy(m, p)
	n.queue([3]int{t.rank, peer, tag}).push(m)
	return doneReq{}, nil
}

type quietRecv struct {
	net *quietNet
	key [3]int
	p   []byte
}

func (t *quietTr) Irecv(p []byte, peer, tag int) (backend.Request, error) {
	n := t.q
	n.mu.Lock()
	defer n.mu.Unlock()
	var r *quietRecv
	if k := len(n.reqs); k > 0 {
		r, n.reqs = n.reqs[k-1], n.reqs[:k-1]
	} else {
		r = new(quietRecv)
	}
	*r = quietRecv{net: n, key: [3]int{peer, t.rank, tag}, p: p}
	return r, nil
}

// release returns r for reuse (r.net.mu held).
func (r *quietRecv) release() {
	n := r.net
	r.p = nil
	n.reqs = append(n.reqs, r)
}

func (r *quietRecv) Test() (bool, error) {
	n := r.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if r.p == nil {
		return false, fmt.Errorf("quiet loopback: a request used after it completed")
	}
	q := n.queue(r.key)
	if q.n == 0 {
		return false, nil
	}
	m := q.pop()
	if len(m) != len(r.p) {
		return false, fmt.Errorf("quiet loopback: message of %d bytes for a receive of %d", len(m), len(r.p))
	}
	copy(r.p, m)
	n.free = append(n.free, m)
	r.release()
	return true, nil
}

func (r *quietRecv) Cancel() error {
	r.net.mu.Lock()
	defer r.net.mu.Unlock()
	if r.p != nil {
		r.release()
	}
	return nil
}

// Allgather waits, polling, until every process arrived (or ctx ends: the
// process leaves the round).
func (t *quietTr) Allgather(ctx context.Context, mine, all []byte) error {
	n := t.q
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.agData) != n.size*len(mine) {
		n.agData = make([]byte, n.size*len(mine))
	}
	copy(n.agData[t.rank*len(mine):], mine)
	n.agOuts[t.rank] = all
	n.agArrived++
	round := n.agRound
	if n.agArrived == n.size {
		for i, out := range n.agOuts {
			copy(out, n.agData)
			n.agOuts[i] = nil
		}
		n.agArrived = 0
		n.agRound++
		return nil
	}
	for n.agRound == round {
		if err := ctx.Err(); err != nil {
			n.agOuts[t.rank] = nil
			n.agArrived--
			return err
		}
		n.mu.Unlock()
		time.Sleep(20 * time.Microsecond)
		n.mu.Lock()
	}
	return nil
}
