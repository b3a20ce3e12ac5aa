package admission_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a call
// waiting in the admission queue is its caller's goroutine, and must have
// returned with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
