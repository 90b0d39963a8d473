//go:build !race

package bell

const raceEnabled = false
