package ddp_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestREADMETrain: README.md shows example_train_test.go's train function
// as it is, so the snippet compiles and runs (Example_train).
func TestREADMETrain(t *testing.T) {
	src, err := os.ReadFile("example_train_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	start := strings.Index(s, "func train(")
	if start < 0 {
		t.Fatal("example_train_test.go has no func train")
	}
	end := strings.Index(s[start:], "\n}\n")
	if end < 0 {
		t.Fatal("example_train_test.go: func train has no end")
	}
	fn := s[start : start+end+3]
	if !strings.Contains(string(readme), fn) {
		t.Errorf("README.md does not show train as example_train_test.go has it:\n%s", fn)
	}
}

// TestFrameworksDocParses: every Go block of docs/FRAMEWORKS.md is a
// complete program that parses (the gorgonia one imports packages this
// module does not have: examples/gorgonia's TestFrameworksDoc builds and
// runs each block there, build.sh examples_test).
func TestFrameworksDocParses(t *testing.T) {
	md, err := os.ReadFile("../docs/FRAMEWORKS.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rest := string(md); ; n++ {
		start := strings.Index(rest, "\n```go\n")
		if start < 0 {
			break
		}
		rest = rest[start+len("\n```go\n"):]
		end := strings.Index(rest, "\n```\n")
		if end < 0 {
			t.Fatalf("docs/FRAMEWORKS.md: Go block %d is not closed", n+1)
		}
		src := rest[:end+1]
		rest = rest[end:]
		f, err := parser.ParseFile(token.NewFileSet(), fmt.Sprintf("block%d.go", n+1), src, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("docs/FRAMEWORKS.md: Go block %d: %v", n+1, err)
		} else if f.Name.Name != "main" {
			t.Errorf("docs/FRAMEWORKS.md: Go block %d is package %s, not a program", n+1, f.Name.Name)
		}
	}
	if n == 0 {
		t.Error("docs/FRAMEWORKS.md has no Go block")
	}
}
