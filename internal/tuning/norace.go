//go:build !race

package tuning

// measureShift shrinks Measure's parallel memcpy under the race detector
// only: see race.go.
const measureShift = 0
