//go:build !race

package deadlinemcpgo_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
