package collective

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/parreduce"
)

// The prefix reductions on the devices (slicecoll.go's scanDevice over
// internal/direct's Scan): every element type and op against an
// independent reference and bit for bit against the host backend, and a
// count of the device's reduction work that shows where the prefix ran.

// scanDraw is one Scan or Exscan call of the tests below.
type scanDraw struct {
	ty              confType
	op              Op
	n               int
	scalars         []float64 // PreMulSum's, per rank (nil: op itself)
	excl, inPlace   bool
	pinned          bool // send and recv in HostBuffers
	small, zeroHalf bool // inputs: small values; half of them zero (the logical ops)
}

// scanOps are the ops Scan takes on type t, PreMulSum (opPreMulSum here)
// included.
func scanOps(t confType) []Op {
	ops := []Op{Sum, Prod, Max, Min, opPreMulSum}
	if t.isInt() {
		ops = append(ops, BAnd, BOr, BXor, LAnd, LOr, LXor)
	}
	return ops
}

// scanInputs draws N ranks' n inputs of c's type as bits: integers small
// or of any bits; floats small integers (exact sums and products),
// values of any bits (subnormals, Inf and NaN among them) or values near
// one (inexact sums, rounded in rank order).
func scanInputs(rng *rand.Rand, c scanDraw, N int) [][]uint64 {
	t := c.ty
	in := make([][]uint64, N)
	kind := rng.IntN(3)
	for r := range in {
		in[r] = make([]uint64, c.n)
		for i := range in[r] {
			var v uint64
			switch {
			case c.zeroHalf && rng.IntN(2) == 0:
			case t.isInt() && c.small:
				v = uint64(rng.IntN(9)-4) & t.mask()
			case t.isInt():
				v = rng.Uint64() & t.mask()
			case kind == 0 || c.small:
				v = t.encode(float64(rng.IntN(7) - 3))
			case kind == 1:
				v = rng.Uint64() & t.mask()
			default:
				v = t.encode(1 + rng.Float64()/8)
			}
			in[r][i] = v
		}
	}
	return in
}

// scanEvery runs c on each of groups (one backend each, of one rank count)
// with the same inputs, and checks every rank's recv against rankOrderRef
// of the inputs of ranks 0..r (Exscan: 0..r-1; rank 0's recv untouched)
// and bit for bit against the first group's (any NaN for a NaN: payloads
// may differ).
func scanEvery[T Elem](t *testing.T, c scanDraw, in [][]uint64, groups ...*Group) {
	t.Helper()
	N := groups[0].Size()
	ty, op := c.ty, c.op
	red := in
	if c.scalars != nil {
		red = make([][]uint64, N)
		for r := range red {
			red[r] = make([]uint64, c.n)
			for i, v := range in[r] {
				red[r][i] = preMulScale(ty, v, c.scalars[r])
			}
		}
		op = Sum
	}
	want := make([][]uint64, N)
	vals := make([]uint64, 0, N)
	for r := range want {
		k := r + 1
		if c.excl {
			k = r
		}
		want[r] = make([]uint64, c.n)
		for i := range want[r] {
			switch {
			case k == 0 && c.inPlace:
				want[r][i] = in[0][i]
			case k == 0:
				want[r][i] = ty.poison()
			default:
				vals = vals[:0]
				for q := range k {
					vals = append(vals, red[q][i])
				}
				want[r][i] = rankOrderRef(ty, op, vals)
			}
		}
	}
	var first [][]uint64
	ctx := context.Background()
	for _, g := range groups {
		recvs := make([][]T, N)
		hbs := make([]*HostBuffer[T], 2*N)
		defer func() {
			for _, h := range hbs {
				if h != nil {
					if err := h.Close(); err != nil {
						t.Errorf("HostBuffer.Close: %v", err)
					}
				}
			}
		}()
		noErrors(t, onRanks(g, func(cm *Comm) error {
			r := cm.Rank()
			send, recv := make([]T, c.n), make([]T, c.n)
			if c.pinned {
				for i := range 2 {
					h, err := NewHostBuffer[T](c.n)
					if err != nil {
						return err
					}
					hbs[2*r+i] = h
				}
				send, recv = hbs[2*r].Data, hbs[2*r+1].Data
			}
			setBits(send, in[r], 0)
			setBits(recv, nil, ty.poison())
			if c.inPlace {
				recv = send
			}
			recvs[r] = recv
			op := c.op
			if c.scalars != nil {
				var err error
				if op, err = cm.PreMulSum(c.scalars[r]); err != nil {
					return err
				}
				defer cm.DestroyOp(op)
			}
			if c.excl {
				return Exscan(ctx, cm, send, recv, op)
			}
			return Scan(ctx, cm, send, recv, op)
		}))
		got := make([][]uint64, N)
		for r := range got {
			got[r] = elemBits(recvs[r])
			if kind, bad := checkBits(ty, got[r], want[r], !ty.isInt()); kind != "" {
				t.Fatalf("%s N=%d %s %s n=%d exclusive=%v inPlace=%v pinned=%v premul=%v: rank %d: %s: %s",
					g.Backend(), N, ty, c.op, c.n, c.excl, c.inPlace, c.pinned, c.scalars, r, kind, bad)
			}
			if first != nil {
				if kind, bad := checkBits(ty, got[r], first[r], !ty.isInt()); kind != "" {
					t.Fatalf("%s N=%d %s %s n=%d exclusive=%v inPlace=%v pinned=%v: rank %d differs from %s: %s",
						g.Backend(), N, ty, c.op, c.n, c.excl, c.inPlace, c.pinned, r, groups[0].Backend(), bad)
				}
			}
		}
		if first == nil {
			first = got
		}
	}
}

// scanner runs scanEvery at an element type (confElems' elemOf[T]).
type scanner interface {
	scanEvery(t *testing.T, c scanDraw, in [][]uint64, groups ...*Group)
}

func (elemOf[T]) scanEvery(t *testing.T, c scanDraw, in [][]uint64, groups ...*Group) {
	t.Helper()
	scanEvery[T](t, c, in, groups...)
}

// TestScanDeviceEvery: Scan and Exscan on 1 to 7 ranks, every element type
// and every op Scan takes (PreMulSum with a scalar per rank; on more than
// 3 ranks two ops per type drawn), in place or not, on slices or
// HostBuffers, lengths 0, 1, odd, around the kernels' 256-invocation work
// group and their 16-byte accesses in each rank's slice, and in one call
// per rank count around the host copies' 256 KiB pieces in each rank's
// slice:
// exact against a plain loop in rank order (rankOrderRef: the kernels'
// arithmetic, written independently) on the host backend (the CPU's
// prefixes) and on lavapipe (the devices'), and lavapipe's bits the host
// backend's. The seed is printed. Unless full, 1 to 3 ranks and one rank
// count of 4 to 7 drawn (each rank's device compiles the kernels of every
// prefix length).
func TestScanDeviceEvery(t *testing.T) {
	if !haveVulkan(t) {
		t.Skip("needs the vulkan backend")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x7363616e))
	ranks := []int{1, 2, 3, 4, 5, 6, 7}
	if !fullRun() {
		ranks = []int{1, 2, 3, 4 + rng.IntN(4)}
	}
	for _, N := range ranks {
		host, vk := openGroup(t, "host", N), openGroup(t, "vulkan", N)
		wg := 256 * N
		sizes := []int{0, 1, 7, N + 2, wg - 1, wg, wg + 1, 4*wg - 3, 4 * wg, 4*wg + 5}
		big := rng.IntN(int(numConfTypes))
		for ty := range numConfTypes {
			if raceEnabled && ty != confType(N)%numConfTypes && ty != tF16 {
				continue // the race run: two types per rank count
			}
			ops := scanOps(ty)
			if N > 3 {
				// Each op of the type once more, and two more ops: every
				// prefix length of the 16- and 8-bit floats is a kernel
				// of its own, compiled on each rank's device.
				rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
				ops = ops[:2]
			}
			for _, op := range ops {
				c := scanDraw{ty: ty, op: op, n: sizes[rng.IntN(len(sizes))], excl: rng.IntN(2) == 0, inPlace: rng.IntN(3) == 0}
				c.pinned = c.n > 0 && rng.IntN(4) == 0
				if int(ty) == big && (op == Sum || N > 3) {
					es := ty.size()
					c.n = N*parreduce.ChunkBytes/es + rng.IntN(3) - 1
					big = -1
				}
				c.small = op == Prod || rng.IntN(2) == 0
				c.zeroHalf = op >= LAnd && op <= LXor
				if op == opPreMulSum {
					c.scalars = make([]float64, N)
					for r := range c.scalars {
						c.scalars[r] = []float64{1, 2, -3, 0.5}[rng.IntN(4)]
						if ty.isInt() { // integral, and within the unsigned types
							c.scalars[r] = math.Abs(math.Trunc(c.scalars[r]))
						}
					}
				}
				confElems[ty].(scanner).scanEvery(t, c, scanInputs(rng, c, N), host, vk)
			}
		}
	}
}

// deviceCounters returns the counters of g's distinct devices.
func deviceCounters(g *Group) []*backend.Counters {
	var out []*backend.Counters
	for r := range g.Size() {
		if ct := g.Comm(r).dev.Counters(); !slices.Contains(out, ct) {
			out = append(out, ct)
		}
	}
	return out
}

// reducedBytes sums BytesReduced over cts.
func reducedBytes(cts []*backend.Counters) int64 {
	var n int64
	for _, ct := range cts {
		n += ct.BytesReduced.Load()
	}
	return n
}

// TestScanOnDevice: on lavapipe the prefixes are the devices' reduction
// kernels: Scan of n elements on N ranks writes (N-1)n elements with
// reduction kernels over the ranks' devices (each rank's slice: N-1
// prefixes of two or more inputs), Exscan (N-2)n (rank N-1's input takes
// part in no prefix): one chain step per prefix for int32 and for the
// extrema of Float16, one kernel over the whole prefix for a Float16 sum;
// the host backend's prefixes run on the CPU and its device reduces
// nothing.
func TestScanOnDevice(t *testing.T) {
	if !haveVulkan(t) {
		t.Skip("needs the vulkan backend")
	}
	ctx := context.Background()
	const n = 1000
	for _, bk := range []string{"vulkan", "host"} {
		for _, N := range []int{2, 3, 5} {
			g := openGroup(t, bk, N)
			cts := deviceCounters(g)
			for _, excl := range []bool{false, true} {
				for _, es := range []int{4, 2} {
					before := reducedBytes(cts)
					noErrors(t, onRanks(g, func(c *Comm) error {
						x := make([]int32, n)
						for i := range x {
							x[i] = int32(c.Rank() + i)
						}
						switch {
						case es == 2 && excl:
							h := make([]Float16, n)
							return Exscan(ctx, c, h, h, Sum)
						case es == 2:
							return Scan(ctx, c, make([]Float16, n), make([]Float16, n), Max)
						case excl:
							return Exscan(ctx, c, x, x, Sum)
						}
						return Scan(ctx, c, x, make([]int32, n), Prod)
					}))
					got := reducedBytes(cts) - before
					prefixes := N - 1
					if excl {
						prefixes = N - 2
					}
					want := int64(prefixes * n * es)
					if bk == "host" {
						want = 0
					}
					if got != want {
						t.Fatalf("%s N=%d exclusive=%v %d-byte elements: %d bytes written by reduction kernels, want %d", bk, N, excl, es, got, want)
					}
				}
			}
		}
	}
}

// BenchmarkScan measures Scan and Exscan (sum of float32, out of place)
// per backend, rank count and size (bytes: one rank's input, SetBytes),
// with busbw = algbw x (N-1)/N as allreduce-perf reports it: on vulkan
// the devices' prefixes, on host the CPU's.
func BenchmarkScan(b *testing.B) {
	for _, bk := range backendsUnderTest(b) {
		for _, coll := range []string{"Scan", "Exscan"} {
			for _, ranks := range []int{2, 4} {
				for _, size := range []int{16 << 20, 64 << 20} {
					b.Run(fmt.Sprintf("%s/%s/ranks=%d/bytes=%d", bk, coll, ranks, size), func(b *testing.B) {
						g := openGroup(b, bk, ranks, benchOptions(b))
						in, out := make([][]float32, ranks), make([][]float32, ranks)
						for r := range in {
							in[r], out[r] = make([]float32, size/4), make([]float32, size/4)
							for i := range in[r] {
								in[r][i] = float32(i % 17)
							}
						}
						run := func(c *Comm) error {
							if coll == "Exscan" {
								return Exscan(context.Background(), c, in[c.Rank()], out[c.Rank()], Sum)
							}
							return Scan(context.Background(), c, in[c.Rank()], out[c.Rank()], Sum)
						}
						l := loopRanks(g, run)
						defer l.stop()
						benchLoop(b, l, func() error { return run(g.Comm(0)) }, int64(size), float64(ranks-1)/float64(ranks))
					})
				}
			}
		}
	}
}

// TestScanZeroAllocs: a steady-state Scan and Exscan on 4 ranks (float32,
// a Float16 sum: one kernel per prefix, and float32 in HostBuffers: zero
// copy on lavapipe) allocates nothing on either backend, in the process
// (every rank's goroutine counted).
func TestScanZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	ctx := context.Background()
	const n = 4099
	for _, bk := range backendsUnderTest(t) {
		g := openGroup(t, bk, 4)
		in, out := make([][]float32, 4), make([][]float32, 4)
		hin, hout := make([][]Float16, 4), make([][]Float16, 4)
		pinned := make([]*HostBuffer[float32], 4)
		for r := range in {
			in[r], out[r] = make([]float32, n), make([]float32, n)
			hin[r], hout[r] = make([]Float16, n), make([]Float16, n)
			var err error
			if pinned[r], err = NewHostBuffer[float32](n); err != nil {
				t.Fatal(err)
			}
			defer pinned[r].Close()
		}
		for _, coll := range []string{"Scan", "Exscan", "Scan16", "ExscanPinned"} {
			run := func(c *Comm) error {
				r := c.Rank()
				switch coll {
				case "Scan":
					return Scan(ctx, c, in[r], out[r], Max)
				case "Exscan":
					return Exscan(ctx, c, in[r], in[r], Sum)
				case "ExscanPinned":
					return Exscan(ctx, c, pinned[r].Data, pinned[r].Data, Sum)
				}
				return Scan(ctx, c, hin[r], hout[r], Sum)
			}
			l := loopRanks(g, run)
			call := func() error { return run(g.Comm(0)) }
			for range 3 { // warm the pools
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
			l.stop()
			if err != nil {
				t.Fatal(err)
			}
			if a != 0 {
				t.Errorf("%s %s: %v allocations per call, want 0", bk, coll, a)
			}
		}
	}
}

// TestScanZeroCopy: on lavapipe, Scan and Exscan of float32 in HostBuffers
// (every rank's device imports them) run without a host copy: the
// devices' kernels write (N-1)n elements for Scan, (N-2)n for Exscan (as
// staged), and device copies move each prefix into the outputs (Scan out
// of place: N n elements, every rank's slice of every recv; Exscan in
// place: (N-1)n, rank 0's recv untouched), where plain slices take the
// staged path, whose host copies the devices do not count; a Float16 sum
// (one kernel per prefix) takes the staged path from HostBuffers too.
// The results are checked exactly.
func TestScanZeroCopy(t *testing.T) {
	if !haveVulkan(t) {
		t.Skip("needs the vulkan backend")
	}
	ctx := context.Background()
	const n = 1001
	for _, N := range []int{2, 3, 5} {
		g := openGroup(t, "vulkan", N)
		cts := deviceCounters(g)
		for _, tc := range []struct {
			excl, pinned, half bool
		}{{false, true, false}, {true, true, false}, {false, false, false}, {true, true, true}} {
			var before backend.CounterSnapshot
			for _, ct := range cts {
				s := ct.Snapshot()
				before.BytesReduced += s.BytesReduced
				before.BytesCopied += s.BytesCopied
			}
			outs := make([][]float32, N)
			noErrors(t, onRanks(g, func(c *Comm) error {
				r := c.Rank()
				if tc.half {
					h, err := NewHostBuffer[Float16](n)
					if err != nil {
						return err
					}
					defer h.Close()
					return Exscan(ctx, c, h.Data, h.Data, Sum)
				}
				send, recv := make([]float32, n), make([]float32, n)
				if tc.pinned {
					hs, err := NewHostBuffer[float32](n)
					if err != nil {
						return err
					}
					defer hs.Close()
					hr, err := NewHostBuffer[float32](n)
					if err != nil {
						return err
					}
					defer hr.Close()
					send, recv = hs.Data, hr.Data
				}
				for i := range send {
					send[i] = float32(r*1000 + i)
				}
				defer func() { outs[r] = slices.Clone(recv) }()
				if tc.excl {
					recv = send
					return Exscan(ctx, c, send, send, Sum)
				}
				return Scan(ctx, c, send, recv, Sum)
			}))
			var reduced, copied int64
			for _, ct := range cts {
				s := ct.Snapshot()
				reduced += s.BytesReduced
				copied += s.BytesCopied
			}
			reduced -= before.BytesReduced
			copied -= before.BytesCopied
			prefixes, copies := N-1, N
			if tc.excl {
				prefixes, copies = N-2, N-1
			}
			es := 4
			if tc.half {
				es = 2
			}
			wantReduced, wantCopied := int64(prefixes*n*es), int64(copies*n*es)
			if !tc.pinned || tc.half {
				wantCopied = 0
			}
			if reduced != wantReduced || copied != wantCopied {
				t.Fatalf("N=%d %+v: kernels wrote %d bytes, device copies moved %d; want %d and %d", N, tc, reduced, copied, wantReduced, wantCopied)
			}
			if tc.half {
				continue
			}
			for r, out := range outs {
				if tc.excl && r == 0 {
					out = out[:0] // rank 0's Exscan recv: its send, untouched in place
				}
				for i, v := range out {
					last := r
					if tc.excl {
						last = r - 1
					}
					want := 0.0
					for q := 0; q <= last; q++ {
						want += float64(q*1000 + i)
					}
					if float64(v) != want {
						t.Fatalf("N=%d %+v: rank %d element %d = %v, want %v", N, tc, r, i, v, want)
					}
				}
			}
		}
	}
}
