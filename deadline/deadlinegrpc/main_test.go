package deadlinegrpc_test

import (
	"io"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc/grpclog"
)

// TestMain silences grpclog and fails the package if a goroutine outlives
// the tests. grpc-go's interop cases, which report through grpclog's Fatal,
// run in the interoptest module.
func TestMain(m *testing.M) {
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
	goleak.VerifyTestMain(m)
}
