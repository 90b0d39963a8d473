//go:build !race

package ddp

const raceEnabled = false
