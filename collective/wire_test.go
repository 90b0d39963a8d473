package collective

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// TestAllReduceWire: half and bfloat16 wire compression stay within
// WireErrorBound of the float64 sum, halve the bytes exchanged, and leave
// all ranks bitwise identical.
func TestAllReduceWire(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for _, ranks := range []int{2, 3, 5} {
			g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 4096 })
			if _, ok := g.devs[0].Stream().(backend.Compressor); !ok {
				t.Logf("%s has no compression kernels", bk)
				err := AllReduceWire(context.Background(), g.Comm(0), []float32{1}, Sum, backend.F16)
				if !errors.Is(err, ErrUnsupported) {
					t.Errorf("%s: %v, want ErrUnsupported", bk, err)
				}
				break
			}
			for _, f := range []backend.WireFormat{backend.F16, backend.BF16} {
				for _, n := range []int{1, 7, 4099} {
					t.Run(fmt.Sprintf("%s/ranks=%d/%s/n=%d", bk, ranks, f, n), func(t *testing.T) {
						rng := rand.New(rand.NewPCG(uint64(n), uint64(ranks)))
						inputs := make([][]float64, ranks)
						data := make([][]float32, ranks)
						for r := range inputs {
							for i := 0; i < n; i++ {
								v := float32(rng.NormFloat64() * 10)
								inputs[r] = append(inputs[r], float64(v))
								data[r] = append(data[r], v)
							}
						}
						before := g.Counters(0).BytesWritten
						noErrors(t, onRanks(g, func(c *Comm) error {
							return AllReduceWire(context.Background(), c, data[c.Rank()], Sum, f)
						}))
						moved := g.Counters(0).BytesWritten - before - int64(4*n)
						for r := 1; r < ranks; r++ {
							if !bitsEqual(data[r], data[0]) {
								t.Fatalf("rank %d differs from rank 0", r)
							}
						}
						for i := 0; i < n; i++ {
							var exact, abs float64
							for r := range inputs {
								exact += inputs[r][i]
								abs += math.Abs(inputs[r][i])
							}
							if d := math.Abs(float64(data[0][i]) - exact); d > WireErrorBound(f, ranks, abs) {
								t.Fatalf("element %d: %v, exact %v: error %g > bound %g", i, data[0][i], exact, d, WireErrorBound(f, ranks, abs))
							}
						}
						if n == 4099 {
							// Each rank receives 2(N-1) chunks of ~n/N elements, 2 bytes each.
							full := int64(2 * (ranks - 1) * ceilDiv(n, ranks) * 4)
							if moved <= 0 || moved > full/2+int64(16*ranks) {
								t.Errorf("received %d bytes, want about half of the f32 ring's %d", moved, full)
							}
						}
					})
				}
			}
		}
	}
}
