// Command gorgonia trains a small MLP written with gorgonia
// (gorgonia.org/gorgonia) data-parallel on N ranks with gocoll's ddp
// package: every rank builds its own ExprGraph, TapeMachine and model
// replica, starting from rank 0's initial weights (each rank draws its own,
// then ddp.BroadcastParameters copies rank 0's over them), runs forward
// and backward on its 1/N of the batch, and a ddp.Sync averages the gradients
// across ranks before gorgonia's VanillaSolver applies them, so all
// replicas apply the same update and N ranks follow one rank's trajectory.
//
// The gradients live in a ddp.Arena: each learnable's gradient tensor is
// backed by the arena's view for it (gorgonia.WithGrad over
// tensor.WithBacking), so gorgonia's backward pass writes straight into the
// memory gocoll reduces, the whole model syncs with one collective, and
// the solver reads the averaged gradients in place. No copies by this
// program, in or out.
//
//	cd examples/gorgonia && GOWORK=off go run . -ranks 4
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"unsafe"

	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/ddp"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

const (
	features = 8
	hidden   = 32
	samples  = 2048
	lr       = 0.05
)

// shapes of the learnables, in arena order: y = tanh(x W1 + b1) W2 + b2.
var shapes = [][2]int{{features, hidden}, {1, hidden}, {hidden, 1}, {1, 1}}

// initialWeights returns W1, b1, W2, b2 drawn from seed: normal weights
// scaled by 1/sqrt(fan-in), zero biases. Each rank draws its own (as a
// framework's initializer would, seeded per process); training starts
// from rank 0's, broadcast to every rank.
func initialWeights(seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(42, seed))
	ws := make([][]float32, len(shapes))
	for i, s := range shapes {
		ws[i] = make([]float32, s[0]*s[1])
	}
	for i := range ws[0] {
		ws[0][i] = float32(rng.NormFloat64() / math.Sqrt(features))
	}
	for i := range ws[2] {
		ws[2][i] = float32(rng.NormFloat64() / math.Sqrt(hidden))
	}
	return ws
}

// dataset returns samples x (row-major, samples x features) and targets y.
func dataset() ([]float32, []float32) {
	rng := rand.New(rand.NewPCG(7, 7))
	x := make([]float32, samples*features)
	y := make([]float32, samples)
	for s := range samples {
		var t float64
		for f := range features {
			v := rng.Float64()*2 - 1
			x[s*features+f] = float32(v)
			t += math.Sin(float64(f+1)*v) / float64(f+1)
		}
		y[s] = float32(t + 0.01*rng.NormFloat64())
	}
	return x, y
}

// replica is one rank's model: its own graph, machine and solver.
type replica struct {
	g         *G.ExprGraph
	learnable G.Nodes
	vm        G.VM
	solver    G.Solver
	resid     G.Value // pred - y on the shard, read out of the graph every run
	arena     *ddp.Arena[float32]
}

// newReplica builds the graph over rows of x and y (a rank's shard, used
// in place as the input tensors' backing) with the weights backed by init
// and the gradients by arena. The cost is the shard's sum of squared errors times
// ranks/samples: the mean over ranks of the ranks' gradients (what
// ddp.Sync computes) is then exactly the gradient of the full data set's
// mean squared error, whatever the shard sizes.
func newReplica(x, y []float32, ranks int, init [][]float32, arena *ddp.Arena[float32]) (*replica, error) {
	rows := len(y)
	r := &replica{g: G.NewGraph(), arena: arena}
	xn := G.NewMatrix(r.g, tensor.Float32, G.WithShape(rows, features), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(rows, features), tensor.WithBacking(x))))
	yn := G.NewMatrix(r.g, tensor.Float32, G.WithShape(rows, 1), G.WithName("y"),
		G.WithValue(tensor.New(tensor.WithShape(rows, 1), tensor.WithBacking(y))))
	for i, s := range shapes {
		// Backing, not copying: the gradient tensor is a view of the
		// arena. gorgonia v0.9.18's TapeMachine with BindDualValues adds
		// each gradient node's value in place into the learnable's dual
		// value's derivative, the tensor WithGrad gave it (an UnsafeDo
		// add, vm_tape_nocuda.go), and VanillaSolver.Step scales, applies
		// and zeroes that tensor in place (solvers.go), so it stays the
		// arena's memory for the whole run; forwardBackward checks it
		// after every backward pass.
		w := tensor.New(tensor.WithShape(s[0], s[1]), tensor.WithBacking(init[i]))
		gr := tensor.New(tensor.WithShape(s[0], s[1]), tensor.WithBacking(arena.View(i)))
		r.learnable = append(r.learnable, G.NewMatrix(r.g, tensor.Float32, G.WithShape(s[0], s[1]),
			G.WithName(fmt.Sprintf("p%d", i)), G.WithValue(w), G.WithGrad(gr)))
	}
	w1, b1, w2, b2 := r.learnable[0], r.learnable[1], r.learnable[2], r.learnable[3]

	var (
		err     error
		z, h, o *G.Node
		pred    *G.Node
		d, sse  *G.Node
		cost    *G.Node
	)
	if z, err = G.Mul(xn, w1); err != nil {
		return nil, err
	}
	if z, err = G.BroadcastAdd(z, b1, nil, []byte{0}); err != nil {
		return nil, err
	}
	if h, err = G.Tanh(z); err != nil {
		return nil, err
	}
	if o, err = G.Mul(h, w2); err != nil {
		return nil, err
	}
	if pred, err = G.BroadcastAdd(o, b2, nil, []byte{0}); err != nil {
		return nil, err
	}
	if d, err = G.Sub(pred, yn); err != nil {
		return nil, err
	}
	if sse, err = G.Sum(G.Must(G.Square(d))); err != nil {
		return nil, err
	}
	if cost, err = G.Mul(sse, G.NewConstant(float32(ranks)/samples)); err != nil {
		return nil, err
	}
	if _, err = G.Grad(cost, r.learnable...); err != nil {
		return nil, err
	}
	G.Read(d, &r.resid)
	r.vm = G.NewTapeMachine(r.g, G.BindDualValues(r.learnable...))
	r.solver = G.NewVanillaSolver(G.WithLearnRate(lr))
	return r, nil
}

// forwardBackward runs the graph once: the arena then holds this shard's
// gradients. It returns the shard's sum of squared errors (in float64, so
// that the full data set's loss does not depend on how it is sharded).
func (r *replica) forwardBackward() (float64, error) {
	defer r.vm.Reset()
	if err := r.vm.RunAll(); err != nil {
		return 0, err
	}
	for i, n := range r.learnable {
		gv, err := n.Grad()
		if err != nil {
			return 0, err
		}
		gd, ok := gv.Data().([]float32)
		if !ok || unsafe.SliceData(gd) != unsafe.SliceData(r.arena.View(i)) {
			return 0, errors.New("gorgonia moved a gradient out of the arena")
		}
	}
	var sse float64
	for _, v := range r.resid.Data().([]float32) {
		sse += float64(v) * float64(v)
	}
	return sse, nil
}

// apply runs the solver on the (averaged) gradients in the arena, which
// it zeroes for the next step.
func (r *replica) apply() error { return r.solver.Step(G.NodesToValueGrads(r.learnable)) }

// params returns copies of the replica's current weights.
func (r *replica) params() [][]float32 {
	out := make([][]float32, len(r.learnable))
	for i, n := range r.learnable {
		out[i] = append([]float32(nil), n.Value().Data().([]float32)...)
	}
	return out
}

func (r *replica) close() {
	if r.vm != nil {
		r.vm.Close()
	}
}

// Train trains on ranks ranks for epochs full-batch steps and returns the
// loss (mean squared error over the whole data set, before each epoch's
// update) after each epoch, as rank 0 sees it, and each rank's final
// parameters (W1, b1, W2, b2).
func Train(ctx context.Context, ranks, epochs int, backendName string) ([]float64, [][][]float32, error) {
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: ranks, Backend: backendName, Config: collective.DefaultConfig()})
	if err != nil {
		return nil, nil, err
	}
	defer g.Close()
	// A rank that fails cancels the others' calls instead of leaving them
	// waiting for it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	x, y := dataset()
	final := make([][][]float32, ranks)
	errs := make([]error, ranks)
	lossParts := make([][]float64, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = func() error {
				c := g.Comm(r)
				s, err := ddp.New[float32](c, ddp.Options{})
				if err != nil {
					return err
				}
				defer s.Close(ctx)
				sizes := make([]int, len(shapes))
				for i, sh := range shapes {
					sizes[i] = sh[0] * sh[1]
				}
				arena, err := ddp.NewArena[float32](sizes...)
				if err != nil {
					return err
				}
				defer arena.Close()
				// Every rank starts from rank 0's weights, bitwise: its
				// own draw is overwritten in place.
				init := initialWeights(uint64(r) + 1)
				if err := ddp.BroadcastParameters(ctx, c, 0, init); err != nil {
					return err
				}
				lo, hi := samples*r/ranks, samples*(r+1)/ranks
				m, err := newReplica(x[lo*features:hi*features], y[lo:hi], ranks, init, arena)
				if err != nil {
					return err
				}
				defer m.close()
				lossBuf := make([]float64, 1)
				lossParts[r] = make([]float64, epochs)
				for e := range epochs {
					sse, err := m.forwardBackward()
					if err != nil {
						return err
					}
					// Every view now holds this shard's gradient; one
					// collective makes it the mean over ranks.
					if err := s.Sync(ctx, arena.Flat()); err != nil {
						return err
					}
					if err := m.apply(); err != nil {
						return err
					}
					// The epoch's loss over the whole data set: sum the shards'.
					lossBuf[0] = sse
					if err := collective.AllReduce(ctx, c, lossBuf, collective.Sum); err != nil {
						return err
					}
					lossParts[r][e] = lossBuf[0] / samples
				}
				final[r] = m.params()
				return nil
			}()
			if errs[r] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return lossParts[0], final, nil
}

func main() {
	ranks := flag.Int("ranks", 4, "data-parallel ranks")
	epochs := flag.Int("epochs", 20, "full-batch gradient steps")
	bk := flag.String("backend", "", "auto, vulkan, metal or host (default: GOCOLL_BACKEND, then auto)")
	flag.Parse()
	losses, _, err := Train(context.Background(), *ranks, *epochs, *bk)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gorgonia:", err)
		os.Exit(1)
	}
	for e, l := range losses {
		fmt.Printf("epoch %3d  loss %.6f\n", e+1, l)
	}
}
