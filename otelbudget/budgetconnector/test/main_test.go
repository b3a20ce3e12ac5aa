package test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (the
// Collector's and the OpAMP clients' included).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The Collector's telemetry and OpenCensus bridge keep these
		// process-wide workers; nothing the tests start.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}
