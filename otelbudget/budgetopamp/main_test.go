package budgetopamp_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: the
// client's and the loopback server's included.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
