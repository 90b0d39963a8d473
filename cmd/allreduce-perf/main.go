// Command allreduce-perf is gocoll's main job: an nccl-tests
// all_reduce_perf-style sweep of all-reduce over a range of sizes, with every
// result verified.
//
// It runs -g ranks in one process, one goroutine per rank, on the backend
// chosen as collective.NewGroup chooses it (--backend, else GOCOLL_BACKEND,
// else metal, vulkan, host). For each element type, op and size it runs
// warm-up iterations, times -n iterations out of place (AllReduceInto) and in
// place (AllReduce), and, with -c, resets the inputs, runs once more and
// compares every element of every rank with a float64 reference. The flags,
// the table and the closing lines follow nccl-tests, so results compare line
// by line:
//
//	allreduce-perf -g 4 -b 8 -e 8M -f 4
//
// Exit status: 0 when every value is right, 1 on wrong values or a library
// error (printed on stderr), 2 on bad usage (one line on stderr).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/gocoll/gocoll/collective"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command: it parses args, runs the sweep and returns the
// exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, specs, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout, specs)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "allreduce-perf: %v\n", err)
		return 2
	}

	cfg := collective.DefaultConfig()
	cfg.Strategy = o.strategy
	if o.timeout > 0 {
		cfg.CommunicationTimeout = o.timeout
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	g, err := collective.NewGroup(ctx, collective.Options{
		Ranks:   o.ranks,
		Backend: o.backend,
		Devices: o.devices,
		Config:  cfg,
	})
	if err != nil {
		fmt.Fprintf(stderr, "allreduce-perf: opening %d rank(s): %s\n", o.ranks, describe(err, o))
		if errors.Is(err, collective.ErrInvalidConfig) || errors.Is(err, collective.ErrInvalidArgument) {
			return 2
		}
		return 1
	}

	code := sweepAll(ctx, o, g, stdout, stderr)
	if err := g.Close(); err != nil {
		fmt.Fprintf(stderr, "allreduce-perf: closing the group: %s\n", oneLine(err))
		code = 1
	}
	return code
}

// sweepAll prints the header, runs every element type and op, and prints the
// footer. It returns the exit status.
func sweepAll(ctx context.Context, o *options, g *collective.Group, stdout, stderr io.Writer) int {
	writeHeader(stdout, o, g)
	var (
		wrong   int64
		busbw   float64
		nbusbws int
	)
	for _, dt := range o.dtypes {
		var err error
		switch dt {
		case dtFloat:
			err = sweepType[float32](ctx, o, g, stdout, &wrong, &busbw, &nbusbws)
		case dtDouble:
			err = sweepType[float64](ctx, o, g, stdout, &wrong, &busbw, &nbusbws)
		}
		if err != nil {
			fmt.Fprintf(stderr, "allreduce-perf: %s\n", describe(err, o))
			return 1
		}
	}
	status := "OK"
	if wrong > 0 {
		status = "FAILED"
	}
	avg := 0.0
	if nbusbws > 0 {
		avg = busbw / float64(nbusbws)
	}
	fmt.Fprintf(stdout, "# %-20s : %d %s\n", "Out of bounds values", wrong, status)
	fmt.Fprintf(stdout, "# %-20s : %.6g\n", "Avg bus bandwidth", avg)
	fmt.Fprintln(stdout, "#")
	if wrong > 0 {
		fmt.Fprintf(stderr, "allreduce-perf: %d wrong value(s)\n", wrong)
		return 1
	}
	return 0
}

// sweepType runs every op for element type T and adds to the totals.
func sweepType[T float](ctx context.Context, o *options, g *collective.Group, out io.Writer, wrong *int64, busbw *float64, n *int) error {
	s := newSweep[T](o, g, out)
	for _, op := range o.ops {
		if err := s.run(ctx, op); err != nil {
			return err
		}
	}
	*wrong += s.wrong
	*busbw += s.busbw
	*n += s.nbusbws
	return nil
}

// writeHeader prints nccl-tests' header: the parameters, one line per rank
// with its device, the backend and strategy chosen (and the backends skipped,
// with why), and the column titles.
func writeHeader(w io.Writer, o *options, g *collective.Group) {
	fmt.Fprintf(w, "# nThread 1 nGpus %d minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d agg iters: 1 validation: %d graph: 0\n",
		g.Size(), o.minBytes, o.maxBytes, o.stepString(), o.warmup, o.iters, o.check)
	fmt.Fprintln(w, "#")
	fmt.Fprintln(w, "# Using devices")
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	pid := os.Getpid()
	placement := g.Placement()
	for r := 0; r < g.Size(); r++ {
		info := g.DeviceInfo(r)
		fmt.Fprintf(w, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n",
			r, 0, pid, host, placement[r], info.Backend, info.Name)
	}
	skipped := "none"
	if sk := g.Skipped(); len(sk) > 0 {
		parts := make([]string, len(sk))
		for i, s := range sk {
			parts[i] = s.Backend + " (" + oneLine(errors.New(s.Reason)) + ")"
		}
		skipped = strings.Join(parts, "; ")
	}
	strategy := g.Strategy().String()
	if g.Strategy() == collective.Auto {
		strategy += " (chosen per call by the cost model)"
	}
	fmt.Fprintf(w, "# Backend %s  Strategy %s  Skipped: %s\n", g.Backend(), strategy, skipped)
	fmt.Fprintln(w, "#")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n", "", "", "", "", "")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n",
		"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s\n",
		"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)")
}

// describe is err on one line, naming -T when its deadline ended the run.
func describe(err error, o *options) string {
	s := oneLine(err)
	if o.timeout > 0 && errors.Is(err, context.DeadlineExceeded) {
		s += fmt.Sprintf(" (-T %v)", o.timeout)
	}
	return s
}

// oneLine keeps an error message on one line (the exit-status contract).
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
