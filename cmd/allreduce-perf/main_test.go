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
	return rows
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
	for _, c := range cases {
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
		{"-d", "int8"},
		{"-d", "float,int8"},
		{"-a", "nccl"},
		{"-a", "ring,nccl"},
		{"-o", "xor"},
		{"--coll", "sendrecv"},
		{"--coll", "allreduce,sendrecv"},
		{"-d", "half", "--coll", "broadcast"},
		{"-d", "bfloat16", "--coll", "all"},
		{"-d", "half", "-a", "tree"},
		{"-d", "bfloat16", "-a", "all"},
		{"-a", "all", "--coll", "reduce"},
		{"-a", "ring,tree", "--coll", "allreduce,allgather"},
		{"--coll", "broadcast", "-a", "ring"},
		{"--coll", "allgather", "-a", "direct"},
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
		"-d half --coll reduce":    "16-bit wire compression exists for all-reduce only, not --coll reduce",
		"-d bfloat16 -a direct":    "wire compression (AllReduceWire) runs the ring only, so -a direct cannot be honoured",
		"--coll broadcast -a ring": "--coll broadcast runs tree only; -a ring applies to all-reduce",
		"-a all --coll allgather":  "-a with several strategies sweeps all-reduce only; --coll allgather runs ring",
		"-g 2 --coll reduce -r 2":  "-r/--root 2 is not a rank of 2",
		"--plot x.jpg":             "want a file name ending in .png or .svg",
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
	s := &sweep[float64]{runner: &runner{o: &options{}}, t: table{coll: collAllReduce}, dt: dtDouble,
		comms: make([]*collective.Comm, 2), send: [][]float64{{0, 0}, {0, 0}}, recv: [][]float64{{0, 0}, {0, 0}}}
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
