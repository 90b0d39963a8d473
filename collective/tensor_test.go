package collective

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestAllReduceTensor: device tensors reduce in place under every strategy;
// the ring moves exactly 2(N-1)/N of the tensor per rank through the
// exchange (no upload or download of the tensor itself).
func TestAllReduceTensor(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		const ranks = 4
		g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 4096; o.Config.LocalGroupSize = 2 })
		for _, n := range []int{0, 1, 3, 4097, 12288} {
			for _, s := range append([]Strategy{Auto}, allStrategies...) {
				t.Run(fmt.Sprintf("%s/n=%d/%s", bk, n, s), func(t *testing.T) {
					inputs := make([][]float64, ranks)
					for r := range inputs {
						inputs[r] = make([]float64, n)
						for i := range inputs[r] {
							inputs[r][i] = exactInput(Sum, r, i)
						}
					}
					want := refReduce(inputs, Mean)
					got := make([][]float32, ranks)
					before := make([]int64, ranks)
					beforeRecv := make([]int64, ranks)
					for r := range before {
						before[r], beforeRecv[r] = g.counters(r).BytesWritten, g.comms[r].recvBytes
					}
					noErrors(t, onRanks(g, func(c *Comm) error {
						tt, err := NewTensor[float32](c, n)
						if err != nil {
							return err
						}
						defer tt.Close()
						h := make([]float32, n)
						for i, v := range inputs[c.Rank()] {
							h[i] = float32(v)
						}
						if err := tt.Upload(h); err != nil {
							return err
						}
						if err := AllReduceTensor(context.Background(), c, tt, Mean, s); err != nil {
							return err
						}
						got[c.Rank()] = make([]float32, n)
						return tt.Download(got[c.Rank()])
					}))
					checkResult(t, got, want, Mean, 1)
					if s == Ring && n == 12288 {
						for r := range before {
							w := int64(2 * (ranks - 1) * n * 4 / ranks)
							if moved := g.comms[r].recvBytes - beforeRecv[r]; moved != w {
								t.Errorf("rank %d: ring moved %d bytes, want 2(N-1)/N * %d = %d", r, moved, n*4, w)
							}
							// From the host: the upload, and each slot
							// received unless the ranks share memory (their
							// devices read the senders' slots in place).
							wrote, fromHost := g.counters(r).BytesWritten-before[r], int64(n*4)+w
							if g.sharedMem {
								fromHost = int64(n * 4)
							}
							if wrote != fromHost {
								t.Errorf("rank %d: %d bytes written from the host, want %d (shared memory %v)", r, wrote, fromHost, g.sharedMem)
							}
						}
					}
				})
			}
		}
		// Broadcast a tensor from rank 2.
		noErrors(t, onRanks(g, func(c *Comm) error {
			tt, err := NewTensor[float64](c, 5000)
			if err != nil {
				return err
			}
			defer tt.Close()
			h := make([]float64, 5000)
			for i := range h {
				h[i] = float64(c.Rank()*10000 + i)
			}
			if err := tt.Upload(h); err != nil {
				return err
			}
			if err := BroadcastTensor(context.Background(), c, tt, 2); err != nil {
				return err
			}
			if err := tt.Download(h); err != nil {
				return err
			}
			for i, v := range h {
				if v != float64(20000+i) {
					return fmt.Errorf("rank %d element %d: %v", c.Rank(), i, v)
				}
			}
			return nil
		}))
	}
}

func TestTensorErrors(t *testing.T) {
	g := openGroup(t, "host", 2)
	if _, err := NewTensor[float32](g.Comm(0), -1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative length: %v", err)
	}
	tt, err := NewTensor[float32](g.Comm(0), 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := tt.Upload(make([]float32, 3)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("short upload: %v", err)
	}
	// A tensor of rank 0 used by rank 1.
	errs := onRanks(g, func(c *Comm) error { return AllReduceTensor(context.Background(), c, tt, Sum, Auto) })
	if !errors.Is(errs[1], ErrInvalidArgument) {
		t.Errorf("foreign tensor: %v", errs[1])
	}
	buf, off := tt.Buffer()
	w, err := WrapTensor[float32](g.Comm(0), buf, off+4, 3)
	if err != nil || w.Len() != 3 {
		t.Fatalf("WrapTensor: %v", err)
	}
	if _, err := WrapTensor[float64](g.Comm(0), buf, 0, 3); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("WrapTensor past the end: %v", err)
	}
	w.Close()
	tt.Close()
	if err := tt.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
