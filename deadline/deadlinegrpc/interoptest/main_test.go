package interoptest

import (
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/grpclog"

	"github.com/deadlinebudget/budget/deadline"
)

func TestMain(m *testing.M) {
	grpclog.SetLoggerV2(Logger())
	goleak.VerifyTestMain(m)
}

// fixedPolicy is the deadlinegrpc package tests' policy: three attempts,
// a 20ms floor, a fixed 10ms backoff.
func fixedPolicy() deadline.Policy {
	return deadline.Policy{
		MaxAttempts: 3,
		Floor:       20 * time.Millisecond,
		Backoff:     deadline.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond, Jitter: deadline.JitterNone},
	}
}
