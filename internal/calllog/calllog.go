// Package calllog is the library's debug log: the logger a group writes to
// (the caller's, or the one GOCOLL_DEBUG asks for: INFO or TRACE, on
// stderr) and the record of each call (every rank's at LevelTrace, rank 0's
// alone at Info).
package calllog

import (
	"context"
	"log/slog"
	"os"
	"strings"
)

// LevelTrace is the level of GOCOLL_DEBUG=TRACE (every rank's calls).
const LevelTrace = slog.LevelDebug - 4

// New returns the logger of a group given l, and whether it logs calls:
// l itself (calls logged where it is enabled at Info), else GOCOLL_DEBUG's
// logger on stderr, else none.
func New(l *slog.Logger) (*slog.Logger, bool) {
	if l != nil {
		return l, l.Enabled(context.Background(), slog.LevelInfo)
	}
	switch strings.ToUpper(os.Getenv("GOCOLL_DEBUG")) {
	case "INFO":
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})), true
	case "TRACE":
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: LevelTrace})), true
	}
	return nil, false
}

// Call is the record of one call of a rank.
type Call struct {
	Name                    string // the entry point
	Rank                    int
	Seq                     uint64 // the call's number on the rank
	Count                   int    // elements
	Type, Op, Strategy, Why string
	HostReduce              bool // reduced on the CPU (a type without kernels)
}

// Log writes c to l: every rank's call at LevelTrace where l is enabled
// for it, else rank 0's alone at Info.
func Log(ctx context.Context, l *slog.Logger, c Call) {
	if l.Enabled(ctx, LevelTrace) {
		l.Log(ctx, LevelTrace, "gocoll: "+c.Name, "rank", c.Rank, "seq", c.Seq, "count", c.Count, "type", c.Type,
			"op", c.Op, "strategy", c.Strategy, "why", c.Why, "hostReduce", c.HostReduce)
	} else if c.Rank == 0 && l.Enabled(ctx, slog.LevelInfo) {
		l.Info("gocoll: "+c.Name, "seq", c.Seq, "count", c.Count, "type", c.Type, "op", c.Op, "strategy", c.Strategy, "why", c.Why)
	}
}
