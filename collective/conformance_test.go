package collective

import (
	"cmp"
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
// calls on it (collective, data path, dtype, op, strategy, length, inputs),
// runs them, and checks every rank's result against a float64 reference
// computed with plain loops, and all-reduce results for bitwise agreement
// across ranks. A session is a pure function of its seed: a failure prints
// the seed and the session, and
//
//	go test ./collective/ -run 'TestConformance$' -conformance.seed=S -conformance.cases=1 -v
//
// replays it (GOCOLL_CONFORMANCE_SEED and GOCOLL_CONFORMANCE_CASES do the
// same through ./build.sh). Session i of a run has seed S+i.

var (
	confSeedFlag  = flag.Uint64("conformance.seed", 0, "seed of the first conformance session (0: the fixed CI seed, or a random one with GOCOLL_TEST_FULL)")
	confCasesFlag = flag.Int("conformance.cases", 0, "number of conformance sessions (0: the budget of the mode)")
)

// confCISeed is the seed CI runs, so a CI failure is the same on every run.
const confCISeed = 20250611

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
	// ranks behind (k = 1 + Root mod (ranks-1)): SendRecv on the slice
	// paths; SendAsync and RecvAsync (in either order) on async; RecvAsync
	// then a blocking Send on async+sync.
	cShift
)

var collNames = [...]string{"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce", "Shift"}

func (k confColl) String() string { return collNames[k] }

// confPath is how a call hands its data over.
type confPath int

const (
	pSlice   confPath = iota // Go slices, out of place
	pInPlace                 // Go slices, in place (NCCL's layout for ReduceScatter and AllGather)
	pPinned                  // HostBuffers, out of place
	pPinnedInPlace
	pTensor // device tensors (AllReduceTensor, BroadcastTensor)
	pAsync  // AllReduceAsync / BroadcastAsync, then Wait
	// AllReduceAsync in place on a copy of the input, then AllReduceWith out
	// of place before waiting: a Comm runs them in call order.
	pAsyncPair
	pPinnedSend // a HostBuffer to send from, a Go slice to receive into
	pPinnedRecv // a Go slice to send from, a HostBuffer to receive into
)

var pathNames = [...]string{"slice", "in-place", "pinned", "pinned-in-place", "tensor", "async", "async+sync", "pinned-send", "pinned-recv"}

func (p confPath) String() string { return pathNames[p] }

func (p confPath) inPlace() bool {
	return p == pInPlace || p == pPinnedInPlace || p == pAsync || p == pTensor
}
func (p confPath) pinned() bool { return p.sendPinned() || p.recvPinned() }

func (p confPath) sendPinned() bool { return p == pPinned || p == pPinnedInPlace || p == pPinnedSend }
func (p confPath) recvPinned() bool { return p == pPinned || p == pPinnedInPlace || p == pPinnedRecv }
func (p confPath) async() bool      { return p == pAsync || p == pAsyncPair }

// inputKind is how a call's inputs are drawn.
type inputKind int

const (
	inExactInt inputKind = iota // small integers (powers of two for prod): every result exact
	inExactF64                  // integers plus multiples of 2^-30 (f64 only): exact in f64, not in f32
	inRandom                    // random reals: results within a stated bound
	inSpecial                   // exact integers with NaN and +-Inf sprinkled in
)

var inputNames = [...]string{"exact-int", "exact-f64", "random", "special"}

func (k inputKind) String() string { return inputNames[k] }

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
}

// confCall is one call of a session.
type confCall struct {
	Coll     confColl
	Path     confPath
	F64      bool
	Op       Op
	Strategy Strategy // all-reduce only
	N        int      // elements per rank (ReduceScatter: of recv; AllGather: of send)
	Input    inputKind
	Mag      int // integers in [-2^Mag, 2^Mag]
	Root     int
	DataSeed uint64
	// NilRecv: a Reduce non-root passes nil instead of a buffer it checks.
	NilRecv bool
}

type confSession struct {
	Seed  uint64
	G     confGroup
	Calls []confCall
	// Fallback is set when the drawn backend is not available here.
	Fallback string
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
	dt := "f32"
	if c.F64 {
		dt = "f64"
	}
	s := fmt.Sprintf("%s path=%s %s n=%d input=%s", c.Coll, c.Path, dt, c.N, c.Input)
	if c.Input == inExactInt || c.Input == inSpecial {
		s += fmt.Sprintf(" mag=2^%d", c.Mag)
	}
	if c.Coll != cAllGather && c.Coll != cBroadcast {
		s += " op=" + c.Op.String()
	}
	if c.Coll == cAllReduce {
		s += " strategy=" + c.Strategy.String()
	}
	if c.Coll == cBroadcast || c.Coll == cReduce || c.Coll == cShift {
		s += fmt.Sprintf(" root=%d", c.Root)
	}
	if c.Coll == cReduce && c.NilRecv {
		s += " nil-recv"
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
}

func confLimitsFor() confLimits {
	l := confLimits{maxLen: 300000, maxCalls: 4, vulkanPct: 20}
	if raceEnabled {
		l.maxLen = 40000
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
		switch x := rng.IntN(9); {
		case x < 4:
			c.Coll = cAllReduce
		default:
			c.Coll = confColl(x - 3)
		}
		if c.Coll == cShift && g.Ranks == 1 {
			c.Coll = cAllReduce
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
		default:
			c.Path = pAsync
			if rng.IntN(2) == 0 {
				c.Path = pAsyncPair
			}
		}
		if c.Path == pAsyncPair && c.Coll == cBroadcast {
			c.Path = pAsync
		}
		if (c.Path == pTensor || c.Path.async()) && c.Coll != cAllReduce && c.Coll != cBroadcast && c.Coll != cShift {
			c.Path = confPath(rng.IntN(2)) // slice or in place
		}
		if c.Coll == cShift {
			switch c.Path {
			case pInPlace, pTensor:
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
		c.F64 = rng.IntN(2) == 0
		c.Op = Op(rng.IntN(int(Prod) + 1))
		if rng.IntN(4) > 0 {
			c.Strategy = Strategy(1 + rng.IntN(int(Host)))
		}
		es := 4
		if c.F64 {
			es = 8
		}
		ml := maxLen
		if c.Coll == cReduceScatter || c.Coll == cAllGather {
			ml = max(1, maxLen/g.Ranks)
		}
		c.N = drawLen(rng, g.Ranks, max(1, slot/es), g.PipelineDepth, ml)
		switch x := rng.IntN(100); {
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
		c.Mag = 1 + rng.IntN(20)
		c.Root = rng.IntN(g.Ranks)
		c.NilRecv = rng.IntN(2) == 0
		c.DataSeed = rng.Uint64()
		s.Calls = append(s.Calls, c)
	}
	return s
}

// confInputs returns each rank's input (as float64 values the element type
// holds exactly) for call c on ranks ranks.
func confInputs(c confCall, ranks int) [][]float64 {
	rng := rand.New(rand.NewPCG(c.DataSeed, 0x696e70))
	l := c.N
	if c.Coll == cReduceScatter {
		l = c.N * ranks
	}
	prodSet := [...]float64{1, 2, -1, 0.5, 1, -2, 0.25, 4, -0.5, 1}
	in := make([][]float64, ranks)
	for r := range in {
		in[r] = make([]float64, l)
		for i := range in[r] {
			var v float64
			switch c.Input {
			case inExactInt, inSpecial:
				if c.Op == Prod && (c.Coll == cAllReduce || c.Coll == cReduceScatter || c.Coll == cReduce) {
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
	if wrong == 0 {
		return "", ""
	}
	bad = append(bad, fmt.Sprintf("%d of %d elements wrong", wrong, len(ref)))
	switch {
	case unwritten > 0:
		kind = fmt.Sprintf("outputs never written (%d of %d)", unwritten, wrong)
		if unwritten == wrong {
			kind = "outputs never written"
		}
	case meanUlp == wrong:
		kind = "mean beyond 1 ulp"
	default:
		kind = "wrong result"
	}
	return kind, strings.Join(bad, "; ")
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
type confBufs[T Float] struct {
	send, recv []T
	hs, hr     *HostBuffer[T]
	tensor     *Tensor[T]
	keep       []T // the send buffer before an out-of-place call
	extra      []T // async+sync: the asynchronous call's buffer
}

func (b *confBufs[T]) close() {
	if b.hs != nil {
		b.hs.Close()
	}
	if b.hr != nil {
		b.hr.Close()
	}
	if b.tensor != nil {
		b.tensor.Close()
	}
}

// confOutcome is what one call did on every rank.
type confOutcome struct {
	errs     []error
	hung     string
	failures []confFail
}

// confFail is one failed check: its kind (for the summary) and the details.
type confFail struct{ kind, msg string }

// lens returns the lengths of send and recv on rank r.
func (c confCall) lens(ranks, r int) (ls, lr int) {
	switch c.Coll {
	case cReduceScatter:
		return c.N * ranks, c.N
	case cAllGather:
		return c.N, c.N * ranks
	}
	return c.N, c.N
}

// setupBufs fills rank r's buffers for c from in (send) and the poison
// (recv). In place, recv aliases send (ReduceScatter: recv is rank r's
// chunk of send; AllGather: send is rank r's chunk of recv).
func setupBufs[T Float](c confCall, ranks, r int, in []float64) (*confBufs[T], error) {
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
	fill := func(dst []T, src []float64) {
		for i, v := range src {
			dst[i] = T(v)
		}
	}
	poison := func(dst []T) {
		for i := range dst {
			dst[i] = T(confPoison)
		}
	}
	if !c.Path.inPlace() || c.Coll == cReduce || c.Coll == cShift {
		if b.send, b.hs, err = alloc(ls, c.Path.sendPinned()); err != nil {
			return b, err
		}
		fill(b.send, in)
		if c.Coll == cReduce && c.Path.inPlace() {
			b.recv = b.send // every rank passes recv == send
		} else if c.Coll == cReduce && r != c.Root && c.NilRecv {
			b.recv = nil
		} else if c.Coll != cBroadcast {
			if b.recv, b.hr, err = alloc(lr, c.Path.recvPinned()); err != nil {
				return b, err
			}
			poison(b.recv)
		}
		if !c.Path.inPlace() {
			b.keep = append([]T(nil), b.send...)
		}
		return b, nil
	}
	switch c.Coll {
	case cAllReduce, cBroadcast:
		if b.send, b.hs, err = alloc(ls, c.Path.sendPinned()); err != nil {
			return b, err
		}
		fill(b.send, in)
		b.recv = b.send
	case cReduceScatter:
		if b.send, b.hs, err = alloc(ls, c.Path.sendPinned()); err != nil {
			return b, err
		}
		fill(b.send, in)
		b.recv = b.send[r*c.N : (r+1)*c.N]
	case cAllGather:
		if b.recv, b.hr, err = alloc(lr, c.Path.recvPinned()); err != nil {
			return b, err
		}
		poison(b.recv)
		b.send = b.recv[r*c.N : (r+1)*c.N]
		fill(b.send, in)
	}
	return b, nil
}

// callRank runs call c on comm cm with rank r's buffers.
func callRank[T Float](ctx context.Context, cm *Comm, c confCall, b *confBufs[T]) error {
	switch c.Coll {
	case cAllReduce:
		switch c.Path {
		case pTensor:
			if err := tensorIn(cm, b); err != nil {
				return err
			}
			if err := AllReduceTensor(ctx, cm, b.tensor, c.Op, c.Strategy); err != nil {
				return err
			}
			return tensorOut(cm, b.tensor, b.recv)
		case pAsync:
			// The enqueue ctx bounds the operation; Wait's bounds only the wait.
			return AllReduceAsync(ctx, cm, b.send, c.Op).Wait(context.Background())
		case pAsyncPair:
			b.extra = append([]T(nil), b.send...)
			w := AllReduceAsync(ctx, cm, b.extra, c.Op)
			err := AllReduceWith(ctx, cm, b.send, b.recv, c.Op, c.Strategy)
			if werr := w.Wait(context.Background()); werr != nil {
				return werr
			}
			return err
		case pInPlace, pPinnedInPlace:
			if c.Strategy == Auto && c.DataSeed%2 == 0 {
				return AllReduce(ctx, cm, b.send, c.Op)
			}
		case pSlice, pPinned:
			if c.Strategy == Auto && c.DataSeed%2 == 0 {
				return AllReduceInto(ctx, cm, b.send, b.recv, c.Op)
			}
		}
		return AllReduceWith(ctx, cm, b.send, b.recv, c.Op, c.Strategy)
	case cReduceScatter:
		return ReduceScatter(ctx, cm, b.send, b.recv, c.Op)
	case cAllGather:
		return AllGather(ctx, cm, b.send, b.recv)
	case cBroadcast:
		switch c.Path {
		case pTensor:
			if err := tensorIn(cm, b); err != nil {
				return err
			}
			if err := BroadcastTensor(ctx, cm, b.tensor, c.Root); err != nil {
				return err
			}
			return tensorOut(cm, b.tensor, b.send)
		case pAsync:
			return BroadcastAsync(ctx, cm, b.send, c.Root).Wait(context.Background())
		}
		return Broadcast(ctx, cm, b.send, c.Root)
	case cReduce:
		return Reduce(ctx, cm, b.send, b.recv, c.Op, c.Root)
	case cShift:
		n := cm.g.n
		k := c.shift(n)
		to, from := (cm.Rank()+k)%n, (cm.Rank()-k+n)%n
		switch c.Path {
		case pAsync:
			var ws, wr *Work
			if c.DataSeed%2 == 0 {
				ws = SendAsync(ctx, cm, b.send, to)
				wr = RecvAsync(ctx, cm, b.recv, from)
			} else {
				wr = RecvAsync(ctx, cm, b.recv, from)
				ws = SendAsync(ctx, cm, b.send, to)
			}
			return cmp.Or(ws.Wait(context.Background()), wr.Wait(context.Background()))
		case pAsyncPair:
			wr := RecvAsync(ctx, cm, b.recv, from)
			err := Send(ctx, cm, b.send, to)
			return cmp.Or(err, wr.Wait(context.Background()))
		}
		return SendRecv(ctx, cm, b.send, to, b.recv, from)
	}
	return fmt.Errorf("unknown collective %d", c.Coll)
}

// setupError is a failure of the tensor set-up around a collective
// (NewTensor, Upload, Download), not of the collective itself.
type setupError struct{ err error }

func (e *setupError) Error() string { return "tensor set-up: " + e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// tensorIn makes rank cm's tensor from b.send. On failure it aborts the
// group, as Group.Run does, so the peers do not wait for the rank.
func tensorIn[T Float](cm *Comm, b *confBufs[T]) error {
	t, err := NewTensor[T](cm, len(b.send))
	if err == nil {
		b.tensor = t
		err = t.Upload(b.send)
	}
	if err != nil {
		cm.Group().Abort(err)
		return &setupError{err}
	}
	return nil
}

func tensorOut[T Float](cm *Comm, t *Tensor[T], dst []T) error {
	if err := t.Download(dst); err != nil {
		cm.Group().Abort(err)
		return &setupError{err}
	}
	return nil
}

// unsupportedOK reports whether the call may fail with ErrUnsupported on
// every rank: f64 on devices without f64 kernels, where no exact host path
// is promised (tensors; reductions other than the slice all-reduce).
func (c confCall) unsupportedOK(g confGroup) bool {
	if !c.F64 || !g.DisableFloat64 {
		return false
	}
	return c.Path == pTensor || (c.Coll != cAllReduce && c.Coll != cAllGather && c.Coll != cBroadcast)
}

// setupCall draws the inputs of c and sets up every rank's buffers.
func setupCall[T Float](c confCall, ranks int) ([][]float64, []*confBufs[T], error) {
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

func closeBufs[T Float](bufs []*confBufs[T]) {
	for _, b := range bufs {
		if b != nil {
			b.close()
		}
	}
}

// runConfCall runs call c of session s on g and checks it.
func runConfCall[T Float](g *Group, s *confSession, c confCall, limit time.Duration) confOutcome {
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
	nerr := 0
	for r, err := range out.errs {
		if err != nil {
			nerr++
			if !c.unsupportedOK(s.G) || !errors.Is(err, ErrUnsupported) {
				fail("error "+errKind(err), "rank %d: %v", r, err)
			}
		}
	}
	if nerr > 0 {
		if nerr != ranks && len(out.failures) == 0 {
			fail("ErrUnsupported on some ranks", "%d of %d ranks failed with ErrUnsupported, the others succeeded", nerr, ranks)
		}
		return out
	}
	out.failures = append(out.failures, checkResults(c, in, bufs, nil)...)
	return out
}

// checkResults checks the buffers of the ranks whose call succeeded (ok[r],
// or every rank when ok is nil) against the reference of inputs in.
func checkResults[T Float](c confCall, in [][]float64, bufs []*confBufs[T], ok []bool) []confFail {
	ranks := len(bufs)
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
	// Out-of-place send buffers are never written.
	for r, b := range bufs {
		if good(r) && b.keep != nil && !bitsEqual(b.send, b.keep) {
			fail("send buffer written", "rank %d: the send buffer of an out-of-place call was written", r)
		}
	}
	switch c.Coll {
	case cAllReduce:
		ref, abs := confRef(in, c.Op)
		for r, b := range bufs {
			if !good(r) || r > first && bitsEqual(b.recv, bufs[first].recv) {
				continue // checked as the first rank's
			}
			if r > first {
				fail("ranks differ", "rank %d's result differs bitwise from rank %d's (%s)", r, first, firstDiff(b.recv, bufs[first].recv))
			}
			if kind, bad := checkReduced(b.recv, ref, abs, c.Op, ranks, c.exact()); kind != "" {
				fail(kind, "rank %d: %s", r, bad)
			}
		}
		for r, b := range bufs {
			if !good(r) || b.extra == nil || r > first && bitsEqual(b.extra, bufs[first].extra) {
				continue
			}
			if r > first {
				fail("ranks differ", "rank %d's asynchronous result differs bitwise from rank %d's (%s)", r, first, firstDiff(b.extra, bufs[first].extra))
			}
			if kind, bad := checkReduced(b.extra, ref, abs, c.Op, ranks, c.exact()); kind != "" {
				fail(kind+" (async)", "rank %d, asynchronous call: %s", r, bad)
			}
		}
	case cReduceScatter:
		ref, abs := confRef(in, c.Op)
		for r, b := range bufs {
			lo, hi := r*c.N, (r+1)*c.N
			if !good(r) {
				continue
			}
			if kind, bad := checkReduced(b.recv, ref[lo:hi], abs[lo:hi], c.Op, ranks, c.exact()); kind != "" {
				fail(kind, "rank %d (chunk [%d, %d)): %s", r, lo, hi, bad)
			}
		}
	case cReduce:
		ref, abs := confRef(in, c.Op)
		if good(c.Root) {
			if kind, bad := checkReduced(bufs[c.Root].recv, ref, abs, c.Op, ranks, c.exact()); kind != "" {
				fail(kind, "root %d: %s", c.Root, bad)
			}
		}
		for r, b := range bufs {
			if !good(r) || r == c.Root || b.recv == nil || c.Path.inPlace() {
				continue
			}
			for i, v := range b.recv {
				if float64(v) != confPoison {
					fail("non-root recv written", "rank %d (not the root): recv[%d] was written (%v)", r, i, v)
					break
				}
			}
		}
	case cAllGather:
		want := make([]T, 0, c.N*ranks)
		for r := range in {
			for _, v := range in[r] {
				want = append(want, T(v))
			}
		}
		for r, b := range bufs {
			if good(r) && !bitsEqual(b.recv, want) {
				fail("wrong result", "rank %d: gathered data differs (%s)", r, firstDiff(b.recv, want))
			}
		}
	case cShift:
		k := c.shift(ranks)
		for r, b := range bufs {
			from := (r - k + ranks) % ranks
			want := make([]T, c.N)
			for i, v := range in[from] {
				want[i] = T(v)
			}
			if good(r) && !bitsEqual(b.recv, want) {
				fail("wrong result", "rank %d: received data differs from rank %d's input (%s)", r, from, firstDiff(b.recv, want))
			}
		}
	case cBroadcast:
		want := make([]T, c.N)
		for i, v := range in[c.Root] {
			want[i] = T(v)
		}
		for r, b := range bufs {
			if good(r) && !bitsEqual(b.send, want) {
				fail("wrong result", "rank %d: broadcast data differs from root %d's (%s)", r, c.Root, firstDiff(b.send, want))
			}
		}
	}
	return fails
}

// shift is a Shift's distance on ranks ranks.
func (c confCall) shift(ranks int) int { return 1 + c.Root%(ranks-1) }

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
// failing call stops it). fatal is set when a hang left ranks running.
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
	limit := 120 * time.Second
	for i, c := range s.Calls {
		var out confOutcome
		if c.F64 {
			out = runConfCall[float64](g, s, c, limit)
		} else {
			out = runConfCall[float32](g, s, c, limit)
		}
		for _, f := range out.failures {
			failures = append(failures, confFail{confKind(c, f.kind), fmt.Sprintf("call %d (%s): %s", i, c, f.msg)})
		}
		if out.hung != "" {
			return failures, true
		}
		if len(out.failures) > 0 || anyErr(out.errs) {
			break
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

func anyErr(errs []error) bool {
	for _, e := range errs {
		if e != nil {
			return true
		}
	}
	return false
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
	return fmt.Sprintf("go test ./collective/ -run '%s$' -%s.seed=%d -%s.cases=1 -v", test, flagPrefix, seed, flagPrefix)
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
	desc := fmt.Sprintf("%s/%s", c.Coll, c.Path)
	if c.Coll == cAllReduce {
		desc += "/" + c.Strategy.String()
	}
	return desc + ": " + kind
}

// TestConformance is the randomized differential test of every collective
// on host and lavapipe.
func TestConformance(t *testing.T) {
	seed, n := confBudget(t, confSeedFlag, confCasesFlag, "GOCOLL_CONFORMANCE", 3000, 300)
	vk := haveVulkan(t)
	lim := confLimitsFor()
	t.Logf("conformance: %d sessions from seed %d (vulkan %v); replay one with %s", n, seed, vk, confReplay("TestConformance", "conformance", seed))
	var fails []confFailure
	hangs := 0
	defer func() { confSummary(t, "TestConformance", "conformance", fails) }()
	spent := map[string]time.Duration{}
	count := map[string]int{}
	defer func() { t.Logf("time by backend: %v over %v sessions", spent, count) }()
	for i := 0; i < n; i++ {
		s := drawSession(seed+uint64(i), lim)
		// A crash kills the process before the test can report: name the
		// session first (shown only when the package fails, or with -v).
		fmt.Fprintf(os.Stderr, "conformance: session seed=%d\n", s.Seed)
		start := time.Now()
		failures, fatal := runConfSession(t, s, vk)
		spent[s.G.Backend] += time.Since(start)
		count[s.G.Backend]++
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
