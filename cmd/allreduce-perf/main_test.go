package main

import (
	"bytes"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/diag"
)

// runCLI runs the command in-process and returns its exit status and output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// row is one parsed data row of the table.
type row struct {
	size, count int64
	typ, op     string
	root        int
	time        [2]float64
	algbw       [2]float64
	busbw       [2]float64
	wrong       [2]int64
}

// parseTable checks that every line is a comment or a well-formed data row
// (13 columns, numbers where numbers belong) and returns the rows.
func parseTable(t *testing.T, out string) []row {
	t.Helper()
	var rows []row
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 13 {
			t.Fatalf("data row has %d columns, want 13: %q", len(f), line)
		}
		var r row
		var err error
		num := func(s string) float64 {
			v, e := strconv.ParseFloat(s, 64)
			if e != nil || math.IsNaN(v) || v < 0 {
				err = e
				if err == nil {
					err = strconv.ErrSyntax
				}
			}
			return v
		}
		integer := func(s string) int64 {
			v, e := strconv.ParseInt(s, 10, 64)
			if e != nil {
				err = e
			}
			return v
		}
		r.size, r.count, r.typ, r.op = integer(f[0]), integer(f[1]), f[2], f[3]
		r.root = int(integer(f[4]))
		for i := 0; i < 2; i++ {
			c := f[5+4*i:]
			r.time[i], r.algbw[i], r.busbw[i], r.wrong[i] = num(c[0]), num(c[1]), num(c[2]), integer(c[3])
		}
		if err != nil {
			t.Fatalf("data row %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

// wantCorrect checks exit status 0, no stderr, the OK footer and 0 wrong in
// every row; it returns the rows.
func wantCorrect(t *testing.T, args ...string) []row {
	t.Helper()
	rows, _ := wantCorrectOut(t, args...)
	return rows
}

// wantCorrectOut is wantCorrect, also returning the output.
func wantCorrectOut(t *testing.T, args ...string) ([]row, string) {
	t.Helper()
	code, out, errOut := runCLI(t, args...)
	if code != 0 || errOut != "" {
		t.Fatalf("allreduce-perf %s: exit %d, stderr %q\n%s", strings.Join(args, " "), code, errOut, out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 3 || lines[len(lines)-3] != "# Out of bounds values : 0 OK" ||
		!strings.HasPrefix(lines[len(lines)-2], "# Avg bus bandwidth    : ") {
		t.Fatalf("allreduce-perf %s: footer missing or wrong:\n%s", strings.Join(args, " "), out)
	}
	rows := parseTable(t, out)
	if len(rows) == 0 {
		t.Fatalf("no data rows:\n%s", out)
	}
	for _, r := range rows {
		if r.wrong != [2]int64{0, 0} {
			t.Fatalf("row %+v: want 0 wrong\n%s", r, out)
		}
	}
	return rows, out
}

// wantAllReduce is wantCorrect for all-reduce runs: every row's root is -1.
func wantAllReduce(t *testing.T, args ...string) []row {
	t.Helper()
	rows := wantCorrect(t, args...)
	for _, r := range rows {
		if r.root != -1 {
			t.Fatalf("row %+v: all-reduce has root -1", r)
		}
	}
	return rows
}

// vulkanAvailable reports whether the Vulkan backend can run here; in CI it
// must.
func vulkanAvailable(t *testing.T) bool {
	for _, b := range diag.Probe() {
		if b.Name == "vulkan" {
			if b.Err == nil && len(b.Devices) > 0 {
				return true
			}
			if os.Getenv("CI") != "" && vulkanBuilt {
				t.Fatalf("vulkan backend unavailable in CI: %v", b.Err)
			}
			t.Logf("vulkan backend not available: %v", b.Err)
		}
	}
	return false
}

func TestAcceptance(t *testing.T) {
	// The acceptance commands, with fewer iterations (timing is not tested).
	fast := []string{"-n", "2", "-w", "1"}
	cases := [][]string{
		{"--backend", "host", "-g", "3", "-d", "double", "-o", "avg", "-b", "8", "-e", "4M"},
		{"-g", "4", "-d", "float", "-o", "max", "-b", "8", "-e", "1M", "-f", "8"},
		{"--backend", "host", "-g", "5", "-o", "prod", "-b", "4", "-e", "256K", "-f", "4"},
		{"--backend", "host", "-g", "2", "-d", "all", "-o", "all", "-b", "0", "-e", "0"},
		{"--backend", "host", "-g", "3", "-d", "all", "-o", "all", "-b", "4", "-e", "64K", "-f", "16", "-c", "2"},
		{"--backend", "host", "-a", "direct", "-g", "4", "-d", "all", "-o", "sum", "-b", "4", "-e", "64K", "-f", "16"},
	}
	if vulkanAvailable(t) {
		cases = append(cases,
			[]string{"--backend", "vulkan", "-g", "3", "-d", "double", "-o", "avg", "-b", "8", "-e", "64K", "-f", "8"},
			[]string{"--backend", "vulkan", "-g", "2", "-d", "float", "-o", "all", "-b", "4", "-e", "4K", "-f", "32"},
			[]string{"--backend", "vulkan", "-a", "ring", "-g", "3", "-d", "float", "-o", "sum", "-b", "4", "-e", "64K", "-f", "16"},
			[]string{"--backend", "vulkan", "-a", "tree", "-g", "3", "-d", "double", "-o", "min", "-b", "4", "-e", "64K", "-f", "16"})
	}
	for _, a := range []string{"ring", "tree", "hierarchical", "pipelined", "direct"} {
		cases = append(cases, []string{"--backend", "host", "-a", a, "-g", "5", "-d", "all", "-o", "all", "-b", "4", "-e", "64K", "-f", "16"})
	}
	for i, c := range cases {
		if testing.Short() && i%3 != 0 {
			// -short (./build.sh test's race run): every third sweep; the run
			// without the race detector checks them all.
			continue
		}
		t.Run(strings.Join(c, " "), func(t *testing.T) {
			wantAllReduce(t, append(c, fast...)...)
		})
	}
}

func TestRowsFollowSweep(t *testing.T) {
	// Additive steps (-i), sizes rounded down to whole elements.
	rows := wantAllReduce(t, "--backend", "host", "-g", "2", "-d", "double", "-b", "10", "-e", "40", "-i", "10", "-n", "1", "-w", "0")
	var sizes, counts []int64
	for _, r := range rows {
		sizes, counts = append(sizes, r.size), append(counts, r.count)
		if r.typ != "double" || r.op != "sum" {
			t.Errorf("row %+v: want double sum", r)
		}
	}
	if want := []int64{8, 16, 24, 40}; !reflect.DeepEqual(sizes, want) {
		t.Errorf("sizes %v, want %v", sizes, want)
	}
	if want := []int64{1, 2, 3, 5}; !reflect.DeepEqual(counts, want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
}

func TestHeader(t *testing.T) {
	code, out, _ := runCLI(t, "--backend", "host", "-a", "direct", "-g", "3", "-b", "1K", "-e", "4K", "-f", "2", "-n", "3", "-w", "2")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"# nThread 1 nGpus 3 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 2 iters: 3 agg iters: 1 validation: 1 graph: 0\n",
		"# Using devices\n",
		"#  Rank  2 Group  0 Pid ",
		"# Backend host  Strategy direct  Skipped: none\n",
		"#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n",
		"#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "] host\n"); n != 3 {
		t.Errorf("want 3 device lines naming the host device, got %d:\n%s", n, out)
	}
}

func TestNoCheck(t *testing.T) {
	code, out, _ := runCLI(t, "--backend", "host", "-g", "2", "-b", "64", "-e", "64", "-c", "0", "-n", "1", "-w", "0")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if strings.Count(out, "N/A") != 2 || !strings.Contains(out, "validation: 0") {
		t.Errorf("-c 0 should print N/A for #wrong in both modes:\n%s", out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-g", "0"},
		{"-b", "1M", "-e", "1K"},
		{"-d", "int12"},
		{"-d", "float,int9"},
		{"-o", "band"},
		{"-d", "int32,half", "-o", "sum,lxor"},
		{"-wire", "half", "-o", "bor"},
		{"-a", "nccl"},
		{"-a", "ring,nccl"},
		{"-o", "xor"},
		{"--coll", "sendrecvx"},
		{"--coll", "allreduce,alltoallv"},
		{"--coll", "scan", "-o", "avg"},
		{"--coll", "allreduce,exscan", "-o", "sum,avg"},
		{"--coll", "sendrecv", "-a", "ring"},
		{"--coll", "scan", "-a", "tree"},
		{"--coll", "sendrecv", "-a", "all"},
		{"--wire", "half", "--coll", "scan"},
		{"--wire", "half", "--coll", "broadcast"},
		{"--wire", "bfloat16", "--coll", "all"},
		{"--wire", "half", "-a", "tree"},
		{"--wire", "bfloat16", "-a", "all"},
		{"--wire", "half", "-d", "double"},
		{"--wire", "half", "-d", "half"},
		{"-wire=bf16", "-d", "float,double"},
		{"--wire", "int8"},
		{"--wire", "float"},
		{"-a", "all", "--coll", "reduce"},
		{"-a", "ring,tree", "--coll", "allreduce,allgather"},
		{"--coll", "broadcast", "-a", "ring"},
		{"--coll", "allgather", "-a", "tree"},
		{"--coll", "reducescatter", "-a", "tree"},
		{"--coll", "broadcast", "-g", "3", "-r", "3"},
		{"--coll", "reduce", "-r", "-1"},
		{"-J", ""},
		{"-J", "/nonexistent-dir/out.json"},
		{"-J", "."},
		{"--plot", "out.pdf"},
		{"--plot", "out"},
		{"--plot", "/nonexistent-dir/out.png"},
		{"--pinned=maybe"},
		{"-b", "12Q"},
		{"-n", "0"},
		{"-z", "2"},
		{"-T", "-1"},
		{"--backend", "cuda"},
		{"-g", "3", "--devices", "0,0"},
		{"--devices", "a"},
		{"--nosuchflag"},
		{"extra"},
	} {
		code, out, errOut := runCLI(t, args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "allreduce-perf: ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line on stderr", args, code, out, errOut)
		}
	}
	// The reasons name what is missing or what cannot be honoured.
	for args, want := range map[string]string{
		"--wire half --coll reduce": "--wire half: 16-bit wire compression exists for all-reduce only, not --coll reduce",
		"--wire bfloat16 -a direct": "--wire bfloat16: wire compression (AllReduceWire) runs the ring only, so -a direct cannot be honoured",
		"-wire half -d half":        "--wire half compresses float32 data: it runs with -d float (the default), not -d half",
		"--wire=fp8":                `--wire "fp8" is not known (want half or bfloat16)`,
		"-d int8,bfloat16 -o land":  "-o land is not defined for floating-point type bfloat16",
		"--coll broadcast -a ring":  "--coll broadcast runs tree or native only; -a ring applies to all-reduce",
		"-a all --coll allgather":   "-a with several strategies sweeps all-reduce only; --coll allgather runs direct",
		"-g 2 --coll reduce -r 2":   "-r/--root 2 is not a rank of 2",
		"--coll scan -o avg":        "-o avg is not defined for a prefix reduction (--coll scan)",
		"--coll exscan -o max,avg":  "-o avg is not defined for a prefix reduction (--coll exscan)",
		"--coll sendrecv -a tree":   "--coll sendrecv runs direct only; -a tree applies to all-reduce",
		"--coll scan -a ring":       "--coll scan runs direct only; -a ring applies to all-reduce",
		"--plot x.jpg":              "want a file name ending in .png or .svg",
	} {
		if _, _, errOut := runCLI(t, strings.Fields(args)...); !strings.Contains(errOut, want) {
			t.Errorf("%s: stderr %q lacks %q", args, errOut, want)
		}
	}
}

func TestLongAndShortFlagsAgree(t *testing.T) {
	short, _, _ := runCLI(t, "-b", "1K", "-e", "2K", "-f", "2", "-g", "2", "-d", "double", "-o", "min", "-n", "1", "-w", "0", "--backend", "host")
	long, _, _ := runCLI(t, "--minbytes", "1K", "--maxbytes", "2K", "--stepfactor", "2", "--ngpus", "2", "--datatype", "double",
		"--op", "min", "--iters", "1", "--warmup_iters", "0", "-backend=host")
	if short != 0 || long != 0 {
		t.Fatalf("exit %d (short flags) and %d (long flags), want 0", short, long)
	}
}

func TestTimeoutEndsTheRun(t *testing.T) {
	// -T bounds the whole run: a deadline that has passed (usually before
	// the group opens; else the first wait times out, the context or the
	// CommunicationTimeout -T also sets firing first) is a library error
	// (exit 1, one line naming -T), not a hang.
	code, _, errOut := runCLI(t, "--backend", "host", "-g", "2", "-T", "0.000001")
	if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, " (-T 1µs)\n") ||
		!(strings.Contains(errOut, "deadline exceeded") || strings.Contains(errOut, "timed out")) {
		t.Errorf("exit %d, stderr %q; want exit 1 and one line naming the deadline", code, errOut)
	}
	o := &options{timeout: time.Microsecond}
	if got := describe(&collective.TimeoutError{Phase: "AllReduce fingerprint check", Missing: []int{0}}, o); !strings.HasSuffix(got, " (-T 1µs)") {
		t.Errorf("a library timeout under -T: %q does not name -T", got)
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := runCLI(t, "-h")
	if code != 0 || !strings.Contains(out, "--minbytes") {
		t.Errorf("-h: exit %d, output %q", code, out)
	}
}

func TestCorruptionIsCaught(t *testing.T) {
	for _, mode := range []struct {
		name    string
		inPlace bool
		col     int
	}{{"out-of-place", false, 0}, {"in-place", true, 1}} {
		t.Run(mode.name, func(t *testing.T) {
			done := false
			testHookAfterCheck = func(rank int, inPlace bool, result any) {
				if rank != 1 || inPlace != mode.inPlace || done {
					return
				}
				if s, ok := result.([]float32); ok && len(s) > 2 {
					s[2] += 1
					done = true // once only: the next rows stay correct
				}
			}
			t.Cleanup(func() { testHookAfterCheck = nil })
			code, out, errOut := runCLI(t, "--backend", "host", "-g", "3", "-b", "64", "-e", "256", "-f", "4", "-n", "1", "-w", "0")
			if code != 1 || !strings.Contains(out, "# Out of bounds values : 1 FAILED\n") || !strings.Contains(errOut, "1 wrong value") {
				t.Fatalf("exit %d, stderr %q; want exit 1 and 1 FAILED:\n%s", code, errOut, out)
			}
			rows := parseTable(t, out)
			if rows[0].wrong[mode.col] != 1 || rows[0].wrong[1-mode.col] != 0 || rows[1].wrong != [2]int64{} {
				t.Errorf("want exactly one wrong value, in the first row's %s column:\n%s", mode.name, out)
			}
		})
	}
}

func TestSendBufferIsChecked(t *testing.T) {
	// A library that wrote the send buffer of an out-of-place call would be
	// caught too: simulate it by writing the send buffer after the call.
	s := &sweep[float64]{runner: &runner{o: &options{}}, t: table{coll: collAllReduce}, dt: dtDouble, vals: valuesFor[float64](dtDouble),
		ranks: ranksUpTo(2), comms: make([]*collective.Comm, 2), send: [][]float64{{0, 0}, {0, 0}}, recv: [][]float64{{0, 0}, {0, 0}}}
	for r := range s.send {
		for i := range s.send[r] {
			s.send[r][i] = input(collective.Sum, r, int64(i), 1)
		}
	}
	for i := range s.recv[0] {
		v := reference(collective.Sum, 2, int64(i), 1)
		s.recv[0][i], s.recv[1][i] = v, v
	}
	sh := shape{count: 2, bytes: 16, total: 2}
	if w := s.countWrong(sh, collective.Sum, -1, 1, false); w != 0 {
		t.Fatalf("correct data: %d wrong", w)
	}
	s.send[1][1]++
	if w := s.countWrong(sh, collective.Sum, -1, 1, false); w != 1 {
		t.Fatalf("changed send buffer: %d wrong, want 1", w)
	}
	if w := s.countWrong(sh, collective.Sum, -1, 1, true); w != 0 {
		t.Fatalf("in place the send buffer is not used: %d wrong, want 0", w)
	}
	// avg accepts 1 ulp from the reference, but every rank must hold rank
	// 0's bits.
	for i := range s.recv[0] {
		v := reference(collective.Mean, 2, int64(i), 1)
		s.recv[0][i], s.recv[1][i] = v, v
	}
	if w := s.countWrong(sh, collective.Mean, -1, 1, true); w != 0 {
		t.Fatalf("correct avg: %d wrong", w)
	}
	s.recv[1][0] = math.Nextafter(s.recv[1][0], 100)
	if w := s.countWrong(sh, collective.Mean, -1, 1, true); w != 1 {
		t.Fatalf("rank 1 one ulp away from rank 0: %d wrong, want 1", w)
	}
}

func TestAvgTolerance(t *testing.T) {
	want := float32(1.0 / 3)
	next := math.Nextafter32(want, 1)
	if !matches(next, want, collective.Mean) || matches(math.Nextafter32(next, 1), want, collective.Mean) {
		t.Error("avg must accept 1 ulp and no more")
	}
	if matches(next, want, collective.Sum) {
		t.Error("sum must be exact")
	}
	if ulpDistance(float64(0), math.Copysign(0, -1)) != 0 || ulpDistance(math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64) != 2 {
		t.Error("ulpDistance across zero is wrong")
	}
	if ulpDistance(float32(math.NaN()), 0) != math.MaxUint64 {
		t.Error("NaN must never match")
	}
}

func TestInputsAreExact(t *testing.T) {
	// The reference must be exactly representable in float for the rank
	// counts people run (avg aside, which the check allows 1 ulp).
	for _, op := range []collective.Op{collective.Sum, collective.Prod, collective.Max, collective.Min} {
		for _, n := range []int{1, 2, 3, 8, 64} {
			for i := int64(0); i < 1000; i++ {
				v := reference(op, n, i, 3)
				if float64(float32(v)) != v {
					t.Fatalf("%v over %d ranks, element %d: %v is not exact in float", op, n, i, v)
				}
			}
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"8": 8, "1K": 1024, "1k": 1024, "32M": 32 << 20, "2G": 2 << 30, "0": 0} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "K", "1.5M", "1T", "99999999999G"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q): want an error", in)
		}
	}
}

func TestSizes(t *testing.T) {
	for _, c := range []struct {
		min, max, step, factor int64
		want                   []int64
	}{
		{8, 8 << 20, 1 << 20, 4, []int64{8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288, 2097152, 8388608}},
		{32 << 20, 32 << 20, 1 << 20, 1, []int64{32 << 20}},
		{8, 4 << 20, 1 << 20, 1, []int64{8, 1<<20 + 8, 2<<20 + 8, 3<<20 + 8}},
		{0, 0, 1 << 20, 2, []int64{0}},
		{1 << 62, math.MaxInt64, 1, 4, []int64{1 << 62}},
	} {
		o := &options{minBytes: c.min, maxBytes: c.max, stepBytes: c.step, stepFactor: c.factor}
		if got := o.sizes(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("sizes(%+v) = %v, want %v", c, got, c.want)
		}
	}
}

func TestCorruptionIsCaughtNewTypes(t *testing.T) {
	// One element of one rank's verified result changed by the hook is one
	// wrong value, for an integer and the 16-bit types, in the collectives
	// that reduce and one that copies; so is a result left as the poison
	// the call had to overwrite (integers: a value no right result has).
	int8Poison := valuesFor[int8](dtInt8).poison(collective.Sum, 3, true)
	for _, tc := range []struct {
		d, coll string
		corrupt func(result any) bool
	}{
		{"int32", "allreduce", func(r any) bool { s := r.([]int32); s[2] ^= 4; return true }},
		{"uint64", "reducescatter", func(r any) bool { s := r.([]uint64); s[1] += 2; return true }},
		{"int8", "reduce", func(r any) bool { s := r.([]int8); s[2] = int8Poison; return true }},
		{"uint8", "allgather", func(r any) bool { s := r.([]uint8); s[0] ^= 0x80; return true }},
		{"half", "allreduce", func(r any) bool {
			s := r.([]collective.Float16)
			s[2] = collective.Float16From(s[2].Float32() + 1)
			return true
		}},
		{"bfloat16", "reduce", func(r any) bool {
			s := r.([]collective.BFloat16)
			s[0] = collective.BFloat16From(s[0].Float32() + 1)
			return true
		}},
		{"half", "alltoall", func(r any) bool { s := r.([]collective.Float16); s[3]++; return true }},
	} {
		t.Run(tc.d+" "+tc.coll, func(t *testing.T) {
			done := false
			testHookAfterCheck = func(rank int, inPlace bool, result any) {
				// Rank 1: not all-reduce's reference rank 0 (whose change
				// every rank would differ from), and reduce's root.
				if rank == 1 && !inPlace && !done {
					done = tc.corrupt(result)
				}
			}
			t.Cleanup(func() { testHookAfterCheck = nil })
			code, out, errOut := runCLI(t, "--backend", "host", "--coll", tc.coll, "-d", tc.d, "-o", "sum", "-g", "3", "-r", "1",
				"-b", "96", "-e", "192", "-f", "2", "-n", "1", "-w", "0")
			if code != 1 || !strings.Contains(out, "# Out of bounds values : 1 FAILED\n") || !strings.Contains(errOut, "1 wrong value") {
				t.Fatalf("exit %d, stderr %q; want exit 1 and 1 FAILED:\n%s", code, errOut, out)
			}
		})
	}
}

func TestPoisonIsNeverRight(t *testing.T) {
	// Integer inputs are odd (the logical ops': 0 or odd), so the poison
	// (of the other parity, or even and not 0 for the logical ops) can
	// never be a right value: a region the call left alone is always
	// counted.
	ops := []collective.Op{collective.Sum, collective.Prod, collective.Max, collective.Min,
		collective.BAnd, collective.BOr, collective.BXor, collective.LAnd, collective.LOr, collective.LXor}
	check := func(name string, isPoison func(op collective.Op, n int, reduced bool, i int64) bool) {
		for _, op := range ops {
			for n := 1; n <= 6; n++ {
				for i := int64(0); i < 200; i++ {
					for _, reduced := range []bool{false, true} {
						if isPoison(op, n, reduced, i) {
							t.Fatalf("%s %v n=%d reduced=%v element %d: a right value equals the poison", name, op, n, reduced, i)
						}
					}
				}
			}
		}
	}
	v8 := valuesFor[int8](dtInt8)
	check("int8", func(op collective.Op, n int, reduced bool, i int64) bool {
		if !reduced {
			return v8.isPoison(v8.input(op, n-1, i, 1), op, n, reduced)
		}
		return v8.isPoison(v8.reduce(op, ranksUpTo(n), i, 1), op, n, reduced)
	})
	v64 := valuesFor[uint64](dtUint64)
	check("uint64", func(op collective.Op, n int, reduced bool, i int64) bool {
		if !reduced {
			return v64.isPoison(v64.input(op, n-1, i, 1), op, n, reduced)
		}
		return v64.isPoison(v64.reduce(op, ranksUpTo(n), i, 1), op, n, reduced)
	})
	// The logical ops' inputs and results take both truth values.
	for _, op := range []collective.Op{collective.LAnd, collective.LOr, collective.LXor} {
		var seen [2]bool
		for i := int64(0); i < 200; i++ {
			seen[v64.reduce(op, ranksUpTo(3), i, 1)] = true
		}
		if !seen[0] || !seen[1] {
			t.Errorf("%v over 3 ranks: results 0 seen %v, 1 seen %v; want both", op, seen[0], seen[1])
		}
	}
	vh := valuesFor[collective.Float16](dtHalf)
	if p := vh.poison(collective.Sum, 2, true); !vh.isPoison(p, collective.Sum, 2, true) || p.Float32() == p.Float32() {
		t.Errorf("half poison %#x is not NaN", p)
	}
	if vh.isPoison(collective.Float16From(3), collective.Sum, 2, true) {
		t.Error("3 taken for the half poison")
	}
}

func TestInputs16AreExact(t *testing.T) {
	// Every partial result of every order must be exact in the 16-bit
	// type, for any number of ranks: the sum of |x_r| stays within the
	// type's integers, and a product's exponents add up to at most maxExp.
	for _, f := range []struct {
		name string
		f    format16
	}{{"half", half16}, {"bfloat16", bfloat16}} {
		for _, n := range []int{1, 2, 3, 8, 64, 1000} {
			for i := int64(0); i < 300; i++ {
				var sumAbs float64
				var exps int
				for r := 0; r < n; r++ {
					sumAbs += math.Abs(input16(f.f, collective.Sum, r, i, 3))
					x := input16(f.f, collective.Prod, r, i, 3)
					if x != 1 && x != -1 {
						exps++
					}
				}
				if sumAbs > float64(f.f.maxInt) || exps > f.f.maxExp {
					t.Fatalf("%s, %d ranks, element %d: sum|x| %v, %d factors of 2 or 1/2", f.name, n, i, sumAbs, exps)
				}
			}
		}
		// The limits themselves: every integer up to maxInt, and 2^+-maxExp.
		to16 := func(x float64) float64 {
			if f.name == "half" {
				return float64(collective.Float16From(float32(x)).Float32())
			}
			return float64(collective.BFloat16From(float32(x)).Float32())
		}
		for k := -f.f.maxInt; k <= f.f.maxInt; k++ {
			if to16(float64(k)) != float64(k) {
				t.Fatalf("%s does not hold %d", f.name, k)
			}
		}
		if e := math.Ldexp(1, f.f.maxExp); to16(e) != e || to16(1/e) != 1/e {
			t.Fatalf("%s does not hold 2^+-%d", f.name, f.f.maxExp)
		}
	}
	// avg: float32(float64(sum)/N) rounded to the type.
	v := valuesFor[collective.BFloat16](dtBfloat16)
	for i := int64(0); i < 100; i++ {
		sum := 0.0
		for r := 0; r < 3; r++ {
			sum += float64(v.input(collective.Mean, r, i, 1).Float32())
		}
		if want := collective.BFloat16From(float32(sum / 3)); v.reduce(collective.Mean, ranksUpTo(3), i, 1) != want {
			t.Fatalf("element %d: avg reference %v, want %v", i, v.reduce(collective.Mean, ranksUpTo(3), i, 1).Float32(), want.Float32())
		}
	}
}

func TestIntegerReferenceWraps(t *testing.T) {
	// The integer inputs span the type, so sums and products wrap; the
	// reference wraps in the type itself.
	v := valuesFor[int8](dtInt8)
	wrapped := false
	for i := int64(0); i < 100; i++ {
		var wide int64
		for r := 0; r < 3; r++ {
			wide += int64(v.input(collective.Sum, r, i, 1))
		}
		got := v.reduce(collective.Sum, ranksUpTo(3), i, 1)
		if got != int8(wide) {
			t.Fatalf("element %d: sum %d, want %d wrapped to %d", i, got, wide, int8(wide))
		}
		wrapped = wrapped || wide != int64(got)
	}
	if !wrapped {
		t.Error("no int8 sum of 3 ranks wrapped: the inputs do not span the type")
	}
}
