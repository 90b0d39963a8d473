package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"time"
	"unicode"

	"github.com/gocoll/gocoll/backend"
	"github.com/gocoll/gocoll/collective"
)

// jsonVersion is the version of the -J file's layout; it changes when a
// field changes meaning or goes away (new fields do not change it).
const jsonVersion = 1

// record is one row and mode of the table (nccl-tests nests out_of_place
// and in_place under one row object; a flat record per mode is simpler to
// filter and plot).
type record struct {
	Collective string  `json:"collective"`
	Strategy   string  `json:"strategy"`  // the table's strategy, as asked (-a)
	Algorithm  string  `json:"algorithm"` // what the library ran: auto's choice, or the collective's fixed algorithm
	Size       int64   `json:"size"`      // bytes, the size(B) column
	Count      int64   `json:"count"`     // elements per rank's call, the count column
	Type       string  `json:"type"`
	Wire       string  `json:"wire,omitempty"` // --wire: the type is the wire format of float data
	Redop      string  `json:"redop"`
	Root       int     `json:"root"`
	InPlace    bool    `json:"in_place"`
	TimeUs     float64 `json:"time_us"`
	AlgBw      float64 `json:"algbw_GBps"`
	BusBw      float64 `json:"busbw_GBps"`
	Wrong      *int64  `json:"wrong"` // null when -c 0
	Iters      int     `json:"iters"`
	// Counters are each rank's counters at the backend seam over the iters
	// timed calls (the difference of two snapshots).
	Counters []rankCounters `json:"counters"`
}

// rankCounters is one rank's counter deltas, keyed by the snake_case name
// of each CounterSnapshot field (dispatches, submits, bytes_reduced, ...),
// plus "rank". Built by reflection so a counter added to the backend seam
// shows up without a change here.
type rankCounters map[string]int64

func countersOf(cs []backend.CounterSnapshot) []rankCounters {
	out := make([]rankCounters, len(cs))
	for r, c := range cs {
		m := rankCounters{"rank": int64(r)}
		v := reflect.ValueOf(c)
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.CanInt() && v.Type().Field(i).IsExported() {
				m[snakeCase(v.Type().Field(i).Name)] = f.Int()
			}
		}
		out[r] = m
	}
	return out
}

// snakeCase turns BytesReduced into bytes_reduced.
func snakeCase(s string) string {
	var b strings.Builder
	for i, c := range s {
		if unicode.IsUpper(c) {
			if i > 0 {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// record turns one mode of a row into its JSON record.
func (s *sweep[T]) record(sh shape, op collective.Op, root int, inPlace bool, alg string, r result) record {
	rec := record{
		Collective: s.t.coll.String(), Strategy: s.t.algorithmName(), Algorithm: alg,
		Size: sh.bytes, Count: sh.count, Type: s.dt.String(), Redop: s.opName(op), Root: s.rootCol(root),
		InPlace: inPlace, TimeUs: float64(r.time) / float64(time.Microsecond), AlgBw: r.algbw, BusBw: r.busbw,
		Iters: s.o.iters, Counters: countersOf(r.counters),
	}
	if s.dt.wire() != 0 {
		rec.Wire = s.dt.String()
	}
	if r.wrong >= 0 {
		w := r.wrong
		rec.Wrong = &w
	}
	return rec
}

// jsonDoc is the -J file: nccl-tests' top-level keys where they exist
// (version, start_time, args, config, devices, results, out_of_bounds,
// average_bus_bandwidth, errors, end_time), plus gocoll's.
type jsonDoc struct {
	Version     int          `json:"version"`
	Tool        string       `json:"tool"`
	StartTime   string       `json:"start_time"`
	EndTime     string       `json:"end_time"`
	Args        []string     `json:"args"`
	Hostname    string       `json:"hostname"`
	Build       jsonBuild    `json:"build"`
	Config      jsonConfig   `json:"config"`
	Backend     string       `json:"backend"`
	Skipped     []jsonSkip   `json:"skipped"`
	Strategy    []string     `json:"strategy"` // one per table, in order
	Devices     []jsonDevice `json:"devices"`
	Results     []record     `json:"results"`
	OutOfBounds struct {
		Count int64 `json:"count"`
		Okay  bool  `json:"okay"`
	} `json:"out_of_bounds"`
	AverageBusBandwidth struct {
		Bandwidth float64 `json:"bandwidth"` // GB/s, the footer's Avg bus bandwidth
	} `json:"average_bus_bandwidth"`
	Errors []string `json:"errors"`
}

type jsonBuild struct {
	Module      string `json:"module"`
	Version     string `json:"version"` // the module version, "(devel)" in a source build
	GoVersion   string `json:"go_version"`
	VCSRevision string `json:"vcs_revision,omitempty"`
	VCSTime     string `json:"vcs_time,omitempty"`
	VCSModified string `json:"vcs_modified,omitempty"`
}

type jsonConfig struct {
	NThreads     int      `json:"nthreads"`
	NGpus        int      `json:"ngpus"`
	MinBytes     int64    `json:"minimum_bytes"`
	MaxBytes     int64    `json:"maximum_bytes"`
	StepFactor   int64    `json:"step_factor,omitempty"`
	StepBytes    int64    `json:"step_bytes,omitempty"`
	WarmupIters  int      `json:"warmup_iters"`
	Iterations   int      `json:"iterations"`
	AggIters     int      `json:"aggregated_iterations"`
	Validation   int      `json:"validation"`
	Graph        int      `json:"graph"`
	Blocking     bool     `json:"blocking_collectives"`
	Collectives  []string `json:"collectives"`
	Datatypes    []string `json:"datatypes"`
	Wire         string   `json:"wire,omitempty"` // --wire: the datatype is the wire format of float data
	Ops          []string `json:"ops"`
	Roots        []int    `json:"roots"` // broadcast and reduce
	Algorithms   []string `json:"algorithms"`
	Pinned       bool     `json:"pinned"`
	BackendAsked string   `json:"backend_requested"`
	DevicesAsked []int    `json:"devices_requested"`
	TimeoutSec   float64  `json:"timeout_s"`
	CommTimeout  float64  `json:"communication_timeout_s"`
	PipelineDpth int      `json:"pipeline_depth"`
	LocalGroup   int      `json:"local_group_size"`
}

type jsonSkip struct {
	Backend string `json:"backend"`
	Reason  string `json:"reason"`
}

type jsonDevice struct {
	Rank     int    `json:"rank"`
	Group    int    `json:"group"`
	Pid      int    `json:"pid"`
	Hostname string `json:"hostname"`
	Device   int    `json:"device"`
	Backend  string `json:"backend"`
	Name     string `json:"name"`
	Float64  bool   `json:"float64"`
}

func buildInfo() jsonBuild {
	b := jsonBuild{Module: "github.com/gocoll/gocoll"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = bi.GoVersion
	if bi.Main.Path == b.Module {
		b.Version = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == b.Module {
			b.Version = d.Version
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.VCSRevision = s.Value
		case "vcs.time":
			b.VCSTime = s.Value
		case "vcs.modified":
			b.VCSModified = s.Value
		}
	}
	return b
}

// newJSONDoc fills the run's parameters and devices.
func newJSONDoc(o *options, g *collective.Group, tables []table, start time.Time, host string) *jsonDoc {
	d := &jsonDoc{
		Version: jsonVersion, Tool: o.prog, StartTime: start.Format(time.RFC3339), Args: o.args,
		Hostname: host, Build: buildInfo(), Backend: g.Backend(),
		Skipped: []jsonSkip{}, Results: []record{}, Errors: []string{},
	}
	cfg := g.Config()
	d.Config = jsonConfig{
		NThreads: 1, NGpus: g.Size(), MinBytes: o.minBytes, MaxBytes: o.maxBytes,
		WarmupIters: o.warmup, Iterations: o.iters, AggIters: 1, Validation: o.check,
		Blocking: o.blocking == 1, Pinned: o.pinned, Roots: o.roots, BackendAsked: o.backend, DevicesAsked: o.devices,
		TimeoutSec: o.timeout.Seconds(), CommTimeout: cfg.CommunicationTimeout.Seconds(),
		PipelineDpth: cfg.PipelineDepth, LocalGroup: cfg.LocalGroupSize,
	}
	if o.stepFactor > 1 {
		d.Config.StepFactor = o.stepFactor
	} else {
		d.Config.StepBytes = o.stepBytes
	}
	for _, c := range o.colls {
		d.Config.Collectives = append(d.Config.Collectives, c.String())
	}
	for _, t := range o.dtypes {
		d.Config.Datatypes = append(d.Config.Datatypes, t.String())
		if t.wire() != 0 {
			d.Config.Wire = t.String()
		}
	}
	for _, op := range o.ops {
		d.Config.Ops = append(d.Config.Ops, opString(op))
	}
	for _, s := range o.strategies {
		d.Config.Algorithms = append(d.Config.Algorithms, s.String())
	}
	for _, s := range g.Skipped() {
		d.Skipped = append(d.Skipped, jsonSkip{Backend: s.Backend, Reason: s.Reason})
	}
	for _, t := range tables {
		d.Strategy = append(d.Strategy, t.algorithmName())
	}
	placement := g.Placement()
	for r := 0; r < g.Size(); r++ {
		info := g.DeviceInfo(r)
		d.Devices = append(d.Devices, jsonDevice{
			Rank: r, Pid: os.Getpid(), Hostname: host, Device: placement[r],
			Backend: info.Backend, Name: info.Name, Float64: info.Float64,
		})
	}
	return d
}

// writeFileAtomic writes the file through a temporary file in the same
// folder and renames it into place, so a reader never sees half a file
// and an interrupted run leaves the previous one.
func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("renaming into place: %w", err)
	}
	return nil
}

// writeJSON writes d to path atomically.
func writeJSON(path string, d *jsonDoc) error {
	return writeFileAtomic(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	})
}
