//go:build race

package deadline_test

// raceEnabled: the race detector slows the virtual-time overload
// simulations about tenfold, so under -race they model a shorter span
// (the short one); `make test-all` also runs them at full length without
// it (docs/ci.md).
const raceEnabled = true
