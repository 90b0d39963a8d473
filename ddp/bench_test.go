package ddp

import (
	"context"
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/collective"
)

// BenchmarkTrainingSync: 100 steps of SyncAll over a 24-tensor model
// (about 1.1 M float32 in layers of 64 to 262144 elements) on 2 ranks, per
// iteration, with default Options ("default") and with each fixed
// strategy; compare with benchstat (go test -bench TrainingSync -count 10).
// b.SetBytes counts the model's bytes per step times 100.
func BenchmarkTrainingSync(b *testing.B) {
	sizes := []int{}
	for _, n := range []int{64, 256, 1024, 4096, 16384, 65536, 262144, 512} {
		sizes = append(sizes, n, n, n)
	}
	total := 0
	for _, n := range sizes {
		total += n
	}
	const steps, ranks = 100, 2
	for _, bk := range backendsUnderTest(b) {
		for _, name := range []string{"default", "direct", "pipelined", "host", "ring", "tree"} {
			b.Run(fmt.Sprintf("%s/%s", bk, name), func(b *testing.B) {
				g := openGroup(b, bk, ranks, func(o *collective.Options) {
					o.Validation = false
					if name != "default" {
						st, err := collective.ParseStrategy(name)
						if err != nil {
							b.Fatal(err)
						}
						o.Config.Strategy = st
					}
				})
				o := Options{}
				if name == "ring" || name == "tree" {
					o.AnyOrder = true
				}
				ss := newSyncs[float32](b, g, o)
				models := make([][][]float32, ranks)
				for r := range models {
					for _, n := range sizes {
						models[r] = append(models[r], make([]float32, n))
					}
				}
				run := func(n int) {
					noErrors(b, onRanks(g, func(c *collective.Comm) error {
						for i := 0; i < n; i++ {
							if err := ss[c.Rank()].SyncAll(context.Background(), models[c.Rank()]); err != nil {
								return err
							}
						}
						return nil
					}))
				}
				run(10)
				b.SetBytes(int64(total * 4 * steps))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					run(steps)
				}
			})
		}
	}
}
