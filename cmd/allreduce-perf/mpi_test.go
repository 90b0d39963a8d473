//go:build mpi

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/collective"
)

func TestSplitMPIFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		rest []string
		f    mpiFlags
	}{
		{[]string{"-b", "8", "--mpi"}, []string{"-b", "8"}, mpiFlags{mpi: true, mpiSet: true}},
		{[]string{"-mpi=false", "--mpi-baseline", "-g", "2"}, []string{"-g", "2"}, mpiFlags{mpiSet: true, baseline: true}},
		{[]string{"--mpi-baseline=true", "--pinned", "-e", "1M"}, []string{"--pinned", "-e", "1M"}, mpiFlags{baseline: true}},
		// A flag's value is not a flag: -J names a file called --mpi.
		{[]string{"-J", "--mpi", "-n", "3"}, []string{"-J", "--mpi", "-n", "3"}, mpiFlags{}},
		{[]string{"--timeout=3", "--mpi"}, []string{"--timeout=3"}, mpiFlags{mpi: true, mpiSet: true}},
		{[]string{"-b", "8", "extra", "--mpi"}, []string{"-b", "8", "extra", "--mpi"}, mpiFlags{}},
	} {
		rest, f, err := splitMPIFlags(tc.args)
		if err != nil || !slices.Equal(rest, tc.rest) || f != tc.f {
			t.Errorf("splitMPIFlags(%q) = %q, %+v, %v; want %q, %+v", tc.args, rest, f, err, tc.rest, tc.f)
		}
	}
	if _, _, err := splitMPIFlags([]string{"--mpi=maybe"}); err == nil {
		t.Error("--mpi=maybe accepted")
	}
}

// TestMPIUsage runs what the mpi build decides before MPI starts: usage
// errors, help, and the in-process command when MPI is not in use.
func TestMPIUsage(t *testing.T) {
	if launchedByMPI() {
		t.Skip("this test binary runs under an MPI launcher")
	}
	run := func(args ...string) (int, bool, string, string) {
		var out, errOut bytes.Buffer
		code, ok := mpiMain(context.Background(), "allreduce-perf", args, &out, &errOut)
		return code, ok, out.String(), errOut.String()
	}
	if code, ok, _, errOut := run("--mpi-baseline", "-b", "8"); !ok || code != 2 || !strings.Contains(errOut, "mpirun") {
		t.Errorf("--mpi-baseline without MPI: exit %d (ok %v), stderr %q; want 2 and a hint", code, ok, errOut)
	}
	for _, args := range [][]string{
		{"--mpi", "--coll", "gather"},
		{"--mpi", "--coll", "broadcast", "-r", "last"},
		{"--mpi", "--coll", "scan"},
		{"--mpi", "--coll", "exscan"},
		{"--mpi", "--coll", "sendrecv"},
		{"--mpi", "--coll", "all"},
		{"--mpi", "--coll", "allreduce,allgather", "--mpi-baseline"},
		{"--mpi", "--wire", "half"},
		{"--mpi", "-J", filepath.Join(t.TempDir(), "x.json")},
		{"--mpi", "-g", "0"},
		{"--mpi=perhaps"},
	} {
		if code, ok, _, errOut := run(args...); !ok || code != 2 || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d (ok %v), stderr %q; want 2 and one line", args, code, ok, errOut)
		}
	}
	for _, c := range []string{"alltoall", "gather", "scatter", "scan", "exscan", "sendrecv"} {
		if _, _, _, errOut := run("--mpi", "--coll", "allgather,"+c); !strings.Contains(errOut, "--coll "+c+": across processes (MPI) the sweep runs allreduce, allgather, reducescatter, broadcast and reduce only") {
			t.Errorf("--mpi --coll allgather,%s: stderr %q does not refuse it by name", c, errOut)
		}
	}
	for _, c := range []string{"allgather", "reducescatter", "broadcast", "reduce"} {
		if _, _, _, errOut := run("--mpi", "--coll", c, "--mpi-baseline"); !strings.HasPrefix(errOut, "allreduce-perf: --mpi-baseline: ") || !strings.Contains(errOut, c) {
			t.Errorf("--mpi --coll %s --mpi-baseline: stderr %q does not refuse the flag by name", c, errOut)
		}
	}
	if code, ok, out, _ := run("-h"); !ok || code != 0 || !strings.Contains(out, "--mpi-baseline") || !strings.Contains(out, "--minbytes") {
		t.Errorf("-h: exit %d (ok %v), output %q", code, ok, out)
	}
	if _, ok, _, _ := run("-b", "8", "-g", "2"); ok {
		t.Error("without a launcher or --mpi, the mpi build took over the in-process command")
	}
	if code, ok, out, errOut := run("--mpi=false", "--backend", "host", "-g", "2", "-b", "8", "-e", "8", "-n", "1", "-w", "0"); !ok || code != 0 ||
		!strings.Contains(out, "# Out of bounds values : 0 OK") || strings.Contains(out, "nProcs") {
		t.Errorf("--mpi=false: exit %d (ok %v), stderr %q\n%s", code, ok, errOut, out)
	}
}

// mpiLauncher finds mpirun ($GOCOLL_MPIRUN, else mpirun), the flags it
// needs here, and the build tags that link the same MPI.
func mpiLauncher(t *testing.T) (path string, flags []string, tags string) {
	t.Helper()
	name := os.Getenv("GOCOLL_MPIRUN")
	if name == "" {
		name = "mpirun"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("no MPI launcher (%v)", err)
	}
	out, _ := exec.Command(path, "--version").CombinedOutput()
	if bytes.Contains(out, []byte("Open MPI")) || bytes.Contains(out, []byte("OpenRTE")) {
		// Root in containers and CI, more processes than cores.
		return path, []string{"--oversubscribe", "--allow-run-as-root"}, "mpi"
	}
	return path, nil, "mpi,mpich"
}

// buildMPI builds the command with the mpi tag into dir.
func buildMPI(t *testing.T, dir, tags string) string {
	t.Helper()
	bin := filepath.Join(dir, "allreduce-perf")
	goCmd := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		if goCmd, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command to build the binary:", err)
		}
	}
	cmd := exec.Command(goCmd, "build", "-tags", tags, "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", tags, err, out)
	}
	return bin
}

// mpirun runs np processes of bin with args and returns stdout, stderr and
// the exit status.
func mpirun(t *testing.T, launcher string, flags []string, np int, env []string, bin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append(append([]string{"-np", fmt.Sprint(np)}, flags...), bin)
	cmd := exec.CommandContext(ctx, launcher, append(argv, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(unix.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("mpirun: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("mpirun -np %d %s: no result within 2 minutes\n%s%s", np, strings.Join(args, " "), out.String(), errOut.String())
	}
	t.Logf("mpirun -np %d %s: exit %d in %v", np, strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond))
	return out.String(), errOut.String(), code
}

// TestUnderMpirun builds the command with -tags mpi and runs it under
// mpirun: process 0 prints one table with the global result, the
// --mpi-baseline columns, wrong values counted across processes with exit
// statuses that agree, and usage errors said once.
func TestUnderMpirun(t *testing.T) {
	if launchedByMPI() {
		t.Skip("this test binary runs under an MPI launcher")
	}
	launcher, flags, tags := mpiLauncher(t)
	bin := buildMPI(t, t.TempDir(), tags)

	t.Run("np2", func(t *testing.T) {
		out, errOut, code := mpirun(t, launcher, flags, 2, nil, bin, "-b", "1K", "-e", "1M", "-f", "4")
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
		}
		if n := strings.Count(out, "# nThread 1 nGpus 1 "); n != 1 {
			t.Errorf("%d headers, want 1 (process 0 prints)\n%s", n, out)
		}
		if !strings.Contains(out, "\n# nProcs 2 nRanks 2 (1 per process") {
			t.Errorf("header does not say 2 processes, 2 ranks\n%s", out)
		}
		pids := regexp.MustCompile(`(?m)^#  Rank  ([01]) Group  0 Pid +(\d+) `).FindAllStringSubmatch(out, -1)
		if len(pids) != 2 || pids[0][2] == pids[1][2] {
			t.Errorf("rank lines %q: want ranks 0 and 1 in two processes\n%s", pids, out)
		}
		rows := parseTable(t, out)
		if len(rows) != 6 {
			t.Errorf("%d rows, want 6 (1K to 1M by 4)\n%s", len(rows), out)
		}
		for _, r := range rows {
			if r.wrong != [2]int64{0, 0} || r.time[0] <= 0 {
				t.Errorf("row %+v: want 0 wrong and a time", r)
			}
		}
		if !strings.Contains(out, "\n# Out of bounds values : 0 OK\n") {
			t.Errorf("footer missing\n%s", out)
		}
	})

	t.Run("baseline", func(t *testing.T) {
		out, errOut, code := mpirun(t, launcher, flags, 3, nil, bin,
			"--backend", "host", "-g", "2", "-b", "1K", "-e", "64K", "-f", "8", "-o", "sum,avg", "-d", "float,double", "-n", "2", "-w", "1", "--mpi-baseline")
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
		}
		if !strings.Contains(out, "\n# nProcs 3 nRanks 6 (2 per process") || !strings.Contains(out, "MPI_Allreduce (out-of-place)") {
			t.Errorf("header\n%s", out)
		}
		rows := 0
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || strings.HasPrefix(line, "#") {
				continue
			}
			rows++
			if len(f) != 19 || f[8] != "0" || f[12] != "0" {
				t.Errorf("row %q: want 19 columns and 0 wrong", line)
				continue
			}
			switch f[3] {
			case "sum":
				if f[16] != "0" || f[13] == "N/A" || f[18] != "0" || f[17] == "N/A" {
					t.Errorf("row %q: MPI_Allreduce columns (World's and the loop in C) want a time and 0 wrong", line)
				}
			case "avg":
				if f[13] != "N/A" || f[16] != "N/A" || f[17] != "N/A" || f[18] != "N/A" {
					t.Errorf("row %q: MPI has no avg: want N/A", line)
				}
			}
		}
		if rows != 2*2*3 {
			t.Errorf("%d rows, want 12 (2 types x 2 ops x 3 sizes)\n%s", rows, out)
		}
		if !strings.Contains(out, "\n# MPI_Allreduce wrong  : 0 OK\n") {
			t.Errorf("baseline footer missing\n%s", out)
		}
	})

	t.Run("wrong values", func(t *testing.T) {
		// Process 1 corrupts one element of its result: process 0's table
		// counts it, and both processes exit with status 1.
		out, errOut, code := mpirun(t, launcher, flags, 2, []string{corruptEnv + "=1"}, bin,
			"--backend", "host", "-b", "1K", "-e", "4K", "-f", "4", "-n", "2", "-w", "1")
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		rows := parseTable(t, out)
		if len(rows) != 2 || rows[0].wrong != [2]int64{1, 1} || !strings.Contains(out, "# Out of bounds values : 4 FAILED") {
			t.Errorf("process 1's wrong values are not in process 0's table: %+v\n%s", rows, out)
		}
		for p := 0; p < 2; p++ {
			if !strings.Contains(errOut, fmt.Sprintf("process %d: exit status 1\n", p)) {
				t.Errorf("process %d did not exit with status 1:\n%s", p, errOut)
			}
		}
	})

	t.Run("colls", func(t *testing.T) {
		// All-reduce, all-gather, reduce-scatter, broadcast and reduce
		// (every global rank as root) across 2 processes of one rank and 3
		// processes of 2 ranks: every row verified (0 wrong), one table
		// per collective, and the rows' size, count and root those of the
		// in-process sweep over as many ranks (nccl-tests': 1000 B rounds
		// down to whole elements, and all-gather's and reduce-scatter's
		// per-rank count to whole 16-byte groups).
		colls := []coll{collAllReduce, collAllGather, collReduceScatter, collBroadcast, collReduce}
		for _, tc := range []struct {
			np, g int
			first map[string][2]int64 // coll/type: the 1000 B row's size and count, by hand
		}{
			{2, 1, map[string][2]int64{
				"allreduce/float": {1000, 250}, "allreduce/int32": {1000, 250}, "allreduce/half": {1000, 500},
				"broadcast/float": {1000, 250}, "reduce/int32": {1000, 250}, "reduce/half": {1000, 500},
				"allgather/float": {992, 124}, "allgather/int32": {992, 124}, "allgather/half": {992, 248},
				"reducescatter/float": {992, 124}, "reducescatter/int32": {992, 124}, "reducescatter/half": {992, 248},
			}},
			{3, 2, map[string][2]int64{
				"allreduce/float": {1000, 250}, "allreduce/int32": {1000, 250}, "allreduce/half": {1000, 500},
				"broadcast/half": {1000, 500}, "reduce/float": {1000, 250}, "reduce/int32": {1000, 250},
				"allgather/float": {960, 40}, "allgather/int32": {960, 40}, "allgather/half": {960, 80},
				"reducescatter/float": {960, 40}, "reducescatter/int32": {960, 40}, "reducescatter/half": {960, 80},
			}},
		} {
			t.Run(fmt.Sprintf("np%d-g%d", tc.np, tc.g), func(t *testing.T) {
				n := tc.np * tc.g
				args := []string{"--backend", "host", "-g", strconv.Itoa(tc.g), "--coll", "allreduce,allgather,reducescatter,broadcast,reduce",
					"-r", "all", "-d", "float,int32,half", "-o", "sum,max", "-b", "1000", "-e", "4000", "-f", "4", "-n", "2", "-w", "1"}
				out, errOut, code := mpirun(t, launcher, flags, tc.np, nil, bin, args...)
				if code != 0 || errOut != "" {
					t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
				}
				if !strings.Contains(out, fmt.Sprintf("\n# nProcs %d nRanks %d (%d per process", tc.np, n, tc.g)) ||
					!strings.Contains(out, "\n# Out of bounds values : 0 OK\n") {
					t.Errorf("header or footer\n%s", out)
				}
				tables := tablesByColl(t, out)
				// The in-process sweep over n ranks: the same rows' shapes.
				var inOut, inErr bytes.Buffer
				cmd := exec.Command(bin, append([]string{"--mpi=false"}, replaceArg(args, "-g", strconv.Itoa(n))...)...)
				cmd.Stdout, cmd.Stderr = &inOut, &inErr
				if err := cmd.Run(); err != nil {
					t.Fatalf("in process, -g %d: %v, stderr %q\n%s", n, err, inErr.String(), inOut.String())
				}
				inTables := tablesByColl(t, inOut.String())
				for _, c := range colls {
					rows, inRows := tables[c.String()], inTables[c.String()]
					ops, roots := 2, 1 // sum, max; -r all: every rank
					if !c.hasOp() {
						ops = 1
					}
					if c.hasRoot() {
						roots = n
					}
					if want := 3 * ops * roots * 2; len(rows) != want || len(inRows) != len(rows) {
						t.Errorf("%s: %d rows across processes, %d in process; want %d (3 types x %d ops x %d roots x 2 sizes)\n%s", c, len(rows), len(inRows), want, ops, roots, out)
						continue
					}
					for k, r := range rows {
						checkShape(t, c, n, r)
						if r.wrong != [2]int64{0, 0} || r.time[0] <= 0 || r.time[1] <= 0 {
							t.Errorf("%s row %+v: want 0 wrong and a time in both modes", c, r)
						}
						in := inRows[k]
						if r.size != in.size || r.count != in.count || r.typ != in.typ || r.op != in.op || r.root != in.root {
							t.Errorf("%s row %d across processes %+v, in process %+v: not the same shape", c, k, r, in)
						}
						if want, ok := tc.first[c.String()+"/"+r.typ]; ok && r.size < 1024 && (r.size != want[0] || r.count != want[1]) {
							t.Errorf("%s row %+v: want size %d and count %d", c, r, want[0], want[1])
						}
					}
				}
			})
		}
	})

	t.Run("wrong values colls", func(t *testing.T) {
		// Process 1 corrupts one element of its first rank's result (of
		// all-gather the whole buffer, of reduce-scatter its own block,
		// of broadcast and reduce root 2's, which is that rank): one
		// wrong value per mode and row, in process 0's table.
		for _, c := range []string{"allgather", "reducescatter", "broadcast", "reduce"} {
			out, errOut, code := mpirun(t, launcher, flags, 2, []string{corruptEnv + "=1"}, bin,
				"--backend", "host", "-g", "2", "--coll", c, "-r", "2", "-d", "float,int32,half", "-b", "1000", "-e", "1000", "-n", "1", "-w", "0")
			rows := tablesByColl(t, out)[c]
			if code != 1 || len(rows) != 3 || !strings.Contains(out, "# Out of bounds values : 6 FAILED") {
				t.Errorf("%s: exit %d, rows %+v: want 1 and 3 rows of 1 wrong per mode\n%s%s", c, code, rows, out, errOut)
			}
			for _, r := range rows {
				if r.wrong != [2]int64{1, 1} {
					t.Errorf("%s row %+v: want 1 wrong value in each mode", c, r)
				}
			}
		}
	})

	t.Run("types", func(t *testing.T) {
		// Every type across processes on the host backend (kernels for
		// all): 0 wrong, avg of the integers included; the baseline N/A
		// for the types MPI's all-reduce is not run on.
		out, errOut, code := mpirun(t, launcher, flags, 2, nil, bin,
			"--backend", "host", "-g", "2", "-b", "4", "-e", "4K", "-f", "32", "-o", "all", "-d", "all", "-n", "1", "-w", "0", "--mpi-baseline")
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
		}
		if !strings.Contains(out, "float and double only, N/A for the other types") || strings.Contains(out, "skips avg") {
			t.Errorf("header\n%s", out)
		}
		seen := map[string]int{}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || strings.HasPrefix(line, "#") {
				continue
			}
			seen[f[2]]++
			if len(f) != 19 || f[8] != "0" || f[12] != "0" {
				t.Errorf("row %q: want 19 columns and 0 wrong", line)
				continue
			}
			size, _ := strconv.ParseInt(f[0], 10, 64)
			count, _ := strconv.ParseInt(f[1], 10, 64)
			if elt := eltSizes[f[2]]; elt == 0 || size != count*elt {
				t.Errorf("row %q: size is not count * the type's size", line)
			}
			baseline := (f[2] == "float" || f[2] == "double") && f[3] != "avg"
			if baseline != (f[16] == "0") || baseline == (f[13] == "N/A") || baseline != (f[18] == "0") || baseline == (f[17] == "N/A") {
				t.Errorf("row %q: MPI_Allreduce columns (want a time and 0 wrong for float and double but avg, else N/A)", line)
			}
		}
		for _, d := range allDtypes {
			want := 5 * 3 // sum, prod, max, min, avg at 3 sizes
			if d.isInt() {
				want = 11 * 3 // sum, prod, max, min, avg and the six bitwise and logical ops
			}
			if seen[d.String()] != want {
				t.Errorf("%d %s rows, want %d\n%s", seen[d.String()], d, want, out)
			}
		}
		// A wrong value in an integer and a 16-bit type is counted.
		out, _, code = mpirun(t, launcher, flags, 2, []string{corruptEnv + "=1"}, bin,
			"--backend", "host", "-d", "int32,half", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0")
		if rows := parseTable(t, out); code != 1 || len(rows) != 2 || rows[0].wrong != [2]int64{1, 1} || rows[1].wrong != [2]int64{1, 1} {
			t.Errorf("exit %d, rows %+v: want 1 wrong value in each mode of int32 and half\n%s", code, rows, out)
		}
	})

	t.Run("unsupported type", func(t *testing.T) {
		// On Vulkan (no kernels for the integer and 16-bit types yet) an
		// all-reduce of them across processes is ErrUnsupported: refused
		// before the table, once, with status 2 on every process.
		if !vulkanAvailable(t) {
			t.Skip("vulkan backend not available")
		}
		var d dtype
		for _, d = range allDtypes {
			if !vulkanKernels(t).Has(d.elem()) {
				break
			}
		}
		if vulkanKernels(t).Has(d.elem()) {
			t.Skip("the vulkan device has kernels for every type")
		}
		out, errOut, code := mpirun(t, launcher, flags, 2, nil, bin, "--backend", "vulkan", "-d", "float,"+d.String(), "-b", "64", "-e", "64", "-n", "1", "-w", "0")
		if want := "allreduce-perf: -d " + d.String() + ": an all-reduce across processes (MPI) needs kernels for the type on every device, and the vulkan backend has none for " + d.String(); code != 2 ||
			strings.Count(errOut, want) != 1 || strings.Contains(out, "# nThread") || strings.Contains(out, "float     sum") {
			t.Errorf("exit %d, stderr %q, want 2 and one message before the table\n%s", code, errOut, out)
		}
		// float alone runs.
		if out, errOut, code := mpirun(t, launcher, flags, 2, nil, bin, "--backend", "vulkan", "-b", "64", "-e", "64", "-n", "1", "-w", "0"); code != 0 {
			t.Errorf("float on vulkan: exit %d, stderr %q\n%s", code, errOut, out)
		}
	})

	t.Run("usage", func(t *testing.T) {
		out, errOut, code := mpirun(t, launcher, flags, 2, nil, bin, "--coll", "gather")
		if code != 2 || strings.Count(errOut, "allreduce-perf: --coll gather") != 1 {
			t.Errorf("exit %d, stderr %q, want 2 and one message\n%s", code, errOut, out)
		}
		// -r names a rank of the whole group, known once it is open: 3
		// is one of 2 processes x 2 ranks, 4 is none.
		out, errOut, code = mpirun(t, launcher, flags, 2, nil, bin, "--backend", "host", "-g", "2", "--coll", "broadcast", "-r", "4", "-b", "64", "-e", "64")
		if code != 2 || strings.Count(errOut, "allreduce-perf: -r/--root 4 is not a rank of 4") != 1 || strings.Contains(out, "size") {
			t.Errorf("-r 4 of 4 ranks: exit %d, stderr %q, want 2 and one message before the table\n%s", code, errOut, out)
		}
		out, errOut, code = mpirun(t, launcher, flags, 2, nil, bin, "--backend", "host", "-g", "2", "--coll", "broadcast", "-r", "3", "-b", "64", "-e", "64", "-n", "1", "-w", "0")
		if rows := parseTable(t, out); code != 0 || errOut != "" || len(rows) != 1 || rows[0].root != 3 || rows[0].wrong != [2]int64{0, 0} {
			t.Errorf("-r 3 of 4 ranks: exit %d, stderr %q, rows %+v\n%s", code, errOut, rows, out)
		}
	})
}

// The collectives the sweep runs across processes pass the checks, the
// baseline with all-reduce alone.
func TestMPIOptionsColls(t *testing.T) {
	for _, tc := range []struct {
		colls    []coll
		baseline bool
		ok       bool
	}{
		{[]coll{collAllReduce, collAllGather, collReduceScatter, collBroadcast, collReduce}, false, true},
		{[]coll{collAllReduce}, true, true},
		{[]coll{collAllGather}, true, false},
		{[]coll{collAllReduce, collReduceScatter}, true, false},
		{[]coll{collAllReduce, collAllToAll}, false, false},
		{[]coll{collBroadcast}, true, false},
	} {
		err := checkMPIOptions(&options{colls: tc.colls, ops: []collective.Op{collective.Sum}}, tc.baseline)
		var u *usageError
		if (err == nil) != tc.ok || (err != nil && !errors.As(err, &u)) {
			t.Errorf("checkMPIOptions(%v, baseline %v) = %v, want ok %v (else a usage error)", tc.colls, tc.baseline, err, tc.ok)
		}
	}
}

// -o premulsum across processes is refused as bad usage, naming it.
func TestMPIPremulsumRefused(t *testing.T) {
	if err := checkMPIOptions(&options{ops: []collective.Op{collective.Sum, opPreMulSum}}, false); err == nil || !strings.Contains(err.Error(), "premulsum") {
		t.Errorf("-o premulsum across processes: %v, want a usage error naming it", err)
	}
}

// tablesByColl parses the rows of every table of out by collective: a
// table without a "# Collective" line is all-reduce's.
func tablesByColl(t *testing.T, out string) map[string][]row {
	t.Helper()
	tables := map[string][]row{}
	name, chunk := "allreduce", ""
	flush := func() {
		tables[name] = append(tables[name], parseTable(t, chunk)...)
		chunk = ""
	}
	for _, line := range strings.SplitAfter(out, "\n") {
		if c, ok := strings.CutPrefix(line, "# Collective "); ok {
			flush()
			name, _, _ = strings.Cut(c, " ")
		}
		chunk += line
	}
	flush()
	return tables
}

// replaceArg returns args with the value after flag replaced by v.
func replaceArg(args []string, flag, v string) []string {
	out := slices.Clone(args)
	if k := slices.Index(out, flag); k >= 0 && k+1 < len(out) {
		out[k+1] = v
	}
	return out
}
