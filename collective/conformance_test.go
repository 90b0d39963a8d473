package collective

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
)

// The randomized differential conformance test: each session draws a group
// (backend, ranks, device sharing, slot size, pipeline depth, ...) and a few
// calls on it (collective, data path, element type, op, strategy, length,
// inputs), runs them, and checks every rank's result against a reference
// computed with plain loops, and all-reduce results for bitwise agreement
// across ranks. Every collective (AllReduce, ReduceScatter, AllGather,
// Broadcast, Reduce, send/recv shifts (a shift of 0: each rank with
// itself), AllToAll, Gather, Scatter, AllToAllV, AllGatherV,
// ReduceScatterV, GatherV, ScatterV, and from a source of their own Scan,
// Exscan (rank 0's recv left as it was), BroadcastInto and SendRecv along
// permutations in which some ranks send to themselves, through SendRecv
// (one buffer in place), SendAsync and RecvAsync, or a Batch) runs on
// every element type, out of place and in its in-place layout (each
// rank's send and recv one buffer), on Go slices, HostBuffers and, where
// it has a tensor form, device tensors, synchronously and through its
// asynchronous form (waited for with Wait, WaitAll, WaitAny or by polling
// Test); an in-place all-reduce of the group's strategy also through a
// Batch (BatchAllReduce, a quarter of them); the reductions with each op
// and, in a share of them, a PreMulSum op of each rank's own scalar
// (drawPreMul: checked as the Sum of the ranks' products):
// float32 and float64 against a float64 reference (exact or within a
// stated bound), the integer types exactly (wrapping sums and products,
// signed and unsigned extrema; Mean must be rejected), the 16-bit floats
// against a float64 reference of their inputs within a stated bound, with
// NaN, Inf and overflow exact (checkReduced16); float32, float16 and
// bfloat16 also on subnormal inputs whose results are exact, bit for bit
// (subnormalInputs: a device that flushes subnormals fails). Data
// movement is checked bit for bit. A session is a pure function of its
// seed: a failure prints the seed and the session, and
//
//	go test ./collective/ -run 'TestConformance$' -conformance.seed=S -conformance.cases=1 -v
//
// replays it (GOCOLL_CONFORMANCE_SEED and GOCOLL_CONFORMANCE_CASES do the
// same through ./build.sh). Session i of a run has seed S+i.
// -conformance.vulkan=P draws P% of the sessions on vulkan instead of 20%
// (bench/device-bench.sh exact: every session on the GPU).

var (
	confSeedFlag  = flag.Uint64("conformance.seed", 0, "seed of the first conformance session (0: the fixed CI seed, or a random one with GOCOLL_TEST_FULL)")
	confCasesFlag = flag.Int("conformance.cases", 0, "number of conformance sessions (0: the budget of the mode)")
	// A GPU run raises the vulkan share to spend its time on the device;
	// the sessions then differ from the default's (a replay passes it too).
	confVulkanFlag = flag.Int("conformance.vulkan", 0, "percent of conformance sessions drawn on vulkan (0: the default, 20)")
)

// confCISeed is the seed CI runs, so a CI failure is the same on every run.
const confCISeed = 20251205

// confCIBudget is TestConformance's number of sessions in CI (3,000 in full
// mode).
const confCIBudget = 100

// confBudget returns the first seed and the number of sessions to run: the
// flags, else the environment variables env_SEED and env_CASES, else the
// fixed CI seed (a random one in full mode) and the mode's budget (a quarter
// of CI's under the race detector).
func confBudget(t testing.TB, seedFlag *uint64, casesFlag *int, env string, full, ci int) (uint64, int) {
	seed := *seedFlag
	if v := os.Getenv(env + "_SEED"); v != "" && seed == 0 {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s_SEED=%q: %v", env, v, err)
		}
		seed = s
	}
	n := *casesFlag
	if v := os.Getenv(env + "_CASES"); v != "" && n == 0 {
		c, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s_CASES=%q: %v", env, v, err)
		}
		n = c
	}
	if seed == 0 {
		seed = confCISeed
		if fullRun() {
			seed = uint64(time.Now().UnixNano()) & (1<<40 - 1)
		}
	}
	if n == 0 {
		n = ci
		if fullRun() {
			n = full
		}
		if raceEnabled && !fullRun() {
			n = max(1, ci/4)
		}
	}
	return seed, n
}

type confColl int

const (
	cAllReduce confColl = iota
	cReduceScatter
	cAllGather
	cBroadcast
	cReduce
	// cShift: every rank sends its input k ranks ahead and receives from k
	// ranks behind (k = Root mod ranks; 0: to and from itself, always on
	// one rank): SendRecv on the slice paths; SendAsync and RecvAsync (in
	// either order) on async; RecvAsync then a blocking Send on async+sync
	// (to itself: then a Batch of the Send).
	cShift
	cAllToAll // N is the chunk each rank sends each rank
	cGather   // N is each rank's send
	cScatter  // N is each rank's recv
	// The V collectives: N is the typical count of one range; the counts
	// and offsets (zeros, gaps, overlapping send ranges where allowed) are
	// drawn from the data seed (confLayout).
	cAllToAllV
	cAllGatherV
	cReduceScatterV
	// The rooted V collectives: counts, displs and the root's recv
	// (GatherV) or send (ScatterV) are used on the root only; a non-root
	// with NilRecv passes nil for them, else the root's counts and offsets
	// and a buffer that must stay as it is.
	cGatherV
	cScatterV
	// The collectives drawn from a source of their own (confNewerColls):
	// Scan and Exscan (N: each rank's send and recv), BroadcastInto (out of
	// place; in place on the root only, a non-root's send nil with
	// NilRecv), and cPermute: SendRecv along a permutation drawn from the
	// data seed in which some ranks send to and receive from themselves
	// (confCall.perm), in place with one buffer on the in-place paths.
	cScan
	cExscan
	cBroadcastInto
	cPermute
)

var collNames = [...]string{"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce", "Shift",
	"AllToAll", "Gather", "Scatter", "AllToAllV", "AllGatherV", "ReduceScatterV", "GatherV", "ScatterV",
	"Scan", "Exscan", "BroadcastInto", "Permute"}

func (k confColl) String() string { return collNames[k] }

// reduces reports whether the collective takes an op.
func (k confColl) reduces() bool {
	return k == cAllReduce || k == cReduceScatter || k == cReduce || k == cReduceScatterV || k == cScan || k == cExscan
}

// rooted reports whether the collective has a root.
func (k confColl) rooted() bool {
	return k == cBroadcast || k == cReduce || k == cGather || k == cScatter || k == cGatherV || k == cScatterV ||
		k == cBroadcastInto
}

// vCounts reports whether the collective takes counts and offsets
// (confLayout).
func (k confColl) vCounts() bool {
	return k == cAllToAllV || k == cAllGatherV || k == cReduceScatterV || k == cGatherV || k == cScatterV
}

// hasTensor reports whether the collective has a tensor form.
func (k confColl) hasTensor() bool {
	return k != cShift && k != cGatherV && k != cScatterV && k != cPermute
}

// inPlaceLayout reports whether the collective has an in-place layout
// (setupOwnBufs): every one but send/recv shifts. The in-place paths and
// the asynchronous calls use it.
func (k confColl) inPlaceLayout() bool { return k != cShift }

// twoBuffers reports whether the collective takes a send and a recv
// (AllReduce's asynchronous and tensor forms and Broadcast take one).
func (k confColl) twoBuffers() bool { return k != cAllReduce && k != cBroadcast }

// confPath is how a call hands its data over.
type confPath int

const (
	pSlice   confPath = iota // Go slices, out of place
	pInPlace                 // Go slices, in the collective's in-place layout (setupOwnBufs)
	pPinned                  // HostBuffers, out of place
	pPinnedInPlace
	// Device tensors: AllReduceTensor and BroadcastTensor in place, the
	// other XxxTensor forms out of place (send and recv tensors).
	pTensor
	// The collective's asynchronous form (XxxAsync) in the in-place layout
	// where the test has one (inPlaceLayout) and the call is not
	// OutOfPlace, out of place elsewhere, then waited for as the call's
	// Wait says.
	pAsync
	// The asynchronous form in its pAsync layout on a copy of the buffers
	// (confBufs.async), then the same collective out of place (Broadcast:
	// in place) on the call's own buffers before waiting: synchronously
	// (Wait, Test: a Comm runs them in call order, so Test must find the
	// asynchronous call done when the synchronous one returned), or
	// asynchronously too (WaitAll, WaitAny: the first started finishes
	// first). AllReduce: AllReduceAsync in place on a copy of the input
	// (confBufs.extra), then AllReduceWith. Shift: RecvAsync, then a
	// blocking Send.
	pAsyncPair
	pPinnedSend // a HostBuffer to send from, a Go slice to receive into
	pPinnedRecv // a Go slice to send from, a HostBuffer to receive into
	// Device tensors in the collective's in-place layout: the buffers of
	// pInPlace as tensors, the inner one a WrapTensor view of the outer at
	// its offset (send == recv: the same tensor, or a view of all of it;
	// tensorsIn).
	pTensorInPlace
	// The tensor forms' asynchronous calls (XxxTensorAsync), as pAsync and
	// pAsyncPair on slices: pTensorAsync in pTensorInPlace's layout (out of
	// place with OutOfPlace), waited for as the call's Wait says;
	// pTensorAsyncPair that on a copy of the buffers (confBufs.async),
	// then the pTensor call on the call's own: synchronous (Wait, Test) or
	// asynchronous too (WaitAll, WaitAny).
	pTensorAsync
	pTensorAsyncPair
)

var pathNames = [...]string{"slice", "in-place", "pinned", "pinned-in-place", "tensor", "async", "async+sync", "pinned-send", "pinned-recv",
	"tensor-in-place", "tensor-async", "tensor-async+sync"}

func (p confPath) String() string { return pathNames[p] }

// inPlace reports whether the path runs every collective that has an
// in-place layout in it.
func (p confPath) inPlace() bool { return p == pInPlace || p == pPinnedInPlace || p == pTensorInPlace }
func (p confPath) pinned() bool  { return p.sendPinned() || p.recvPinned() }

func (p confPath) sendPinned() bool { return p == pPinned || p == pPinnedInPlace || p == pPinnedSend }
func (p confPath) recvPinned() bool { return p == pPinned || p == pPinnedInPlace || p == pPinnedRecv }
func (p confPath) async() bool {
	return p == pAsync || p == pAsyncPair || p == pTensorAsync || p == pTensorAsyncPair
}
func (p confPath) tensor() bool {
	return p == pTensor || p == pTensorInPlace || p == pTensorAsync || p == pTensorAsyncPair
}

// slicePath is the path on Go slices of tensor path p (p itself for the
// others), for the collectives without a tensor form.
func (p confPath) slicePath() confPath {
	switch p {
	case pTensor:
		return pSlice
	case pTensorInPlace:
		return pInPlace
	case pTensorAsync:
		return pAsync
	case pTensorAsyncPair:
		return pAsyncPair
	}
	return p
}

// pair reports whether the path runs an asynchronous call on a copy of the
// buffers before the call on its own (pAsyncPair, pTensorAsyncPair).
func (p confPath) pair() bool { return p == pAsyncPair || p == pTensorAsyncPair }

// inputKind is how a call's inputs are drawn.
type inputKind int

const (
	// Small integers (powers of two for prod): every result exact. 16-bit
	// floats: multiples of a power of two 2^e whose partial sums all stay
	// exact (e down to the smallest subnormal). Integer types: small values.
	inExactInt inputKind = iota
	inExactF64           // integers plus multiples of 2^-30 (f64 only): exact in f64, not in f32
	// Random reals: results within a stated bound. Integer types: the full
	// range (sums and products wrap); data movement of 16-bit floats: any
	// bit pattern.
	inRandom
	// Exact inputs with NaN and +-Inf sprinkled in. 16-bit floats: also
	// elements whose every rank holds a large value of one sign, so a sum
	// or product overflows to Inf (except for Mean, whose overflow depends
	// on the strategy), and for extrema and data movement the extreme
	// finite, subnormal and zero values. Integer types: MinInt, MaxInt,
	// 0, +-1 and full-range values mixed in.
	inSpecial
	// float32, float16 and bfloat16 (TestConformance only): subnormals,
	// alone, mixed with normals and with signed zeros, such that every
	// result is exact in any order (subnormalInputs) and checked bit for
	// bit.
	inSubnormal
)

var inputNames = [...]string{"exact-int", "exact-f64", "random", "special", "subnormal"}

func (k inputKind) String() string { return inputNames[k] }

// waitMode is how an asynchronous call's Works are waited for.
type waitMode int

const (
	wWait    waitMode = iota // Work.Wait
	wWaitAll                 // WaitAll (with a nil entry, skipped)
	wTest                    // Work.Test polled until done, then Wait
	wWaitAny                 // WaitAny until every Work is done (with a nil entry, skipped)
)

var waitNames = [...]string{"Wait", "WaitAll", "Test", "WaitAny"}

func (w waitMode) String() string { return waitNames[w] }

// confGroup is a session's group.
type confGroup struct {
	Backend         string
	Ranks           int
	DevicePerRank   bool
	ChunkBytes      int
	MaxBindingBytes int64
	DisableFloat64  bool
	Strategy        Strategy // Config.Strategy
	PipelineDepth   int
	LocalGroupSize  int
	Deterministic   bool
	// NoTypeKernels: the group reduces only f32 and f64 in kernels (as a
	// GPU without the 8-, 16- and 64-bit features), so the other types
	// take the exact host paths.
	NoTypeKernels bool
}

// noKernels reports whether t has no reduction kernels on g.
func (g confGroup) noKernels(t confType) bool {
	return (t == tF64 && g.DisableFloat64) || (g.NoTypeKernels && t != tF32 && t != tF64)
}

// confCall is one call of a session.
type confCall struct {
	Coll     confColl
	Path     confPath
	F64      bool     // Type == tF64 (the fault-injection test reads it)
	Type     confType // the element type
	Op       Op
	Strategy Strategy // all-reduce only
	N        int      // elements per rank (ReduceScatter: of recv; AllGather: of send; see confColl)
	Input    inputKind
	Mag      int // integers in [-2^Mag, 2^Mag]
	Root     int
	DataSeed uint64
	// NilRecv: a Reduce, Gather or GatherV non-root passes nil instead of a
	// recv it checks, a Scatter or ScatterV non-root nil instead of a send
	// (GatherV, ScatterV: nil counts and offsets too).
	NilRecv bool
	// Wait: how the asynchronous paths wait (TestConformance; the
	// fault-injection sessions Wait).
	Wait waitMode
	// OutOfPlace: pAsync and pTensorAsync run a collective that has an
	// in-place layout out of place (TestConformance only).
	OutOfPlace bool
	// Steps bounds the 16-bit roundings of an element's reduction (see
	// roundSteps).
	Steps int
	// PreMul: each rank reduces with a PreMulSum op of its own scalar
	// PreMul[rank] (Op is Sum: the sum of the products; drawPreMul).
	PreMul []float64
}

type confSession struct {
	Seed  uint64
	G     confGroup
	Calls []confCall
	// Fallback is set when the drawn backend is not available here.
	Fallback string
	// Device names the device the session ran on (its first rank's).
	Device string
}

func (s *confSession) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "session seed=%d group=%+v", s.Seed, s.G)
	if s.Fallback != "" {
		fmt.Fprintf(&b, " (%s)", s.Fallback)
	}
	for i, c := range s.Calls {
		fmt.Fprintf(&b, "\n  call %d: %s", i, c)
	}
	return b.String()
}

func (c confCall) String() string {
	s := fmt.Sprintf("%s path=%s %s n=%d input=%s", c.Coll, c.Path, c.Type, c.N, c.Input)
	if c.Input == inExactInt || c.Input == inSpecial {
		s += fmt.Sprintf(" mag=2^%d", c.Mag)
	}
	switch {
	case c.PreMul != nil:
		s += fmt.Sprintf(" op=premulsum scalars=%v", c.PreMul)
	case c.Coll.reduces():
		s += " op=" + c.Op.String()
	}
	if c.Coll == cAllReduce {
		s += " strategy=" + c.Strategy.String()
	}
	if c.Coll.rooted() || c.Coll == cShift {
		s += fmt.Sprintf(" root=%d", c.Root)
	}
	if (c.Coll == cReduce || c.Coll == cGather || c.Coll == cGatherV) && c.NilRecv {
		s += " nil-recv"
	}
	if (c.Coll == cScatter || c.Coll == cScatterV || c.Coll == cBroadcastInto) && c.NilRecv {
		s += " nil-send"
	}
	if c.Path.async() {
		s += " wait=" + c.Wait.String()
	}
	if c.OutOfPlace {
		s += " out-of-place"
	}
	if c.Type.is16() && c.Coll.reduces() {
		s += fmt.Sprintf(" steps<=%d", c.Steps)
	}
	return s + fmt.Sprintf(" data-seed=%d", c.DataSeed)
}

var (
	primesOnce sync.Once
	primes     []int
)

func smallPrimes() []int {
	primesOnce.Do(func() {
		const n = 20000
		sieve := make([]bool, n)
		for i := 2; i < n; i++ {
			if !sieve[i] {
				primes = append(primes, i)
				for j := i * i; j < n; j += i {
					sieve[j] = true
				}
			}
		}
	})
	return primes
}

// confLimits bound the sizes a session draws.
type confLimits struct {
	maxLen    int // elements per rank of the largest calls
	maxCalls  int
	vulkanPct int // share of sessions drawn on vulkan
	// every: draw every element type and collective, its in-place layout
	// on tensors too, and the asynchronous form of every collective and
	// every tensor collective with every way of waiting
	// (TestConformance). Without it a session draws the first six
	// collectives, their asynchronous forms only for AllReduce, Broadcast
	// and send/recv (Wait), from the same random stream as before the
	// others were added (the fault-injection test's sessions), and f32 and
	// f64 only unless types is set.
	every bool
	types bool // draw every element type (every implies it)
}

func confLimitsFor() confLimits {
	l := confLimits{maxLen: 300000, maxCalls: 4, vulkanPct: 20, every: true}
	if raceEnabled {
		l.maxLen = 40000
	}
	if *confVulkanFlag != 0 {
		l.vulkanPct = *confVulkanFlag
	}
	return l
}

// drawLen draws an element count heavy on the edges: 0, 1, ranks-1..ranks+1,
// multiples of the slot and of the pipeline's slices +-1, multiples of 4 +-1
// and primes, occasionally large.
func drawLen(rng *rand.Rand, ranks, slotElems, depth, maxLen int) int {
	pm := rng.IntN(3) - 1
	var n int
	switch x := rng.IntN(100); {
	case x < 6:
		n = 0
	case x < 12:
		n = 1
	case x < 20:
		n = ranks + pm
	case x < 34:
		k := 1 + rng.IntN(4)
		n = k*slotElems + pm
		if n > maxLen {
			n = slotElems + pm
		}
		if n > maxLen {
			n = 4*(1+rng.IntN(64)) + pm
		}
	case x < 48:
		n = 4*(1+rng.IntN(64)) + pm
	case x < 66:
		// Pipelined and direct cut each rank's slice into depth chunks on
		// 4-element boundaries: small multiples of 4*ranks hit empty chunks.
		n = 4*ranks*(1+rng.IntN(depth+1)) + pm*rng.IntN(2)
	case x < 76:
		ps := smallPrimes()
		if rng.IntN(2) == 0 {
			n = ps[rng.IntN(30)]
		} else {
			n = ps[rng.IntN(len(ps))]
		}
	case x < 95:
		n = 2 + rng.IntN(5000)
	default:
		n = maxLen/4 + rng.IntN(maxLen-maxLen/4+1)
	}
	return min(max(n, 0), maxLen)
}

// drawSession draws session seed's group and calls. It depends only on the
// seed and the limits, never on what this machine has.
func drawSession(seed uint64, lim confLimits) *confSession {
	rng := rand.New(rand.NewPCG(seed, 0x636f6e66))
	side := rand.New(rand.NewPCG(seed, 0x6e657774))  // confNewerTypes
	kinds := rand.New(rand.NewPCG(seed, 0x6b696e64)) // confNewerColls
	pm := rand.New(rand.NewPCG(seed, 0x70726d73))    // drawPreMul
	s := &confSession{Seed: seed}
	g := &s.G
	g.Backend = "host"
	if rng.IntN(100) < lim.vulkanPct {
		g.Backend = "vulkan"
	}
	g.Ranks = 1 + rng.IntN(8)
	g.DevicePerRank = g.Backend == "vulkan" && rng.IntN(2) == 0
	switch x := rng.IntN(100); {
	case x < 12:
		g.ChunkBytes = 0 // 1 MiB
	case x < 62:
		g.ChunkBytes = 8 * (8 + rng.IntN(505)) // 64 .. 4 KiB, multiples of 8
	case x < 87:
		g.ChunkBytes = 8 * (2*(4+rng.IntN(200)) + 1) // odd multiples of 8
	default:
		g.ChunkBytes = 64 + rng.IntN(4000) // rounded down to whole f64 by NewGroup
	}
	if rng.IntN(5) == 0 {
		g.MaxBindingBytes = []int64{64, 200, 256, 1000, 4096}[rng.IntN(5)]
	}
	g.DisableFloat64 = rng.IntN(7) == 0
	if rng.IntN(10) < 3 {
		g.Strategy = Strategy(1 + rng.IntN(int(Host)))
	}
	g.PipelineDepth = 1 + rng.IntN(8)
	g.LocalGroupSize = 1 + rng.IntN(4)
	g.Deterministic = rng.IntN(10) < 3
	if lim.every {
		g.NoTypeKernels = rng.IntN(8) == 0
	}

	slot := g.ChunkBytes &^ 7
	if g.ChunkBytes == 0 {
		slot = 1 << 20
	}
	maxLen := lim.maxLen
	if g.Backend == "vulkan" {
		maxLen = min(maxLen, 100000)
	}
	calls := 1 + rng.IntN(lim.maxCalls)
	for i := 0; i < calls; i++ {
		var c confCall
		if lim.every {
			// All-reduce, with its strategies and paths, takes 5 of 18.
			switch x := rng.IntN(18); {
			case x < 5:
				c.Coll = cAllReduce
			default:
				c.Coll = confColl(x - 4)
			}
		} else {
			switch x := rng.IntN(9); {
			case x < 4:
				c.Coll = cAllReduce
			default:
				c.Coll = confColl(x - 3)
			}
		}
		switch x := rng.IntN(100); {
		case x < 30:
			c.Path = pSlice
		case x < 50:
			c.Path = pInPlace
		case x < 60:
			c.Path = pPinned
		case x < 66:
			c.Path = pPinnedInPlace
		case x < 72:
			c.Path = pPinnedSend
			if rng.IntN(2) == 0 {
				c.Path = pPinnedRecv
			}
		case x < 88:
			c.Path = pTensor
			if lim.every {
				// A quarter each: out of place, in place, asynchronous,
				// asynchronous then synchronous.
				c.Path = [...]confPath{pTensor, pTensorInPlace, pTensorAsync, pTensorAsyncPair}[rng.IntN(4)]
			}
		default:
			c.Path = pAsync
			if rng.IntN(2) == 0 {
				c.Path = pAsyncPair
			}
		}
		// Every collective has an asynchronous form; tensor forms, each
		// with its asynchronous form, exist for every collective but
		// send/recv, GatherV and ScatterV. The fault-injection sessions
		// keep both to AllReduce, Broadcast and send/recv (send/recv: no
		// tensor, below), draw pTensor only, and Broadcast's asynchronous
		// calls to pAsync.
		if !lim.every && c.Path == pAsyncPair && c.Coll == cBroadcast {
			c.Path = pAsync
		}
		formOK := c.Coll == cAllReduce || c.Coll == cBroadcast || c.Coll == cShift
		switch {
		case c.Path.tensor():
			formOK = formOK || (lim.every && c.Coll.hasTensor())
		case c.Path.async():
			formOK = formOK || lim.every
		}
		if (c.Path.tensor() || c.Path.async()) && !formOK {
			c.Path = confPath(rng.IntN(2)) // slice or in place
		}
		if c.Coll == cShift {
			// No tensors and no in-place layout: slices, the asynchronous
			// tensor paths the asynchronous slice paths.
			switch c.Path = c.Path.slicePath(); c.Path {
			case pInPlace:
				c.Path = pSlice
			case pPinnedInPlace:
				c.Path = pPinned
			}
		}
		if c.Coll == cBroadcast {
			// A broadcast is in place.
			switch c.Path {
			case pSlice:
				c.Path = pInPlace
			case pPinned, pPinnedSend, pPinnedRecv:
				c.Path = pPinnedInPlace
			}
		}
		if lim.every || lim.types {
			// Half the calls on f32 and f64, the other half on the eight
			// other types, the 16-bit floats (whose checks have the most
			// cases) twice as often as each integer type. (The types added
			// since take a share of the integer calls, below.)
			c.Type = confType(rng.IntN(2))
			if rng.IntN(2) == 0 {
				c.Type = tI8 + confType(rng.IntN(10))
				if c.Type > tBF16 {
					c.Type -= 2
				}
			}
			c.F64 = c.Type == tF64
		} else {
			c.F64 = rng.IntN(2) == 0
			if c.F64 {
				c.Type = tF64
			}
		}
		c.Op = Op(rng.IntN(int(Prod) + 1)) // integer types: Mean is the wrapped sum / N, truncated
		// The bitwise and logical ops: on 3 in 8 integer calls; on 1 in 16
		// other calls, which must reject them.
		if x := rng.IntN(16); x < 6 && c.Type.isInt() || x == 0 {
			c.Op = BAnd + Op(rng.IntN(int(LXor-BAnd)+1))
		}
		if rng.IntN(4) > 0 {
			c.Strategy = Strategy(1 + rng.IntN(int(Host)))
		}
		es := c.Type.size()
		ml := maxLen
		switch c.Coll {
		case cReduceScatter, cAllGather, cAllToAll, cGather, cScatter, cAllToAllV, cAllGatherV, cReduceScatterV, cGatherV, cScatterV:
			ml = max(1, maxLen/g.Ranks)
		}
		c.N = drawLen(rng, g.Ranks, max(1, slot/es), g.PipelineDepth, ml)
		switch x := rng.IntN(100); {
		case c.Type != tF32 && c.Type != tF64:
			// The other types: more random and special inputs.
			c.Input = []inputKind{inExactInt, inRandom, inSpecial}[min(x/35, 2)]
		case x < 50:
			c.Input = inExactInt
		case x < 65:
			c.Input = inExactF64
			if !c.F64 {
				c.Input = inExactInt
			}
		case x < 90:
			c.Input = inRandom
		default:
			c.Input = inSpecial
		}
		if lim.every && (c.Type == tF32 || c.Type.is16()) && rng.IntN(100) < confSubnormalPct {
			c.Input = inSubnormal
		}
		c.Mag = 1 + rng.IntN(20)
		c.Root = rng.IntN(g.Ranks)
		c.NilRecv = rng.IntN(2) == 0
		c.DataSeed = rng.Uint64()
		if lim.every && c.Path.async() {
			c.Wait = waitMode(rng.IntN(len(waitNames)))
		}
		if lim.every && (c.Path == pAsync || c.Path == pTensorAsync) && c.Coll.inPlaceLayout() && c.Coll.twoBuffers() {
			c.OutOfPlace = rng.IntN(3) == 0
		}
		if (lim.every || lim.types) && c.Type.isInt() && side.IntN(3) == 0 {
			// A third of the integer calls take a newer type no larger
			// (the length was drawn for the old size); a float type gets
			// another op where the integer call drew a bitwise or logical
			// one.
			if t := confNewerTypes[side.IntN(len(confNewerTypes))]; t.size() <= c.Type.size() {
				c.Type = t
				if !t.isInt() && c.Op.IntOnly() {
					c.Op = Op(side.IntN(int(Prod) + 1))
				}
			}
		}
		if lim.every {
			drawNewerColl(kinds, &c, *g, max(1, slot/c.Type.size()), maxLen)
		}
		drawPreMul(pm, &c, *g)
		c.Steps = roundSteps(c, *g)
		s.Calls = append(s.Calls, c)
	}
	return s
}

// roundSteps bounds the number of times call c on g rounds a reduced
// element to a 16-bit type: once where one kernel (or the host) reduces
// every rank's element, Mean's division included (the direct, pipelined
// and host all-reduce, the rank-ordered reductions of deterministic mode
// and of ReduceScatter with the Direct strategy, ReduceScatterV, the host
// paths of types without kernels), else once per step of a ring or tree,
// at most ranks-1 along any element's path (every step merges two or more
// partial results), and for Mean once more: the last step rounds the sum,
// the scale then the quotient.
func roundSteps(c confCall, g confGroup) int {
	if g.Deterministic || g.noKernels(c.Type) || c.Coll == cReduceScatterV || c.Coll == cScan || c.Coll == cExscan {
		return 1
	}
	resolve := func(s Strategy) Strategy {
		if s == Auto {
			s = g.Strategy
		}
		return s
	}
	one := false
	switch c.Coll {
	case cAllReduce:
		oneKernel := func(s Strategy) bool { s = resolve(s); return s == Direct || s == Pipelined || s == Host }
		one = oneKernel(c.Strategy)
		if c.Path == pAsync || c.Path == pAsyncPair {
			// AllReduceAsync runs the group's strategy (AllReduceTensorAsync
			// the call's).
			one = one && oneKernel(Auto)
		}
	case cReduceScatter:
		one = resolve(Auto) == Direct
	}
	if one {
		return 1
	}
	if c.Op == Mean && g.Ranks > 1 {
		return g.Ranks
	}
	return max(1, g.Ranks-1)
}

// confLayout is the counts and offsets of a V collective on its ranks:
// rank i sends cnt[i][j] elements from sd[i][j] of its send to rank j,
// which stores them at rd[j][i] of its recv (rc[j][i] = cnt[i][j]); slen
// and rlen are each rank's send and recv lengths. AllGatherV,
// ReduceScatterV, GatherV and ScatterV pass counts and displs (the same on
// every rank; GatherV and ScatterV: used on the root only, and a non-root
// gets what the root does, in slen or rlen, or nothing with NilRecv).
type confLayout struct {
	cnt, sd, rd, rc [][]int
	slen, rlen      []int
	counts, displs  []int
}

// layout draws the layout of V call c on ranks ranks from its data seed:
// counts around c.N with zeros, ranges in a shuffled order with gaps, and
// sometimes overlapping send ranges (allowed for AllToAllV's send and
// ReduceScatterV's and ScatterV's ranges of send).
func (c confCall) layout(ranks int) *confLayout {
	rng := rand.New(rand.NewPCG(c.DataSeed, 0x6c61796f7574))
	count := func() int {
		switch rng.IntN(8) {
		case 0, 1:
			return 0
		case 2:
			return c.N
		case 3:
			return max(0, c.N+rng.IntN(3)-1)
		}
		return rng.IntN(c.N + 1)
	}
	// place returns offsets for ranges of lens and the length holding them.
	place := func(lens []int, overlap bool) ([]int, int) {
		displs := make([]int, len(lens))
		if overlap {
			span := 0
			for _, l := range lens {
				span = max(span, l)
			}
			span += rng.IntN(span/2 + 3)
			for j, l := range lens {
				displs[j] = rng.IntN(span - l + 1)
			}
			return displs, span
		}
		gap := func() int {
			if rng.IntN(8) == 0 {
				return rng.IntN(40)
			}
			return rng.IntN(3)
		}
		at := 0
		for _, j := range rng.Perm(len(lens)) {
			at += gap()
			displs[j] = at
			at += lens[j]
		}
		return displs, at + gap()
	}
	square := func() [][]int {
		m := make([][]int, ranks)
		for i := range m {
			m[i] = make([]int, ranks)
		}
		return m
	}
	l := &confLayout{cnt: square(), sd: square(), rd: square(), rc: square(), slen: make([]int, ranks), rlen: make([]int, ranks)}
	switch c.Coll {
	case cAllToAllV:
		for i := range l.cnt {
			for j := range l.cnt[i] {
				l.cnt[i][j] = count()
			}
			l.sd[i], l.slen[i] = place(l.cnt[i], rng.IntN(4) == 0)
		}
		for j := range l.rc {
			for i := range l.rc[j] {
				l.rc[j][i] = l.cnt[i][j]
			}
			l.rd[j], l.rlen[j] = place(l.rc[j], false)
		}
	case cAllGatherV, cReduceScatterV, cGatherV, cScatterV:
		// Ranges of recv (the gathers) or of send (ReduceScatterV and
		// ScatterV, sometimes overlapping).
		l.counts = make([]int, ranks)
		for j := range l.counts {
			l.counts[j] = count()
		}
		gathers := c.Coll == cAllGatherV || c.Coll == cGatherV
		var span int
		l.displs, span = place(l.counts, !gathers && rng.IntN(4) == 0)
		for i := range l.cnt {
			l.slen[i], l.rlen[i] = span, l.counts[i]
			if gathers {
				l.slen[i], l.rlen[i] = l.counts[i], span
			}
			// What rank i sends rank j: AllGatherV's ranks all theirs to
			// every rank, GatherV's to the root; ScatterV's root range j.
			for j := range l.cnt[i] {
				switch {
				case c.Coll == cAllGatherV || c.Coll == cGatherV && j == c.Root:
					l.cnt[i][j], l.rc[j][i], l.rd[j][i] = l.counts[i], l.counts[i], l.displs[i]
				case c.Coll == cScatterV && i == c.Root:
					l.cnt[i][j], l.sd[i][j], l.rc[j][i] = l.counts[j], l.displs[j], l.counts[j]
				}
			}
		}
	}
	return l
}

// lens returns the lengths of send and recv on rank r (nil buffers
// included: their length is what confInputs draws).
func (c confCall) lens(ranks, r int) (ls, lr int) {
	switch c.Coll {
	case cReduceScatter:
		return c.N * ranks, c.N
	case cAllGather, cGather:
		return c.N, c.N * ranks
	case cAllToAll:
		return c.N * ranks, c.N * ranks
	case cScatter:
		return c.N * ranks, c.N
	case cAllToAllV, cAllGatherV, cReduceScatterV, cGatherV, cScatterV:
		l := c.layout(ranks)
		return l.slen[r], l.rlen[r]
	}
	return c.N, c.N
}

// confInputs returns each rank's send data for call c on ranks ranks, as
// the bit patterns of c's element type.
func confInputs(c confCall, ranks int) [][]uint64 {
	ls := make([]int, ranks)
	for r := range ls {
		ls[r], _ = c.lens(ranks, r)
	}
	switch {
	case c.Input == inSubnormal:
		return subnormalInputs(c, ls)
	case c.Type.isInt():
		return intInputs(c, ls)
	case c.Type.is16():
		return inputs16(c, ls)
	case c.Type.is8():
		return inputs8(c, ls)
	}
	in := floatInputs(c, ls)
	out := make([][]uint64, ranks)
	for r := range in {
		out[r] = make([]uint64, len(in[r]))
		for i, v := range in[r] {
			out[r][i] = c.Type.encode(v)
		}
	}
	return out
}

// floatInputs returns each rank's input for f32 and f64 (as float64
// values the element type holds exactly).
func floatInputs(c confCall, ls []int) [][]float64 {
	rng := rand.New(rand.NewPCG(c.DataSeed, 0x696e70))
	prodSet := [...]float64{1, 2, -1, 0.5, 1, -2, 0.25, 4, -0.5, 1}
	in := make([][]float64, len(ls))
	for r := range in {
		in[r] = make([]float64, ls[r])
		for i := range in[r] {
			var v float64
			switch c.Input {
			case inExactInt, inSpecial:
				if c.Op == Prod && c.Coll.reduces() {
					v = prodSet[rng.IntN(len(prodSet))]
				} else {
					m := int64(1) << c.Mag
					v = float64(rng.Int64N(2*m+1) - m)
				}
				if c.Input == inSpecial && rng.IntN(48) == 0 {
					v = [...]float64{math.NaN(), math.Inf(1), math.Inf(-1)}[rng.IntN(3)]
				}
			case inExactF64:
				if c.Op == Prod {
					v = prodSet[rng.IntN(len(prodSet))]
				} else {
					v = float64(rng.IntN(4097)-2048) + float64(1+rng.IntN(1023))*0x1p-30
				}
			case inRandom:
				if c.Op == Prod {
					v = math.Exp2(rng.Float64()*2 - 1)
					if rng.IntN(2) == 0 {
						v = -v
					}
				} else {
					v = rng.NormFloat64() * math.Exp2(float64(rng.IntN(30)-10))
				}
			}
			if !c.F64 {
				v = float64(float32(v))
			}
			in[r][i] = v
		}
	}
	return in
}

// exactInputs reports whether every all-reduce result of c is exact in the
// element type (so it must match the reference bit for bit).
func (c confCall) exact() bool { return c.Input != inRandom }

// confRef is the reference of a reduction: the result and, per element, the
// sum of magnitudes of the terms (for the error bound of inexact sums).
func confRef(in [][]float64, op Op) (ref, abs []float64) {
	ref = refReduce(in, op)
	if op == Mean {
		ref = refReduce(in, Sum) // divided when checked
	}
	abs = make([]float64, len(ref))
	for r := range in {
		for i, v := range in[r] {
			abs[i] += math.Abs(v)
		}
	}
	return ref, abs
}

// checkReduced compares got[i] with the reference of op over ranks ranks.
// It returns the kind of failure ("" if none) and a description of the first
// few wrong elements.
func checkReduced[T Float](got []T, ref, abs []float64, op Op, ranks int, exact bool) (kind, desc string) {
	var z T
	f64 := unsafe.Sizeof(z) == 8
	// u: the unit roundoff of the element type; ru: of the float64
	// reference, which rounds too (as much as the result for f64).
	u, ru := 0x1p-24, 0x1p-53
	if f64 {
		u = 0x1p-53
	}
	var bad []string
	wrong, unwritten, meanUlp := 0, 0, 0
	for i := range ref {
		g := float64(got[i])
		w := ref[i]
		ok := true
		why := ""
		switch {
		case math.IsNaN(w):
			ok = math.IsNaN(g)
		case op == Mean && math.IsInf(w, 0):
			ok = g == w
		case op == Mean && exact:
			// The sum is exact: the result is within 1 ulp of the exact mean.
			var d float64
			ok, d = withinOneUlpOfQuotient(g, w, ranks, f64)
			why = fmt.Sprintf("(%.3g ulp from the exact mean)", d)
		case op == Mean:
			bound := (gamma(ranks-1, u)+gamma(ranks-1, ru))*abs[i]/float64(ranks) + 3*u*math.Abs(w)/float64(ranks)
			ok = math.Abs(g-w/float64(ranks)) <= bound
			why = fmt.Sprintf("bound %g", bound)
		case exact || op == Max || op == Min || math.IsInf(w, 0):
			// Exact in the element type: bit for bit (max and min always).
			var wt T = T(w)
			ok = math.Float64bits(float64(wt)) == math.Float64bits(g)
		case op == Prod:
			bound := (gamma(ranks-1, u) + gamma(ranks-1, ru)) * math.Abs(w)
			ok = math.Abs(g-w) <= bound
			why = fmt.Sprintf("bound %g", bound)
		default: // inexact sum
			bound := (gamma(ranks-1, u)+gamma(ranks-1, ru))*abs[i] + u*math.Abs(w)
			ok = math.Abs(g-w) <= bound
			why = fmt.Sprintf("bound %g", bound)
		}
		if !ok {
			if g == confPoison {
				unwritten++
			} else if op == Mean && exact && !math.IsNaN(w) && !math.IsInf(w, 0) {
				if _, d := withinOneUlpOfQuotient(g, w, ranks, f64); d < 2 {
					meanUlp++
				}
			}
			if wrong < 4 {
				want := w
				if op == Mean {
					want = w / float64(ranks)
				}
				bad = append(bad, fmt.Sprintf("element %d: got %v, want %v %s", i, g, want, why))
			}
			wrong++
		}
	}
	return failKind(wrong, unwritten, meanUlp, len(ref), bad)
}

// errKind names what an error is: the sentinels it matches and its type.
func errKind(err error) string {
	if p, ok := err.(*confPanic); ok {
		return fmt.Sprintf("panic: %v", p.val)
	}
	var names []string
	for _, s := range []struct {
		name string
		err  error
	}{
		{"ErrInvalidConfig", ErrInvalidConfig}, {"ErrInvalidArgument", ErrInvalidArgument}, {"ErrMismatch", ErrMismatch},
		{"ErrTimeout", ErrTimeout}, {"ErrGroupBroken", ErrGroupBroken}, {"ErrClosed", ErrClosed},
		{"ErrConcurrentUse", ErrConcurrentUse}, {"ErrBackendUnavailable", ErrBackendUnavailable},
		{"ErrUnsupported", ErrUnsupported}, {"ErrDeviceLost", ErrDeviceLost}, {"ErrOutOfMemory", backend.ErrOutOfMemory},
		{"context.Canceled", context.Canceled}, {"context.DeadlineExceeded", context.DeadlineExceeded},
	} {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	if len(names) == 0 {
		names = append(names, "no sentinel")
	}
	inner := err
	for {
		var e *Error
		if errors.As(inner, &e) && e.Err != nil && e != inner {
			inner = e.Err
			continue
		}
		if e2, ok := inner.(*Error); ok && e2.Err != nil {
			inner = e2.Err
			continue
		}
		break
	}
	return fmt.Sprintf("%s (%T)", strings.Join(names, ","), inner)
}

// gamma is the classic bound on k roundings: k*u/(1-k*u).
func gamma(k int, u float64) float64 {
	return float64(k) * u / (1 - float64(k)*u) * 1.0001
}

// withinOneUlpOfQuotient reports whether g is within one ulp (of the element
// type, at the exact value) of sum/n, computed exactly, and the distance in
// ulps.
func withinOneUlpOfQuotient(g, sum float64, n int, f64 bool) (bool, float64) {
	exact := new(big.Float).SetPrec(256).Quo(new(big.Float).SetPrec(256).SetFloat64(sum), new(big.Float).SetPrec(256).SetInt64(int64(n)))
	d := new(big.Float).SetPrec(256).Sub(new(big.Float).SetPrec(256).SetFloat64(g), exact)
	d.Abs(d)
	ex, _ := exact.Float64()
	if ex == 0 {
		if g == 0 {
			return true, 0
		}
		return false, math.Inf(1)
	}
	prec := 24
	minExp := -126
	if f64 {
		prec, minExp = 53, -1022
	}
	_, e := math.Frexp(math.Abs(ex)) // |ex| in [2^(e-1), 2^e)
	ulp := math.Ldexp(1, max(e-1, minExp)-(prec-1))
	df, _ := d.Float64()
	return df <= ulp, df / ulp
}

// confPoison is what an output slot holds before a call: no result of the
// drawn inputs can take this value.
const confPoison = -3.0e9

// confPanic is a panic recovered on a rank goroutine.
type confPanic struct {
	val   any
	stack []byte
}

func (p *confPanic) Error() string { return fmt.Sprintf("panic: %v\n%s", p.val, p.stack) }

// runRanksWithin runs f on every rank, each on its own goroutine, recovering
// panics. If the ranks do not all return within limit, it returns the
// stacks of every goroutine of the process instead.
func runRanksWithin(g *Group, limit time.Duration, f func(c *Comm) error) (errs []error, hung string) {
	errs = make([]error, g.Size())
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < g.Size(); r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs[r] = &confPanic{val: p, stack: debug.Stack()}
				}
			}()
			errs[r] = f(g.Comm(r))
		}(r)
	}
	go func() { wg.Wait(); close(done) }()
	tm := time.NewTimer(limit)
	defer tm.Stop()
	select {
	case <-done:
		return errs, ""
	case <-tm.C:
		return nil, allStacks()
	}
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// confBufs are one rank's buffers for one call.
type confBufs[T Elem] struct {
	send, recv []T
	hs, hr     *HostBuffer[T]
	tensor     *Tensor[T] // AllReduceTensor, BroadcastTensor: in place
	// The other tensor forms: send and recv tensors made from send and
	// recv (nil where they are nil; in place, one a view of the other:
	// tensorsIn), downloaded into them after the call.
	tsend, trecv *Tensor[T]
	keep         []T // the send buffer before an out-of-place call
	// async+sync: the asynchronous call's buffers, set up as pAsync's
	// (asyncPart); AllReduce's extra is its send (and recv).
	async *confBufs[T]
	extra []T
}

func (b *confBufs[T]) close() {
	if b.async != nil {
		b.async.close()
	}
	if b.hs != nil {
		b.hs.Close()
	}
	if b.hr != nil {
		b.hr.Close()
	}
	for _, t := range []*Tensor[T]{b.tensor, b.tsend, b.trecv} {
		if t != nil {
			t.Close()
		}
	}
}

// confOutcome is what one call did on every rank.
type confOutcome struct {
	errs     []error
	hung     string
	failures []confFail
	// rejected: every rank failed as the call must (wantErr).
	rejected bool
}

// confFail is one failed check: its kind (for the summary) and the details.
type confFail struct{ kind, msg string }

// inPlace reports whether c's send and recv share memory, in the
// collective's in-place layout (setupOwnBufs): on the in-place paths, and
// in the single asynchronous call unless it is OutOfPlace; a broadcast
// always; AllReduceTensor on every tensor path (one tensor).
func (c confCall) inPlace() bool {
	switch {
	case c.Coll == cBroadcast:
		return true
	case c.Path == pTensor || c.Path == pTensorAsyncPair:
		return c.Coll == cAllReduce
	case c.Path == pAsync || c.Path == pTensorAsync:
		return c.Coll.inPlaceLayout() && !c.OutOfPlace
	}
	return c.Path.inPlace() && c.Coll.inPlaceLayout()
}

// allReduceOnRecv reports whether c runs AllReduceAsync out of place:
// on recv, holding a copy of send (confForms), as the second call of an
// async+sync AllReduce waited for with WaitAll or WaitAny.
func (c confCall) allReduceOnRecv() bool {
	return c.Coll == cAllReduce && c.Path == pAsyncPair && (c.Wait == wWaitAll || c.Wait == wWaitAny)
}

// asyncPart is the asynchronous call of an async+sync call c, in place.
func (c confCall) asyncPart() confCall {
	if c.Path.tensor() {
		c.Path = pTensorAsync
	} else {
		c.Path = pAsync
	}
	c.OutOfPlace = false
	return c
}

// setupBufs fills rank r's buffers for c from in (send) and the poison
// (recv), and an async+sync call's asynchronous buffers (confBufs.async)
// likewise.
func setupBufs[T Elem](c confCall, ranks, r int, in []uint64) (*confBufs[T], error) {
	b, err := setupOwnBufs[T](c, ranks, r, in)
	if err != nil || !c.Path.pair() || c.Coll == cShift || c.Coll == cPermute {
		return b, err
	}
	if b.async, err = setupOwnBufs[T](c.asyncPart(), ranks, r, in); err != nil {
		return b, err
	}
	if c.Coll == cAllReduce {
		b.extra = b.async.send
	}
	return b, nil
}

// setupOwnBufs fills rank r's buffers for c. In place, recv aliases send
// in the layout the collective documents: AllReduce, Broadcast, Reduce and
// AllToAll pass recv == send; AllToAllV too, one buffer long enough for
// both layouts (the input, then the poison); ReduceScatter's recv is rank
// r's chunk of send, ReduceScatterV's its range; AllGather's send is rank
// r's chunk of recv, AllGatherV's its range; on the root, Scatter's and
// ScatterV's recv is its chunk or range of send, Gather's and GatherV's
// send its chunk or range of recv.
func setupOwnBufs[T Elem](c confCall, ranks, r int, in []uint64) (*confBufs[T], error) {
	b := &confBufs[T]{}
	ls, lr := c.lens(ranks, r)
	alloc := func(n int, pinned bool) ([]T, *HostBuffer[T], error) {
		if pinned {
			h, err := NewHostBuffer[T](n)
			if err != nil {
				return nil, nil, err
			}
			return h.Data, h, nil
		}
		return make([]T, n), nil, nil
	}
	var err error
	fill := func(dst []T, src []uint64) { setBits(dst, src, 0) }
	poison := func(dst []T) { setBits(dst, nil, c.Type.poison()) }
	root := r == c.Root
	inPlace := c.inPlace()
	// Rank r's block of the larger buffer, in place.
	lo, hi := r*c.N, (r+1)*c.N
	if c.Coll.vCounts() && c.Coll != cAllToAllV {
		l := c.layout(ranks)
		lo, hi = l.displs[r], l.displs[r]+l.counts[r]
	}
	if c.Coll.rooted() && c.Coll != cBroadcast && c.Coll != cReduce {
		inPlace = inPlace && root // in place on the root only
	}
	switch {
	case inPlace && c.Coll == cAllToAllV:
		if b.send, b.hs, err = alloc(max(ls, lr), c.Path.sendPinned()); err != nil {
			return b, err
		}
		poison(b.send)
		fill(b.send[:ls], in)
		b.recv = b.send
		return b, nil
	case inPlace && (c.Coll == cAllGather || c.Coll == cGather || c.Coll == cAllGatherV || c.Coll == cGatherV):
		if b.recv, b.hr, err = alloc(lr, c.Path.recvPinned()); err != nil {
			return b, err
		}
		poison(b.recv)
		b.send = b.recv[lo:hi]
		fill(b.send, in)
		return b, nil
	case (c.Coll == cScatter || c.Coll == cScatterV || c.Coll == cBroadcastInto) && c.NilRecv && !root:
		// The send of a non-root is not used: nil.
		if b.recv, b.hr, err = alloc(lr, c.Path.recvPinned()); err != nil {
			return b, err
		}
		poison(b.recv)
		return b, nil
	}
	if b.send, b.hs, err = alloc(ls, c.Path.sendPinned()); err != nil {
		return b, err
	}
	fill(b.send, in)
	switch {
	case inPlace && (c.Coll == cReduceScatter || c.Coll == cScatter || c.Coll == cReduceScatterV || c.Coll == cScatterV):
		b.recv = b.send[lo:hi]
		return b, nil
	case inPlace:
		b.recv = b.send
		return b, nil
	case (c.Coll == cReduce || c.Coll == cGather || c.Coll == cGatherV) && !root && c.NilRecv:
		b.recv = nil
	default:
		if b.recv, b.hr, err = alloc(lr, c.Path.recvPinned()); err != nil {
			return b, err
		}
		poison(b.recv)
	}
	b.keep = append([]T(nil), b.send...)
	return b, nil
}

// callRank runs call c on comm cm with rank r's buffers.
func callRank[T Elem](ctx context.Context, cm *Comm, c confCall, b *confBufs[T]) error {
	op, made, err := preMulOp(cm, c)
	if err != nil {
		return err
	}
	if made {
		c.Op = op
		defer cm.DestroyOp(op)
	}
	switch {
	case c.Coll == cShift || c.Coll == cPermute:
		return callShift(ctx, cm, c, b)
	case c.Path.tensor():
		return callTensors(ctx, cm, c, b)
	case c.Path.async():
		return callAsync(ctx, cm, c, b)
	}
	run, _ := confForms(cm, c, b)
	return run(ctx)
}

// confForms returns collective c on rank cm's buffers b (not send/recv
// shifts): its synchronous form and its asynchronous one (XxxAsync).
func confForms[T Elem](cm *Comm, c confCall, b *confBufs[T]) (run func(context.Context) error, start func(context.Context) Work) {
	n, r := cm.Group().Size(), cm.Rank()
	var l *confLayout
	var counts, displs []int
	if c.Coll.vCounts() {
		l = c.layout(n)
		counts, displs = l.counts, l.displs
		if c.Coll.rooted() && r != c.Root && c.NilRecv {
			counts, displs = nil, nil // used on the root only
		}
	}
	switch c.Coll {
	case cAllReduce:
		return func(ctx context.Context) error {
				if c.Strategy == Auto && c.DataSeed%4 == 1 && (c.Path == pInPlace || c.Path == pPinnedInPlace) {
					// A Batch of the one all-reduce (in place, the
					// group's strategy, as Auto).
					bt := cm.Batch()
					BatchAllReduce(bt, b.send, c.Op)
					return bt.Run(ctx)
				}
				if c.Strategy == Auto && c.DataSeed%2 == 0 {
					switch c.Path {
					case pInPlace, pPinnedInPlace:
						return AllReduce(ctx, cm, b.send, c.Op)
					case pSlice, pPinned:
						return AllReduceInto(ctx, cm, b.send, b.recv, c.Op)
					}
				}
				return AllReduceWith(ctx, cm, b.send, b.recv, c.Op, c.Strategy)
			}, func(ctx context.Context) Work {
				// AllReduceAsync is in place: out of place, on recv
				// holding a copy of send.
				data := b.send
				if c.allReduceOnRecv() {
					data = b.recv
					copy(data, b.send)
				}
				return AllReduceAsync(ctx, cm, data, c.Op)
			}
	case cReduceScatter:
		return func(ctx context.Context) error { return ReduceScatter(ctx, cm, b.send, b.recv, c.Op) },
			func(ctx context.Context) Work { return ReduceScatterAsync(ctx, cm, b.send, b.recv, c.Op) }
	case cAllGather:
		return func(ctx context.Context) error { return AllGather(ctx, cm, b.send, b.recv) },
			func(ctx context.Context) Work { return AllGatherAsync(ctx, cm, b.send, b.recv) }
	case cBroadcast:
		return func(ctx context.Context) error { return Broadcast(ctx, cm, b.send, c.Root) },
			func(ctx context.Context) Work { return BroadcastAsync(ctx, cm, b.send, c.Root) }
	case cReduce:
		return func(ctx context.Context) error { return Reduce(ctx, cm, b.send, b.recv, c.Op, c.Root) },
			func(ctx context.Context) Work { return ReduceAsync(ctx, cm, b.send, b.recv, c.Op, c.Root) }
	case cAllToAll:
		return func(ctx context.Context) error { return AllToAll(ctx, cm, b.send, b.recv) },
			func(ctx context.Context) Work { return AllToAllAsync(ctx, cm, b.send, b.recv) }
	case cGather:
		return func(ctx context.Context) error { return Gather(ctx, cm, b.send, b.recv, c.Root) },
			func(ctx context.Context) Work { return GatherAsync(ctx, cm, b.send, b.recv, c.Root) }
	case cScatter:
		return func(ctx context.Context) error { return Scatter(ctx, cm, b.send, b.recv, c.Root) },
			func(ctx context.Context) Work { return ScatterAsync(ctx, cm, b.send, b.recv, c.Root) }
	case cAllToAllV:
		return func(ctx context.Context) error {
				return AllToAllV(ctx, cm, b.send, l.cnt[r], l.sd[r], b.recv, l.rc[r], l.rd[r])
			}, func(ctx context.Context) Work {
				return AllToAllVAsync(ctx, cm, b.send, l.cnt[r], l.sd[r], b.recv, l.rc[r], l.rd[r])
			}
	case cAllGatherV:
		return func(ctx context.Context) error { return AllGatherV(ctx, cm, b.send, b.recv, counts, displs) },
			func(ctx context.Context) Work { return AllGatherVAsync(ctx, cm, b.send, b.recv, counts, displs) }
	case cReduceScatterV:
		return func(ctx context.Context) error { return ReduceScatterV(ctx, cm, b.send, b.recv, counts, displs, c.Op) },
			func(ctx context.Context) Work {
				return ReduceScatterVAsync(ctx, cm, b.send, b.recv, counts, displs, c.Op)
			}
	case cGatherV:
		return func(ctx context.Context) error { return GatherV(ctx, cm, b.send, b.recv, counts, displs, c.Root) },
			func(ctx context.Context) Work { return GatherVAsync(ctx, cm, b.send, b.recv, counts, displs, c.Root) }
	case cScatterV:
		return func(ctx context.Context) error { return ScatterV(ctx, cm, b.send, b.recv, counts, displs, c.Root) },
			func(ctx context.Context) Work { return ScatterVAsync(ctx, cm, b.send, b.recv, counts, displs, c.Root) }
	case cScan:
		return func(ctx context.Context) error { return Scan(ctx, cm, b.send, b.recv, c.Op) },
			func(ctx context.Context) Work { return ScanAsync(ctx, cm, b.send, b.recv, c.Op) }
	case cExscan:
		return func(ctx context.Context) error { return Exscan(ctx, cm, b.send, b.recv, c.Op) },
			func(ctx context.Context) Work { return ExscanAsync(ctx, cm, b.send, b.recv, c.Op) }
	case cBroadcastInto:
		return func(ctx context.Context) error { return BroadcastInto(ctx, cm, b.send, b.recv, c.Root) },
			func(ctx context.Context) Work { return BroadcastIntoAsync(ctx, cm, b.send, b.recv, c.Root) }
	}
	err := fmt.Errorf("no call of %s", c.Coll)
	return func(context.Context) error { return err }, func(context.Context) Work { return failedWork(err) }
}

// callTensors runs c on a tensor path: the tensors are made from the
// buffers (tensorsIn; an async+sync call's asynchronous buffers too), the
// tensor form runs (confTensorForms; the asynchronous ones through
// callAsync), and the tensors are downloaded into the buffers after the
// call, send too, to check that it was written only where recv overlaps
// it.
func callTensors[T Elem](ctx context.Context, cm *Comm, c confCall, b *confBufs[T]) error {
	for _, x := range []*confBufs[T]{b, b.async} {
		if x == nil {
			continue
		}
		if err := tensorsIn(cm, c, x); err != nil {
			return err
		}
	}
	var err error
	if c.Path.async() {
		err = callAsync(ctx, cm, c, b)
	} else {
		run, _ := confTensorForms(cm, c, b)
		err = run(ctx)
	}
	for _, x := range []*confBufs[T]{b.async, b} {
		if x == nil {
			continue
		}
		// After a failure too, unless the device is lost: a failed call's
		// tensors are checked as its slices are.
		if err != nil && errors.Is(err, ErrDeviceLost) {
			break
		}
		if oerr := tensorsOut(cm, x); oerr != nil && err == nil {
			return oerr
		}
	}
	return err
}

// confTensorForms returns collective c on rank cm's tensors (tensorsIn): its
// synchronous tensor form and its asynchronous one (XxxTensorAsync).
func confTensorForms[T Elem](cm *Comm, c confCall, b *confBufs[T]) (run func(context.Context) error, start func(context.Context) Work) {
	n, r := cm.Group().Size(), cm.Rank()
	var l *confLayout
	if c.Coll.vCounts() {
		l = c.layout(n)
	}
	s, rv := b.tsend, b.trecv
	switch c.Coll {
	case cAllReduce:
		return func(ctx context.Context) error { return AllReduceTensor(ctx, cm, b.tensor, c.Op, c.Strategy) },
			func(ctx context.Context) Work { return AllReduceTensorAsync(ctx, cm, b.tensor, c.Op, c.Strategy) }
	case cBroadcast:
		return func(ctx context.Context) error { return BroadcastTensor(ctx, cm, b.tensor, c.Root) },
			func(ctx context.Context) Work { return BroadcastTensorAsync(ctx, cm, b.tensor, c.Root) }
	case cBroadcastInto:
		return func(ctx context.Context) error { return BroadcastIntoTensor(ctx, cm, s, rv, c.Root) },
			func(ctx context.Context) Work { return BroadcastIntoTensorAsync(ctx, cm, s, rv, c.Root) }
	case cReduceScatter:
		return func(ctx context.Context) error { return ReduceScatterTensor(ctx, cm, s, rv, c.Op) },
			func(ctx context.Context) Work { return ReduceScatterTensorAsync(ctx, cm, s, rv, c.Op) }
	case cAllGather:
		return func(ctx context.Context) error { return AllGatherTensor(ctx, cm, s, rv) },
			func(ctx context.Context) Work { return AllGatherTensorAsync(ctx, cm, s, rv) }
	case cReduce:
		return func(ctx context.Context) error { return ReduceTensor(ctx, cm, s, rv, c.Op, c.Root) },
			func(ctx context.Context) Work { return ReduceTensorAsync(ctx, cm, s, rv, c.Op, c.Root) }
	case cAllToAll:
		return func(ctx context.Context) error { return AllToAllTensor(ctx, cm, s, rv) },
			func(ctx context.Context) Work { return AllToAllTensorAsync(ctx, cm, s, rv) }
	case cGather:
		return func(ctx context.Context) error { return GatherTensor(ctx, cm, s, rv, c.Root) },
			func(ctx context.Context) Work { return GatherTensorAsync(ctx, cm, s, rv, c.Root) }
	case cScatter:
		return func(ctx context.Context) error { return ScatterTensor(ctx, cm, s, rv, c.Root) },
			func(ctx context.Context) Work { return ScatterTensorAsync(ctx, cm, s, rv, c.Root) }
	case cAllToAllV:
		return func(ctx context.Context) error {
				return AllToAllVTensor(ctx, cm, s, l.cnt[r], l.sd[r], rv, l.rc[r], l.rd[r])
			}, func(ctx context.Context) Work {
				return AllToAllVTensorAsync(ctx, cm, s, l.cnt[r], l.sd[r], rv, l.rc[r], l.rd[r])
			}
	case cAllGatherV:
		return func(ctx context.Context) error { return AllGatherVTensor(ctx, cm, s, rv, l.counts, l.displs) },
			func(ctx context.Context) Work { return AllGatherVTensorAsync(ctx, cm, s, rv, l.counts, l.displs) }
	case cReduceScatterV:
		return func(ctx context.Context) error { return ReduceScatterVTensor(ctx, cm, s, rv, l.counts, l.displs, c.Op) },
			func(ctx context.Context) Work {
				return ReduceScatterVTensorAsync(ctx, cm, s, rv, l.counts, l.displs, c.Op)
			}
	case cScan:
		return func(ctx context.Context) error { return ScanTensor(ctx, cm, s, rv, c.Op) },
			func(ctx context.Context) Work { return ScanTensorAsync(ctx, cm, s, rv, c.Op) }
	case cExscan:
		return func(ctx context.Context) error { return ExscanTensor(ctx, cm, s, rv, c.Op) },
			func(ctx context.Context) Work { return ExscanTensorAsync(ctx, cm, s, rv, c.Op) }
	}
	err := fmt.Errorf("no tensor form of %s", c.Coll)
	return func(context.Context) error { return err }, func(context.Context) Work { return failedWork(err) }
}

// setupError is a failure of the tensor set-up around a collective
// (NewTensor, WrapTensor, Upload, Download), not of the collective itself.
type setupError struct{ err error }

func (e *setupError) Error() string { return "tensor set-up: " + e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// tensorsIn makes rank cm's tensors for c from its buffers b: AllReduce's
// and Broadcast's one tensor from send; else a send and a recv tensor (nil
// where the buffer is nil) or, where one buffer lies in the other (in
// place), a tensor of the outer and a WrapTensor view of it at the inner's
// offset: the same layout by buffer and offset. send == recv is the same
// tensor twice, or (data seeds with bit 1 set) a view of all of it. On
// failure it aborts the group, as Group.Run does, so the peers do not wait
// for the rank.
func tensorsIn[T Elem](cm *Comm, c confCall, b *confBufs[T]) (err error) {
	if !c.Coll.twoBuffers() {
		b.tensor, err = tensorFrom(cm, b.send)
		return err
	}
	outer, inner, whole, n := &b.tsend, &b.trecv, b.send, len(b.recv)
	at := offsetIn(b.send, b.recv)
	if at < 0 {
		outer, inner, whole, n = &b.trecv, &b.tsend, b.recv, len(b.send)
		at = offsetIn(b.recv, b.send)
	}
	if at < 0 {
		if b.tsend, err = tensorFrom(cm, b.send); err == nil {
			b.trecv, err = tensorFrom(cm, b.recv)
		}
		return err
	}
	if *outer, err = tensorFrom(cm, whole); err != nil {
		return err
	}
	if at == 0 && n == len(whole) && c.DataSeed&2 == 0 {
		*inner = *outer
		return nil
	}
	buf, off := (*outer).Buffer()
	if *inner, err = WrapTensor[T](cm, buf, off+at*dtypeOf[T]().Size(), n); err != nil {
		cm.Group().Abort(err)
		return &setupError{err}
	}
	return nil
}

// offsetIn returns the element offset of inner in outer, -1 where inner
// is empty or not within outer.
func offsetIn[T Elem](outer, inner []T) int {
	if len(inner) == 0 || len(outer) < len(inner) {
		return -1
	}
	es := unsafe.Sizeof(inner[0])
	po, pi := uintptr(unsafe.Pointer(unsafe.SliceData(outer))), uintptr(unsafe.Pointer(unsafe.SliceData(inner)))
	if pi < po || pi+uintptr(len(inner))*es > po+uintptr(len(outer))*es {
		return -1
	}
	return int((pi - po) / es)
}

// tensorsOut downloads rank cm's tensors into its buffers b (recv, then
// send, which holds it where in place).
func tensorsOut[T Elem](cm *Comm, b *confBufs[T]) error {
	if b.tensor != nil {
		return tensorOut(cm, b.tensor, b.send)
	}
	if b.trecv != nil {
		if err := tensorOut(cm, b.trecv, b.recv); err != nil {
			return err
		}
	}
	if b.tsend != nil {
		return tensorOut(cm, b.tsend, b.send)
	}
	return nil
}

// tensorFrom returns a tensor of rank cm holding src (nil for nil). On
// failure it aborts the group.
func tensorFrom[T Elem](cm *Comm, src []T) (*Tensor[T], error) {
	if src == nil {
		return nil, nil
	}
	t, err := NewTensor[T](cm, len(src))
	if err == nil {
		err = t.Upload(src)
	}
	if err != nil {
		cm.Group().Abort(err)
		return t, &setupError{err}
	}
	return t, nil
}

func tensorOut[T Elem](cm *Comm, t *Tensor[T], dst []T) error {
	if err := t.Download(dst); err != nil {
		cm.Group().Abort(err)
		return &setupError{err}
	}
	return nil
}

// unsupportedOK reports whether the call may fail with ErrUnsupported on
// every rank: f64 on devices without f64 kernels, where no exact host path
// is promised (tensors; reductions other than the slice all-reduce). The
// fault-injection test allows it; TestConformance requires exactly the
// failures of wantErr.
func (c confCall) unsupportedOK(g confGroup) bool {
	if !c.F64 || !g.DisableFloat64 {
		return false
	}
	return c.Path.tensor() || (c.Coll != cAllReduce && c.Coll != cAllGather && c.Coll != cBroadcast)
}

// wantErr is the error every rank's call must fail with, nil for none:
// Mean in Scan and Exscan (of any type), and a bitwise or logical op of a
// floating-point type, is an invalid argument (ops are checked first);
// an all-reduce of device tensors of a type some device has no kernels for
// is unsupported (every other call has a host path for it).
func (c confCall) wantErr(g confGroup) error {
	switch {
	case c.Op == Mean && (c.Coll == cScan || c.Coll == cExscan):
		return ErrInvalidArgument
	case !c.Type.isInt() && c.Op.IntOnly() && c.Coll.reduces():
		return ErrInvalidArgument
	case c.Coll == cAllReduce && c.Path.tensor() && g.noKernels(c.Type):
		return ErrUnsupported
	}
	return nil
}

// setupCall draws the inputs of c and sets up every rank's buffers.
func setupCall[T Elem](c confCall, ranks int) ([][]uint64, []*confBufs[T], error) {
	in := confInputs(c, ranks)
	bufs := make([]*confBufs[T], ranks)
	for r := range bufs {
		var err error
		if bufs[r], err = setupBufs[T](c, ranks, r, in[r]); err != nil {
			return in, bufs, fmt.Errorf("setting up rank %d's buffers: %w", r, err)
		}
	}
	return in, bufs, nil
}

func closeBufs[T Elem](bufs []*confBufs[T]) {
	for _, b := range bufs {
		if b != nil {
			b.close()
		}
	}
}

// runConfCall runs call c of session s on g and checks it.
func runConfCall[T Elem](g *Group, s *confSession, c confCall, limit time.Duration) confOutcome {
	ranks := g.Size()
	var out confOutcome
	fail := func(kind, format string, a ...any) {
		out.failures = append(out.failures, confFail{kind, fmt.Sprintf(format, a...)})
	}
	in, bufs, err := setupCall[T](c, ranks)
	defer func() {
		if out.hung == "" {
			closeBufs(bufs)
		}
	}()
	if err != nil {
		fail("setup", "%v", err)
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out.errs, out.hung = runRanksWithin(g, limit+10*time.Second, func(cm *Comm) error {
		return callRank(ctx, cm, c, bufs[cm.Rank()])
	})
	if out.hung != "" {
		fail("hang", "hang: the ranks did not return within %v; goroutines:\n%s", limit+10*time.Second, out.hung)
		return out
	}
	want := c.wantErr(s.G)
	for r, err := range out.errs {
		switch {
		case err == nil && want != nil:
			fail("no error, want "+sentinelName(want), "rank %d succeeded; want %s on every rank", r, sentinelName(want))
		case err != nil && want == nil:
			fail("error "+errKind(err), "rank %d: %v", r, err)
		case err != nil && !errors.Is(err, want):
			fail("error "+errKind(err)+", want "+sentinelName(want), "rank %d: %v; want %s", r, err, sentinelName(want))
		}
	}
	if len(out.failures) > 0 {
		return out
	}
	if want != nil {
		// Rejected before any data moved: the buffers are as they were
		// and the group is intact.
		out.rejected = true
		out.failures = append(out.failures, checkUntouched(c, in, bufs)...)
		if err := g.Err(); err != nil {
			fail("group broken by a rejected call", "after a call every rank rejected with %s, the group is broken: %v", sentinelName(want), err)
		}
		return out
	}
	out.failures = append(out.failures, checkResults(c, in, bufs, nil)...)
	return out
}

// sentinelName names a sentinel error.
func sentinelName(err error) string {
	switch err {
	case ErrInvalidArgument:
		return "ErrInvalidArgument"
	case ErrUnsupported:
		return "ErrUnsupported"
	}
	return err.Error()
}

// checkUntouched checks the buffers of a rejected call (or of a rank whose
// context ended, that says nothing of its buffers): every send still
// holds the input, every recv apart from it still the poison.
func checkUntouched[T Elem](c confCall, in [][]uint64, bufs []*confBufs[T]) []confFail {
	var fails []confFail
	for r, b := range bufs {
		if b.send != nil && !equalBits(elemBits(b.send), in[r]) {
			fails = append(fails, confFail{"rejected or cancelled call wrote its buffers", fmt.Sprintf("rank %d: the send buffer of a rejected or cancelled call changed", r)})
		}
		if b.extra != nil && !equalBits(elemBits(b.extra), in[r]) {
			fails = append(fails, confFail{"rejected or cancelled call wrote its buffers", fmt.Sprintf("rank %d: the asynchronous buffer of a rejected or cancelled call changed", r)})
		}
		if b.recv == nil || c.inPlace() {
			continue
		}
		if c.allReduceOnRecv() {
			// The test copied the input there.
			if !equalBits(elemBits(b.recv), in[r]) {
				fails = append(fails, confFail{"rejected or cancelled call wrote its buffers", fmt.Sprintf("rank %d: the recv of a rejected AllReduceAsync changed", r)})
			}
			continue
		}
		for i, v := range elemBits(b.recv) {
			if v != c.Type.poison() {
				fails = append(fails, confFail{"rejected or cancelled call wrote its buffers", fmt.Sprintf("rank %d: recv[%d] of a rejected or cancelled call was written (%s)", r, i, c.Type.format(v))})
				break
			}
		}
	}
	if ab := asyncBufs(c, bufs); ab != nil {
		fails = append(fails, checkUntouched(c.asyncPart(), in, ab)...)
	}
	return fails
}

func equalBits(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// diffBits describes the first element where got and want differ, "" if
// none.
func diffBits(t confType, got, want []uint64) string {
	if len(got) != len(want) {
		return fmt.Sprintf("lengths %d and %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			note := ""
			if got[i] == t.poison() {
				note = " (never written)"
			}
			return fmt.Sprintf("element %d: %s vs %s%s", i, t.format(got[i]), t.format(want[i]), note)
		}
	}
	return ""
}

// checkResults checks the buffers of the ranks whose call succeeded (ok[r],
// or every rank when ok is nil) against the reference of inputs in.
func checkResults[T Elem](c confCall, in [][]uint64, bufs []*confBufs[T], ok []bool) []confFail {
	ranks := len(bufs)
	t := c.Type
	var fails []confFail
	fail := func(kind, format string, a ...any) {
		fails = append(fails, confFail{kind, fmt.Sprintf(format, a...)})
	}
	good := func(r int) bool { return ok == nil || ok[r] }
	first := -1
	for r := range bufs {
		if good(r) {
			first = r
			break
		}
	}
	if first < 0 {
		return nil
	}
	// Out-of-place send buffers are never written; in place, where recv
	// lies in send, send outside recv is not (ReduceScatter and
	// ReduceScatterV, Scatter's and ScatterV's root).
	for r, b := range bufs {
		if !good(r) {
			continue
		}
		if b.keep != nil && !sameBits(b.send, b.keep) {
			fail("send buffer written", "rank %d: the send buffer of an out-of-place call was written (%s)", r, diffBits(t, elemBits(b.send), elemBits(b.keep)))
		}
		if at := offsetIn(b.send, b.recv); at >= 0 && len(b.recv) < len(b.send) {
			got, end := elemBits(b.send), at+len(b.recv)
			if d := diffBits(t, append(got[:at:at], got[end:]...), append(in[r][:at:at], in[r][end:]...)); d != "" {
				fail("send buffer written", "rank %d: in place, its send outside recv [%d, %d) changed (%s, not counting recv)", r, at, end, d)
			}
		}
	}
	// moved checks data that moves bit for bit.
	moved := func(r int, got, want []uint64, what string) {
		if d := diffBits(t, got, want); d != "" {
			fail("wrong result", "rank %d: %s differs (%s)", r, what, d)
		}
	}
	// unwritten checks that a recv the call does not use still holds the
	// poison.
	unwritten := func(r int, got []uint64, kind string) {
		for i, v := range got {
			if v != t.poison() {
				fail(kind, "rank %d (not the root): recv[%d] was written (%s)", r, i, t.format(v))
				return
			}
		}
	}
	// The reductions' inputs: a PreMulSum call's products, checked as
	// their Sum (rc).
	red, rc := preMulInputs(c, in)
	switch c.Coll {
	case cAllReduce:
		refs := refsOf(rc, red)
		for _, res := range []struct {
			what string
			get  func(b *confBufs[T]) []T
		}{
			{"", func(b *confBufs[T]) []T { return b.recv }},
			{" (async)", func(b *confBufs[T]) []T { return b.extra }}, // async+sync: the asynchronous call's
		} {
			if res.get(bufs[first]) == nil {
				continue
			}
			firstBits := elemBits(res.get(bufs[first]))
			for r, b := range bufs {
				if !good(r) {
					continue
				}
				got := elemBits(res.get(b))
				if r > first {
					if equalBits(got, firstBits) {
						continue // checked as the first rank's
					}
					fail("ranks differ"+res.what, "rank %d's result%s differs bitwise from rank %d's (%s)", r, res.what, first, diffBits(t, got, firstBits))
				}
				if kind, bad := checkReduction(rc, ranks, refs, 0, len(got), got); kind != "" {
					fail(kind+res.what, "rank %d%s: %s", r, res.what, bad)
				}
			}
		}
	case cReduceScatter:
		refs := refsOf(rc, red)
		for r, b := range bufs {
			lo, hi := r*c.N, (r+1)*c.N
			if !good(r) {
				continue
			}
			if kind, bad := checkReduction(rc, ranks, refs, lo, hi, elemBits(b.recv)); kind != "" {
				fail(kind, "rank %d (chunk [%d, %d)): %s", r, lo, hi, bad)
			}
		}
	case cReduce:
		refs := refsOf(rc, red)
		if good(c.Root) {
			if kind, bad := checkReduction(rc, ranks, refs, 0, c.N, elemBits(bufs[c.Root].recv)); kind != "" {
				fail(kind, "root %d: %s", c.Root, bad)
			}
		}
		for r, b := range bufs {
			switch {
			case !good(r) || r == c.Root:
			case c.inPlace():
				// recv is send, not used off the root: only read.
				if !equalBits(elemBits(b.send), in[r]) {
					fail("send buffer written", "rank %d (not the root): its send, recv too in place, changed (%s)", r, diffBits(t, elemBits(b.send), in[r]))
				}
			case b.recv != nil:
				unwritten(r, elemBits(b.recv), "non-root recv written")
			}
		}
	case cAllGather:
		var want []uint64
		for r := range in {
			want = append(want, in[r]...)
		}
		for r, b := range bufs {
			if good(r) {
				moved(r, elemBits(b.recv), want, "gathered data")
			}
		}
	case cShift, cPermute:
		for r, b := range bufs {
			_, from := c.peers(ranks, r)
			if good(r) {
				moved(r, elemBits(b.recv), in[from], fmt.Sprintf("data received from rank %d", from))
			}
		}
	case cBroadcast:
		for r, b := range bufs {
			if good(r) {
				moved(r, elemBits(b.send), in[c.Root], fmt.Sprintf("data broadcast from root %d", c.Root))
			}
		}
	case cBroadcastInto:
		// A send is never written (out of place: checked above; the
		// root's in place is its recv).
		for r, b := range bufs {
			if good(r) {
				moved(r, elemBits(b.recv), in[c.Root], fmt.Sprintf("data broadcast from root %d", c.Root))
			}
		}
	case cScan, cExscan:
		fails = append(fails, checkScan(c, in, red, bufs, good)...)
	case cAllToAll:
		m := c.N
		for r, b := range bufs {
			if !good(r) {
				continue
			}
			var want []uint64
			for q := range in {
				want = append(want, in[q][r*m:(r+1)*m]...)
			}
			moved(r, elemBits(b.recv), want, "data exchanged")
		}
	case cGather:
		var want []uint64
		for q := range in {
			want = append(want, in[q]...)
		}
		for r, b := range bufs {
			switch {
			case !good(r):
			case r == c.Root:
				moved(r, elemBits(b.recv), want, "gathered data")
			case b.recv != nil:
				unwritten(r, elemBits(b.recv), "non-root recv written")
			}
		}
	case cScatter:
		m := c.N
		for r, b := range bufs {
			if !good(r) {
				continue
			}
			moved(r, elemBits(b.recv), in[c.Root][r*m:(r+1)*m], fmt.Sprintf("data scattered from root %d", c.Root))
			if r == c.Root && c.inPlace() && !equalBits(elemBits(b.send), in[r]) {
				fail("send buffer written", "root %d: its send changed in place (%s)", r, diffBits(t, elemBits(b.send), in[r]))
			}
		}
	case cAllToAllV, cAllGatherV, cGatherV, cScatterV:
		l := c.layout(ranks)
		for j, b := range bufs {
			switch {
			case !good(j):
				continue
			case c.Coll == cGatherV && j != c.Root:
				unwritten(j, elemBits(b.recv), "non-root recv written")
				continue
			case c.Coll == cScatterV && j == c.Root && c.inPlace() && !equalBits(elemBits(b.send), in[j]):
				fail("send buffer written", "root %d: its send changed in place (%s)", j, diffBits(t, elemBits(b.send), in[j]))
			}
			// Every received range, and the poison elsewhere (AllToAllV in
			// place: what the buffer held, the input then the poison).
			want := make([]uint64, l.rlen[j])
			if c.Coll == cAllToAllV && c.inPlace() {
				want = make([]uint64, max(l.slen[j], l.rlen[j]))
			}
			for k := range want {
				want[k] = t.poison()
			}
			if c.Coll == cAllToAllV && c.inPlace() {
				copy(want, in[j])
			}
			for i := range in {
				copy(want[l.rd[j][i]:l.rd[j][i]+l.rc[j][i]], in[i][l.sd[i][j]:l.sd[i][j]+l.cnt[i][j]])
			}
			got := elemBits(b.recv)
			if d := diffBits(t, got, want); d != "" {
				kind := "wrong result"
				for k := range got {
					if got[k] != want[k] {
						if !l.covered(j, k) {
							kind = "recv written outside the received ranges"
						}
						break
					}
				}
				fail(kind, "rank %d (receiving %v elements at %v): received data differs (%s)", j, l.rc[j], l.rd[j], d)
			}
		}
	case cReduceScatterV:
		l := c.layout(ranks)
		vals := make([]uint64, ranks)
		for j, b := range bufs {
			if !good(j) {
				continue
			}
			want := make([]uint64, l.counts[j])
			for k := range want {
				for i := range red {
					vals[i] = red[i][l.displs[j]+k]
				}
				want[k] = rankOrderRef(t, rc.Op, vals)
			}
			if kind, bad := checkBits(t, elemBits(b.recv), want, !t.isInt()); kind != "" {
				fail(kind, "rank %d (range [%d, +%d), reduced in rank order): %s", j, l.displs[j], l.counts[j], bad)
			}
		}
	}
	if ab := asyncBufs(c, bufs); ab != nil {
		for _, f := range checkResults(c.asyncPart(), in, ab, ok) {
			fails = append(fails, confFail{f.kind + " (async)", "the asynchronous call: " + f.msg})
		}
	}
	return fails
}

// asyncBufs returns the buffers of the asynchronous calls of an async+sync
// call c (AllReduce's: checked as its extra), nil for none. The
// fault-injection test's copies of the buffers have none.
func asyncBufs[T Elem](c confCall, bufs []*confBufs[T]) []*confBufs[T] {
	if !c.Path.pair() || c.Coll == cAllReduce {
		return nil
	}
	ab := make([]*confBufs[T], len(bufs))
	for r, b := range bufs {
		if b.async == nil {
			return nil
		}
		ab[r] = b.async
	}
	return ab
}

// covered reports whether element k of rank j's recv lies in a range it
// receives.
func (l *confLayout) covered(j, k int) bool {
	for i, d := range l.rd[j] {
		if k >= d && k < d+l.rc[j][i] {
			return true
		}
	}
	return false
}

// shift is a Shift's distance on ranks ranks (0: every rank with itself).
func (c confCall) shift(ranks int) int { return c.Root % ranks }

// firstDiff describes the first element where a and b differ bitwise.
func firstDiff[T Float](a, b []T) string {
	if len(a) != len(b) {
		return fmt.Sprintf("lengths %d and %d", len(a), len(b))
	}
	for i := range a {
		if math.Float64bits(float64(a[i])) != math.Float64bits(float64(b[i])) {
			note := ""
			if float64(a[i]) == confPoison {
				note = " (never written)"
			}
			return fmt.Sprintf("element %d: %v vs %v%s", i, a[i], b[i], note)
		}
	}
	return "NaN payloads differ"
}

// confOptions returns the group options of a session.
func confOptions(g confGroup) Options {
	cfg := testConfig()
	cfg.CommunicationTimeout = 60 * time.Second
	cfg.Strategy = g.Strategy
	cfg.PipelineDepth = g.PipelineDepth
	cfg.LocalGroupSize = g.LocalGroupSize
	cfg.Deterministic = g.Deterministic
	return Options{Ranks: g.Ranks, Backend: g.Backend, Config: cfg, DevicePerRank: g.DevicePerRank, ChunkBytes: g.ChunkBytes,
		MaxBindingBytes: g.MaxBindingBytes, DisableFloat64: g.DisableFloat64, Validation: wantValidation(g.Backend)}
}

// confFailure is one failed session, for the summary.
type confFailure struct {
	seed uint64
	what string
}

// runConfSession runs one session and returns its failures (the first
// failing call stops it; a call rejected as it must be does not). fatal is
// set when a hang left ranks running.
func runConfSession(t *testing.T, s *confSession, haveVulkan bool) (failures []confFail, fatal bool) {
	if s.G.Backend == "vulkan" && !haveVulkan {
		s.G.Backend = "host"
		s.G.DevicePerRank = false
		s.Fallback = "vulkan unavailable: ran on host"
	}
	g, err := NewGroup(context.Background(), confOptions(s.G))
	if err != nil {
		return []confFail{{"NewGroup: " + errKind(err), fmt.Sprintf("NewGroup: %v", err)}}, false
	}
	if s.G.NoTypeKernels {
		g.kernels &= backend.F32.Bit() | backend.F64.Bit()
	}
	s.Device = g.infos[0].Name
	limit := 120 * time.Second
	for i, c := range s.Calls {
		out := confElems[c.Type].runConf(g, s, c, limit)
		if out.rejected && len(out.failures) == 0 && i == len(s.Calls)-1 {
			// The group stays usable after a rejected call: the next call
			// shows it, or else a barrier.
			out.failures = append(out.failures, barrierAfterRejected(g, limit)...)
		}
		for _, f := range out.failures {
			failures = append(failures, confFail{confKind(c, f.kind), fmt.Sprintf("call %d (%s): %s", i, c, f.msg)})
		}
		if out.hung != "" {
			return failures, true
		}
		if len(out.failures) > 0 {
			break
		}
	}
	// One ownership draw per session: a collective racing Close of a
	// rank's HostBuffer, or aliased arguments (ownership_test.go).
	if len(failures) == 0 && g.Err() == nil && g.Size() >= 2 {
		oc := drawOwnCase(s.Seed, g.Size())
		for _, f := range runOwnCase(g, oc, limit, false) {
			failures = append(failures, confFail{f.kind, fmt.Sprintf("%s: %s", oc, f.msg)})
		}
	}
	if err := g.Close(); err != nil {
		failures = append(failures, confFail{"Close: " + errKind(err), fmt.Sprintf("Close: %v", err)})
	}
	if s.G.Backend == "vulkan" {
		checkValidation(t)
	}
	return failures, false
}

// confElem runs the tests' generic functions instantiated at one element
// type (elemOf[T]), so that a call's confType picks them.
type confElem interface {
	runConf(g *Group, s *confSession, c confCall, limit time.Duration) confOutcome // runConfCall
	runFault(fr *faultRun, i int, c confCall) (groupState, bool)                   // runFaultCall
}

// elemOf is the confElem of element type T.
type elemOf[T Elem] struct{}

// runConf is runConfCall at the element type T.
func (elemOf[T]) runConf(g *Group, s *confSession, c confCall, limit time.Duration) confOutcome {
	return runConfCall[T](g, s, c, limit)
}

// confElems are the element types, by confType.
var confElems = [numConfTypes]confElem{elemOf[float32]{}, elemOf[float64]{}, elemOf[int8]{}, elemOf[uint8]{},
	elemOf[int32]{}, elemOf[uint32]{}, elemOf[int64]{}, elemOf[uint64]{}, elemOf[Float16]{}, elemOf[BFloat16]{},
	elemOf[int16]{}, elemOf[uint16]{}, elemOf[Float8E4M3]{}, elemOf[Float8E5M2]{}}

// confNewerTypes are the element types added after the draws of
// drawSession were fixed: each takes a share of the integer calls, drawn
// from a source of its own, so that the sessions of fixed seeds keep
// drawing the calls they did (TestConformanceSubnormalDraws counts them).
var confNewerTypes = []confType{tI16, tU16, tE4M3, tE5M2}

// barrierAfterRejected checks that a barrier passes on every rank.
func barrierAfterRejected(g *Group, limit time.Duration) []confFail {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	errs, hung := runRanksWithin(g, limit+10*time.Second, func(cm *Comm) error { return Barrier(ctx, cm) })
	if hung != "" {
		return []confFail{{"hang", "barrier after a rejected call: the ranks did not return; goroutines:\n" + hung}}
	}
	for r, err := range errs {
		if err != nil {
			return []confFail{{"barrier after a rejected call: " + errKind(err), fmt.Sprintf("barrier after a rejected call, rank %d: %v", r, err)}}
		}
	}
	return nil
}

// haveVulkan reports whether the vulkan backend runs here (in CI it must).
func haveVulkan(t testing.TB) bool {
	for _, b := range backendsUnderTest(t) {
		if b == "vulkan" {
			return true
		}
	}
	return false
}

// confReplay is the command that replays one session.
func confReplay(test, flagPrefix string, seed uint64) string {
	s := fmt.Sprintf("go test ./collective/ -run '%s$' -%s.seed=%d -%s.cases=1 -v", test, flagPrefix, seed, flagPrefix)
	if flagPrefix == "conformance" && *confVulkanFlag != 0 {
		s += fmt.Sprintf(" -conformance.vulkan=%d", *confVulkanFlag)
	}
	return s
}

// confSummary logs the failures grouped by their first line, each with the
// seed that shows it first.
func confSummary(t *testing.T, test, flagPrefix string, fails []confFailure) {
	if len(fails) == 0 {
		return
	}
	type group struct {
		n    int
		seed uint64
	}
	groups := map[string]*group{}
	var keys []string
	for _, f := range fails {
		k := f.what
		if gr, ok := groups[k]; ok {
			if gr.seed != f.seed {
				gr.n++
			}
			continue
		}
		groups[k] = &group{n: 1, seed: f.seed}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "failures by kind (sessions, first seed):")
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %3d  seed=%-12d %s", groups[k].n, groups[k].seed, k)
	}
	fmt.Fprintf(&b, "\nreplay one with: %s", confReplay(test, flagPrefix, groups[keys[0]].seed))
	t.Log(b.String())
}

// confKind is the summary key of a failure of call c.
func confKind(c confCall, kind string) string {
	desc := fmt.Sprintf("%s/%s/%s", c.Coll, c.Path, c.Type)
	if c.Path.async() {
		desc += "/" + c.Wait.String()
	}
	if c.OutOfPlace {
		desc += "/out-of-place"
	}
	if c.Coll == cAllReduce {
		desc += "/" + c.Strategy.String()
	}
	return desc + ": " + kind
}

// TestConformance is the randomized differential test of every collective
// on host and lavapipe.
func TestConformance(t *testing.T) {
	seed, n := confBudget(t, confSeedFlag, confCasesFlag, "GOCOLL_CONFORMANCE", 3000, confCIBudget)
	vk := haveVulkan(t)
	lim := confLimitsFor()
	t.Logf("conformance: %d sessions from seed %d (vulkan %v); replay one with %s", n, seed, vk, confReplay("TestConformance", "conformance", seed))
	var fails []confFailure
	hangs := 0
	defer func() { confSummary(t, "TestConformance", "conformance", fails) }()
	spent := map[string]time.Duration{}
	count := map[string]int{}
	defer func() { t.Logf("time by backend: %v over %v sessions", spent, count) }()
	byColl, byType, byPath, byOp := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	defer func() {
		t.Logf("calls drawn by collective: %v; by type: %v; by path: %v; reductions by op: %v", byColl, byType, byPath, byOp)
	}()
	// What ran on which device, and the calls of subnormal inputs (the
	// count of their results checked that are subnormal: a device that
	// flushes gets those wrong).
	devices := map[string]int{}
	sub := &confSubnormalCount{calls: map[string]int{}}
	ran := 0
	progress := func() {
		t.Logf("conformance: %d of %d sessions run, %d on vulkan (by device: %v); subnormal inputs: %s", ran, n, count["vulkan"], devices, sub)
	}
	defer progress()
	for i := 0; i < n; i++ {
		if i > 0 && i%100 == 0 && testing.Verbose() {
			progress()
		}
		s := drawSession(seed+uint64(i), lim)
		for _, c := range s.Calls {
			byColl[c.Coll.String()]++
			byType[c.Type.String()]++
			switch {
			case c.PreMul != nil:
				byOp["premulsum"]++
			case c.Coll.reduces():
				byOp[c.Op.String()]++
			}
			if c.Path.async() {
				byPath[c.Path.String()+"/"+c.Wait.String()]++
			} else {
				byPath[c.Path.String()]++
			}
		}
		// A crash kills the process before the test can report: name the
		// session first (shown only when the package fails, or with -v).
		fmt.Fprintf(os.Stderr, "conformance: session seed=%d\n", s.Seed)
		start := time.Now()
		failures, fatal := runConfSession(t, s, vk)
		spent[s.G.Backend] += time.Since(start)
		count[s.G.Backend]++
		if s.G.Backend == "vulkan" {
			devices[s.Device]++
		}
		sub.add(s)
		ran++
		if len(failures) > 0 {
			var msgs []string
			for _, f := range failures {
				msgs = append(msgs, f.msg)
				fails = append(fails, confFailure{seed: s.Seed, what: f.kind})
			}
			t.Errorf("%s\n%s\nreplay: %s", strings.Join(msgs, "\n"), s, confReplay("TestConformance", "conformance", s.Seed))
		}
		if fatal {
			// The hung session's goroutines stay blocked on its own group;
			// later sessions use new groups, so go on, up to a point.
			if hangs++; hangs == 3 {
				t.Fatalf("stopping after %d hung sessions", hangs)
			}
		}
	}
}
