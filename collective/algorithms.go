package collective

import (
	"fmt"
	"slices"
	"strings"
)

// Algorithm is one entry of the algorithm table (Algorithms): a strategy,
// the collectives that run it, and what it promises.
type Algorithm struct {
	Strategy Strategy
	// Collectives are the entry points that run this strategy when it is
	// asked for (Config.Strategy, or a call's own strategy argument), by
	// name ("AllReduce", "ReduceScatter", ...), each with its tensor form.
	// A collective runs its default (the first strategy Strategies lists
	// for it) when the configured strategy is not listed for it.
	Collectives []string
	// RankOrder: every element is reduced in rank order (rank 0 + rank 1 +
	// ...), so every RankOrder strategy gives the same bits; deterministic
	// mode makes every strategy do so.
	RankOrder bool
	// Candidate: Auto chooses among the candidates for an all-reduce, from
	// the measured cost model.
	Candidate bool
	// OneProcess: only in a group of one process (a group that spans
	// processes refuses it with ErrUnsupported).
	OneProcess bool
	// Processes: only between processes, over a transport with native
	// collectives (backend.NativeCollectives); elsewhere the call runs
	// Auto's choice.
	Processes bool
	// Summary says what it does, in a line.
	Summary string
}

// algorithms is the table, in the order Algorithms lists it. Auto is not an
// entry: it picks among the candidates.
var algorithms = []Algorithm{
	{Strategy: Direct, Collectives: []string{"AllReduce", "ReduceScatter", "AllGather", "AllToAll", "AllToAllV", "Gather", "Scatter", "AllGatherV", "ReduceScatterV", "GatherV", "ScatterV", "Scan", "Exscan"},
		RankOrder: true, Candidate: true,
		Summary: "one shot: each rank reduces (or moves) its own part from every rank's input, then every rank gathers the parts"},
	{Strategy: Pipelined, Collectives: []string{"AllReduce"}, RankOrder: true, Candidate: true,
		Summary: "direct, split into PipelineDepth chunks in flight with one fence for the batch"},
	{Strategy: Ring, Collectives: []string{"AllReduce", "ReduceScatter", "AllGather"}, Candidate: true,
		Summary: "reduce-scatter then all-gather around a ring of ranks, 2(N-1) steps"},
	{Strategy: Tree, Collectives: []string{"AllReduce", "Broadcast", "BroadcastInto", "Reduce"}, Candidate: true,
		Summary: "reduce along a binary tree to a root, broadcast back"},
	{Strategy: Hierarchical, Collectives: []string{"AllReduce"}, Candidate: true,
		Summary: "reduce inside groups of LocalGroupSize ranks, all-reduce among the leaders, broadcast inside the groups"},
	{Strategy: Host, Collectives: []string{"AllReduce"}, RankOrder: true, Candidate: true, OneProcess: true,
		Summary: "direct reduced by the CPU from the ranks' host slices, no device work (device tensors run direct)"},
	{Strategy: Native, Collectives: []string{"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "BroadcastInto", "Reduce",
		"AllToAll", "AllToAllV", "Gather", "Scatter", "AllGatherV", "ReduceScatterV", "GatherV", "ScatterV"}, Processes: true,
		Summary: "between processes: each process's ranks combine on the CPU, one leader per process runs the transport's own collective (MPI's), the result fans out; the choice there of Auto and of the other collectives' defaults"},
}

// collectiveDefaults is the strategy each collective runs when the one asked
// for is not listed for it (Auto included, except for AllReduce, whose Auto
// picks per call).
var collectiveDefaults = map[string]Strategy{
	"AllReduce": Auto, "ReduceScatter": Ring, "AllGather": Direct, "Broadcast": Tree, "Reduce": Tree,
	"AllToAll": Direct, "AllToAllV": Direct, "Gather": Direct, "Scatter": Direct, "AllGatherV": Direct,
	"ReduceScatterV": Direct, "GatherV": Direct, "ScatterV": Direct, "Scan": Direct, "Exscan": Direct,
	"BroadcastInto": Tree,
}

// Algorithms returns the algorithm table: every strategy but Auto, with the
// collectives that run it.
func Algorithms() []Algorithm {
	out := make([]Algorithm, len(algorithms))
	for i, a := range algorithms {
		a.Collectives = slices.Clone(a.Collectives)
		out[i] = a
	}
	return out
}

// Strategies returns the strategies collective (an entry point's name, as
// "ReduceScatter") runs, its default first (Auto for AllReduce, which picks
// among the others per call); nil for a name that is not a collective.
func Strategies(collective string) []Strategy {
	def, ok := collectiveDefaults[collective]
	if !ok {
		return nil
	}
	out := []Strategy{def}
	for _, a := range algorithms {
		if a.Strategy != def && slices.Contains(a.Collectives, collective) {
			out = append(out, a.Strategy)
		}
	}
	return out
}

// algorithmOf returns s's entry (nil for Auto and unknown values).
func algorithmOf(s Strategy) *Algorithm {
	for i := range algorithms {
		if algorithms[i].Strategy == s {
			return &algorithms[i]
		}
	}
	return nil
}

// valid reports whether s is Auto or a strategy of the table.
func (s Strategy) valid() bool { return s == Auto || algorithmOf(s) != nil }

// strategyFor returns the strategy collective runs when s is asked for: s
// when the table lists it for the collective, else the collective's
// default.
func strategyFor(collective string, s Strategy) Strategy {
	if a := algorithmOf(s); a != nil && slices.Contains(a.Collectives, collective) {
		return s
	}
	return collectiveDefaults[collective]
}

// autoCandidates are the strategies Auto chooses among for an all-reduce
// (Host only for host slices): the table's candidates.
var autoCandidates = func() []Strategy {
	var out []Strategy
	for _, a := range algorithms {
		if a.Candidate {
			out = append(out, a.Strategy)
		}
	}
	return out
}()

var strategyNames = [...]string{Auto: "auto", Ring: "ring", Tree: "tree", Hierarchical: "hierarchical", Pipelined: "pipelined", Direct: "direct", Host: "host", Native: "native"}

func (s Strategy) String() string {
	if s >= 0 && int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// ParseStrategy accepts the names String returns.
func ParseStrategy(name string) (Strategy, error) {
	for i, n := range strategyNames {
		if strings.EqualFold(name, n) {
			return Strategy(i), nil
		}
	}
	return 0, fmt.Errorf("collective: unknown strategy %q (want %s): %w", name, strings.Join(strategyNames[:], ", "), ErrInvalidArgument)
}
