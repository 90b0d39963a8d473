package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostSmall runs every section on the host backend with tiny sizes and
// checks that the JSON and Markdown hold every target.
func TestHostSmall(t *testing.T) {
	dir := t.TempDir()
	torch := filepath.Join(dir, "torch.json")
	if err := os.WriteFile(torch, []byte(`{"allreduce_bytes": 262144, "allreduce_pageable_s": 0.5,
		"roundtrip_pinned_us": {"median": 40, "p99": 60}, "scale_f32_GBps": 1, "t7_pinned_2stream_s": {"2": 0.5}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	js, md := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.md")
	code := run([]string{"-backend", "host", "-size", "256K", "-reduce-size", "64K", "-ar-size", "256K",
		"-lat-iters", "20", "-calls", "20", "-reps", "2", "-warmup", "1", "-batch", "2", "-ar-iters", "2", "-t6-size", "256K",
		"-t7-size", "64K", "-t7-ranks", "2,3", "-t7-reps", "1", "-torch", torch, "-json", js, "-md", md})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var r Results
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, tg := range r.Targets {
		ids[tg.ID]++
	}
	for _, id := range []string{"T1", "T2a", "T2b", "T3a", "T3b", "T4", "T6", "T7"} {
		if ids[id] == 0 {
			t.Errorf("no %s verdict in %+v", id, r.Targets)
		}
	}
	if len(r.T1) != 4 || len(r.T2a) != 6 || len(r.T2b) != 6 || len(r.T3) != 9 || r.T3b == nil || len(r.T6) != 2 || len(r.T7) != 2*2*len(t7Strategies) {
		t.Errorf("figures: %d T1, %d T2a, %d T2b, %d T3, %d T7", len(r.T1), len(r.T2a), len(r.T2b), len(r.T3), len(r.T7))
	}
	for _, f := range r.T7 {
		if f.Err != "" || f.MedianS <= 0 {
			t.Errorf("T7 figure %+v", f)
		}
	}
	if r.T2b[0].Ratio == 0 {
		t.Errorf("T2b has no ratio against the torch figure")
	}
	m, _ := os.ReadFile(md)
	for _, want := range []string{"## Targets", "## Ceilings", "## T1", "## T2a", "## T2b", "## T3"} {
		if !strings.Contains(string(m), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"4K": 4096, "1G": 1 << 30, "256MiB": 256 << 20, "12": 12} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseSize("x"); err == nil {
		t.Error("parseSize(x): no error")
	}
}
