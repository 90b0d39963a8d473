package collective

import (
	"fmt"
	"strings"
	"time"

	"github.com/gocoll/gocoll/internal/premul"
)

// Op is a reduction operator.
//
// The bitwise and logical operators (BAnd through LXor: MPI's MPI_BAND,
// MPI_BOR, MPI_BXOR, MPI_LAND, MPI_LOR and MPI_LXOR) are defined on the
// Integer types only; with a floating-point element type (Float, Float16,
// BFloat16, Float8E4M3, Float8E5M2) a call fails with ErrInvalidArgument on every rank before any
// data moves. BAnd, BOr and BXor act on the
// bits, two's complement for the signed types. LAnd, LOr and LXor give 1
// where (a != 0) op (b != 0) holds, else 0: LXor is 1 where an odd number of
// the inputs are nonzero. A result of two or more ranks' elements is 0 or 1;
// a result that is one rank's element alone (a group of one rank, Scan's
// rank 0, Exscan's rank 1) is that element unchanged, as in MPI.
//
// Besides the constants, an Op may be one a comm made: Comm.PreMulSum's
// (valid on that comm only, until Comm.DestroyOp; Valid reports false for
// it).
type Op int

const (
	Sum  Op = iota // element-wise sum
	Mean           // the sum divided by N: floats correctly rounded; integers the wrapped sum divided once, truncated toward zero (NCCL's ncclAvg)
	Max            // maximum; NaN if any input is NaN
	Min            // minimum; NaN if any input is NaN
	Prod           // product
	BAnd           // bitwise AND (integers only)
	BOr            // bitwise OR (integers only)
	BXor           // bitwise XOR (integers only)
	LAnd           // logical AND: 1 if every input is nonzero, else 0 (integers only)
	LOr            // logical OR: 1 if any input is nonzero, else 0 (integers only)
	LXor           // logical XOR: 1 if an odd number of inputs are nonzero, else 0 (integers only)
)

var opNames = [...]string{Sum: "sum", Mean: "avg", Max: "max", Min: "min", Prod: "prod",
	BAnd: "band", BOr: "bor", BXor: "bxor", LAnd: "land", LOr: "lor", LXor: "lxor", opPreMulSum: "premulsum"}

// String returns the nccl-tests name of the op (sum, avg, max, min, prod,
// premulsum for an op of Comm.PreMulSum), or MPI's without the prefix
// (band, bor, bxor, land, lor, lxor).
func (o Op) String() string {
	if premul.IsHandle(int(o)) {
		return "premulsum"
	}
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Valid reports whether o is one of the defined operators.
func (o Op) Valid() bool { return o >= Sum && o <= LXor }

// IntOnly reports whether o is defined on the Integer types only (BAnd,
// BOr, BXor, LAnd, LOr, LXor).
func (o Op) IntOnly() bool { return o >= BAnd && o <= LXor }

// ParseOp accepts sum, avg (or mean), max, min, prod, band, bor, bxor, land,
// lor and lxor. A PreMulSum op is made by Comm.PreMulSum, never parsed:
// "premulsum" is ErrInvalidArgument.
func ParseOp(s string) (Op, error) {
	l := strings.ToLower(s)
	if l == "mean" {
		return Mean, nil
	}
	for o := Sum; o <= LXor; o++ {
		if l == opNames[o] {
			return o, nil
		}
	}
	return 0, fmt.Errorf("collective: unknown op %q (want sum, avg, max, min, prod, band, bor, bxor, land, lor or lxor): %w", s, ErrInvalidArgument)
}

// Strategy is an all-reduce algorithm.
type Strategy int

const (
	// Auto picks the algorithm per call from a measured cost model.
	Auto Strategy = iota
	// Ring is reduce-scatter then all-gather, 2(N-1) steps.
	Ring
	// Tree reduces along a binary tree to a root and broadcasts back.
	Tree
	// Hierarchical reduces inside groups of LocalGroupSize ranks, all-reduces
	// among the group leaders, and broadcasts inside the groups.
	Hierarchical
	// Pipelined splits the tensor into PipelineDepth chunks, each submitted
	// without waiting, with one fence for the batch.
	Pipelined
	// Direct is the one-shot algorithm: every rank reduces its own 1/N of the
	// tensor from all ranks' inputs, then every rank gathers all slices.
	Direct
	// Host is Direct reduced by the CPU: every rank reduces its own 1/N
	// from all ranks' host slices and writes it into every rank's output,
	// with no device work (one process, host slices; the latency path for
	// small calls, which Auto picks when the cost model says it is faster).
	// Device-resident tensors run it as Direct; across processes it is
	// ErrUnsupported.
	Host
	// Native runs the step between processes through the transport's own
	// collectives (backend.NativeCollectives: MPI_Iallreduce and its
	// kin) for AllReduce, ReduceScatter, AllGather, Reduce, Broadcast and
	// BroadcastInto: the ranks of each process combine on the CPU from
	// their host slices, one leader per process calls the native
	// collective, and the result fans out in the process. The moves
	// (AllToAll, AllToAllV, Gather, Scatter, GatherV, ScatterV, AllGatherV
	// and ReduceScatterV, whose raw blocks are reduced in rank order) run
	// as one MPI_Ialltoallv of each process's ranks' ranges. Auto (and the
	// other collectives in a group whose strategy is Auto) picks it for host slices in a group that spans
	// processes over such a transport when the transport reduces the type
	// and op natively (always in deterministic mode, where
	// the transport only moves raw blocks and every process reduces its
	// chunk in rank order: bitwise the one-process result, for LocalSize
	// times the bytes between processes). Where it cannot run (one
	// process, a transport without native collectives, device tensors, a
	// type or op the transport does not reduce) the call runs Auto's
	// choice.
	Native
)

// Config holds the tuning of a Group's collectives. The rank count and the
// devices are Options.Ranks and Options.Devices; training settings
// (compression, adaptive strategy choice, asynchronous steps, the
// performance monitor) are ddp.Options.
//
// A zero field means its default (DefaultConfig's value), so the zero Config
// is the default configuration: Options{Ranks: 4} needs no Config at all.
type Config struct {
	// Strategy is the all-reduce algorithm (Auto, the zero value, by
	// default).
	Strategy Strategy
	// PipelineDepth is the number of chunks in flight: 1 to
	// MaxPipelineDepth, 0 for the default (2).
	PipelineDepth int
	// LocalGroupSize is the group size of the hierarchical strategy: >= 1,
	// 0 for the default (4).
	LocalGroupSize int
	// CommunicationTimeout bounds every blocking wait of a call for a
	// rank that is alive but slow: > 0, 0 for the default (10 minutes, as
	// torch's NCCL process group: a rank may pause for a checkpoint or an
	// evaluation, and waits that cannot end fail at once whatever the
	// timeout: a rank that is gone, a cycle of blocking point-to-point
	// calls). A context with a deadline bounds a call more tightly.
	CommunicationTimeout time.Duration
	// Deterministic fixes the reduction order (rank 0 + rank 1 + ...).
	Deterministic bool
}

// Defaults of the Config fields whose zero value means "the default".
const (
	DefaultPipelineDepth        = 2
	DefaultLocalGroupSize       = 4
	DefaultCommunicationTimeout = 10 * time.Minute
)

// DefaultConfig returns the default configuration, every field set: the same
// configuration as the zero Config.
func DefaultConfig() Config { return Config{}.WithDefaults() }

// WithDefaults returns c with every zero field set to its default. NewGroup
// applies it, and Group.Config returns the result.
func (c Config) WithDefaults() Config {
	if c.PipelineDepth == 0 {
		c.PipelineDepth = DefaultPipelineDepth
	}
	if c.LocalGroupSize == 0 {
		c.LocalGroupSize = DefaultLocalGroupSize
	}
	if c.CommunicationTimeout == 0 {
		c.CommunicationTimeout = DefaultCommunicationTimeout
	}
	return c
}

// MaxPipelineDepth bounds Config.PipelineDepth.
const MaxPipelineDepth = 64

// Validate checks every field that is later used as a divisor, an index
// bound or a duration (a zero field is valid: it means the default). Each
// error is a *ConfigError naming the field, saying how to fix it, and
// satisfies errors.Is(err, ErrInvalidConfig).
func (c Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return &ConfigError{Field: field, Reason: fmt.Sprintf(format, a...)}
	}
	c = c.WithDefaults()
	if !c.Strategy.valid() {
		return bad("Strategy", "unknown strategy %d: use one of the Strategy constants (Auto, the zero value, picks per call)", int(c.Strategy))
	}
	if c.PipelineDepth < 1 || c.PipelineDepth > MaxPipelineDepth {
		return bad("PipelineDepth", "must be in [1, %d] (0 for the default, %d), got %d", MaxPipelineDepth, DefaultPipelineDepth, c.PipelineDepth)
	}
	if c.LocalGroupSize < 1 {
		return bad("LocalGroupSize", "must be >= 1 (0 for the default, %d), got %d", DefaultLocalGroupSize, c.LocalGroupSize)
	}
	if c.CommunicationTimeout <= 0 {
		return bad("CommunicationTimeout", "must be > 0 (0 for the default, %v), got %v", DefaultCommunicationTimeout, c.CommunicationTimeout)
	}
	return nil
}

// ConfigError is a bad Config or Options field.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string { return "collective: invalid " + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }
