package collective

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestWarmup: after Warmup, Sum and Mean all-reduces of up to Warmup's size,
// f32 and f64, host slices with every strategy and device tensors, create no
// API object on any rank (no pipeline, no buffer): the set-up happened in
// Warmup. The results are still checked.
func TestWarmup(t *testing.T) {
	var layouts []string
	for _, bk := range backendsUnderTest(t) {
		layouts = append(layouts, bk)
		if bk == "vulkan" {
			layouts = append(layouts, "vulkan/per-rank")
		}
	}
	for _, bk := range layouts {
		const ranks = 3
		g := openGroup(t, strings.TrimSuffix(bk, "/per-rank"), ranks, func(o *Options) {
			o.Config.LocalGroupSize = 2
			o.DevicePerRank = strings.HasSuffix(bk, "/per-rank")
		})
		if err := g.Warmup(context.Background()); err != nil {
			t.Fatalf("%s: Warmup: %v", bk, err)
		}
		tensors := make([]*Tensor[float32], ranks)
		for r := range tensors {
			tt, err := NewTensor[float32](g.Comm(r), 1000)
			if err != nil {
				t.Fatal(err)
			}
			defer tt.Close()
			tensors[r] = tt
		}
		objects := func() int64 {
			var n int64
			for r := 0; r < ranks; r++ {
				n += g.counters(r).ObjectsCreated
			}
			return n
		}
		before := objects()
		for _, n := range []int{1, 1000, 3001, warmupElems * ranks} {
			for _, s := range append([]Strategy{Auto, Host}, allStrategies...) {
				for _, op := range []Op{Sum, Mean} {
					inputs := make([][]float64, ranks)
					for r := range inputs {
						inputs[r] = make([]float64, n)
						for i := range inputs[r] {
							inputs[r][i] = exactInput(op, r, i)
						}
					}
					name := fmt.Sprintf("%s/n=%d/%s/%s", bk, n, s, op)
					maxUlps := 0.0
					if op == Mean {
						maxUlps = 1
					}
					b0 := objects()
					checkResult(t, runWith[float32](t, g, inputs, op, s, true), refReduce(inputs, op), op, maxUlps)
					b1 := objects()
					checkResult(t, runWith[float64](t, g, inputs, op, s, false), refReduce(inputs, op), op, maxUlps)
					if b2 := objects(); b2 != b0 {
						t.Logf("%s: f32 %d, f64 %d objects", name, b1-b0, b2-b1)
					}
					if t.Failed() {
						t.Fatalf("%s: wrong result", name)
					}
				}
			}
		}
		noErrors(t, onRanks(g, func(c *Comm) error {
			return AllReduceTensor(context.Background(), c, tensors[c.Rank()], Mean, Auto)
		}))
		if d := objects() - before; d != 0 {
			t.Errorf("%s: %d API objects created after Warmup", bk, d)
		}
	}
}
