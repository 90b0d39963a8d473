package collective

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/faultinject"
	"go.uber.org/goleak"
)

// The fault-injection test drives the conformance sessions over a backend
// wrapper (internal/faultinject) that fails the k-th allocation, recorded
// command, submission or wait of one device, delays or hangs a wait, loses a
// device or slows it down; or it cancels one rank's context, or aborts the
// group, mid-call. k is drawn over the calls a fault-free run of the same
// session makes, so the fault fires. Every call must return the right result
// or a typed error (a *Error naming the rank, matching a collective
// sentinel, a context error only on the rank whose context ended), promptly,
// never panic or hang; no write may land in a caller's buffer after its call
// returned, and no device work may still use its pinned memory; after a
// failure every rank's next call fails promptly with ErrGroupBroken;
// goroutines return to the baseline and no device memory leaks, except where
// a device was declared lost. Replay a failure with
//
//	go test ./collective/ -run 'TestFaultInjection$' -fault.seed=S -fault.cases=1 -v
//
// (-fault.verbose prints every rank's error; -fault.kind=K runs only the
// sessions that draw fault K).

var (
	faultSeedFlag  = flag.Uint64("fault.seed", 0, "seed of the first fault-injection session (0: the fixed CI seed, or a random one with GOCOLL_TEST_FULL)")
	faultCasesFlag = flag.Int("fault.cases", 0, "number of fault-injection sessions (0: the budget of the mode)")
	faultVerbose   = flag.Bool("fault.verbose", false, "log every rank's error of every call (to replay a session)")
	faultOnly      = flag.String("fault.kind", "", "run only the sessions that draw this fault (cancel, abort, hang-wait, ...)")
)

var (
	faultOnce    sync.Once
	faultWrapped = map[string]*faultinject.Backend{} // by the wrapped backend's name
)

// faultBackend returns the wrapper of backend name, registered as
// "faultinject-<name>".
func faultBackend(t testing.TB, name string) *faultinject.Backend {
	faultOnce.Do(func() {
		for _, n := range []string{"host", "vulkan"} {
			b, err := backend.Lookup(n)
			if err != nil {
				continue
			}
			fi := faultinject.New("faultinject-"+n, b)
			backend.Register(fi)
			faultWrapped[n] = fi
		}
	})
	fi := faultWrapped[name]
	if fi == nil {
		t.Fatalf("backend %s is not registered", name)
	}
	return fi
}

// faultKind is a fault a session injects: one of the wrapper's kinds, or a
// cancelled context.
type faultKind int

const (
	faultCancel = faultKind(-1) // one rank's context is cancelled mid-call
	faultAbort  = faultKind(-2) // Group.Abort mid-call
)

// errTestAbort is the cause the abort fault passes to Group.Abort.
var errTestAbort = errors.New("test abort")

func (k faultKind) String() string {
	switch k {
	case faultCancel:
		return "cancel"
	case faultAbort:
		return "abort"
	}
	return faultinject.Kind(k).String()
}

// timed reports whether the fault is the test's, not the backend's.
func (k faultKind) timed() bool { return k == faultCancel || k == faultAbort }

// faultSession is a conformance session plus a fault.
type faultSession struct {
	*confSession
	Kind   faultKind
	Device int     // the device (rank) whose calls are counted, -1 any
	Frac   float64 // k as a fraction of the calls a fault-free run makes
	Delay  time.Duration
	// Cancel and abort: the rank, the call and the delay after the call
	// starts.
	CancelRank, CancelCall int
	CancelAfter            time.Duration
	SlowRank               int // a rank slowed down to widen the window (-1 none)
}

func (f *faultSession) String() string {
	s := fmt.Sprintf("fault %s", f.Kind)
	if f.Kind.timed() {
		s += fmt.Sprintf(" rank %d in call %d after %v (slow rank %d by %v)", f.CancelRank, f.CancelCall, f.CancelAfter, f.SlowRank, f.Delay)
	} else {
		s += fmt.Sprintf(" device %d at %.3f of its calls", f.Device, f.Frac)
		if f.Delay > 0 {
			s += fmt.Sprintf(" delay %v", f.Delay)
		}
	}
	return s + "\n" + f.confSession.String()
}

func drawFaultSession(seed uint64) *faultSession {
	rng := rand.New(rand.NewPCG(seed, 0x6661756c74))
	kinds := faultinject.Kinds()
	var kind faultKind
	switch x := rng.IntN(len(kinds) + 3); {
	case x < len(kinds):
		kind = faultKind(kinds[x])
	case x < len(kinds)+2:
		kind = faultCancel
	default:
		kind = faultAbort
	}
	lim := confLimits{maxLen: 20000, maxCalls: 3, vulkanPct: 15, types: true}
	if kind.timed() && !raceEnabled {
		lim.maxLen = 200000 // calls long enough to be interrupted in flight
	}
	f := &faultSession{confSession: drawSession(seed, lim), Kind: kind, SlowRank: -1}
	ranks := f.G.Ranks
	f.Device = rng.IntN(ranks)
	if rng.IntN(8) == 0 {
		f.Device = -1
	}
	f.Frac = rng.Float64()
	switch f.Kind {
	case faultKind(faultinject.DelayWait):
		f.Delay = time.Duration(1+rng.IntN(50)) * time.Millisecond
	case faultKind(faultinject.SlowDevice):
		f.Delay = time.Duration(100+rng.IntN(1900)) * time.Microsecond
	case faultCancel, faultAbort:
		f.CancelRank = rng.IntN(ranks)
		f.CancelCall = rng.IntN(len(f.Calls))
		f.CancelAfter = time.Duration(math.Exp2(rng.Float64()*15)) * time.Microsecond // 1 us .. 32 ms
		if rng.IntN(2) == 0 {
			f.SlowRank = rng.IntN(ranks)
			f.Delay = time.Duration(100+rng.IntN(1900)) * time.Microsecond
		}
	}
	return f
}

// faultOptions are the group options of a fault session: short timeouts
// and drain limit, so failures resolve fast.
func faultOptions(s *faultSession, name string) Options {
	o := confOptions(s.G)
	o.Backend = name
	o.Config.CommunicationTimeout = time.Second
	o.DrainLimit = 300 * time.Millisecond
	if s.G.Backend == "vulkan" {
		// lavapipe on shared cores is slow
		o.Config.CommunicationTimeout = 3 * time.Second
		o.DrainLimit = 3 * time.Second
	}
	return o
}

// faultLeakOpts ignore the process-wide worker pool (started once, kept).
func faultLeakOpts() []goleak.Option {
	return []goleak.Option{goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/gocoll/gocoll/internal/parreduce.worker")}
}

// poisoned is a caller buffer overwritten with a pattern after its call
// returned; the pattern must still be there after Group.Close.
type poisoned struct {
	rank, call int
	what       string
	b          []byte
}

const poisonByte = 0xA5

func poison(b []byte) {
	for i := range b {
		b[i] = poisonByte
	}
}

func (p poisoned) intact() (int, bool) {
	for i, v := range p.b {
		if v != poisonByte {
			return i, false
		}
	}
	return 0, true
}

// faultRun is the state of one session run.
type faultRun struct {
	s        *faultSession
	g        *Group
	inj      *faultinject.Injection
	fails    []confFail
	poisoned []poisoned
	mu       sync.Mutex
	keep     []func() // closes HostBuffers after the poison check
	// declaredLost: a call returned ErrDeviceLost; lostRanks: whose.
	declaredLost bool
	lostRanks    map[int]bool
}

func (fr *faultRun) fail(kind, format string, a ...any) {
	fr.mu.Lock()
	fr.fails = append(fr.fails, confFail{kind, fmt.Sprintf(format, a...)})
	fr.mu.Unlock()
}

// allowedSentinels are the errors a failing collective may match.
var allowedSentinels = []error{ErrInvalidConfig, ErrInvalidArgument, ErrMismatch, ErrTimeout, ErrGroupBroken, ErrClosed,
	ErrConcurrentUse, ErrBackendUnavailable, ErrUnsupported, ErrDeviceLost, ErrAborted, ErrOutOfMemory, ErrValidation,
	ErrRankGone, ErrDeadlock}

// checkError checks the shape of rank r's error: a *Error at the top naming
// the rank, matching a collective sentinel, and matching a context error
// only on the rank whose context ended.
func (fr *faultRun) checkError(call int, c confCall, r int, err error, cancelled bool) {
	where := fmt.Sprintf("call %d (%s) rank %d", call, c, r)
	if p, ok := err.(*confPanic); ok {
		fr.fail("panic", "%s: %v", where, p)
		return
	}
	if se, ok := err.(*setupError); ok {
		// Not a collective: a backend error is fine.
		if !errors.Is(se, backend.ErrOutOfMemory) && !errors.Is(se, ErrDeviceLost) && !errors.Is(se, ErrClosed) && !errors.Is(se, ErrTimeout) {
			fr.fail("tensor set-up error: "+errKind(se.err), "%s: %v", where, err)
		}
		return
	}
	var ce *Error
	if e, ok := err.(*Error); !ok {
		fr.fail(fmt.Sprintf("error not a *collective.Error at the top (%T)", err), "%s: %v", where, err)
	} else {
		ce = e
		if ce.Rank != r {
			fr.fail("Error.Rank is not the calling rank", "%s: %v", where, err)
		}
	}
	typed := cancelled && isCtxErr(err) // the rank whose own context ended
	for _, s := range allowedSentinels {
		if errors.Is(err, s) {
			typed = true
		}
	}
	if !typed {
		fr.fail("error matches no collective sentinel: "+errKind(err), "%s: %v", where, err)
	}
	if isCtxErr(err) && !cancelled {
		fr.fail("context error on a rank whose context did not end: "+errKind(err), "%s: %v", where, err)
	}
}

// groupState is what a call leaves the group in, as the next call must see.
type groupState int

const (
	groupIntact  groupState = iota // a barrier passes
	groupBroken                    // every rank's next call fails promptly with ErrGroupBroken
	groupUnknown                   // a cancellation raced with a call that failed anyway
)

// trigger runs f once after d unless stopped first, and tells whether it ran.
type trigger struct {
	mu      sync.Mutex
	fired   bool
	stopped bool
	tm      *time.Timer
}

func after(d time.Duration, f func()) *trigger {
	tr := &trigger{}
	tr.tm = time.AfterFunc(d, func() {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if !tr.stopped {
			tr.fired = true
			f()
		}
	})
	return tr
}

// stop stops the trigger and reports whether it had fired.
func (tr *trigger) stop() bool {
	if tr == nil {
		return false
	}
	tr.tm.Stop()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.stopped = true
	return tr.fired
}

func (tr *trigger) hasFired() bool {
	if tr == nil {
		return false
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.fired
}

// runFaultCall runs call i of the session with the fault's cancellation
// (if any), poisons the callers' buffers as each call returns, and checks
// errors and the results of the ranks that succeeded. A call every rank
// must reject (wantErr, such as a bitwise op of a float type) leaves the
// buffers of the ranks that reject it untouched and the group intact. It
// returns the state the call left the group in, and false in ok when the
// session must stop (a hang).
func runFaultCall[T Elem](fr *faultRun, i int, c confCall) (state groupState, ok bool) {
	s, g := fr.s, fr.g
	ranks := g.Size()
	in, bufs, err := setupCall[T](c, ranks)
	if err != nil {
		closeBufs(bufs)
		fr.fail("setup", "call %d: %v", i, err)
		return groupUnknown, true
	}
	// Results are checked on copies taken as each call returns; the
	// callers' buffers are poisoned then.
	snaps := make([]*confBufs[T], ranks)
	ctxs := make([]context.Context, ranks)
	cancels := make([]context.CancelFunc, ranks)
	for r := range ctxs {
		ctxs[r], cancels[r] = context.WithTimeout(context.Background(), 20*time.Second)
		defer cancels[r]()
	}
	cancelled := make([]bool, ranks)
	var cancelT, abortT *trigger
	if s.Kind == faultCancel && s.CancelCall == i {
		cancelled[s.CancelRank] = true
		cancelT = after(s.CancelAfter, cancels[s.CancelRank])
		defer cancelT.stop()
	}
	if s.Kind == faultAbort && s.CancelCall == i {
		abortT = after(s.CancelAfter, func() { g.Abort(errTestAbort) })
		defer abortT.stop()
	}
	// cancelledInCall: the cancellation came before the cancelled rank's
	// call returned.
	cancelledInCall := false
	start := time.Now()
	const limit = 60 * time.Second
	errs, hung := runRanksWithin(g, limit, func(cm *Comm) error {
		r := cm.Rank()
		b := bufs[r]
		err := callRank(ctxs[r], cm, c, b)
		if cancelled[r] && cancelT.hasFired() {
			cancelledInCall = true
		}
		if errors.Is(err, ErrDeviceLost) {
			// The call gave up draining a device: the caller's memory is
			// leaked to it, by definition not the caller's any more.
			fr.mu.Lock()
			fr.declaredLost = true
			if fr.lostRanks == nil {
				fr.lostRanks = map[int]bool{}
			}
			fr.lostRanks[r] = true
			fr.mu.Unlock()
			snaps[r] = &confBufs[T]{}
			return err
		}
		if c.Path.pinned() {
			for _, h := range []*HostBuffer[T]{b.hs, b.hr} {
				if h == nil {
					continue
				}
				if busy := fr.inj.InFlight(asBytes(h.Data)); busy != "" {
					fr.fail("device work on the caller's pinned memory after return", "call %d (%s) rank %d returned (%v) while %s", i, c, r, err, busy)
				}
			}
		}
		snap := &confBufs[T]{send: append([]T(nil), b.send...), keep: b.keep}
		if b.extra != nil {
			snap.extra = append([]T(nil), b.extra...)
		}
		if b.recv != nil {
			snap.recv = append([]T(nil), b.recv...)
		}
		snaps[r] = snap
		for _, p := range []struct {
			what string
			b    []T
		}{{"send", b.send}, {"recv", b.recv}, {"async", b.extra}} {
			if len(p.b) > 0 {
				bb := asBytes(p.b)
				poison(bb)
				fr.mu.Lock()
				fr.poisoned = append(fr.poisoned, poisoned{rank: r, call: i, what: p.what, b: bb})
				fr.mu.Unlock()
			}
		}
		return err
	})
	// HostBuffers stay open until the poison check; tensors close now.
	for _, b := range bufs {
		if b.tensor != nil {
			b.tensor.Close()
		}
		b.tensor = nil
		fr.keep = append(fr.keep, b.close)
	}
	if hung != "" {
		fr.fail("hang", "call %d (%s): the ranks did not return within %v; goroutines:\n%s", i, c, limit, hung)
		return groupUnknown, false
	}
	took := time.Since(start)
	aborted := abortT.stop()
	if *faultVerbose {
		fmt.Fprintf(os.Stderr, "call %d (%s) took %v; fired: %q\n", i, c, took, fr.inj.Fired())
		for r, err := range errs {
			fmt.Fprintf(os.Stderr, "  rank %d: %v\n", r, err)
		}
	}
	anyFailed, unsupported, rejected := false, false, false
	okRanks := make([]bool, ranks)
	want := c.wantErr(s.G)
	untouched := make([]*confBufs[T], ranks) // the rejecting ranks' buffers
	for r, err := range errs {
		untouched[r] = &confBufs[T]{}
		if err == nil && want != nil {
			fr.fail("no error, want "+sentinelName(want), "call %d (%s) rank %d succeeded; want %s on every rank", i, c, r, sentinelName(want))
			continue
		}
		if err == nil {
			okRanks[r] = true
			continue
		}
		if c.unsupportedOK(s.G) && errors.Is(err, ErrUnsupported) {
			unsupported = true
			continue // an unsupported call leaves the group intact
		}
		if want != nil && errors.Is(err, want) {
			// Rejected before any data moved: the group stays intact.
			rejected = true
			fr.checkError(i, c, r, err, cancelled[r])
			untouched[r] = snaps[r]
			continue
		}
		anyFailed = true
		fr.checkError(i, c, r, err, cancelled[r])
		// A failed rank that says nothing of its buffers (no *DataError
		// with Touched) left them as they were; where the rank's error is
		// that of one of several Works (a pair of collectives, a shift's
		// SendAsync and RecvAsync), another may have succeeded.
		several := c.Path.async() && (c.Path.pair() || c.Coll == cShift || c.Coll == cPermute)
		if de := (*DataError)(nil); !several && (!errors.As(err, &de) || !de.Touched) {
			untouched[r] = snaps[r]
		}
		if aborted && !(errors.Is(err, ErrGroupBroken) && errors.Is(err, errTestAbort)) {
			fr.fail("error after Abort does not match ErrGroupBroken and the cause: "+errKind(err), "call %d (%s) rank %d: %v", i, c, r, err)
		}
	}
	// Failures are prompt: a wait gives up after CommunicationTimeout,
	// a drain after DrainLimit.
	o := faultOptions(s, "")
	if promptly := 2*(o.Config.CommunicationTimeout+o.DrainLimit) + 2*time.Second; anyFailed && took > promptly {
		fr.fail("failing call not prompt", "call %d (%s) took %v to fail (CommunicationTimeout %v, DrainLimit %v)", i, c, took, o.Config.CommunicationTimeout, o.DrainLimit)
	}
	for _, f := range checkResults(c, in, snaps, okRanks) {
		fr.fail(f.kind, "call %d (%s): %s", i, c, f.msg)
	}
	for _, f := range checkUntouched(c, in, untouched) {
		fr.fail(f.kind, "call %d (%s): %s", i, c, f.msg)
	}
	switch {
	case anyFailed || aborted:
		return groupBroken, true
	case (unsupported || rejected) && cancelledInCall:
		return groupUnknown, true
	}
	return groupIntact, true
}

// runFault is runFaultCall at the element type T.
func (elemOf[T]) runFault(fr *faultRun, i int, c confCall) (groupState, bool) {
	return runFaultCall[T](fr, i, c)
}

// barrierAfter checks the group's state after a call: if any rank failed
// (or Abort was called), every rank's next call fails promptly with
// ErrGroupBroken; else a barrier passes.
func (fr *faultRun) barrierAfter(i int, state groupState) bool {
	if state == groupUnknown {
		return true
	}
	failed := state == groupBroken
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs, hung := runRanksWithin(fr.g, 30*time.Second, func(cm *Comm) error { return Barrier(ctx, cm) })
	if hung != "" {
		fr.fail("hang", "barrier after call %d: the ranks did not return; goroutines:\n%s", i, hung)
		return false
	}
	took := time.Since(start)
	for r, err := range errs {
		switch {
		case !failed && err != nil:
			fr.fail("barrier after a successful call failed: "+errKind(err), "barrier after call %d, rank %d: %v", i, r, err)
		case failed && err == nil:
			fr.fail("barrier passed on a group a failure should have broken", "barrier after failed call %d, rank %d passed", i, r)
		case failed && !errors.Is(err, ErrGroupBroken) && !errors.Is(err, ErrClosed):
			fr.fail("later call on a broken group not ErrGroupBroken: "+errKind(err), "barrier after failed call %d, rank %d: %v", i, r, err)
		case failed && took > time.Second:
			fr.fail("later call on a broken group not prompt", "barrier after failed call %d took %v (rank %d: %v)", i, took, r, err)
		}
	}
	return true
}

// runFaultSession runs one session under its fault. fatal: a hang left
// ranks running (the process is in an unknown state).
func runFaultSession(t *testing.T, s *faultSession, vk bool) (fails []confFail, fired string, fatal bool) {
	if s.G.Backend == "vulkan" && !vk {
		s.G.Backend, s.G.DevicePerRank = "host", false
		s.Fallback = "vulkan unavailable: ran on host"
	}
	fi := faultBackend(t, s.G.Backend)

	// A fault-free run counts the calls the fault is drawn over.
	plan := faultinject.Plan{Kind: faultinject.None, Device: s.Device}
	if !s.Kind.timed() {
		dry := fi.Arm(faultinject.Plan{Kind: faultinject.None})
		if f, _, fatal := runFaultOnce(t, s, fi, dry); fatal || len(f) > 0 {
			for i := range f {
				f[i].kind = "(no fault) " + f[i].kind
			}
			return f, "", fatal
		}
		n := dry.Count(faultinject.Kind(s.Kind), s.Device)
		if n == 0 {
			return nil, "", false // nothing to fail (for example all lengths 0)
		}
		plan = faultinject.Plan{Kind: faultinject.Kind(s.Kind), Device: s.Device, K: 1 + int64(s.Frac*float64(n)), Delay: s.Delay}
		if plan.K > n {
			plan.K = n
		}
	}
	inj := fi.Arm(plan)
	return runFaultOnce(t, s, fi, inj)
}

func runFaultOnce(t *testing.T, s *faultSession, fi *faultinject.Backend, inj *faultinject.Injection) (fails []confFail, fired string, fatal bool) {
	leak := faultLeakOpts()
	g, err := NewGroup(context.Background(), faultOptions(s, fi.Name()))
	if err != nil {
		// A fault while opening (an allocation) must be a typed error.
		if !errors.Is(err, ErrDeviceLost) && !errors.Is(err, backend.ErrOutOfMemory) {
			return []confFail{{"NewGroup: " + errKind(err), fmt.Sprintf("NewGroup: %v", err)}}, inj.Fired(), false
		}
		return nil, inj.Fired(), false
	}
	fr := &faultRun{s: s, g: g, inj: inj}
	if s.Kind.timed() && s.SlowRank >= 0 {
		if sd, ok := g.devs[s.SlowRank].(interface{ Unwrap() backend.Device }); ok {
			if d, ok := sd.Unwrap().(interface{ SetDelay(time.Duration) }); ok {
				d.SetDelay(s.Delay)
			}
		}
	}
	for i, c := range s.Calls {
		state, ok := confElems[c.Type].runFault(fr, i, c)
		if !ok {
			return fr.fails, inj.Fired(), true
		}
		if !fr.barrierAfter(i, state) {
			return fr.fails, inj.Fired(), true
		}
		if state != groupIntact {
			break
		}
	}
	// One ownership draw per session, under the same faults: a collective
	// racing Close of a rank's HostBuffer, or aliased arguments.
	if g.Err() == nil && g.Size() >= 2 && len(fr.fails) == 0 {
		oc := drawOwnCase(s.Seed, g.Size())
		for _, f := range runOwnCase(g, oc, 30*time.Second, true) {
			fr.fail(f.kind, "%s: %s", oc, f.msg)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- g.Close() }()
	select {
	case err := <-closed:
		if errors.Is(err, ErrDeviceLost) {
			fr.declaredLost = true
		}
		if err != nil && !errors.Is(err, ErrDeviceLost) {
			fr.fail("Close: "+errKind(err), "Close: %v", err)
		}
	case <-time.After(60 * time.Second):
		fr.fail("hang", "Group.Close did not return; goroutines:\n%s", allStacks())
		return fr.fails, inj.Fired(), true
	}
	for _, p := range fr.poisoned {
		if at, ok := p.intact(); !ok {
			fr.fail("write after return", "call %d rank %d: the %s buffer changed after the call returned (byte %d of %d)", p.call, p.rank, p.what, at, len(p.b))
		}
	}
	for _, f := range fr.keep {
		f()
	}
	lost := inj.Lost()
	injLost := false
	for _, l := range lost {
		injLost = injLost || l
	}
	if fr.declaredLost && !injLost {
		fr.fail("device declared lost without a lost or hung device", "a call or Close returned ErrDeviceLost, but no device was lost or hung (drain limit %v)", faultOptions(s, "").DrainLimit)
	}
	for d, n := range inj.Live() {
		// A lost device's memory is leaked; the core may leak the whole
		// group's rather than guess which a lost device can still reach.
		if n != 0 && !lost[d] && !(fr.declaredLost && injLost) {
			fr.fail("device memory leaked", "device %d: %d buffers allocated and never closed", d, n)
		}
	}
	if err := goleak.Find(leak...); err != nil {
		// A device declared lost is never closed: its queue's worker may
		// stay (one per lost device), nothing else.
		nlost := 0
		for d, l := range lost {
			if l || fr.lostRanks[d] {
				nlost++
			}
		}
		extra := strings.Split(err.Error(), "Goroutine ")[1:]
		workers := 0
		for _, gr := range extra {
			if strings.Contains(gr, "host.(*Device).run(") {
				workers++
			}
		}
		if workers != len(extra) || workers > nlost {
			fr.fail("goroutines leaked", "%d devices lost; %v", nlost, err)
		}
	}
	if s.G.Backend == "vulkan" {
		checkValidation(t)
	}
	return fr.fails, inj.Fired(), false
}

// TestFaultInjection drives faults over the conformance sessions.
func TestFaultInjection(t *testing.T) {
	seed, n := confBudget(t, faultSeedFlag, faultCasesFlag, "GOCOLL_FAULT", 800, 40)
	vk := haveVulkan(t)
	t.Logf("fault injection: %d sessions from seed %d (vulkan %v); replay one with %s", n, seed, vk, confReplay("TestFaultInjection", "fault", seed))
	var fails []confFailure
	hangs := 0
	defer func() { confSummary(t, "TestFaultInjection", "fault", fails) }()
	firedBy := map[string][2]int{}
	byType := map[string]int{}
	for i := 0; i < n; i++ {
		s := drawFaultSession(seed + uint64(i))
		if *faultOnly != "" && s.Kind.String() != *faultOnly {
			continue
		}
		fmt.Fprintf(os.Stderr, "fault injection: session seed=%d\n", s.Seed)
		for _, c := range s.Calls {
			byType[c.Type.String()]++
		}
		failures, fired, fatal := runFaultSession(t, s, vk)
		st := firedBy[s.Kind.String()]
		st[1]++
		if fired != "" || s.Kind.timed() {
			st[0]++
		}
		firedBy[s.Kind.String()] = st
		if len(failures) > 0 {
			var msgs []string
			for _, f := range failures {
				msgs = append(msgs, f.msg)
				fails = append(fails, confFailure{seed: s.Seed, what: s.Kind.String() + ": " + f.kind})
			}
			t.Errorf("%s\nfired: %s\n%s\nreplay: %s", strings.Join(msgs, "\n"), fired, s, confReplay("TestFaultInjection", "fault", s.Seed))
		}
		if fatal {
			// The hung session's goroutines stay blocked on its own group;
			// later sessions use new groups, so go on, up to a point.
			if hangs++; hangs == 3 {
				t.Fatalf("stopping after %d hung sessions", hangs)
			}
		}
	}
	t.Logf("faults fired / sessions by kind: %v; calls by element type: %v", firedBy, byType)
}
