package budgetprop_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (an HTTP
// server or connection of the three-hop tests).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
