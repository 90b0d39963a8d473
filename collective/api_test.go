package collective

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGatherVScatterV draws per-rank counts (0 and sizes around the
// 256-byte slot among them), shuffled offsets with gaps, roots, rank counts
// and in-place layouts at random (the seed is printed), and checks GatherV
// and ScatterV exactly against a plain loop, elements outside the ranges
// keeping their sentinel.
func TestGatherVScatterV(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	sizes := []int{0, 1, 31, 32, 33, 64, 65, 200}
	ctx := context.Background()
	for _, bk := range backendsUnderTest(t) {
		for _, N := range []int{1, 2, 3, 5} {
			g := openGroup(t, bk, N, func(o *Options) { o.ChunkBytes = 256 })
			for tc := 0; tc < 4; tc++ {
				root := rng.IntN(N)
				inPlace := rng.IntN(3) == 0
				counts := make([]int, N)
				for j := range counts {
					counts[j] = sizes[rng.IntN(len(sizes))]
				}
				displs, total := vLayout(rng, counts)
				// GatherV: rank j sends counts[j] elements j*1e6+e.
				sends := make([][]int64, N)
				for j := range sends {
					sends[j] = make([]int64, counts[j])
					for e := range sends[j] {
						sends[j][e] = int64(j*1000000 + e)
					}
				}
				recv := make([]int64, total)
				for e := range recv {
					recv[e] = -1
				}
				want := slices.Clone(recv)
				for j := range sends {
					copy(want[displs[j]:], sends[j])
				}
				if inPlace {
					copy(recv[displs[root]:], sends[root])
				}
				noErrors(t, onRanks(g, func(c *Comm) error {
					r := c.Rank()
					if r != root {
						return GatherV(ctx, c, sends[r], nil, nil, nil, root)
					}
					send := sends[r]
					if inPlace {
						send = recv[displs[r] : displs[r]+counts[r]]
					}
					return GatherV(ctx, c, send, recv, counts, displs, root)
				}))
				if !slices.Equal(recv, want) {
					t.Fatalf("%s N=%d root=%d counts=%v displs=%v inPlace=%v: GatherV got %v, want %v", bk, N, root, counts, displs, inPlace, recv, want)
				}
				// ScatterV: root's send holds the ranges, rank j receives
				// counts[j] of them.
				send := make([]float32, total)
				for e := range send {
					send[e] = float32(e) + 0.5
				}
				recvs := make([][]float32, N)
				for j := range recvs {
					recvs[j] = make([]float32, counts[j])
				}
				noErrors(t, onRanks(g, func(c *Comm) error {
					r := c.Rank()
					if r != root {
						return ScatterVAsync(ctx, c, nil, recvs[r], nil, nil, root).Wait(ctx)
					}
					rv := recvs[r]
					if inPlace {
						rv = send[displs[r] : displs[r]+counts[r]]
					}
					return ScatterV(ctx, c, send, rv, counts, displs, root)
				}))
				for j := range recvs {
					got := recvs[j]
					if inPlace && j == root {
						got = send[displs[j] : displs[j]+counts[j]]
					}
					if !slices.Equal(got, send[displs[j]:displs[j]+counts[j]]) {
						t.Fatalf("%s N=%d root=%d counts=%v displs=%v: ScatterV rank %d got %v", bk, N, root, counts, displs, j, got)
					}
				}
			}
		}
	}
}

// TestGatherVMismatch: a rank whose len(send) differs from root's counts
// fails every rank with a *MismatchError, root's recv untouched, and the
// group stays usable; bad counts at root are ErrInvalidArgument there.
func TestGatherVMismatch(t *testing.T) {
	ctx := context.Background()
	g := openGroup(t, "host", 3, func(*Options) {})
	recv := []float64{-1, -1, -1, -1, -1, -1}
	errs := onRanks(g, func(c *Comm) error {
		n := 2
		if c.Rank() == 2 {
			n = 1
		}
		send := make([]float64, n)
		if c.Rank() == 0 {
			return GatherV(ctx, c, send, recv, []int{2, 2, 2}, []int{0, 2, 4}, 0)
		}
		return GatherV(ctx, c, send, nil, nil, nil, 0)
	})
	for r, err := range errs {
		var me *MismatchError
		if !errors.As(err, &me) {
			t.Fatalf("rank %d: %v, want a *MismatchError", r, err)
		}
	}
	if !slices.Equal(recv, []float64{-1, -1, -1, -1, -1, -1}) {
		t.Fatalf("recv written by a failed GatherV: %v", recv)
	}
	errs = onRanks(g, func(c *Comm) error {
		if c.Rank() == 1 {
			return ScatterV(ctx, c, make([]float64, 3), make([]float64, 1), []int{1, 1}, []int{0, 1}, 1)
		}
		return ScatterV(ctx, c, nil, make([]float64, 1), nil, nil, 1)
	})
	if !errors.Is(errs[1], ErrInvalidArgument) {
		t.Fatalf("root: %v, want ErrInvalidArgument", errs[1])
	}
	for _, r := range []int{0, 2} {
		if errs[r] == nil {
			t.Fatalf("rank %d: nil after root's invalid arguments", r)
		}
	}
	noErrors(t, onRanks(g, func(c *Comm) error { return Barrier(ctx, c) }))
}

// TestAsyncEveryCollective starts the asynchronous form of every
// collective on host slices back to back on every rank, waits for them
// with WaitAll, and checks each result against the synchronous form's
// (they run in the order they were started); Test and WaitAny report them.
func TestAsyncEveryCollective(t *testing.T) {
	ctx := context.Background()
	for _, bk := range backendsUnderTest(t) {
		const N, m = 3, 5
		g := openGroup(t, bk, N)
		type res struct{ rs, ag, bc, rd, ga, sc, aa, aav, agv, rsv, gv, sv []int32 }
		run := func(async bool) []res {
			out := make([]res, N)
			noErrors(t, onRanks(g, func(c *Comm) error {
				r := c.Rank()
				in := make([]int32, N*m)
				for e := range in {
					in[e] = int32(100*r + e)
				}
				o := &out[r]
				o.rs, o.ag, o.bc = make([]int32, m), make([]int32, N*m), slices.Clone(in)
				o.rd, o.ga, o.sc = make([]int32, N*m), make([]int32, N*N*m), make([]int32, m)
				o.aa, o.aav, o.agv = make([]int32, N*m), make([]int32, N*m), make([]int32, N*m)
				o.rsv, o.gv, o.sv = make([]int32, m), make([]int32, N*m), make([]int32, m)
				cnt := []int{m, m, m}
				dsp := []int{0, m, 2 * m}
				if !async {
					return errors.Join(
						ReduceScatter(ctx, c, in, o.rs, Sum),
						AllGather(ctx, c, in[:m], o.ag),
						Broadcast(ctx, c, o.bc, 1),
						Reduce(ctx, c, in, o.rd, Max, 2),
						Gather(ctx, c, in, o.ga, 0),
						Scatter(ctx, c, in, o.sc, 1),
						AllToAll(ctx, c, in, o.aa),
						AllToAllV(ctx, c, in, cnt, dsp, o.aav, cnt, dsp),
						AllGatherV(ctx, c, in[:m], o.agv, cnt, dsp),
						ReduceScatterV(ctx, c, in, o.rsv, cnt, dsp, Min),
						GatherV(ctx, c, in[:m], o.gv, cnt, dsp, 2),
						ScatterV(ctx, c, in, o.sv, cnt, dsp, 0))
				}
				ws := []Work{
					ReduceScatterAsync(ctx, c, in, o.rs, Sum),
					AllGatherAsync(ctx, c, in[:m], o.ag),
					BroadcastAsync(ctx, c, o.bc, 1),
					ReduceAsync(ctx, c, in, o.rd, Max, 2),
					GatherAsync(ctx, c, in, o.ga, 0),
					ScatterAsync(ctx, c, in, o.sc, 1),
					AllToAllAsync(ctx, c, in, o.aa),
					AllToAllVAsync(ctx, c, in, cnt, dsp, o.aav, cnt, dsp),
					AllGatherVAsync(ctx, c, in[:m], o.agv, cnt, dsp),
					ReduceScatterVAsync(ctx, c, in, o.rsv, cnt, dsp, Min),
					GatherVAsync(ctx, c, in[:m], o.gv, cnt, dsp, 2),
					ScatterVAsync(ctx, c, in, o.sv, cnt, dsp, 0),
				}
				if err := WaitAll(ctx, ws...); err != nil {
					return err
				}
				for i, w := range ws {
					if done, err := w.Test(); !done || err != nil {
						t.Errorf("rank %d: Work %d Test = %v, %v after WaitAll", r, i, done, err)
					}
				}
				if i, err := WaitAny(ctx, Work{}, ws[3], ws[0]); i != 1 || err != nil {
					t.Errorf("rank %d: WaitAny = %d, %v, want 1, nil", r, i, err)
				}
				return nil
			}))
			return out
		}
		sync, async := run(false), run(true)
		for r := range sync {
			if a, b := sync[r], async[r]; !slices.Equal(a.rs, b.rs) || !slices.Equal(a.ag, b.ag) || !slices.Equal(a.bc, b.bc) ||
				!slices.Equal(a.rd, b.rd) || !slices.Equal(a.ga, b.ga) || !slices.Equal(a.sc, b.sc) || !slices.Equal(a.aa, b.aa) ||
				!slices.Equal(a.aav, b.aav) || !slices.Equal(a.agv, b.agv) || !slices.Equal(a.rsv, b.rsv) || !slices.Equal(a.gv, b.gv) ||
				!slices.Equal(a.sv, b.sv) {
				t.Fatalf("%s rank %d: async results %+v differ from sync %+v", bk, r, b, a)
			}
		}
		// Independent checks of a few: ReduceScatter's sum and GatherV.
		for r := range sync {
			for e := 0; e < m; e++ {
				want := int32(0)
				for q := 0; q < N; q++ {
					want += int32(100*q + r*m + e)
				}
				if sync[r].rs[e] != want {
					t.Fatalf("%s rank %d ReduceScatter[%d] = %d, want %d", bk, r, e, sync[r].rs[e], want)
				}
			}
		}
		for q := 0; q < N; q++ {
			for e := 0; e < m; e++ {
				if got := sync[2].gv[q*m+e]; got != int32(100*q+e) {
					t.Fatalf("%s GatherV at root [%d] = %d, want %d", bk, q*m+e, got, 100*q+e)
				}
			}
		}
	}
}

// TestWaitAnyAll: WaitAny returns the index of the Work that finished,
// -1 with no Work, and ctx's error when ctx ends first; WaitAll joins the
// errors and honours ctx.
func TestWaitAnyAll(t *testing.T) {
	if i, err := WaitAny(context.Background()); i != -1 || err != nil {
		t.Fatalf("WaitAny() = %d, %v", i, err)
	}
	if err := WaitAll(context.Background(), Work{}); err != nil {
		t.Fatalf("WaitAll(nil) = %v", err)
	}
	boom := errors.New("boom")
	rec := new(workRec)
	rec.end.Init(nil)
	pending := Work{rec.end.Start()}
	rec.end.Let()
	failed := failedWork(boom)
	if i, err := WaitAny(context.Background(), pending, Work{}, failed); i != 2 || !errors.Is(err, boom) {
		t.Fatalf("WaitAny = %d, %v, want 2, boom", i, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if i, err := WaitAny(ctx, pending); i != -1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitAny of a pending Work = %d, %v, want -1, DeadlineExceeded", i, err)
	}
	if err := WaitAll(ctx, failed, pending); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitAll with a pending Work = %v, want DeadlineExceeded", err)
	}
	if done, _ := pending.Test(); done {
		t.Fatal("Test of a pending Work reports done")
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		rec.end.Finish(boom)
	}()
	if i, err := WaitAny(context.Background(), Work{}, pending); i != 1 || !errors.Is(err, boom) {
		t.Fatalf("WaitAny = %d, %v, want 1, boom", i, err)
	}
	if err := WaitAll(context.Background(), failed, pending); !errors.Is(err, boom) {
		t.Fatalf("WaitAll = %v, want boom", err)
	}
}

// TestAsyncTensorForms: the Async form of every tensor collective, started
// back to back on every rank and waited for with WaitAll, gives the
// synchronous form's results.
func TestAsyncTensorForms(t *testing.T) {
	ctx := context.Background()
	for _, bk := range backendsUnderTest(t) {
		const N, m = 3, 4
		g := openGroup(t, bk, N)
		const forms = 10
		run := func(async bool) [][forms][]float32 {
			out := make([][forms][]float32, N)
			noErrors(t, onRanks(g, func(c *Comm) error {
				r := c.Rank()
				in := make([]float32, N*m)
				for e := range in {
					in[e] = float32(10*r + e)
				}
				send, err := NewTensor[float32](c, N*m)
				if err != nil {
					return err
				}
				defer send.Close()
				if err := send.Upload(in); err != nil {
					return err
				}
				lens := [forms]int{m, N * m, N * m, N * m, N * N * m, m, N * m, N * m, m, N * m}
				var ts [forms]*Tensor[float32]
				for i, n := range lens {
					if ts[i], err = NewTensor[float32](c, n); err != nil {
						return err
					}
					defer ts[i].Close()
				}
				if err := ts[2].Upload(in); err != nil { // broadcast in place
					return err
				}
				cnt, dsp := []int{m, m, m}, []int{0, m, 2 * m}
				part, err := NewTensor[float32](c, m)
				if err != nil {
					return err
				}
				defer part.Close()
				if err := part.Upload(in[:m]); err != nil {
					return err
				}
				if async {
					err = WaitAll(ctx,
						ReduceScatterTensorAsync(ctx, c, send, ts[0], Sum),
						AllGatherTensorAsync(ctx, c, part, ts[1]),
						BroadcastTensorAsync(ctx, c, ts[2], 1),
						ReduceTensorAsync(ctx, c, send, ts[3], Max, 2),
						GatherTensorAsync(ctx, c, send, ts[4], 0),
						ScatterTensorAsync(ctx, c, send, ts[5], 1),
						AllToAllTensorAsync(ctx, c, send, ts[6]),
						AllToAllVTensorAsync(ctx, c, send, cnt, dsp, ts[7], cnt, dsp),
						ReduceScatterVTensorAsync(ctx, c, send, ts[8], cnt, dsp, Min),
						AllGatherVTensorAsync(ctx, c, part, ts[9], cnt, dsp))
				} else {
					err = errors.Join(
						ReduceScatterTensor(ctx, c, send, ts[0], Sum),
						AllGatherTensor(ctx, c, part, ts[1]),
						BroadcastTensor(ctx, c, ts[2], 1),
						ReduceTensor(ctx, c, send, ts[3], Max, 2),
						GatherTensor(ctx, c, send, ts[4], 0),
						ScatterTensor(ctx, c, send, ts[5], 1),
						AllToAllTensor(ctx, c, send, ts[6]),
						AllToAllVTensor(ctx, c, send, cnt, dsp, ts[7], cnt, dsp),
						ReduceScatterVTensor(ctx, c, send, ts[8], cnt, dsp, Min),
						AllGatherVTensor(ctx, c, part, ts[9], cnt, dsp))
				}
				if err != nil {
					return err
				}
				for i, tt := range ts {
					out[r][i] = make([]float32, lens[i])
					if err := tt.Download(out[r][i]); err != nil {
						return err
					}
				}
				return nil
			}))
			return out
		}
		sync, async := run(false), run(true)
		for r := range sync {
			for i := range sync[r] {
				if (i == 3 && r != 2) || (i == 4 && r != 0) {
					continue // a rooted form's recv off the root is not written
				}
				if !slices.Equal(sync[r][i], async[r][i]) {
					t.Fatalf("%s rank %d form %d: async %v, sync %v", bk, r, i, async[r][i], sync[r][i])
				}
			}
			// Independent: the broadcast of rank 1's input, the sum.
			for e := 0; e < N*m; e++ {
				if sync[r][2][e] != float32(10+e) {
					t.Fatalf("%s rank %d BroadcastTensor[%d] = %v", bk, r, e, sync[r][2][e])
				}
			}
			for e := 0; e < m; e++ {
				want := float32(0)
				for q := 0; q < N; q++ {
					want += float32(10*q + r*m + e)
				}
				if sync[r][0][e] != want {
					t.Fatalf("%s rank %d ReduceScatterTensor[%d] = %v, want %v", bk, r, e, sync[r][0][e], want)
				}
			}
		}
	}
}

// TestSplitIsItsOwnCall: Split's exchange is a call of its own kind: a
// rank calling Split while its peer calls an AllGather of the same shape
// fails on both with a *MismatchError naming Split (the exchange used to
// be a plain AllGather, which such a peer matched), and the group stays
// usable.
func TestSplitIsItsOwnCall(t *testing.T) {
	ctx := context.Background()
	g := openGroup(t, "host", 2)
	errs := onRanks(g, func(c *Comm) error {
		if c.Rank() == 0 {
			_, err := c.Split(ctx, 0, 0)
			return err
		}
		return AllGather(ctx, c, []int64{0, 0, 0}, make([]int64, 6))
	})
	for r, err := range errs {
		var me *MismatchError
		if !errors.As(err, &me) || !strings.Contains(err.Error(), "Split") {
			t.Fatalf("rank %d: %v, want a *MismatchError naming Split", r, err)
		}
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		sub, err := c.Split(ctx, c.Rank()%2, 0)
		if err == nil && sub.Size() != 1 {
			return fmt.Errorf("sub-group of %d ranks, want 1", sub.Size())
		}
		return err
	}))
}

// TestCancelledBeforeStart: a collective whose context ended before the
// call never runs, whatever the peers did: the rank's error matches the
// context's (and no sentinel but ErrTimeout for a deadline), the peers get
// ErrGroupBroken, in every one of many tries (it used to complete now and
// then when the peer had already arrived).
func TestCancelledBeforeStart(t *testing.T) {
	for i := 0; i < 40; i++ {
		g := openGroup(t, "host", 2)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		errs := onRanks(g, func(c *Comm) error {
			if c.Rank() == 1 {
				time.Sleep(time.Duration(i%4) * time.Millisecond) // the peer arrives first, sometimes
				return AllReduce(ctx, c, make([]float32, 10), Sum)
			}
			return AllReduce(context.Background(), c, make([]float32, 10), Sum)
		})
		if !errors.Is(errs[1], context.Canceled) || errors.Is(errs[1], ErrTimeout) || errors.Is(errs[1], ErrGroupBroken) {
			t.Fatalf("try %d: the cancelled rank: %v, want context.Canceled only", i, errs[1])
		}
		if !errors.Is(errs[0], ErrGroupBroken) || errors.Is(errs[0], context.Canceled) {
			t.Fatalf("try %d: its peer: %v, want ErrGroupBroken", i, errs[0])
		}
		g.Close()
	}
}
