package natstest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests: a
// connection, a consumer, or the embedded server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
