//go:build race

package netio

// raceEnabled: the race detector is on; sync.Pool then drops items at random, so allocation
// counts of pooled code mean nothing.
const raceEnabled = true
