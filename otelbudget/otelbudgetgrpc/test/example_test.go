package test

import (
	"context"
	"fmt"
	"net"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgrpc"
)

// One observer for the whole program: a call through the connection is one
// call span with the verdict and one otelgrpc CLIENT span per attempt,
// which carries the attempt attributes (here the server fails the first two
// attempts with UNAVAILABLE). The observer's own hooks on the caller's
// context record nothing twice.
func Example_dialOptions() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))

	sopts, err := otelbudgetgrpc.ServerOptions(obs, []deadlinegrpc.ServerOption{deadlinegrpc.WithMaxBudget(2 * time.Second)})
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(append(sopts, grpc.WaitForHandlers(true))...)
	srv.RegisterService(&desc, &flaky{})
	lis := bufconn.Listen(1 << 16)
	go srv.Serve(lis)

	dopts, err := otelbudgetgrpc.DialOptions(obs, []deadlinegrpc.ClientOption{
		deadlinegrpc.WithPolicy(policy),
		deadlinegrpc.WithIdempotentMethods("/deadlinegrpc.test.Echo/Get"),
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

	ctx := deadline.WithHooks(context.Background(), obs.Hooks())
	ctx = deadline.NewContext(ctx, deadline.New(time.Second))
	err = cc.Invoke(ctx, "/deadlinegrpc.test.Echo/Get", wrapperspb.String("x"), new(wrapperspb.StringValue))
	cc.Close()
	srv.Stop()
	fmt.Println("error:", err)

	for _, s := range rec.Ended() {
		a := attrs(s)
		switch s.SpanKind().String() {
		case "client":
			fmt.Println(s.SpanKind(), s.Name(), "attempt", a[otelbudget.AttrAttemptNumber].AsInt64(), a[otelbudget.AttrAttemptEndedBy].AsString())
		case "internal":
			fmt.Println(s.SpanKind(), s.Name(), "verdict", a[otelbudget.AttrVerdict].AsString(), "attempts", a[otelbudget.AttrAttempts].AsInt64())
		}
	}
	// Output:
	// error: <nil>
	// client deadlinegrpc.test.Echo/Get attempt 1 error
	// client deadlinegrpc.test.Echo/Get attempt 2 error
	// client deadlinegrpc.test.Echo/Get attempt 3 completed
	// internal deadlinegrpc.test.Echo/Get verdict ok attempts 3
}
