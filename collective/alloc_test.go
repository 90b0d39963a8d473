package collective

import (
	"context"
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

// rankLoop keeps ranks 1..N-1 calling AllReduce whenever rank 0 asks, so a
// measurement on rank 0's goroutine covers whole collectives.
type rankLoop struct {
	g    *Group
	go_  []chan struct{}
	done chan error
}

func startRankLoop[T Elem](g *Group, data [][]T, op Op) *rankLoop {
	return startRankLoopWith(g, data, op, Auto)
}

func startRankLoopWith[T Elem](g *Group, data [][]T, op Op, s Strategy) *rankLoop {
	return loopRanks(g, func(c *Comm) error {
		return AllReduceWith(context.Background(), c, data[c.Rank()], data[c.Rank()], op, s)
	})
}

func (l *rankLoop) step(f func() error) error {
	for _, ch := range l.go_ {
		ch <- struct{}{}
	}
	err := f()
	for range l.go_ {
		if e := <-l.done; e != nil && err == nil {
			err = e
		}
	}
	return err
}

func (l *rankLoop) stop() {
	for _, ch := range l.go_ {
		close(ch)
	}
}

// TestAllReduceZeroAllocs: a steady-state AllReduce of a pooled size on 4
// ranks allocates nothing (buffers, fences and waits are pooled).
func TestAllReduceZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, bk := range backendsUnderTest(t) {
		for _, dt := range []string{"float", "double"} {
			t.Run(fmt.Sprintf("%s/%s", bk, dt), func(t *testing.T) {
				g := openGroup(t, bk, 4)
				const n = 4099
				var allocs float64
				if dt == "float" {
					allocs = measureAllocs[float32](t, g, n)
				} else {
					allocs = measureAllocs[float64](t, g, n)
				}
				if allocs != 0 {
					t.Errorf("%v allocations per AllReduce, want 0", allocs)
				}
			})
		}
	}
}

func measureAllocs[T Float](t *testing.T, g *Group, n int) float64 {
	return measureAllocsWith[T](t, g, n, Auto)
}

func measureAllocsWith[T Elem](t *testing.T, g *Group, n int, s Strategy) float64 {
	return measureAllocsOp[T](t, g, n, s, Mean)
}

// measureAllocsOp is measureAllocsWith with op.
func measureAllocsOp[T Elem](t *testing.T, g *Group, n int, s Strategy, op Op) float64 {
	data := make([][]T, g.Size())
	for r := range data {
		data[r] = make([]T, n)
	}
	l := startRankLoopWith(g, data, op, s)
	defer l.stop()
	ctx := context.Background()
	call := func() error { return AllReduceWith(ctx, g.Comm(0), data[0], data[0], op, s) }
	for i := 0; i < 3; i++ { // warm the pools
		if err := l.step(call); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	a := testing.AllocsPerRun(20, func() {
		if e := l.step(call); e != nil {
			err = e
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestStrategiesZeroAllocs: every strategy's steady state allocates nothing.
func TestStrategiesZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 4, func(o *Options) { o.ChunkBytes = 4096; o.Config.LocalGroupSize = 2 })
		for _, s := range allStrategies {
			if a := measureAllocsWith[float32](t, g, 5003, s); a != 0 {
				t.Errorf("%s %s: %v allocations per AllReduce, want 0", bk, s, a)
			}
		}
	}
}

// TestElementTypesZeroAllocs: the integer and 16-bit types allocate nothing
// in steady state either (in kernels where the device has them), and
// neither do ReduceScatter and Reduce's exact host fallbacks (the kernels
// turned off).
func TestElementTypesZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, bk := range backendsUnderTest(t) {
		elementTypesZeroAllocs(t, bk, false)
		elementTypesZeroAllocs(t, bk, true)
	}
}

func elementTypesZeroAllocs(t *testing.T, bk string, noKernels bool) {
	{
		g := openGroup(t, bk, 3, func(o *Options) { o.ChunkBytes = 4096 })
		if noKernels {
			for _, c := range g.comms {
				c.g.kernels = backend.F32.Bit() // every other type on the host path
			}
		}
		for _, s := range []Strategy{Direct, Ring} {
			if a := measureAllocsOp[int32](t, g, 3001, s, Sum); a != 0 {
				t.Errorf("%s %s: int32: %v allocations per AllReduce, want 0", bk, s, a)
			}
			if a := measureAllocsOp[BFloat16](t, g, 3001, s, Sum); a != 0 {
				t.Errorf("%s %s: bfloat16: %v allocations per AllReduce, want 0", bk, s, a)
			}
			if a := measureAllocsOp[uint8](t, g, 3001, s, Max); a != 0 {
				t.Errorf("%s %s: uint8: %v allocations per AllReduce, want 0", bk, s, a)
			}
		}
		// ReduceScatter and Reduce of int64.
		const m = 1000
		send := make([][]int64, 3)
		recv := make([][]int64, 3)
		for r := range send {
			send[r], recv[r] = make([]int64, 3*m), make([]int64, 3*m)
		}
		rs := func(c *Comm, r int) error {
			return ReduceScatter(context.Background(), c, send[r], recv[r][:m], Sum)
		}
		rd := func(c *Comm, r int) error {
			return Reduce(context.Background(), c, send[r], recv[r], Sum, 1)
		}
		for name, f := range map[string]func(*Comm, int) error{"ReduceScatter": rs, "Reduce": rd} {
			step, stop := startOpLoop(g, f)
			for i := 0; i < 3; i++ {
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}
			if a := testing.AllocsPerRun(20, func() {
				if err := step(); err != nil {
					t.Error(err)
				}
			}); a != 0 {
				t.Errorf("%s (no kernels %v): int64 %s: %v allocations per call, want 0", bk, noKernels, name, a)
			}
			stop()
		}
	}
}

// startOpLoop keeps ranks 1..N-1 calling f whenever step asks; step runs
// rank 0's call on the caller's goroutine and returns the first error.
func startOpLoop(g *Group, f func(c *Comm, r int) error) (step func() error, stop func()) {
	chs := make([]chan struct{}, g.Size())
	done := make(chan error, g.Size())
	for r := 1; r < g.Size(); r++ {
		chs[r] = make(chan struct{})
		go func(r int) {
			for range chs[r] {
				done <- f(g.Comm(r), r)
			}
		}(r)
	}
	step = func() error {
		for _, ch := range chs[1:] {
			ch <- struct{}{}
		}
		err := f(g.Comm(0), 0)
		for range chs[1:] {
			if e := <-done; e != nil && err == nil {
				err = e
			}
		}
		return err
	}
	stop = func() {
		for _, ch := range chs[1:] {
			close(ch)
		}
	}
	return step, stop
}
