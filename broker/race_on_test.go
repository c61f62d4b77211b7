//go:build race

package broker

// raceEnabled: the race detector is on; it multiplies the memory behind the heap (shadow
// memory), so RSS measurements mean nothing.
const raceEnabled = true
