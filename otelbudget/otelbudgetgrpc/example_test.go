package otelbudgetgrpc_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgrpc"
)

// warmingUp is a health service that answers UNAVAILABLE to its first two
// checks.
type warmingUp struct {
	healthpb.UnimplementedHealthServer
	n atomic.Int32
}

func (w *warmingUp) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if w.n.Add(1) <= 2 {
		return nil, status.Error(codes.Unavailable, "warming up")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// One observer on both sides of a connection: DialOptions retries an
// idempotent method on UNAVAILABLE inside the caller's budget, and
// ServerOptions gives each RPC at most the server's maximum. The observer
// here has the global providers, no-op until the application installs an
// SDK (the test module beside this package records the spans), so the
// example shows what the call did through hooks on its context and the
// server's admission.
func Example_dialOptions() {
	obs := otelbudget.New()

	sopts, err := otelbudgetgrpc.ServerOptions(obs, []deadlinegrpc.ServerOption{
		deadlinegrpc.WithMaxBudget(2 * time.Second),
		deadlinegrpc.WithAdmission(func(_ context.Context, method string, a deadlinegrpc.Admission) {
			fmt.Println("server:", method, "budget", a.Budget, "limited by", a.Limit)
		}),
	})
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(append(sopts, grpc.WaitForHandlers(true))...)
	healthpb.RegisterHealthServer(srv, &warmingUp{})
	lis := bufconn.Listen(1 << 16)
	go srv.Serve(lis)

	dopts, err := otelbudgetgrpc.DialOptions(obs, []deadlinegrpc.ClientOption{
		deadlinegrpc.WithPolicy(deadline.Policy{MaxAttempts: 3, Floor: 20 * time.Millisecond,
			Backoff: deadline.Backoff{Base: time.Millisecond, Max: time.Millisecond, Jitter: deadline.JitterNone}}),
		deadlinegrpc.WithIdempotentMethods(healthpb.Health_Check_FullMethodName),
	})
	if err != nil {
		panic(err)
	}
	cc, err := grpc.NewClient("passthrough:///example", append(dopts,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))...)
	if err != nil {
		panic(err)
	}

	ctx := deadline.WithHooks(context.Background(), &deadline.Hooks{
		AttemptEnd: func(_ context.Context, a deadline.AttemptInfo, r deadline.AttemptResult) {
			fmt.Println("client: attempt", a.Number, r.EndedBy, status.Code(r.Err))
		},
		CallEnd: func(_ context.Context, r deadline.CallResult) {
			fmt.Println("client:", r.Name, r.Reason, "after", r.Attempts, "attempts, verdict", deadline.VerdictOf(r))
		},
	})
	ctx = deadline.NewContext(ctx, deadline.New(10*time.Second))
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	cc.Close()
	srv.Stop()
	fmt.Println(resp.GetStatus(), err)
	// Output:
	// server: /grpc.health.v1.Health/Check budget 2s limited by max
	// client: attempt 1 error Unavailable
	// server: /grpc.health.v1.Health/Check budget 2s limited by max
	// client: attempt 2 error Unavailable
	// server: /grpc.health.v1.Health/Check budget 2s limited by max
	// client: attempt 3 completed OK
	// client: grpc.health.v1.Health/Check success after 3 attempts, verdict ok
	// SERVING <nil>
}
