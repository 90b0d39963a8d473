// Command dataparallel trains a small two-layer MLP on synthetic regression
// data, data-parallel on N ranks with gocoll: every rank holds a replica of
// the model and 1/N of each batch, computes its gradients into a ddp.Arena
// (one pinned allocation, a view per parameter tensor), and ddp averages
// them across ranks, so every replica applies the same update. With equal
// shards the mean of the ranks' gradients is the full-batch gradient, so N
// ranks follow the same loss curve as one rank on the full batch.
//
// By default the averaging overlaps the backward pass: a ddp.Reducer holds
// the gradients in the order backward produces them (the output layer's
// first), in buckets, and backward marks each gradient ready as it
// finishes it; the output layer's bucket is reduced while backward still
// computes the hidden layer's gradients. With -overlap=false a ddp.Sync
// averages the whole arena after backward (one zero-copy all-reduce per
// step). Both give bitwise the same model.
//
//	go run ./examples/dataparallel -ranks 4 -epochs 20
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"

	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/ddp"
)

const (
	features = 8
	hidden   = 32
	samples  = 2048
	lr       = 0.05
)

// model is a two-layer MLP: y = w2 . tanh(W1 x + b1) + b2.
type model struct {
	w1 []float32 // hidden x features
	b1 []float32
	w2 []float32
	b2 []float32
}

func newModel() *model {
	rng := rand.New(rand.NewPCG(42, 1))
	m := &model{w1: make([]float32, hidden*features), b1: make([]float32, hidden), w2: make([]float32, hidden), b2: make([]float32, 1)}
	for i := range m.w1 {
		m.w1[i] = float32(rng.NormFloat64() / math.Sqrt(features))
	}
	for i := range m.w2 {
		m.w2[i] = float32(rng.NormFloat64() / math.Sqrt(hidden))
	}
	return m
}

func (m *model) params() [][]float32 { return [][]float32{m.w1, m.b1, m.w2, m.b2} }

// dataset returns samples x (row-major) and targets y.
func dataset() ([]float32, []float32) {
	rng := rand.New(rand.NewPCG(7, 7))
	x := make([]float32, samples*features)
	y := make([]float32, samples)
	for s := 0; s < samples; s++ {
		var t float64
		for f := 0; f < features; f++ {
			v := rng.Float64()*2 - 1
			x[s*features+f] = float32(v)
			t += math.Sin(float64(f+1)*v) / float64(f+1)
		}
		y[s] = float32(t + 0.01*rng.NormFloat64())
	}
	return x, y
}

// Parameter indices, in params order.
const (
	pW1 = iota
	pB1
	pW2
	pB2
)

// grads computes the mean-squared-error gradients over rows [lo, hi) into
// g (same shapes as the params) and returns the shard's summed loss. As a
// framework's backward pass, it goes from the output layer back, and calls
// ready(i) as soon as gradient g[i] is final: b2 and w2 first, then b1
// and w1.
func (m *model) grads(x, y []float32, lo, hi int, g [][]float32, ready func(i int) error) (float64, error) {
	for _, t := range g {
		for i := range t {
			t[i] = 0
		}
	}
	gw1, gb1, gw2, gb2 := g[pW1], g[pB1], g[pW2], g[pB2]
	rows := hi - lo
	a := make([]float64, rows*hidden) // the hidden activations, kept by the forward pass
	dout := make([]float64, rows)     // d loss / d output, per row
	var loss float64
	n := float64(rows)
	for s := lo; s < hi; s++ {
		xs := x[s*features : (s+1)*features]
		as := a[(s-lo)*hidden : (s-lo+1)*hidden]
		out := float64(m.b2[0])
		for h := 0; h < hidden; h++ {
			z := float64(m.b1[h])
			for f := 0; f < features; f++ {
				z += float64(m.w1[h*features+f]) * float64(xs[f])
			}
			as[h] = math.Tanh(z)
			out += float64(m.w2[h]) * as[h]
		}
		d := out - float64(y[s])
		loss += d * d
		dout[s-lo] = 2 * d / n
	}
	// The output layer.
	for s := range rows {
		gb2[0] += float32(dout[s])
		for h := 0; h < hidden; h++ {
			gw2[h] += float32(dout[s] * a[s*hidden+h])
		}
	}
	for _, i := range []int{pB2, pW2} {
		if err := ready(i); err != nil {
			return 0, err
		}
	}
	// The hidden layer, while the output layer's gradients are reduced.
	for s := range rows {
		xs := x[(lo+s)*features : (lo+s+1)*features]
		for h := 0; h < hidden; h++ {
			ah := a[s*hidden+h]
			dz := dout[s] * float64(m.w2[h]) * (1 - ah*ah)
			gb1[h] += float32(dz)
			for f := 0; f < features; f++ {
				gw1[h*features+f] += float32(dz * float64(xs[f]))
			}
		}
	}
	for _, i := range []int{pB1, pW1} {
		if err := ready(i); err != nil {
			return 0, err
		}
	}
	return loss, nil
}

func (m *model) step(g [][]float32) {
	for i, p := range m.params() {
		for j := range p {
			p[j] -= lr * g[i][j]
		}
	}
}

// Train trains on ranks ranks for epochs full-batch steps and returns the
// loss (mean squared error over the whole data set) after each epoch, as
// rank 0 sees it, and each rank's final parameters. overlap: a Reducer
// averages the gradients during backward; else a Sync after it.
func Train(ctx context.Context, ranks, epochs int, backendName string, overlap bool) ([]float64, [][][]float32, error) {
	g, err := collective.NewGroup(ctx, collective.Options{Ranks: ranks, Backend: backendName, Config: collective.DefaultConfig()})
	if err != nil {
		return nil, nil, err
	}
	defer g.Close()
	x, y := dataset()
	losses := make([]float64, epochs)
	final := make([][][]float32, ranks)
	errs := make([]error, ranks)
	lossParts := make([][]float64, ranks)
	var wg sync.WaitGroup
	for r := 0; r < ranks; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			c := g.Comm(r)
			gs, err := ddp.New[float32](c, ddp.Options{})
			if err != nil {
				errs[r] = err
				return
			}
			defer gs.Close(ctx)
			arena, err := ddp.NewArena[float32](hidden*features, hidden, hidden, 1)
			if err != nil {
				errs[r] = err
				return
			}
			defer arena.Close()
			m := newModel()
			grads := [][]float32{arena.View(pW1), arena.View(pB1), arena.View(pW2), arena.View(pB2)}
			// The Reducer's gradients in the order backward finishes them,
			// in buckets of at most the output layer's size: b2 and w2
			// (the first bucket, reduced while backward computes the
			// hidden layer's), then b1, then w1.
			var red *ddp.Reducer[float32]
			ready := func(int) error { return nil }
			if overlap {
				red, err = ddp.NewReducer(ctx, gs, [][]float32{grads[pB2], grads[pW2], grads[pB1], grads[pW1]},
					ddp.ReducerOptions{BucketBytes: 4 * (hidden + 1), Names: []string{"b2", "w2", "b1", "w1"}})
				if err != nil {
					errs[r] = err
					return
				}
				pos := [...]int{pB2: 0, pW2: 1, pB1: 2, pW1: 3}
				ready = func(i int) error { return red.MarkReady(ctx, pos[i]) }
			}
			lo, hi := samples*r/ranks, samples*(r+1)/ranks
			lossBuf := make([]float64, 1)
			lossParts[r] = make([]float64, epochs)
			for e := 0; e < epochs; e++ {
				loss, err := m.grads(x, y, lo, hi, grads, ready)
				if err == nil && overlap {
					err = red.Wait(ctx) // every bucket reduced: the step's mean gradients
				} else if err == nil {
					err = gs.Sync(ctx, arena.Flat()) // one zero-copy all-reduce of the whole model
				}
				if err != nil {
					errs[r] = err
					return
				}
				m.step(grads)
				// The epoch's loss over the whole data set: sum the shards'.
				lossBuf[0] = loss
				if err := collective.AllReduce(ctx, c, lossBuf, collective.Sum); err != nil {
					errs[r] = err
					return
				}
				lossParts[r][e] = lossBuf[0] / samples
			}
			final[r] = m.params()
		}(r)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	copy(losses, lossParts[0])
	return losses, final, nil
}

func main() {
	ranks := flag.Int("ranks", 4, "data-parallel ranks")
	epochs := flag.Int("epochs", 20, "full-batch gradient steps")
	bk := flag.String("backend", "", "auto, vulkan, metal or host (default: GOCOLL_BACKEND, then auto)")
	overlap := flag.Bool("overlap", true, "average the gradients during backward (a ddp.Reducer); false: a ddp.Sync after it")
	flag.Parse()
	losses, _, err := Train(context.Background(), *ranks, *epochs, *bk, *overlap)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dataparallel:", err)
		os.Exit(1)
	}
	for e, l := range losses {
		fmt.Printf("epoch %3d  loss %.6f\n", e+1, l)
	}
}
