package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/diag"
)

// AutoRow is what the Auto strategy picks for one all-reduce size.
type AutoRow struct {
	Bytes    int
	Strategy string
	Model    map[string]time.Duration // each strategy's modelled time
}

// autoTable opens a group of ranks ranks on the default backend (or
// GOCOLL_BACKEND), lets its cost model measure the device, and returns the
// strategy Auto picks for f32 all-reduces from 4 B to 1 GiB.
func autoTable(ranks int) (string, []AutoRow, error) {
	g, err := collective.NewGroup(context.Background(), collective.Options{Ranks: ranks, Config: collective.DefaultConfig()})
	if err != nil {
		return "", nil, err
	}
	defer g.Close()
	var rows []AutoRow
	for b := 4; b <= 1<<30; b *= 16 {
		s, model := diag.AutoChoice(g.Comm(0), b, backend.F32)
		row := AutoRow{Bytes: b, Strategy: s.String(), Model: map[string]time.Duration{}}
		for st, d := range model {
			row.Model[st.String()] = d
		}
		rows = append(rows, row)
	}
	return g.Backend(), rows, nil
}

func writeAuto(w io.Writer, bk string, ranks int, rows []AutoRow) {
	unit := "ranks"
	if ranks == 1 {
		unit = "rank"
	}
	fmt.Fprintf(w, "auto strategy on %s, %d %s (f32 all-reduce; modelled time per strategy):\n", bk, ranks, unit)
	for _, r := range rows {
		names := make([]string, 0, len(r.Model))
		for n := range r.Model {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(w, "  %10s  %-12s", sizeString(r.Bytes), r.Strategy)
		for _, n := range names {
			fmt.Fprintf(w, "  %s %v", n, r.Model[n].Round(time.Microsecond))
		}
		fmt.Fprintln(w)
	}
}

func sizeString(b int) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}
