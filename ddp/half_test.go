package ddp

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/gocoll/gocoll/collective"
)

// half is the two 16-bit gradient types with their conversions.
type half[T Grad] struct {
	name string
	from func(float32) T
	to   func(T) float32
	bits int // mantissa bits
}

var (
	f16  = half[collective.Float16]{"Float16", collective.Float16From, collective.Float16.Float32, 10}
	bf16 = half[collective.BFloat16]{"BFloat16", collective.BFloat16From, collective.BFloat16.Float32, 7}
)

// ulp is the spacing of the 16-bit values around x (the subnormal spacing
// near 0).
func (h half[T]) ulp(x float64) float64 {
	minExp := -14 // Float16's smallest normal exponent
	if h.bits == 7 {
		minExp = -126
	}
	_, e := math.Frexp(math.Abs(x)) // |x| = m * 2^e, m in [0.5, 1)
	return math.Ldexp(1, max(e-1, minExp)-h.bits)
}

// TestHalfGradients: 3 ranks train a quadratic model with Float16 and
// BFloat16 gradients, through Sync on an Arena and through SyncAll (fused
// buckets and a tensor reduced in place), with the default Options and
// with the adaptive selector probing every step. After every step each
// rank's averaged gradient is bitwise the same on every rank, bitwise the
// mean collective defines (the float32 sum in rank order divided by 3,
// rounded once), and within half a 16-bit ulp (plus float32's error) of
// the float64 mean of the ranks' gradients; the float32 parameters stay
// bitwise identical across ranks and within the 16-bit rounding of a
// float64 training run. The race run (-short) trains with Float16 only,
// with the adaptive selector only (its first 26 steps take the default
// Options' path).
func TestHalfGradients(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		halfTraining(t, bk, f16)
		if raceEnabled && testing.Short() {
			continue // BFloat16 takes the same paths: checked by the run without the race detector
		}
		halfTraining(t, bk, bf16)
	}
}

func halfTraining[T Grad](t *testing.T, bk string, h half[T]) {
	const ranks, steps, lr = 3, 32, 0.25 // 32 steps: the selector probes from step 27
	sizes := []int{37, 1000, 3, 20000}   // FusionBytes 16 KiB: 20000 halves reduce in place
	total := 0
	for _, n := range sizes {
		total += n
	}
	// Rank r's data: its loss is 0.5 * sum_j (p_j - d_rj)^2, its gradient
	// p - d_r.
	data := func(r, j int) float64 { return math.Sin(float64(j*(r+3)))*4 + float64(r) }
	for oi, o := range []Options{{FusionBytes: 16 << 10}, {FusionBytes: 16 << 10, Adaptive: true, SwitchCooldown: 1, ProbeSteps: 1, ProbeLimit: 1e9}} {
		if raceEnabled && testing.Short() && oi == 0 {
			continue
		}
		g := openGroup(t, bk, ranks)
		ss := newSyncs[T](t, g, o)
		params := make([][]float32, ranks) // each rank's float32 master copy
		for r := range params {
			params[r] = make([]float32, total)
			for j := range params[r] {
				params[r][j] = float32(r) // different until broadcast
			}
		}
		ref := make([]float64, total) // the float64 run: exact gradients
		arenas := make([]*Arena[T], ranks)
		for r := range arenas {
			a, err := NewArena[T](sizes...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			arenas[r] = a
		}
		noErrors(t, onRanks(g, func(c *collective.Comm) error {
			return BroadcastParameters(context.Background(), c, 0, [][]float32{params[c.Rank()]})
		}))
		grads := make([][]T, ranks)
		for step := 0; step < steps; step++ {
			in := make([][]T, ranks) // the ranks' gradients before the sync
			for r := range grads {
				grads[r] = arenas[r].Flat()
				for j := range grads[r] {
					grads[r][j] = h.from(params[r][j] - float32(data(r, j)))
				}
				in[r] = append([]T(nil), grads[r]...)
			}
			noErrors(t, onRanks(g, func(c *collective.Comm) error {
				s := ss[c.Rank()]
				if step%2 == 0 {
					return s.Sync(context.Background(), arenas[c.Rank()].Flat())
				}
				views := make([][]T, len(sizes))
				for i := range views {
					views[i] = arenas[c.Rank()].View(i)
				}
				return s.SyncAll(context.Background(), views)
			}))
			for j := 0; j < total; j++ {
				var sum32 float32
				var sum64, sumAbs, exact float64
				for r := 0; r < ranks; r++ {
					sum32 += h.to(in[r][j])
					sum64 += float64(h.to(in[r][j]))
					sumAbs += math.Abs(float64(h.to(in[r][j])))
					exact += ref[j] - data(r, j)
				}
				want := h.from(float32(float64(sum32) / ranks))
				got := grads[0][j]
				for r := 1; r < ranks; r++ {
					if grads[r][j] != got {
						t.Fatalf("%s %s %+v step %d element %d: rank %d has %v, rank 0 %v", bk, h.name, o, step, j, r, grads[r][j], got)
					}
				}
				if got != want {
					t.Fatalf("%s %s %+v step %d element %d: %v (%v), want %v (%v): the float32 mean rounded once",
						bk, h.name, o, step, j, got, h.to(got), want, h.to(want))
				}
				// The float32 sum's error (at most (ranks-1) roundings of
				// partial sums bounded by sumAbs), the quotient's, then
				// the rounding to 16 bits.
				mean := sum64 / ranks
				f32err := (ranks-1)*0x1p-24*sumAbs/ranks + 0x1p-24*math.Abs(mean)
				if d := math.Abs(float64(h.to(got)) - mean); d > h.ulp(math.Abs(mean)+f32err)/2+f32err {
					t.Fatalf("%s %s step %d element %d: %v, the float64 mean is %v: off by %g, half an ulp is %g, float32's error %g",
						bk, h.name, step, j, h.to(got), mean, d, h.ulp(mean)/2, f32err)
				}
				for r := range params {
					params[r][j] -= lr * h.to(grads[r][j])
				}
				ref[j] -= lr * exact / ranks
			}
			for r := 1; r < ranks; r++ {
				if !bitsEqual(params[r], params[0]) {
					t.Fatalf("%s %s step %d: rank %d's parameters differ from rank 0's", bk, h.name, step, r)
				}
			}
		}
		// Against the float64 run: each step's gradient is off by at most
		// one 16-bit ulp (each rank's rounding and the mean's), and the
		// error contracts by (1 - lr) per step.
		worst := 0.0 // the largest error relative to its bound
		for j := range ref {
			bound := 0.0
			for _, r := range []int{0, 1, 2} {
				bound = max(bound, h.ulp(math.Abs(ref[j]-data(r, j))+1))
			}
			// sum over k of lr * (1-lr)^k * ulp <= ulp, with a margin.
			bound = 1.5*bound + 1e-5*math.Abs(ref[j]) + 1e-6
			worst = max(worst, math.Abs(float64(params[0][j])-ref[j])/bound)
			if d := math.Abs(float64(params[0][j]) - ref[j]); d > bound {
				t.Errorf("%s %s element %d: %v after %d steps, the float64 run has %v (off by %g > %g)",
					bk, h.name, j, params[0][j], steps, ref[j], d, bound)
			}
		}
		st := ss[0].Stats()
		if st.Steps != steps || st.BytesMoved < int64(steps*total*2) || (o.Adaptive && st.ProbeSteps == 0) {
			t.Errorf("%s %s: stats %+v after %d steps of %d bytes", bk, h.name, st, steps, total*2)
		}
		t.Logf("%s %s adaptive=%v: parameters within %.2f of the bound from the float64 run; %d probe steps",
			bk, h.name, o.Adaptive, worst, st.ProbeSteps)
	}
}

// TestHalfOptionsRefused: top-k compression and wire formats are refused
// for 16-bit gradients at New, with a *collective.ConfigError naming the
// field (errors.Is collective.ErrInvalidConfig); float32 takes both.
func TestHalfOptionsRefused(t *testing.T) {
	g := openGroup(t, "host", 1)
	c := g.Comm(0)
	check := func(what string, err error, field string) {
		t.Helper()
		var ce *collective.ConfigError
		if !errors.Is(err, collective.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("%s: %v, want a ConfigError for %s", what, err, field)
		}
	}
	_, err := New[collective.Float16](c, Options{TopK: 0.1})
	check("Float16 TopK", err, "TopK")
	_, err = New[collective.BFloat16](c, Options{TopK: 1})
	check("BFloat16 TopK", err, "TopK")
	_, err = New[collective.Float16](c, Options{Wire: 1})
	check("Float16 Wire", err, "Wire")
	_, err = New[collective.BFloat16](c, Options{Wire: 2})
	check("BFloat16 Wire", err, "Wire")
	_, err = New[float64](c, Options{Wire: 1})
	check("float64 Wire", err, "Wire")
	s, err := New[collective.BFloat16](c, Options{Adaptive: true, FusionBytes: 2})
	if err != nil {
		t.Fatalf("BFloat16 with Adaptive and a bucket of one element: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = New[collective.Float16](c, Options{FusionBytes: 1})
	check("Float16 FusionBytes 1", err, "FusionBytes")
}
