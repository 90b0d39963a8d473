package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/spf13/pflag"
)

// dtype is an element type the sweep runs: nccl-tests' types, and the
// float32 data of a wire-compressed all-reduce (--wire).
type dtype int

const (
	dtFloat        dtype = iota // float32, nccl-tests' "float"
	dtDouble                    // float64, nccl-tests' "double"
	dtInt8                      // int8
	dtUint8                     // uint8
	dtInt32                     // int32
	dtUint32                    // uint32
	dtInt64                     // int64
	dtUint64                    // uint64
	dtHalf                      // collective.Float16 (IEEE binary16), nccl-tests' "half"
	dtBfloat16                  // collective.BFloat16, nccl-tests' "bfloat16"
	dtWireHalf                  // --wire half: float32 data, all-reduced over a binary16 wire (AllReduceWire)
	dtWireBfloat16              // --wire bfloat16: float32 data, all-reduced over a bfloat16 wire
	dtInt16                     // int16 (not in nccl-tests)
	dtUint16                    // uint16 (not in nccl-tests)
	dtF8E4M3                    // collective.Float8E4M3, nccl-tests' "f8e4m3"
	dtF8E5M2                    // collective.Float8E5M2, nccl-tests' "f8e5m2"
)

// dtypeNames are the type column's names: nccl-tests' (a wire type prints
// its wire format, as the size(B) column counts it).
var dtypeNames = [...]string{
	dtFloat: "float", dtDouble: "double", dtInt8: "int8", dtUint8: "uint8", dtInt32: "int32", dtUint32: "uint32",
	dtInt64: "int64", dtUint64: "uint64", dtHalf: "half", dtBfloat16: "bfloat16", dtWireHalf: "half", dtWireBfloat16: "bfloat16",
	dtInt16: "int16", dtUint16: "uint16", dtF8E4M3: "f8e4m3", dtF8E5M2: "f8e5m2",
}

func (d dtype) String() string { return dtypeNames[d] }

// allDtypes is what -d all runs: nccl-tests' types in nccl-tests' order,
// then the types nccl-tests lacks.
var allDtypes = []dtype{dtInt8, dtUint8, dtInt32, dtUint32, dtInt64, dtUint64, dtHalf, dtFloat, dtDouble, dtBfloat16,
	dtF8E4M3, dtF8E5M2, dtInt16, dtUint16}

// elem is the library's element type of the user buffers (float for the
// wire types).
func (d dtype) elem() backend.DType {
	switch d {
	case dtDouble:
		return backend.F64
	case dtInt8:
		return backend.I8
	case dtUint8:
		return backend.U8
	case dtInt16:
		return backend.I16
	case dtUint16:
		return backend.U16
	case dtInt32:
		return backend.I32
	case dtUint32:
		return backend.U32
	case dtInt64:
		return backend.I64
	case dtUint64:
		return backend.U64
	case dtHalf:
		return backend.Half
	case dtBfloat16:
		return backend.BFloat16
	case dtF8E4M3:
		return backend.F8E4M3
	case dtF8E5M2:
		return backend.F8E5M2
	}
	return backend.F32
}

// isInt reports whether d is an integer type (the bitwise and logical ops;
// avg the wrapped sum divided by N, truncated).
func (d dtype) isInt() bool { return d.elem().IsInt() }

// size is the element size the size(B) column counts, as nccl-tests does
// with the element type: 1, 2, 4 or 8, and 2 for the wire types (the wire
// element; the user's buffer holds the same count of float32 values).
func (d dtype) size() int64 {
	if d.wire() != 0 {
		return 2
	}
	return int64(d.elem().Size())
}

// wire is the wire format of a wire type (0 for the others).
func (d dtype) wire() backend.WireFormat {
	switch d {
	case dtWireHalf:
		return backend.F16
	case dtWireBfloat16:
		return backend.BF16
	}
	return 0
}

// parseDtype accepts one type name (nccl-tests' name, or an alias).
func parseDtype(s string) (dtype, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "float", "float32", "f32":
		return dtFloat, true
	case "double", "float64", "f64":
		return dtDouble, true
	case "int8", "i8":
		return dtInt8, true
	case "uint8", "u8":
		return dtUint8, true
	case "int16", "i16":
		return dtInt16, true
	case "uint16", "u16":
		return dtUint16, true
	case "int32", "i32":
		return dtInt32, true
	case "uint32", "u32":
		return dtUint32, true
	case "int64", "i64":
		return dtInt64, true
	case "uint64", "u64":
		return dtUint64, true
	case "half", "float16", "f16", "fp16":
		return dtHalf, true
	case "bfloat16", "bf16":
		return dtBfloat16, true
	case "fp8e4m3", "f8e4m3", "e4m3":
		return dtF8E4M3, true
	case "fp8e5m2", "f8e5m2", "e5m2":
		return dtF8E5M2, true
	}
	return 0, false
}

// opsFor is the ops a table of collective c runs for type d: every op
// asked for, less avg for scan and exscan, and less the bitwise and logical
// ops (band, bor, bxor, land, lor, lxor) for the floating-point types (-o
// all, and --coll all for the scans; an explicit -o avg with an explicit
// --coll scan or exscan, or an explicit bitwise or logical op with a
// floating-point type is refused).
func (o *options) opsFor(c coll, d dtype) []collective.Op {
	dropMean := c.noMean() && containsOp(o.ops, collective.Mean)
	dropInt := !d.isInt() && slices.ContainsFunc(o.ops, collective.Op.IntOnly)
	if !dropMean && !dropInt {
		return o.ops
	}
	var ops []collective.Op
	for _, op := range o.ops {
		if !(dropMean && op == collective.Mean) && !(dropInt && op.IntOnly()) {
			ops = append(ops, op)
		}
	}
	return ops
}

// coll is a collective the sweep runs, with nccl-tests' semantics.
type coll int

const (
	collAllReduce coll = iota
	collReduceScatter
	collAllGather
	collBroadcast
	collReduce
	collAllToAll
	collGather
	collScatter
	collScan     // inclusive prefix reduction (MPI_Scan); nccl-tests has none
	collExscan   // exclusive prefix reduction (MPI_Exscan); nccl-tests has none
	collSendRecv // nccl-tests' sendrecv: each rank sends to r+1 and receives from r-1
)

var collNames = [...]string{
	collAllReduce: "allreduce", collReduceScatter: "reducescatter", collAllGather: "allgather",
	collBroadcast: "broadcast", collReduce: "reduce", collAllToAll: "alltoall", collGather: "gather",
	collScatter: "scatter", collScan: "scan", collExscan: "exscan", collSendRecv: "sendrecv",
}

func (c coll) String() string { return collNames[c] }

// resolveRoots sets roots from -r for a group of n ranks: every rank for
// all, else the one rank, which must be one of the n where a collective
// with a root runs.
func (o *options) resolveRoots(n int) error {
	o.roots = nil
	if strings.EqualFold(strings.TrimSpace(o.root), "all") {
		o.roots = ranksUpTo(max(n, 0))
		return nil
	}
	v, err := strconv.Atoi(strings.TrimSpace(o.root))
	if err != nil || v < 0 {
		return usagef("-r/--root %q must be a rank >= 0 or all", o.root)
	}
	if v >= n && slices.ContainsFunc(o.colls, coll.hasRoot) {
		return usagef("-r/--root %d is not a rank of %d (want 0..%d or all)", v, n, n-1)
	}
	o.roots = []int{v}
	return nil
}

// parseColl accepts a collective's name, with or without nccl-tests'
// underscore (all_reduce) or a dash.
func parseColl(s string) (coll, bool) {
	k := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(strings.TrimSpace(s)))
	for i, n := range collNames {
		if k == n {
			return coll(i), true
		}
	}
	return 0, false
}

// collForProgram is the default --coll of a binary invoked under another
// name (a symlink or a copy), as nccl-tests names its binaries:
// reducescatter-perf (or reduce_scatter_perf), allgather-perf,
// broadcast-perf, reduce-perf, sendrecv-perf (sendrecv_perf), ... (any
// collective's name); anything else runs all-reduce.
func collForProgram(prog string) coll {
	base := strings.ToLower(filepath.Base(prog))
	base = strings.TrimSuffix(base, ".exe")
	for _, suf := range []string{"-perf", "_perf"} {
		if strings.HasSuffix(base, suf) {
			if c, ok := parseColl(strings.TrimSuffix(base, suf)); ok {
				return c
			}
		}
	}
	return collAllReduce
}

// programName is the name messages and usage use: the invoked base name.
func programName(prog string) string {
	base := strings.TrimSuffix(filepath.Base(prog), ".exe")
	if base == "" || base == "." || base == string(filepath.Separator) {
		return "allreduce-perf"
	}
	return base
}

// hasOp reports whether the collective reduces (the others print "none").
func (c coll) hasOp() bool {
	return c == collAllReduce || c == collReduceScatter || c == collReduce || c == collScan || c == collExscan
}

// noMean reports whether the collective reduces but has no avg: a prefix
// reduction (the library refuses Mean for Scan and Exscan).
func (c coll) noMean() bool { return c == collScan || c == collExscan }

// hasRoot reports whether the collective has a root (the others print -1).
func (c coll) hasRoot() bool {
	return c == collBroadcast || c == collReduce || c == collGather || c == collScatter
}

// busFactor is nccl-tests' busbw/algbw for n ranks (broadcast, reduce and
// sendrecv: 1, as nccl-tests).
//
// nccl-tests has no scan, so scan and exscan take the factor of the
// bandwidth-optimal prefix, a chain along the ranks: every rank but the
// last forwards one buffer-sized partial (its input reduced with what came
// from r-1; exscan: the same partials, rank n-1's input never needed), so
// the n ranks move (n-1) buffers, (n-1)/n per rank: busbw = algbw*(n-1)/n,
// 0 on one rank. That is the bound any prefix algorithm meets, not what
// gocoll's Scan moves (it all-gathers every input, (n-1) buffers into
// every rank), so a busbw below the link's speed shows that overhead, as
// nccl-tests' factors show an algorithm's against its optimum. busFormulas
// writes each factor out for the help.
func (c coll) busFactor(n int) float64 {
	switch c {
	case collAllReduce:
		return 2 * float64(n-1) / float64(n)
	case collReduceScatter, collAllGather, collAllToAll, collGather, collScatter, collScan, collExscan:
		return float64(n-1) / float64(n)
	}
	return 1
}

// busFormulas are busFactor's formulas by collective, as the help prints
// them (n: the number of ranks).
var busFormulas = [...]string{
	collAllReduce: "2(n-1)/n", collReduceScatter: "(n-1)/n", collAllGather: "(n-1)/n", collBroadcast: "1",
	collReduce: "1", collAllToAll: "(n-1)/n", collGather: "(n-1)/n", collScatter: "(n-1)/n",
	collScan: "(n-1)/n, a chain's traffic: nccl-tests has no scan", collExscan: "(n-1)/n, as scan",
	collSendRecv: "1",
}

// entryPoints are the collectives' entry points in the library, as its
// algorithm table names them.
var entryPoints = [...]string{
	collAllReduce: "AllReduce", collReduceScatter: "ReduceScatter", collAllGather: "AllGather",
	collBroadcast: "Broadcast", collReduce: "Reduce", collAllToAll: "AllToAll", collGather: "Gather",
	collScatter: "Scatter", collScan: "Scan", collExscan: "Exscan", collSendRecv: "SendRecv",
}

// algorithms are the strategies the collective can honour (the library's
// algorithm table), the first being what it runs under -a auto (for
// all-reduce: auto, which picks among the others). Point-to-point
// (sendrecv) is no entry of the table: its message goes straight from the
// sender's slice to the receiver's, which the header and the JSON record
// call direct.
func (c coll) algorithms() []collective.Strategy {
	if c == collSendRecv {
		return []collective.Strategy{collective.Direct}
	}
	return collective.Strategies(entryPoints[c])
}

// allStrategies is what -a all sweeps, in this order: auto and the
// all-reduce strategies of the library's algorithm table, but for those
// that run only in one process (host) or only between processes (native),
// which -a names alone.
var allStrategies = func() []collective.Strategy {
	one := map[collective.Strategy]bool{}
	for _, a := range collective.Algorithms() {
		one[a.Strategy] = a.OneProcess || a.Processes
	}
	var out []collective.Strategy
	for _, s := range collAllReduce.algorithms() {
		if !one[s] {
			out = append(out, s)
		}
	}
	return out
}()

// allColls is what --coll all runs, in this order.
var allColls = []coll{collAllReduce, collReduceScatter, collAllGather, collBroadcast, collReduce, collAllToAll, collGather, collScatter,
	collScan, collExscan, collSendRecv}

// options are the parsed and validated command-line settings.
type options struct {
	minBytes, maxBytes int64
	stepBytes          int64
	stepFactor         int64
	ranks              int
	colls              []coll
	dtypes             []dtype
	ops                []collective.Op
	roots              []int  // broadcast and reduce: the roots to run (-r all: every rank)
	root               string // -r as given (resolveRoots)
	meanless           []coll // scan, exscan: asked for (--coll all too) with -o avg, which they skip
	strategies         []collective.Strategy
	iters, warmup      int
	check              int
	blocking           int
	timeout            time.Duration // 0: no deadline beyond the library's default
	backend            string        // "" lets GOCOLL_BACKEND decide
	devices            []int         // nil: rank r on device r mod D
	pinned             bool          // buffers from collective.NewHostBuffer
	goHeap             bool          // across processes: buffers on the Go heap, not mpi.AllocShared
	jsonFile           string        // -J: "" for none
	plotFile           string        // --plot: "" for none
	prog               string        // the invoked name, for messages
	args               []string
}

// usageError is bad usage: the command prints it on one line and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// sizeValue is a byte count that accepts the K, M and G suffixes (powers of
// 1024), as nccl-tests' parsesize does.
type sizeValue struct{ v *int64 }

func (s sizeValue) String() string {
	if s.v == nil {
		return "0"
	}
	return strconv.FormatInt(*s.v, 10)
}

// Type names the value in pflag's messages.
func (s sizeValue) Type() string { return "size" }

func (s sizeValue) Set(text string) error {
	n, err := parseSize(text)
	if err != nil {
		return err
	}
	*s.v = n
	return nil
}

// parseSize parses a non-negative byte count with an optional K, M or G
// suffix (either case; powers of 1024).
func parseSize(text string) (int64, error) {
	t := strings.TrimSpace(text)
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q (want a byte count such as 8, 64K, 32M or 1G)", text)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", text)
	}
	return n * mult, nil
}

// rawFlags holds the flag values before validation.
type rawFlags struct {
	minBytes, maxBytes, stepBytes int64
	stepFactor                    int64
	ngpus                         int
	datatype, op, root            string
	wire                          string
	iters, warmup, check          int
	blocking                      int
	timeout                       float64
	algorithm                     string
	coll                          string
	outputFile                    string
	outputSet                     bool
	across                        bool // the ranks span processes (parseFlagsFor)
	plotFile                      string
	pinned                        bool
	goHeap                        bool
	backend                       string
	devices                       string
}

// newFlagSet defines the flags with pflag: GNU-style long names (--minbytes 8,
// --minbytes=8) and nccl-tests' one-letter shorthands (-b 8, -b8) on one flag
// each. The flags are kept in the order given, which the usage follows.
func newFlagSet(r *rawFlags, defColl coll) *pflag.FlagSet {
	fs := pflag.NewFlagSet("allreduce-perf", pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported on one line by the caller
	fs.Usage = func() {}
	fs.SortFlags = false
	fs.SetInterspersed(false) // flags only: the first other argument is refused, as before
	*r = rawFlags{
		minBytes: 32 << 20, maxBytes: 32 << 20, stepBytes: 1 << 20, stepFactor: 1,
		ngpus: 1, datatype: "float", op: "sum", root: "0",
		iters: 20, warmup: 5, check: 1, blocking: 0,
		algorithm: "auto", coll: defColl.String(),
	}
	fs.VarP(sizeValue{&r.minBytes}, "minbytes", "b", "smallest size in bytes, K/M/G suffixes allowed (default 32M)")
	fs.VarP(sizeValue{&r.maxBytes}, "maxbytes", "e", "largest size in bytes (default 32M)")
	fs.VarP(sizeValue{&r.stepBytes}, "stepbytes", "i", "size increment when the step factor is 1 (default 1M)")
	fs.Int64VarP(&r.stepFactor, "stepfactor", "f", r.stepFactor, "size multiplier; > 1 makes the sweep multiplicative (default 1)")
	fs.IntVarP(&r.ngpus, "ngpus", "g", r.ngpus, "number of ranks, one goroutine each (default 1)")
	fs.StringVar(&r.coll, "coll", r.coll, "allreduce|reducescatter|allgather|broadcast|reduce|alltoall|gather|scatter|scan|exscan|sendrecv|all, or a comma list: scan and exscan are the inclusive and exclusive prefix reductions (no avg), sendrecv nccl-tests' ring shift (rank r sends to r+1, receives from r-1) (default allreduce; the binary invoked as reducescatter-perf, allgather-perf, broadcast-perf, reduce-perf, sendrecv-perf, ... defaults to that one)")
	fs.StringVarP(&r.datatype, "datatype", "d", r.datatype, "float|double|int8|uint8|int16|uint16|int32|uint32|int64|uint64|half|bfloat16|fp8e4m3|fp8e5m2|all, or a comma list: nccl-tests' types (half, bfloat16, fp8e4m3 and fp8e5m2 are collective.Float16, BFloat16, Float8E4M3 and Float8E5M2; f8e4m3 and f8e5m2, nccl-tests' names, are taken too) and int16 and uint16, which nccl-tests lacks; all runs every one, nccl-tests' in its order, then the others (default float)")
	fs.StringVar(&r.wire, "wire", "", "half|bfloat16: all-reduce float32 data (-d float) compressed to 16 bits on the wire (collective.AllReduceWire, ring); the type column names the wire type, size(B) = count*2, #wrong counts elements outside collective.WireErrorBound (default none)")
	fs.StringVarP(&r.op, "op", "o", r.op, "sum|prod|min|max|avg|premulsum|band|bor|bxor|land|lor|lxor|all, or a comma list; avg of the integer types is NCCL's (the wrapped sum divided by the rank count, truncated), not defined for scan and exscan; premulsum is NCCL's ncclRedOpCreatePreMulSum with nccl-tests' scalars (1 on even ranks, 2 on odd ones), in one process, not in all; band to lxor (bitwise and logical, as MPI's) only for the integer types: all leaves out what a type or collective lacks (default sum)")
	fs.StringVarP(&r.root, "root", "r", r.root, "root rank of broadcast, reduce, gather and scatter, or all (every rank in turn); the others have none and print -1, as nccl-tests does (default 0)")
	fs.IntVarP(&r.iters, "iters", "n", r.iters, "timed iterations per size (default 20)")
	fs.IntVarP(&r.warmup, "warmup_iters", "w", r.warmup, "warm-up iterations at the largest and smallest size (default 5)")
	fs.IntVarP(&r.check, "check", "c", r.check, "verified runs per size and mode; 0 turns checking off (default 1)")
	fs.IntVarP(&r.blocking, "blocking", "z", r.blocking, "0|1; gocoll calls return when done, so both time the same thing (default 0)")
	fs.Float64VarP(&r.timeout, "timeout", "T", r.timeout, "seconds: bounds every wait and the whole run; 0 keeps the library default (default 0)")
	fs.StringVarP(&r.algorithm, "algorithm", "a", r.algorithm, "auto|direct|pipelined|ring|tree|hierarchical|all, or a comma list: all-reduce's strategy, one table each when several; auto picks per call from the cost model. reducescatter and allgather honour ring|direct, broadcast and reduce tree (default auto)")
	fs.StringVarP(&r.outputFile, "output_file", "J", "", "write the parameters, devices and one record per row and mode as JSON to this file (atomically)")
	fs.StringVar(&r.plotFile, "plot", "", "write busbw and algbw against size to FILE.png or FILE.svg, one line per strategy (or collective, type, op, root: whatever the run sweeps)")
	fs.BoolVar(&r.pinned, "pinned", false, "allocate the send and receive buffers with collective.NewHostBuffer (pinned host memory the devices import once and reach by DMA) instead of the Go heap")
	fs.BoolVar(&r.goHeap, "go-heap", false, "across processes (MPI): allocate the send and receive buffers on the Go heap instead of with mpi.AllocShared (memory the node's processes share, whose inputs the shared-memory window reads where they lie)")
	fs.StringVar(&r.backend, "backend", "", "auto|vulkan|metal|host (default: GOCOLL_BACKEND, else auto)")
	fs.StringVar(&r.devices, "devices", "", "comma-separated device index of each rank, e.g. 0,0,1 (default: rank r on device r mod D)")
	return fs
}

// printUsage writes the flag summary.
func printUsage(w io.Writer, prog string, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "usage: %s [flags]\n", programName(prog))
	fmt.Fprintln(w, "An nccl-tests-style sweep over gocoll's collectives (all_reduce_perf, reduce_scatter_perf, all_gather_perf,")
	fmt.Fprintln(w, "broadcast_perf, reduce_perf, alltoall_perf, gather_perf, scatter_perf, sendrecv_perf in one binary, and")
	fmt.Fprintln(w, "the prefix reductions scan and exscan), with every result verified.")
	fmt.Fprintln(w, "Every flag has a long form (--minbytes 8); most have a short one too (-b 8).")
	fs.VisitAll(func(f *pflag.Flag) {
		names := "--" + f.Name
		if f.Shorthand != "" {
			names = "-" + f.Shorthand + ", " + names
		}
		fmt.Fprintf(w, "  %-24s %s\n", names, f.Usage)
	})
	fmt.Fprintln(w, "algbw = size(B) / time; busbw = algbw * factor, nccl-tests' factor where it has the collective (n ranks):")
	for _, c := range allColls {
		fmt.Fprintf(w, "  %-24s %s\n", c, busFormulas[c])
	}
	fmt.Fprintln(w, "count is one rank's elements; reducescatter, allgather, alltoall, gather and scatter round it down to whole")
	fmt.Fprintln(w, "16-byte groups and size(B) is the full buffer, as nccl-tests (3 ranks, -b 1K of float: count 84, size 1008).")
}

// parseFlags parses and validates args for the program invoked as prog
// (its base name picks the default --coll). It returns pflag.ErrHelp for
// -h and --help.
func parseFlags(prog string, args []string) (*options, *pflag.FlagSet, error) {
	return parseFlagsFor(prog, args, false)
}

// parseFlagsFor is parseFlags; across, the ranks span processes and -r
// names a rank of the whole group, whose size is known once the group is
// open: the caller resolves the roots then (resolveRoots), and until then
// roots is nil.
func parseFlagsFor(prog string, args []string, across bool) (*options, *pflag.FlagSet, error) {
	var r rawFlags
	fs := newFlagSet(&r, collForProgram(prog))
	if err := fs.Parse(goFlagSyntax(fs, args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, fs, err
		}
		return nil, fs, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, fs, usagef("unexpected argument %q (flags only)", fs.Arg(0))
	}
	r.outputSet = fs.Changed("output_file")
	r.across = across
	o, err := r.validate()
	if o != nil {
		o.prog = programName(prog)
		o.args = append([]string{prog}, args...)
	}
	return o, fs, err
}

// goFlagSyntax rewrites the single-dash long flags of Go's flag package
// (-minbytes 8, -backend=host), which the command accepted before it parsed
// with pflag, to pflag's --minbytes, so command lines written for it keep
// working. Shorthands (-b 8, -b8) and flag values (the file after -J) stay
// as they are; so does everything from "--" or the first non-flag on.
func goFlagSyntax(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		word, next := flagWord(fs, args[i])
		if word == "" {
			return append(out, args[i:]...)
		}
		out = append(out, word)
		if next && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

// flagWord reads a as a flag of fs. It returns a in pflag's syntax (a
// single-dash long name gains a dash) and whether the next argument is the
// flag's value; word is "" when a is no flag ("--", "-", or no dash). An
// unknown flag is returned as it is, for pflag to report.
func flagWord(fs *pflag.FlagSet, a string) (word string, next bool) {
	if a == "--" || len(a) < 2 || a[0] != '-' {
		return "", false
	}
	body, long := a[1:], false
	if body[0] == '-' {
		body, long = body[1:], true
	}
	name, _, hasValue := strings.Cut(body, "=")
	var f *pflag.Flag
	switch {
	case long:
		f = fs.Lookup(name)
	case len(name) > 1 && fs.Lookup(name) != nil: // Go's -minbytes
		f, a = fs.Lookup(name), "-"+a
	default: // a shorthand: -b 8, or -b8 with its value attached
		f = fs.ShorthandLookup(body[:1])
		hasValue = hasValue || len(body) > 1
	}
	return a, f != nil && !hasValue && f.NoOptDefVal == ""
}

// validate checks the raw values and turns them into options.
func (r *rawFlags) validate() (*options, error) {
	o := &options{
		minBytes: r.minBytes, maxBytes: r.maxBytes, stepBytes: r.stepBytes, stepFactor: r.stepFactor,
		ranks: r.ngpus, iters: r.iters, warmup: r.warmup, check: r.check, blocking: r.blocking,
		pinned: r.pinned, goHeap: r.goHeap,
	}
	if o.ranks < 1 {
		return nil, usagef("-g/--ngpus must be >= 1, got %d", o.ranks)
	}
	if o.minBytes > o.maxBytes {
		return nil, usagef("invalid sizes for minbytes and maxbytes: %d > %d", o.minBytes, o.maxBytes)
	}
	if o.stepFactor < 1 {
		return nil, usagef("-f/--stepfactor must be >= 1, got %d", o.stepFactor)
	}
	if o.stepFactor > 1 && o.minBytes == 0 && o.maxBytes > 0 {
		return nil, usagef("-b/--minbytes 0 never grows with a step factor: give -b > 0")
	}
	if o.stepFactor == 1 && o.stepBytes < 1 && o.minBytes < o.maxBytes {
		return nil, usagef("-i/--stepbytes must be > 0, got %d", o.stepBytes)
	}
	collsAll := strings.EqualFold(strings.TrimSpace(r.coll), "all")
	if collsAll {
		o.colls = allColls
	} else {
		for _, f := range strings.Split(r.coll, ",") {
			c, ok := parseColl(f)
			if !ok {
				return nil, usagef("--coll %q is not known (want allreduce, reducescatter, allgather, broadcast, reduce, alltoall, gather, scatter, scan, exscan, sendrecv, all or a comma list)", r.coll)
			}
			if !containsColl(o.colls, c) {
				o.colls = append(o.colls, c)
			}
		}
	}
	if strings.EqualFold(strings.TrimSpace(r.datatype), "all") {
		o.dtypes = allDtypes
	} else {
		for _, f := range strings.Split(r.datatype, ",") {
			d, ok := parseDtype(f)
			if !ok {
				return nil, usagef("-d/--datatype %q is not supported (want float, double, int8, uint8, int32, uint32, int64, uint64, half, bfloat16, all or a comma list)", r.datatype)
			}
			if !containsDtype(o.dtypes, d) {
				o.dtypes = append(o.dtypes, d)
			}
		}
	}
	switch w := strings.ToLower(strings.TrimSpace(r.wire)); w {
	case "", "none":
	default:
		d, ok := parseDtype(w)
		switch {
		case ok && d == dtHalf:
			d = dtWireHalf
		case ok && d == dtBfloat16:
			d = dtWireBfloat16
		default:
			return nil, usagef("--wire %q is not known (want half or bfloat16)", r.wire)
		}
		if len(o.dtypes) != 1 || o.dtypes[0] != dtFloat {
			return nil, usagef("--wire %s compresses float32 data: it runs with -d float (the default), not -d %s", d, strings.TrimSpace(r.datatype))
		}
		o.dtypes = []dtype{d}
	}
	if strings.EqualFold(strings.TrimSpace(r.op), "all") {
		// nccl-tests' order, then MPI's bitwise and logical ops; the
		// scans skip avg, the floating-point
		// types the bitwise and logical ops (opsFor).
		o.ops = []collective.Op{collective.Sum, collective.Prod, collective.Max, collective.Min, collective.Mean,
			collective.BAnd, collective.BOr, collective.BXor, collective.LAnd, collective.LOr, collective.LXor}
	} else {
		for _, f := range strings.Split(r.op, ",") {
			op, err := collective.ParseOp(strings.TrimSpace(f))
			if strings.EqualFold(strings.TrimSpace(f), "premulsum") {
				op, err = opPreMulSum, nil
			}
			if err != nil {
				return nil, usagef("-o/--op %q is not supported (want sum, prod, min, max, avg, premulsum, band, bor, bxor, land, lor, lxor, all or a comma list)", r.op)
			}
			if !containsOp(o.ops, op) {
				o.ops = append(o.ops, op)
			}
		}
		if containsOp(o.ops, collective.Mean) {
			for _, c := range o.colls {
				if c.noMean() && !collsAll {
					return nil, usagef("-o avg is not defined for a prefix reduction (--coll %s): use sum and divide rank r's result by r+1 (exscan: r), or -o all, which skips avg for scan and exscan", c)
				}
			}
		}
		if i := slices.IndexFunc(o.ops, collective.Op.IntOnly); i >= 0 {
			for _, d := range o.dtypes {
				if !d.isInt() {
					return nil, usagef("-o %s is not defined for floating-point type %s (-d %s): the bitwise and logical ops take the integer types, or -o all, which skips them for the others", o.ops[i], d, strings.TrimSpace(r.datatype))
				}
			}
		}
	}
	if containsOp(o.ops, collective.Mean) {
		// -o all, or --coll all with -o avg: the scans run without avg,
		// and not at all when avg is the only op.
		var keep []coll
		for _, c := range o.colls {
			if c.noMean() {
				o.meanless = append(o.meanless, c)
				if len(o.ops) == 1 {
					continue
				}
			}
			keep = append(keep, c)
		}
		o.colls = keep
	}
	o.root = r.root
	if r.across {
		if v, err := strconv.Atoi(strings.TrimSpace(r.root)); !strings.EqualFold(strings.TrimSpace(r.root), "all") && (err != nil || v < 0) {
			return nil, usagef("-r/--root %q must be a rank >= 0 or all", r.root)
		}
	} else if err := o.resolveRoots(o.ranks); err != nil {
		return nil, err
	}
	if o.iters < 1 {
		return nil, usagef("-n/--iters must be >= 1, got %d", o.iters)
	}
	if o.warmup < 0 {
		return nil, usagef("-w/--warmup_iters must be >= 0, got %d", o.warmup)
	}
	if o.check < 0 {
		return nil, usagef("-c/--check must be >= 0, got %d", o.check)
	}
	if o.blocking != 0 && o.blocking != 1 {
		return nil, usagef("-z/--blocking must be 0 or 1, got %d", o.blocking)
	}
	if math.IsNaN(r.timeout) || r.timeout < 0 || r.timeout > 1e6 {
		return nil, usagef("-T/--timeout must be seconds in [0, 1e6], got %v", r.timeout)
	}
	o.timeout = time.Duration(r.timeout * float64(time.Second))
	if strings.EqualFold(strings.TrimSpace(r.algorithm), "all") {
		o.strategies = allStrategies
	} else {
		for _, f := range strings.Split(r.algorithm, ",") {
			s, err := collective.ParseStrategy(strings.TrimSpace(f))
			if err != nil {
				return nil, usagef("-a/--algorithm %q is not known (want auto, direct, pipelined, ring, tree, hierarchical, all or a comma list)", r.algorithm)
			}
			if !containsStrategy(o.strategies, s) {
				o.strategies = append(o.strategies, s)
			}
		}
	}
	if err := o.checkCombinations(); err != nil {
		return nil, err
	}
	if r.outputSet {
		if err := checkOutputPath("-J/--output_file", r.outputFile); err != nil {
			return nil, err
		}
		o.jsonFile = r.outputFile
	}
	if r.plotFile != "" {
		switch strings.ToLower(filepath.Ext(r.plotFile)) {
		case ".png", ".svg":
		default:
			return nil, usagef("--plot %q: want a file name ending in .png or .svg", r.plotFile)
		}
		if err := checkOutputPath("--plot", r.plotFile); err != nil {
			return nil, err
		}
		o.plotFile = r.plotFile
	}
	switch b := strings.ToLower(r.backend); b {
	case "", "auto", "vulkan", "metal", "host":
		o.backend = b
	default:
		return nil, usagef("--backend %q is not known (want auto, vulkan, metal or host)", r.backend)
	}
	if r.devices != "" {
		for _, f := range strings.Split(r.devices, ",") {
			d, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || d < 0 {
				return nil, usagef("--devices %q: want comma-separated device indices >= 0", r.devices)
			}
			o.devices = append(o.devices, d)
		}
		if len(o.devices) != o.ranks {
			return nil, usagef("--devices lists %d device(s) for %d rank(s)", len(o.devices), o.ranks)
		}
	}
	return o, nil
}

// checkCombinations refuses what the library cannot honour rather than
// running something else under the name asked for.
func (o *options) checkCombinations() error {
	for _, d := range o.dtypes {
		if d.wire() == 0 {
			continue
		}
		for _, c := range o.colls {
			if c != collAllReduce {
				return usagef("--wire %s: 16-bit wire compression exists for all-reduce only, not --coll %s", d, c)
			}
		}
		for _, s := range o.strategies {
			if s != collective.Auto && s != collective.Ring {
				return usagef("--wire %s: wire compression (AllReduceWire) runs the ring only, so -a %s cannot be honoured", d, s)
			}
		}
	}
	if len(o.strategies) > 1 {
		for _, c := range o.colls {
			if c != collAllReduce {
				return usagef("-a with several strategies sweeps all-reduce only; --coll %s runs %s", c, c.algorithms()[0])
			}
		}
	}
	s := o.strategies[0]
	for _, c := range o.colls {
		if c == collAllReduce || s == collective.Auto || containsStrategy(c.algorithms(), s) {
			continue
		}
		names := make([]string, len(c.algorithms()))
		for i, a := range c.algorithms() {
			names[i] = a.String()
		}
		return usagef("--coll %s runs %s only; -a %s applies to all-reduce", c, strings.Join(names, " or "), s)
	}
	return nil
}

// checkOutputPath refuses an output file whose folder does not exist, so a
// long run does not end without its output.
func checkOutputPath(flagName, path string) error {
	if path == "" {
		return usagef("%s needs a file name", flagName)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return usagef("%s %q: folder %q does not exist", flagName, path, dir)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return usagef("%s %q is a folder", flagName, path)
	}
	return nil
}

func containsColl(cs []coll, c coll) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

func containsDtype(ds []dtype, d dtype) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

func containsOp(ops []collective.Op, op collective.Op) bool {
	for _, x := range ops {
		if x == op {
			return true
		}
	}
	return false
}

func containsStrategy(ss []collective.Strategy, s collective.Strategy) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// sizes returns the swept sizes in bytes, following nccl-tests: multiply by
// the step factor when it is > 1, else add the step bytes, up to maxBytes.
func (o *options) sizes() []int64 {
	var out []int64
	for size := o.minBytes; size <= o.maxBytes; {
		out = append(out, size)
		var next int64
		if o.stepFactor > 1 {
			if size > math.MaxInt64/o.stepFactor {
				break
			}
			next = size * o.stepFactor
		} else {
			if size > math.MaxInt64-o.stepBytes {
				break
			}
			next = size + o.stepBytes
		}
		if next <= size { // -b 0 -e 0, or a zero step with min == max
			break
		}
		size = next
	}
	return out
}

// stepString is the header's step field: "4(factor)" or "1048576(bytes)".
func (o *options) stepString() string {
	if o.stepFactor > 1 {
		return fmt.Sprintf("%d(factor)", o.stepFactor)
	}
	return fmt.Sprintf("%d(bytes)", o.stepBytes)
}
