package main

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/collective"
)

// newColls are scan, exscan and sendrecv, as --coll names them.
var newColls = []coll{collScan, collExscan, collSendRecv}

func TestScanExscanSendRecv(t *testing.T) {
	// Every new collective on 1 to 5 ranks, sizes of 0 bytes and odd
	// counts (additive steps of 33 bytes: int8 and half rows of 33 and 49
	// elements), every op (avg skipped for the scans), each row verified.
	ranks := []int{1, 2, 3, 4, 5}
	if testing.Short() {
		ranks = []int{1, 3} // ./build.sh test's race run
	}
	for _, c := range newColls {
		for _, n := range ranks {
			args := []string{"--backend", "host", "--coll", c.String(), "-g", strconv.Itoa(n), "-d", "float,int8,half,uint64,double",
				"-o", "all", "-b", "0", "-e", "100", "-i", "33", "-n", "1", "-w", "1"}
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				rows, out := wantCorrectOut(t, args...)
				odd := false
				ops := map[string]bool{}
				for _, r := range rows {
					checkShape(t, c, n, r)
					odd = odd || r.count%2 == 1
					ops[r.op] = true
				}
				if !odd || rows[0].size != 0 {
					t.Errorf("rows %+v: want a 0-byte row and odd counts", rows)
				}
				o, _, err := parseFlags("allreduce-perf", args)
				if err != nil || rowsOf(o, tablesOf(o)) != len(rows) {
					t.Errorf("rowsOf %d (%v), %d rows", rowsOf(o, tablesOf(o)), err, len(rows))
				}
				if want := "# Collective " + c.String() + "  Strategy direct\n"; !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
				if c == collSendRecv {
					if len(ops) != 1 || !ops["none"] || len(rows) != 4*5 {
						t.Errorf("sendrecv: %d rows, redops %v: want 20 rows of redop none", len(rows), ops)
					}
					return
				}
				// Sum, prod, max and min for the three float types, and the
				// bitwise and logical ops too for the two integer types.
				if ops["avg"] || len(ops) != 10 || len(rows) != 4*(3*4+2*10) {
					t.Errorf("%s: %d rows, redops %v: want sum, prod, max, min, band, bor, bxor, land, lor and lxor, no avg", c, len(rows), ops)
				}
				if want := "# Ops: " + c.String() + " runs without avg: avg is not defined for a prefix reduction\n"; !strings.Contains(out, want) {
					t.Errorf("the header lacks %q:\n%s", want, out)
				}
			})
		}
	}
	// Larger sizes, pinned buffers and -a direct (the scans' one strategy).
	wantCorrect(t, append([]string{"--backend", "host", "--coll", "scan,exscan,sendrecv", "-g", "3", "-a", "direct", "--pinned",
		"-d", "float,bfloat16,int32", "-o", "sum,prod", "-b", "1K", "-e", "256K", "-f", "16"}, fast...)...)
}

// TestPrefixResults checks the verifier against a reference written out
// here: rank r's scan is the sum of ranks 0..r's inputs, its exscan that of
// ranks 0..r-1, rank 0's exscan buffer is left as it was (the poison out of
// place, its input in place), and rank r's sendrecv holds rank r-1's input.
func TestPrefixResults(t *testing.T) {
	const n, count = 4, 5
	for _, c := range newColls {
		got := map[bool][][]float64{false: make([][]float64, n), true: make([][]float64, n)}
		testHookAfterCheck = func(rank int, inPlace bool, result any) {
			if got[inPlace][rank] == nil {
				for _, x := range result.([]float32) {
					got[inPlace][rank] = append(got[inPlace][rank], float64(x))
				}
			}
		}
		wantCorrect(t, "--coll", c.String(), "--backend", "host", "-g", strconv.Itoa(n), "-b", "20", "-e", "20", "-n", "1", "-w", "0")
		testHookAfterCheck = nil
		// The out-of-place run is verified first (rep 1), then in place.
		for rep, inPlace := range []bool{false, true} {
			for r := 0; r < n; r++ {
				if len(got[inPlace][r]) != count {
					t.Fatalf("%s rank %d in place %v: captured %d elements, want %d", c, r, inPlace, len(got[inPlace][r]), count)
				}
				for i, g := range got[inPlace][r] {
					x := func(q int) float64 { return float64(float32(input(collective.Sum, q, int64(i), rep+1))) }
					var want float64
					switch c {
					case collScan, collExscan:
						last := r
						if c == collExscan {
							last = r - 1
						}
						for q := 0; q <= last; q++ {
							want += x(q)
						}
						if last < 0 {
							want = math.NaN() // the poison, untouched
							if inPlace {
								want = x(0)
							}
						}
					case collSendRecv:
						want = x((r + n - 1) % n)
					}
					if g != want && !(math.IsNaN(g) && math.IsNaN(want)) {
						t.Errorf("%s rank %d in place %v element %d: %v, want %v", c, r, inPlace, i, g, want)
					}
				}
			}
		}
	}
}

func TestNewCollectivesCatchCorruption(t *testing.T) {
	// One changed element of one rank's result is one wrong value; so is
	// rank 0's exscan buffer written (it must be left alone), in an integer
	// type whose poison no right value equals.
	for _, tc := range []struct {
		coll, d string
		rank    int
		inPlace bool
		corrupt func(result any)
	}{
		{"scan", "float", 2, false, func(r any) { r.([]float32)[3]++ }},
		{"scan", "int32", 0, true, func(r any) { r.([]int32)[0] ^= 2 }},
		{"exscan", "float", 1, true, func(r any) { r.([]float32)[0]-- }},
		{"exscan", "float", 0, false, func(r any) { r.([]float32)[1] = 0 }},
		{"exscan", "int8", 0, false, func(r any) { r.([]int8)[4] = 1 }},
		{"exscan", "uint64", 0, true, func(r any) { r.([]uint64)[2] += 2 }},
		{"sendrecv", "half", 1, false, func(r any) { s := r.([]collective.Float16); s[5] = collective.Float16From(s[5].Float32() + 1) }},
		{"sendrecv", "double", 2, true, func(r any) { r.([]float64)[0] = math.NaN() }},
	} {
		t.Run(tc.coll+" "+tc.d, func(t *testing.T) {
			done := false
			testHookAfterCheck = func(rank int, inPlace bool, result any) {
				if rank == tc.rank && inPlace == tc.inPlace && !done {
					tc.corrupt(result)
					done = true
				}
			}
			t.Cleanup(func() { testHookAfterCheck = nil })
			code, out, errOut := runCLI(t, "--backend", "host", "--coll", tc.coll, "-d", tc.d, "-o", "sum", "-g", "3",
				"-b", "96", "-e", "96", "-n", "1", "-w", "0")
			if code != 1 || !strings.Contains(out, "# Out of bounds values : 1 FAILED\n") || !strings.Contains(errOut, "1 wrong value") {
				t.Fatalf("exit %d, stderr %q; want exit 1 and 1 FAILED:\n%s", code, errOut, out)
			}
		})
	}
}

func TestNewCollectivesBusFactor(t *testing.T) {
	for n := 1; n <= 5; n++ {
		want := float64(n-1) / float64(n)
		if collScan.busFactor(n) != want || collExscan.busFactor(n) != want {
			t.Errorf("%d ranks: scan %v, exscan %v, want (n-1)/n = %v", n, collScan.busFactor(n), collExscan.busFactor(n), want)
		}
		if collSendRecv.busFactor(n) != 1 {
			t.Errorf("%d ranks: sendrecv %v, want 1 (busbw = algbw, as nccl-tests)", n, collSendRecv.busFactor(n))
		}
	}
	// The records carry it: busbw = algbw * factor, the library's
	// algorithm, redop and root as the table prints them.
	_, doc, _ := readJSON(t, 0, append([]string{"--backend", "host", "--coll", "scan,exscan,sendrecv", "-g", "3", "-o", "max",
		"-b", "4K", "-e", "64K", "-f", "16"}, fast...)...)
	if len(doc.Results) != 3*2*2 || strings.Join(doc.Strategy, ",") != "direct,direct,direct" ||
		strings.Join(doc.Config.Collectives, ",") != "scan,exscan,sendrecv" {
		t.Fatalf("%d records, strategies %v, collectives %v", len(doc.Results), doc.Strategy, doc.Config.Collectives)
	}
	for _, rec := range doc.Results {
		c, _ := parseColl(rec.Collective)
		redop := map[bool]string{true: "max", false: "none"}[c.hasOp()]
		if rec.BusBw != rec.AlgBw*c.busFactor(3) || rec.AlgBw <= 0 || rec.Algorithm != "direct" || rec.Redop != redop || rec.Root != -1 ||
			rec.Wrong == nil || *rec.Wrong != 0 {
			t.Errorf("record %+v: want busbw = algbw*%v, algorithm direct, redop %s, root -1, 0 wrong", rec, c.busFactor(3), redop)
		}
	}
}

func TestNewCollectivesFlags(t *testing.T) {
	for s, want := range map[string]coll{
		"scan": collScan, "SCAN": collScan, "exscan": collExscan, "ex_scan": collExscan, "Exscan": collExscan,
		"sendrecv": collSendRecv, "send_recv": collSendRecv, "send-recv": collSendRecv, "SendRecv": collSendRecv,
	} {
		if c, ok := parseColl(s); !ok || c != want {
			t.Errorf("parseColl(%q) = %v, %v; want %v", s, c, ok, want)
		}
	}
	for prog, want := range map[string]coll{"sendrecv_perf": collSendRecv, "/bin/sendrecv-perf": collSendRecv, "scan-perf": collScan, "exscan_perf": collExscan} {
		if got := collForProgram(prog); got != want {
			t.Errorf("invoked as %q: default --coll %v, want %v", prog, got, want)
		}
	}
	for _, c := range newColls {
		if !slices.Contains(allColls, c) || c.hasRoot() || c.hasOp() != (c != collSendRecv) || c.noMean() != (c != collSendRecv) {
			t.Errorf("%s: in --coll all %v, root %v, op %v, no avg %v", c, slices.Contains(allColls, c), c.hasRoot(), c.hasOp(), c.noMean())
		}
		if a := c.algorithms(); len(a) != 1 || a[0] != collective.Direct {
			t.Errorf("%s runs %v, want direct", c, a)
		}
	}
	parse := func(args ...string) *options {
		t.Helper()
		o, _, err := parseFlags("allreduce-perf", args)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return o
	}
	// -o all: the scans skip avg, the others keep it; -r means nothing to them.
	o := parse("--coll", "scan,sendrecv,allreduce", "-o", "all", "-r", "7")
	if ops := o.opsFor(collScan, dtFloat); containsOp(ops, collective.Mean) || len(ops) != 4 {
		t.Errorf("scan -o all runs %v", ops)
	}
	if ops := o.opsFor(collAllReduce, dtFloat); !containsOp(ops, collective.Mean) {
		t.Errorf("allreduce -o all runs %v", ops)
	}
	// --coll all takes them in; with -o avg alone it leaves the scans out
	// (the header says so) rather than refuse a run that worked before.
	if o := parse("--coll", "all"); !slices.Equal(o.colls, allColls) || len(o.meanless) != 0 {
		t.Errorf("--coll all runs %v", o.colls)
	}
	if o := parse("--coll", "all", "-o", "avg"); containsColl(o.colls, collScan) || containsColl(o.colls, collExscan) ||
		!containsColl(o.colls, collSendRecv) || len(o.colls) != len(allColls)-2 {
		t.Errorf("--coll all -o avg runs %v", o.colls)
	}
	rows, out := wantCorrectOut(t, append([]string{"--backend", "host", "--coll", "all", "-o", "avg", "-g", "2", "-b", "64", "-e", "64"}, fast...)...)
	if len(rows) != len(allColls)-2 || !strings.Contains(out, "# Ops: scan and exscan do not run (avg is the only op): avg is not defined for a prefix reduction\n") {
		t.Errorf("--coll all -o avg: %d rows:\n%s", len(rows), out)
	}
	_, out = wantCorrectOut(t, append([]string{"--backend", "host", "--coll", "all", "-o", "sum,avg", "-g", "2", "-b", "64", "-e", "64"}, fast...)...)
	if !strings.Contains(out, "# Ops: scan and exscan run without avg: avg is not defined for a prefix reduction\n") {
		t.Errorf("--coll all -o sum,avg: the header does not say the scans skip avg:\n%s", out)
	}
	var usage strings.Builder
	if code := run([]string{"-h"}, &usage, &usage); code != 0 || !strings.Contains(usage.String(), "scan|exscan|sendrecv|all") {
		t.Errorf("-h: exit %d, usage lacks the new collectives:\n%s", code, usage.String())
	}
}
