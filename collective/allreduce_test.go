package collective

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

var allOps = []Op{Sum, Mean, Max, Min, Prod}

// runAllReduce runs one all-reduce of inputs (one row per rank) in place or
// out of place and returns every rank's result as float64.
func runAllReduce[T Float](t testing.TB, g *Group, inputs [][]float64, op Op, inPlace bool) [][]T {
	t.Helper()
	n := len(inputs[0])
	send := make([][]T, g.Size())
	recv := make([][]T, g.Size())
	for r := range send {
		send[r] = make([]T, n)
		for i, v := range inputs[r] {
			send[r][i] = T(v)
		}
		if inPlace {
			recv[r] = send[r]
		} else {
			recv[r] = make([]T, n)
		}
	}
	keep := make([][]T, g.Size())
	for r := range send {
		keep[r] = append([]T(nil), send[r]...)
	}
	errs := onRanks(g, func(c *Comm) error {
		if inPlace {
			return AllReduce(context.Background(), c, send[c.Rank()], op)
		}
		return AllReduceInto(context.Background(), c, send[c.Rank()], recv[c.Rank()], op)
	})
	noErrors(t, errs)
	if !inPlace {
		for r := range send {
			if !bitsEqual(send[r], keep[r]) {
				t.Fatalf("rank %d: out-of-place send buffer was written", r)
			}
		}
	}
	return recv
}

func bitsEqual[T Float](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	return string(asBytes(a)) == string(asBytes(b))
}

// checkResult compares every rank's result with the reference and checks
// that all ranks are bitwise identical.
func checkResult[T Float](t testing.TB, got [][]T, want []float64, op Op, maxUlps float64) {
	t.Helper()
	var z T
	f64 := unsafe.Sizeof(z) == 8
	for r := range got {
		if r > 0 && !bitsEqual(got[r], got[0]) {
			t.Fatalf("rank %d result differs bitwise from rank 0", r)
		}
	}
	wrong := 0
	for i, w := range want {
		var wt float64
		if f64 {
			wt = w
		} else {
			wt = float64(float32(w))
		}
		g := float64(got[0][i])
		d := ulps(g, wt, f64)
		if d > maxUlps {
			if wrong < 5 {
				t.Errorf("element %d: got %v, want %v (%s, %.1f ulp)", i, g, wt, op, d)
			}
			wrong++
		}
	}
	if wrong > 0 {
		t.Fatalf("%d of %d elements wrong", wrong, len(want))
	}
}

// TestAllReduceMatrix checks every op x dtype x rank count 1..5 x edge size,
// in place and out of place, against the float64 reference (the race run:
// in place or out of place, alternating with the op and rank count).
func TestAllReduceMatrix(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for ranks := 1; ranks <= 5; ranks++ {
			g := openGroup(t, bk, ranks)
			for _, n := range sizesUnderTest(bk) {
				if bk != "host" && !fullRun() && n > 1000 && ranks != 3 && ranks != 4 {
					continue // lavapipe subset: big sizes on 3 and 4 ranks
				}
				for oi, op := range allOps {
					inputs := make([][]float64, ranks)
					for r := range inputs {
						inputs[r] = make([]float64, n)
						for i := range inputs[r] {
							inputs[r][i] = exactInput(op, r, i)
						}
					}
					want := refReduce(inputs, op)
					maxUlps := 0.0
					if op == Mean {
						maxUlps = 1 // the sum is exact; one multiply by 1/N rounds
					}
					for _, inPlace := range []bool{false, true} {
						if raceShort() && inPlace != ((oi+ranks)%2 == 0) {
							continue
						}
						name := fmt.Sprintf("%s/ranks=%d/n=%d/%s/inplace=%v", bk, ranks, n, op, inPlace)
						t.Run(name+"/float", func(t *testing.T) {
							checkResult(t, runAllReduce[float32](t, g, inputs, op, inPlace), want, op, maxUlps)
						})
						t.Run(name+"/double", func(t *testing.T) {
							checkResult(t, runAllReduce[float64](t, g, inputs, op, inPlace), want, op, maxUlps)
						})
					}
				}
			}
		}
	}
}

// TestAllReduceRandom checks sums of random data against float64 within a
// stated bound: |err| <= (N-1) * eps * sum|x| (left-to-right summation).
func TestAllReduceRandom(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		const ranks, n = 4, 10007
		g := openGroup(t, bk, ranks)
		rng := rand.New(rand.NewPCG(1, 2))
		inputs := make([][]float64, ranks)
		for r := range inputs {
			inputs[r] = make([]float64, n)
			for i := range inputs[r] {
				inputs[r][i] = float64(float32(rng.NormFloat64() * 1e3))
			}
		}
		want := refReduce(inputs, Sum)
		got := runAllReduce[float32](t, g, inputs, Sum, true)
		for i := range want {
			abs := 0.0
			for r := range inputs {
				abs += math.Abs(inputs[r][i])
			}
			bound := float64(ranks) * 0x1p-24 * abs
			if d := math.Abs(float64(got[0][i]) - want[i]); d > bound {
				t.Fatalf("%s: element %d: |%v - %v| = %g > bound %g", bk, i, got[0][i], want[i], d, bound)
			}
		}
	}
}

// TestAllReduceFloat64Exact: values f32 cannot hold survive (f64 is reduced
// in f64, never through f32), on the kernel path and on the host path with
// f64 switched off.
func TestAllReduceFloat64Exact(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for _, noF64 := range []bool{false, true} {
			// Direct: Auto may reduce this small call on the CPU (strategy Host).
			g := openGroup(t, bk, 3, func(o *Options) { o.DisableFloat64 = noF64; o.Config.Strategy = Direct })
			const n = 1001
			inputs := make([][]float64, 3)
			for r := range inputs {
				inputs[r] = make([]float64, n)
				for i := range inputs[r] {
					inputs[r][i] = 1 + math.Ldexp(1, -40) + float64(r)*math.Ldexp(1, -45) + float64(i)
				}
			}
			before := g.counters(0)
			got := runAllReduce[float64](t, g, inputs, Sum, false)
			for i := 0; i < n; i++ {
				want := inputs[0][i] + inputs[1][i] + inputs[2][i]
				if got[0][i] != want {
					t.Fatalf("%s noF64=%v: element %d: got %.20g, want %.20g", bk, noF64, i, got[0][i], want)
				}
				if float64(float32(want)) == want {
					t.Fatalf("test value %v is representable in f32", want)
				}
			}
			d := g.counters(0).Sub(before)
			if noF64 && d.Dispatches != 0 {
				t.Errorf("%s: f64 switched off but %d kernel dispatches ran", bk, d.Dispatches)
			}
			// The host backend's device is the CPU: Direct reduces in one
			// CPU pass between the ranks' memory, with its kernels' code.
			if !noF64 && d.Dispatches == 0 && bk != "host" {
				t.Errorf("%s: f64 reduced without a kernel", bk)
			}
			if noF64 && g.DeviceInfo(0).Float64 {
				t.Errorf("%s: DisableFloat64 not reported in DeviceInfo", bk)
			}
		}
	}
}

// TestAllReduceNaNInf: NaN and +-Inf propagate under every op.
func TestAllReduceNaNInf(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3)
		// element: rank0, rank1, rank2
		cols := [][3]float64{
			{nan, 1, 2}, {1, nan, 2}, {1, 2, nan},
			{inf, 1, 2}, {-inf, 1, 2}, {inf, -inf, 1},
			{0, math.Copysign(0, -1), 0}, {math.Copysign(0, -1), 0, math.Copysign(0, -1)},
			{inf, 0, 1}, {nan, inf, -inf},
		}
		inputs := make([][]float64, 3)
		for r := range inputs {
			for _, c := range cols {
				inputs[r] = append(inputs[r], c[r])
			}
		}
		for _, op := range allOps {
			want := refReduce(inputs, op)
			got := runAllReduce[float32](t, g, inputs, op, true)
			got64 := runAllReduce[float64](t, g, inputs, op, false)
			for i, w := range want {
				for _, gv := range []float64{float64(got[0][i]), got64[0][i]} {
					if math.IsNaN(w) != math.IsNaN(gv) || (!math.IsNaN(w) && (w != gv || math.Signbit(w) != math.Signbit(gv))) {
						t.Errorf("%s %s col %v: got %v, want %v", bk, op, cols[i], gv, w)
					}
				}
			}
		}
	}
}

// TestAllReduceLargeTensor reduces a 140 MiB f32 tensor (above lavapipe's
// 128 MiB maxStorageBufferRange) on two ranks.
func TestAllReduceLargeTensor(t *testing.T) {
	if testing.Short() {
		t.Skip("large tensor skipped in -short mode")
	}
	bks := backendsUnderTest(t)
	bk := bks[len(bks)-1] // vulkan when available
	g := openGroup(t, bk, 2)
	n := 140 << 20 / 4
	a := make([]float32, n)
	b := make([]float32, n)
	for i := range a {
		a[i] = float32(i % 1000)
		b[i] = float32(i % 7)
	}
	errs := onRanks(g, func(c *Comm) error {
		if c.Rank() == 0 {
			return AllReduce(context.Background(), c, a, Sum)
		}
		return AllReduce(context.Background(), c, b, Sum)
	})
	noErrors(t, errs)
	for i := range a {
		want := float32(i%1000 + i%7)
		if a[i] != want || b[i] != want {
			t.Fatalf("element %d: got %v/%v, want %v", i, a[i], b[i], want)
		}
	}
}

// TestAllReduceSplitsBindings lowers the binding limit so every slice needs
// several dispatches, and checks both the result and the dispatch counter at
// the backend seam.
func TestAllReduceSplitsBindings(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		if bk == "host" {
			continue // Direct on the CPU's own device is one CPU pass: no kernel, no binding
		}
		const limit = 4096
		g := openGroup(t, bk, 2, func(o *Options) { o.MaxBindingBytes = limit; o.Config.Strategy = Direct })
		if got := g.DeviceInfo(0).MaxBindingBytes; got != limit {
			t.Fatalf("%s: MaxBindingBytes = %d, want %d", bk, got, limit)
		}
		const n = 10001
		inputs := [][]float64{make([]float64, n), make([]float64, n)}
		for r := range inputs {
			for i := range inputs[r] {
				inputs[r][i] = exactInput(Sum, r, i)
			}
		}
		for _, dt := range []string{"float", "double"} {
			before := g.counters(0)
			if dt == "float" {
				checkResult(t, runAllReduce[float32](t, g, inputs, Sum, true), refReduce(inputs, Sum), Sum, 0)
			} else {
				checkResult(t, runAllReduce[float64](t, g, inputs, Sum, true), refReduce(inputs, Sum), Sum, 0)
			}
			es := 4
			if dt == "double" {
				es = 8
			}
			lo, hi := 0, n/2 // rank 0's slice of the two
			minPieces := int64(((hi-lo)*es + limit - 1) / limit)
			d := g.counters(0).Sub(before)
			if d.Dispatches < minPieces {
				t.Errorf("%s %s: %d dispatches for a %d-byte slice with a %d-byte binding limit, want >= %d",
					bk, dt, d.Dispatches, (hi-lo)*es, limit, minPieces)
			}
		}
	}
}

// TestAllReduceManyRanksOneDevice: 8 ranks on one device, each its own
// logical device and queue.
func TestAllReduceManyRanksOneDevice(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 8, func(o *Options) { o.Devices = []int{0, 0, 0, 0, 0, 0, 0, 0} })
		inputs := make([][]float64, 8)
		for r := range inputs {
			inputs[r] = make([]float64, 4099)
			for i := range inputs[r] {
				inputs[r][i] = exactInput(Sum, r, i)
			}
		}
		checkResult(t, runAllReduce[float32](t, g, inputs, Sum, false), refReduce(inputs, Sum), Sum, 0)
	}
}
