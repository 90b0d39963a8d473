// Command gocoll-devbench measures, in one process and one run, the ceilings
// of a device through gocoll's own backend (in-place scale kernel bandwidth,
// pinned host<->device copy bandwidth, submit+fence latency) and gocoll's
// figures against them: the device-resident reduce kernel (T1), the 2-rank
// host all-reduce from pinned buffers (T2a) and from plain Go slices (T2b),
// and small-message latency (T3), with allocations and Vulkan objects
// created per call (T4). It writes every figure, ratio and target verdict as
// JSON and as a Markdown table. Nothing is hard-coded: every ceiling a ratio
// uses is measured in the same run.
//
// The default sizes are 1 GiB for the ceilings and all-reduces and 256 MiB
// for the reduce inputs; small flags make it run on lavapipe:
//
//	gocoll-devbench -size 64M -reduce-size 16M -ar-size 64M -lat-iters 200 -json out.json -md out.md
//
// With -torch FILE (bench/torch_peer.py's JSON from the same run) it adds
// PyTorch's figures and the targets that compare with them (T2b, T3).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/gocoll/gocoll/backend"
	_ "github.com/gocoll/gocoll/host"
	_ "github.com/gocoll/gocoll/vulkan"
)

type params struct {
	Backend      string `json:"backend"`
	Device       int    `json:"device"`
	Size         int    `json:"scale_copy_bytes"`
	ReduceSize   int    `json:"reduce_input_bytes"`
	ARSize       int    `json:"allreduce_bytes"`
	LatBytes     int    `json:"latency_bytes"`
	Reps         int    `json:"reps"`
	Warmup       int    `json:"warmup"`
	Batch        int    `json:"kernels_per_submit"`
	LatIters     int    `json:"latency_iters"`
	ARIters      int    `json:"allreduce_iters"`
	CallIters    int    `json:"latency_calls"`
	AllocWindows int    `json:"alloc_windows"`
	Depths       []int  `json:"pipeline_depths"`
	ReduceInputs []int  `json:"reduce_inputs"`
	T6Size       int    `json:"t6_bytes"`
	T6Calls      int    `json:"t6_calls"`
	T7Size       int    `json:"t7_bytes"`
	T7Ranks      []int  `json:"t7_ranks"`
	T7Reps       int    `json:"t7_reps"`
	T7Chunk      int    `json:"t7_chunk_bytes,omitempty"`
	Skip         string `json:"skip,omitempty"`
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func parseSize(s string) (int, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	mul := 1
	for _, u := range []struct {
		suf string
		m   int
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if strings.HasSuffix(s, u.suf) {
			s, mul = strings.TrimSuffix(s, u.suf), u.m
			break
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mul, nil
}

type sizeFlag struct{ v *int }

func (f sizeFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.Itoa(*f.v)
}
func (f sizeFlag) Set(s string) error {
	v, err := parseSize(s)
	if err == nil {
		*f.v = v
	}
	return err
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("bad list element %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func run(args []string) int {
	fs := flag.NewFlagSet("gocoll-devbench", flag.ContinueOnError)
	p := params{Size: 1 << 30, ReduceSize: 256 << 20, ARSize: 1 << 30, LatBytes: 4 << 10}
	fs.StringVar(&p.Backend, "backend", "vulkan", "backend to measure (vulkan, host)")
	fs.IntVar(&p.Device, "device", 0, "device index (both ranks of the all-reduces share it)")
	fs.Var(sizeFlag{&p.Size}, "size", "bytes of the scale-kernel and copy ceilings (K/M/G suffixes)")
	fs.Var(sizeFlag{&p.ReduceSize}, "reduce-size", "bytes of each reduce input (T1)")
	fs.Var(sizeFlag{&p.ARSize}, "ar-size", "bytes of each rank's all-reduce buffer (T2a, T2b)")
	fs.Var(sizeFlag{&p.LatBytes}, "lat-size", "bytes of each rank's slice in the latency test (T3)")
	fs.IntVar(&p.Reps, "reps", 7, "timed repetitions of each bandwidth figure (the median is reported)")
	fs.IntVar(&p.Warmup, "warmup", 2, "untimed repetitions before each figure")
	fs.IntVar(&p.Batch, "batch", 10, "kernels recorded per submit in the kernel-bandwidth figures")
	fs.IntVar(&p.LatIters, "lat-iters", 2000, "submit+fence round trips timed for the latency ceilings")
	fs.IntVar(&p.ARIters, "ar-iters", 7, "timed all-reduces of ar-size per strategy")
	fs.IntVar(&p.CallIters, "calls", 10000, "timed small all-reduces per strategy (T3, T3b; T4 counts allocations over them)")
	fs.IntVar(&p.AllocWindows, "alloc-windows", 5, "windows of -calls small all-reduces per T3 strategy over which T4 counts mallocs (the first is the timed one; T4 judges the last)")
	depths := fs.String("depths", "2,4,8", "pipeline depths to try in T2")
	inputs := fs.String("inputs", "2,8", "reduce input counts (T1)")
	fs.StringVar(&p.Skip, "skip", "", "comma-separated sections to skip: ceilings,mixed,t1,t2a,t2b,t3,t6,t7 (t6: T3b and T6; mixed: engine pairings for the two PCIe directions, part of ceilings)")
	p.T6Size = 256 << 20
	fs.Var(sizeFlag{&p.T6Size}, "t6-size", "bytes of each rank's tensor in T6")
	torchFile := fs.String("torch", "", "bench/torch_peer.py's JSON from the same run (adds PyTorch figures and T2b/T3 comparisons)")
	jsonOut := fs.String("json", "", "write the results as JSON to this file")
	mdOut := fs.String("md", "", "write the results as a Markdown table to this file")
	note := fs.String("command", "", "the command line that produced this run, recorded in the report")
	fs.IntVar(&p.T6Calls, "t6-calls", 30, "timed all-reduces of each T6 figure")
	p.T7Size = 256 << 20
	fs.Var(sizeFlag{&p.T7Size}, "t7-size", "bytes of each rank's Go slice in T7")
	t7Ranks := fs.String("t7-ranks", "2,4,8", "rank counts of T7")
	fs.IntVar(&p.T7Reps, "t7-reps", 3, "timed all-reduces of each T7 figure (the median is reported)")
	fs.Var(sizeFlag{&p.T7Chunk}, "t7-chunk", "Options.ChunkBytes of the T7 groups (0: the default)")
	cpuProf := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (diagnostics: narrow the run with -skip)")
	memProf := fs.String("memprofile", "", "record every allocation (runtime.MemProfileRate = 1: timings suffer) and write the allocs profile to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *memProf != "" {
		runtime.MemProfileRate = 1
		defer func() {
			if err := writeProfile(*memProf, "allocs"); err != nil {
				fmt.Fprintln(os.Stderr, "gocoll-devbench:", err)
			}
		}()
	}
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "gocoll-devbench: -cpuprofile:", err)
			return 2
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	var err error
	if p.Depths, err = intList(*depths); err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-devbench: -depths:", err)
		return 2
	}
	if p.T7Ranks, err = intList(*t7Ranks); err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-devbench: -t7-ranks:", err)
		return 2
	}
	if p.ReduceInputs, err = intList(*inputs); err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-devbench: -inputs:", err)
		return 2
	}
	if p.Reps < 1 || p.Batch < 1 || p.LatIters < 1 || p.ARIters < 1 || p.CallIters < 1 || p.AllocWindows < 1 || p.T6Calls < 1 || p.T7Reps < 1 || p.Warmup < 0 {
		fmt.Fprintln(os.Stderr, "gocoll-devbench: counts must be >= 1 (warmup >= 0)")
		return 2
	}
	skip := map[string]bool{}
	for _, s := range strings.Split(p.Skip, ",") {
		skip[strings.TrimSpace(s)] = true
	}

	res := &Results{Params: p, Date: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(),
		GOOS: runtime.GOOS + "/" + runtime.GOARCH, Command: *note}
	if res.Command == "" {
		res.Command = "gocoll-devbench " + strings.Join(args, " ")
	}
	if h, err := os.Hostname(); err == nil {
		res.Host = h
	}
	if *torchFile != "" {
		if b, err := os.ReadFile(*torchFile); err != nil {
			res.errorf("torch", "reading %s: %v", *torchFile, err)
		} else if err := json.Unmarshal(b, &res.Torch); err != nil {
			res.errorf("torch", "parsing %s: %v", *torchFile, err)
		}
	}

	bk, err := backend.Lookup(p.Backend)
	if err == nil {
		err = bk.Available()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-devbench:", err)
		return 1
	}
	infos, err := bk.Devices()
	if err != nil || p.Device >= len(infos) {
		fmt.Fprintf(os.Stderr, "gocoll-devbench: device %d: %v (%d devices)\n", p.Device, err, len(infos))
		return 1
	}
	inf := infos[p.Device]
	res.Device = DeviceMeta{Backend: inf.Backend, Name: inf.Name, Driver: inf.Driver, API: inf.APIVersion,
		Type: inf.Type, HostImport: inf.HostImport, Float64: inf.Float64, MaxAlloc: inf.MaxAllocBytes}
	logf("device: %s (%s, driver %s, API %s)", inf.Name, inf.Backend, inf.Driver, inf.APIVersion)

	// save writes what is measured so far (again after each section), so a
	// run stopped by a time limit still leaves its figures.
	res.save = func() error {
		res.Targets = nil
		res.evaluate()
		if *jsonOut != "" {
			b, _ := json.MarshalIndent(res, "", "  ")
			if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
				return err
			}
		}
		if *mdOut != "" {
			return os.WriteFile(*mdOut, []byte(res.markdown()), 0o644)
		}
		return nil
	}
	ctx := context.Background()
	if !skip["ceilings"] || !skip["t1"] {
		if err := shimBench(ctx, bk, p, res, skip); err != nil {
			res.errorf("shim", "%v", err)
		}
		res.save()
	}
	if !skip["t2a"] || !skip["t2b"] || !skip["t3"] {
		collBench(ctx, p, res, skip)
	}
	if !skip["t6"] {
		tensorBench(ctx, p, res)
	}
	if !skip["t7"] {
		t7Bench(ctx, p, res)
	}
	if err := res.save(); err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-devbench:", err)
		return 1
	}
	if *mdOut == "" {
		fmt.Print(res.markdown())
	}
	if len(res.Errors) > 0 {
		fmt.Fprintf(os.Stderr, "gocoll-devbench: %d section(s) failed: %s\n", len(res.Errors), strings.Join(res.Errors, "; "))
		return 1
	}
	return 0
}

var start = time.Now()

// writeProfile writes the named runtime profile to file.
func writeProfile(file, name string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
}
