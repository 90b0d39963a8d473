package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gocoll/gocoll/collective"
)

// dtype is an element type the sweep runs.
type dtype int

const (
	dtFloat  dtype = iota // float32, nccl-tests' "float"
	dtDouble              // float64, nccl-tests' "double"
)

func (d dtype) String() string {
	if d == dtDouble {
		return "double"
	}
	return "float"
}

func (d dtype) size() int64 {
	if d == dtDouble {
		return 8
	}
	return 4
}

// options are the parsed and validated command-line settings.
type options struct {
	minBytes, maxBytes int64
	stepBytes          int64
	stepFactor         int64
	ranks              int
	dtypes             []dtype
	ops                []collective.Op
	iters, warmup      int
	check              int
	blocking           int
	timeout            time.Duration // 0: no deadline beyond the library's default
	strategy           collective.Strategy
	backend            string // "" lets GOCOLL_BACKEND decide
	devices            []int  // nil: rank r on device r mod D
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

// flagSpec is one option with its short and long names.
type flagSpec struct {
	short, long string
	value       flag.Value
	usage       string
}

// rawFlags holds the flag values before validation.
type rawFlags struct {
	minBytes, maxBytes, stepBytes int64
	stepFactor                    int64
	ngpus                         int
	datatype, op, root            string
	iters, warmup, check          int
	blocking                      int
	timeout                       float64
	algorithm                     string
	outputFile                    string
	outputSet                     bool
	backend                       string
	devices                       string
}

func newFlagSet(r *rawFlags) (*flag.FlagSet, []flagSpec) {
	fs := flag.NewFlagSet("allreduce-perf", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported on one line by the caller
	*r = rawFlags{
		minBytes: 32 << 20, maxBytes: 32 << 20, stepBytes: 1 << 20, stepFactor: 1,
		ngpus: 1, datatype: "float", op: "sum", root: "0",
		iters: 20, warmup: 5, check: 1, blocking: 0,
		algorithm: "auto",
	}
	intVar := func(p *int) flag.Value { return (*intValue)(p) }
	int64Var := func(p *int64) flag.Value { return (*int64Value)(p) }
	strVar := func(p *string) flag.Value { return (*stringValue)(p) }
	specs := []flagSpec{
		{"b", "minbytes", sizeValue{&r.minBytes}, "smallest size in bytes, K/M/G suffixes allowed (default 32M)"},
		{"e", "maxbytes", sizeValue{&r.maxBytes}, "largest size in bytes (default 32M)"},
		{"i", "stepbytes", sizeValue{&r.stepBytes}, "size increment when the step factor is 1 (default 1M)"},
		{"f", "stepfactor", int64Var(&r.stepFactor), "size multiplier; > 1 makes the sweep multiplicative (default 1)"},
		{"g", "ngpus", intVar(&r.ngpus), "number of ranks, one goroutine each (default 1)"},
		{"d", "datatype", strVar(&r.datatype), "float|double|all (half|bfloat16 are not built yet) (default float)"},
		{"o", "op", strVar(&r.op), "sum|prod|min|max|avg|all (default sum)"},
		{"r", "root", strVar(&r.root), "root rank; all-reduce has none and prints -1, as nccl-tests does"},
		{"n", "iters", intVar(&r.iters), "timed iterations per size (default 20)"},
		{"w", "warmup_iters", intVar(&r.warmup), "warm-up iterations at the largest and smallest size (default 5)"},
		{"c", "check", intVar(&r.check), "verified runs per size and mode; 0 turns checking off (default 1)"},
		{"z", "blocking", intVar(&r.blocking), "0|1; gocoll calls return when done, so both time the same thing (default 0)"},
		{"T", "timeout", (*float64Value)(&r.timeout), "seconds: bounds every wait and the whole run; 0 keeps the library default (default 0)"},
		{"a", "algorithm", strVar(&r.algorithm), "auto|ring|tree|hierarchical|pipelined|direct; auto picks per call from the cost model (default auto)"},
		{"J", "output_file", outputValue{&r.outputFile, &r.outputSet}, "JSON output file (not built yet)"},
		{"", "backend", strVar(&r.backend), "auto|vulkan|metal|host (default: GOCOLL_BACKEND, else auto)"},
		{"", "devices", strVar(&r.devices), "comma-separated device index of each rank, e.g. 0,0,1 (default: rank r on device r mod D)"},
	}
	for _, s := range specs {
		if s.short != "" {
			fs.Var(s.value, s.short, s.usage)
		}
		fs.Var(s.value, s.long, s.usage)
	}
	return fs, specs
}

// printUsage writes the flag summary.
func printUsage(w io.Writer, specs []flagSpec) {
	fmt.Fprintln(w, "usage: allreduce-perf [flags]")
	fmt.Fprintln(w, "An nccl-tests all_reduce_perf-style sweep over gocoll's all-reduce, with every result verified.")
	fmt.Fprintln(w, "Each flag has a short (-b 8) and a long (--minbytes 8) form.")
	for _, s := range specs {
		names := "--" + s.long
		if s.short != "" {
			names = "-" + s.short + ", " + names
		}
		fmt.Fprintf(w, "  %-24s %s\n", names, s.usage)
	}
}

// parseFlags parses and validates args. It returns flag.ErrHelp for -h.
func parseFlags(args []string) (*options, []flagSpec, error) {
	var r rawFlags
	fs, specs := newFlagSet(&r)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, specs, err
		}
		return nil, specs, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, specs, usagef("unexpected argument %q (flags only)", fs.Arg(0))
	}
	o, err := r.validate()
	return o, specs, err
}

// validate checks the raw values and turns them into options.
func (r *rawFlags) validate() (*options, error) {
	o := &options{
		minBytes: r.minBytes, maxBytes: r.maxBytes, stepBytes: r.stepBytes, stepFactor: r.stepFactor,
		ranks: r.ngpus, iters: r.iters, warmup: r.warmup, check: r.check, blocking: r.blocking,
	}
	if r.outputSet {
		return nil, usagef("-J/--output_file: JSON output not built yet")
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
	switch strings.ToLower(r.datatype) {
	case "float", "float32", "f32":
		o.dtypes = []dtype{dtFloat}
	case "double", "float64", "f64":
		o.dtypes = []dtype{dtDouble}
	case "all":
		o.dtypes = []dtype{dtFloat, dtDouble}
	case "half", "float16", "bfloat16":
		return nil, usagef("-d %s: half/bfloat16 need wire compression, not built yet", r.datatype)
	default:
		return nil, usagef("-d/--datatype %q is not supported (want float, double or all)", r.datatype)
	}
	if strings.EqualFold(r.op, "all") {
		// nccl-tests' order.
		o.ops = []collective.Op{collective.Sum, collective.Prod, collective.Max, collective.Min, collective.Mean}
	} else {
		op, err := collective.ParseOp(r.op)
		if err != nil {
			return nil, usagef("-o/--op %q is not supported (want sum, prod, min, max, avg or all)", r.op)
		}
		o.ops = []collective.Op{op}
	}
	if !strings.EqualFold(r.root, "all") {
		if v, err := strconv.Atoi(r.root); err != nil || v < 0 {
			return nil, usagef("-r/--root %q must be a rank >= 0 or all", r.root)
		}
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
	s, err := collective.ParseStrategy(r.algorithm)
	if err != nil {
		return nil, usagef("-a/--algorithm %q is not known (want auto, ring, tree, hierarchical, pipelined or direct)", r.algorithm)
	}
	o.strategy = s
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

// Plain flag.Value implementations, so one variable can sit behind a short and
// a long name.

type intValue int

func (v *intValue) String() string { return strconv.Itoa(int(*v)) }
func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("bad integer %q", s)
	}
	*v = intValue(n)
	return nil
}

type int64Value int64

func (v *int64Value) String() string { return strconv.FormatInt(int64(*v), 10) }
func (v *int64Value) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("bad integer %q", s)
	}
	*v = int64Value(n)
	return nil
}

type float64Value float64

func (v *float64Value) String() string { return strconv.FormatFloat(float64(*v), 'g', -1, 64) }
func (v *float64Value) Set(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return fmt.Errorf("bad number %q", s)
	}
	*v = float64Value(f)
	return nil
}

type stringValue string

func (v *stringValue) String() string     { return string(*v) }
func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }

// outputValue records that -J was given, so it can be refused by name.
type outputValue struct {
	v   *string
	set *bool
}

func (o outputValue) String() string {
	if o.v == nil {
		return ""
	}
	return *o.v
}

func (o outputValue) Set(s string) error { *o.v, *o.set = s, true; return nil }
