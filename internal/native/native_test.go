package native

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/waitctx"
)

// one is a transport of one process: its native collectives copy (the
// sum of one process's partial result is itself), and count their calls.
type one struct {
	calls map[string]int
	fail  error
}

func (o *one) Name() string                                    { return "one" }
func (o *one) Rank() int                                       { return 0 }
func (o *one) Size() int                                       { return 1 }
func (o *one) Isend([]byte, int, int) (backend.Request, error) { return nil, errors.ErrUnsupported }
func (o *one) Irecv([]byte, int, int) (backend.Request, error) { return nil, errors.ErrUnsupported }
func (o *one) Close() error                                    { return nil }
func (o *one) Reduces(backend.DType, backend.Op) bool          { return true }
func (o *one) Drain(time.Duration) bool                        { return true }
func (o *one) mv(name string, dst, src []byte) error {
	o.calls[name]++
	if o.fail != nil {
		return o.fail
	}
	copy(dst, src)
	return nil
}
func (o *one) Allgather(_ context.Context, mine, all []byte) error {
	return o.mv("allgather", all, mine)
}
func (o *one) Allreduce(_ context.Context, s, r []byte, _ backend.DType, _ backend.Op) error {
	return o.mv("allreduce", r, s)
}
func (o *one) ReduceScatterBlock(_ context.Context, s, r []byte, _ backend.DType, _ backend.Op) error {
	return o.mv("reducescatter", r, s)
}
func (o *one) Reduce(_ context.Context, s, r []byte, _ backend.DType, _ backend.Op, _ int) error {
	return o.mv("reduce", r, s)
}
func (o *one) Bcast(context.Context, []byte, int) error      { o.calls["bcast"]++; return o.fail }
func (o *one) Alltoall(_ context.Context, s, r []byte) error { return o.mv("alltoall", r, s) }
func (o *one) Alltoallv(_ context.Context, s []byte, sc, sd []int, r []byte, rc, rd []int) error {
	if sc[0] != rc[0] {
		return fmt.Errorf("alltoallv: sending %d bytes, receiving %d", sc[0], rc[0])
	}
	return o.mv("alltoallv", r[rd[0]:rd[0]+rc[0]], s[sd[0]:sd[0]+sc[0]])
}

func i32s(b []byte) []int32 {
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func bytesOf(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// TestLeaderOneProcess: the leader of one process of L ranks combines its
// ranks' inputs (exact int32 sums, wrapping), in both modes and for each
// collective, through the transport's calls it names; a failed call is a
// *Failure naming it.
func TestLeaderOneProcess(t *testing.T) {
	const L, n = 3, 1001
	var w waitctx.Ctx
	w.Init(make(chan struct{}))
	defer w.Release()
	sends := make([][]byte, L)
	want := make([]int32, n)
	for r := range sends {
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(i*7919+r*104729) ^ int32(r<<30)
			want[i] += v[i]
		}
		sends[r] = bytesOf(v)
	}
	for _, det := range []bool{false, true} {
		tr := &one{calls: map[string]int{}}
		var pools Pools
		l := Leader{NC: tr, Tr: tr, P: 1, L: L, N: L, Det: det, Sends: sends, Pools: &pools, W: &w, Timeout: time.Minute}
		dst := make([]byte, 4*n)
		if err := l.Reduce(context.Background(), backend.I32, backend.Sum, 1, n, dst, -1); err != nil {
			t.Fatal(err)
		}
		for i, v := range i32s(dst) {
			if v != want[i] {
				t.Fatalf("det %v: AllReduce element %d: %d, want %d", det, i, v, want[i])
			}
		}
		m := n / L
		if err := l.ReduceScatter(context.Background(), backend.I32, backend.Sum, 1, m, nil); err != nil {
			t.Fatal(err)
		}
		for i, v := range i32s(pools.Blocks()[:4*L*m]) {
			if v != want[i] {
				t.Fatalf("det %v: ReduceScatter element %d: %d, want %d", det, i, v, want[i])
			}
		}
		recv := make([]byte, 4*L*m)
		if err := l.AllGather(context.Background(), 4*m, recv, nil); err != nil {
			t.Fatal(err)
		}
		for r := range L {
			if got, w := i32s(recv[4*r*m:4*(r+1)*m]), i32s(sends[r][:4*m]); !slices.Equal(got, w) {
				t.Fatalf("det %v: AllGather block %d differs", det, r)
			}
		}
		// Raw blocks: the AllReduce's Alltoall and all-gather (an
		// Alltoallv), the ReduceScatter's Alltoall, the AllGather's
		// Alltoallv.
		if det && (tr.calls["alltoall"] != 2 || tr.calls["alltoallv"] != 2 || tr.calls["allreduce"] != 0) {
			t.Errorf("deterministic: calls %v, want raw blocks only (2 alltoall, 2 alltoallv)", tr.calls)
		}
		if !det && (tr.calls["allreduce"] != 1 || tr.calls["reducescatter"] != 1 || tr.calls["alltoall"] != 0) {
			t.Errorf("calls %v, want 1 allreduce and 1 reducescatter", tr.calls)
		}
		tr.fail = errors.New("injected")
		var f *Failure
		if err := l.Bcast(context.Background(), dst, 0); !errors.As(err, &f) || f.Call != "MPI_Ibcast" || !errors.Is(err, tr.fail) || f.Why != nil {
			t.Errorf("failed Bcast: %v, want a *Failure of MPI_Ibcast wrapping the transport's error", err)
		}
	}
}

// TestFits: the block of one native call fits in a C int.
func TestFits(t *testing.T) {
	for _, c := range []struct {
		rs, ag, det bool
		L, P, n, es int
		want        bool
	}{
		{false, false, false, 4, 2, 1 << 40, 4, true}, // all-reduces are split into calls that fit
		{false, true, false, 1, 2, 1 << 29, 4, false}, // 2 GiB per rank
		{false, true, false, 1, 2, 1<<29 - 1, 4, true},
		{false, false, true, 2, 2, 1 << 30, 4, false}, // 2 ranks x 2 GiB chunks
		{true, false, true, 2, 4, 1 << 28, 4, false},  // 2 ranks x 1 GiB blocks: 2 GiB
		{true, false, true, 1, 4, 1 << 28, 4, true},
	} {
		if got := Fits(c.rs, c.ag, c.det, c.L, c.P, c.n, c.es); got != c.want {
			t.Errorf("%+v: Fits %v", c, got)
		}
	}
}

// held is one's native collectives with a Drain that reports whether the
// transport still holds memory (held), counting its calls.
type held struct {
	one
	holding bool
	drains  []time.Duration
}

func (h *held) Drain(limit time.Duration) bool {
	h.drains = append(h.drains, limit)
	return !h.holding
}

// TestPoolsDrain: a failed call whose memory the transport released comes
// back as it was, the pools kept; one whose memory it still holds past the
// limit comes back as a *LostError (errors.Is ErrTransportLost, the
// failure still matched), the pooled memory given up (never reused), and
// from then on Mark marks the process's other ranks' failures too.
func TestPoolsDrain(t *testing.T) {
	cause := &Failure{Call: "MPI_Iallreduce", Err: context.DeadlineExceeded, Why: waitctx.ErrTimeout}
	var p Pools
	a := get(&p.a, 64)
	if err := p.Drain(nil, time.Second, cause); err != cause {
		t.Errorf("Drain without native collectives = %v, want the failure as it is", err)
	}
	h := &held{one: one{calls: map[string]int{}}}
	if err := p.Drain(h, 3*time.Millisecond, cause); err != cause || len(h.drains) != 1 || h.drains[0] != 3*time.Millisecond {
		t.Errorf("Drain of released memory = %v (drains %v), want the failure as it is after one Drain(3ms)", err, h.drains)
	}
	if err := p.Mark(cause); err != cause {
		t.Errorf("Mark before any loss = %v, want the failure as it is", err)
	}
	if got := get(&p.a, 64); &got[0] != &a[0] {
		t.Error("the pooled memory was not reused after a clean drain")
	}
	h.holding = true
	err := p.Drain(h, time.Millisecond, cause)
	var le *LostError
	var f *Failure
	if !errors.As(err, &le) || !errors.Is(err, backend.ErrTransportLost) || !errors.As(err, &f) || f != cause ||
		!errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "may still write") {
		t.Errorf("Drain of held memory = %v; want a *LostError matching ErrTransportLost around the failure", err)
	}
	if p.a != nil || p.b != nil || p.c != nil {
		t.Error("the pooled memory the transport holds was kept for reuse")
	}
	if got := get(&p.a, 64); &got[0] == &a[0] {
		t.Error("memory the transport holds was handed out again")
	}
	other := errors.New("group broken")
	if err := p.Mark(other); !errors.Is(err, backend.ErrTransportLost) || !errors.Is(err, other) {
		t.Errorf("Mark after the loss = %v; want ErrTransportLost around the rank's error", err)
	}
	if err := p.Mark(nil); err != nil {
		t.Errorf("Mark(nil) = %v", err)
	}
}
