package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// progress is the line on stderr that says which row is running, as
// "\r[ 12/40] 4 MiB float sum allreduce ring", when stderr is a terminal.
// It is cleared before every row reaches stdout (which is often the same
// terminal) and at the end. A nil or disabled progress writes nothing.
type progress struct {
	w       io.Writer
	total   int
	done    int
	lastLen int // characters on the line now, to clear
}

// newProgress returns a progress line on w for total rows, or nil when w is
// not a terminal. golang.org/x/term is not a dependency: a character
// device is taken for a terminal (so is /dev/null, where the line is
// harmless).
func newProgress(w io.Writer, total int) *progress {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return &progress{w: w, total: total}
}

// step shows the next row's label.
func (p *progress) step(label string) {
	if p == nil {
		return
	}
	p.done++
	width := len(fmt.Sprint(p.total))
	line := fmt.Sprintf("[%*d/%d] %s ...", width, p.done, p.total, label)
	pad := ""
	if n := p.lastLen - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
	p.lastLen = len(line)
}

// clear blanks the line and returns the cursor to its start.
func (p *progress) clear() {
	if p == nil || p.lastLen == 0 {
		return
	}
	fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.lastLen))
	p.lastLen = 0
}
