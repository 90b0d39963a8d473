package collective

import (
	"fmt"
	"slices"
	"testing"
)

// TestShareDeviceStrategies runs every strategy, op and dtype for 3 ranks
// that share one logical Vulkan device (the default; on lavapipe also one
// queue), at a few sizes, against the float64 reference.
func TestShareDeviceStrategies(t *testing.T) {
	if !slices.Contains(backendsUnderTest(t), "vulkan") {
		t.Skip("vulkan backend not available")
	}
	const ranks = 3
	g := openGroup(t, "vulkan", ranks, func(o *Options) {
		o.ChunkBytes = 4096
		o.Config.LocalGroupSize = 2
	})
	for _, n := range []int{0, 1, ranks + 1, 4097} {
		for _, s := range allStrategies {
			for _, op := range allOps {
				inputs := make([][]float64, ranks)
				for r := range inputs {
					inputs[r] = make([]float64, n)
					for i := range inputs[r] {
						inputs[r][i] = exactInput(op, r, i)
					}
				}
				want := refReduce(inputs, op)
				maxUlps := 0.0
				if op == Mean {
					maxUlps = 1
				}
				name := fmt.Sprintf("n=%d/%s/%s", n, s, op)
				t.Run(name+"/float", func(t *testing.T) {
					checkResult(t, runWith[float32](t, g, inputs, op, s, n%2 == 0), want, op, maxUlps)
				})
				t.Run(name+"/double", func(t *testing.T) {
					checkResult(t, runWith[float64](t, g, inputs, op, s, n%2 == 1), want, op, maxUlps)
				})
			}
		}
	}
}
