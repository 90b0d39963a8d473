//go:build race

package bell

const raceEnabled = true
