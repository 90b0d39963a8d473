package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goBlocks returns the Go code blocks (```go fences) of a Markdown file.
func goBlocks(t *testing.T, path string) []string {
	t.Helper()
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	for line := range strings.Lines(string(md)) {
		switch trimmed := strings.TrimSpace(line); {
		case cur == nil && trimmed == "```go":
			cur = &strings.Builder{}
		case cur != nil && trimmed == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	if cur != nil {
		t.Fatalf("%s: a Go block is not closed", path)
	}
	return blocks
}

// TestFrameworksDoc: every Go block of docs/FRAMEWORKS.md is a complete
// program that builds in this module (gocoll through its replace, gorgonia
// and gonum at this module's versions, offline) and runs to its end on two
// host ranks, so the page cannot drift from the API. Each block is built
// as a package of its own laid over the module (go build -overlay), so
// nothing is written into the tree.
func TestFrameworksDoc(t *testing.T) {
	const doc = "../../docs/FRAMEWORKS.md"
	blocks := goBlocks(t, doc)
	if len(blocks) == 0 {
		t.Fatalf("%s has no Go block", doc)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	for i, b := range blocks {
		if !strings.HasPrefix(b, "package main\n") {
			t.Errorf("%s: Go block %d is not a complete program (package main ...)", doc, i+1)
			continue
		}
		src := filepath.Join(tmp, fmt.Sprintf("block%d.go", i+1))
		if err := os.WriteFile(src, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		pkg := fmt.Sprintf("frameworksdoc%d", i+1)
		overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(wd, pkg, "main.go"): src}})
		if err != nil {
			t.Fatal(err)
		}
		ov := filepath.Join(tmp, fmt.Sprintf("overlay%d.json", i+1))
		if err := os.WriteFile(ov, overlay, 0o644); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(tmp, pkg)
		build := exec.Command("go", "build", "-overlay", ov, "-o", bin, "./"+pkg)
		build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "GOPROXY=off")
		if out, err := build.CombinedOutput(); err != nil {
			t.Errorf("%s: Go block %d does not build: %v\n%s", doc, i+1, err, strings.ReplaceAll(string(out), src, fmt.Sprintf("block %d", i+1)))
			continue
		}
		run := exec.Command(bin)
		run.Env = append(os.Environ(), "GOCOLL_BACKEND=host")
		if out, err := run.CombinedOutput(); err != nil {
			t.Errorf("%s: Go block %d fails: %v\n%s", doc, i+1, err, out)
		} else {
			t.Logf("Go block %d: %s", i+1, strings.TrimSpace(string(out)))
		}
	}
}
