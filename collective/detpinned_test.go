package collective

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var hangRepeatN = flag.Int("hangrepeat.n", 0, "calls per group of TestDeterministicPinnedMeanRepeat (0: 20 on a GPU, 3 on lavapipe and host)")

// The case TestDeterministicPinnedMeanRepeat repeats.
const (
	detRanks   = 8
	detElems   = 100
	detTimeout = 10 * time.Second
)

// TestDeterministicPinnedMeanRepeat repeats one case: the deterministic
// float64 Mean all-reduce of 8 ranks on pinned HostBuffers (pipelined, depth
// 5, 64 KiB chunks, 100 elements, 10 s timeout), on one group, each time on
// fresh buffers (the first call also makes the group's pipelines). Every
// rank's result must be bitwise the float64 sum in rank order divided by 8,
// no call may take longer than its timeout, and closing the buffers and the
// group must report nothing (a device declared lost fails the test). A call
// that does not return fails the test with every goroutine's stack rather
// than hanging the binary. On machines with few cores the waits park on
// channels: there the doorbell waits that machines with cores to spare use
// run as well. bench/device-bench.sh runs it by name on the GPU, with
// -test.count for fresh groups; -hangrepeat.n sets the calls per group.
func TestDeterministicPinnedMeanRepeat(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		t.Run(bk, func(t *testing.T) {
			modes := []bool{useBell.Load()}
			if !useBell.Load() && futexAvailable && !testing.Short() {
				modes = append(modes, true)
			}
			for _, bell := range modes {
				name := "channel-waits"
				if bell {
					name = "doorbell-waits"
				}
				t.Run(name, func(t *testing.T) {
					was := useBell.Load()
					useBell.Store(bell)
					defer useBell.Store(was)
					detPinnedRepeat(t, bk)
				})
			}
		})
	}
}

func detPinnedOptions(bk string) Options {
	cfg := DefaultConfig()
	cfg.Strategy = Pipelined
	cfg.PipelineDepth = 5
	cfg.Deterministic = true
	cfg.CommunicationTimeout = detTimeout
	return Options{Ranks: detRanks, Backend: bk, ChunkBytes: 64 << 10, Config: cfg, Validation: wantValidation(bk)}
}

func detPinnedRepeat(t *testing.T, bk string) {
	g, err := NewGroup(context.Background(), detPinnedOptions(bk))
	if err != nil {
		t.Fatalf("NewGroup: %v", err)
	}
	// After a failure the group is closed, unless ranks are still running.
	closed, hung := false, false
	defer func() {
		if !closed && !hung {
			g.Close()
		}
	}()
	reps := *hangRepeatN
	if reps <= 0 {
		reps = 3
		if g.Comm(0).Device().Info().Type != "cpu" {
			reps = 20
		}
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("%d calls, inputs from seed %d", reps, seed)
	for rep := 0; rep < reps; rep++ {
		send, recv, err := detPinnedBuffers()
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, uint64(rep)))
		if hung = !detPinnedCall(t, g, rng, send, recv, fmt.Sprintf("call %d", rep)); hung {
			return // nothing may be closed under the ranks
		}
		for r := range send {
			for _, h := range []*HostBuffer[float64]{send[r], recv[r]} {
				if err := h.Close(); err != nil {
					t.Fatalf("call %d: rank %d's HostBuffer.Close: %v", rep, r, err)
				}
			}
		}
	}
	closed = true
	if err := g.Close(); err != nil {
		if errors.Is(err, ErrDeviceLost) {
			t.Fatalf("Group.Close: %v (a device was declared lost, though every call succeeded)", err)
		}
		t.Fatalf("Group.Close: %v", err)
	}
	checkValidation(t)
}

// detPinnedBuffers allocates every rank's send and receive HostBuffers.
func detPinnedBuffers() (send, recv []*HostBuffer[float64], err error) {
	send, recv = make([]*HostBuffer[float64], detRanks), make([]*HostBuffer[float64], detRanks)
	for r := range send {
		if send[r], err = NewHostBuffer[float64](detElems); err != nil {
			return nil, nil, err
		}
		if recv[r], err = NewHostBuffer[float64](detElems); err != nil {
			return nil, nil, err
		}
	}
	return send, recv, nil
}

// detPinnedCall runs one all-reduce of fresh inputs on every rank and checks
// it; false means the ranks did not return (the test failed, and the
// group and buffers must be left alone).
func detPinnedCall(t *testing.T, g *Group, rng *rand.Rand, send, recv []*HostBuffer[float64], what string) bool {
	t.Helper()
	in := make([][]float64, detRanks)
	for r := range in {
		in[r] = make([]float64, detElems)
		for i := range in[r] {
			// Exponents apart, so a sum in another order rounds otherwise.
			in[r][i] = math.Ldexp(2*rng.Float64()-1, rng.IntN(41)-20)
		}
		copy(send[r].Data, in[r])
		for i := range recv[r].Data {
			recv[r].Data[i] = math.NaN()
		}
	}
	ref := make([]float64, detElems)
	for i := range ref {
		acc := in[0][i]
		for r := 1; r < detRanks; r++ {
			acc += in[r][i]
		}
		ref[i] = acc / detRanks
	}
	took := make([]time.Duration, detRanks)
	// A call that times out returns after its timeout, the drain of its
	// device and its wait for the peers to leave the exchange: past that it
	// does not return at all.
	limit := 2*detTimeout + g.drainLimit + 5*time.Second
	errs, hung := runRanksWithin(g, limit, func(c *Comm) error {
		ctx, cancel := context.WithTimeout(context.Background(), detTimeout)
		defer cancel()
		start := time.Now()
		err := AllReduceInto(ctx, c, send[c.Rank()].Data, recv[c.Rank()].Data, Mean)
		took[c.Rank()] = time.Since(start)
		return err
	})
	if hung != "" {
		t.Errorf("%s: the ranks did not return within %v (timeout %v, drain limit %v); goroutines:\n%s", what, limit, detTimeout, g.drainLimit, hung)
		return false
	}
	var fails []string
	for r, err := range errs {
		if err != nil {
			fails = append(fails, fmt.Sprintf("rank %d (after %v): %v", r, took[r], err))
		} else if took[r] > detTimeout {
			fails = append(fails, fmt.Sprintf("rank %d took %v, past its %v timeout", r, took[r], detTimeout))
		}
	}
	if len(fails) > 0 {
		t.Fatalf("%s:\n%s", what, strings.Join(fails, "\n"))
	}
	for r := range recv {
		if !bitsEqual(send[r].Data, in[r]) {
			t.Fatalf("%s: rank %d's send buffer was written", what, r)
		}
		for i, got := range recv[r].Data {
			if math.Float64bits(got) != math.Float64bits(ref[i]) {
				t.Fatalf("%s: rank %d element %d = %v (%#x), want %v (%#x), the rank-ordered sum / %d",
					what, r, i, got, math.Float64bits(got), ref[i], math.Float64bits(ref[i]), detRanks)
			}
		}
	}
	return true
}
