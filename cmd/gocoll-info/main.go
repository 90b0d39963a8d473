// Command gocoll-info lists the backends compiled into this build of gocoll,
// whether each can run here (and why not), and every device with the
// capabilities gocoll uses: type, driver, API version, f64 support, the
// float32 kernels (and why: the device's float controls or the self-test of
// its float32 arithmetic), binding and allocation limits, subgroup size,
// timestamp period, host-memory import and memory heaps. It is gocoll's
// vulkaninfo.
//
// It also opens a one-rank group the way collective.NewGroup selects a
// backend by default (GOCOLL_BACKEND, else metal, vulkan, host) and says
// which backend that picks and which it skipped, with the reason.
//
//	gocoll-info          human-readable report
//	gocoll-info -json    the same as JSON
//	gocoll-info -auto 4  also: which strategy Auto picks per size on 4 ranks
//	                     (the cost model measures the device first)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
	"github.com/gocoll/gocoll/diag"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Report is the -json output.
type Report struct {
	GOOS, GOARCH string
	GoVersion    string
	Cgo          bool   // whether this binary was built with cgo (GPU backends need it)
	EnvBackend   string `json:",omitempty"` // GOCOLL_BACKEND, if set
	// Selection is what collective.NewGroup picks with the default options.
	Selection Selection
	Backends  []BackendReport
	// Auto is the -auto table: the strategy Auto picks per size.
	Auto        []AutoRow `json:",omitempty"`
	AutoBackend string    `json:",omitempty"`
	AutoRanks   int       `json:",omitempty"`
}

// Selection is the outcome of default backend selection.
type Selection struct {
	Backend string            `json:",omitempty"` // chosen backend, "" if none could open
	Skipped []collective.Skip `json:",omitempty"` // backends tried first, and why they were passed over
	Error   string            `json:",omitempty"` // why no group could be opened
}

// BackendReport is one backend known to this build.
type BackendReport struct {
	Name      string
	Available bool
	Reason    string `json:",omitempty"` // why it is unavailable
	Devices   []backend.DeviceInfo
}

// run is the whole command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gocoll-info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	autoRanks := fs.Int("auto", 0, "also show which all-reduce strategy Auto picks per size on `N` ranks")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gocoll-info: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *autoRanks < 0 {
		fmt.Fprintf(stderr, "gocoll-info: -auto %d: want a rank count >= 1\n", *autoRanks)
		return 2
	}
	rep := collect()
	if *autoRanks > 0 {
		bk, rows, err := autoTable(*autoRanks)
		if err != nil {
			fmt.Fprintf(stderr, "gocoll-info: -auto: %v\n", err)
			return 1
		}
		rep.Auto, rep.AutoBackend, rep.AutoRanks = rows, bk, *autoRanks
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "gocoll-info: %v\n", err)
			return 1
		}
		return 0
	}
	writeText(stdout, rep)
	if rep.Auto != nil {
		writeAuto(stdout, rep.AutoBackend, rep.AutoRanks, rep.Auto)
	}
	return 0
}

// collect probes every backend and the default selection.
func collect() Report {
	rep := Report{
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version(),
		Cgo: cgoEnabled, EnvBackend: os.Getenv("GOCOLL_BACKEND"),
	}
	for _, p := range diag.Probe() {
		br := BackendReport{Name: p.Name, Available: p.Err == nil, Devices: p.Devices}
		if p.Err != nil {
			br.Reason = p.Err.Error()
		}
		rep.Backends = append(rep.Backends, br)
	}
	g, err := collective.NewGroup(context.Background(), collective.Options{Ranks: 1, Config: collective.DefaultConfig()})
	if err != nil {
		rep.Selection.Error = err.Error()
		return rep
	}
	rep.Selection.Backend, rep.Selection.Skipped = g.Backend(), g.Skipped()
	if err := g.Close(); err != nil {
		rep.Selection.Error = "closing the probe group: " + err.Error()
	}
	return rep
}

func writeText(w io.Writer, rep Report) {
	cgo := "cgo"
	if !rep.Cgo {
		cgo = "no cgo"
	}
	fmt.Fprintf(w, "gocoll-info: %s/%s, %s, %s\n", rep.GOOS, rep.GOARCH, rep.GoVersion, cgo)
	env := "unset"
	if rep.EnvBackend != "" {
		env = fmt.Sprintf("%q", rep.EnvBackend)
	}
	if rep.Selection.Backend != "" {
		fmt.Fprintf(w, "default selection: %s (GOCOLL_BACKEND %s)\n", rep.Selection.Backend, env)
	} else {
		fmt.Fprintf(w, "default selection: none (GOCOLL_BACKEND %s): %s\n", env, rep.Selection.Error)
	}
	for _, s := range rep.Selection.Skipped {
		fmt.Fprintf(w, "  skipped %s: %s\n", s.Backend, s.Reason)
	}
	for _, b := range rep.Backends {
		fmt.Fprintln(w)
		if !b.Available {
			fmt.Fprintf(w, "%s: unavailable: %s\n", b.Name, b.Reason)
			continue
		}
		fmt.Fprintf(w, "%s: available, %d device(s)\n", b.Name, len(b.Devices))
		for _, d := range b.Devices {
			writeDevice(w, d)
		}
	}
}

func writeDevice(w io.Writer, d backend.DeviceInfo) {
	fmt.Fprintf(w, "  device %d: %s\n", d.Index, d.Name)
	row := func(k, format string, a ...any) {
		fmt.Fprintf(w, "    %-20s %s\n", k, fmt.Sprintf(format, a...))
	}
	row("type", "%s", d.Type)
	row("vendor / device id", "0x%04x / 0x%04x", d.VendorID, d.DeviceID)
	row("driver", "%s", d.Driver)
	row("API version", "%s", d.APIVersion)
	f64 := "no"
	if d.Float64 {
		f64 = "yes"
	}
	if d.Float64Reason != "" {
		f64 += " (" + d.Float64Reason + ")"
	} else if !d.Float64 {
		f64 += " (f64 is reduced exactly on the host path)"
	}
	row("float64", "%s", f64)
	if d.Backend != "host" {
		// Subnormals in kernels: shaderDenormPreserveFloat16/32/64.
		row("denorm preserve", "f16 %s, f32 %s, f64 %s", yesNo(d.DenormPreserveFloat16), yesNo(d.DenormPreserveFloat32),
			yesNo(d.DenormPreserveFloat64))
	}
	row("float32 kernels", "%s", float32Kernels(d))
	row("max binding", "%s", bytesString(d.MaxBindingBytes))
	row("max allocation", "%s", bytesString(d.MaxAllocBytes))
	row("subgroup size", "%d", d.SubgroupSize)
	row("max work-group size", "%d", d.MaxWorkGroupSize)
	row("timestamp period", "%g ns/tick", d.TimestampPeriod)
	row("host import", "%s", yesNo(d.HostImport))
	row("unified memory", "%s", yesNo(d.UnifiedMemory))
	if len(d.Heaps) == 0 {
		row("memory heaps", "none reported")
	}
	for i, h := range d.Heaps {
		kind := "host"
		if h.DeviceLocal {
			kind = "device-local"
		}
		row(fmt.Sprintf("memory heap %d", i), "%s, %s", bytesString(int64(min(h.Size, math.MaxInt64))), kind)
	}
}

// float32Kernels says which float32 reduction kernels the device runs and
// why.
func float32Kernels(d backend.DeviceInfo) string {
	switch {
	case d.Float32Reason == "":
		return "not chosen yet (at the device's first open)"
	case d.Float32Hardware:
		return "the device's arithmetic: " + d.Float32Reason
	}
	return "arithmetic on the bits (_ftz): " + d.Float32Reason
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// bytesString prints a byte count in binary units, with the exact count.
func bytesString(n int64) string {
	if n == math.MaxInt64 {
		return "unlimited"
	}
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	s := strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
	return fmt.Sprintf("%s %s (%d B)", s, units[u], n)
}
