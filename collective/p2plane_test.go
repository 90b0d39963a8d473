package collective

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// postOutstanding has each rank of a pair post k SendAsync to the other,
// then k RecvAsync from it (k operations outstanding each way when the
// receives start), and waits for all of them. run runs f on both ranks.
func postOutstanding(ctx context.Context, run func(f func(c *Comm) error) []error, k int, bufs [2][]float32) error {
	errs := run(func(c *Comm) error {
		r := c.Rank()
		ws := make([]Work, 0, 2*k)
		for i := 0; i < k; i++ {
			ws = append(ws, SendAsync(ctx, c, bufs[r][i:i+1], 1-r))
		}
		for i := 0; i < k; i++ {
			ws = append(ws, RecvAsync(ctx, c, bufs[r][k+i:k+i+1], 1-r))
		}
		for _, w := range ws {
			if err := w.Wait(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	return errors.Join(errs...)
}

// laneWork sums the lanes' work counters of cs.
func laneWork(cs ...*Comm) (visits, passes uint64) {
	for _, c := range cs {
		v, p := c.lane.Work()
		visits += v
		passes += p
	}
	return visits, passes
}

// The lane's work per point-to-point operation is bounded, however many
// are outstanding: it counts the operations it visits, which must stay
// within a constant per operation (plus, with another process, one head
// per remote link and pass) when 2,000 operations each way are matched
// under a cancellable context, when 2,000 outstanding sends are received
// one blocking Recv at a time, when 2,000 pending receives are cancelled,
// and when 2,000 pending receives time out.
func TestP2PLaneWorkPerOp(t *testing.T) {
	const k = 2000
	var bufs [2][]float32
	for r := range bufs {
		bufs[r] = make([]float32, 2*k)
	}
	check := func(what string, v0, p0 uint64, cs []*Comm, ops int, remoteLinks uint64) {
		t.Helper()
		v, p := laneWork(cs...)
		v, p = v-v0, p-p0
		if limit := 4*uint64(ops) + remoteLinks*p; v > limit {
			t.Errorf("%s: the lanes visited %d operations in %d passes for %d operations (limit %d)", what, v, p, ops, limit)
		}
	}

	g := openGroup(t, "host", 2)
	pair := []*Comm{g.Comm(0), g.Comm(1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v0, p0 := laneWork(pair...)
	if err := postOutstanding(ctx, func(f func(c *Comm) error) []error { return onRanks(g, f) }, k, bufs); err != nil {
		t.Fatal(err)
	}
	check("in-process, matched", v0, p0, pair, 4*k, 0)

	// Outstanding sends drained by a receiver one blocking Recv at a time:
	// every completion wakes the sender's lane, with the rest pending.
	v0, p0 = laneWork(pair...)
	ws := make([]Work, k)
	for i := range ws {
		ws[i] = SendAsync(ctx, pair[0], bufs[0][i:i+1], 1)
	}
	for i := range ws {
		if err := Recv(ctx, pair[1], bufs[1][i:i+1], 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range ws {
		if err := w.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check("in-process, drained one at a time", v0, p0, pair, 2*k, 0)

	gs := openProcesses(t, "host", 2, 1)
	pair2 := []*Comm{gs[0].Comm(0), gs[1].Comm(0)}
	v0, p0 = laneWork(pair2...)
	if err := postOutstanding(ctx, func(f func(c *Comm) error) []error { return onAllRanks(gs, f) }, k/4, bufs); err != nil {
		t.Fatal(err)
	}
	// Each comm has two remote links (to and from its peer).
	check("2 processes, matched", v0, p0, pair2, k, 2)

	// Pending receives that fail: cancelled, or timed out.
	for _, mode := range []string{"cancelled", "timed out"} {
		g := openGroup(t, "host", 2, func(o *Options) { o.Config.CommunicationTimeout = 300 * time.Millisecond })
		c := g.Comm(0)
		ctx, cancel := context.WithCancel(context.Background())
		if mode == "timed out" {
			ctx = context.Background()
		}
		v0, p0 := laneWork(c)
		ws := make([]Work, k)
		for i := range ws {
			ws[i] = RecvAsync(ctx, c, bufs[0][i:i+1], 1)
		}
		if mode == "cancelled" {
			// (Unless the first already timed out on a loaded machine:
			// then the rest never all pend at once.)
			for (c.PendingAsync() != k || c.queue.Pending() != 0) && !ws[0].Done() {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}
		for i, w := range ws {
			if err := w.Wait(context.Background()); err == nil {
				t.Fatalf("%s: receive %d without a sender succeeded", mode, i)
			}
		}
		cancel()
		check(mode, v0, p0, []*Comm{c}, k, 0)
	}
}

// BenchmarkOutstandingP2P: the cost per point-to-point operation with 1,000
// and 10,000 outstanding each way between two ranks, of one process and of
// two (over the loopback transport). It stays flat: posting, matching,
// completing and the lane's passes cost O(1) per operation.
func BenchmarkOutstandingP2P(b *testing.B) {
	for _, world := range []string{"in-process", "2-processes"} {
		for _, k := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/outstanding=%d", world, k), func(b *testing.B) {
				var run func(f func(c *Comm) error) []error
				if world == "in-process" {
					g := openGroup(b, "host", 2)
					run = func(f func(c *Comm) error) []error { return onRanks(g, f) }
				} else {
					gs := openProcesses(b, "host", 2, 1)
					run = func(f func(c *Comm) error) []error { return onAllRanks(gs, f) }
				}
				var bufs [2][]float32
				for r := range bufs {
					bufs[r] = make([]float32, 2*k)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					if err := postOutstanding(ctx, run, k, bufs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*4*k), "ns/p2p-op")
			})
		}
	}
}
