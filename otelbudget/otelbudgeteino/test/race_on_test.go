//go:build race

package test

// raceEnabled reports that the race detector is on.
const raceEnabled = true
