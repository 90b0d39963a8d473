package collective

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/internal/calllog"
)

// TestAlgorithmTable: every strategy but Auto has one entry; the names
// round-trip; validation, Auto's candidates and each collective's
// strategies read the table.
func TestAlgorithmTable(t *testing.T) {
	seen := map[Strategy]bool{}
	for _, a := range Algorithms() {
		if a.Strategy == Auto || seen[a.Strategy] || !a.Strategy.valid() {
			t.Errorf("entry %v: Auto, repeated or invalid", a.Strategy)
		}
		seen[a.Strategy] = true
		if len(a.Collectives) == 0 || a.Summary == "" {
			t.Errorf("entry %v lists no collective or has no summary", a.Strategy)
		}
		if s, err := ParseStrategy(strings.ToUpper(a.Strategy.String())); err != nil || s != a.Strategy {
			t.Errorf("ParseStrategy(%q) = %v, %v", a.Strategy, s, err)
		}
		if a.Candidate != slices.Contains(autoCandidates, a.Strategy) {
			t.Errorf("%v: Candidate %v, but Auto's candidates are %v", a.Strategy, a.Candidate, autoCandidates)
		}
	}
	for _, s := range []Strategy{Ring, Tree, Hierarchical, Pipelined, Direct, Host, Native} {
		if !seen[s] {
			t.Errorf("strategy %v has no entry", s)
		}
	}
	for _, bad := range []Strategy{-1, Native + 1, 99} {
		if bad.valid() {
			t.Errorf("Strategy(%d) valid", int(bad))
		}
		var ce *ConfigError
		if err := (Config{Strategy: bad}).Validate(); !errors.As(err, &ce) || ce.Field != "Strategy" {
			t.Errorf("Config{Strategy: %d}.Validate() = %v", int(bad), err)
		}
	}
	// Each copy is the caller's.
	a := Algorithms()
	a[0].Collectives[0] = "changed"
	if Algorithms()[0].Collectives[0] == "changed" {
		t.Error("Algorithms returns the table itself")
	}
	for _, tc := range []struct {
		coll string
		want []Strategy
	}{
		{"AllReduce", []Strategy{Auto, Direct, Pipelined, Ring, Tree, Hierarchical, Host, Native}},
		{"ReduceScatter", []Strategy{Ring, Direct, Native}},
		{"AllGather", []Strategy{Direct, Ring, Native}},
		{"Broadcast", []Strategy{Tree, Native}},
		{"Reduce", []Strategy{Tree, Native}},
		{"AllToAll", []Strategy{Direct, Native}},
		{"Gather", []Strategy{Direct, Native}},
		{"ReduceScatterV", []Strategy{Direct, Native}},
		{"Scan", []Strategy{Direct}},
		{"NoSuchCollective", nil},
	} {
		if got := Strategies(tc.coll); !slices.Equal(got, tc.want) {
			t.Errorf("Strategies(%s) = %v, want %v", tc.coll, got, tc.want)
		}
	}
}

// TestConfigStrategyAppliesWhereListed: Config.Strategy applies to a
// collective whose table entry lists it; another collective runs its
// default, and says so in its log line (a ReduceScatter of a group
// configured for Tree runs the ring, as before, where it named "tree").
func TestConfigStrategyAppliesWhereListed(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		cfg  Strategy
		want string
	}{{Tree, "ring"}, {Direct, "direct"}, {Ring, "ring"}, {Hierarchical, "ring"}} {
		var buf lockedBuffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		g, err := NewGroup(ctx, Options{Ranks: 3, Backend: "host", Logger: log, Config: Config{Strategy: tc.cfg}})
		if err != nil {
			t.Fatal(err)
		}
		err = g.Run(ctx, func(ctx context.Context, c *Comm) error {
			send := []float64{1, 2, 3, 4, 5, 6}
			recv := make([]float64, 2)
			if err := ReduceScatter(ctx, c, send, recv, Sum); err != nil {
				return err
			}
			if want := []float64{3 * float64(2*c.Rank()+1), 3 * float64(2*c.Rank()+2)}; !slices.Equal(recv, want) {
				t.Errorf("rank %d: %v, want %v", c.Rank(), recv, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		g.Close()
		out := buf.String()
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "gocoll: ReduceScatter") {
				line = l
			}
		}
		if !strings.Contains(line, "strategy="+tc.want) {
			t.Errorf("configured %v: ReduceScatter logged %q, want strategy=%s", tc.cfg, line, tc.want)
		}
	}
}

// lockedBuffer is a bytes.Buffer that ranks may log into at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLevelTrace: the exported level is the one the call log uses.
func TestLevelTrace(t *testing.T) {
	if LevelTrace != calllog.LevelTrace {
		t.Fatalf("LevelTrace %v, the call log's %v", LevelTrace, calllog.LevelTrace)
	}
}

// TestNativeOneProcess: strategy Native in a group of one process (no
// transport) runs Auto's choice for AllReduce, and says why in its log
// line, and the other collectives' defaults (logged); the results are
// exact.
func TestNativeOneProcess(t *testing.T) {
	var log lockedBuffer
	g, err := NewGroup(context.Background(), Options{Ranks: 2, Backend: "host", Config: Config{Strategy: Native},
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	err = g.Run(context.Background(), func(ctx context.Context, c *Comm) error {
		x := []float32{float32(c.Rank() + 1), 2}
		if err := AllReduce(ctx, c, x, Sum); err != nil {
			return err
		}
		if x[0] != 3 || x[1] != 4 {
			t.Errorf("rank %d: %v, want [3 4]", c.Rank(), x)
		}
		rs := make([]float32, 1)
		if err := ReduceScatter(ctx, c, []float32{1, 2}, rs, Sum); err != nil || rs[0] != float32(2*(c.Rank()+1)) {
			t.Errorf("rank %d: ReduceScatter = %v, %v", c.Rank(), rs, err)
		}
		ag := make([]float32, 2)
		if err := AllGather(ctx, c, []float32{float32(c.Rank())}, ag); err != nil || ag[0] != 0 || ag[1] != 1 {
			t.Errorf("rank %d: AllGather = %v, %v", c.Rank(), ag, err)
		}
		b := []float32{float32(c.Rank())}
		if err := Broadcast(ctx, c, b, 1); err != nil || b[0] != 1 {
			t.Errorf("rank %d: Broadcast = %v, %v", c.Rank(), b, err)
		}
		r := make([]float32, 1)
		if err := Reduce(ctx, c, []float32{1}, r, Sum, 0); err != nil || (c.Rank() == 0 && r[0] != 2) {
			t.Errorf("rank %d: Reduce = %v, %v", c.Rank(), r, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := log.String()
	if !strings.Contains(out, "native: one process") {
		t.Errorf("the log does not say why native did not run:\n%s", out)
	}
	for _, want := range []string{"gocoll: ReduceScatter", "gocoll: AllGather", "gocoll: Broadcast", "gocoll: Reduce"} {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, want+" ") && strings.Contains(l, "strategy=native") {
				t.Errorf("one process ran native: %s", l)
			}
		}
	}
}
