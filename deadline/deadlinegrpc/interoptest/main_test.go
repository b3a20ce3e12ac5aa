package interoptest

import (
	"fmt"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/grpclog"

	"github.com/deadlinebudget/budget/deadline"
)

func TestMain(m *testing.M) {
	grpclog.SetLoggerV2(interopLogger{grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard)})
	goleak.VerifyTestMain(m)
}

// interopLogger is grpclog's logger for the tests: silent, except that
// Fatal panics instead of exiting, so that a failing interop case
// (google.golang.org/grpc/interop reports through grpclog's Fatal) fails
// its test rather than the whole binary.
type interopLogger struct{ grpclog.LoggerV2 }

func (interopLogger) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (interopLogger) Fatalln(args ...any)               { panic(fmt.Sprint(args...)) }
func (interopLogger) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// fixedPolicy is the deadlinegrpc package tests' policy: three attempts,
// a 20ms floor, a fixed 10ms backoff.
func fixedPolicy() deadline.Policy {
	return deadline.Policy{
		MaxAttempts: 3,
		Floor:       20 * time.Millisecond,
		Backoff:     deadline.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond, Jitter: deadline.JitterNone},
	}
}
