//go:build mpi && cgo

package mpi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/ddp"
)

// TestOneProcess runs the job of one process (mpirun -np 1): a group whose
// Transport has size 1 is a group of one process, and works like a group
// without a Transport (TestGroupOneProcess); TestGroupSplit runs there as
// one process of 8 ranks; the World's native collectives run there over
// one process (TestNativeReductions, TestNativeMoves).
func TestOneProcess(t *testing.T) {
	j := ownJob(t, 1, nil, "^(TestGroupOneProcess|TestGroupSplit|TestNativeReductions|TestNativeMoves)$",
		"TestGroupOneProcess, TestGroupSplit, TestNativeReductions, TestNativeMoves")
	if j.err != nil {
		t.Fatalf("mpirun -np 1: %v", j.err)
	}
	for _, name := range []string{"TestGroupOneProcess", "TestGroupSplit", "TestNativeReductions", "TestNativeMoves"} {
		if !bytes.Contains(j.out, []byte("--- PASS: "+name+" ")) {
			t.Errorf("the job did not pass %s", name)
		}
	}
}

// TestGroupOneProcess: in a job of one process, a host group of 4 local
// ranks over the World (Size 1) runs the all-reduce with every strategy,
// Host and Auto included, every op, float32 and float64, in place and out
// of place; ReduceScatter, AllGather, Broadcast and Reduce; a ddp.Sync step
// of several sizes, with the default options and with the adaptive
// selector probing Direct, Pipelined and Host; and a group configured with
// strategy Host. Every result is checked exactly against a plain Go
// reference.
func TestGroupOneProcess(t *testing.T) {
	w := needWorld(t)
	if w.Size() != 1 {
		t.Skip("only in the job of one process, which TestOneProcess starts")
	}
	const L = 4
	g := openTestGroup(t, w, "host", L, 30*time.Second)
	if g.Processes() != 1 {
		t.Fatalf("Processes() = %d, want 1", g.Processes())
	}
	t.Run("AllReduce", func(t *testing.T) {
		strategies := append(slices.Clone(allStrategies), collective.Host)
		k := 0
		for _, s := range strategies {
			for _, op := range allOps {
				for _, n := range []int{0, 1, L + 1, 5003} {
					runAllReduceCase(t, w, g, arCase{s, op, n}, k%2 == 0)
					k++
				}
			}
		}
		runAllReduceCase(t, w, g, arCase{collective.Auto, collective.Sum, 1<<20 + 3}, false)
		runAllReduceCase(t, w, g, arCase{collective.Host, collective.Mean, 1<<20 + 3}, true)
	})
	t.Run("Collectives", func(t *testing.T) {
		runCollectives[float32](t, w, g)
		runCollectives[float64](t, w, g)
	})
	t.Run("ddp", func(t *testing.T) {
		// The defaults (Auto among the rank-order strategies), then the
		// adaptive selector probing Direct, Pipelined and Host.
		if _, err := ddpSteps(g, ddp.Options{}, 10); err != nil {
			t.Errorf("ddp.Options{}: %v", err)
		}
		st, err := ddpSteps(g, ddp.Options{Adaptive: true, ProbeSteps: 1, ProbeLimit: 1e9,
			Candidates: []collective.Strategy{collective.Direct, collective.Pipelined, collective.Host}}, 80)
		if err != nil {
			t.Errorf("ddp.Options{Adaptive: true}: %v", err)
		} else if st.ProbeSteps == 0 || st.ByStrategy[collective.Host] == 0 {
			t.Errorf("the adaptive selector did not probe strategy host: %+v", st)
		}
	})
	t.Run("ConfiguredHost", func(t *testing.T) {
		cfg := collective.DefaultConfig()
		cfg.Strategy = collective.Host
		cfg.CommunicationTimeout = 30 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		h, err := collective.NewGroup(ctx, collective.Options{Ranks: L, Backend: "host", Transport: w, Config: cfg})
		if err != nil {
			t.Fatalf("NewGroup with strategy host over a transport of one process: %v", err)
		}
		defer h.Close()
		runAllReduceCase(t, w, h, arCase{collective.Auto, collective.Sum, 5003}, true)
	})
}

// ddpSteps runs steps Syncs of several sizes on every rank of g with opts,
// checks each step's mean exactly (rank r's gradient element i is 4r + i%7,
// whose mean over 4 ranks, 6 + i%7, is exact) and returns rank 0's Stats.
func ddpSteps(g *collective.Group, opts ddp.Options, steps int) (ddp.Stats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := g.Size()
	var st ddp.Stats
	errs := onLocal(g, func(c *collective.Comm) error {
		s, err := ddp.New[float32](c, opts)
		if err != nil {
			return fmt.Errorf("rank %d: ddp.New: %w", c.Rank(), err)
		}
		defer s.Close(ctx)
		sizes := []int{1, 1000, 1<<16 + 3}
		for step := range steps {
			m := 1000
			if step < len(sizes) {
				m = sizes[step]
			}
			grads := make([]float32, m)
			for i := range grads {
				grads[i] = float32(4*c.Rank() + i%7)
			}
			if err := s.Sync(ctx, grads); err != nil {
				return fmt.Errorf("rank %d: step %d (%d elements): %w", c.Rank(), step, m, err)
			}
			for i, v := range grads {
				if want := float32(2*(n-1) + i%7); v != want {
					return fmt.Errorf("rank %d: step %d (%d elements): element %d = %v, want %v (strategy %s)",
						c.Rank(), step, m, i, v, want, s.Stats().CurrentStrategy)
				}
			}
		}
		if c.Rank() == 0 {
			st = s.Stats()
		}
		return nil
	})
	return st, errors.Join(errs...)
}
