package collective

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/gocoll/gocoll/backend"
)

var allStrategies = []Strategy{Direct, Pipelined, Ring, Tree, Hierarchical}

// runWith runs one all-reduce with strategy s on every rank.
func runWith[T Float](t testing.TB, g *Group, inputs [][]float64, op Op, s Strategy, inPlace bool) [][]T {
	t.Helper()
	n := len(inputs[0])
	send := make([][]T, g.Size())
	recv := make([][]T, g.Size())
	for r := range send {
		send[r] = make([]T, n)
		for i, v := range inputs[r] {
			send[r][i] = T(v)
		}
		recv[r] = send[r]
		if !inPlace {
			recv[r] = make([]T, n)
		}
	}
	noErrors(t, onRanks(g, func(c *Comm) error {
		return AllReduceWith(context.Background(), c, send[c.Rank()], recv[c.Rank()], op, s)
	}))
	return recv
}

func strategySizes(n int) []int {
	return []int{0, 1, n - 1, n + 1, 4097, 1<<20 + 3}
}

// TestStrategiesMatrix: every strategy x op x dtype x rank count 1..8 x
// edge size equals the float64 reference, all ranks bitwise identical. A
// small exchange slot (ChunkBytes) makes every size above a few thousand
// elements run in several slices, so sizes not divisible by the ranks or
// by the slice are covered. The default run takes half the strategy x op
// pairs of each rank count and size, a different half for the next (on
// GPU backends at 5 ranks and for 1M+3 elements on 8 a quarter, every
// strategy among them; the race run a quarter everywhere;
// GOCOLL_TEST_FULL: all; TestConformance draws the pairs at random too).
func TestStrategiesMatrix(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		maxRanks := 8
		if bk != "host" && !fullRun() {
			maxRanks = 5
		}
		for ranks := 1; ranks <= maxRanks; ranks++ {
			if bk != "host" && !fullRun() && ranks != 2 && ranks != 3 && ranks != 5 {
				continue
			}
			g := openGroup(t, bk, ranks, func(o *Options) {
				o.ChunkBytes = 4096
				o.Config.LocalGroupSize = 2
			})
			for _, n := range strategySizes(ranks) {
				if n < 0 {
					continue
				}
				// The 1M+3 size: on host for 3 and 8 ranks (full runs: every
				// backend and rank count).
				if n > 1<<20 && !fullRun() && (bk != "host" || raceEnabled || ranks != 3 && ranks != 8) {
					continue
				}
				for si, s := range allStrategies {
					for oi, op := range allOps {
						// Half the strategy x op pairs, a different half
						// for each rank count and size (full runs: all).
						if !fullRun() && (si+oi+ranks+n)%2 != 0 {
							continue
						}
						if !fullRun() && (bk != "host" && ranks == 5 || raceShort() || n > 1<<20 && ranks == 8) && (si+oi+ranks+n)%4 != 0 {
							continue // a quarter: a different one for each size
						}
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
							maxUlps = 1
						}
						name := fmt.Sprintf("%s/ranks=%d/n=%d/%s/%s", bk, ranks, n, s, op)
						t.Run(name+"/float", func(t *testing.T) {
							checkResult(t, runWith[float32](t, g, inputs, op, s, n%2 == 0), want, op, maxUlps)
						})
						t.Run(name+"/double", func(t *testing.T) {
							checkResult(t, runWith[float64](t, g, inputs, op, s, n%2 == 1), want, op, maxUlps)
						})
					}
				}
			}
		}
	}
}

// TestDeterministicAcrossStrategies: in deterministic mode, random data gives
// bitwise the same result under every strategy, slot size and depth.
func TestDeterministicAcrossStrategies(t *testing.T) {
	arithmetic(t)
	for _, bk := range backendsUnderTest(t) {
		for _, ranks := range []int{3, 5} {
			inputs := make([][]float64, ranks)
			for r := range inputs {
				inputs[r] = make([]float64, 20011)
				for i := range inputs[r] {
					x := uint64(i*2654435761+r*40503) % 1000003
					inputs[r][i] = (float64(x) - 5e5) / 7.3e2
				}
			}
			var ref32 []float32
			var ref64 []float64
			for _, chunk := range []int{4096, 65536} {
				for _, depth := range []int{1, 3} {
					if bk != "host" && !fullRun() && (chunk == 4096) != (depth == 1) {
						continue // lavapipe: two of the four (full runs: all)
					}
					g := openGroup(t, bk, ranks, func(o *Options) {
						o.ChunkBytes = chunk
						o.Config.Deterministic = true
						o.Config.PipelineDepth = depth
						o.Config.LocalGroupSize = 2
					})
					for _, s := range allStrategies {
						for _, op := range []Op{Sum, Mean, Prod} {
							r32 := runWith[float32](t, g, inputs, op, s, false)
							r64 := runWith[float64](t, g, inputs, op, s, true)
							if op != Sum {
								continue
							}
							if ref32 == nil {
								ref32, ref64 = r32[0], r64[0]
								continue
							}
							for r := range r32 {
								if !bitsEqual(r32[r], ref32) || !bitsEqual(r64[r], ref64) {
									t.Fatalf("%s ranks=%d chunk=%d depth=%d %s: rank %d differs from the first strategy's result",
										bk, ranks, chunk, depth, s, r)
								}
							}
						}
					}
				}
			}
			// And the deterministic result is the rank-order sum.
			for i := range ref32 {
				acc := float32(inputs[0][i])
				acc64 := inputs[0][i]
				for r := 1; r < ranks; r++ {
					acc += float32(inputs[r][i])
					acc64 += inputs[r][i]
				}
				if ref32[i] != acc || ref64[i] != acc64 {
					t.Fatalf("%s: element %d: deterministic sum %v/%v, rank-order sum %v/%v", bk, i, ref32[i], ref64[i], acc, acc64)
				}
			}
		}
	}
}

// TestStrategiesMoveWhatTheyShould checks, with the counters at the backend
// seam, that each algorithm moves the bytes its formula says: bytes
// received per rank (inbox writes, after the upload of the input) and
// kernel dispatches.
func TestStrategiesMoveWhatTheyShould(t *testing.T) {
	const ranks, slot = 4, 4096
	const n = ranks * 3 * slot / 4 // 3 slices per chunk of f32
	es := 4
	bytes := int64(n * es)
	type layout struct {
		bk      string
		perRank bool // a logical device per rank: no shared memory on a GPU
	}
	var layouts []layout
	for _, bk := range backendsUnderTest(t) {
		layouts = append(layouts, layout{bk, false})
		if bk == "vulkan" {
			layouts = append(layouts, layout{bk, true})
		}
	}
	for _, lay := range layouts {
		bk := lay.bk
		g := openGroup(t, bk, ranks, func(o *Options) {
			o.ChunkBytes = slot
			o.Config.LocalGroupSize = 2
			o.DevicePerRank = lay.perRank
		})
		if lay.perRank && g.sharedMem {
			t.Fatalf("%s: ranks on devices of their own share memory", bk)
		}
		inputs := make([][]float64, ranks)
		for r := range inputs {
			inputs[r] = make([]float64, n)
		}
		type want struct{ recv, dispatches int64 }
		slices := bytes / slot
		// With ReduceMulti a step that receives and sends is one pass: where
		// slots are host memory of a discrete device, the all-gather's
		// forwarding steps and the tree's forwarding copies become
		// dispatches.
		_, fused := g.devs[0].Stream().(backend.MultiReducer)
		fused = fused && !g.sharedMem && !g.infos[0].UnifiedMemory // fuseCopy's condition
		fusedSteps := func(d int64) int64 {
			if fused {
				return d
			}
			return 0
		}
		expect := map[Strategy]func(r int) want{
			// Ring: 2(N-1) steps of one chunk each; N-1 reduce kernels per
			// chunk slice, and N-2 forwarding steps of the all-gather.
			Ring: func(r int) want {
				return want{recv: 2 * (ranks - 1) * bytes / ranks, dispatches: (ranks-1)*slices/ranks + fusedSteps((ranks-2)*slices/ranks)}
			},
			// Tree over 4 ranks: 0 has children 1, 2; 1 has child 3.
			Tree: func(r int) want {
				children := map[int]int64{0: 2, 1: 1, 2: 0, 3: 0}[r]
				down := int64(1)
				if r == 0 {
					down = 0
				}
				d := int64(0)
				if children > 0 {
					d = slices
					if r != 0 {
						d += fusedSteps(slices) // the broadcast's forwarding
					}
				}
				return want{recv: (children + down) * bytes, dispatches: d}
			},
			// Hierarchical, groups {0,1} {2,3}: a tree in each group, a ring
			// between leaders 0 and 2, a broadcast in each group.
			Hierarchical: func(r int) want {
				switch r {
				case 0, 2:
					return want{recv: bytes + 2*(2-1)*bytes/2, dispatches: slices + slices/2}
				}
				return want{recv: bytes, dispatches: 0}
			},
			// Direct: each rank gathers its 1/N slice from all N ranks.
			// On the host backend, one CPU pass between the ranks' memory
			// instead: no copy into a buffer, no dispatch.
			Direct: func(r int) want {
				if bk == "host" {
					return want{}
				}
				return want{recv: bytes, dispatches: 1}
			},
		}
		for s, f := range expect {
			before := make([]int64, ranks)
			beforeD := make([]int64, ranks)
			beforeW := make([]int64, ranks)
			for r := 0; r < ranks; r++ {
				c := g.counters(r)
				before[r], beforeD[r], beforeW[r] = g.comms[r].recvBytes, c.Dispatches, c.BytesWritten
			}
			runWith[float32](t, g, inputs, Sum, s, true)
			for r := 0; r < ranks; r++ {
				c := g.counters(r)
				got := want{recv: g.comms[r].recvBytes - before[r], dispatches: c.Dispatches - beforeD[r]}
				if s == Direct {
					// Direct gathers from the peers' buffers, not links.
					got.recv = c.BytesWritten - beforeW[r]
				}
				if w := f(r); got != w {
					t.Errorf("%s %s rank %d: received %d bytes in %d dispatches, want %d in %d",
						bk, s, r, got.recv, got.dispatches, w.recv, w.dispatches)
				}
				// The host copies at the seam: the input's upload, plus
				// each received slot's copy unless the ranks share memory
				// (their devices then read the senders' slots in place).
				if s != Direct {
					wrote := c.BytesWritten - beforeW[r]
					copied := bytes + f(r).recv
					zeroCopy := g.sharedMem || linkSlotsImported(g)
					if zeroCopy {
						copied = bytes
					}
					if wrote != copied {
						t.Errorf("%s %s rank %d (shared memory %v, imported links %v): %d bytes written from the host, want %d",
							bk, s, r, g.sharedMem, linkSlotsImported(g), wrote, copied)
					}
				}
			}
		}
	}
}

// TestAutoIsMeasuredAndAgreed: the cost model's constants are measured, and
// every rank runs the same strategy (the fingerprint includes it).
func TestAutoIsMeasuredAndAgreed(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 4)
		submit, memcpy, cp, red, hand, err := g.modelConstants(0)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]float64{"submit": submit, "memcpy": memcpy, "copy": cp, "reduce": red, "handoff": hand} {
			if !(v > 0) {
				t.Errorf("%s: %s constant %v not measured", bk, name, v)
			}
		}
		small, _ := g.comms[0].AutoChoice(64, 0)
		big, times := g.comms[0].AutoChoice(64<<20, 0)
		t.Logf("%s: auto picks %s for 64 B and %s for 64 MiB (model: %v)", bk, small, big, times)
		inputs := [][]float64{{1, 2}, {3, 4}, {5, 6}, {7, 8}}
		checkResult(t, runWith[float32](t, g, inputs, Sum, Auto, false), []float64{16, 20}, Sum, 0)
	}
}

// TestAutoOneRank: a one-rank group's Auto all-reduce asks no cost model
// (nothing moves between ranks): its calls measure nothing, copy send to
// recv exactly and allocate nothing.
func TestAutoOneRank(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 1)
		c := g.Comm(0)
		send, recv := []float32{1, -0.5, float32(math.Inf(1))}, make([]float32, 3)
		ctx := context.Background()
		allocs := testing.AllocsPerRun(100, func() {
			if err := AllReduceInto(ctx, c, send, recv, Sum); err != nil {
				t.Fatal(err)
			}
		})
		for i := range send {
			if math.Float32bits(recv[i]) != math.Float32bits(send[i]) {
				t.Fatalf("%s: recv[%d] = %v, want %v", bk, i, recv[i], send[i])
			}
		}
		if g.model.Done() {
			t.Errorf("%s: a one-rank group's all-reduce measured the cost model", bk)
		}
		if allocs != 0 {
			t.Errorf("%s: %v allocations per one-rank all-reduce, want 0", bk, allocs)
		}
	}
}

// TestAutoHostRatePerType: the CPU reduction rate of strategy Host is
// measured for every element type, and the model charges each type its own
// rate (a 16-bit float's conversions make the CPU several times slower per
// byte than float32, and Auto must not pick Host for it on float32's rate).
func TestAutoHostRatePerType(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 2)
		m := g.measure(g.comms[0])
		if m.Err != nil {
			t.Fatalf("%s: %v", bk, m.Err)
		}
		for dt := backend.DType(0); dt < backend.NumDTypes; dt++ {
			if !(m.CPUByType[dt] > 0) {
				t.Errorf("%s: %v: CPU reduce rate %v not measured", bk, dt, m.CPUByType[dt])
			}
		}
		if m.CPUByType[backend.F32] != m.CPUReduce {
			t.Errorf("%s: float32 rate %v, CPUReduce %v", bk, m.CPUByType[backend.F32], m.CPUReduce)
		}
		t.Logf("%s: CPU reduce bytes/s by type: %.3g", bk, m.CPUByType)
		// The model itself: a type reduced 10x slower per byte costs 10x
		// the reduction time, the other terms unchanged.
		var mm costModel
		mm.Memcpy, mm.ParMemcpy, mm.Handoff = 1e10, 1e10, 1e-6
		mm.CPUReduce = 1e9
		mm.CPUByType[backend.F32] = 1e9
		mm.CPUByType[backend.Half] = 1e8
		const B = 1 << 20
		f32 := mm.predict(Host, backend.F32, B, 2, 2, 2)
		half := mm.predict(Host, backend.Half, B, 2, 2, 2)
		if want := f32 + 9*float64(B)/1e9; math.Abs(half-want) > 1e-9 {
			t.Errorf("model: Host for half %v s, want %v (float32 %v)", half, want, f32)
		}
		if i32 := mm.predict(Host, backend.I32, B, 2, 2, 2); i32 != f32 {
			t.Errorf("model: a type not measured uses CPUReduce: %v, want %v", i32, f32)
		}
	}
}

// TestStrategiesAboveBindingLimit: with the binding limit lowered to 4 KiB
// every strategy reduces tensors far above it correctly.
func TestStrategiesAboveBindingLimit(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 3, func(o *Options) {
			o.MaxBindingBytes = 4096
			o.ChunkBytes = 64 << 10
			o.Config.LocalGroupSize = 2
		})
		const n = 100003
		inputs := make([][]float64, 3)
		for r := range inputs {
			inputs[r] = make([]float64, n)
			for i := range inputs[r] {
				inputs[r][i] = exactInput(Sum, r, i)
			}
		}
		want := refReduce(inputs, Sum)
		for _, s := range allStrategies {
			checkResult(t, runWith[float32](t, g, inputs, Sum, s, true), want, Sum, 0)
			checkResult(t, runWith[float64](t, g, inputs, Sum, s, false), want, Sum, 0)
		}
	}
}

// linkSlotsImported reports whether the group's links are host memory that
// both ends' devices imported (so receivers read the slots in place).
func linkSlotsImported(g *Group) bool {
	g.linkMu.Lock()
	defer g.linkMu.Unlock()
	n := 0
	for _, l := range g.linkMap {
		used, inPlace := l.InPlace()
		if !used {
			continue
		}
		if !inPlace {
			return false
		}
		n++
	}
	return n > 0
}

// modelConstants returns the group's cost-model constants, measuring them on rank's
// device if that has not happened yet (tests).
// The measurement runs on rank's device as an operation of its Comm: it
// fails with ErrConcurrentUse while the Comm is in use by another goroutine.
func (g *Group) modelConstants(rank int) (Submit, Memcpy, Copy, Reduce, Handoff float64, err error) {
	if rank < 0 || rank >= g.nl {
		return 0, 0, 0, 0, 0, invalidArg("modelConstants: rank %d out of range", rank)
	}
	m, err := g.measureOn(g.comms[rank])
	if err != nil {
		return 0, 0, 0, 0, 0, err
	}
	return m.Submit, m.Memcpy, m.Copy, m.Reduce, m.Handoff, m.Err
}
