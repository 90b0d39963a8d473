// Command allreduce-perf is gocoll's main job: an nccl-tests-style sweep of
// a collective over a range of sizes, with every result verified.
//
// It runs -g ranks in one process, one goroutine per rank, on the backend
// chosen as collective.NewGroup chooses it (--backend, else GOCOLL_BACKEND,
// else metal, vulkan, host). For each collective (--coll: allreduce by
// default, reducescatter, allgather, broadcast, reduce, alltoall, gather,
// scatter, scan, exscan, sendrecv), strategy (-a),
// element type, op, root and size it runs warm-up iterations, times -n
// iterations out of place and in place, and, with -c, resets the inputs,
// runs once more and compares every element of every rank with an exact
// reference. The flags, the table and the closing lines follow nccl-tests
// (all_reduce_perf, reduce_scatter_perf, all_gather_perf, broadcast_perf,
// reduce_perf, alltoall_perf, gather_perf, scatter_perf, sendrecv_perf), so results compare line by line:
//
//	allreduce-perf -g 4 -b 8 -e 8M -f 4
//	allreduce-perf --coll broadcast -r all -g 3 -b 8 -e 1M -f 8
//
// algbw is size(B) over the time; busbw is algbw times nccl-tests' factor
// for n ranks where nccl-tests has the collective: allreduce 2(n-1)/n;
// reducescatter, allgather, alltoall, gather and scatter (n-1)/n;
// broadcast, reduce and sendrecv 1. scan and exscan, which nccl-tests
// lacks, take (n-1)/n (below). -h lists them.
//
// Invoked under another name (a symlink or copy) named reducescatter-perf,
// allgather-perf, broadcast-perf or reduce-perf (or nccl-tests'
// reduce_scatter_perf, ...), the binary runs that collective by default.
//
// sendrecv is nccl-tests' sendrecv_perf: each rank sends its buffer (the
// size) to rank (r+1) mod N and receives from (r-1+N) mod N with
// collective.SendRecv (on one rank, to and from itself); in place sends
// and receives one buffer, as the library allows; busbw = algbw. scan and
// exscan, which nccl-tests lacks, are the prefix reductions
// collective.Scan and collective.Exscan (per-rank count as all-reduce, an
// op but no avg, no root): rank r's result is checked against ranks
// 0..r's inputs (exscan: 0..r-1; rank 0's buffer must be left as it was),
// and busbw = algbw*(N-1)/N, the traffic of a chain in which every rank but
// the last forwards one partial.
//
// -d takes nccl-tests' types: float, double, int8, uint8, int32, uint32,
// int64, uint64, half, bfloat16, fp8e4m3 and fp8e5m2 (collective.Float16,
// BFloat16, Float8E4M3 and Float8E5M2; nccl-tests' names f8e4m3 and f8e5m2
// too), and int16 and uint16, which nccl-tests lacks, a comma list of them,
// or all (every one: nccl-tests' in its order, then int16 and uint16);
// size(B) and count use the type's size (1, 2, 4 or 8
// bytes), and count is what nccl-tests prints: the elements of one rank's
// call, which the collectives that split the buffer among the ranks
// (reducescatter, allgather, alltoall, gather, scatter) round down to whole
// 16-byte groups, their size(B) being the full buffer (3 ranks, -b 1K of
// float: count 84, size 1008). Every collective runs every type, and the inputs make each
// reference exact whatever the reduction order and the number of rounding
// steps: the integer types take any odd value (for land, lor and lxor half
// of them 0) and are reduced in their own wrapping arithmetic; the float
// types take small integers and powers of
// two, capped for half, bfloat16 and the fp8 types so that every partial
// sum and product is exact in the type for any number of ranks (avg: float32(sum/N) rounded
// to the type; float and double avg may be 1 ulp off; the integer types' avg
// is NCCL's, the wrapped sum divided once by N, truncated toward zero,
// checked exactly). band, bor, bxor, land, lor and lxor (MPI's bitwise and
// logical ops) are not defined for the float types: -o band with a float
// type is bad usage, and -o all skips them (the header says so).
//
// --wire half and --wire bfloat16 (what -d half and -d bfloat16 meant
// before they became the 16-bit types) all-reduce float32 data, -d float,
// whose exchange is compressed to 16 bits (collective.AllReduceWire,
// ring): the type column names the wire type and size(B) counts 2 bytes
// per element, as nccl-tests does for those types (so count = size/2, and
// the user buffer holds count float32 values), and #wrong counts elements
// outside collective.WireErrorBound. -J writes the run as JSON, --plot
// draws busbw and algbw against size (PNG or SVG), -a all sweeps every
// all-reduce strategy (one table each), --pinned allocates the buffers
// with collective.NewHostBuffer.
//
// Exit status: 0 when every value is right, 1 on wrong values or a library
// error (printed on stderr), 2 on bad usage (one line on stderr).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/spf13/pflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := runAs(ctx, os.Args[0], os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command as allreduce-perf: it parses args, runs the
// sweep and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runAs(context.Background(), "allreduce-perf", args, stdout, stderr)
}

// runAs is the command invoked as prog (os.Args[0]: its base name sets the
// default --coll and the name in messages).
func runAs(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) int {
	name := programName(prog)
	o, fs, err := parseFlags(prog, args)
	if errors.Is(err, pflag.ErrHelp) {
		printUsage(stdout, prog, fs)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}

	cfg := collective.DefaultConfig()
	if len(o.strategies) == 1 {
		// The group's strategy is what reduce-scatter honours; all-reduce
		// passes its table's strategy on every call.
		cfg.Strategy = o.strategies[0]
	}
	if o.timeout > 0 {
		cfg.CommunicationTimeout = o.timeout
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	g, err := collective.NewGroup(ctx, collective.Options{
		Ranks:   o.ranks,
		Backend: o.backend,
		Devices: o.devices,
		Config:  cfg,
	})
	if err != nil {
		fmt.Fprintf(stderr, "%s: opening %d rank(s): %s\n", name, o.ranks, describe(err, o))
		if errors.Is(err, collective.ErrInvalidConfig) || errors.Is(err, collective.ErrInvalidArgument) {
			return 2
		}
		return 1
	}

	code := sweepAll(ctx, o, g, stdout, stderr)
	if err := g.Close(); err != nil {
		fmt.Fprintf(stderr, "%s: closing the group: %s\n", name, oneLine(err))
		code = 1
	}
	return code
}

// tablesOf lists the run's tables: every collective, and for all-reduce
// every strategy asked for.
func tablesOf(o *options) []table {
	var ts []table
	for _, c := range o.colls {
		if c == collAllReduce {
			for _, s := range o.strategies {
				ts = append(ts, table{coll: c, strategy: s})
			}
			continue
		}
		ts = append(ts, table{coll: c, strategy: o.strategies[0]})
	}
	return ts
}

// rowsOf counts the rows of a run, for the progress line.
func rowsOf(o *options, ts []table) int {
	n := 0
	for _, t := range ts {
		ops, roots := len(o.ops), len(o.roots)
		if !t.coll.hasOp() {
			ops = 1
		}
		if !t.coll.hasRoot() {
			roots = 1
		}
		for _, d := range o.dtypes {
			if t.coll.hasOp() {
				ops = len(o.opsFor(t.coll, d))
			}
			n += ops * roots * len(o.sizes())
		}
	}
	return n
}

// checkWire makes sure the backend can compress before anything is
// printed: an empty AllReduceWire on every rank fails, the same way on
// each, when the backend has no compression kernels.
func checkWire(ctx context.Context, o *options, g *collective.Group) error {
	for _, d := range o.dtypes {
		if f := d.wire(); f != 0 {
			err := onRanks(ctx, g.Size(), func(ctx context.Context, r int) error {
				return collective.AllReduceWire(ctx, g.Comm(r), nil, collective.Sum, f)
			})
			if errors.Is(err, collective.ErrUnsupported) {
				return usagef("--wire %s: the %s backend has no compression kernels for AllReduceWire (the host backend has them)", d, g.Backend())
			}
			return err
		}
	}
	return nil
}

// sweepAll prints the header, runs every table, element type, op and root,
// and prints the footer; then writes -J and --plot. It returns the exit
// status.
func sweepAll(ctx context.Context, o *options, g *collective.Group, stdout, stderr io.Writer) int {
	start := time.Now()
	if err := checkWire(ctx, o, g); err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", o.prog, describe(err, o))
		var u *usageError
		if errors.As(err, &u) {
			return 2
		}
		return 1
	}
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	tables := tablesOf(o)
	writeHeader(stdout, o, g, tables, host)
	rn := &runner{o: o, g: g, out: stdout, progress: newProgress(stderr, rowsOf(o, tables))}
	runErr := runTables(ctx, rn, tables, stdout)
	rn.progress.clear()
	code := 0
	if runErr != nil {
		fmt.Fprintf(stderr, "%s: %s\n", o.prog, describe(runErr, o))
		code = 1
	} else {
		status := "OK"
		if rn.wrong > 0 {
			status = "FAILED"
		}
		fmt.Fprintf(stdout, "# %-20s : %d %s\n", "Out of bounds values", rn.wrong, status)
		fmt.Fprintf(stdout, "# %-20s : %.6g\n", "Avg bus bandwidth", rn.avgBusbw())
		fmt.Fprintln(stdout, "#")
		if rn.wrong > 0 {
			fmt.Fprintf(stderr, "%s: %d wrong value(s)\n", o.prog, rn.wrong)
			code = 1
		}
	}
	if o.jsonFile != "" {
		d := newJSONDoc(o, g, tables, start, host)
		d.EndTime = time.Now().Format(time.RFC3339)
		d.Results = append(d.Results, rn.records...)
		d.OutOfBounds.Count, d.OutOfBounds.Okay = rn.wrong, rn.wrong == 0 && runErr == nil
		d.AverageBusBandwidth.Bandwidth = rn.avgBusbw()
		if runErr != nil {
			d.Errors = append(d.Errors, describe(runErr, o))
		}
		if err := writeJSON(o.jsonFile, d); err != nil {
			fmt.Fprintf(stderr, "%s: -J: %s\n", o.prog, oneLine(err))
			code = 1
		}
	}
	if o.plotFile != "" {
		if err := writePlot(o.plotFile, plotTitle(o, g), rn.records); err != nil {
			fmt.Fprintf(stderr, "%s: --plot: %s\n", o.prog, oneLine(err))
			code = 1
		}
	}
	return code
}

func (rn *runner) avgBusbw() float64 {
	if rn.nbusbws == 0 {
		return 0
	}
	return rn.busbw / float64(rn.nbusbws)
}

// runTables runs every table in order (nccl-tests' loop: type, op, root,
// then sizes), printing each table's own header when there are several.
func runTables(ctx context.Context, rn *runner, tables []table, stdout io.Writer) error {
	for i, t := range tables {
		if len(tables) > 1 || t.coll != collAllReduce {
			if i > 0 {
				fmt.Fprintln(stdout, "#")
			}
			fmt.Fprintf(stdout, "# Collective %s  Strategy %s\n", t.coll, tableStrategy(t, rn.o))
		}
		writeColumns(stdout)
		for _, dt := range rn.o.dtypes {
			var err error
			switch dt {
			case dtDouble:
				err = runType[float64](ctx, rn, t, dt)
			case dtInt8:
				err = runType[int8](ctx, rn, t, dt)
			case dtUint8:
				err = runType[uint8](ctx, rn, t, dt)
			case dtInt16:
				err = runType[int16](ctx, rn, t, dt)
			case dtUint16:
				err = runType[uint16](ctx, rn, t, dt)
			case dtInt32:
				err = runType[int32](ctx, rn, t, dt)
			case dtUint32:
				err = runType[uint32](ctx, rn, t, dt)
			case dtInt64:
				err = runType[int64](ctx, rn, t, dt)
			case dtUint64:
				err = runType[uint64](ctx, rn, t, dt)
			case dtHalf:
				err = runType[collective.Float16](ctx, rn, t, dt)
			case dtBfloat16:
				err = runType[collective.BFloat16](ctx, rn, t, dt)
			case dtF8E4M3:
				err = runType[collective.Float8E4M3](ctx, rn, t, dt)
			case dtF8E5M2:
				err = runType[collective.Float8E5M2](ctx, rn, t, dt)
			default: // float, and the wire types on float32 data
				err = runType[float32](ctx, rn, t, dt)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// runType runs every op and root of one table for one element type.
func runType[T collective.Elem](ctx context.Context, rn *runner, t table, dt dtype) error {
	return sweepType(ctx, rn, t, dt, func(ctx context.Context, s *sweep[T], op collective.Op, root int) error {
		return s.run(ctx, op, root)
	})
}

// sweepType allocates the sweep of one table and element type and calls
// run for every op and root (the in-process sweep's run, or the mpi
// build's).
func sweepType[T collective.Elem](ctx context.Context, rn *runner, t table, dt dtype, run func(ctx context.Context, s *sweep[T], op collective.Op, root int) error) (err error) {
	s, err := newSweep[T](rn, t, dt)
	if err != nil {
		return fmt.Errorf("allocating buffers: %w", err)
	}
	defer func() {
		if cerr := s.close(); cerr != nil && err == nil {
			err = fmt.Errorf("freeing pinned buffers: %w", cerr)
		}
	}()
	ops, roots := s.o.opsFor(t.coll, dt), s.o.roots
	if !s.t.coll.hasOp() {
		ops = ops[:1]
	}
	if !s.t.coll.hasRoot() {
		roots = []int{-1}
	}
	for _, op := range ops {
		for _, root := range roots {
			if err := run(ctx, s, op, root); err != nil {
				return err
			}
		}
	}
	return nil
}

// tableStrategy is a table's strategy as its header says it.
func tableStrategy(t table, o *options) string {
	s := t.algorithmName()
	if t.coll == collAllReduce && t.strategy == collective.Auto {
		s += " (chosen per call by the cost model)"
	}
	if w := wireOf(o); t.coll == collAllReduce && w != 0 {
		s += fmt.Sprintf("; --wire %s: wire-compressed ring (float data, %s on the wire: size(B) = count*2)", w, w)
	}
	return s
}

// wireOf is the run's wire type (0 without --wire).
func wireOf(o *options) dtype {
	for _, d := range o.dtypes {
		if d.wire() != 0 {
			return d
		}
	}
	return 0
}

// typeNotes are the header's lines about the element types: -o all
// skipping the bitwise and logical ops for the floating-point types, and
// the types the devices have no
// kernels for (reduced exactly on the host, in one process).
func typeNotes(o *options, kernels backend.DTypeSet, backendName string) []string {
	var notes []string
	reduces := false
	for _, c := range o.colls {
		reduces = reduces || c.hasOp()
	}
	if !reduces {
		return nil
	}
	var floats, host []string
	for _, d := range o.dtypes {
		if !d.isInt() && slices.ContainsFunc(o.ops, collective.Op.IntOnly) {
			floats = append(floats, d.String())
		}
		if d.wire() == 0 && !kernels.Has(d.elem()) {
			host = append(host, d.String())
		}
	}
	if len(floats) > 0 {
		notes = append(notes, fmt.Sprintf("# Types: -o all skips band, bor, bxor, land, lor and lxor for %s (defined for integer types only)", strings.Join(floats, ", ")))
	}
	if len(o.meanless) > 0 {
		names := make([]string, len(o.meanless))
		for i, c := range o.meanless {
			names[i] = c.String()
		}
		skip := "run without avg"
		if len(o.ops) == 1 {
			skip = "do not run (avg is the only op)"
		}
		if len(names) == 1 {
			skip = map[bool]string{true: "does not run (avg is the only op)", false: "runs without avg"}[len(o.ops) == 1]
		}
		notes = append(notes, fmt.Sprintf("# Ops: %s %s: avg is not defined for a prefix reduction", strings.Join(names, " and "), skip))
	}
	if len(host) > 0 {
		notes = append(notes, fmt.Sprintf("# Types: %s reduced exactly on the host (no %s kernels for them on these devices)", strings.Join(host, ", "), backendName))
	}
	return notes
}

// writeHeader prints nccl-tests' header: the parameters, one line per rank
// with its device, the backend and strategy chosen (and the backends skipped,
// with why).
func writeHeader(w io.Writer, o *options, g *collective.Group, tables []table, host string) {
	fmt.Fprintf(w, "# nThread 1 nGpus %d minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d agg iters: 1 validation: %d graph: 0\n",
		g.Size(), o.minBytes, o.maxBytes, o.stepString(), o.warmup, o.iters, o.check)
	fmt.Fprintln(w, "#")
	if o.jsonFile != "" {
		fmt.Fprintf(w, "# Writing JSON output to %s\n", o.jsonFile)
	}
	fmt.Fprintln(w, "# Using devices")
	pid := os.Getpid()
	placement := g.Placement()
	for r := 0; r < g.Size(); r++ {
		info := g.DeviceInfo(r)
		fmt.Fprintf(w, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n",
			r, 0, pid, host, placement[r], info.Backend, info.Name)
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
		strategy = tableStrategy(tables[0], o)
	}
	fmt.Fprintf(w, "# Backend %s  Strategy %s  Skipped: %s\n", g.Backend(), strategy, skipped)
	if o.pinned {
		fmt.Fprintln(w, "# Buffers: pinned host memory (collective.NewHostBuffer)")
	}
	for _, line := range typeNotes(o, groupKernels(g), g.Backend()) {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w, "#")
}

// writeColumns prints the column titles.
func writeColumns(w io.Writer) {
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n", "", "", "", "", "")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n",
		"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s\n",
		"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)")
}

// plotTitle names the run in the plot.
func plotTitle(o *options, g *collective.Group) string {
	colls := make([]string, len(o.colls))
	for i, c := range o.colls {
		colls[i] = c.String()
	}
	return fmt.Sprintf("%s: %s, %s backend, %d rank(s)", o.prog, strings.Join(colls, ", "), g.Backend(), g.Size())
}

// describe is err on one line, naming -T when its deadline ended the run
// (the context's deadline, or the library's CommunicationTimeout, which -T
// sets too: whichever fires first).
func describe(err error, o *options) string {
	s := oneLine(err)
	if o.timeout > 0 && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, collective.ErrTimeout)) {
		s += fmt.Sprintf(" (-T %v)", o.timeout)
	}
	return s
}

// oneLine keeps an error message on one line (the exit-status contract).
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
