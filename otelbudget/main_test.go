package otelbudget_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if an example leaves a goroutine behind (an
// HTTP connection left open, a span's timer).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
