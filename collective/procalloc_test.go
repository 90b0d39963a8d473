package collective

import (
	"context"
	"testing"
)

// TestProcessesCollectivesZeroAllocs: steady-state collectives across
// processes (two simulated processes of two ranks over the in-memory
// transport that allocates nothing itself; the process fingerprint's
// Allgather, the exchanges' pieces) allocate nothing, 16 KiB and 1 MiB per
// rank, under context.Background, Run's ctx and a deadline ctx, on the host
// backend (lavapipe's exchanges across processes take minutes here).
func TestProcessesCollectivesZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const procs, local = 2, 2
	const ranks = procs * local
	for _, bk := range []string{"host"} {
		gs := openProcessesOn(t, newQuietNet(procs), bk, local)
		for _, size := range []int{16 << 10, 1 << 20} {
			n := size / 4
			send, recv := make([][]float32, ranks), make([][]float32, ranks)
			for r := range send {
				send[r], recv[r] = make([]float32, n), make([]float32, n*ranks)
			}
			for _, cl := range ctxColls {
				for _, kind := range []string{"background", "run", "deadline"} {
					a := groupsCtxAllocs(t, gs, kind, func(ctx context.Context, c *Comm) error {
						return cl.call(ctx, c, send[c.Rank()], recv[c.Rank()])
					})
					if a != 0 {
						t.Errorf("%s/%s/%dKiB/%s: %v allocations per call (all four ranks), want 0",
							bk, cl.name, size>>10, kind, a)
					}
				}
			}
		}
	}
}
