package ddp_test

import (
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
