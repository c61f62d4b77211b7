//go:build !race

package engine

// raceEnabled: the race detector is on.
const raceEnabled = false
