package interoptest

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	v3orcaservicegrpc "github.com/cncf/xds/go/xds/service/orca/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/orca"
)

// The runner below is shared by this module's tests and otelbudgetgrpc's
// (otelbudget/otelbudgetgrpc/test): both are test-only modules, so the
// one under otelbudget/ may import this one.

// TestServiceMethods are every method of grpc.testing.TestService.
var TestServiceMethods = []string{
	"/grpc.testing.TestService/EmptyCall",
	"/grpc.testing.TestService/UnaryCall",
	"/grpc.testing.TestService/CacheableUnaryCall",
	"/grpc.testing.TestService/StreamingOutputCall",
	"/grpc.testing.TestService/StreamingInputCall",
	"/grpc.testing.TestService/FullDuplexCall",
	"/grpc.testing.TestService/HalfDuplexCall",
	"/grpc.testing.TestService/UnimplementedCall",
}

// Logger is grpclog's logger for the interop tests: silent, except that
// Fatal panics instead of exiting, so that a failing interop case
// (google.golang.org/grpc/interop reports through grpclog's Fatal) fails
// its test rather than the whole binary. A test binary installs it in
// TestMain with grpclog.SetLoggerV2(interoptest.Logger()).
func Logger() grpclog.LoggerV2 {
	return panicLogger{grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard)}
}

type panicLogger struct{ grpclog.LoggerV2 }

func (panicLogger) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (panicLogger) Fatalln(args ...any)               { panic(fmt.Sprint(args...)) }
func (panicLogger) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// RunInterop serves interop.NewTestServer (and ORCA) on loopback with
// serverOpts, and runs the interop client cases through connections dialed
// with dial, each case with ctx. hedged says the client hedges: the ORCA
// cases are then skipped, because their LB policy's picker writes each
// call's load report through a pointer the caller's context carries, and
// hedged attempts, which run at once in that context, would write it at
// once (docs/grpc.md, "Hedging").
func RunInterop(t *testing.T, ctx context.Context, serverOpts []grpc.ServerOption, dial []grpc.DialOption, hedged bool) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	rec := orca.NewServerMetricsRecorder()
	s := grpc.NewServer(append(serverOpts, orca.CallMetricsServerOption(nil))...)
	testgrpc.RegisterTestServiceServer(s, interop.NewTestServer(interop.NewTestServerOptions{MetricsRecorder: rec}))
	v3orcaservicegrpc.RegisterOpenRcaServiceServer(s, &orcaService{metrics: rec})
	go s.Serve(lis)
	t.Cleanup(s.Stop)

	addr := lis.Addr().String()
	dial = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dial...)
	newConn := func(extra ...grpc.DialOption) *grpc.ClientConn {
		cc, err := grpc.NewClient(addr, append(dial, extra...)...)
		require.NoError(t, err)
		return cc
	}
	cc := newConn()
	defer cc.Close()
	orcaCC := newConn(grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"test_backend_metrics_load_balancer":{}}]}`))
	defer orcaCC.Close()
	tc := testgrpc.NewTestServiceClient(cc)

	soak := func(channel func() (*grpc.ClientConn, func())) interop.SoakTestConfig {
		return interop.SoakTestConfig{
			RequestSize: 271828, ResponseSize: 314159,
			PerIterationMaxAcceptableLatency: time.Minute, OverallTimeout: time.Minute,
			ServerAddr: addr, NumWorkers: 1, Iterations: 3, ChannelForTest: channel,
		}
	}
	cases := []struct {
		name string
		run  func()
	}{
		{"empty_unary", func() { interop.DoEmptyUnaryCall(ctx, tc) }},
		{"large_unary", func() { interop.DoLargeUnaryCall(ctx, tc) }},
		{"client_streaming", func() { interop.DoClientStreaming(ctx, tc) }},
		{"server_streaming", func() { interop.DoServerStreaming(ctx, tc) }},
		{"ping_pong", func() { interop.DoPingPong(ctx, tc) }},
		{"empty_stream", func() { interop.DoEmptyStream(ctx, tc) }},
		{"timeout_on_sleeping_server", func() { interop.DoTimeoutOnSleepingServer(ctx, tc) }},
		{"cancel_after_begin", func() { interop.DoCancelAfterBegin(ctx, tc) }},
		{"cancel_after_first_response", func() { interop.DoCancelAfterFirstResponse(ctx, tc) }},
		{"custom_metadata", func() { interop.DoCustomMetadata(ctx, tc) }},
		{"status_code_and_message", func() { interop.DoStatusCodeAndMessage(ctx, tc) }},
		{"special_status_message", func() { interop.DoSpecialStatusMessage(ctx, tc) }},
		{"unimplemented_method", func() { interop.DoUnimplementedMethod(ctx, cc) }},
		{"unimplemented_service", func() { interop.DoUnimplementedService(ctx, testgrpc.NewUnimplementedServiceClient(cc)) }},
		{"rpc_soak", func() {
			interop.DoSoakTest(ctx, soak(func() (*grpc.ClientConn, func()) { return cc, func() {} }))
		}},
		{"channel_soak", func() {
			interop.DoSoakTest(ctx, soak(func() (*grpc.ClientConn, func()) {
				c := newConn()
				return c, func() { c.Close() }
			}))
		}},
		{"orca_per_rpc", func() { interop.DoORCAPerRPCTest(ctx, testgrpc.NewTestServiceClient(orcaCC)) }},
		{"orca_oob", func() { interop.DoORCAOOBTest(ctx, testgrpc.NewTestServiceClient(orcaCC)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if hedged && strings.HasPrefix(c.name, "orca_") {
				t.Skip("hedged attempts would write the ORCA picker's per-call result at once")
			}
			tries := 1
			if c.name == "cancel_after_begin" {
				// The case races grpc-go's own goroutine that resets a
				// canceled stream against the server's OK to the half-close
				// sent after the cancel; on a loaded machine plain grpc-go
				// loses it now and then too. A real fault fails every try
				// (TestStreamCanceledBeforeCloseIsCanceled checks the
				// property the interceptors owe it deterministically).
				tries = 3
			}
			var failure any
			for range tries {
				if failure = runCase(c.run); failure == nil {
					return
				}
			}
			t.Fatalf("%s: %v", c.name, failure)
		})
	}
}

// runCase runs an interop case and returns what its grpclog Fatal panicked
// with, nil when it passed.
func runCase(run func()) (failure any) {
	defer func() { failure = recover() }()
	run()
	return nil
}

// orcaService is ORCA's out-of-band service as grpc-go's interop server
// runs it: reports at the interval the client asks for (orca.Register
// keeps a minimum of 30 s, which only grpc-go's internal packages may
// lower).
type orcaService struct {
	v3orcaservicegrpc.UnimplementedOpenRcaServiceServer
	metrics orca.ServerMetricsProvider
}

func (o *orcaService) StreamCoreMetrics(req *v3orcaservicegrpc.OrcaLoadReportRequest, stream v3orcaservicegrpc.OpenRcaService_StreamCoreMetricsServer) error {
	interval := req.GetReportInterval().AsDuration()
	if interval <= 0 {
		interval = time.Second
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		m := o.metrics.ServerMetrics()
		r := &v3orcapb.OrcaLoadReport{Utilization: m.Utilization, RequestCost: m.RequestCost, NamedMetrics: m.NamedMetrics}
		if m.CPUUtilization != -1 {
			r.CpuUtilization = m.CPUUtilization
		}
		if m.MemUtilization != -1 {
			r.MemUtilization = m.MemUtilization
		}
		if m.AppUtilization != -1 {
			r.ApplicationUtilization = m.AppUtilization
		}
		if m.QPS != -1 {
			r.RpsFractional = m.QPS
		}
		if m.EPS != -1 {
			r.Eps = m.EPS
		}
		if err := stream.Send(r); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-ticker.C:
		}
	}
}
