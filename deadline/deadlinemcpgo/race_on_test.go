//go:build race

package deadlinemcpgo_test

// raceEnabled: under the race detector sync.Pool drops what is put in it
// at random, so the allocation tests do not hold.
const raceEnabled = true
