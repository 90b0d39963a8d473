package collective

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// bitOps are the operators defined on the integer types only.
var bitOps = []Op{BAnd, BOr, BXor, LAnd, LOr, LXor}

// bitRef is op(a, b) as a plain Go expression: the bits' AND, OR or XOR, or
// 1 where (a != 0) op (b != 0) holds, else 0.
func bitRef[T Integer](op Op, a, b T) T {
	truth := func(v bool) T {
		if v {
			return 1
		}
		return 0
	}
	switch op {
	case BAnd:
		return a & b
	case BOr:
		return a | b
	case BXor:
		return a ^ b
	case LAnd:
		return truth(a != 0 && b != 0)
	case LOr:
		return truth(a != 0 || b != 0)
	case LXor:
		return truth((a != 0) != (b != 0))
	}
	panic("not a bitwise or logical op: " + op.String())
}

// bitPrefix is the reduction of ranks 0..last's inputs (last >= 0) by op,
// left to right: ranks 0's input alone when last is 0.
func bitPrefix[T Integer](ins [][]T, op Op, last int) []T {
	out := slices.Clone(ins[0])
	for q := 1; q <= last; q++ {
		for e := range out {
			out[e] = bitRef(op, out[e], ins[q][e])
		}
	}
	return out
}

// bitOpsCase runs AllReduce, ReduceScatter, Reduce, Scan and Exscan of T
// with op on g, inputs drawn from rng (a third zero, the others any bits or
// small values), and checks every rank's result exactly against bitPrefix.
func bitOpsCase[T Integer](t *testing.T, g *Group, rng *rand.Rand, op Op, n int) {
	t.Helper()
	N := g.Size()
	ctx := context.Background()
	ins := make([][]T, N)
	for r := range ins {
		ins[r] = make([]T, n*N)
		for e := range ins[r] {
			switch rng.IntN(3) {
			case 0:
			case 1:
				ins[r][e] = T(rng.Uint64())
			default:
				ins[r][e] = T(rng.IntN(5) - 2)
			}
		}
	}
	all := bitPrefix(ins, op, N-1)
	what := fmt.Sprintf("%T %v N=%d n=%d", *new(T), op, N, n)
	check := func(coll string, r int, got, want []T) {
		t.Helper()
		for e := range want {
			if got[e] != want[e] {
				t.Fatalf("%s %s: rank %d element %d = %v, want %v", what, coll, r, e, got[e], want[e])
			}
		}
	}

	outs := make([][]T, N)
	noErrors(t, onRanks(g, func(c *Comm) error {
		outs[c.Rank()] = slices.Clone(ins[c.Rank()])
		return AllReduce(ctx, c, outs[c.Rank()], op)
	}))
	for r := range outs {
		check("AllReduce", r, outs[r], all)
	}

	noErrors(t, onRanks(g, func(c *Comm) error {
		outs[c.Rank()] = make([]T, n)
		return ReduceScatter(ctx, c, ins[c.Rank()], outs[c.Rank()], op)
	}))
	for r := range outs {
		check("ReduceScatter", r, outs[r], all[r*n:(r+1)*n])
	}

	root := rng.IntN(N)
	noErrors(t, onRanks(g, func(c *Comm) error {
		outs[c.Rank()] = make([]T, n*N)
		return Reduce(ctx, c, ins[c.Rank()], outs[c.Rank()], op, root)
	}))
	check(fmt.Sprintf("Reduce to %d", root), root, outs[root], all)

	for _, exclusive := range []bool{false, true} {
		const sentinel = 99
		noErrors(t, onRanks(g, func(c *Comm) error {
			outs[c.Rank()] = slices.Repeat([]T{sentinel}, n*N)
			if exclusive {
				return Exscan(ctx, c, ins[c.Rank()], outs[c.Rank()], op)
			}
			return ScanAsync(ctx, c, ins[c.Rank()], outs[c.Rank()], op).Wait(ctx)
		}))
		for r := range outs {
			switch {
			case !exclusive:
				check("Scan", r, outs[r], bitPrefix(ins, op, r))
			case r == 0:
				check("Exscan", r, outs[r], slices.Repeat([]T{sentinel}, n*N)) // untouched
			default:
				check("Exscan", r, outs[r], bitPrefix(ins, op, r-1))
			}
		}
	}
}

// TestBitwiseLogicalOps checks BAnd, BOr, BXor, LAnd, LOr and LXor on every
// integer type in AllReduce, ReduceScatter, Reduce, Scan and Exscan against
// plain Go loops, bit for bit, on 1 to 5 ranks (one rank and Scan's rank 0
// keep their input unchanged), on host and lavapipe (-short: 1 and 3 ranks
// there; unless full 1, 2 and 3: each op and type creates its pipelines on
// each rank's device). The conformance test
// draws these ops too, over every strategy and path.
func TestBitwiseLogicalOps(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0xb17))
	sizes := []int{1, 7, 64, 65, 300}
	for _, bk := range backendsUnderTest(t) {
		ranks := []int{1, 2, 3, 5}
		if !fullRun() && bk != "host" {
			ranks = []int{1, 2, 3}
		}
		if testing.Short() && bk != "host" {
			ranks = []int{1, 3} // each op and type creates its pipelines
		}
		for _, N := range ranks {
			g := openGroup(t, bk, N, func(o *Options) { o.ChunkBytes = 256 })
			for _, op := range bitOps {
				n := sizes[rng.IntN(len(sizes))]
				t.Run(fmt.Sprintf("%s/N=%d/%v", bk, N, op), func(t *testing.T) {
					bitOpsCase[int8](t, g, rng, op, n)
					bitOpsCase[uint8](t, g, rng, op, n)
					bitOpsCase[int16](t, g, rng, op, n)
					bitOpsCase[uint16](t, g, rng, op, n)
					bitOpsCase[int32](t, g, rng, op, n)
					bitOpsCase[uint32](t, g, rng, op, n)
					bitOpsCase[int64](t, g, rng, op, n)
					bitOpsCase[uint64](t, g, rng, op, n)
				})
			}
		}
	}
}

// TestBitwiseLogicalOpsExamples: hand-worked results, signed values on
// their two's-complement bits, the logical ops 0 or 1.
func TestBitwiseLogicalOpsExamples(t *testing.T) {
	ctx := context.Background()
	g := openGroup(t, "host", 3)
	in := [][]int32{{-1, 6, 0, -8}, {0x0f, 3, 0, 4}, {-16, 5, 7, 0}}
	for _, c := range []struct {
		op   Op
		want []int32
	}{
		{BAnd, []int32{0, 0, 0, 0}},
		{BOr, []int32{-1, 7, 7, -4}},
		{BXor, []int32{-16 ^ 0x0f ^ -1, 6 ^ 3 ^ 5, 7, -8 ^ 4}},
		{LAnd, []int32{1, 1, 0, 0}},
		{LOr, []int32{1, 1, 1, 1}},
		{LXor, []int32{1, 1, 1, 0}},
	} {
		outs := make([][]int32, 3)
		noErrors(t, onRanks(g, func(cm *Comm) error {
			outs[cm.Rank()] = make([]int32, 4)
			return AllReduceInto(ctx, cm, in[cm.Rank()], outs[cm.Rank()], c.op)
		}))
		for r := range outs {
			if !slices.Equal(outs[r], c.want) {
				t.Errorf("%v: rank %d got %v, want %v", c.op, r, outs[r], c.want)
			}
		}
	}
}

// TestBitwiseOpsInvalidOnFloats: the bitwise and logical ops on float32,
// float64, Float16 and BFloat16 fail with ErrInvalidArgument on every rank
// of every reducing collective, buffers untouched, the group usable after.
func TestBitwiseOpsInvalidOnFloats(t *testing.T) {
	g := openGroup(t, "host", 3)
	for _, op := range bitOps {
		bitOpsRefused[float32](t, g, op)
		bitOpsRefused[float64](t, g, op)
		bitOpsRefused[Float16](t, g, op)
		bitOpsRefused[BFloat16](t, g, op)
	}
	// The group is intact: an integer call with the same op runs.
	outs := make([][]uint32, 3)
	noErrors(t, onRanks(g, func(c *Comm) error {
		outs[c.Rank()] = []uint32{uint32(1) << c.Rank()}
		return AllReduce(context.Background(), c, outs[c.Rank()], BOr)
	}))
	for r := range outs {
		if outs[r][0] != 7 {
			t.Fatalf("BOr after the refusals: rank %d got %d, want 7", r, outs[r][0])
		}
	}
}

func bitOpsRefused[T convElem](t *testing.T, g *Group, op Op) {
	t.Helper()
	ctx := context.Background()
	N := g.Size()
	const n = 4
	calls := []struct {
		name string
		call func(c *Comm, send, recv []T) error
	}{
		{"AllReduce", func(c *Comm, send, _ []T) error { return AllReduce(ctx, c, send, op) }},
		{"AllReduceAsync", func(c *Comm, send, _ []T) error { return AllReduceAsync(ctx, c, send, op).Wait(ctx) }},
		{"ReduceScatter", func(c *Comm, send, recv []T) error { return ReduceScatter(ctx, c, send, recv[:n], op) }},
		{"Reduce", func(c *Comm, send, recv []T) error { return Reduce(ctx, c, send, recv, op, 1) }},
		{"Scan", func(c *Comm, send, recv []T) error { return Scan(ctx, c, send, recv, op) }},
		{"Exscan", func(c *Comm, send, recv []T) error { return Exscan(ctx, c, send, recv, op) }},
		{"AllReduceTensor", func(c *Comm, send, _ []T) error {
			tn, err := NewTensor[T](c, len(send))
			if err != nil {
				return err
			}
			defer tn.Close()
			return AllReduceTensor(ctx, c, tn, op, Auto)
		}},
	}
	for _, call := range calls {
		sends, recvs := make([][]T, N), make([][]T, N)
		errs := onRanks(g, func(c *Comm) error {
			r := c.Rank()
			sends[r], recvs[r] = make([]T, n*N), make([]T, n*N)
			for e := range sends[r] {
				sends[r][e], recvs[r][e] = T(1), T(2)
			}
			return call.call(c, sends[r], recvs[r])
		})
		for r, err := range errs {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%s of %T with %v: rank %d: %v, want ErrInvalidArgument", call.name, *new(T), op, r, err)
			}
			for e := range sends[r] {
				if sends[r][e] != T(1) || recvs[r][e] != T(2) {
					t.Fatalf("%s of %T with %v: rank %d's buffers were written", call.name, *new(T), op, r)
				}
			}
		}
	}
}

// TestParseOp: every op's name parses back in any case, "mean" is Mean,
// anything else (a PreMulSum op's name included) is ErrInvalidArgument.
func TestParseOp(t *testing.T) {
	for o := Sum; o <= LXor; o++ {
		for _, name := range []string{o.String(), strings.ToUpper(o.String())} {
			if got, err := ParseOp(name); err != nil || got != o {
				t.Errorf("ParseOp(%q) = %v, %v; want %v", name, got, err, o)
			}
		}
	}
	if got, err := ParseOp("Mean"); err != nil || got != Mean {
		t.Errorf("ParseOp(Mean) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "average", "Op(11)", "sum ", "premulsum", "PreMulSum", opPreMulSum.String()} {
		if _, err := ParseOp(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseOp(%q) = %v; want ErrInvalidArgument", bad, err)
		}
	}
}
