package calllog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// New takes the caller's logger (calls logged where it is enabled at
// Info), else GOCOLL_DEBUG's, else none.
func TestNew(t *testing.T) {
	var buf bytes.Buffer
	info := slog.New(slog.NewTextHandler(&buf, nil))
	if l, calls := New(info); l != info || !calls {
		t.Fatalf("New(an Info logger) = %v, %v; want it, logging calls", l, calls)
	}
	warn := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if l, calls := New(warn); l != warn || calls {
		t.Fatalf("New(a Warn logger) = %v, %v; want it, not logging calls", l, calls)
	}
	for env, want := range map[string]slog.Level{"info": slog.LevelInfo, "TRACE": LevelTrace} {
		t.Setenv("GOCOLL_DEBUG", env)
		l, calls := New(nil)
		if l == nil || !calls || !l.Enabled(context.Background(), want) || l.Enabled(context.Background(), want-1) {
			t.Fatalf("GOCOLL_DEBUG=%s: logger %v, calls %v; want one enabled from %v", env, l, calls, want)
		}
	}
	t.Setenv("GOCOLL_DEBUG", "")
	if l, calls := New(nil); l != nil || calls {
		t.Fatalf("no logger, no GOCOLL_DEBUG: %v, %v", l, calls)
	}
}

// Log writes every rank's call at LevelTrace, else rank 0's alone at Info.
func TestLog(t *testing.T) {
	ctx := context.Background()
	c := Call{Name: "AllReduce", Rank: 1, Seq: 7, Count: 3, Type: "f32", Op: "sum", Strategy: "ring", Why: "configured"}
	var buf bytes.Buffer
	Log(ctx, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: LevelTrace})), c)
	if s := buf.String(); !strings.Contains(s, "gocoll: AllReduce") || !strings.Contains(s, "rank=1") || !strings.Contains(s, "hostReduce=false") {
		t.Fatalf("at LevelTrace: %q", s)
	}
	buf.Reset()
	info := slog.New(slog.NewTextHandler(&buf, nil))
	Log(ctx, info, c)
	if buf.Len() != 0 {
		t.Fatalf("rank 1 at Info: %q, want nothing", buf.String())
	}
	c.Rank = 0
	Log(ctx, info, c)
	if s := buf.String(); !strings.Contains(s, "strategy=ring") || !strings.Contains(s, "why=configured") || strings.Contains(s, "rank=") {
		t.Fatalf("rank 0 at Info: %q", s)
	}
}
