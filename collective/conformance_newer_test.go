package collective

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// The collectives TestConformance draws from a source of their own:
// Scan, Exscan, BroadcastInto and SendRecv along permutations with ranks
// that send to themselves (cPermute).

// confNewerColls are the collectives added after the draws of drawSession
// were fixed: together they take a share of the calls of the collectives
// other than all-reduce, drawn from a source of their own (drawNewerColl),
// so that the sessions of fixed seeds keep drawing their other calls as
// they did.
var confNewerColls = []confColl{cScan, cExscan, cBroadcastInto, cPermute}

// drawNewerColl turns call c of group g, drawn for another collective, into
// one of confNewerColls in 4 of 17 calls that do not all-reduce (each of
// them then about as frequent as each of the older ones), drawn from rng:
// the tensor paths become the slice paths (but Scan's, Exscan's and
// BroadcastInto's, which run their tensor forms), an asynchronous call on one buffer runs out of
// place in a third of the calls (cPermute always: a send and a receive
// started on one buffer would race), and Scan and Exscan, which gather every rank's input on every
// rank where the CPU reduces the prefix, draw Mean (refused) in a quarter of the calls that drew it and a
// length no larger than the gathering collectives'.
func drawNewerColl(rng *rand.Rand, c *confCall, g confGroup, slotElems, maxLen int) {
	if c.Coll == cAllReduce {
		return
	}
	x := rng.IntN(17)
	if x >= len(confNewerColls) {
		return
	}
	c.Coll = confNewerColls[x]
	if !c.Coll.hasTensor() {
		c.Path = c.Path.slicePath()
	}
	// (pTensorAsync draws as pAsync did before BroadcastInto kept it.)
	c.OutOfPlace = (c.Path == pAsync || c.Path == pTensorAsync) && (c.Coll == cPermute || rng.IntN(3) == 0)
	if c.Coll == cScan || c.Coll == cExscan {
		if c.Op == Mean && rng.IntN(4) > 0 {
			c.Op = []Op{Sum, Max, Min, Prod}[rng.IntN(4)]
		}
		if ml := max(1, maxLen/g.Ranks); c.N > ml {
			c.N = drawLen(rng, g.Ranks, slotElems, g.PipelineDepth, ml)
		}
	}
}

// perm is the permutation of a cPermute call on ranks ranks (rank r sends
// to perm[r]), drawn from its data seed: each rank sends to itself or,
// with probability one half, joins a cycle of the others (two ranks: a
// pairwise exchange; one: itself too).
func (c confCall) perm(ranks int) []int {
	rng := rand.New(rand.NewPCG(c.DataSeed, 0x7065726d))
	p := make([]int, ranks)
	var moving []int
	for r := range p {
		p[r] = r
		if rng.IntN(2) == 0 {
			moving = append(moving, r)
		}
	}
	rng.Shuffle(len(moving), func(i, j int) { moving[i], moving[j] = moving[j], moving[i] })
	for i, r := range moving {
		p[r] = moving[(i+1)%len(moving)]
	}
	return p
}

// peers returns the ranks rank r sends to and receives from in a send/recv
// call c (cShift, cPermute) on ranks ranks.
func (c confCall) peers(ranks, r int) (to, from int) {
	if c.Coll == cPermute {
		p := c.perm(ranks)
		return p[r], slices.Index(p, r)
	}
	k := c.shift(ranks)
	return (r + k) % ranks, (r - k + ranks) % ranks
}

// checkScan checks a Scan or Exscan: rank r's recv is the inputs of ranks
// 0..r (Exscan: 0..r-1) reduced in rank order, bit for bit (the kernels'
// arithmetic on the devices or the CPU, rounded once); Exscan's rank 0 recv is left
// as it was (the poison, or in place its input). red is the inputs as the
// reductions see them (a PreMulSum call's products: preMulInputs).
func checkScan[T Elem](c confCall, in, red [][]uint64, bufs []*confBufs[T], good func(int) bool) []confFail {
	t := c.Type
	var fails []confFail
	vals := make([]uint64, 0, len(bufs))
	for r, b := range bufs {
		if !good(r) {
			continue
		}
		k := r + 1
		if c.Coll == cExscan {
			k = r
		}
		got := elemBits(b.recv)
		want := make([]uint64, len(got))
		if k == 0 {
			if c.inPlace() {
				copy(want, in[0])
			} else {
				for i := range want {
					want[i] = t.poison()
				}
			}
			if d := diffBits(t, got, want); d != "" {
				fails = append(fails, confFail{"rank 0's recv written", fmt.Sprintf("rank 0: Exscan changed its recv (%s)", d)})
			}
			continue
		}
		for i := range want {
			vals = vals[:0]
			for q := range k {
				vals = append(vals, red[q][i])
			}
			want[i] = rankOrderRef(t, c.Op, vals)
		}
		if kind, bad := checkBits(t, got, want, !t.isInt()); kind != "" {
			fails = append(fails, confFail{kind, fmt.Sprintf("rank %d (ranks 0..%d reduced in rank order): %s", r, k-1, bad)})
		}
	}
	return fails
}
