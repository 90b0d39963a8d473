//go:build race

package backendtest

// raceEnabled reports whether the race detector is on: it allocates on
// synchronisation, so allocation counts mean nothing under it.
const raceEnabled = true
