package collective

import (
	"context"
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// TestHostBufferPinned: collectives on pinned host buffers give the same
// results as on plain slices, and move the data by device copies from the
// imported memory instead of staged writes.
func TestHostBufferPinned(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		const ranks, n = 3, 10007
		g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 16384 })
		bufs := make([]*HostBuffer[float32], ranks)
		outs := make([]*HostBuffer[float32], ranks)
		for r := range bufs {
			var err error
			if bufs[r], err = NewHostBuffer[float32](n); err != nil {
				t.Fatal(err)
			}
			if outs[r], err = NewHostBuffer[float32](n); err != nil {
				t.Fatal(err)
			}
			defer bufs[r].Close()
			defer outs[r].Close()
		}
		_, importer := g.devs[0].(backend.Importer)
		for _, s := range []Strategy{Ring, Tree, Direct, Pipelined} {
			t.Run(fmt.Sprintf("%s/%s", bk, s), func(t *testing.T) {
				inputs := make([][]float64, ranks)
				for r := range inputs {
					inputs[r] = make([]float64, n)
					for i := range inputs[r] {
						inputs[r][i] = exactInput(Sum, r, i)
						bufs[r].Data[i] = float32(inputs[r][i])
					}
				}
				before := g.counters(0)
				noErrors(t, onRanks(g, func(c *Comm) error {
					return AllReduceWith(context.Background(), c, bufs[c.Rank()].Data, outs[c.Rank()].Data, Sum, s)
				}))
				got := make([][]float32, ranks)
				for r := range got {
					got[r] = outs[r].Data
				}
				checkResult(t, got, refReduce(inputs, Sum), Sum, 0)
				d := g.counters(0).Sub(before)
				t.Logf("%s %s: %+v", bk, s, d)
				if s != Direct && s != Pipelined && importer && d.BytesCopied < 2*n*4 {
					t.Errorf("pinned upload and download were not device copies: %+v", d)
				}
				slice := int64(ranks * 4 * (n / ranks)) // rank 0's slice, written to every rank
				_, multi := g.devs[0].Stream().(backend.MultiReducer)
				if (s == Direct || s == Pipelined) && importer && (d.BytesWritten != 0 || d.BytesRead != 0 ||
					(multi && (d.Copies != 0 || d.BytesReduced != slice || d.BytesFromHost != slice || d.BytesToHost != slice)) ||
					(!multi && d.BytesCopied != slice)) {
					// Zero-copy: one ReduceMulti pass reads the pinned
					// inputs and writes the pinned outputs (without it, a
					// kernel reads them and device copies write them); no
					// staging at all.
					t.Errorf("pinned direct staged data: %+v", d)
				}
			})
		}
	}
	// In place, zero-copy.
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 4)
		bufs := make([]*HostBuffer[float64], 4)
		for r := range bufs {
			bufs[r], _ = NewHostBuffer[float64](5001)
			defer bufs[r].Close()
			for i := range bufs[r].Data {
				bufs[r].Data[i] = float64(r*i) + 0.5
			}
		}
		noErrors(t, onRanks(g, func(c *Comm) error {
			return AllReduceWith(context.Background(), c, bufs[c.Rank()].Data, bufs[c.Rank()].Data, Mean, Pipelined)
		}))
		for r := range bufs {
			for i, v := range bufs[r].Data {
				if want := float64(6*i)/4 + 0.5; v != want {
					t.Fatalf("%s rank %d element %d: %v, want %v", bk, r, i, v, want)
				}
			}
		}
	}
	if _, err := NewHostBuffer[float64](-1); err == nil {
		t.Error("negative length accepted")
	}
	h, err := NewHostBuffer[float64](0)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}
