//go:build !race

package deadline_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
