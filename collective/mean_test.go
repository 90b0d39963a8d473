package collective

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/backend/backendtest"
)

// TestAllReduceMeanULP: AllReduce with Mean on 1..8 ranks, f32 and f64,
// under Auto and every strategy, in place and out of place: every element
// of every rank is within 1 ulp of the exact mean S/N of inputs whose sums
// are exact (backendtest.MeanInputs: large, small and negative values), and
// in fact S/N correctly rounded (math/big reference), every rank bitwise
// the same. On lavapipe 2, 3, 5 and 7 ranks with Auto, Direct and Ring run
// outside ./build.sh test-full.
func TestAllReduceMeanULP(t *testing.T) {
	arithmetic(t)
	const n = 1031 // several 4096-byte slots, not a multiple of any rank count
	for _, bk := range backendsUnderTest(t) {
		for ranks := 1; ranks <= 8; ranks++ {
			if bk != "host" && !fullRun() && ranks != 2 && ranks != 3 && ranks != 5 && ranks != 7 {
				continue
			}
			g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 4096; o.Config.LocalGroupSize = 2 })
			for _, s := range append([]Strategy{Auto}, allStrategies...) {
				if bk != "host" && !fullRun() && s != Auto && s != Direct && s != Ring {
					continue
				}
				for _, inPlace := range []bool{true, false} {
					name := fmt.Sprintf("%s/ranks=%d/%s/in-place=%v", bk, ranks, s, inPlace)
					t.Run(name+"/f32", func(t *testing.T) { meanCase[float32](t, g, s, inPlace, n) })
					t.Run(name+"/f64", func(t *testing.T) { meanCase[float64](t, g, s, inPlace, n) })
				}
			}
		}
	}
}

// TestAllReduceMeanHostF64: the exact f64 host path of devices without f64
// kernels gives the same correctly rounded mean.
func TestAllReduceMeanHostF64(t *testing.T) {
	for _, ranks := range []int{3, 7} {
		g := openGroup(t, "host", ranks, func(o *Options) { o.DisableFloat64 = true })
		for _, s := range []Strategy{Direct, Pipelined} {
			t.Run(fmt.Sprintf("ranks=%d/%s", ranks, s), func(t *testing.T) { meanCase[float64](t, g, s, false, 1031) })
		}
	}
}

// meanCase runs one Mean all-reduce of n elements on every rank of g and
// checks it against the exact mean.
func meanCase[T Float](t *testing.T, g *Group, s Strategy, inPlace bool, n int) {
	dt := dtypeOf[T]()
	ranks := g.Size()
	r := rand.New(rand.NewPCG(uint64(ranks), uint64(dt)<<8|uint64(s)))
	in := backendtest.NewMeanInputs(r, dt, ranks, n)
	send, recv := make([][]T, ranks), make([][]T, ranks)
	for k := range send {
		send[k] = backendtest.MeanValues[T](in, k)
		recv[k] = send[k]
		if !inPlace {
			recv[k] = make([]T, n)
		}
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		return AllReduceWith(context.Background(), c, send[c.Rank()], recv[c.Rank()], Mean, s)
	}))
	for k := 1; k < ranks; k++ {
		if !bitsEqual(recv[k], recv[0]) {
			t.Fatalf("rank %d's mean differs bitwise from rank 0's", k)
		}
	}
	wrong := 0
	for i := range n {
		var sum int64
		for k := range ranks {
			sum += in.Mant[k][i]
		}
		got := float64(recv[0][i])
		want, ulps := backendtest.MeanError(got, sum, in.Exp[i], ranks, in.Prec)
		if ulps > 1 || got != want {
			if wrong < 5 {
				t.Errorf("element %d: got %v, exact mean rounds to %v (%.3g ulp)", i, got, want, ulps)
			}
			wrong++
		}
	}
	if wrong > 0 {
		t.Fatalf("%d of %d elements not the correctly rounded mean", wrong, n)
	}
}

// TestAllReduceMeanSpecials: NaN and infinities propagate through Mean on
// every strategy, and an overflowing sum stays infinite.
func TestAllReduceMeanSpecials(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	// Element i of rank r is cols[i][r]; want is the mean.
	cols := []struct {
		in   [3]float64
		want float64
	}{
		{[3]float64{nan, 1, 2}, nan}, {[3]float64{1, 2, nan}, nan}, {[3]float64{inf, 1, 2}, inf},
		{[3]float64{1, -inf, 2}, -inf}, {[3]float64{inf, -inf, 1}, nan}, {[3]float64{3, 3, 3}, 3},
		{[3]float64{math.MaxFloat32, math.MaxFloat32, 0}, inf},
	}
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3, func(o *Options) { o.ChunkBytes = 4096; o.Config.LocalGroupSize = 2 })
		for _, s := range append([]Strategy{Auto}, allStrategies...) {
			t.Run(fmt.Sprintf("%s/%s", bk, s), func(t *testing.T) {
				data := make([][]float32, 3)
				for r := range data {
					for _, c := range cols {
						data[r] = append(data[r], float32(c.in[r]))
					}
				}
				noErrors(t, onRanks(g, func(c *Comm) error {
					return AllReduceWith(context.Background(), c, data[c.Rank()], data[c.Rank()], Mean, s)
				}))
				for i, c := range cols {
					got := float64(data[0][i])
					if !(got == c.want || math.IsNaN(got) && math.IsNaN(c.want)) {
						t.Errorf("mean of %v = %v, want %v", c.in, got, c.want)
					}
				}
			})
		}
	}
}
