package collective

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

var tensorCollSeed = flag.Uint64("tensorcoll.seed", 0, "seed of the randomized tensor-collective tests (0: from the clock)")

// tensorTestSeed returns the seed of a randomized test and prints it.
func tensorTestSeed(t testing.TB) uint64 {
	s := *tensorCollSeed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -tensorcoll.seed=%d)", s, s)
	return s
}

// tensorSizes are chunk lengths: empty, single, odd, around the 16-byte
// alignment, the 64- and 256-wide work groups, a 1024-byte slot (the
// groups below) and 1024 elements.
var tensorSizes = []int{0, 1, 2, 3, 7, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1023, 1024, 1025}

// floatCase: small multiples of 1/4 (powers of two for prod), so every
// reduction of up to 5 ranks is exact in float32 and float64 whatever the
// order and the strategy; the reference is a float64 loop, Mean rounded
// once to the type.
func floatCase[T float32 | float64](name string) typeCase[T] {
	return typeCase[T]{
		name: name,
		ops:  []Op{Sum, Prod, Max, Min, Mean},
		draw: func(rng *rand.Rand, op Op, _ int) T {
			if op == Prod {
				return T([...]float64{1, 2, -1, 0.5, -2, 0.25}[rng.IntN(6)])
			}
			return T(float64(rng.IntN(4001)-2000) / 4)
		},
		ref: func(op Op, vals []T) T {
			acc := float64(vals[0])
			for _, v := range vals[1:] {
				x := float64(v)
				switch op {
				case Sum, Mean:
					acc += x
				case Prod:
					acc *= x
				case Max:
					acc = math.Max(acc, x)
				case Min:
					acc = math.Min(acc, x)
				}
			}
			if op == Mean {
				acc /= float64(len(vals))
			}
			return T(acc)
		},
	}
}

// sentinel returns n elements of the byte pattern 0xA5 (what recv
// elements nobody should write hold).
func sentinel[T Elem](n int) []T {
	s := make([]T, n)
	b := asBytes(s)
	for i := range b {
		b[i] = 0xA5
	}
	return s
}

// tbox is a tensor under test: len(vals) elements at element pad of a
// larger tensor whose other elements hold the sentinel, so a collective
// that writes outside its tensor is caught (and offsets off the 16-byte
// alignment are exercised).
type tbox[T Elem] struct {
	t, back *Tensor[T]
	pad     int
}

func newBox[T Elem](c *Comm, vals []T, pad int) (*tbox[T], error) {
	const tail = 3
	back, err := NewTensor[T](c, pad+len(vals)+tail)
	if err != nil {
		return nil, err
	}
	init := sentinel[T](back.Len())
	copy(init[pad:], vals)
	if err := back.Upload(init); err != nil {
		back.Close()
		return nil, err
	}
	buf, off := back.Buffer()
	w, err := WrapTensor[T](c, buf, off+pad*dtypeOf[T]().Size(), len(vals))
	if err != nil {
		back.Close()
		return nil, err
	}
	return &tbox[T]{t: w, back: back, pad: pad}, nil
}

func (b *tbox[T]) read() ([]T, error) {
	out := make([]T, b.t.Len())
	return out, b.t.Download(out)
}

// intact reports an error if an element around the tensor changed.
func (b *tbox[T]) intact() error {
	all := make([]T, b.back.Len())
	if err := b.back.Download(all); err != nil {
		return err
	}
	ref := sentinel[T](len(all))
	for i := range all {
		if (i < b.pad || i >= b.pad+b.t.Len()) && all[i] != ref[i] {
			return fmt.Errorf("element %d outside the tensor [%d, %d) was written", i, b.pad, b.pad+b.t.Len())
		}
	}
	return nil
}

func (b *tbox[T]) close() { b.back.Close() }

// onGroups runs f on every rank of the groups (one per process, each
// rank on its own goroutine) and returns the errors by global rank.
func onGroups(gs []*Group, f func(c *Comm) error) []error {
	errs := make([]error, gs[0].Size())
	var wg sync.WaitGroup
	for _, g := range gs {
		for i := 0; i < g.LocalSize(); i++ {
			wg.Add(1)
			go func(c *Comm) {
				defer wg.Done()
				errs[c.Rank()] = f(c)
			}(g.Comm(i))
		}
	}
	wg.Wait()
	return errs
}

// runTensorColl runs one tensor collective: every rank's send[r] and
// recv[r] (nil: no tensor) are uploaded into boxed tensors, f runs on every
// rank of the groups, and recv's contents come back; send must be
// unchanged and nothing around either tensor written.
func runTensorColl[T Elem](gs []*Group, pad int, send, recv [][]T, f func(c *Comm, s, r *Tensor[T]) error) ([][]T, []error) {
	out := make([][]T, gs[0].Size())
	errs := onGroups(gs, func(c *Comm) error {
		r := c.Rank()
		var st, rt *Tensor[T]
		var sb, rb *tbox[T]
		var err error
		if send[r] != nil {
			if sb, err = newBox(c, send[r], pad); err != nil {
				return err
			}
			defer sb.close()
			st = sb.t
		}
		if recv[r] != nil {
			if rb, err = newBox(c, recv[r], (pad+1)%4); err != nil {
				return err
			}
			defer rb.close()
			rt = rb.t
		}
		if err := f(c, st, rt); err != nil {
			return err
		}
		if sb != nil {
			got, err := sb.read()
			if err != nil {
				return err
			}
			if !slices.Equal(got, send[r]) {
				return errors.New("send tensor changed")
			}
			if err := sb.intact(); err != nil {
				return fmt.Errorf("send: %w", err)
			}
		}
		if rb != nil {
			if out[r], err = rb.read(); err != nil {
				return err
			}
			if err := rb.intact(); err != nil {
				return fmt.Errorf("recv: %w", err)
			}
		}
		return nil
	})
	return out, errs
}

// reduceRef reduces elements [off, off+cnt) of every rank's input with the
// case's reference arithmetic, in rank order.
func reduceRef[T Elem](tc typeCase[T], op Op, in [][]T, off, cnt int) []T {
	out := make([]T, cnt)
	vals := make([]T, len(in))
	for i := range out {
		for q := range in {
			vals[q] = in[q][off+i]
		}
		out[i] = tc.ref(op, vals)
	}
	return out
}

// vLayout places ranges of the given lengths in a shuffled order with gaps
// and returns their offsets and the length that holds them.
func vLayout(rng *rand.Rand, counts []int) ([]int, int) {
	displs := make([]int, len(counts))
	at := 0
	for _, j := range rng.Perm(len(counts)) {
		at += rng.IntN(3)
		displs[j] = at
		at += counts[j]
	}
	return displs, at + rng.IntN(3)
}

// TestTensorCollectives: every tensor collective against the independent
// reference (exact: small integers for the float types, wrapping integers,
// 16-bit values whose results are exact), on 1, 2, 3 and 5 ranks, every
// root, chunk lengths drawn from tensorSizes, tensors at element offsets 0
// to 3 of larger buffers, on the host backend and on Vulkan (where the
// 8-, 64- and 16-bit types have no kernels: the staged host reductions),
// in deterministic mode, with a logical device per rank (Vulkan) and
// without f64 kernels (host). Send must stay unchanged, nothing around the
// tensors may be written, and the V forms must leave recv elements outside
// the received ranges alone. Trials per group: 2 on host, 1 on GPU backends
// and in the race run (full runs: 5).
func TestTensorCollectives(t *testing.T) {
	seed := tensorTestSeed(t)
	trials := 2
	if fullRun() {
		trials = 5
	}
	type variant struct {
		name string
		mod  func(*Options)
	}
	for _, bk := range backendsUnderTest(t) {
		for _, ranks := range []int{1, 2, 3, 5} {
			vs := []variant{{"default", func(o *Options) { o.ChunkBytes = 1024 }}}
			if ranks >= 3 {
				vs = append(vs, variant{"deterministic", func(o *Options) { o.ChunkBytes = 512; o.Config.Deterministic = true }})
			}
			if ranks == 3 && bk == "vulkan" {
				vs = append(vs, variant{"per-rank", func(o *Options) { o.ChunkBytes = 1024; o.DevicePerRank = true }})
			}
			if ranks == 3 && bk == "host" {
				vs = append(vs, variant{"nof64", func(o *Options) { o.ChunkBytes = 1024; o.DisableFloat64 = true }})
			}
			for _, v := range vs {
				t.Run(fmt.Sprintf("%s/%s/%d", bk, v.name, ranks), func(t *testing.T) {
					g := openGroup(t, bk, ranks, v.mod)
					rng := rand.New(rand.NewPCG(seed, uint64(ranks)))
					at := rng.IntN(len(tensorSizes))
					size := func() int { at++; return tensorSizes[at%len(tensorSizes)] }
					trials := trials
					if (bk != "host" || raceShort()) && !fullRun() {
						trials = 1
					}
					for trial := 0; trial < trials; trial++ {
						runTensorTypes(t, []*Group{g}, rng, size)
					}
				})
			}
		}
	}
}

// runTensorTypes runs every collective on each element type under test.
func runTensorTypes(t *testing.T, gs []*Group, rng *rand.Rand, size func() int) {
	t.Helper()
	runTensorCase(t, gs, rng, floatCase[float32]("float"), size())
	runTensorCase(t, gs, rng, floatCase[float64]("double"), size())
	runTensorCase(t, gs, rng, intCase[int32]("int32"), size())
	runTensorCase(t, gs, rng, intCase[int64]("int64"), size())
	runTensorCase(t, gs, rng, intCase[uint8]("uint8"), size())
	runTensorCase(t, gs, rng, intCase[int16]("int16"), size())
	runTensorCase(t, gs, rng, halfCase("half", Float16From, Float16.Float32), size())
	runTensorCase(t, gs, rng, halfCase("bfloat16", BFloat16From, BFloat16.Float32), size())
	runTensorCase(t, gs, rng, fp8Case("f8e4m3", Float8E4M3From, Float8E4M3.Float32), size())
}

// TestTensorCollectivesProcesses: the tensor collectives across simulated
// processes (a group per process over an in-memory transport), where the
// exchange crosses the transport.
func TestTensorCollectivesProcesses(t *testing.T) {
	seed := tensorTestSeed(t)
	for _, bk := range backendsUnderTest(t) {
		shapes := [][2]int{{2, 1}, {3, 2}}
		if bk != "host" && !fullRun() {
			shapes = [][2]int{{2, 2}}
		}
		for _, shape := range shapes {
			t.Run(fmt.Sprintf("%s/%dx%d", bk, shape[0], shape[1]), func(t *testing.T) {
				gs := openProcesses(t, bk, shape[0], shape[1], func(o *Options) { o.ChunkBytes = 1024 })
				rng := rand.New(rand.NewPCG(seed, uint64(10*shape[0]+shape[1])))
				at := rng.IntN(len(tensorSizes))
				runTensorTypes(t, gs, rng, func() int { at++; return tensorSizes[at%len(tensorSizes)] })
			})
		}
	}
}

// runTensorCase runs every tensor collective once (the rooted ones from
// every root) with chunk length m and an op drawn for the type.
func runTensorCase[T Elem](t *testing.T, gs []*Group, rng *rand.Rand, tc typeCase[T], m int) {
	t.Helper()
	ctx := context.Background()
	N := gs[0].Size()
	op := tc.ops[rng.IntN(len(tc.ops))]
	pad := rng.IntN(4)
	where := fmt.Sprintf("%s m=%d op=%s pad=%d", tc.name, m, op, pad)
	draw := func(n func(r int) int) [][]T {
		out := make([][]T, N)
		for r := range out {
			out[r] = make([]T, n(r))
			for i := range out[r] {
				out[r][i] = tc.draw(rng, op, N)
			}
		}
		return out
	}
	fixed := func(n int) func(int) int { return func(int) int { return n } }
	sent := func(n func(r int) int) [][]T {
		out := make([][]T, N)
		for r := range out {
			if l := n(r); l >= 0 {
				out[r] = sentinel[T](l)
			}
		}
		return out
	}
	check := func(what string, errs []error) {
		t.Helper()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%s %s: rank %d: %v", where, what, r, err)
			}
		}
	}
	same := func(what string, r int, got, want []T) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s %s: rank %d: %d elements, want %d", where, what, r, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s %s: rank %d element %d: got %v, want %v", where, what, r, i, got[i], want[i])
			}
		}
	}
	full, part := draw(fixed(N*m)), draw(fixed(m))

	out, errs := runTensorColl(gs, pad, full, sent(fixed(m)), func(c *Comm, s, r *Tensor[T]) error {
		return ReduceScatterTensor(ctx, c, s, r, op)
	})
	check("ReduceScatterTensor", errs)
	for r := range out {
		same("ReduceScatterTensor", r, out[r], reduceRef(tc, op, full, r*m, m))
	}

	out, errs = runTensorColl(gs, pad, part, sent(fixed(N*m)), func(c *Comm, s, r *Tensor[T]) error {
		return AllGatherTensor(ctx, c, s, r)
	})
	check("AllGatherTensor", errs)
	for r := range out {
		same("AllGatherTensor", r, out[r], slices.Concat(part...))
	}

	out, errs = runTensorColl(gs, pad, full, sent(fixed(N*m)), func(c *Comm, s, r *Tensor[T]) error {
		return AllToAllTensor(ctx, c, s, r)
	})
	check("AllToAllTensor", errs)
	for r := range out {
		want := make([]T, 0, N*m)
		for q := 0; q < N; q++ {
			want = append(want, full[q][r*m:(r+1)*m]...)
		}
		same("AllToAllTensor", r, out[r], want)
	}

	for root := 0; root < N; root++ {
		// Non-root ranks pass no recv for even roots, and for odd ones a
		// recv that must stay untouched.
		other := -1
		if root%2 == 1 {
			other = N * m
		}
		at := func(n int) func(int) int {
			return func(r int) int {
				if r == root {
					return n
				}
				return other
			}
		}
		what := fmt.Sprintf("ReduceTensor root %d", root)
		out, errs = runTensorColl(gs, pad, full, sent(at(N*m)), func(c *Comm, s, r *Tensor[T]) error {
			return ReduceTensor(ctx, c, s, r, op, root)
		})
		check(what, errs)
		for r := range out {
			if r == root {
				same(what, r, out[r], reduceRef(tc, op, full, 0, N*m))
			} else if other >= 0 {
				same(what+" (non-root recv)", r, out[r], sentinel[T](other))
			}
		}

		what = fmt.Sprintf("GatherTensor root %d", root)
		out, errs = runTensorColl(gs, pad, part, sent(at(N*m)), func(c *Comm, s, r *Tensor[T]) error {
			return GatherTensor(ctx, c, s, r, root)
		})
		check(what, errs)
		for r := range out {
			if r == root {
				same(what, r, out[r], slices.Concat(part...))
			} else if other >= 0 {
				same(what+" (non-root recv)", r, out[r], sentinel[T](other))
			}
		}

		what = fmt.Sprintf("ScatterTensor root %d", root)
		send := make([][]T, N)
		for r := range send {
			if r == root || other >= 0 {
				send[r] = full[r]
			}
		}
		out, errs = runTensorColl(gs, pad, send, sent(fixed(m)), func(c *Comm, s, r *Tensor[T]) error {
			return ScatterTensor(ctx, c, s, r, root)
		})
		check(what, errs)
		for r := range out {
			same(what, r, out[r], full[root][r*m:(r+1)*m])
		}
	}

	// AllToAllVTensor: cnt[i][j] elements from rank i to rank j, send
	// ranges anywhere (overlapping), recv ranges shuffled with gaps.
	cnt := make([][]int, N)
	for i := range cnt {
		cnt[i] = make([]int, N)
		for j := range cnt[i] {
			cnt[i][j] = rng.IntN(m + 2)
		}
	}
	sc, sd, rc, rd := make([][]int, N), make([][]int, N), make([][]int, N), make([][]int, N)
	slen, rlen := make([]int, N), make([]int, N)
	for i := 0; i < N; i++ {
		sc[i], rc[i] = cnt[i], make([]int, N)
		for j := range rc[i] {
			rc[i][j] = cnt[j][i]
		}
		slen[i] = slices.Max(sc[i]) + rng.IntN(m+1)
		sd[i] = make([]int, N)
		for j := range sd[i] {
			sd[i][j] = rng.IntN(slen[i] - sc[i][j] + 1)
		}
		rd[i], rlen[i] = vLayout(rng, rc[i])
	}
	vsend := draw(func(r int) int { return slen[r] })
	out, errs = runTensorColl(gs, pad, vsend, sent(func(r int) int { return rlen[r] }), func(c *Comm, s, r *Tensor[T]) error {
		i := c.Rank()
		return AllToAllVTensor(ctx, c, s, sc[i], sd[i], r, rc[i], rd[i])
	})
	check("AllToAllVTensor", errs)
	for i := range out {
		want := sentinel[T](rlen[i])
		for j := 0; j < N; j++ {
			copy(want[rd[i][j]:rd[i][j]+rc[i][j]], vsend[j][sd[j][i]:sd[j][i]+sc[j][i]])
		}
		same("AllToAllVTensor", i, out[i], want)
	}

	// AllGatherVTensor: rank j sends counts[j].
	counts := make([]int, N)
	for j := range counts {
		counts[j] = rng.IntN(m + 2)
	}
	displs, total := vLayout(rng, counts)
	gsend := draw(func(r int) int { return counts[r] })
	out, errs = runTensorColl(gs, pad, gsend, sent(fixed(total)), func(c *Comm, s, r *Tensor[T]) error {
		return AllGatherVTensor(ctx, c, s, r, counts, displs)
	})
	check("AllGatherVTensor", errs)
	for r := range out {
		want := sentinel[T](total)
		for j := 0; j < N; j++ {
			copy(want[displs[j]:], gsend[j])
		}
		same("AllGatherVTensor", r, out[r], want)
	}

	// ReduceScatterVTensor: rank j gets [displs[j], +counts[j]) of the
	// reduction; the ranges may overlap.
	L := slices.Max(counts) + rng.IntN(m+1)
	for j := range displs {
		displs[j] = rng.IntN(L - counts[j] + 1)
	}
	rsend := draw(fixed(L))
	out, errs = runTensorColl(gs, pad, rsend, sent(func(r int) int { return counts[r] }), func(c *Comm, s, r *Tensor[T]) error {
		return ReduceScatterVTensor(ctx, c, s, r, counts, displs, op)
	})
	check("ReduceScatterVTensor", errs)
	for r := range out {
		same("ReduceScatterVTensor", r, out[r], reduceRef(tc, op, rsend, displs[r], counts[r]))
	}
}

// TestTensorReduceRandom: random float32 and float64 data (not exact in
// any order), summed and averaged by the tensor reductions: within
// 2N eps * sum|x| of the float64 reference (the rounding of N-1 partial
// sums and of the reference itself), and bitwise equal to the slice
// forms, which run the same algorithms, or, where the ranks share device
// memory, to the rank-ordered reduction; in both layouts (a logical device
// per rank: on 3 ranks, and on 5 in full runs). The race run: 3 ranks.
func TestTensorReduceRandom(t *testing.T) {
	seed := tensorTestSeed(t)
	for _, bk := range backendsUnderTest(t) {
		for _, ranks := range []int{3, 5} {
			if ranks == 5 && raceShort() {
				continue
			}
			for _, perRank := range []bool{false, true} {
				if perRank && (bk != "vulkan" || ranks == 5 && !fullRun()) {
					continue
				}
				t.Run(fmt.Sprintf("%s/%d/perRank=%v", bk, ranks, perRank), func(t *testing.T) {
					g := openGroup(t, bk, ranks, func(o *Options) { o.ChunkBytes = 2048; o.DevicePerRank = perRank })
					rng := rand.New(rand.NewPCG(seed, 100+uint64(ranks)))
					for _, m := range []int{1, 257, 1500} {
						for _, op := range []Op{Sum, Mean} {
							randomReduce[float32](t, g, rng, m, op, 0x1p-24)
							randomReduce[float64](t, g, rng, m, op, 0x1p-53)
						}
					}
				})
			}
		}
	}
}

func randomReduce[T float32 | float64](t *testing.T, g *Group, rng *rand.Rand, m int, op Op, eps float64) {
	t.Helper()
	ctx := context.Background()
	N := g.Size()
	full := make([][]T, N)
	for r := range full {
		full[r] = make([]T, N*m)
		for i := range full[r] {
			full[r][i] = T(rng.NormFloat64() * math.Exp2(float64(rng.IntN(20)-10)))
		}
	}
	where := fmt.Sprintf("%T m=%d %s", full[0][0], m, op)
	// within checks got against the float64 reference of elements [off,
	// off+len(got)).
	within := func(what string, got []T, off int) {
		t.Helper()
		for i, v := range got {
			ref, abs := 0.0, 0.0
			for q := 0; q < N; q++ {
				x := float64(full[q][off+i])
				ref += x
				abs += math.Abs(x)
			}
			if op == Mean {
				ref, abs = ref/float64(N), abs/float64(N)
			}
			if d := math.Abs(float64(v) - ref); d > 2*float64(N)*eps*abs {
				t.Fatalf("%s %s: element %d: got %v, want %v (off by %g > 2N eps sum|x| = %g)", where, what, i, v, ref, d, 2*float64(N)*eps*abs)
			}
		}
	}
	root := rng.IntN(N)
	counts, displs := make([]int, N), make([]int, N)
	for j := range counts {
		counts[j] = rng.IntN(m + 1)
		displs[j] = rng.IntN(N*m - counts[j] + 1)
	}
	viaTensor := func(what string, f func(c *Comm, s, r *Tensor[T]) error, recvLen func(r int) int) [][]T {
		recv := make([][]T, N)
		for r := range recv {
			if l := recvLen(r); l >= 0 {
				recv[r] = make([]T, l)
			}
		}
		out, errs := runTensorColl([]*Group{g}, 1, full, recv, f)
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%s %s: rank %d: %v", where, what, r, err)
			}
		}
		return out
	}
	viaSlice := func(what string, f func(c *Comm, s, r []T) error, recvLen func(r int) int) [][]T {
		out := make([][]T, N)
		noErrors(t, onRanks(g, func(c *Comm) error {
			r := c.Rank()
			if l := recvLen(r); l >= 0 {
				out[r] = make([]T, l)
			}
			return f(c, full[r], out[r])
		}))
		return out
	}
	bitwise := func(what string, r int, a, b []T) {
		t.Helper()
		if !slices.Equal(a, b) {
			t.Fatalf("%s %s: rank %d: the tensor form differs from the slice form (or, ranks sharing memory, from the rank-ordered reduction)", where, what, r)
		}
	}

	// Where the ranks share device memory the tensor reductions run in
	// rank order in one pass (shared.go), whatever the strategy: they
	// must then equal the rank-ordered sum in T's arithmetic, bit for bit;
	// elsewhere they run the slice forms' algorithms.
	rankOrder := func(off, n int) []T {
		out := make([]T, n)
		for i := range out {
			acc := full[0][off+i]
			for q := 1; q < N; q++ {
				acc += full[q][off+i]
			}
			if op == Mean {
				acc /= T(N)
			}
			out[i] = acc
		}
		return out
	}
	m1 := func(int) int { return m }
	rs := viaTensor("ReduceScatterTensor", func(c *Comm, s, r *Tensor[T]) error { return ReduceScatterTensor(ctx, c, s, r, op) }, m1)
	rsSlice := viaSlice("ReduceScatter", func(c *Comm, s, r []T) error { return ReduceScatter(ctx, c, s, r, op) }, m1)
	for r := range rs {
		within("ReduceScatterTensor", rs[r], r*m)
		if g.sharedMem {
			rsSlice[r] = rankOrder(r*m, m)
		}
		bitwise("ReduceScatterTensor", r, rs[r], rsSlice[r])
	}

	atRoot := func(r int) int {
		if r == root {
			return N * m
		}
		return -1
	}
	rd := viaTensor("ReduceTensor", func(c *Comm, s, r *Tensor[T]) error { return ReduceTensor(ctx, c, s, r, op, root) }, atRoot)
	rdSlice := viaSlice("Reduce", func(c *Comm, s, r []T) error { return Reduce(ctx, c, s, r, op, root) }, atRoot)
	within("ReduceTensor", rd[root], 0)
	if g.sharedMem {
		rdSlice[root] = rankOrder(0, N*m)
	}
	bitwise("ReduceTensor", root, rd[root], rdSlice[root])

	own := func(r int) int { return counts[r] }
	rsv := viaTensor("ReduceScatterVTensor", func(c *Comm, s, r *Tensor[T]) error {
		return ReduceScatterVTensor(ctx, c, s, r, counts, displs, op)
	}, own)
	rsvSlice := viaSlice("ReduceScatterV", func(c *Comm, s, r []T) error { return ReduceScatterV(ctx, c, s, r, counts, displs, op) }, own)
	for r := range rsv {
		within("ReduceScatterVTensor", rsv[r], displs[r])
		bitwise("ReduceScatterVTensor", r, rsv[r], rsvSlice[r])
	}
}

// tensorErrCase is a call every rank makes; bad lists the ranks whose own
// arguments are wrong (ErrInvalidArgument); the others get ErrMismatch.
type tensorErrCase struct {
	name string
	bad  []int
	call func(ctx context.Context, c *Comm) error
}

// TestTensorCollectiveErrors: wrong lengths, bad roots, closed, nil and
// foreign tensors, a bitwise op of a float type, counts that disagree, and
// ranks mixing tensor and slice forms (or different collectives) fail with
// typed errors on every rank, promptly, naming the collective; the group
// stays usable and recv tensors untouched.
func TestTensorCollectiveErrors(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		t.Run(bk, func(t *testing.T) { tensorErrors(t, bk) })
	}
}

func tensorErrors(t *testing.T, bk string) {
	const N, m = 3, 4
	g := openGroup(t, bk, N)
	mk := func(r, n int) *Tensor[float32] {
		tt, err := NewTensor[float32](g.Comm(r), n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tt.Close() })
		return tt
	}
	full, part, out, odd := make([]*Tensor[float32], N), make([]*Tensor[float32], N), make([]*Tensor[float32], N), make([]*Tensor[float32], N)
	for r := 0; r < N; r++ {
		full[r], part[r], out[r], odd[r] = mk(r, N*m), mk(r, m), mk(r, N*m), mk(r, m+1)
	}
	closed := mk(0, m)
	closed.Close()
	// Slices for the other side of mixed calls.
	sFull, sPart, sOut := make([][]float32, N), make([][]float32, N), make([][]float32, N)
	for r := range sFull {
		sFull[r], sPart[r], sOut[r] = make([]float32, N*m), make([]float32, m), make([]float32, N*m)
	}
	eq, eqD := []int{m, m, m}, []int{0, m, 2 * m}
	// only runs f on the ranks in bad and the valid call on the others.
	only := func(bad []int, f, ok func(ctx context.Context, c *Comm) error) func(ctx context.Context, c *Comm) error {
		return func(ctx context.Context, c *Comm) error {
			if slices.Contains(bad, c.Rank()) {
				return f(ctx, c)
			}
			return ok(ctx, c)
		}
	}
	rs := func(ctx context.Context, c *Comm) error {
		return ReduceScatterTensor(ctx, c, full[c.Rank()], part[c.Rank()], Sum)
	}
	ag := func(ctx context.Context, c *Comm) error {
		return AllGatherTensor(ctx, c, part[c.Rank()], out[c.Rank()])
	}
	a2a := func(ctx context.Context, c *Comm) error { return AllToAllTensor(ctx, c, full[c.Rank()], out[c.Rank()]) }
	reduce := func(ctx context.Context, c *Comm) error {
		return ReduceTensor(ctx, c, full[c.Rank()], out[c.Rank()], Sum, 1)
	}
	gatherT := func(ctx context.Context, c *Comm) error {
		return GatherTensor(ctx, c, part[c.Rank()], out[c.Rank()], 0)
	}
	scatter := func(ctx context.Context, c *Comm) error {
		return ScatterTensor(ctx, c, full[c.Rank()], part[c.Rank()], 2)
	}
	a2av := func(ctx context.Context, c *Comm) error {
		return AllToAllVTensor(ctx, c, full[c.Rank()], eq, eqD, out[c.Rank()], eq, eqD)
	}
	agv := func(ctx context.Context, c *Comm) error {
		return AllGatherVTensor(ctx, c, part[c.Rank()], out[c.Rank()], eq, eqD)
	}
	rsv := func(ctx context.Context, c *Comm) error {
		return ReduceScatterVTensor(ctx, c, full[c.Rank()], part[c.Rank()], eq, eqD, Sum)
	}
	scanT := func(ctx context.Context, c *Comm) error {
		return ScanTensor(ctx, c, full[c.Rank()], out[c.Rank()], Sum)
	}
	exscanT := func(ctx context.Context, c *Comm) error {
		return ExscanTensor(ctx, c, full[c.Rank()], out[c.Rank()], Max)
	}
	slice := map[string]func(ctx context.Context, c *Comm) error{
		"ScanTensor":   func(ctx context.Context, c *Comm) error { return Scan(ctx, c, sFull[c.Rank()], sOut[c.Rank()], Sum) },
		"ExscanTensor": func(ctx context.Context, c *Comm) error { return Exscan(ctx, c, sFull[c.Rank()], sOut[c.Rank()], Max) },
		"ReduceScatterTensor": func(ctx context.Context, c *Comm) error {
			return ReduceScatter(ctx, c, sFull[c.Rank()], sPart[c.Rank()], Sum)
		},
		"AllGatherTensor": func(ctx context.Context, c *Comm) error { return AllGather(ctx, c, sPart[c.Rank()], sOut[c.Rank()]) },
		"AllToAllTensor":  func(ctx context.Context, c *Comm) error { return AllToAll(ctx, c, sFull[c.Rank()], sOut[c.Rank()]) },
		"ReduceTensor": func(ctx context.Context, c *Comm) error {
			return Reduce(ctx, c, sFull[c.Rank()], sOut[c.Rank()], Sum, 1)
		},
		"GatherTensor":  func(ctx context.Context, c *Comm) error { return Gather(ctx, c, sPart[c.Rank()], sOut[c.Rank()], 0) },
		"ScatterTensor": func(ctx context.Context, c *Comm) error { return Scatter(ctx, c, sFull[c.Rank()], sPart[c.Rank()], 2) },
		"AllToAllVTensor": func(ctx context.Context, c *Comm) error {
			return AllToAllV(ctx, c, sFull[c.Rank()], eq, eqD, sOut[c.Rank()], eq, eqD)
		},
		"AllGatherVTensor": func(ctx context.Context, c *Comm) error {
			return AllGatherV(ctx, c, sPart[c.Rank()], sOut[c.Rank()], eq, eqD)
		},
		"ReduceScatterVTensor": func(ctx context.Context, c *Comm) error {
			return ReduceScatterV(ctx, c, sFull[c.Rank()], sPart[c.Rank()], eq, eqD, Sum)
		},
	}
	tensor := map[string]func(ctx context.Context, c *Comm) error{
		"ReduceScatterTensor": rs, "AllGatherTensor": ag, "AllToAllTensor": a2a, "ReduceTensor": reduce,
		"GatherTensor": gatherT, "ScatterTensor": scatter, "AllToAllVTensor": a2av, "AllGatherVTensor": agv,
		"ReduceScatterVTensor": rsv, "ScanTensor": scanT, "ExscanTensor": exscanT,
	}
	all := []int{0, 1, 2}
	cases := []tensorErrCase{
		{"ReduceScatterTensor: short send", []int{1}, only([]int{1}, func(ctx context.Context, c *Comm) error {
			return ReduceScatterTensor(ctx, c, part[1], part[1], Sum)
		}, rs)},
		{"ReduceScatterTensor: nil recv", []int{2}, only([]int{2}, func(ctx context.Context, c *Comm) error {
			return ReduceScatterTensor(ctx, c, full[2], nil, Sum)
		}, rs)},
		{"ReduceScatterTensor: BAnd of float32", all, func(ctx context.Context, c *Comm) error {
			return ReduceScatterTensor(ctx, c, full[c.Rank()], part[c.Rank()], BAnd)
		}},
		{"ReduceScatterTensor: unknown op", all, func(ctx context.Context, c *Comm) error {
			return ReduceScatterTensor(ctx, c, full[c.Rank()], part[c.Rank()], Op(99))
		}},
		{"AllGatherTensor: long recv", []int{0}, only([]int{0}, func(ctx context.Context, c *Comm) error {
			return AllGatherTensor(ctx, c, odd[0], out[0])
		}, ag)},
		{"AllGatherTensor: closed tensor", []int{0}, only([]int{0}, func(ctx context.Context, c *Comm) error {
			return AllGatherTensor(ctx, c, closed, out[0])
		}, ag)},
		{"AllGatherTensor: another rank's tensor", []int{1}, only([]int{1}, func(ctx context.Context, c *Comm) error {
			return AllGatherTensor(ctx, c, part[0], out[1])
		}, ag)},
		{"ReduceTensor: root's recv short", []int{1}, only([]int{1}, func(ctx context.Context, c *Comm) error {
			return ReduceTensor(ctx, c, full[1], part[1], Sum, 1)
		}, reduce)},
		{"ReduceTensor: root out of range", all, func(ctx context.Context, c *Comm) error {
			return ReduceTensor(ctx, c, full[c.Rank()], out[c.Rank()], Sum, N)
		}},
		{"ReduceTensor: BOr of float32", all, func(ctx context.Context, c *Comm) error {
			return ReduceTensor(ctx, c, full[c.Rank()], full[c.Rank()], BOr, 0)
		}},
		{"ReduceTensor: root's recv nil", []int{1}, only([]int{1}, func(ctx context.Context, c *Comm) error {
			return ReduceTensor(ctx, c, full[1], nil, Sum, 1)
		}, reduce)},
		{"AllToAllTensor: not a multiple of N", all, func(ctx context.Context, c *Comm) error {
			return AllToAllTensor(ctx, c, part[c.Rank()], odd[c.Rank()])
		}},
		{"AllToAllTensor: send and recv partly overlap", all, func(ctx context.Context, c *Comm) error {
			s, r, err := overlapping(c, full[c.Rank()], full[c.Rank()].Len()-N)
			if err != nil {
				return err
			}
			return AllToAllTensor(ctx, c, s, r)
		}},
		{"GatherTensor: root out of range", all, func(ctx context.Context, c *Comm) error {
			return GatherTensor(ctx, c, part[c.Rank()], out[c.Rank()], -1)
		}},
		{"GatherTensor: root's recv short", []int{0}, only([]int{0}, func(ctx context.Context, c *Comm) error {
			return GatherTensor(ctx, c, part[0], part[0], 0)
		}, gatherT)},
		{"ScatterTensor: root's send short", []int{2}, only([]int{2}, func(ctx context.Context, c *Comm) error {
			return ScatterTensor(ctx, c, odd[2], part[2], 2)
		}, scatter)},
		{"ScatterTensor: root out of range", all, func(ctx context.Context, c *Comm) error {
			return ScatterTensor(ctx, c, full[c.Rank()], part[c.Rank()], N)
		}},
		{"AllToAllVTensor: range past send", []int{1}, only([]int{1}, func(ctx context.Context, c *Comm) error {
			return AllToAllVTensor(ctx, c, part[1], eq, eqD, out[1], eq, eqD)
		}, a2av)},
		{"AllToAllVTensor: recv ranges overlap", []int{2}, only([]int{2}, func(ctx context.Context, c *Comm) error {
			return AllToAllVTensor(ctx, c, full[2], eq, eqD, out[2], eq, []int{0, 1, 8})
		}, a2av)},
		{"AllGatherVTensor: counts of 2 ranks", []int{0}, only([]int{0}, func(ctx context.Context, c *Comm) error {
			return AllGatherVTensor(ctx, c, part[0], out[0], eq[:2], eqD)
		}, agv)},
		{"ReduceScatterVTensor: recv not counts[rank]", []int{2}, only([]int{2}, func(ctx context.Context, c *Comm) error {
			return ReduceScatterVTensor(ctx, c, full[2], odd[2], eq, eqD, Sum)
		}, rsv)},
		{"ReduceScatterVTensor: LXor of float32", all, func(ctx context.Context, c *Comm) error {
			return ReduceScatterVTensor(ctx, c, full[c.Rank()], part[c.Rank()], eq, eqD, LXor)
		}},
		{"ScanTensor: recv longer than send", []int{1}, only([]int{1}, func(ctx context.Context, c *Comm) error {
			return ScanTensor(ctx, c, part[1], odd[1], Sum)
		}, scanT)},
		{"ExscanTensor: nil send", []int{2}, only([]int{2}, func(ctx context.Context, c *Comm) error {
			return ExscanTensor(ctx, c, nil, out[2], Max)
		}, exscanT)},
		{"ScanTensor: nil recv", []int{0}, only([]int{0}, func(ctx context.Context, c *Comm) error {
			return ScanTensor(ctx, c, full[0], nil, Sum)
		}, scanT)},
		{"ExscanTensor: another rank's tensor", []int{1}, only([]int{1}, func(ctx context.Context, c *Comm) error {
			return ExscanTensor(ctx, c, full[0], out[1], Max)
		}, exscanT)},
		{"ScanTensor: closed tensor", []int{0}, only([]int{0}, func(ctx context.Context, c *Comm) error {
			return ScanTensor(ctx, c, closed, part[0], Sum)
		}, scanT)},
		{"ScanTensor: Mean", all, func(ctx context.Context, c *Comm) error {
			return ScanTensor(ctx, c, full[c.Rank()], out[c.Rank()], Mean)
		}},
		{"ExscanTensor: Mean", all, func(ctx context.Context, c *Comm) error {
			return ExscanTensorAsync(ctx, c, full[c.Rank()], out[c.Rank()], Mean).Wait(ctx)
		}},
		{"ExscanTensor: BXor of float32", all, func(ctx context.Context, c *Comm) error {
			return ExscanTensor(ctx, c, full[c.Rank()], out[c.Rank()], BXor)
		}},
		{"ScanTensor: send and recv partly overlap", all, func(ctx context.Context, c *Comm) error {
			s, r, err := overlapping(c, out[c.Rank()], m)
			if err != nil {
				return err
			}
			return ScanTensor(ctx, c, s, r, Sum)
		}},
		{"ScanTensor on rank 1, ExscanTensor on the others", nil, only([]int{1}, scanT, exscanT)},
		// Counts that disagree between ranks pass every local check and
		// fail in the counts check, on every rank.
		{"AllGatherVTensor: rank 1 sends m+1", nil, func(ctx context.Context, c *Comm) error {
			if c.Rank() == 1 {
				return AllGatherVTensor(ctx, c, odd[1], out[1], eq, eqD)
			}
			return agv(ctx, c)
		}},
		{"AllToAllVTensor: rank 0 expects m-1 from rank 2", nil, func(ctx context.Context, c *Comm) error {
			if c.Rank() == 0 {
				return AllToAllVTensor(ctx, c, full[0], eq, eqD, out[0], []int{m, m, m - 1}, eqD)
			}
			return a2av(ctx, c)
		}},
		{"AllGatherTensor on rank 1, GatherTensor on the others", nil, only([]int{1}, ag, gatherT)},
		{"ReduceTensor with different roots", nil, func(ctx context.Context, c *Comm) error {
			return ReduceTensor(ctx, c, full[c.Rank()], out[c.Rank()], Sum, c.Rank()%2)
		}},
	}
	for name, f := range tensor {
		cases = append(cases, tensorErrCase{name + " on rank 0, the slice form on the others", nil, only([]int{0}, f, slice[name])})
		cases = append(cases, tensorErrCase{name + " on ranks 1 and 2, the slice form on rank 0", nil, only([]int{1, 2}, f, slice[name])})
	}
	sentinelOut := sentinel[float32](N * m)
	for _, tc := range cases {
		for r := 0; r < N; r++ {
			if err := out[r].Upload(sentinelOut); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		start := time.Now()
		errs := onRanks(g, func(c *Comm) error { return tc.call(ctx, c) })
		cancel()
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", tc.name, d)
		}
		for r, err := range errs {
			want := ErrMismatch
			if slices.Contains(tc.bad, r) {
				want = ErrInvalidArgument
			}
			var e *Error
			switch {
			case !errors.Is(err, want):
				t.Errorf("%s: rank %d: %v, want %v", tc.name, r, err, want)
			case !errors.As(err, &e) || e.Rank != r:
				t.Errorf("%s: rank %d: %v is not this rank's *Error", tc.name, r, err)
			case errors.Is(err, ErrGroupBroken):
				t.Errorf("%s: rank %d: %v broke the group", tc.name, r, err)
			}
		}
		for r := 0; r < N; r++ {
			got := make([]float32, N*m)
			if err := out[r].Download(got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(asBytes(got), asBytes(sentinelOut)) {
				t.Errorf("%s: rank %d: recv written by a failed call", tc.name, r)
			}
		}
		// The group is still usable.
		noErrors(t, onRanks(g, func(c *Comm) error { return ag(context.Background(), c) }))
	}
	if err := g.Err(); err != nil {
		t.Fatalf("group broken: %v", err)
	}
}

// overlapping returns two views of n elements of t, the second one element
// after the first: send and recv that partly overlap.
func overlapping(c *Comm, t *Tensor[float32], n int) (s, r *Tensor[float32], err error) {
	buf, off := t.Buffer()
	if s, err = WrapTensor[float32](c, buf, off, n); err != nil {
		return nil, nil, err
	}
	r, err = WrapTensor[float32](c, buf, off+4, n)
	return s, r, err
}

// TestTensorCollectivesTimeout: a rank that never arrives makes the
// others' tensor collectives fail with ErrTimeout after
// CommunicationTimeout, or with the caller's context error when that ends
// first, leaving recv untouched; the group is then broken.
func TestTensorCollectivesTimeout(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		for _, byCtx := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ctx=%v", bk, byCtx), func(t *testing.T) {
				timeout := 300 * time.Millisecond
				if byCtx {
					timeout = 20 * time.Second // the context ends first
				}
				g := openGroup(t, bk, 3, func(o *Options) { o.Config.CommunicationTimeout = timeout })
				recv := make([]*tbox[float32], 2)
				send := make([]*Tensor[float32], 2)
				for r := range recv {
					var err error
					if recv[r], err = newBox(g.Comm(r), sentinel[float32](3*100), 1); err != nil {
						t.Fatal(err)
					}
					defer recv[r].close()
					if send[r], err = NewTensor[float32](g.Comm(r), 100); err != nil {
						t.Fatal(err)
					}
					defer send[r].Close()
				}
				ctx := context.Background()
				if byCtx {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
					defer cancel()
				}
				start := time.Now()
				errs := make([]error, 2)
				done := make(chan int)
				for r := 0; r < 2; r++ { // rank 2 never calls
					go func(r int) {
						errs[r] = AllGatherTensor(ctx, g.Comm(r), send[r], recv[r].t)
						done <- r
					}(r)
				}
				<-done
				<-done
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("took %v", d)
				}
				for r, err := range errs {
					if !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrGroupBroken) {
						t.Errorf("rank %d: %v, want ErrTimeout or ErrGroupBroken", r, err)
					}
					if byCtx && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrGroupBroken) {
						t.Errorf("rank %d: %v, want the context's error", r, err)
					}
					got, rerr := recv[r].read()
					if rerr != nil {
						t.Fatal(rerr)
					}
					if !slices.Equal(asBytes(got), asBytes(sentinel[float32](300))) {
						t.Errorf("rank %d: recv written by a call that failed before data moved", r)
					}
				}
				if !errors.Is(errs[0], ErrTimeout) && !errors.Is(errs[1], ErrTimeout) {
					t.Errorf("no rank timed out: %v, %v", errs[0], errs[1])
				}
				if err := Barrier(context.Background(), g.Comm(2)); !errors.Is(err, ErrGroupBroken) {
					t.Errorf("rank 2 after the timeout: %v, want ErrGroupBroken", err)
				}
			})
		}
	}
}

// TestTensorCollectivesZeroAllocs: a steady-state call of every tensor
// collective on 4 ranks allocates nothing, including the staged host
// reductions of types without kernels (int64 and bfloat16 on Vulkan,
// float64 on a host group without f64 kernels).
func TestTensorCollectivesZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, bk := range backendsUnderTest(t) {
		t.Run(bk, func(t *testing.T) {
			g := openGroup(t, bk, 4, func(o *Options) { o.ChunkBytes = 4096 })
			tensorAllocs[float32](t, g, 3001, true)
			if bk == "vulkan" {
				tensorAllocs[int64](t, g, 1000, false)
				tensorAllocs[BFloat16](t, g, 1000, false)
			}
		})
	}
	t.Run("host/nof64", func(t *testing.T) {
		g := openGroup(t, "host", 4, func(o *Options) { o.ChunkBytes = 4096; o.DisableFloat64 = true })
		tensorAllocs[float64](t, g, 1000, false)
	})
}

// tensorAllocs measures every tensor collective (only the reductions
// unless moves) with chunks of m elements.
func tensorAllocs[T Elem](t *testing.T, g *Group, m int, moves bool) {
	t.Helper()
	N := g.Size()
	full, part, out := make([]*Tensor[T], N), make([]*Tensor[T], N), make([]*Tensor[T], N)
	for r := 0; r < N; r++ {
		var err error
		if full[r], err = NewTensor[T](g.Comm(r), N*m); err != nil {
			t.Fatal(err)
		}
		if part[r], err = NewTensor[T](g.Comm(r), m); err != nil {
			t.Fatal(err)
		}
		if out[r], err = NewTensor[T](g.Comm(r), N*m); err != nil {
			t.Fatal(err)
		}
		defer full[r].Close()
		defer part[r].Close()
		defer out[r].Close()
	}
	cnt, dsp := make([]int, N), make([]int, N)
	for q := range cnt {
		cnt[q], dsp[q] = m, q*m
	}
	ctx := context.Background()
	calls := []struct {
		name string
		f    func(c *Comm, r int) error
	}{
		{"ReduceScatterTensor", func(c *Comm, r int) error { return ReduceScatterTensor(ctx, c, full[r], part[r], Sum) }},
		{"ReduceTensor", func(c *Comm, r int) error { return ReduceTensor(ctx, c, full[r], out[r], Sum, 1) }},
		{"ReduceScatterVTensor", func(c *Comm, r int) error {
			return ReduceScatterVTensor(ctx, c, full[r], part[r], cnt, dsp, Sum)
		}},
		{"ScanTensor", func(c *Comm, r int) error { return ScanTensor(ctx, c, full[r], out[r], Sum) }},
		{"ExscanTensor", func(c *Comm, r int) error { return ExscanTensor(ctx, c, full[r], full[r], Max) }},
	}
	if moves {
		calls = append(calls, []struct {
			name string
			f    func(c *Comm, r int) error
		}{
			{"AllGatherTensor", func(c *Comm, r int) error { return AllGatherTensor(ctx, c, part[r], out[r]) }},
			{"AllToAllTensor", func(c *Comm, r int) error { return AllToAllTensor(ctx, c, full[r], out[r]) }},
			{"GatherTensor", func(c *Comm, r int) error { return GatherTensor(ctx, c, part[r], out[r], 2) }},
			{"ScatterTensor", func(c *Comm, r int) error { return ScatterTensor(ctx, c, full[r], part[r], 3) }},
			{"AllToAllVTensor", func(c *Comm, r int) error { return AllToAllVTensor(ctx, c, full[r], cnt, dsp, out[r], cnt, dsp) }},
			{"AllGatherVTensor", func(c *Comm, r int) error { return AllGatherVTensor(ctx, c, part[r], out[r], cnt, dsp) }},
		}...)
	}
	for _, cl := range calls {
		step, stop := startOpLoop(g, cl.f)
		for i := 0; i < 3; i++ { // warm the pools
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
		a := testing.AllocsPerRun(20, func() {
			if err := step(); err != nil {
				t.Error(err)
			}
		})
		stop()
		if a != 0 {
			t.Errorf("%s %s: %v allocations per call, want 0", g.Backend(), cl.name, a)
		}
	}
}

// BenchmarkTensorCollectives measures each tensor collective on 4 ranks
// at 256 KiB and 16 MiB of float32 (bytes = the full buffer: send of
// ReduceScatter, Reduce and AllToAll, recv of AllGather and Gather, send
// of Scatter; the V forms with equal counts), reporting busbw as
// nccl-tests does.
func BenchmarkTensorCollectives(b *testing.B) {
	colls := []string{"ReduceScatter", "AllGather", "Reduce", "AllToAll", "Gather", "Scatter", "AllToAllV", "AllGatherV", "ReduceScatterV"}
	factor := map[string]float64{"Reduce": 1}
	for _, bk := range backendsUnderTest(b) {
		for _, coll := range colls {
			for _, size := range []int{256 << 10, 16 << 20} {
				b.Run(fmt.Sprintf("%s/%s/bytes=%d", bk, coll, size), func(b *testing.B) {
					const N = 4
					g := openGroup(b, bk, N, func(o *Options) { o.Validation = false })
					n := size / 4
					m := n / N
					full, part, out := make([]*Tensor[float32], N), make([]*Tensor[float32], N), make([]*Tensor[float32], N)
					for r := 0; r < N; r++ {
						var err error
						if full[r], err = NewTensor[float32](g.Comm(r), n); err != nil {
							b.Fatal(err)
						}
						if part[r], err = NewTensor[float32](g.Comm(r), m); err != nil {
							b.Fatal(err)
						}
						if out[r], err = NewTensor[float32](g.Comm(r), n); err != nil {
							b.Fatal(err)
						}
						defer full[r].Close()
						defer part[r].Close()
						defer out[r].Close()
					}
					cnt, dsp := []int{m, m, m, m}, []int{0, m, 2 * m, 3 * m}
					run := func(c *Comm) error {
						ctx := context.Background()
						r := c.Rank()
						switch coll {
						case "ReduceScatter":
							return ReduceScatterTensor(ctx, c, full[r], part[r], Sum)
						case "AllGather":
							return AllGatherTensor(ctx, c, part[r], out[r])
						case "Reduce":
							return ReduceTensor(ctx, c, full[r], out[r], Sum, 0)
						case "AllToAll":
							return AllToAllTensor(ctx, c, full[r], out[r])
						case "Gather":
							return GatherTensor(ctx, c, part[r], out[r], 0)
						case "Scatter":
							return ScatterTensor(ctx, c, full[r], part[r], 0)
						case "AllToAllV":
							return AllToAllVTensor(ctx, c, full[r], cnt, dsp, out[r], cnt, dsp)
						case "AllGatherV":
							return AllGatherVTensor(ctx, c, part[r], out[r], cnt, dsp)
						}
						return ReduceScatterVTensor(ctx, c, full[r], part[r], cnt, dsp, Sum)
					}
					l := &rankLoop{g: g, done: make(chan error, N)}
					for r := 1; r < N; r++ {
						ch := make(chan struct{})
						l.go_ = append(l.go_, ch)
						go func(r int, ch chan struct{}) {
							for range ch {
								l.done <- run(g.Comm(r))
							}
						}(r, ch)
					}
					defer l.stop()
					f, ok := factor[coll]
					if !ok {
						f = float64(N-1) / N
					}
					benchLoop(b, l, func() error { return run(g.Comm(0)) }, int64(size), f)
				})
			}
		}
	}
}

// TestTensorCollectivesInPlace: send and recv may share memory where the
// slice forms allow it (NCCL's in-place layouts: ReduceScatter's recv the
// rank's chunk of send, AllGather's send the rank's chunk of recv, Reduce
// and Scatter at root with recv on send), and a root's recv that partly
// overlaps its chunk of send: the results are those of separate tensors,
// and send outside recv stays unchanged.
func TestTensorCollectivesInPlace(t *testing.T) {
	for _, bk := range backendsUnderTest(t) {
		t.Run(bk, func(t *testing.T) {
			const N, m = 3, 301
			g := openGroup(t, bk, N, func(o *Options) { o.ChunkBytes = 512 })
			ctx := context.Background()
			in := make([][]float32, N)
			for r := range in {
				in[r] = make([]float32, N*m)
				for i := range in[r] {
					in[r][i] = float32((i*7+r*13)%23 - 11)
				}
			}
			sum := make([]float32, N*m)
			for i := range sum {
				for r := range in {
					sum[i] += in[r][i]
				}
			}
			// view returns the n elements at element at of t.
			view := func(c *Comm, t *Tensor[float32], at, n int) (*Tensor[float32], error) {
				buf, off := t.Buffer()
				return WrapTensor[float32](c, buf, off+4*at, n)
			}
			type inPlace struct {
				name string
				run  func(c *Comm, t *Tensor[float32]) error
				want func(r int) []float32 // the whole tensor afterwards
			}
			with := func(r, at int, part []float32) []float32 {
				out := slices.Clone(in[r])
				copy(out[at:], part)
				return out
			}
			const root = 1
			cases := []inPlace{
				{"ReduceScatterTensor", func(c *Comm, t *Tensor[float32]) error {
					recv, err := view(c, t, c.Rank()*m, m)
					if err != nil {
						return err
					}
					return ReduceScatterTensor(ctx, c, t, recv, Sum)
				}, func(r int) []float32 { return with(r, r*m, sum[r*m:(r+1)*m]) }},
				{"AllGatherTensor", func(c *Comm, t *Tensor[float32]) error {
					send, err := view(c, t, c.Rank()*m, m)
					if err != nil {
						return err
					}
					return AllGatherTensor(ctx, c, send, t)
				}, func(r int) []float32 {
					out := make([]float32, 0, N*m)
					for q := 0; q < N; q++ {
						out = append(out, in[q][q*m:(q+1)*m]...)
					}
					return out
				}},
				{"ReduceTensor", func(c *Comm, t *Tensor[float32]) error {
					return ReduceTensor(ctx, c, t, t, Sum, root)
				}, func(r int) []float32 {
					if r == root {
						return sum
					}
					return in[r]
				}},
				{"ScatterTensor", func(c *Comm, t *Tensor[float32]) error {
					recv, err := view(c, t, c.Rank()*m, m)
					if err != nil {
						return err
					}
					return ScatterTensor(ctx, c, t, recv, root)
				}, func(r int) []float32 { return with(r, r*m, in[root][r*m:(r+1)*m]) }},
			}
			for _, tc := range cases {
				got := make([][]float32, N)
				noErrors(t, onRanks(g, func(c *Comm) error {
					tt, err := NewTensor[float32](c, N*m)
					if err != nil {
						return err
					}
					defer tt.Close()
					if err := tt.Upload(in[c.Rank()]); err != nil {
						return err
					}
					if err := tc.run(c, tt); err != nil {
						return err
					}
					got[c.Rank()] = make([]float32, N*m)
					return tt.Download(got[c.Rank()])
				}))
				for r := range got {
					if want := tc.want(r); !slices.Equal(got[r], want) {
						i := 0
						for got[r][i] == want[i] {
							i++
						}
						t.Fatalf("%s: rank %d element %d: got %v, want %v", tc.name, r, i, got[r][i], want[i])
					}
				}
			}
		})
	}
}
