package collective

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// loopNet is an in-memory Transport among simulated processes, so the
// multi-process code runs in plain go test (the mpi package's tests run it
// over real MPI processes).
type loopNet struct {
	mu     sync.Mutex
	queues map[[3]int][][]byte // (src, dst, tag) -> messages in order
	ag     *agRound
	size   int
	dups   []*loopNet // Dup's networks, in call order
	dupTrs []*loopTr  // the transports Dup returned
	// stuck: sends never complete and cannot be cancelled; every buffer
	// handed to Isend is kept (read again by tests after Close).
	stuck bool
	kept  [][]byte
}

type agRound struct {
	data    []byte
	arrived int
	done    chan struct{}
}

type loopTr struct {
	net    *loopNet
	rank   int
	ndup   int
	closed atomic.Bool
}

// Dup returns the process's transport on the network of its ndup-th Dup
// (every process's k-th Dup meets on one network).
func (t *loopTr) Dup(ctx context.Context) (backend.Transport, error) {
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	for len(n.dups) <= t.ndup {
		n.dups = append(n.dups, &loopNet{queues: map[[3]int][][]byte{}, size: n.size, stuck: n.stuck})
	}
	d := &loopTr{net: n.dups[t.ndup], rank: t.rank}
	t.ndup++
	n.dupTrs = append(n.dupTrs, d)
	return d, nil
}

type stuckReq struct{}

func (stuckReq) Test() (bool, error) { return false, nil }
func (stuckReq) Cancel() error       { return errors.New("loopback: the send is in flight") }

func newLoopNet(size int) []*loopTr {
	n := &loopNet{queues: map[[3]int][][]byte{}, size: size}
	out := make([]*loopTr, size)
	for i := range out {
		out[i] = &loopTr{net: n, rank: i}
	}
	return out
}

func (t *loopTr) Name() string { return "loopback" }
func (t *loopTr) Rank() int    { return t.rank }
func (t *loopTr) Size() int    { return t.net.size }
func (t *loopTr) Close() error { t.closed.Store(true); return nil }

type doneReq struct{}

func (doneReq) Test() (bool, error) { return true, nil }
func (doneReq) Cancel() error       { return nil }

func (t *loopTr) Isend(p []byte, peer, tag int) (backend.Request, error) {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	if t.net.stuck {
		t.net.kept = append(t.net.kept, p)
		return stuckReq{}, nil
	}
	k := [3]int{t.rank, peer, tag}
	t.net.queues[k] = append(t.net.queues[k], append([]byte(nil), p...))
	return doneReq{}, nil
}

type loopRecv struct {
	net  *loopNet
	key  [3]int
	p    []byte
	done bool
}

func (r *loopRecv) Test() (bool, error) {
	if r.done {
		return true, nil
	}
	r.net.mu.Lock()
	defer r.net.mu.Unlock()
	q := r.net.queues[r.key]
	if len(q) == 0 {
		return false, nil
	}
	m := q[0]
	r.net.queues[r.key] = q[1:]
	if len(m) != len(r.p) {
		return false, fmt.Errorf("loopback: message of %d bytes for a receive of %d", len(m), len(r.p))
	}
	copy(r.p, m)
	r.done = true
	return true, nil
}

func (r *loopRecv) Cancel() error { return nil }

func (t *loopTr) Irecv(p []byte, peer, tag int) (backend.Request, error) {
	return &loopRecv{net: t.net, key: [3]int{peer, t.rank, tag}, p: p}, nil
}

func (t *loopTr) Allgather(ctx context.Context, mine, all []byte) error {
	n := t.net
	n.mu.Lock()
	if n.ag == nil {
		n.ag = &agRound{data: make([]byte, len(mine)*n.size), done: make(chan struct{})}
	}
	r := n.ag
	copy(r.data[t.rank*len(mine):], mine)
	r.arrived++
	if r.arrived == n.size {
		n.ag = nil
		close(r.done)
	}
	n.mu.Unlock()
	select {
	case <-r.done:
		copy(all, r.data)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// openProcesses opens one group per simulated process, concurrently (the
// groups meet while opening).
func openProcesses(t testing.TB, bk string, procs, local int, mod ...func(*Options)) []*Group {
	t.Helper()
	return openProcessesOn(t, newLoopNet(procs), bk, local, mod...)
}

// openProcessesOn is openProcesses over the network of trs (one transport
// per process).
func openProcessesOn[T backend.Transport](t testing.TB, trs []T, bk string, local int, mod ...func(*Options)) []*Group {
	t.Helper()
	procs := len(trs)
	gs := make([]*Group, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for p := range gs {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			o := Options{Ranks: local, Backend: bk, Config: testConfig(), Transport: trs[p], ChunkBytes: 4096}
			for _, m := range mod {
				m(&o)
			}
			gs[p], errs[p] = NewGroup(context.Background(), o)
		}(p)
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", p, err)
		}
	}
	t.Cleanup(func() {
		for _, g := range gs {
			g.Close()
		}
	})
	return gs
}

// onAllRanks runs f on every rank of every process.
func onAllRanks(gs []*Group, f func(c *Comm) error) []error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, g := range gs {
		for i := 0; i < g.LocalSize(); i++ {
			wg.Add(1)
			go func(c *Comm) {
				defer wg.Done()
				err := f(c)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("rank %d: %w", c.Rank(), err))
				}
			}(g.Comm(i))
		}
	}
	wg.Wait()
	return errs
}

func TestProcessesAllReduce(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		shapes := [][2]int{{2, 1}, {3, 2}, {2, 3}}
		ops, sizes := allOps, []int{0, 1, 0, 5003}
		if (bk != "host" || raceEnabled) && !fullRun() {
			shapes, ops, sizes = [][2]int{{3, 2}}, []Op{Sum, Max}, []int{1, 0, 5003}
		}
		for _, shape := range shapes {
			procs, local := shape[0], shape[1]
			gs := openProcesses(t, bk, procs, local)
			if gs[1].Comm(0).Rank() != local || gs[0].Size() != procs*local || gs[0].Processes() != procs {
				t.Fatalf("numbering: process 1's first rank is %d, size %d", gs[1].Comm(0).Rank(), gs[0].Size())
			}
			N := procs * local
			for _, s := range []Strategy{Auto, Ring, Tree, Hierarchical, Direct, Pipelined} {
				for _, op := range ops {
					for j, n := range sizes {
						if n == 0 && j > 0 {
							n = N + 1
						}
						name := fmt.Sprintf("%s/%dx%d/%s/%s/n=%d", bk, procs, local, s, op, n)
						inputs := make([][]float64, N)
						for r := range inputs {
							inputs[r] = make([]float64, n)
							for i := range inputs[r] {
								inputs[r][i] = exactInput(op, r, i)
							}
						}
						want := refReduce(inputs, op)
						got32 := make([][]float32, N)
						got64 := make([][]float64, N)
						errs := onAllRanks(gs, func(c *Comm) error {
							r := c.Rank()
							a := make([]float32, n)
							b := make([]float64, n)
							for i, v := range inputs[r] {
								a[i], b[i] = float32(v), v
							}
							if err := AllReduceWith(context.Background(), c, a, a, op, s); err != nil {
								return err
							}
							got32[r] = a
							if err := AllReduceWith(context.Background(), c, b, b, op, s); err != nil {
								return err
							}
							got64[r] = b
							return nil
						})
						if len(errs) > 0 {
							t.Fatalf("%s: %v", name, errs)
						}
						ul := map[bool]float64{true: 1}[op == Mean]
						checkResult(t, got32, want, op, ul)
						checkResult(t, got64, want, op, ul)
					}
				}
			}
		}
	}
}

func TestProcessesCollectives(t *testing.T) {
	gs := openProcesses(t, "host", 3, 2)
	const N, m = 6, 1001
	errs := onAllRanks(gs, func(c *Comm) error {
		ctx := context.Background()
		r := c.Rank()
		send := make([]float64, m*N)
		for i := range send {
			send[i] = float64(r + i)
		}
		part := make([]float64, m)
		if err := ReduceScatter(ctx, c, send, part, Sum); err != nil {
			return err
		}
		for i, v := range part {
			j := r*m + i
			if want := float64(N*j + 15); v != want {
				return fmt.Errorf("ReduceScatter element %d: %v, want %v", i, v, want)
			}
		}
		all := make([]float64, m*N)
		if err := AllGather(ctx, c, part, all); err != nil {
			return err
		}
		for j, v := range all {
			if want := float64(N*j + 15); v != want {
				return fmt.Errorf("AllGather element %d: %v, want %v", j, v, want)
			}
		}
		b := make([]float32, 3000)
		if r == 4 {
			for i := range b {
				b[i] = float32(i)
			}
		}
		if err := Broadcast(ctx, c, b, 4); err != nil {
			return err
		}
		for i, v := range b {
			if v != float32(i) {
				return fmt.Errorf("Broadcast element %d: %v", i, v)
			}
		}
		var recv []float64
		if r == 5 {
			recv = make([]float64, m*N)
		}
		if err := Reduce(ctx, c, send, recv, Max, 5); err != nil {
			return err
		}
		if r == 5 && recv[0] != 5 {
			return fmt.Errorf("Reduce: %v", recv[0])
		}
		// Point to point across processes: 0 -> 3 -> 5.
		msg := make([]float64, 9000)
		switch r {
		case 0:
			for i := range msg {
				msg[i] = float64(i)
			}
			if err := Send(ctx, c, msg, 3); err != nil {
				return err
			}
		case 3:
			if err := Recv(ctx, c, msg, 0); err != nil {
				return err
			}
			if err := Send(ctx, c, msg, 5); err != nil {
				return err
			}
		case 5:
			if err := Recv(ctx, c, msg, 3); err != nil {
				return err
			}
			if msg[8999] != 8999 {
				return fmt.Errorf("Recv: %v", msg[8999])
			}
		}
		return Barrier(ctx, c)
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
}

// TestProcessesMismatchAndTimeout: a mismatch in another process is found
// before data moves; a process that never calls makes the others time out.
func TestProcessesMismatchAndTimeout(t *testing.T) {
	gs := openProcesses(t, "host", 2, 2, func(o *Options) { o.Config.CommunicationTimeout = 500 * time.Millisecond })
	errs := onAllRanks(gs, func(c *Comm) error {
		n := 10
		if c.Rank() == 3 {
			n = 11
		}
		return AllReduce(context.Background(), c, make([]float32, n), Sum)
	})
	if len(errs) != 4 {
		t.Fatalf("%d errors, want 4: %v", len(errs), errs)
	}
	for _, err := range errs {
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("%v, want ErrMismatch", err)
		}
	}
	// Process 1 never calls: process 0's ranks time out.
	start := time.Now()
	var wg sync.WaitGroup
	res := make([]error, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res[i] = AllReduce(context.Background(), gs[0].Comm(i), make([]float32, 10), Sum)
		}(i)
	}
	wg.Wait()
	for _, err := range res {
		if !errors.Is(err, ErrTimeout) {
			t.Errorf("%v, want ErrTimeout", err)
		}
	}
	if el := time.Since(start); el > time.Second+250*time.Millisecond {
		t.Errorf("timed out after %v", el)
	}
}
