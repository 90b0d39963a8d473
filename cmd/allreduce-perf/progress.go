package main

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress is the line on stderr that says which row is running and how far
// the sweep is, when stderr is a terminal:
//
//	4 MiB float sum allreduce ring  25% |█████               | (3/12) [2s:6s]
//
// (rows done, elapsed and predicted time left), drawn by
// schollz/progressbar. It is cleared before every row reaches stdout (which
// is often the same terminal) and at the end. A nil progress writes nothing.
type progress struct {
	bar   *progressbar.ProgressBar
	shown bool // the line is on the terminal
}

// newProgress returns a progress line on w for total rows, or nil when w is
// not a terminal (golang.org/x/term: a file, a pipe or /dev/null is not).
func newProgress(w io.Writer, total int) *progress {
	f, ok := w.(*os.File)
	if !ok || f == nil || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return newProgressOn(w, total)
}

// newProgressOn returns a progress line on w, terminal or not (nil for no
// rows).
func newProgressOn(w io.Writer, total int) *progress {
	if total < 1 {
		return nil
	}
	return &progress{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(20),
		progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(),
	)}
}

// step shows the label of the row about to run.
func (p *progress) step(label string) {
	if p == nil {
		return
	}
	p.bar.Describe(label + " ")
	p.shown = true
}

// done counts the row that ran and clears the line, before the row is
// printed.
func (p *progress) done() {
	if p == nil {
		return
	}
	p.bar.Add(1)
	p.clear()
}

// clear blanks the line and returns the cursor to its start.
func (p *progress) clear() {
	if p == nil || !p.shown {
		return
	}
	p.bar.Clear()
	p.shown = false
}
