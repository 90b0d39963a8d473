package collective

import (
	"context"
	"errors"
	"fmt"
	"github.com/gocoll/gocoll/internal/completion"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/internal/algo"
	"github.com/gocoll/gocoll/internal/bell"
	"github.com/gocoll/gocoll/internal/board"
	"github.com/gocoll/gocoll/internal/bufpool"
	"github.com/gocoll/gocoll/internal/calllog"
	"github.com/gocoll/gocoll/internal/channel"
	"github.com/gocoll/gocoll/internal/devopen"
	"github.com/gocoll/gocoll/internal/direct"
	"github.com/gocoll/gocoll/internal/importcache"
	"github.com/gocoll/gocoll/internal/liveness"
	"github.com/gocoll/gocoll/internal/native"
	"github.com/gocoll/gocoll/internal/opqueue"
	"github.com/gocoll/gocoll/internal/p2p"
	"github.com/gocoll/gocoll/internal/parktimer"
	"github.com/gocoll/gocoll/internal/pin"
	"github.com/gocoll/gocoll/internal/premul"
	"github.com/gocoll/gocoll/internal/rootcause"
	"github.com/gocoll/gocoll/internal/runranks"
	"github.com/gocoll/gocoll/internal/steps"
	"github.com/gocoll/gocoll/internal/subgroups"
	"github.com/gocoll/gocoll/internal/vexchange"
	"github.com/gocoll/gocoll/internal/waitctx"
	"github.com/gocoll/gocoll/internal/waitfor"
	"github.com/gocoll/gocoll/internal/waitrec"
)

// Options say how to open a Group.
type Options struct {
	// Ranks is the number of ranks (>= 1). Each rank is driven by its own
	// goroutine, as with NCCL.
	Ranks int
	// Backend is "", "auto", "vulkan", "metal" or "host". "" reads the
	// environment variable GOCOLL_BACKEND, then behaves as "auto": metal
	// (darwin), vulkan, then host, each unavailable one skipped with a reason
	// (Group.Skipped).
	Backend string
	// Devices maps ranks to device indices of the backend. nil places rank r
	// on device r mod D. Several ranks may share one physical device: each
	// rank has its own queue (see DevicePerRank).
	Devices []int
	// Config tunes the group; it must pass Validate (start from DefaultConfig).
	Config Config
	// MaxBindingBytes, when > 0, lowers the largest range one kernel binding
	// covers (a test hook that makes the split path run on small tensors).
	MaxBindingBytes int64
	// DisableFloat64 makes every device report no f64 support, so f64 is
	// reduced exactly on the host path (a test hook).
	DisableFloat64 bool
	// Validation turns on the API validation layer where the backend has one.
	Validation bool
	// DevicePerRank opens one logical device per rank, the layout of
	// separate GPUs. By default the ranks of a group placed on the same
	// physical device share one logical device (one GPU context: no context
	// switch between the ranks' submissions), each with its own queue where
	// the device has enough; the shared device is the group's own, so a
	// device lost in one group leaves other groups alone. GOCOLL_SHARE_DEVICE=0
	// sets it too. Backends without logical devices (host, Metal) ignore it.
	DevicePerRank bool
	// ChunkBytes is the size of one exchange slot: algorithms move data in
	// slices of at most this many bytes, so exchange and reduction of
	// different slices overlap. 0 means 32 MiB for a group of one process
	// on discrete GPUs (every exchange step costs a submission and a fence
	// wait, and a GPU context switch between logical devices: large steps
	// keep ring and tree near their traffic floor), else 1 MiB. Slots are
	// allocated on a link's first use, 2 per link.
	ChunkBytes int
	// Transport, when set, makes the group span processes (one Group per
	// process, each with Ranks local ranks, the same number everywhere):
	// global rank = process rank * Ranks + local index. The mpi package
	// provides one over MPI. Collectives exchange between processes through
	// it; the hierarchical strategy's groups are then the processes. A
	// Transport of one process (Size 1: mpirun -np 1, an MPI singleton)
	// makes a group of one process, which works exactly as one without a
	// Transport (strategy Host, Auto's cost model, Split within the
	// process) and never calls the transport.
	Transport backend.Transport
	// Logger receives debug logs; nil uses GOCOLL_DEBUG (INFO or TRACE) to
	// decide whether to log to stderr.
	Logger *slog.Logger
	// ImportCacheBytes: negative turns importing plain Go slices off for
	// the group (every plain slice is staged). A collective of a large slice
	// (4 MiB or more) of Go heap memory on a device that imports host memory
	// imports it the first time and reads and writes it in place from then
	// on, with no staging copy (as HostBuffer does); the imports are kept
	// within one budget per process (SetImportCacheBytes) and never keep a
	// slice alive. 0 (the default) leaves the group to that budget alone;
	// a positive value (at least 4 MiB) also bounds the imports the group's
	// ranks keep, all together.
	//
	// Deprecated: it bounded each rank's imports; set the process's budget
	// with SetImportCacheBytes or GOCOLL_IMPORT_CACHE instead. Negative
	// values keep turning importing off.
	ImportCacheBytes int64
	// DrainLimit bounds how long a failing call, Close and HostBuffer.Close
	// wait for a device to finish work that still uses a caller's memory;
	// past it the device is declared lost (ErrDeviceLost) and its memory is
	// leaked, never freed under it. 0 means 10 s (lower it in tests). It
	// also bounds how long a call of strategy Native whose wait ended waits
	// for the transport's collective (MPI cannot cancel one) to release the
	// caller's memory: past it the transport is declared lost, the error
	// matches ErrTransportLost, and MPI may still write that memory, which
	// stays pinned: do not reuse it.
	DrainLimit time.Duration

	// parent: a sub-group's parent (Split), whose cost model it takes
	// over instead of measuring the same devices again (auto.go).
	parent *Group
}

// MaxRanks is the largest number of ranks of one process a Group accepts.
// Memory per group grows linearly with the ranks (a few KiB each before the
// first call; an all-reduce's buffers come on first use).
const MaxRanks = 4096

// Skip records a backend that selection passed over, and why.
type Skip struct {
	Backend string
	Reason  string
}

// LevelTrace is the slog level of GOCOLL_DEBUG=TRACE (per-call details;
// internal/calllog's).
const LevelTrace = slog.LevelDebug - 4

// Group is a set of ranks that run collectives together. Create it with
// NewGroup; each rank's goroutine uses its own Comm.
type Group struct {
	n    int // ranks in the group, every process's
	nl   int // ranks in this process
	base int // global rank of this process's first rank
	tr   backend.Transport
	// nc is tr's native collectives (nil: none, or one process).
	nc      backend.NativeCollectives
	trOwned bool   // tr is the group's own duplicate of Options.Transport
	ctrl    *ctrl  // control messages between the processes
	nproc   int    // >= 2 with tr; tr is nil in a group of one process, over a Transport of size 1 too
	fpBuf   []byte // cross-process fingerprint exchange
	fpAll   []byte
	cfg     Config
	opts    Options
	// Sub-groups made by Split (split.go), closed with the group.
	kids      subgroups.Set[*Group]
	bk        string
	skipped   []devopen.Skip
	placement []int
	devs      []backend.Device
	infos     []backend.DeviceInfo
	comms     []*Comm
	log       *slog.Logger
	logCalls  bool

	bar barrier

	slotBytes int
	links     []*link        // links[a*n+b]: from rank a to rank b
	all       []int          // 0..n-1
	hier      algo.Hierarchy // the hierarchical strategy's groups of LocalGroupSize ranks
	pub       board.Board    // what each rank publishes to its peers for the current call (one process)
	// sharedMem: one process, and every rank's device can use every other
	// rank's buffers (one shared logical device, or the host backend):
	// device-resident collectives exchange through device memory.
	sharedMem bool
	// sharedDone is the number of the last shared-memory collective whose
	// device work completed (the leader stores it; sharedRun).
	sharedDone atomic.Uint64
	model      costModel
	kernels    backend.DTypeSet // the element types every rank's device reduces in kernels
	linkMu     sync.Mutex
	linkMap    map[int64]*link // created on first use: memory linear in the ranks used

	drainLimit time.Duration
	access     atomic.Int64 // ranks reading or writing peers' memory (direct algorithms)

	closed    atomic.Bool
	brokenMu  sync.Mutex
	broken    error
	isBroken  atomic.Bool // broken != nil, readable without brokenMu
	brokenBy  *BrokenError
	brokenCh  chan struct{}
	closeOnce sync.Once
	closeErr  error

	// Liveness (liveness.go, internal/liveness): the local ranks gone, the
	// alert channel an exchange wait sleeps on (a rank went, or the group
	// broke: see waitOn), and the watchdog that logs long waits.
	live     liveness.Board
	watchdog liveness.Watchdog
	// parentRanks: an in-process sub-group's ranks in the parent group
	// (Split); a rank gone from the parent's Run is gone here too.
	parentRanks []int
}

// Comm is one rank's handle on a Group. Calls on one Comm must come from one
// goroutine at a time; concurrent use is detected and returns
// ErrConcurrentUse.
type Comm struct {
	g     *Group
	rank  int // global rank
	local int // index among this process's ranks
	dev   backend.Device
	info  backend.DeviceInfo

	seq   uint64 // collectives started on this comm
	op    string // the operation running
	strat Strategy
	wt    parktimer.Timer // the timer of its parked waits
	bell  bell.Bell       // see internal/bell
	wake  chan struct{}

	// running is the queued operation the comm's worker runs now: the
	// memory it resolved counts as held by the calls it makes (resolve.go).
	running atomic.Pointer[workRec]
	recs    completion.Pool[workRec] // point-to-point operations' free records (async.go)

	vxState vexchange.Scratch // pooled scratch of the V kinds (vcoll.go, slicecoll.go)
	// nat: the leader's pooled host memory of strategy Native
	// (native.go, internal/native), given up to the transport when MPI
	// kept it; lead: the call's leader (nativeRun).
	nat   native.Pools
	lead  native.Leader
	queue opqueue.Queue[*workRec] // its asynchronous operations, and who holds the comm (async.go, stream.go)
	wctx  waitctx.Ctx
	last  backend.Fence // the last submission (queues are FIFO)
	// unsubmitted: a pinned upload was recorded but not submitted yet.
	unsubmitted bool
	sharedCalls uint64 // shared-memory collectives this comm started (sharedRun)
	lost        error  // the device was declared lost (guarded by g.brokenMu)
	links       map[int64]*link

	// PreMulSum's live ops and the scaled inputs (premulsum.go): in host
	// memory, or a tensor's in preMulDev (preMulT, in place of the
	// caller's preMulIn), an integer scalar for its Prod in preMulFill
	// (written once while preMulFilled says it holds the call's).
	preMul       premul.Table
	preMulBuf    premul.Scratch
	preMulDev    backend.Buffer
	preMulFill   backend.Buffer
	preMulFilled premul.Filled
	preMulIn     *tcore
	preMulT      tcore
	preMulSrcs   [2]backend.Region

	// lane is the point-to-point engine (internal/p2p); p2pSeq numbers
	// the point-to-point calls, and inP2P says the running synchronous
	// call is one (both owned by the comm's running operation).
	lane   p2p.Engine
	p2pSeq uint64
	inP2P  bool

	// Pooled buffers: grown on demand, reused across calls.
	stage  backend.Buffer // host-visible: this rank's input, then its reduced slice
	gather backend.Buffer // host-visible: the slices of every rank that this rank reduces
	srcs   []backend.Region
	dsts   []backend.Region
	held   []channel.Held // peers' link slots read in place by work not yet complete
	// recvBytes counts the bytes this rank took from its links (tests
	// compare algorithms' traffic with it, whether a slot was copied or
	// read in place).
	recvBytes int64
	work      backend.Buffer // device-local: the tensor the algorithms work on
	inbox     backend.Buffer // host-visible: received slices, one slot per peer
	k         call
	rot       []int
	alg       algo.Rank   // the algorithms' runner over stp (ring.go: algo)
	stp       steps.Steps // the exchange steps (internal/steps)

	pins *pin.Rank // the pinned HostBuffers this rank's device imported
	// The rank's side of the cache of imported Go slices (goimport.go).
	goImp *importcache.Rank

	dx      direct.Exchange // the direct all-reduce's state (allreduce.go)
	copying copyBatch       // parallel host copies in flight

	// Liveness (liveness.go). gone: the rank is gone (nil: alive). calls,
	// p2pCalls: its latest call numbers, readable by any goroutine (the
	// operations of a synchronous point-to-point call it is blocked in are
	// its lane's: p2p.Engine.Block); dl: the deadlock walk's scratch.
	// waitRec: what the rank waits for now.
	gone     liveness.Rank
	calls    atomic.Uint64
	p2pCalls atomic.Uint64
	dl       waitfor.Walker
	waitRec  waitrec.Record
}

// NewGroup opens Ranks ranks on the selected backend.
func NewGroup(ctx context.Context, opts Options) (*Group, error) {
	return newGroup(ctx, opts, false)
}

// newGroup is NewGroup. own: opts.Transport is the group's own (a
// sub-communicator Split made): the group works on it without duplicating
// it, and closes it with the group, or before returning when it fails.
func newGroup(ctx context.Context, opts Options, own bool) (_ *Group, err error) {
	if own && opts.Transport != nil {
		defer func() {
			if err != nil {
				opts.Transport.Close()
			}
		}()
	}
	for _, chk := range []struct {
		bad           bool
		field, reason string
	}{
		{opts.Ranks < 1 || opts.Ranks > MaxRanks, "Ranks", fmt.Sprintf("must be in [1, %d], got %d", MaxRanks, opts.Ranks)},
		{opts.DrainLimit < 0, "DrainLimit", "must be >= 0"},
		{opts.MaxBindingBytes < 0, "MaxBindingBytes", "must be >= 0"},
		{opts.ChunkBytes < 0 || (opts.ChunkBytes > 0 && opts.ChunkBytes < 64), "ChunkBytes", fmt.Sprintf("must be 0 (default) or >= 64, got %d", opts.ChunkBytes)},
		{opts.Devices != nil && len(opts.Devices) != opts.Ranks, "Devices", fmt.Sprintf("has %s for %s", plural(len(opts.Devices), "entry", "entries"), plural(opts.Ranks, "rank", "ranks"))},
	} {
		if chk.bad {
			return nil, &ConfigError{Field: chk.field, Reason: chk.reason}
		}
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	opts.Config = opts.Config.WithDefaults()
	if b := opts.ImportCacheBytes; b > 0 && b < importcache.MinBytes {
		return nil, &ConfigError{Field: "ImportCacheBytes", Reason: fmt.Sprintf("must be 0 (default), negative (off) or >= %d, got %d", importcache.MinBytes, b)}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if os.Getenv("GOCOLL_SHARE_DEVICE") == "0" {
		opts.DevicePerRank = true
	}
	g := &Group{n: opts.Ranks, nl: opts.Ranks, cfg: opts.Config, opts: opts, brokenCh: make(chan struct{}),
		drainLimit: opts.DrainLimit, linkMap: map[int64]*link{}}
	if g.drainLimit == 0 {
		g.drainLimit = 10 * time.Second
	}
	g.live.Init()
	g.log, g.logCalls = calllog.New(opts.Logger)
	opened := false
	tr := opts.Transport
	if tr != nil && tr.Size() == 1 && tr.Rank() == 0 {
		// A transport of one process (mpirun -np 1, an MPI singleton): the
		// group is a group of one process, and works as one without a
		// Transport. It never calls the transport; one it owns (a Split's)
		// it closes with the outcome, as it would have.
		if own {
			defer func(tr backend.Transport) {
				if err == nil {
					tr.Close()
				}
			}(tr)
		}
		tr = nil
	}
	if tr != nil {
		if opts.Config.Strategy == Host {
			return nil, &ConfigError{Field: "Strategy", Reason: fmt.Sprintf("host reduces in one process; a group over a Transport of %s spans processes", plural(tr.Size(), "process", "processes"))}
		}
		if err := g.joinProcesses(ctx, tr, own); err != nil {
			return nil, err
		}
		defer func() {
			if !opened && g.trOwned && !own {
				g.tr.Close() // a duplicate (own: closed above)
			}
		}()
	}

	ds, err := devopen.Open(devopen.Options{Backend: opts.Backend, Ranks: g.nl, Devices: opts.Devices,
		Open: backend.OpenOptions{MaxBindingBytes: opts.MaxBindingBytes, DisableFloat64: opts.DisableFloat64, Validation: opts.Validation,
			ShareDevice: !opts.DevicePerRank, DrainLimit: g.drainLimit}})
	var pe *devopen.PlacementError
	if errors.As(err, &pe) {
		return nil, &ConfigError{Field: "Devices", Reason: pe.Error()}
	}
	if err != nil {
		return nil, err
	}
	g.bk, g.skipped, g.placement, g.devs, g.infos = ds.Backend, ds.Skipped, ds.Placement, ds.Devs, ds.Infos
	g.bar.Init(g.nl)
	g.slotBytes = ds.SlotBytes(opts.ChunkBytes, g.tr != nil)
	g.pub.Init(g.n)
	g.sharedMem = g.tr == nil && g.nl > 1 && ds.SharesMemory()
	g.kernels = ds.Kernels()
	groupSize := g.cfg.LocalGroupSize
	if g.tr != nil {
		groupSize = g.nl // across processes, the hierarchy's groups are the processes
		g.nc, _ = g.tr.(backend.NativeCollectives)
	}
	g.hier = algo.NewHierarchy(g.n, groupSize)
	g.all = g.hier.All
	imports := importcache.NewGroup(max(opts.ImportCacheBytes, 0)) // 0: the process's budget alone
	for r := 0; r < g.nl; r++ {
		c := &Comm{g: g, rank: g.base + r, local: r, dev: g.devs[r], info: g.infos[r], wake: make(chan struct{}, 1),
			links: map[int64]*link{}}
		// A host rank's buffers are host memory: nothing to import.
		c.goImp = c.newImportRank(imports, opts.ImportCacheBytes < 0 || g.bk == "host")
		c.pins = pin.NewRank(c.dev, c.isLost)
		c.wt.Init()
		c.wctx.Init(g.brokenCh)
		c.initLane()
		c.queue.Init(c.runOp)
		g.comms = append(g.comms, c)
	}
	if g.log != nil {
		ds.Log(g.log, g.base)
	}
	if g.tr != nil {
		if err := g.startCtrl(g.trOwned); err != nil {
			ds.Close()
			return nil, err
		}
		// A Group dropped without Close: its control requests end and its
		// transport duplicate closes when it is collected (its devices are
		// not closed: only Close does that).
		runtime.AddCleanup(g, func(k *ctrl) { k.close() }, g.ctrl)
	}
	opened = true
	return g, nil
}

// Size returns the number of ranks (of every process).
func (g *Group) Size() int { return g.n }

// LocalSize returns the number of ranks in this process.
func (g *Group) LocalSize() int { return g.nl }

// Comm returns the Comm of this process's rank i (0 <= i < LocalSize(); in
// a single-process group that is rank i). Its Rank is the global rank. Nil
// if i is out of range.
func (g *Group) Comm(i int) *Comm {
	if i < 0 || i >= g.nl {
		return nil
	}
	return g.comms[i]
}

func (g *Group) isLocal(r int) bool { return r >= g.base && r < g.base+g.nl }

// Backend returns the name of the backend the group runs on.
func (g *Group) Backend() string { return g.bk }

// Skipped returns the backends that selection passed over, and why.
func (g *Group) Skipped() []Skip {
	var out []Skip
	for _, s := range g.skipped {
		out = append(out, Skip(s))
	}
	return out
}

// Placement returns each local rank's device index.
func (g *Group) Placement() []int { return append([]int(nil), g.placement...) }

// DeviceInfo returns local rank's device description.
func (g *Group) DeviceInfo(rank int) backend.DeviceInfo { return g.infos[rank] }

// counters returns local rank's counters at the backend seam (tests;
// diag.Counters for everyone else).
func (g *Group) counters(rank int) backend.CounterSnapshot {
	return g.devs[rank].Counters().Snapshot()
}

// Config returns the group's configuration.
func (g *Group) Config() Config { return g.cfg }

// Strategy returns the group's configured all-reduce strategy (Auto
// chooses per call).
func (g *Group) Strategy() Strategy { return g.cfg.Strategy }

// Err returns the error that broke the group, or nil.
func (g *Group) Err() error {
	if !g.isBroken.Load() {
		return nil // the steady state: no lock, so ranks never contend here
	}
	g.brokenMu.Lock()
	defer g.brokenMu.Unlock()
	return g.broken
}

// breakGroup records the first failure and wakes every waiting rank.
func (g *Group) breakGroup(b *BrokenError) {
	g.brokenMu.Lock()
	first := g.broken == nil
	if first {
		g.broken, g.brokenBy = b.Cause, b
		g.isBroken.Store(true)
		close(g.brokenCh)
	}
	g.brokenMu.Unlock()
	if first {
		g.live.Break()
	}
	if !first {
		return
	}
	for _, c := range g.comms {
		c.wctx.Fire(waitctx.ErrBroken)
		// Rendezvous and exchange waits wake on the comm's wake channel or
		// doorbell and check the group after each wake.
		c.poke()
	}
	if g.ctrl != nil && !b.remote && b != errGroupClosed {
		g.ctrl.broadcast(b)
	}
	if g.log != nil && !errors.Is(b.Cause, ErrClosed) {
		g.log.Warn("gocoll: group broken", "by", b.Rank, "op", b.Op, "seq", b.Seq, "cause", b.Cause)
	}
}

// Abort breaks the group on purpose: every call blocked on any rank, and
// every later call, returns promptly with an error that matches
// ErrGroupBroken and errors.Is(err, cause). Calls drain their own work
// before they return, as on any failure. A nil cause means ErrAborted.
// Abort may be called from any goroutine, any number of times (the first
// cause wins).
func (g *Group) Abort(cause error) {
	if cause == nil {
		cause = ErrAborted
	}
	g.breakGroup(&BrokenError{Rank: -1, Op: "Abort", Cause: cause})
}

// Run calls fn once per rank of this process, each on its own goroutine
// with the rank's Comm, and waits for all of them. A rank whose fn returns
// an error, or panics, breaks the group naming that rank (the other ranks'
// calls then fail promptly with a *BrokenError), and the ctx passed to fn
// is cancelled when Run returns or a rank fails (errgroup semantics).
//
// Run recovers a panic of fn into a *PanicError (the rank, the value
// passed to panic and the goroutine's stack; errors.As finds it, and a
// panic with an error value unwraps to it).
//
// A rank whose fn returned (with or without an error, or panicked) is gone
// once the operations it started (asynchronous ones it did not wait for)
// ended: every rank waiting for it then fails at once with an error naming
// it (ErrRankGone), where it would have waited for CommunicationTimeout.
// Run returns when every fn returned and those operations ended; the ranks
// are no longer gone after it returns.
//
// Run returns the root cause: the error of the rank whose own failure first
// broke the group (a failed call's *Error, the error its fn returned, or
// its *PanicError), never an error that only reports another rank's
// failure (a *BrokenError, or ErrRankGone of a rank that returned an
// error) while the root cause is known. So when ctx is cancelled,
// errors.Is(err, context.Canceled) holds, whichever rank noticed first. It
// is nil when every fn returned nil.
func (g *Group) Run(ctx context.Context, fn func(ctx context.Context, c *Comm) error) error {
	errs, order := runranks.Run(ctx, len(g.comms), func(ctx context.Context, i int) error { return fn(ctx, g.comms[i]) }, runranks.Hooks{
		Panicked: func(i int, v any, stack []byte) error {
			return &PanicError{Rank: g.comms[i].rank, Value: v, Stack: stack}
		},
		// This rank's own failure: it breaks the group naming the rank (a
		// no-op when a failed call of the rank, or another rank, broke it
		// first), before the rank is gone.
		Failed: func(i int, err error) {
			g.breakGroup(&BrokenError{Rank: g.comms[i].rank, Op: opRun, Cause: err, hideCtx: true})
		},
		Left: func(i int, err error) { g.comms[i].leaveRun(goneWhy(g.comms[i].rank, err)) },
	})
	for _, c := range g.comms {
		c.forgetRun()
		for _, sc := range c.subComms() {
			sc.forgetRun()
		}
	}
	return g.rootCause(errs, order)
}

// opRun is the Op of the BrokenError a rank's fn in Run records.
const opRun = "Run"

// goneWhy is why rank is gone once its fn in Run returned err.
func goneWhy(rank int, err error) string {
	var pe *PanicError
	switch {
	case err == nil:
		return GoneReturned
	case errors.As(err, &pe) && pe.Rank == rank:
		return GonePanicked
	}
	return GoneFailed
}

// rootCause picks Run's error from the ranks' errors (by local index;
// order: the failed ranks in the order they returned): the error of the
// rank that broke the group, if it is that rank's own; else the first
// error that is not another rank's failure; else the first.
func (g *Group) rootCause(errs []error, order []int) error {
	g.brokenMu.Lock()
	by := g.brokenBy
	g.brokenMu.Unlock()
	broke := -1
	if by != nil && by.Rank >= 0 && g.isLocal(by.Rank) {
		broke = by.Rank - g.base
	}
	return rootcause.Pick(errs, order, broke, derivedErr, func(err error) bool { return errors.Is(err, ErrRankGone) })
}

// derivedErr reports whether err only reports another rank's failure (or
// Abort, or Close): the group was broken when the rank noticed.
func derivedErr(err error) bool {
	var be *BrokenError
	return errors.As(err, &be)
}

// Close breaks any call in flight (ErrClosed), waits for every rank's
// queued and running operations and for the devices to go idle, and frees
// everything, except the memory of a device declared lost (leaked, never
// freed under it). It is idempotent.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		// No sub-group is made from now on; the ones being made end
		// promptly once the group is broken (a Split across processes
		// waits for the parent's transport until then), and close with
		// the others.
		g.kids.Stop()
		clean := g.Err() == nil
		g.breakGroup(errGroupClosed)
		g.closed.Store(true)
		childErrs := g.kids.Close()
		for _, c := range g.comms {
			c.queue.Close()                  // refuses new operations, waits for the queued ones
			c.waitLane(context.Background()) // the broken group fails what is pending
		}
		// Take every comm, so no call is still using its buffers.
		for _, c := range g.comms {
			c.queue.Take()
		}
		var errs []error
		lost := false
		for _, c := range g.comms {
			c.wctx.Disarm()
			c.wctx.Release()
			c.lane.Release() // its registrations on contexts' ends
			if c.lost != nil {
				lost = true
				continue // leaked: the device may still use it
			}
			errs = append(errs, bufpool.Close(&c.gather, &c.stage, &c.work, &c.inbox, &c.preMulDev, &c.preMulFill)...)
			c.pins.Close()
			c.wt.Stop()
		}
		for _, c := range g.comms {
			c.goImp.Close()
		}
		g.dropCallRefs()
		for _, l := range g.linkMap {
			l.FinishSends(clean, g.cfg.CommunicationTimeout)
		}
		if g.ctrl != nil {
			// After a failure the transport may keep requests the peers
			// never matched (their buffers stay with it): expected then,
			// not an error of Close.
			if err := g.ctrl.close(); err != nil && clean {
				errs = append(errs, fmt.Errorf("collective: closing the group's transport: %w", err))
			}
		}
		for _, l := range g.linkMap {
			// Host memory both devices imported is freed only once both
			// imports are closed (a device that cannot drain leaks it).
			errs = append(errs, l.Close(g.lostRank(l.From), g.lostRank(l.To))...)
		}
		// Every device is closed: a device drains (bounded by the drain
		// limit) before it frees anything, and one that does not drain
		// declares itself lost and leaks its memory. Buffers of a comm
		// declared lost were not closed one by one above.
		if err := devopen.CloseAll(g.devs); err != nil && !lost {
			errs = append(errs, err)
		}
		if lost {
			errs = append(errs, fmt.Errorf("collective: a device was declared lost; its memory is leaked: %w", ErrDeviceLost))
		}
		g.closeErr = errors.Join(append(childErrs, errs...)...)
		// Release the comms: later calls see ErrClosed.
		for _, c := range g.comms {
			c.queue.Release()
		}
	})
	return g.closeErr
}

// lostRank reports whether global rank r is a local rank whose device was
// declared lost.
func (g *Group) lostRank(r int) bool { return g.isLocal(r) && g.comms[r-g.base].lost != nil }

// Device returns the rank's backend device, for interoperation (for
// example vulkan.DeviceHandles). Collectives use it while they run: work a
// framework records on the same device must be ordered with them by the
// caller.
func (c *Comm) Device() backend.Device { return c.dev }

// Rank returns the comm's rank.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks in the comm's group.
func (c *Comm) Size() int { return c.g.n }

// Group returns the comm's group.
func (c *Comm) Group() *Group { return c.g }

// rotated returns the ranks root, root+1, ... (mod n): the members of a
// tree rooted at root. The slice is the comm's scratch, valid until the
// next call.
func (c *Comm) rotated(root int) []int {
	r := bufpool.Scratch(&c.rot, c.g.n)
	for i := range r {
		r[i] = (root + i) % len(r)
	}
	return r
}

// regions returns the comm's scratch of n regions (grown on first use).
func (c *Comm) regions(n int) []backend.Region { return bufpool.Scratch(&c.srcs, n) }

// dstRegions returns the comm's scratch of n destination regions.
func (c *Comm) dstRegions(n int) []backend.Region { return bufpool.Scratch(&c.dsts, n) }

// ensureWork sizes the device buffer and the inbox for a call of n bytes.
func (c *Comm) ensureWork(n int, dt backend.DType) error {
	if err := c.ensureMem(&c.work, n, backend.DeviceLocal); err != nil {
		return err
	}
	return c.ensureMem(&c.inbox, max(c.g.n, 3)*c.g.slotBytes, backend.HostVisible) // 3 slots at least
}

// ensure grows a pooled host-visible buffer to at least n bytes.
func (c *Comm) ensure(b *backend.Buffer, n int) error {
	return c.ensureMem(b, n, backend.HostVisible)
}

// ensureMem grows a pooled buffer to at least n bytes (internal/bufpool).
func (c *Comm) ensureMem(b *backend.Buffer, n int, where backend.Memory) error {
	return bufpool.Ensure(c.dev, b, n, where)
}
