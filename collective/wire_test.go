package collective

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/host"
	"github.com/gocoll/gocoll/internal/algo"
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
						before := g.comms[0].recvBytes
						noErrors(t, onRanks(g, func(c *Comm) error {
							return AllReduceWire(context.Background(), c, data[c.Rank()], Sum, f)
						}))
						moved := g.comms[0].recvBytes - before
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
							full := int64(2 * (ranks - 1) * algo.CeilDiv(n, ranks) * 4)
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

// roundWire is x converted to f and back (what a wire hop keeps of it).
func roundWire(f backend.WireFormat, x float32) float32 {
	if f == backend.BF16 {
		return math.Float32frombits(uint32(host.F32ToBF16(x)) << 16)
	}
	return host.F16ToF32(host.F32ToF16(x))
}

// TestAllReduceWireDeterministic: with Config.Deterministic the wire
// all-reduce is the rank-ordered reduction of the ranks' inputs as the wire
// carries them (each rounded to the format once), rounded once more for the
// all-gather: bitwise W(AllReduce_det(W(x))), the same on every rank and for
// every slot size, and for Sum bitwise the f32 sum w_0 + w_1 + ... in rank
// order.
func TestAllReduceWireDeterministic(t *testing.T) {
	ns := []int{1, 5, 1031}
	for _, bk := range backendsUnderTest(t) {
		rankCounts := []int{2, 3, 4}
		if bk != "host" && !fullRun() {
			rankCounts = []int{3}
		}
		for _, ranks := range rankCounts {
			first := map[string][]float32{} // by case, from the first slot size
			for _, chunk := range []int{256, 4096} {
				g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = chunk; o.Config.Deterministic = true })
				if _, ok := g.devs[0].Stream().(backend.Compressor); !ok {
					t.Skipf("%s has no compression kernels", bk)
				}
				for _, f := range []backend.WireFormat{backend.F16, backend.BF16} {
					for _, op := range []Op{Sum, Mean} {
						for _, n := range ns {
							key := fmt.Sprintf("%s/ranks=%d/%s/%s/n=%d", bk, ranks, f, op, n)
							name := fmt.Sprintf("%s/chunk=%d", key, chunk)
							rng := rand.New(rand.NewPCG(uint64(n), uint64(ranks)))
							inputs := make([][]float32, ranks)
							data := make([][]float32, ranks)
							rounded := make([][]float32, ranks)
							for r := range data {
								for i := 0; i < n; i++ {
									v := float32(rng.NormFloat64() * 10)
									inputs[r] = append(inputs[r], v)
									data[r] = append(data[r], v)
									rounded[r] = append(rounded[r], roundWire(f, v))
								}
							}
							noErrors(t, onRanks(g, func(c *Comm) error {
								if err := AllReduceWire(context.Background(), c, data[c.Rank()], op, f); err != nil {
									return err
								}
								return AllReduceWith(context.Background(), c, rounded[c.Rank()], rounded[c.Rank()], op, Ring)
							}))
							for r := 0; r < ranks; r++ {
								if !bitsEqual(data[r], data[0]) {
									t.Fatalf("%s: rank %d differs from rank 0", name, r)
								}
							}
							for i := 0; i < n; i++ {
								want := roundWire(f, rounded[0][i])
								if op == Sum {
									acc := roundWire(f, inputs[0][i])
									for r := 1; r < ranks; r++ {
										acc += roundWire(f, inputs[r][i])
									}
									if w := roundWire(f, acc); w != want {
										t.Fatalf("%s element %d: deterministic AllReduce %v, rank-order sum %v", name, i, want, w)
									}
								}
								if math.Float32bits(data[0][i]) != math.Float32bits(want) {
									t.Fatalf("%s element %d: %v, want the rank-ordered %v", name, i, data[0][i], want)
								}
							}
							if prev, ok := first[key]; !ok {
								first[key] = data[0]
							} else if !bitsEqual(prev, data[0]) {
								t.Fatalf("%s: differs from the result with another slot size", name)
							}
						}
					}
				}
			}
		}
	}
}
