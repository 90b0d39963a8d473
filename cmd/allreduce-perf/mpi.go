//go:build mpi

package main

// Multi-process runs (built with -tags mpi). Started by an MPI launcher
// (mpirun sets OMPI_COMM_WORLD_SIZE; MPICH's Hydra PMI_SIZE; PMIx launchers
// PMIX_RANK), or given --mpi, allreduce-perf initialises MPI (mpi.Init) and
// opens one collective.Group per process with the World as its Transport:
// -g is then the number of local ranks per process, and global rank =
// process * g + local index, as nccl-tests numbers ranks across processes.
// Every process runs the same sweep as the in-process command (--coll
// allreduce, allgather, reducescatter, broadcast and reduce; nccl-tests'
// counts and sizes, out of place and in place; -r names a global rank, -r
// all every rank of every process): process 0 alone prints the tables, whose
// times are the slowest rank's of every process, and whose #wrong counts are
// summed over the processes (every process checks its own ranks against the
// exact reference over every global rank, for every -d type; where every
// rank holds the same result, all-reduce, all-gather and broadcast, every
// rank's result is also compared bitwise with global rank 0's through a
// 64-bit hash gathered across the processes; a reduce-scatter rank holds
// its own block and a reduce's root alone the result, checked against the
// reference alone). The exit status is agreed
// on, so every process returns the same one. A type whose all-reduce across
// processes the backend cannot run (no kernels for it on some device, as
// for half on Vulkan today: the library returns ErrUnsupported) is refused
// before the table, as bad usage.
//
// --mpi-baseline adds MPI's own all-reduce (mpi.World.AllreduceF32/F64, that
// is MPI_Iallreduce) on local rank 0's inputs of every process, per size,
// out of place (on Go heap copies where the buffers are mpi.AllocShared
// memory: the process's own memory, as the C baseline's), verified the
// same way: four more columns (N/A for the types other than float and
// double, and for avg). It is for --coll allreduce alone.
//
// The main function is package main's; this file takes over from an init
// function when MPI is in use (flag parsing and the in-process sweep are
// shared), so the binary built without the tag is unchanged.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/internal/mpibase"
	"github.com/gocoll/gocoll/mpi"
	"github.com/spf13/pflag"
)

// corruptEnv names a test hook: the process whose number it holds changes
// one element of its first local rank's verified result before the check,
// so tests can see wrong values counted across processes.
const corruptEnv = "GOCOLL_ALLREDUCE_PERF_CORRUPT"

// launcherEnv are the variables an MPI launcher sets in the processes it
// starts: Open MPI, MPICH (Hydra, PMI), PMIx.
var launcherEnv = []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}

// launchedByMPI reports whether an MPI launcher started this process.
func launchedByMPI() bool {
	for _, v := range launcherEnv {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// launcherRank is this process's rank as the launcher's environment says
// it, before MPI starts ("" when no launcher set one).
func launcherRank() string {
	for _, v := range []string{"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"} {
		if s := os.Getenv(v); s != "" {
			return s
		}
	}
	return ""
}

// isTestBinary reports whether this is a go test binary (whose init must
// not take over).
func isTestBinary(args []string) bool {
	if strings.HasSuffix(filepath.Base(args[0]), ".test") {
		return true
	}
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-test.") {
			return true
		}
	}
	return false
}

func init() {
	if isTestBinary(os.Args) {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code, ok := mpiMain(ctx, os.Args[0], os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if ok {
		os.Exit(code)
	}
}

// mpiFlags are the flags of the mpi build.
type mpiFlags struct {
	mpi, mpiSet bool // --mpi, and whether it was given
	baseline    bool // --mpi-baseline
}

// splitMPIFlags takes --mpi and --mpi-baseline (either with one or two
// dashes, optionally =BOOL) out of args and returns the rest for
// parseFlags. The values of the other flags are skipped, so "-J --mpi"
// still names a file.
func splitMPIFlags(args []string) (rest []string, f mpiFlags, err error) {
	fs := newFlagSet(&rawFlags{}, collAllReduce)
	for i := 0; i < len(args); i++ {
		a := args[i]
		word, next := flagWord(fs, a)
		if word == "" {
			return append(rest, args[i:]...), f, nil // parseFlags reports it
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		if name == "mpi" || name == "mpi-baseline" {
			b := true
			if hasVal {
				if b, err = strconv.ParseBool(val); err != nil {
					return nil, f, usagef("--%s=%q: want true or false", name, val)
				}
			}
			if name == "mpi" {
				f.mpi, f.mpiSet = b, true
			} else {
				f.baseline = b
			}
			continue
		}
		rest = append(rest, a)
		if next && i+1 < len(args) {
			i++
			rest = append(rest, args[i])
		}
	}
	return rest, f, nil
}

// mpiMain runs the command when MPI is in use, and reports ok; otherwise it
// returns ok false and main runs the in-process command. It also prints
// the usage with the mpi build's flags.
func mpiMain(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	name := programName(prog)
	rest, f, err := splitMPIFlags(args)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2, true
	}
	if _, fs, err := parseFlags(prog, rest); errors.Is(err, pflag.ErrHelp) {
		printUsage(stdout, prog, fs)
		printMPIUsage(stdout)
		return 0, true
	}
	useMPI := f.mpi || (!f.mpiSet && launchedByMPI())
	switch {
	case useMPI:
		return runMPI(ctx, prog, rest, f.baseline, stdout, stderr), true
	case f.baseline:
		fmt.Fprintf(stderr, "%s: --mpi-baseline times MPI_Allreduce across processes: start the command with mpirun (or give --mpi)\n", name)
		return 2, true
	case f.mpiSet:
		// --mpi=false: the in-process command, even under a launcher.
		return runAs(ctx, prog, rest, stdout, stderr), true
	}
	return 0, false
}

func printMPIUsage(w io.Writer) {
	fmt.Fprintf(w, "  %-24s %s\n", "--mpi", "span processes through MPI: one group per process with -g local ranks each, global rank = process*g + local, which -r names; --coll allreduce, allgather, reducescatter, broadcast and reduce (the default when mpirun, mpiexec or another MPI launcher started the command; --mpi=false turns it off). Process 0 prints the global result")
	fmt.Fprintf(w, "  %-24s %s\n", "--mpi-baseline", "with MPI: also time MPI's own all-reduce (MPI_Iallreduce) on local rank 0's inputs of every process (copied to the Go heap where the buffers are shared), out of place, after -w warm-up calls at every size, verified too (four more columns; avg has none); then the same calls as a C program's loop in these processes on the same buffers (MPI_Iallreduce, then MPI_Test until done, every call in one call into C: two more columns, time and #wrong)")
}

// mpiColls are the collectives the multi-process sweep runs.
var mpiColls = []coll{collAllReduce, collAllGather, collReduceScatter, collBroadcast, collReduce}

// checkMPIOptions refuses what the multi-process sweep does not do;
// baseline is --mpi-baseline.
func checkMPIOptions(o *options, baseline bool) error {
	for _, c := range o.colls {
		if !slices.Contains(mpiColls, c) {
			return usagef("--coll %s: across processes (MPI) the sweep runs allreduce, allgather, reducescatter, broadcast and reduce only", c)
		}
		if baseline && c != collAllReduce {
			return usagef("--mpi-baseline: MPI's own collective is timed for --coll allreduce only, not %s", c)
		}
	}
	for _, d := range o.dtypes {
		if d.wire() != 0 {
			return usagef("--wire %s: across processes (MPI) the sweep runs no wire compression", d)
		}
	}
	if containsOp(o.ops, opPreMulSum) {
		return usagef("-o premulsum: across processes (MPI) the sweep runs the built-in ops only")
	}
	if o.jsonFile != "" {
		return usagef("-J: not written across processes (MPI) yet")
	}
	if o.plotFile != "" {
		return usagef("--plot: not drawn across processes (MPI) yet")
	}
	return nil
}

// mpiRun is one multi-process run. Its runner's out is stdout on process
// 0, discarded elsewhere; its totals (wrong values summed over the
// processes) are the footer's.
type mpiRun struct {
	*runner
	prog     string
	w        *mpi.World
	stderr   io.Writer
	baseline bool
	sync     time.Duration // bounds the waits of the bookkeeping collectives
	corrupt  bool          // the test hook is on in this process

	mpiBusbw    float64
	nmpiBusbw   int
	baseWrong   int64
	localRank0  int // global rank of local rank 0
	nprocs      int
	localRanks  int
	globalRanks int
}

// failf reports an error of this process on stderr, naming the process.
func (m *mpiRun) failf(format string, a ...any) {
	fmt.Fprintf(m.stderr, "%s: process %d of %d: %s\n", m.prog, m.w.Rank(), m.w.Size(), fmt.Sprintf(format, a...))
}

// runMPI is the command across processes. It returns the exit status,
// the same on every process when they could agree on it.
func runMPI(ctx context.Context, prog string, args []string, baseline bool, stdout, stderr io.Writer) int {
	name := programName(prog)
	o, _, err := parseFlagsFor(prog, args, true)
	if err == nil {
		err = checkMPIOptions(o, baseline)
	}
	if err != nil {
		// Every process has the same arguments: one message is enough.
		if r := launcherRank(); r == "" || r == "0" {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
		}
		return 2
	}
	w, err := mpi.Init()
	if err != nil {
		fmt.Fprintf(stderr, "%s: starting MPI: %s\n", name, oneLine(err))
		return 1
	}
	m := &mpiRun{runner: &runner{o: o, out: io.Discard}, prog: name, w: w, stderr: stderr, baseline: baseline}
	if w.Rank() == 0 {
		m.out = stdout
	}
	if p := os.Getenv(corruptEnv); p != "" && p == strconv.Itoa(w.Rank()) {
		m.corrupt = true
	}
	code, inStep := m.run(ctx)
	if !inStep {
		// A collective may be left posted, or a process is gone:
		// MPI_Finalize would wait for the others. Exit, and the launcher
		// ends the job (Open MPI: a process that exits without
		// MPI_Finalize fails the job, with this status).
		m.failf("exit status %d (without MPI_Finalize)", code)
		return code
	}
	// The status line goes out before MPI_Finalize: once a process
	// exits with a non-zero status the launcher may kill the others, and
	// Finalize is where they wait for each other.
	if code != 0 {
		fmt.Fprintf(stderr, "%s: process %d: exit status %d\n", name, w.Rank(), code)
	}
	if err := mpi.Finalize(); err != nil {
		m.failf("MPI_Finalize: %s", oneLine(err))
		if code == 0 {
			code = 1
			fmt.Fprintf(stderr, "%s: process %d: exit status %d\n", name, w.Rank(), code)
		}
	}
	return code
}

// exchange gathers every process's mine (the same length on all), with
// the run's bookkeeping deadline.
func (m *mpiRun) exchange(ctx context.Context, mine []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, m.sync)
	defer cancel()
	all := make([]byte, len(mine)*m.w.Size())
	err := m.w.Allgather(ctx, mine, all)
	return all, err
}

// agreeCode returns the largest of every process's code.
func (m *mpiRun) agreeCode(ctx context.Context, code int) (int, error) {
	all, err := m.exchange(ctx, binary.LittleEndian.AppendUint64(nil, uint64(code)))
	if err != nil {
		return code, err
	}
	for p := 0; p < m.w.Size(); p++ {
		code = max(code, int(binary.LittleEndian.Uint64(all[8*p:])))
	}
	return code, nil
}

// run opens the group, sweeps and closes it. inStep reports whether the
// processes are still in step (every collective matched), so that they can
// finalize MPI together.
func (m *mpiRun) run(ctx context.Context) (code int, inStep bool) {
	o := m.o
	cfg := collective.DefaultConfig()
	if len(o.strategies) == 1 {
		cfg.Strategy = o.strategies[0]
	}
	if o.timeout > 0 {
		cfg.CommunicationTimeout = o.timeout
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	m.sync = max(cfg.CommunicationTimeout, 30*time.Second)
	g, err := collective.NewGroup(ctx, collective.Options{
		Ranks: o.ranks, Backend: o.backend, Devices: o.devices, Config: cfg, Transport: m.w,
	})
	code = 0
	if err != nil {
		m.failf("opening %d local rank(s): %s", o.ranks, describe(err, o))
		code = 1
		if errors.Is(err, collective.ErrInvalidConfig) || errors.Is(err, collective.ErrInvalidArgument) {
			code = 2
		}
		if errors.Is(err, collective.ErrTimeout) {
			return code, false
		}
	}
	// The processes met while opening: agree on whether every one did.
	agreed, aerr := m.agreeCode(ctx, code)
	if aerr != nil {
		m.failf("agreeing on the group: %s", oneLine(aerr))
		if g != nil {
			g.Close()
		}
		return max(code, 1), false
	}
	if agreed != 0 {
		if g != nil {
			g.Close()
		}
		if code == 0 && m.w.Rank() == 0 {
			fmt.Fprintf(m.stderr, "%s: another process could not open its ranks\n", m.prog)
		}
		return agreed, true
	}
	m.g = g
	m.nprocs, m.localRanks, m.globalRanks = m.w.Size(), g.LocalSize(), g.Size()
	if !o.pinned && !o.goHeap {
		// The buffers of every sweep, in memory the node's processes share
		// (a collective of the World: every process asks, the same size).
		actx, acancel := context.WithTimeout(ctx, m.sync)
		arena, err := mpi.AllocShared[byte](actx, m.w, 2*g.LocalSize()*(int(o.maxBytes)+64))
		acancel()
		switch {
		case err == nil:
			m.arena = arena
		case errors.Is(err, collective.ErrTimeout):
			m.failf("allocating the shared buffers: %s", oneLine(err))
			g.Close()
			return 1, false
		default:
			// Every process got an error (the processes agree on the
			// allocation's outcome): the Go heap on every one.
			m.failf("allocating the shared buffers: %s; the buffers are on the Go heap", oneLine(err))
		}
	}
	m.localRank0 = g.Comm(0).Rank()
	if m.corrupt {
		testHookAfterCheck = m.corruptFirst
	}

	// -r names a rank of the whole group.
	err = o.resolveRoots(m.globalRanks)
	if err == nil {
		err = m.checkTypes(ctx)
	}
	if err != nil {
		var u *usageError
		if !errors.As(err, &u) {
			m.failf("%s", oneLine(err))
			g.Close()
			return 1, false
		}
		// The same on every process: process 0 says it, once.
		if m.w.Rank() == 0 {
			fmt.Fprintf(m.stderr, "%s: %v\n", m.prog, err)
		}
		if err := g.Close(); err != nil {
			m.failf("closing the group: %s", oneLine(err))
			return 2, false
		}
		return 2, true
	}

	runErr := m.sweepAll(ctx)
	inStep = true
	if runErr != nil {
		m.failf("%s", describe(runErr, o))
		code, inStep = 1, false
	} else {
		status := "OK"
		if m.wrong > 0 {
			status = "FAILED"
			code = 1
		}
		fmt.Fprintf(m.out, "# %-20s : %d %s\n", "Out of bounds values", m.wrong, status)
		fmt.Fprintf(m.out, "# %-20s : %.6g\n", "Avg bus bandwidth", avg(m.busbw, m.nbusbws))
		if m.baseline {
			status = "OK"
			if m.baseWrong > 0 {
				status = "FAILED"
				code = 1
			}
			fmt.Fprintf(m.out, "# %-20s : %d %s\n", "MPI_Allreduce wrong", m.baseWrong, status)
			fmt.Fprintf(m.out, "# %-20s : %.6g\n", "MPI_Allreduce busbw", avg(m.mpiBusbw, m.nmpiBusbw))
		}
		fmt.Fprintln(m.out, "#")
		if m.wrong > 0 && m.w.Rank() == 0 {
			fmt.Fprintf(m.stderr, "%s: %d wrong value(s) across %d process(es)\n", m.prog, m.wrong, m.nprocs)
		}
		if code, err = m.agreeCode(ctx, code); err != nil {
			m.failf("agreeing on the exit status: %s", oneLine(err))
			code, inStep = max(code, 1), false
		}
	}
	if err := g.Close(); err != nil {
		m.failf("closing the group: %s", oneLine(err))
		code = max(code, 1)
	}
	return code, inStep
}

func avg(sum float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// checkTypes refuses, before the table, the -d types whose all-reduce the
// group cannot run across processes: the library reduces a type without
// kernels on some device on the host, in one process only, and returns
// ErrUnsupported across processes (a reduce-scatter reduces such a type on
// the CPU, an all-gather does not reduce: they run every type). The
// processes gather their kernel sets, so every one decides the same.
func (m *mpiRun) checkTypes(ctx context.Context) error {
	all, err := m.exchange(ctx, binary.LittleEndian.AppendUint64(nil, uint64(groupKernels(m.g))))
	if err != nil {
		return fmt.Errorf("gathering the devices' kernels: %w", err)
	}
	kernels := backend.AllDTypes
	for p := 0; p < m.nprocs; p++ {
		kernels &= backend.DTypeSet(binary.LittleEndian.Uint64(all[8*p:]))
	}
	if m.globalRanks == 1 || !slices.Contains(m.o.colls, collAllReduce) {
		return nil // nothing to reduce, or no all-reduce
	}
	var missing []string
	for _, d := range m.o.dtypes {
		if !kernels.Has(d.elem()) {
			missing = append(missing, d.String())
		}
	}
	if len(missing) > 0 {
		return usagef("-d %s: an all-reduce across processes (MPI) needs kernels for the type on every device, and the %s backend has none for %s (the library returns ErrUnsupported); --backend host has kernels for every type, and in one process the library reduces them on the host",
			strings.Join(missing, ","), m.g.Backend(), strings.Join(missing, ", "))
	}
	return nil
}

// deviceRecord is the size of one rank's line of the header, gathered.
const deviceRecord = 256

// sweepAll prints the header (process 0), then every table.
func (m *mpiRun) sweepAll(ctx context.Context) error {
	o, g := m.o, m.g
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	// Every rank's header line, from every process.
	mine := make([]byte, deviceRecord*g.LocalSize())
	for i := 0; i < g.LocalSize(); i++ {
		info := g.DeviceInfo(i)
		line := fmt.Sprintf("Pid %6d on %10s device %2d [%s] %s", os.Getpid(), host, g.Placement()[i], info.Backend, info.Name)
		copy(mine[i*deviceRecord:(i+1)*deviceRecord-1], line)
	}
	lines, err := m.exchange(ctx, mine)
	if err != nil {
		return fmt.Errorf("gathering the devices: %w", err)
	}
	tables := tablesOf(o)
	w := m.out
	fmt.Fprintf(w, "# nThread 1 nGpus %d minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d agg iters: 1 validation: %d graph: 0\n",
		g.LocalSize(), o.minBytes, o.maxBytes, o.stepString(), o.warmup, o.iters, o.check)
	fmt.Fprintln(w, "#")
	version, _, _ := strings.Cut(m.w.LibraryVersion(), "\n")
	fmt.Fprintf(w, "# nProcs %d nRanks %d (%d per process; rank = process*%d + local)  Transport mpi: %s, %v\n",
		m.nprocs, m.globalRanks, m.localRanks, m.localRanks, strings.TrimSpace(strings.TrimRight(version, ",")), m.w.ThreadLevel())
	fmt.Fprintln(w, "# Using devices")
	for r := 0; r < m.globalRanks; r++ {
		rec := lines[r*deviceRecord : (r+1)*deviceRecord]
		if k := bytes.IndexByte(rec, 0); k >= 0 {
			rec = rec[:k]
		}
		fmt.Fprintf(w, "#  Rank %2d Group %2d %s\n", r, 0, rec)
	}
	skipped := "none"
	if sk := g.Skipped(); len(sk) > 0 {
		parts := make([]string, len(sk))
		for i, s := range sk {
			parts[i] = s.Backend + " (" + oneLine(errors.New(s.Reason)) + ")"
		}
		skipped = strings.Join(parts, "; ")
	}
	strategy := "one per table, named below"
	if len(tables) == 1 {
		strategy = strategyAcross(tables[0])
	}
	fmt.Fprintf(w, "# Backend %s  Strategy %s  Skipped: %s\n", g.Backend(), strategy, skipped)
	if o.pinned {
		fmt.Fprintln(w, "# Buffers: pinned host memory (collective.NewHostBuffer)")
	}
	if m.baseline {
		only := ""
		for _, d := range o.dtypes {
			if d != dtFloat && d != dtDouble {
				only = "; float and double only, N/A for the other types"
			}
		}
		fmt.Fprintf(w, "# Baseline: MPI_Iallreduce across the %d process(es) on local rank 0's buffers, out of place (busbw factor 2(P-1)/P%s)\n", m.nprocs, only)
	}
	// Types the devices have no kernels for were refused (checkTypes).
	for _, line := range typeNotes(o, backend.AllDTypes, g.Backend()) {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w, "#")
	for i, t := range tables {
		if len(tables) > 1 || t.coll != collAllReduce {
			if i > 0 {
				fmt.Fprintln(w, "#")
			}
			fmt.Fprintf(w, "# Collective %s  Strategy %s\n", t.coll, strategyAcross(t))
		}
		m.writeColumns(w)
		for _, dt := range o.dtypes {
			var err error
			switch dt {
			case dtDouble:
				err = mpiRunType[float64](ctx, m, t, dt)
			case dtInt8:
				err = mpiRunType[int8](ctx, m, t, dt)
			case dtUint8:
				err = mpiRunType[uint8](ctx, m, t, dt)
			case dtInt16:
				err = mpiRunType[int16](ctx, m, t, dt)
			case dtUint16:
				err = mpiRunType[uint16](ctx, m, t, dt)
			case dtInt32:
				err = mpiRunType[int32](ctx, m, t, dt)
			case dtUint32:
				err = mpiRunType[uint32](ctx, m, t, dt)
			case dtInt64:
				err = mpiRunType[int64](ctx, m, t, dt)
			case dtUint64:
				err = mpiRunType[uint64](ctx, m, t, dt)
			case dtHalf:
				err = mpiRunType[collective.Float16](ctx, m, t, dt)
			case dtBfloat16:
				err = mpiRunType[collective.BFloat16](ctx, m, t, dt)
			case dtF8E4M3:
				err = mpiRunType[collective.Float8E4M3](ctx, m, t, dt)
			case dtF8E5M2:
				err = mpiRunType[collective.Float8E5M2](ctx, m, t, dt)
			default:
				err = mpiRunType[float32](ctx, m, t, dt)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// strategyAcross names a table's strategy in the header. Across processes
// over MPI, Auto is the library's strategy Native wherever it can run the
// call (the transport has native collectives), else the cost model's
// choice (all-reduce) or the collective's default.
func strategyAcross(t table) string {
	if t.strategy != collective.Auto {
		return t.algorithmName()
	}
	other := "chosen per call by the cost model"
	if t.coll != collAllReduce {
		other = t.coll.algorithms()[0].String()
	}
	return fmt.Sprintf("auto (%s where it can run the call: MPI's own collective among one leader per process; else %s)", collective.Native, other)
}

func (m *mpiRun) writeColumns(w io.Writer) {
	var b bytes.Buffer
	writeColumns(&b)
	if !m.baseline {
		w.Write(b.Bytes())
		return
	}
	extra := []string{"     MPI_Allreduce (out-of-place)         its loop in C",
		fmt.Sprintf("  %7s  %6s  %6s %6s  %7s %6s", "time", "algbw", "busbw", "#wrong", "time", "#wrong"),
		fmt.Sprintf("  %7s  %6s  %6s         %7s", "(us)", "(GB/s)", "(GB/s)", "(us)")}
	for i, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		fmt.Fprintf(w, "%s%s\n", line, extra[i])
	}
}

// mpiSweep runs the rows of one table for one element type on this
// process's ranks: the in-process sweep's buffers, calls and checks, with
// the times, wrong values and hashes gathered across the processes.
type mpiSweep[T collective.Elem] struct {
	*sweep[T]
	m *mpiRun
	// MPI's own all-reduce's buffers where the sweep's are shared
	// (benchMPI), grown to the largest count once.
	bsend, brecv []T
}

func mpiRunType[T collective.Elem](ctx context.Context, m *mpiRun, t table, dt dtype) error {
	return sweepType(ctx, m.runner, t, dt, func(ctx context.Context, s *sweep[T], op collective.Op, root int) error {
		return (&mpiSweep[T]{sweep: s, m: m}).run(ctx, op, root)
	})
}

// run sweeps every size for op and root; process 0 prints the rows.
func (s *mpiSweep[T]) run(ctx context.Context, op collective.Op, root int) error {
	return s.rows(ctx, op, root, s.bench, func(sh shape, res [2]result) error {
		var b bytes.Buffer
		writeRow(&b, sh.bytes, sh.count, s.dt.String(), s.opName(op), s.rootCol(root), res)
		line := strings.TrimRight(b.String(), "\n")
		if s.m.baseline {
			base, inC, ok, err := s.benchMPI(ctx, sh, op)
			if err != nil {
				return err
			}
			if ok {
				line += fmt.Sprintf("  %7s  %6.2f  %6.2f  %5s", timeString(base.time), base.algbw, base.busbw, wrongString(base.wrong))
			} else {
				line += fmt.Sprintf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A")
			}
			if ok && inC.time > 0 {
				line += fmt.Sprintf("  %7s  %5s", timeString(inC.time), wrongString(inC.wrong))
			} else {
				line += fmt.Sprintf("  %7s  %5s", "N/A", "N/A")
			}
		}
		fmt.Fprintln(s.out, line)
		return nil
	})
}

// sameResult reports whether every rank of the group holds the same
// result, which the sweep then compares bitwise across the processes: not
// so for reduce-scatter, whose ranks hold their own blocks, nor for
// reduce, whose root alone holds the result.
func (s *mpiSweep[T]) sameResult() bool {
	return s.t.coll == collAllReduce || s.t.coll == collAllGather || s.t.coll == collBroadcast
}

// bench times one mode at one size on every rank of every process, then
// verifies it; the time is the slowest rank's, the wrong values are summed
// over the processes.
func (s *mpiSweep[T]) bench(ctx context.Context, sh shape, op collective.Op, root int, inPlace bool) (result, error) {
	slowest, _, err := s.timed(ctx, sh, op, root, inPlace)
	if err != nil {
		return result{}, err
	}
	L := len(s.comms)
	var wrong int64 = -1
	hashes := make([]uint64, L) // 0 where the ranks' results differ by design
	if s.o.check > 0 {
		if wrong, err = s.check(ctx, sh, op, root, inPlace); err != nil {
			return result{}, err
		}
		for i := range hashes {
			if s.sameResult() {
				hashes[i] = hashOf(s.output(i, sh, inPlace))
			}
		}
	}
	// One exchange: the slowest time, the wrong values and the hashes.
	mine := binary.LittleEndian.AppendUint64(nil, uint64(slowest))
	mine = binary.LittleEndian.AppendUint64(mine, uint64(wrong))
	for _, h := range hashes {
		mine = binary.LittleEndian.AppendUint64(mine, h)
	}
	all, err := s.m.exchange(ctx, mine)
	if err != nil {
		return result{}, fmt.Errorf("gathering the results: %w", err)
	}
	rec := 8 * (2 + L)
	h0 := binary.LittleEndian.Uint64(all[16:])
	var total int64
	for p := 0; p < s.m.nprocs; p++ {
		b := all[p*rec:]
		slowest = max(slowest, time.Duration(binary.LittleEndian.Uint64(b)))
		w := int64(binary.LittleEndian.Uint64(b[8:]))
		if s.o.check > 0 {
			// A rank whose result is not bitwise rank 0's, although every
			// element matched the reference (avg allows 1 ulp), counts one.
			for i := 0; i < L; i++ {
				if binary.LittleEndian.Uint64(b[16+8*i:]) != h0 && w == 0 {
					w = 1
				}
			}
			total += w
		}
	}
	res := s.rate(sh, slowest)
	s.busbw += res.busbw
	s.nbusbws++
	if s.o.check > 0 {
		res.wrong = total
		s.wrong += total
	}
	return res, nil
}

// corruptFirst is the corruptEnv hook (testHookAfterCheck): it flips the
// lowest bit of the first element of this process's first local rank's
// verified result, one unit or one ulp off for every type (fp8 and 16-bit
// floats are bit patterns).
func (m *mpiRun) corruptFirst(rank int, _ bool, result any) {
	v := reflect.ValueOf(result)
	if rank == m.localRank0 && v.Len() > 0 {
		*(*byte)(v.UnsafePointer()) ^= 1
	}
}

// countAgainst counts the elements of got (MPI's all-reduce of the
// baseline) that are not the reduction of the given ranks' inputs (float
// and double avg: within 1 ulp), and the elements of send that are not
// rank self's input any more. Split over the CPUs.
func countAgainst[T collective.Elem](vals values[T], got, send []T, ranks []int, self int, op collective.Op, rep int) int64 {
	var wrong atomic.Int64
	workers := runtime.GOMAXPROCS(0)
	chunk := max((len(got)+workers-1)/workers, 1)
	var wg sync.WaitGroup
	for lo := 0; lo < len(got); lo += chunk {
		hi := min(lo+chunk, len(got))
		wg.Go(func() {
			var w int64
			for i := lo; i < hi; i++ {
				if !vals.match(got[i], vals.reduce(op, ranks, int64(i), rep), op) {
					w++
				}
				if send[i] != vals.input(op, self, int64(i), rep) {
					w++
				}
			}
			wrong.Add(w)
		})
	}
	wg.Wait()
	return wrong.Load()
}

// hashOf is a 64-bit FNV-1a style hash of x's bits, a word at a time.
func hashOf[T collective.Elem](x []T) uint64 {
	h := uint64(14695981039346656037)
	if len(x) == 0 {
		return h
	}
	var z T
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), len(x)*int(unsafe.Sizeof(z)))
	for len(b) >= 8 {
		h = (h ^ binary.LittleEndian.Uint64(b)) * 1099511628211
		b = b[8:]
	}
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

// mpiOp maps a collective op onto MPI's; avg has none.
func mpiOp(op collective.Op) (backend.Op, bool) {
	switch op {
	case collective.Sum:
		return backend.Sum, true
	case collective.Prod:
		return backend.Prod, true
	case collective.Max:
		return backend.Max, true
	case collective.Min:
		return backend.Min, true
	}
	return 0, false
}

// wrongString is a #wrong column: N/A where checking is off.
func wrongString(wrong int64) string {
	if wrong < 0 {
		return "N/A"
	}
	return fmt.Sprint(wrong)
}

// benchMPI times MPI's all-reduce across the processes on local rank 0's
// inputs, out of place, then verifies it against the reduction of every
// process's local rank 0 inputs. inC is the same all-reduce timed as a C
// program's loop (MPI_Iallreduce, then MPI_Test until done, every call in
// one call into C: mpibase.IallreduceLoop) in these processes on the same
// buffers right after, verified the same way: the peer of World's calls
// with the same placement, thread level and memory (time 0 where the mpi
// package has no such loop). ok is false for ops MPI lacks (avg) and
// for the types the mpi package's all-reduce lacks (all but float and
// double). Where the sweep's buffers are shared (mpi.AllocShared, for
// gocoll's calls to read where they lie), MPI's runs on copies on the Go
// heap: memory of the process's own, as the C baseline's malloc'd buffers
// it is compared with (E).
func (s *mpiSweep[T]) benchMPI(ctx context.Context, sh shape, op collective.Op) (res, inC result, ok bool, err error) {
	bop, ok := mpiOp(op)
	if !ok || (s.dt != dtFloat && s.dt != dtDouble) {
		return result{}, result{}, false, nil
	}
	n := sh.count
	send, recv := s.send[0][:n], s.recv[0][:n]
	own := s.m.arena != nil
	if own {
		if int64(len(s.bsend)) < n {
			s.bsend, s.brecv = make([]T, n), make([]T, n)
		}
		copy(s.bsend, send)
		send, recv = s.bsend[:n], s.brecv[:n]
	}
	allreduce := func() error {
		cctx, cancel := context.WithTimeout(ctx, s.m.sync)
		defer cancel()
		switch x := any(send).(type) {
		case []float32:
			return s.m.w.AllreduceF32(cctx, x, any(recv).([]float32), bop)
		case []float64:
			return s.m.w.AllreduceF64(cctx, x, any(recv).([]float64), bop)
		}
		return nil
	}
	// Warm-up: -w calls at every size (at least one), as mpi/bench.sh's C
	// baseline (columns D and E) warms up before each size's timed calls.
	for range max(s.o.warmup, 1) {
		if err := allreduce(); err != nil {
			return result{}, result{}, true, fmt.Errorf("MPI_Allreduce: %w", err)
		}
	}
	bctx, cancel := context.WithTimeout(ctx, s.m.sync)
	err = s.m.w.Barrier(bctx)
	cancel()
	if err != nil {
		return result{}, result{}, true, fmt.Errorf("MPI_Barrier: %w", err)
	}
	start := time.Now()
	for k := 0; k < s.o.iters; k++ {
		if err := allreduce(); err != nil {
			return result{}, result{}, true, fmt.Errorf("MPI_Allreduce: %w", err)
		}
	}
	elapsed := time.Since(start)
	var wrong int64 = -1
	if s.o.check > 0 {
		s.rep++
		rep := s.rep
		s.fill(0, sh, op, -1, false, rep)
		if own {
			copy(send, s.send[0][:n])
		}
		if err := allreduce(); err != nil {
			return result{}, result{}, true, fmt.Errorf("MPI_Allreduce: %w", err)
		}
		firsts := make([]int, s.m.nprocs)
		for p := range firsts {
			firsts[p] = p * s.m.localRanks
		}
		wrong = countAgainst(s.vals, recv, send, firsts, s.first, op, rep)
	}
	// The C loop on the same buffers (the inputs of the check, where it
	// ran), warmed up and started together as the calls above.
	var cTook time.Duration
	var cWrong int64 = -1
	if loop := mpibase.IallreduceLoop; loop != nil {
		sp, rp := unsafe.Pointer(unsafe.SliceData(send)), unsafe.Pointer(unsafe.SliceData(recv))
		bdt := backend.F32
		if s.dt == dtDouble {
			bdt = backend.F64
		}
		cctx, cancel := context.WithTimeout(ctx, s.m.sync)
		_, err := loop(cctx, s.m.w, sp, rp, int(n), bdt, bop, max(s.o.warmup, 1))
		if err == nil {
			err = s.m.w.Barrier(cctx)
		}
		if err == nil {
			cTook, err = loop(cctx, s.m.w, sp, rp, int(n), bdt, bop, s.o.iters)
		}
		cancel()
		if err != nil {
			return result{}, result{}, true, fmt.Errorf("MPI_Iallreduce from C: %w", err)
		}
		if s.o.check > 0 {
			firsts := make([]int, s.m.nprocs)
			for p := range firsts {
				firsts[p] = p * s.m.localRanks
			}
			cWrong = countAgainst(s.vals, recv, send, firsts, s.first, op, s.rep)
		}
	}
	mine := binary.LittleEndian.AppendUint64(nil, uint64(elapsed))
	mine = binary.LittleEndian.AppendUint64(mine, uint64(wrong))
	mine = binary.LittleEndian.AppendUint64(mine, hashOf(recv))
	mine = binary.LittleEndian.AppendUint64(mine, uint64(cTook))
	mine = binary.LittleEndian.AppendUint64(mine, uint64(cWrong))
	all, err := s.m.exchange(ctx, mine)
	if err != nil {
		return result{}, result{}, true, fmt.Errorf("gathering the results: %w", err)
	}
	var total, cTotal int64
	for p := 0; p < s.m.nprocs; p++ {
		b := all[40*p:]
		elapsed = max(elapsed, time.Duration(binary.LittleEndian.Uint64(b)))
		w := int64(binary.LittleEndian.Uint64(b[8:]))
		if s.o.check > 0 && w == 0 && binary.LittleEndian.Uint64(b[16:]) != binary.LittleEndian.Uint64(all[16:]) {
			w = 1
		}
		total += w
		cTook = max(cTook, time.Duration(binary.LittleEndian.Uint64(b[24:])))
		cTotal += max(int64(binary.LittleEndian.Uint64(b[32:])), 0)
	}
	inC = result{time: cTook / time.Duration(max(s.o.iters, 1)), wrong: -1}
	if s.o.check > 0 && cTook > 0 {
		inC.wrong = cTotal
		s.m.baseWrong += cTotal
	}
	res = result{time: elapsed / time.Duration(s.o.iters), wrong: -1}
	if sec := res.time.Seconds(); sec > 0 {
		res.algbw = float64(int64(n)*s.dt.size()) / 1e9 / sec
		res.busbw = res.algbw * collAllReduce.busFactor(s.m.nprocs)
	}
	s.m.mpiBusbw += res.busbw
	s.m.nmpiBusbw++
	if s.o.check > 0 {
		res.wrong = total
		s.m.baseWrong += total
	}
	return res, inC, true, nil
}
