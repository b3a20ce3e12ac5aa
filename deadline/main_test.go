package deadline_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: Do and
// Call start none of their own, but a hedged Do's attempts run on
// goroutines that must all have returned when Do does.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
