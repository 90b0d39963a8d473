package collective

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func collRanks(bk string) []int {
	if bk == "host" || fullRun() {
		return []int{1, 2, 3, 4, 5, 7, 8}
	}
	return []int{1, 3, 4}
}

// detModes are the deterministic settings TestReduceScatterAllGather and
// TestBroadcastReduce run on ranks ranks: both, or in the race run one,
// alternating with the rank count (the run without the race detector takes
// both).
func detModes(ranks int) []bool {
	if raceShort() {
		return []bool{ranks%2 == 0}
	}
	return []bool{false, true}
}

func TestReduceScatterAllGather(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for _, ranks := range collRanks(bk) {
			for _, det := range detModes(ranks) {
				g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 4096; o.Config.Deterministic = det })
				for _, m := range []int{0, 1, ranks + 1, 4097} {
					for _, op := range allOps {
						t.Run(fmt.Sprintf("%s/ranks=%d/det=%v/m=%d/%s", bk, ranks, det, m, op), func(t *testing.T) {
							inputs := make([][]float64, ranks)
							for r := range inputs {
								inputs[r] = make([]float64, m*ranks)
								for i := range inputs[r] {
									inputs[r][i] = exactInput(op, r, i)
								}
							}
							want := refReduce(inputs, op)
							send32 := make([][]float32, ranks)
							recv32 := make([][]float32, ranks)
							send64 := make([][]float64, ranks)
							recv64 := make([][]float64, ranks)
							for r := range inputs {
								recv32[r] = make([]float32, m)
								recv64[r] = make([]float64, m)
								send64[r] = append([]float64(nil), inputs[r]...)
								for _, v := range inputs[r] {
									send32[r] = append(send32[r], float32(v))
								}
							}
							noErrors(t, onRanks(g, func(c *Comm) error {
								if err := ReduceScatter(context.Background(), c, send32[c.Rank()], recv32[c.Rank()], op); err != nil {
									return err
								}
								return ReduceScatter(context.Background(), c, send64[c.Rank()], recv64[c.Rank()], op)
							}))
							for r := 0; r < ranks; r++ {
								w := want[r*m : (r+1)*m]
								checkResult(t, [][]float32{recv32[r]}, w, op, map[bool]float64{true: 1}[op == Mean])
								checkResult(t, [][]float64{recv64[r]}, w, op, map[bool]float64{true: 1}[op == Mean])
							}
							// AllGather the scattered chunks back: every rank gets the whole result.
							all32 := make([][]float32, ranks)
							all64 := make([][]float64, ranks)
							noErrors(t, onRanks(g, func(c *Comm) error {
								all32[c.Rank()] = make([]float32, m*ranks)
								all64[c.Rank()] = make([]float64, m*ranks)
								if err := AllGather(context.Background(), c, recv32[c.Rank()], all32[c.Rank()]); err != nil {
									return err
								}
								return AllGather(context.Background(), c, recv64[c.Rank()], all64[c.Rank()])
							}))
							checkResult(t, all32, want, op, map[bool]float64{true: 1}[op == Mean])
							checkResult(t, all64, want, op, map[bool]float64{true: 1}[op == Mean])
						})
					}
				}
			}
		}
	}
}

func TestBroadcastReduce(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for _, ranks := range collRanks(bk) {
			for _, det := range detModes(ranks) {
				g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 4096; o.Config.Deterministic = det })
				for _, n := range []int{0, 1, ranks - 1, 4097, 10007} {
					for root := 0; root < ranks; root += 1 + ranks/3 {
						t.Run(fmt.Sprintf("%s/ranks=%d/det=%v/n=%d/root=%d", bk, ranks, det, n, root), func(t *testing.T) {
							data := make([][]float64, ranks)
							for r := range data {
								data[r] = make([]float64, n)
								for i := range data[r] {
									data[r][i] = float64(r*1000 + i%977)
								}
							}
							want := append([]float64(nil), data[root]...)
							noErrors(t, onRanks(g, func(c *Comm) error {
								return Broadcast(context.Background(), c, data[c.Rank()], root)
							}))
							checkResult(t, data, want, Sum, 0)
							for _, op := range allOps {
								inputs := make([][]float64, ranks)
								for r := range inputs {
									inputs[r] = make([]float64, n)
									for i := range inputs[r] {
										inputs[r][i] = exactInput(op, r, i)
									}
								}
								wantR := refReduce(inputs, op)
								send := make([][]float32, ranks)
								for r := range send {
									for _, v := range inputs[r] {
										send[r] = append(send[r], float32(v))
									}
								}
								recv := make([]float32, n)
								noErrors(t, onRanks(g, func(c *Comm) error {
									var rv []float32
									if c.Rank() == root {
										rv = recv
									}
									return Reduce(context.Background(), c, send[c.Rank()], rv, op, root)
								}))
								checkResult(t, [][]float32{recv}, wantR, op, map[bool]float64{true: 1}[op == Mean])
							}
						})
					}
				}
			}
		}
	}
}

func TestSendRecv(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3, func(o *Options) { o.ChunkBytes = 4096 })
		// A pipeline 0 -> 1 -> 2 of several messages, sizes 0 .. several slices.
		sizes := []int{0, 1, 1023, 1024, 5000}
		got := make([][]float64, len(sizes))
		noErrors(t, onRanks(g, func(c *Comm) error {
			ctx := context.Background()
			for i, n := range sizes {
				buf := make([]float64, n)
				switch c.Rank() {
				case 0:
					for j := range buf {
						buf[j] = float64(i*100000 + j)
					}
					if err := Send(ctx, c, buf, 1); err != nil {
						return err
					}
				case 1:
					if err := Recv(ctx, c, buf, 0); err != nil {
						return err
					}
					for j := range buf {
						buf[j] += 0.5
					}
					if err := Send(ctx, c, buf, 2); err != nil {
						return err
					}
				case 2:
					if err := Recv(ctx, c, buf, 1); err != nil {
						return err
					}
					got[i] = buf
				}
			}
			return nil
		}))
		for i, n := range sizes {
			for j := 0; j < n; j++ {
				if got[i][j] != float64(i*100000+j)+0.5 {
					t.Fatalf("%s: message %d element %d: got %v", bk, i, j, got[i][j])
				}
			}
		}
		// A Recv that expects another length fails with a mismatch naming both.
		errs := onRanks(g, func(c *Comm) error {
			switch c.Rank() {
			case 0:
				return Send(context.Background(), c, make([]float32, 10), 2)
			case 2:
				return Recv(context.Background(), c, make([]float32, 11), 0)
			}
			return nil
		})
		if !errors.Is(errs[2], ErrMismatch) {
			t.Errorf("%s: Recv of the wrong length: %v", bk, errs[2])
		}
	}
}

func TestCollectiveArgumentErrors(t *testing.T) {
	g := openGroup(t, "host", 2)
	ctx := context.Background()
	errs := onRanks(g, func(c *Comm) error {
		return ReduceScatter(ctx, c, make([]float32, 5), make([]float32, 2), Sum)
	})
	for r, err := range errs {
		if !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrMismatch) {
			t.Errorf("rank %d: bad ReduceScatter lengths: %v", r, err)
		}
	}
	errs = onRanks(g, func(c *Comm) error { return Broadcast(ctx, c, make([]float64, 3), 2) })
	for r, err := range errs {
		if !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrMismatch) {
			t.Errorf("rank %d: Broadcast root out of range: %v", r, err)
		}
	}
	errs = onRanks(g, func(c *Comm) error { return Broadcast(ctx, c, make([]float64, 3), c.Rank()) })
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("rank %d: Broadcast with different roots: %v", r, err)
		}
	}
	// The group still works after a collective's argument errors.
	noErrors(t, onRanks(g, func(c *Comm) error { return Barrier(ctx, c) }))
	// A refused point-to-point call breaks it, naming itself: a peer
	// may be waiting for its operation.
	if err := Send(ctx, g.Comm(0), []float32{1}, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Send to self: %v", err)
	}
	for r, err := range onRanks(g, func(c *Comm) error { return Barrier(ctx, c) }) {
		var be *BrokenError
		if !errors.As(err, &be) || be.Rank != 0 || be.Op != "Send" || be.Seq != 1 || !be.P2P || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("rank %d: Barrier after a refused Send: %v, want the group broken by rank 0's Send (point-to-point call #1)", r, err)
		}
	}
}

// TestInPlaceScatterGather: recv inside send, as NCCL's in-place forms.
func TestInPlaceScatterGather(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		const ranks, m = 3, 1001
		g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 4096 })
		bufs := make([][]float32, ranks)
		for r := range bufs {
			bufs[r] = make([]float32, m*ranks)
			for i := range bufs[r] {
				bufs[r][i] = float32(exactInput(Sum, r, i))
			}
		}
		inputs := make([][]float64, ranks)
		for r := range inputs {
			for _, v := range bufs[r] {
				inputs[r] = append(inputs[r], float64(v))
			}
		}
		want := refReduce(inputs, Sum)
		noErrors(t, onRanks(g, func(c *Comm) error {
			b := bufs[c.Rank()]
			mine := b[c.Rank()*m : (c.Rank()+1)*m]
			if err := ReduceScatter(context.Background(), c, b, mine, Sum); err != nil {
				return err
			}
			return AllGather(context.Background(), c, mine, b)
		}))
		checkResult(t, bufs, want, Sum, 0)
	}
}
