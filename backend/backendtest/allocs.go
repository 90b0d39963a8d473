package backendtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// testAllocations checks that recording, submitting and waiting allocate
// nothing in steady state: collectives run them per chunk, so an allocation
// there is garbage per chunk. Skipped under the race detector.
func (s *suite) testAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on synchronisation; allocation counts are meaningless under -race")
	}
	dev, st := s.dev, s.dev.Stream()
	for _, n := range []int{1024, 1 << 17} {
		for _, k := range []int{2, 9} {
			t.Run(fmt.Sprintf("K=%d/n=%d", k, n), func(t *testing.T) {
				srcs := make([]backend.Region, k)
				for i := range srcs {
					srcs[i] = backend.Region{Buf: alloc(t, dev, 4*n, alternate(i)), Len: 4 * n}
				}
				dst := backend.Region{Buf: alloc(t, dev, 4*n, backend.DeviceLocal), Len: 4 * n}
				tmp := backend.Region{Buf: alloc(t, dev, 4*n, backend.HostVisible), Len: 4 * n}
				cctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				for _, c := range []struct {
					name string
					ctx  context.Context
				}{{"Background", context.Background()}, {"WithCancel", cctx}} {
					var err error
					step := func() {
						if err != nil {
							return
						}
						if err = st.Reduce(backend.Sum, backend.F32, dst, srcs, 1); err != nil {
							return
						}
						if err = st.Scale(backend.F32, tmp, dst, 0.5); err != nil {
							return
						}
						if err = st.Copy(dst, tmp); err != nil {
							return
						}
						var f backend.Fence
						if f, err = st.Submit(); err != nil {
							return
						}
						err = f.Wait(c.ctx)
					}
					for range 10 { // warm up pools and free lists
						step()
					}
					allocs := testing.AllocsPerRun(100, step)
					must(t, err, "Reduce+Scale+Copy+Submit+Wait")
					if allocs != 0 {
						t.Errorf("%s: %v allocations per Reduce+Scale+Copy+Submit+Wait, want 0", c.name, allocs)
					}
				}
			})
		}
	}
}
