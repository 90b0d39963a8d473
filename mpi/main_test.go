//go:build mpi && cgo

package mpi

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/backend"
)

// The tests need several processes. Run by go test, the test binary is not
// inside an MPI job: TestMain then starts itself under mpirun for 2, 3 and 4
// processes (and with lower thread levels), and fails if any job fails.
// Inside a job (mpirun sets OMPI_COMM_WORLD_SIZE, or PMI_SIZE / PMIX_RANK
// for MPICH and PMIx launchers) the tests run for real on every process.

// testWorld is the World of a process inside a job; nil outside one.
var testWorld *World

// jobTimeout bounds one mpirun, so that a hang fails instead of stalling.
const jobTimeout = 150 * time.Second

// insideJob reports whether the process was started by an MPI launcher.
func insideJob() bool {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// fullOnlyHere reports whether this process runs the checks that only the
// 3-process job at the default thread level makes in the trimmed matrix
// (the 256 MiB exchange between processes, the deterministic native path
// with lavapipe ranks): on top of light's cases.
func fullOnlyHere(w *World) bool {
	return !light() || w.Size() == 3 && os.Getenv("GOCOLL_MPI_THREAD") == "" && !raceEnabled
}

// testJobs are the jobs the outer test binary runs.
var testJobs = []struct {
	np     int
	thread string // GOCOLL_MPI_THREAD
	// light: GOCOLL_MPI_LIGHT, the trimmed matrix, unless GOCOLL_TEST_FULL
	// is set (every job; the 3-process job keeps what only it runs:
	// fullOnlyHere).
	light bool
}{
	{2, "", true}, {3, "", true}, {4, "", true},
	{2, "funneled", false},   // every call on MPI's main thread
	{3, "serialized", false}, // every call behind one mutex
}

func TestMain(m *testing.M) {
	flag.Parse()
	if insideJob() {
		os.Exit(runInside(m))
	}
	l, err := findLauncher()
	if err != nil {
		fmt.Printf("mpi: no MPI launcher (%v): the tests that need MPI skip\n", err)
		os.Exit(m.Run())
	}
	code := 0
	for _, j := range testJobs {
		start := time.Now()
		env := []string{"GOCOLL_MPI_THREAD=" + j.thread}
		if j.light && os.Getenv("GOCOLL_TEST_FULL") == "" {
			env = append(env, "GOCOLL_MPI_LIGHT=1")
		}
		out, err := l.run(j.np, env, childArgs())
		status := "ok"
		if err != nil {
			status = "FAIL: " + err.Error()
			code = 1
		}
		fmt.Printf("=== mpirun -np %d (GOCOLL_MPI_THREAD=%q): %s in %v\n%s", j.np, j.thread, status,
			time.Since(start).Round(time.Millisecond), out)
	}
	if c := m.Run(); c != 0 {
		code = c
	}
	os.Exit(code)
}

// runInside runs the tests in one process of a job, then checks Close,
// re-Init and Finalize.
func runInside(m *testing.M) int {
	w, err := Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpi: Init:", err)
		return 1
	}
	testWorld = w
	code := m.Run()
	if w.exec.hb.on.Load() {
		fmt.Printf("mpi: process %d: heartbeats sent %d, skipped %d, received %d; longest silence %v; thread late by up to %v; longest tick %v\n",
			w.Rank(), heartbeatStats.sent.Load(), heartbeatStats.skipped.Load(), heartbeatStats.received.Load(),
			time.Duration(heartbeatStats.silence.Load()), time.Duration(heartbeatStats.late.Load()), time.Duration(heartbeatStats.longest.Load()))
	}
	if err := checkLifecycle(w); err != nil {
		fmt.Fprintf(os.Stderr, "mpi: process %d: lifecycle: %v\n", w.Rank(), err)
		code = 1
	}
	return code
}

// checkLifecycle closes w, opens and closes a second World, finalizes MPI
// and checks what each step leaves.
func checkLifecycle(w *World) error {
	if again, err := Init(); err != nil || again != w {
		return fmt.Errorf("second Init = %p, %v; want the same World %p", again, err, w)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("Close: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("second Close: %w", err)
	}
	if _, err := w.Isend(nil, 0, 0); !errors.Is(err, backend.ErrClosed) {
		return fmt.Errorf("Isend after Close = %v, want ErrClosed", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.Dup(ctx); !errors.Is(err, backend.ErrClosed) {
		return fmt.Errorf("Dup after Close = %v, want ErrClosed", err)
	}
	w2, err := Init()
	if err != nil || w2 == w {
		return fmt.Errorf("Init after Close = %p, %v; want a new World", w2, err)
	}
	if err := w2.Barrier(ctx); err != nil {
		return fmt.Errorf("Barrier on the second World: %w", err)
	}
	// A duplicate left open, with a receive nobody sends to: Finalize closes it.
	d, err := w2.Dup(ctx)
	if err != nil {
		return fmt.Errorf("Dup of the second World: %w", err)
	}
	if _, err := d.Irecv(make([]byte, 8), 0, 1); err != nil {
		return fmt.Errorf("Irecv on the duplicate: %w", err)
	}
	if err := Finalize(); err != nil {
		return fmt.Errorf("Finalize: %w", err)
	}
	if err := Finalize(); err != nil {
		return fmt.Errorf("second Finalize: %w", err)
	}
	if err := w2.Barrier(ctx); !errors.Is(err, backend.ErrClosed) {
		return fmt.Errorf("Barrier after Finalize = %v, want ErrClosed", err)
	}
	if err := d.(*World).Barrier(ctx); !errors.Is(err, backend.ErrClosed) || len(dups) != 0 {
		return fmt.Errorf("Barrier on a duplicate after Finalize = %v, want ErrClosed; %d duplicates still open", err, len(dups))
	}
	if _, err := Init(); !errors.Is(err, backend.ErrClosed) {
		return fmt.Errorf("Init after Finalize = %v, want ErrClosed", err)
	}
	return nil
}

// needWorld returns the World, or skips outside a job.
func needWorld(t *testing.T) *World {
	t.Helper()
	if testWorld == nil {
		t.Skip("runs inside mpirun, which TestMain starts")
	}
	return testWorld
}

// childArgs are the test flags a job's processes get: the selection and
// verbosity flags the outer binary was given, with -test.v on.
func childArgs() []string {
	pass := map[string]bool{"test.run": true, "test.skip": true, "test.count": true, "test.short": true,
		"test.failfast": true, "test.timeout": true, "test.cpu": false}
	args := []string{"-test.v=true"}
	flag.Visit(func(f *flag.Flag) {
		if pass[f.Name] {
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	return args
}

// launcher runs the test binary under an MPI launcher.
type launcher struct {
	path    string
	openMPI bool
}

// findLauncher finds mpirun (or $GOCOLL_MPIRUN) and whether it is Open MPI's.
func findLauncher() (*launcher, error) {
	name := os.Getenv("GOCOLL_MPIRUN")
	if name == "" {
		name = "mpirun"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, err
	}
	out, _ := exec.Command(path, "--version").CombinedOutput()
	return &launcher{path: path, openMPI: bytes.Contains(out, []byte("Open MPI")) || bytes.Contains(out, []byte("OpenRTE"))}, nil
}

// run starts np processes of this test binary with args and extra
// environment, and returns their combined output.
func (l *launcher) run(np int, env, args []string) ([]byte, error) {
	argv := []string{"-np", fmt.Sprint(np)}
	if l.openMPI {
		// --oversubscribe: more processes than cores; --allow-run-as-root:
		// containers and CI run as root; --tag-output: say which process
		// printed each line.
		argv = append(argv, "--oversubscribe", "--allow-run-as-root", "--tag-output")
	} else {
		argv = append(argv, "-prepend-rank")
	}
	argv = append(argv, os.Args[0])
	argv = append(argv, args...)
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.path, argv...)
	cmd.Env = append(os.Environ(), env...)
	// On timeout, SIGTERM lets mpirun kill the job's processes; SIGKILL follows.
	cmd.Cancel = func() error { return cmd.Process.Signal(unix.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("no result within %v: %w", jobTimeout, err)
	}
	return out, err
}

// jobResult is the outcome of a job a test started.
type jobResult struct {
	l       *launcher
	out     []byte
	err     error // mpirun's
	elapsed time.Duration
}

// ownJob starts, from outside a job, np processes of this test binary that
// run the tests matching run, with extra environment env, and logs the
// output under what (what the job does). It skips inside a job and without
// a launcher.
func ownJob(t *testing.T, np int, env []string, run, what string) jobResult {
	t.Helper()
	if insideJob() {
		t.Skip("starts its own job from outside one")
	}
	l, err := findLauncher()
	if err != nil {
		t.Skip("no MPI launcher:", err)
	}
	start := time.Now()
	j := jobResult{l: l}
	j.out, j.err = l.run(np, env, []string{"-test.run=" + run, "-test.v=true"})
	j.elapsed = time.Since(start)
	t.Logf("mpirun -np %d (%s) ended after %v with %v:\n%s", np, what, j.elapsed.Round(time.Millisecond), j.err, j.out)
	return j
}

// TestProcessDeath runs a job in which one process exits with status 3 in
// the middle of the run, while the others wait in Allgather: mpirun must end
// the job with a non-zero status and say which process failed.
func TestProcessDeath(t *testing.T) {
	j := ownJob(t, 3, []string{"GOCOLL_MPI_TEST_DIE=1"}, "^TestHelperDeath$", "process 1 exits with status 3")
	l, out, err, elapsed := j.l, j.out, j.err, j.elapsed
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("mpirun: %v; want a non-zero exit status", err)
	}
	// Open MPI explains ("mpirun detected that one or more processes exited
	// with non-zero status ... Exit code: 3") and exits with 3. MPICH's
	// Hydra exits with the status of the first process it sees end: 3, or
	// 9 for a survivor it killed, with a "BAD TERMINATION ... EXIT CODE: 9"
	// box that does not name the process that failed first.
	if l.openMPI {
		if !regexp.MustCompile(`Exit code:\s*3\b`).Match(out) || !strings.Contains(string(out), "non-zero status") {
			t.Errorf("Open MPI's output does not say that a process exited with non-zero status 3")
		}
	} else if exit.ExitCode() != 3 && !strings.Contains(string(out), "BAD TERMINATION") {
		t.Errorf("mpirun exited with status %d and did not report a failed process", exit.ExitCode())
	}
	if elapsed > 30*time.Second {
		t.Errorf("the job took %v to end; the survivors wait up to 60 s, so mpirun did not end them", elapsed)
	}
}

// TestHelperDeath is the job TestProcessDeath starts: process 1 exits with
// status 3 between two collectives, the others wait for it.
func TestHelperDeath(t *testing.T) {
	if os.Getenv("GOCOLL_MPI_TEST_DIE") == "" {
		t.Skip("only in the job TestProcessDeath starts")
	}
	w := needWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Rank() == 1 {
		fmt.Println("process 1 exits with status 3")
		os.Exit(3)
	}
	mine := []byte{byte(w.Rank())}
	err := w.Allgather(ctx, mine, make([]byte, w.Size()))
	t.Errorf("Allgather returned (%v) although process 1 exited; mpirun should have ended this process", err)
}
