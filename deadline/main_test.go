package deadline_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: Do and
// Call start none of their own, so every goroutine here is a test's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
