//go:build ignore

// gen regenerates the compiled kernels: go generate ./kernels.
package main

import (
	"fmt"
	"os"

	"github.com/gocoll/gocoll/kernels/internal/kgen"
)

func main() {
	if err := kgen.Generate(".", "."); err != nil {
		fmt.Fprintln(os.Stderr, "kernels:", err)
		os.Exit(1)
	}
}
