package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// fast keeps timing loops short: these tests check values, not speed.
var fast = []string{"-n", "2", "-w", "1"}

// eltSizes are the size(B) bytes per element of each type column.
var eltSizes = map[string]int64{
	"float": 4, "double": 8, "int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "bfloat16": 2,
	"int16": 2, "uint16": 2, "f8e4m3": 1, "f8e5m2": 1,
}

// checkShape checks a row's size, count, redop and root against the
// collective's nccl-tests semantics on n ranks.
func checkShape(t *testing.T, c coll, n int, r row) {
	t.Helper()
	elt := eltSizes[r.typ]
	if elt == 0 {
		t.Fatalf("row %+v: unknown type", r)
	}
	switch c {
	case collReduceScatter, collAllGather, collAllToAll, collGather, collScatter:
		// size is the full buffer: count (per rank) * n elements, each
		// rank's count in whole 16-byte groups.
		if r.size != r.count*int64(n)*elt || r.count*elt%16 != 0 {
			t.Errorf("%s row %+v: size != count*%d*%d, or count*%d not a multiple of 16", c, r, n, elt, elt)
		}
	default:
		if r.size != r.count*elt {
			t.Errorf("%s row %+v: size != count*%d", c, r, elt)
		}
	}
	if c.hasOp() == (r.op == "none") {
		t.Errorf("%s row %+v: redop %q", c, r, r.op)
	}
	if c.hasRoot() {
		if r.root < 0 || r.root >= n {
			t.Errorf("%s row %+v: root out of range", c, r)
		}
	} else if r.root != -1 {
		t.Errorf("%s row %+v: root %d, want -1", c, r, r.root)
	}
}

func TestEveryCollective(t *testing.T) {
	ranks := []int{1, 3, 4}
	if testing.Short() {
		ranks = []int{3} // ./build.sh test's race run; the run without it takes 1 and 4 too
	}
	for _, c := range allColls {
		for _, n := range ranks {
			args := []string{"--backend", "host", "--coll", c.String(), "-g", strconv.Itoa(n),
				"-d", "all", "-o", "all", "-r", "all", "-b", "4", "-e", "4K", "-f", "8"}
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				rows := wantCorrect(t, append(args, fast...)...)
				roots := map[int]bool{}
				for _, r := range rows {
					checkShape(t, c, n, r)
					roots[r.root] = true
				}
				if c.hasRoot() && len(roots) != n {
					t.Errorf("-r all on %d ranks ran roots %v", n, roots)
				}
			})
		}
	}
}

func TestRootOtherThanZero(t *testing.T) {
	for _, c := range []string{"broadcast", "reduce"} {
		for _, root := range []string{"1", "3"} {
			args := []string{"--backend", "host", "--coll", c, "-g", "4", "-r", root, "-o", "all", "-b", "4", "-e", "64K", "-f", "16"}
			rows := wantCorrect(t, append(args, fast...)...)
			for _, r := range rows {
				if strconv.Itoa(r.root) != root {
					t.Errorf("%v: row %+v, want root %s", args, r, root)
				}
			}
		}
	}
	// -r is meaningless for the collectives without a root: they print -1.
	rows := wantCorrect(t, append([]string{"--backend", "host", "--coll", "allgather", "-g", "3", "-r", "2", "-b", "48", "-e", "48"}, fast...)...)
	if rows[0].root != -1 || rows[0].count != 4 || rows[0].size != 48 {
		t.Errorf("allgather row %+v: want root -1, count 4, size 48", rows[0])
	}
}

// ncclShape is a row's count and size(B) in nccl-tests.
type ncclShape struct{ count, size int64 }

// Counts and sizes as nccl-tests computes them (setupArgs: count = size /
// wordSize; AllReduce, Broadcast and Reduce GetCollByteCount: paramcount =
// count; ReduceScatter, AllGather, AlltoAll, Gather and Scatter: paramcount
// = (count/nranks) & -(16/eltSize); the size column is max(sendBytes,
// expectedBytes)), worked out by hand for each case.
func TestShapeMatchesNcclTests(t *testing.T) {
	split := []coll{collReduceScatter, collAllGather, collAllToAll, collGather, collScatter}
	whole := []coll{collAllReduce, collBroadcast, collReduce}
	for _, tc := range []struct {
		colls       []coll
		size, elt   int64
		n           int64
		count, want int64 // count and size(B)
	}{
		// 3 ranks, 1 KiB: 256 floats, 85 per rank -> 84 (1008 B), as nccl-tests prints.
		{split, 1024, 4, 3, 84, 1008},
		{split, 1024, 8, 3, 42, 1008},  // double: 128 / 3 = 42, in pairs
		{split, 1024, 2, 3, 168, 1008}, // half, bfloat16: 512 / 3 = 170 -> 168, in eights
		{split, 1024, 1, 3, 336, 1008}, // int8, uint8: 1024 / 3 = 341 -> 336, in sixteens
		{split, 1024, 4, 4, 64, 1024},
		{split, 1 << 20, 4, 5, 52428, 1048560},  // 262144 / 5 = 52428, a multiple of 4
		{split, 1 << 20, 4, 6, 43688, 1048512},  // 262144 / 6 = 43690 -> 43688
		{split, 1 << 20, 8, 7, 18724, 1048544},  // 131072 / 7 = 18724
		{split, 1 << 20, 1, 7, 149792, 1048544}, // 1048576 / 7 = 149796 -> 149792
		{split, 1000, 8, 6, 20, 960},            // 125 / 6 = 20
		{split, 48, 4, 3, 4, 48},
		{split, 100, 4, 7, 0, 0}, // 25 / 7 = 3 -> 0: less than one group per rank
		{split, 12, 4, 3, 0, 0},
		{split, 0, 4, 3, 0, 0},
		{whole, 1024, 4, 3, 256, 1024},
		{whole, 1020, 8, 3, 127, 1016}, // size / wordSize, no rounding per rank
		{whole, 1000, 1, 7, 1000, 1000},
		{whole, 6, 4, 4, 1, 4},
	} {
		for _, c := range tc.colls {
			sh := shapeFor(c, tc.size, tc.elt, tc.n)
			if sh.count != tc.count || sh.bytes != tc.want {
				t.Errorf("%s, %d B of %d-byte elements, %d ranks: count %d, size %d; nccl-tests: %d, %d",
					c, tc.size, tc.elt, tc.n, sh.count, sh.bytes, tc.count, tc.want)
			}
			if wantTotal := sh.bytes / tc.elt; sh.total != wantTotal {
				t.Errorf("%s, %d B, %d ranks: %d elements in the full buffer, want %d", c, tc.size, tc.n, sh.total, wantTotal)
			}
		}
	}
}

// The table, the JSON records and the plot's points carry nccl-tests'
// counts and sizes: on 3 ranks, 1 KiB of float, count 84 and size 1008 in
// every collective that splits the buffer among the ranks, with every
// value checked; int8 and double alike.
func TestRowsMatchNcclTests(t *testing.T) {
	args := append([]string{"--backend", "host", "--coll", "reducescatter,allgather,alltoall,gather,scatter", "-g", "3",
		"-d", "float,int8,double", "-b", "1K", "-e", "1K"}, fast...)
	out, doc, _ := readJSON(t, 0, args...)
	rows := parseTable(t, out)
	want := map[string]ncclShape{"float": {84, 1008}, "int8": {336, 1008}, "double": {42, 1008}}
	if len(rows) != 5*len(want) || len(doc.Results) != 2*len(rows) {
		t.Fatalf("%d rows and %d records, want %d and %d:\n%s", len(rows), len(doc.Results), 5*len(want), 10*len(want), out)
	}
	for i, r := range rows {
		if w := want[r.typ]; r.count != w.count || r.size != w.size || r.wrong != [2]int64{} {
			t.Errorf("row %+v: want count %d, size %d, 0 wrong", r, w.count, w.size)
		}
		for mode := 0; mode < 2; mode++ {
			if rec := doc.Results[2*i+mode]; rec.Count != r.count || rec.Size != r.size {
				t.Errorf("record %+v: count %d, size %d, want the row's %d, %d", rec, rec.Count, rec.Size, r.count, r.size)
			}
		}
	}
	for _, s := range seriesOf(doc.Results) {
		for _, p := range s.pts {
			if p.X != math.Log2(1008) {
				t.Errorf("plot series %q: a point at log2(size) %v, want log2(1008)", s.label, p.X)
			}
		}
	}
}

func TestCollectiveStrategiesHonoured(t *testing.T) {
	// reduce-scatter and all-gather run ring or direct; the others their
	// one algorithm; --coll all runs one table per collective.
	for _, args := range [][]string{
		{"--coll", "reducescatter", "-a", "direct", "-g", "3", "-o", "all"},
		{"--coll", "reducescatter", "-a", "ring", "-g", "4", "-d", "double"},
		{"--coll", "allgather", "-a", "ring", "-g", "3"},
		{"--coll", "allgather", "-a", "direct", "-g", "3"},
		{"--coll", "broadcast,reduce", "-a", "tree", "-g", "3", "-r", "2"},
		{"--coll", "all", "-g", "3", "-r", "1", "-d", "all"},
		{"--coll", "all_reduce,reduce_scatter", "-a", "direct", "-g", "2"},
	} {
		args = append(args, "--backend", "host", "-b", "4", "-e", "16K", "-f", "8")
		wantCorrect(t, append(args, fast...)...)
	}
	_, out, _ := runCLI(t, append([]string{"--backend", "host", "--coll", "all", "-g", "2", "-b", "64", "-e", "64"}, fast...)...)
	for _, want := range []string{
		"# Backend host  Strategy one per table, named below  Skipped: none\n",
		"# Collective allreduce  Strategy auto (chosen per call by the cost model)\n",
		"# Collective reducescatter  Strategy ring\n",
		"# Collective allgather  Strategy direct\n",
		"# Collective broadcast  Strategy tree\n",
		"# Collective reduce  Strategy tree\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestAllStrategies(t *testing.T) {
	code, out, errOut := runCLI(t, append([]string{"--backend", "host", "-a", "all", "-g", "3", "-b", "8", "-e", "8K", "-f", "32"}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(line, "# Collective allreduce  Strategy "); ok {
			names = append(names, strings.Fields(name)[0])
		}
	}
	if got := strings.Join(names, ","); got != "auto,direct,pipelined,ring,tree,hierarchical" {
		t.Errorf("tables %s, want one per strategy", got)
	}
	if rows := parseTable(t, out); len(rows) != 6*3 {
		t.Errorf("%d rows, want 18", len(rows))
	}
}

func TestWireTypes(t *testing.T) {
	// --wire reproduces what -d half and -d bfloat16 meant before they
	// became the native 16-bit types: float32 data all-reduced with
	// AllReduceWire, rows named after the wire type with 2 bytes per
	// element, checked against WireErrorBound.
	for _, w := range []string{"half", "bfloat16"} {
		for _, n := range []string{"1", "3", "4"} {
			args := []string{"--backend", "host", "--wire", w, "-o", "all", "-g", n, "-b", "2", "-e", "8K", "-f", "8"}
			rows := wantAllReduce(t, append(args, fast...)...)
			for _, r := range rows {
				checkShape(t, collAllReduce, 0, r)
				if r.typ != w {
					t.Errorf("%v: row %+v has type %q", args, r, r.typ)
				}
			}
		}
	}
	// The flag's other spellings, the ring asked for by name, -d float
	// given explicitly; the header says what the rows are.
	for _, args := range [][]string{
		{"-wire", "bf16", "-a", "ring", "-d", "float"},
		{"-wire=half", "-a", "ring"},
		{"--wire=half", "--wire", "none", "--wire", "half"},
	} {
		args = append(args, "--backend", "host", "-g", "3", "-b", "1K", "-e", "1K")
		rows, out := wantCorrectOut(t, append(args, fast...)...)
		w := rows[0].typ
		if len(rows) != 1 || rows[0].count != 512 || rows[0].size != 1024 || (w != "half" && w != "bfloat16") {
			t.Errorf("%v: rows %+v: want one wire-type row of count 512 for 1 KiB", args, rows)
		}
		if want := "; --wire " + w + ": wire-compressed ring (float data, " + w + " on the wire: size(B) = count*2)"; !strings.Contains(out, want) {
			t.Errorf("%v: the header lacks %q:\n%s", args, want, out)
		}
	}
	_, doc, _ := readJSON(t, 0, append([]string{"--backend", "host", "--wire", "bfloat16", "-g", "2", "-b", "64", "-e", "64"}, fast...)...)
	if doc.Config.Wire != "bfloat16" || strings.Join(doc.Config.Datatypes, ",") != "bfloat16" || len(doc.Results) != 2 ||
		doc.Results[0].Wire != "bfloat16" || doc.Results[0].Type != "bfloat16" || doc.Results[0].Algorithm != "ring" {
		t.Errorf("--wire bfloat16 JSON: config %+v, results %+v", doc.Config, doc.Results)
	}
}

// nativeTypes are the types beyond float and double, as -d names them.
const nativeTypes = "int8,uint8,int16,uint16,int32,uint32,int64,uint64,half,bfloat16,f8e4m3,f8e5m2"

// fullRun reports whether ./build.sh test-full runs the tests
// (GOCOLL_TEST_FULL): the sweeps take every size.
func fullRun() bool { return os.Getenv("GOCOLL_TEST_FULL") != "" }

func TestNewTypes(t *testing.T) {
	// Every collective in every new type, with sizes that are no multiple
	// of 2, 4 or 8 bytes (additive steps of 33 bytes), every op (avg
	// skipped for the integers) and every root, on 1, 2 and 3 ranks
	// (-short, ./build.sh test's race run, which checks synchronisation: 1
	// and 67 bytes, not 34 and 100 too).
	last, step := "100", "33"
	if testing.Short() && !fullRun() {
		last, step = "67", "66"
	}
	for _, n := range []int{1, 2, 3} {
		args := []string{"--backend", "host", "--coll", "all", "-d", nativeTypes, "-o", "all", "-r", "all", "-g", strconv.Itoa(n),
			"-b", "1", "-e", last, "-i", step, "-n", "1", "-w", "0"}
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			rows, out := wantCorrectOut(t, args...)
			checkTypeRows(t, out, rows, n)
			// The progress line counts the same rows.
			o, _, err := parseFlags("allreduce-perf", args)
			if err != nil || rowsOf(o, tablesOf(o)) != len(rows) {
				t.Errorf("rowsOf %d (%v), %d rows", rowsOf(o, tablesOf(o)), err, len(rows))
			}
		})
	}
	// The strategies of all-reduce, and reduce-scatter's direct (-short,
	// ./build.sh test's race run, where the checks' element loops cost
	// tenfold: 4 and 128 bytes, not 4 KiB).
	end := "4K"
	if testing.Short() {
		end = "128"
	}
	for _, a := range []string{"direct", "pipelined", "ring", "tree", "hierarchical"} {
		wantAllReduce(t, "--backend", "host", "-a", a, "-g", "4", "-d", nativeTypes, "-o", "all", "-b", "4", "-e", end, "-f", "32", "-n", "1", "-w", "0")
	}
	wantCorrect(t, "--backend", "host", "--coll", "reducescatter", "-a", "direct", "-g", "3", "-d", nativeTypes, "-o", "all", "-b", "4", "-e", "4K", "-f", "32", "-n", "1", "-w", "0")
}

// checkTypeRows checks the rows of a --coll all -o all run over the new
// types: each collective's shape, the types in -d's order, avg skipped for
// the integers (and the header says so), and a captured result that holds
// the type's values.
func checkTypeRows(t *testing.T, out string, rows []row, n int) {
	t.Helper()
	var c coll
	seen := map[string]map[string]bool{}
	table := 0
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(line, "# Collective "); ok {
			c, _ = parseColl(strings.Fields(name)[0])
			table++
		}
		f := strings.Fields(line)
		if len(f) != 13 || strings.HasPrefix(line, "#") {
			continue
		}
		size, _ := strconv.ParseInt(f[0], 10, 64)
		count, _ := strconv.ParseInt(f[1], 10, 64)
		root, _ := strconv.Atoi(f[4])
		checkShape(t, c, n, row{size: size, count: count, typ: f[2], op: f[3], root: root})
		if seen[f[2]] == nil {
			seen[f[2]] = map[string]bool{}
		}
		seen[f[2]][f[3]] = true
	}
	if table != len(allColls) || len(rows) == 0 {
		t.Errorf("%d tables, want %d", table, len(allColls))
	}
	for _, d := range strings.Split(nativeTypes, ",") {
		dt, _ := parseDtype(d)
		if seen[d] == nil {
			t.Errorf("no %s rows", d)
			continue
		}
		if !seen[d]["avg"] {
			t.Errorf("%s rows: no avg", d)
		}
		for _, op := range []string{"band", "bor", "bxor", "land", "lor", "lxor"} {
			if seen[d][op] != dt.isInt() {
				t.Errorf("%s rows: %s %v, want %v", d, op, seen[d][op], dt.isInt())
			}
		}
	}
	if strings.Contains(out, "skips avg") {
		t.Errorf("the header says avg is skipped:\n%s", out)
	}
	if !strings.Contains(out, "# Types: -o all skips band, bor, bxor, land, lor and lxor for half, bfloat16, f8e4m3, f8e5m2 (defined for integer types only)\n") {
		t.Errorf("the header does not say the bitwise and logical ops are skipped:\n%s", out)
	}
}

func TestNativeHalfIsNotWire(t *testing.T) {
	// -d half and -d bfloat16 are the 16-bit types now: the buffers hold
	// collective.Float16 and BFloat16 values, any collective runs them,
	// and the results are exact (no wire bound: one changed ulp is wrong).
	for _, d := range []string{"half", "bfloat16"} {
		var got any
		testHookAfterCheck = func(rank int, inPlace bool, result any) {
			if rank == 0 && !inPlace && got == nil {
				switch r := result.(type) { // a copy: the buffer is used again
				case []collective.Float16:
					got = append([]collective.Float16(nil), r...)
				case []collective.BFloat16:
					got = append([]collective.BFloat16(nil), r...)
				default:
					got = r
				}
			}
		}
		wantAllReduce(t, "--backend", "host", "-d", d, "-o", "sum", "-g", "3", "-b", "64", "-e", "64", "-n", "1", "-w", "0")
		testHookAfterCheck = nil
		switch g := got.(type) {
		case []collective.Float16:
			if d != "half" || len(g) != 32 {
				t.Errorf("-d %s: captured %d Float16", d, len(g))
			}
			for i, x := range g {
				if want := float32(reference(collective.Sum, 3, int64(i), 1)); x.Float32() != want {
					t.Fatalf("-d half element %d: %v, want %v", i, x.Float32(), want)
				}
			}
		case []collective.BFloat16:
			if d != "bfloat16" || len(g) != 32 {
				t.Errorf("-d %s: captured %d BFloat16", d, len(g))
			}
		default:
			t.Errorf("-d %s: the buffers hold %T", d, got)
		}
	}
	// No wire restrictions: other collectives and strategies run.
	wantCorrect(t, append([]string{"--backend", "host", "--coll", "broadcast,reduce", "-d", "half,bfloat16", "-a", "tree", "-g", "3", "-b", "8", "-e", "64", "-f", "8"}, fast...)...)
	// One ulp off is wrong (the wire bound would have allowed it).
	done := false
	testHookAfterCheck = func(rank int, inPlace bool, result any) {
		if s := result.([]collective.Float16); rank == 2 && !inPlace && !done {
			s[5] = collective.Float16(uint16(s[5]) ^ 1)
			done = true
		}
	}
	t.Cleanup(func() { testHookAfterCheck = nil })
	code, out, _ := runCLI(t, "--backend", "host", "-d", "half", "-o", "avg", "-g", "3", "-b", "64", "-e", "64", "-n", "1", "-w", "0")
	if code != 1 || !strings.Contains(out, "# Out of bounds values : 1 FAILED\n") {
		t.Fatalf("exit %d, want 1 and 1 FAILED:\n%s", code, out)
	}
}

func TestWireIsInexactButBounded(t *testing.T) {
	// The wire-type inputs carry tenths a 16-bit wire cannot hold, so the
	// results must differ from the exact sum somewhere (the check is not
	// vacuous) and stay within WireErrorBound everywhere.
	for _, d := range []dtype{dtWireHalf, dtWireBfloat16} {
		var got []float32
		testHookAfterCheck = func(rank int, inPlace bool, result any) {
			if rank == 0 && !inPlace {
				got = append([]float32(nil), result.([]float32)...)
			}
		}
		wantAllReduce(t, "--backend", "host", "--wire", d.String(), "-g", "3", "-b", "4K", "-e", "4K", "-n", "1", "-w", "0")
		testHookAfterCheck = nil
		if len(got) != 2048 {
			t.Fatalf("%s: captured %d elements, want 2048", d, len(got))
		}
		// The out-of-place run is the first verified run: rep 1.
		inexact, worst := 0, 0.0
		for i, g := range got {
			want, sumAbs := referenceOf(wireInput, collective.Sum, 3, int64(i), 1)
			bound := wireBound(d.wire(), collective.Sum, 3, want, sumAbs)
			e := math.Abs(float64(g) - want)
			if e > bound {
				t.Fatalf("%s element %d: %v, want %v within %v", d, i, g, want, bound)
			}
			if e > 0 {
				inexact++
				worst = max(worst, e/bound)
			}
		}
		if inexact == 0 {
			t.Errorf("%s: every result exact: the inputs do not exercise the wire's rounding", d)
		}
		t.Logf("%s: %d of %d results rounded, worst at %.2f of the bound", d, inexact, len(got), worst)
	}
}

func TestWireCorruptionIsCaught(t *testing.T) {
	// A value off by more than the bound (1.0 here, the bound being ~0.02)
	// is wrong.
	done := false
	testHookAfterCheck = func(rank int, inPlace bool, result any) {
		if s := result.([]float32); rank == 2 && !inPlace && !done {
			s[5] += 1
			done = true
		}
	}
	t.Cleanup(func() { testHookAfterCheck = nil })
	code, out, _ := runCLI(t, "--backend", "host", "--wire", "half", "-g", "3", "-b", "64", "-e", "64", "-n", "1", "-w", "0")
	if code != 1 || !strings.Contains(out, "# Out of bounds values : 1 FAILED\n") {
		t.Fatalf("exit %d, want 1 and 1 FAILED:\n%s", code, out)
	}
}

func TestOtherCollectivesCatchCorruption(t *testing.T) {
	for _, c := range []string{"reducescatter", "allgather", "broadcast", "reduce"} {
		t.Run(c, func(t *testing.T) {
			done := false
			testHookAfterCheck = func(rank int, inPlace bool, result any) {
				// Rank 1 is never reduce's root (0) here; its untouched
				// receive buffer must stay untouched.
				if s := result.([]float32); rank == 1 && inPlace && !done && len(s) > 0 {
					s[0] += 1
					done = true
				}
			}
			t.Cleanup(func() { testHookAfterCheck = nil })
			code, out, _ := runCLI(t, "--backend", "host", "--coll", c, "-g", "3", "-b", "96", "-e", "96", "-n", "1", "-w", "0")
			if code != 1 || !strings.Contains(out, "# Out of bounds values : 1 FAILED\n") {
				t.Fatalf("exit %d, want 1 and 1 FAILED:\n%s", code, out)
			}
		})
	}
}

func TestInvokedAs(t *testing.T) {
	for prog, want := range map[string]coll{
		"/usr/local/bin/reducescatter-perf": collReduceScatter,
		"reduce_scatter_perf":               collReduceScatter,
		"./allgather-perf":                  collAllGather,
		"all_gather_perf":                   collAllGather,
		"broadcast-perf":                    collBroadcast,
		"bin/reduce-perf":                   collReduce,
		"reduce_perf.exe":                   collReduce,
		"allreduce-perf":                    collAllReduce,
		"all_reduce_perf":                   collAllReduce,
		"gocoll-bench":                      collAllReduce,
	} {
		if got := collForProgram(prog); got != want {
			t.Errorf("invoked as %q: default --coll %v, want %v", prog, got, want)
		}
	}
	// End to end: broadcast-perf prints broadcast rows (redop none, a
	// root); an explicit --coll still wins; usage errors carry the name.
	var out, errOut bytes.Buffer
	code := runAs(context.Background(), "/opt/bin/broadcast-perf", append([]string{"--backend", "host", "-g", "3", "-r", "2", "-b", "8", "-e", "8"}, fast...), &out, &errOut)
	rows := parseTable(t, out.String())
	if code != 0 || len(rows) != 1 || rows[0].op != "none" || rows[0].root != 2 || !strings.Contains(out.String(), "# Collective broadcast  Strategy tree\n") {
		t.Errorf("broadcast-perf: exit %d, rows %+v:\n%s%s", code, rows, out.String(), errOut.String())
	}
	out.Reset()
	code = runAs(context.Background(), "reduce-perf", append([]string{"--backend", "host", "--coll", "allreduce", "-g", "2", "-b", "8", "-e", "8"}, fast...), &out, &errOut)
	if rows := parseTable(t, out.String()); code != 0 || rows[0].root != -1 || rows[0].op != "sum" {
		t.Errorf("reduce-perf --coll allreduce: exit %d:\n%s", code, out.String())
	}
	out.Reset()
	errOut.Reset()
	code = runAs(context.Background(), "allgather-perf", []string{"-g", "0"}, &out, &errOut)
	if code != 2 || !strings.HasPrefix(errOut.String(), "allgather-perf: ") || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("allgather-perf -g 0: exit %d, stderr %q", code, errOut.String())
	}
	out.Reset()
	runAs(context.Background(), "allgather-perf", []string{"-h"}, &out, &errOut)
	if !strings.HasPrefix(out.String(), "usage: allgather-perf [flags]\n") {
		t.Errorf("allgather-perf -h: %q", out.String())
	}
}

// readJSON runs the command with -J and returns the output and the
// parsed file.
func readJSON(t *testing.T, wantCode int, args ...string) (string, *jsonDoc, map[string]any) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	code, out, errOut := runCLI(t, append(args, "-J", path)...)
	if code != wantCode {
		t.Fatalf("exit %d, want %d; stderr %q\n%s", code, wantCode, errOut, out)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc jsonDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, raw)
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left next to the output: %v", ents)
	}
	return out, &doc, generic
}

func TestJSONOutput(t *testing.T) {
	args := append([]string{"--backend", "host", "--coll", "allreduce,broadcast", "-g", "3", "-r", "1", "-d", "all", "-o", "sum,max",
		"-b", "8", "-e", "8K", "-f", "32"}, fast...)
	out, doc, generic := readJSON(t, 0, args...)
	rows := parseTable(t, out)
	if len(doc.Results) != 2*len(rows) || len(rows) == 0 {
		t.Fatalf("%d records for %d rows, want two per row", len(doc.Results), len(rows))
	}
	if !strings.Contains(out, "# Writing JSON output to ") {
		t.Errorf("the header does not name the JSON file:\n%s", out)
	}
	for i, r := range rows {
		for mode := 0; mode < 2; mode++ {
			rec := doc.Results[2*i+mode]
			if rec.Size != r.size || rec.Count != r.count || rec.Type != r.typ || rec.Redop != r.op || rec.Root != r.root ||
				rec.InPlace != (mode == 1) || rec.Wrong == nil || *rec.Wrong != r.wrong[mode] || rec.Iters != 2 {
				t.Errorf("record %+v does not match row %+v mode %d", rec, r, mode)
			}
			if math.Abs(rec.TimeUs-r.time[mode]) > 0.01*rec.TimeUs+0.01 || math.Abs(rec.AlgBw-r.algbw[mode]) > 0.006 {
				t.Errorf("record %+v: time or algbw differ from the row %+v", rec, r)
			}
			c, _ := parseColl(rec.Collective)
			if want := rec.AlgBw * c.busFactor(3); rec.BusBw != want {
				t.Errorf("record %+v: busbw %v, want algbw*%v", rec, rec.BusBw, c.busFactor(3))
			}
			if rec.Algorithm == "" || rec.Strategy == "" || len(rec.Counters) != 3 {
				t.Errorf("record %+v: want algorithm, strategy and 3 ranks' counters", rec)
			}
			for rank, cs := range rec.Counters {
				if _, ok := cs["submits"]; !ok || cs["rank"] != int64(rank) {
					t.Errorf("counters %v: want rank %d and submits", cs, rank)
				}
			}
		}
	}
	if doc.Version != jsonVersion || doc.Tool != "allreduce-perf" || doc.Backend != "host" || len(doc.Devices) != 3 ||
		doc.Devices[2].Name != "host" || doc.Devices[2].Rank != 2 || doc.Hostname == "" || doc.StartTime == "" || doc.EndTime == "" ||
		doc.Build.GoVersion == "" || doc.Config.NGpus != 3 || doc.Config.StepFactor != 32 || doc.Config.Iterations != 2 ||
		strings.Join(doc.Config.Collectives, ",") != "allreduce,broadcast" ||
		strings.Join(doc.Config.Datatypes, ",") != "int8,uint8,int32,uint32,int64,uint64,half,float,double,bfloat16,f8e4m3,f8e5m2,int16,uint16" || doc.Config.Wire != "" ||
		strings.Join(doc.Config.Ops, ",") != "sum,max" || strings.Join(doc.Strategy, ",") != "auto,tree" ||
		!doc.OutOfBounds.Okay || doc.OutOfBounds.Count != 0 || len(doc.Errors) != 0 {
		t.Errorf("parameters: %+v", doc)
	}
	if got, _ := generic["args"].([]any); len(got) != len(args)+3 { // the program, args, -J FILE
		t.Errorf("args %v", generic["args"])
	}
	// The average busbw is the footer's.
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "# Avg bus bandwidth    : "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			if math.Abs(f-doc.AverageBusBandwidth.Bandwidth) > 1e-5*f {
				t.Errorf("JSON average %v, footer %v", doc.AverageBusBandwidth.Bandwidth, f)
			}
		}
	}
	for _, key := range []string{"config", "devices", "results", "out_of_bounds", "average_bus_bandwidth", "build", "start_time", "hostname"} {
		if _, ok := generic[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
}

func TestJSONWithoutCheckAndOnFailure(t *testing.T) {
	_, doc, generic := readJSON(t, 0, "--backend", "host", "-g", "2", "-b", "64", "-e", "64", "-c", "0", "-n", "1", "-w", "0")
	if len(doc.Results) != 2 || doc.Results[0].Wrong != nil {
		t.Errorf("-c 0: want wrong null: %+v", doc.Results)
	}
	if r := generic["results"].([]any)[0].(map[string]any); r["wrong"] != nil {
		t.Errorf("-c 0: wrong is %v, want null", r["wrong"])
	}
	// A run with a wrong value still writes its file, marked not okay.
	done := false
	testHookAfterCheck = func(rank int, inPlace bool, result any) {
		if s := result.([]float32); rank == 1 && !done {
			s[0] = 42
			done = true
		}
	}
	t.Cleanup(func() { testHookAfterCheck = nil })
	_, doc, _ = readJSON(t, 1, "--backend", "host", "-g", "2", "-b", "64", "-e", "64", "-n", "1", "-w", "0")
	if doc.OutOfBounds.Okay || doc.OutOfBounds.Count != 1 || *doc.Results[0].Wrong != 1 {
		t.Errorf("failing run: out_of_bounds %+v, first record %+v", doc.OutOfBounds, doc.Results[0])
	}
}

func TestPlot(t *testing.T) {
	if testing.Short() {
		t.Skip("-short (./build.sh test's race run): drawing the plots holds no concurrency; the run without -short checks them")
	}
	dir := t.TempDir()
	png, svg := filepath.Join(dir, "bw.png"), filepath.Join(dir, "bw.svg")
	common := append([]string{"--backend", "host", "-g", "2", "-b", "4", "-e", "16K", "-f", "4"}, fast...)
	wantCorrect(t, append([]string{"-a", "all", "--plot", png}, common...)...)
	wantCorrect(t, append([]string{"--coll", "all", "-d", "all", "--plot", svg}, common...)...)
	b, err := os.ReadFile(png)
	if err != nil || len(b) < 1000 || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("PNG: %d bytes, err %v, head %q", len(b), err, b[:min(len(b), 8)])
	}
	b, err = os.ReadFile(svg)
	if err != nil || len(b) < 1000 || !bytes.Contains(b[:min(len(b), 512)], []byte("<svg")) {
		t.Errorf("SVG: %d bytes, err %v", len(b), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("want only the two plots in %s, got %v", dir, ents)
	}
	// Sizes of 0 bytes and a single size still make a plot.
	one := filepath.Join(dir, "one.svg")
	wantCorrect(t, append([]string{"--backend", "host", "-b", "0", "-e", "0", "--plot", one}, fast...)...)
	wantCorrect(t, append([]string{"--backend", "host", "-b", "1K", "-e", "1K", "--plot", one}, fast...)...)
	if fi, err := os.Stat(one); err != nil || fi.Size() == 0 {
		t.Errorf("single-size plot: %v", err)
	}
}

func TestSeriesLabels(t *testing.T) {
	recs := []record{
		{Collective: "allreduce", Strategy: "ring", Type: "float", Redop: "sum", Root: -1, Size: 8},
		{Collective: "allreduce", Strategy: "ring", Type: "float", Redop: "sum", Root: -1, Size: 8, InPlace: true},
		{Collective: "allreduce", Strategy: "tree", Type: "float", Redop: "sum", Root: -1, Size: 8},
		{Collective: "allreduce", Strategy: "tree", Type: "float", Redop: "sum", Root: -1, Size: 0},
	}
	var labels []string
	for _, s := range seriesOf(recs) {
		labels = append(labels, s.label)
	}
	if got := strings.Join(labels, ","); got != "ring,ring,tree" {
		t.Errorf("labels %s: want the strategy only (the one thing swept), zero sizes left out", got)
	}
	if got := seriesOf(recs[:1])[0].label; got != "allreduce ring" {
		t.Errorf("label %q of a single series", got)
	}
	var ticks []string
	for _, tk := range (log2Ticks{}).Ticks(3, 25) {
		if tk.Label != "" {
			ticks = append(ticks, tk.Label)
		}
	}
	if got := strings.Join(ticks, ","); got != "8 B,32 B,128 B,512 B,2 KiB,8 KiB,32 KiB,128 KiB,512 KiB,2 MiB,8 MiB,32 MiB" {
		t.Errorf("log2 tick labels %s", got)
	}
}

func TestProgressLine(t *testing.T) {
	// Never when stderr is not a terminal: a buffer, or a regular file.
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	if code := runAs(context.Background(), "allreduce-perf", append([]string{"--backend", "host", "-g", "2", "-b", "8", "-e", "64K", "-f", "8"}, fast...), &out, f); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if fi, _ := f.Stat(); fi.Size() != 0 {
		b, _ := os.ReadFile(f.Name())
		t.Errorf("stderr (a file) got %q", b)
	}
	if newProgress(&out, 3) != nil || newProgress(f, 3) != nil {
		t.Error("progress enabled on a non-terminal")
	}
	// /dev/null is a character device but no terminal: no progress there
	// either, and the run is otherwise the same.
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		if newProgress(null, 1) != nil {
			t.Errorf("progress enabled on %s", os.DevNull)
		}
		out.Reset()
		if code := runAs(context.Background(), "allreduce-perf", append([]string{"--backend", "host", "-g", "2", "-b", "8", "-e", "64", "-f", "8"}, fast...), &out, null); code != 0 {
			t.Errorf("exit %d with stderr on %s", code, os.DevNull)
		}
		null.Close()
		if strings.Contains(out.String(), "\r") {
			t.Errorf("progress reached stdout: %q", out.String())
		}
	}
	// The line itself: the running row's label and the rows done, drawn in
	// place, blanked before each row is printed and at the end.
	var b bytes.Buffer
	p := newProgressOn(&b, 12)
	// written runs f and checks what it wrote against want.
	written := func(what string, f func(), want func(string) bool) {
		t.Helper()
		b.Reset()
		f()
		if !want(b.String()) {
			t.Errorf("%s wrote %q", what, b.String())
		}
	}
	blank := regexp.MustCompile("\r +\r$").MatchString
	written("the first row", func() { p.step("4 MiB float sum allreduce ring") }, func(s string) bool {
		return strings.HasPrefix(s, "\r4 MiB float sum allreduce ring ") && strings.Contains(s, "(0/12)") && !strings.Contains(s, "\n")
	})
	written("done (want the line blanked)", p.done, blank)
	written("the second row", func() { p.step("8 B double avg allreduce tree") }, func(s string) bool {
		return strings.Contains(s, "\r8 B double avg allreduce tree ") && strings.Contains(s, "(1/12)")
	})
	written("clear (want the line blanked)", p.clear, blank)
	written("a second clear", p.clear, func(s string) bool { return s == "" })
	if newProgressOn(&b, 0) != nil {
		t.Error("progress for no rows")
	}
	var nilp *progress
	nilp.step("x")
	nilp.done()
	nilp.clear()
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 8: "8 B", 4096: "4 KiB", 1536: "1.5 KiB", 32 << 20: "32 MiB", 1 << 30: "1 GiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPinned(t *testing.T) {
	// --pinned allocates every buffer with collective.NewHostBuffer; the
	// results are verified the same way.
	for i, args := range [][]string{
		{"--coll", "all", "-g", "3", "-r", "all", "-d", "float,double,half,bfloat16", "-o", "sum,avg"},
		{"--coll", "all", "-g", "3", "-r", "all", "-d", "all", "-o", "all"},
		{"-a", "all", "-g", "4"},
		{"-d", "half,bfloat16,int8,uint64", "-g", "3", "-o", "sum,max"},
		{"--coll", "reducescatter,reduce,alltoall", "-d", "int32,bfloat16", "-g", "2", "-o", "all"},
		{"--wire", "half", "-g", "3", "-o", "sum,max"},
		{"-g", "1", "-d", "double"},
	} {
		if testing.Short() && i == 1 {
			continue // -short (./build.sh test's race run): not the sweep of every type and op
		}
		args = append(args, "--pinned", "--backend", "host", "-b", "4", "-e", "16K", "-f", "8")
		wantCorrect(t, append(args, fast...)...)
	}
	_, out, _ := runCLI(t, append([]string{"--pinned", "--backend", "host", "-b", "0", "-e", "0"}, fast...)...)
	if !strings.Contains(out, "# Buffers: pinned host memory (collective.NewHostBuffer)\n") {
		t.Errorf("the header does not say the buffers are pinned:\n%s", out)
	}
	_, doc, _ := readJSON(t, 0, append([]string{"--pinned", "--backend", "host", "-g", "2", "-b", "64", "-e", "64"}, fast...)...)
	if !doc.Config.Pinned {
		t.Error("JSON config: pinned false")
	}
	if vulkanAvailable(t) {
		wantCorrect(t, append([]string{"--pinned", "--backend", "vulkan", "--coll", "all", "-a", "auto", "-g", "3", "-r", "1", "-b", "4", "-e", "64K", "-f", "32"}, fast...)...)
		wantCorrect(t, append([]string{"--pinned", "--backend", "vulkan", "-a", "direct,pipelined", "-g", "2", "-b", "4", "-e", "64K", "-f", "32"}, fast...)...)
	}
}

func TestVulkanCollectives(t *testing.T) {
	if !vulkanAvailable(t) {
		t.Skip("vulkan backend not available")
	}
	wantCorrect(t, append([]string{"--backend", "vulkan", "--coll", "all", "-g", "3", "-r", "2", "-o", "all", "-b", "4", "-e", "4K", "-f", "32"}, fast...)...)
	// Wire compression needs the backend's compression kernels: either
	// the run is right, or it is refused up front, by name.
	code, out, errOut := runCLI(t, append([]string{"--backend", "vulkan", "--wire", "half", "-g", "2", "-b", "64", "-e", "64"}, fast...)...)
	switch {
	case code == 0 && strings.Contains(out, "# Out of bounds values : 0 OK"):
	case code == 2 && out == "" && strings.Contains(errOut, "--wire half: the vulkan backend has no compression kernels"):
		t.Logf("vulkan --wire half refused: %s", strings.TrimSpace(errOut))
	default:
		t.Errorf("vulkan --wire half: exit %d, stderr %q\n%s", code, errOut, out)
	}
}

func TestVulkanNewTypes(t *testing.T) {
	if !vulkanAvailable(t) {
		t.Skip("vulkan backend not available")
	}
	// Lavapipe has no kernels for these types: the reducing collectives
	// take the library's exact host path, the others move the bytes on the
	// device. Every collective and op, sizes that are no multiple of 4
	// bytes (1 and 67; full runs 34 too), a root other than 0.
	step := "66"
	if fullRun() {
		step = "33"
	}
	for _, n := range []int{3} {
		args := []string{"--backend", "vulkan", "--coll", "all", "-d", nativeTypes, "-o", "all", "-r", "2", "-g", strconv.Itoa(n),
			"-b", "1", "-e", "67", "-i", step, "-n", "1", "-w", "0"}
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			rows, out := wantCorrectOut(t, args...)
			checkTypeRows(t, out, rows, n)
			kernels := vulkanKernels(t)
			var host []string
			for _, d := range strings.Split(nativeTypes, ",") {
				if dt, _ := parseDtype(d); !kernels.Has(dt.elem()) {
					host = append(host, d)
				}
			}
			if want := "# Types: " + strings.Join(host, ", ") + " reduced exactly on the host (no vulkan kernels for them on these devices)\n"; len(host) > 0 && !strings.Contains(out, want) {
				t.Errorf("the header lacks %q:\n%s", want, out)
			}
		})
	}
	// Every all-reduce strategy (not under -short: ./build.sh test's race
	// run), and the pinned buffers.
	if !testing.Short() {
		wantAllReduce(t, "--backend", "vulkan", "-a", "all", "-g", "2", "-d", nativeTypes, "-o", "sum,max", "-b", "4", "-e", "4K", "-f", "32", "-n", "1", "-w", "0")
	}
	wantCorrect(t, "--pinned", "--backend", "vulkan", "--coll", "allreduce,reducescatter,allgather", "-g", "2", "-d", "uint8,half", "-o", "prod", "-b", "4", "-e", "4K", "-f", "32", "-n", "1", "-w", "0")
}

// vulkanKernels is the element types lavapipe's first device reduces in
// kernels.
func vulkanKernels(t *testing.T) backend.DTypeSet {
	t.Helper()
	g, err := collective.NewGroup(context.Background(), collective.Options{Ranks: 1, Backend: "vulkan", Config: collective.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	return groupKernels(g)
}
