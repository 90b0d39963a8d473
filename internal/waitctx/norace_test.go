//go:build !race

package waitctx

const raceEnabled = false
