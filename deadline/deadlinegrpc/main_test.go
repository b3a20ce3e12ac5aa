package deadlinegrpc_test

import (
	"fmt"
	"io"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc/grpclog"
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
