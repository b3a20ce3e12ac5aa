package test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
)

// health is a Health service whose Check runs check.
type health struct {
	healthpb.UnimplementedHealthServer
	check func(ctx context.Context) error
}

func (h *health) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if err := h.check(ctx); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// serveHealth serves check on 127.0.0.1 behind otelgrpc with prop and
// returns a connection to it, through otelgrpc with prop too.
func serveHealth(t *testing.T, prop propagation.TextMapPropagator, tp trace.TracerProvider, check func(context.Context) error) healthpb.HealthClient {
	t.Helper()
	s := grpc.NewServer(grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithPropagators(prop), otelgrpc.WithTracerProvider(tp))))
	healthpb.RegisterHealthServer(s, &health{check: check})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go s.Serve(lis)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithPropagators(prop), otelgrpc.WithTracerProvider(tp))))
	require.NoError(t, err)
	t.Cleanup(func() {
		cc.Close()
		s.Stop()
	})
	return healthpb.NewHealthClient(cc)
}

// The three hops over gRPC metadata: A runs under a deadline; B has only
// otelgrpc and the composite propagator, waits 200 ms and calls C; C
// reads the budget with the propagator. C's budget is what B had left, A's
// budget minus B's time, and C's SERVER span shows it (budgetprop.Annotate).
func TestThreeHopsOverGRPCMetadata(t *testing.T) {
	p, err := budgetprop.New(budgetprop.WithMaxBudget(10 * time.Second))
	require.NoError(t, err)
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}, p)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))

	var mu sync.Mutex // the handlers' findings, read after A's call
	var atB, atC budgetprop.Extraction
	var before, after time.Duration
	toC := serveHealth(t, prop, tp, func(ctx context.Context) error {
		budgetprop.Annotate(ctx)
		mu.Lock()
		atC, _ = budgetprop.FromContext(ctx)
		mu.Unlock()
		return budgetprop.Check(ctx)
	})
	toB := serveHealth(t, prop, tp, func(ctx context.Context) error {
		x, _ := budgetprop.FromContext(ctx)
		d, _ := deadline.FromContext(ctx)
		select { // B's own work
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
		b := d.Remaining()
		_, err := toC.Check(ctx, &healthpb.HealthCheckRequest{})
		a := d.Remaining()
		mu.Lock()
		atB, before, after = x, b, a
		mu.Unlock()
		return err
	})

	// A: one run of 2 s, its context ending with it.
	d := deadline.New(2 * time.Second)
	ctx, cancel := d.Scope(deadline.NewContext(context.Background(), d))
	defer cancel()
	_, err = toB.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)

	mu.Lock()
	defer mu.Unlock()
	require.True(t, atB.HasSentBudget)
	require.True(t, atC.HasSentBudget)
	assert.LessOrEqual(t, atB.SentBudget, 2*time.Second)
	// C got what B had left when it sent, rounded up: A's budget minus
	// B's time, not what B received.
	assert.GreaterOrEqual(t, atC.SentBudget, after)
	assert.LessOrEqual(t, atC.SentBudget, before+time.Millisecond)
	assert.LessOrEqual(t, atC.SentBudget, atB.SentBudget-200*time.Millisecond)
	assert.False(t, atC.Refused())

	// C's SERVER span carries the admission as an HTTP server span does.
	// grpc-go ends it after the response is on its way: it may end after
	// A's call returned.
	var server sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		for _, s := range rec.Ended() {
			if s.SpanKind() == trace.SpanKindServer && hasAttr(s, otelbudget.AttrServerInboundBudgetMs) {
				server = s
			}
		}
		return server != nil
	}, 10*time.Second, time.Millisecond, "C's server span has the budget attributes")
	attrs := attribute.NewSet(server.Attributes()...)
	v, _ := attrs.Value(otelbudget.AttrServerInboundBudgetMs)
	assert.Equal(t, atC.Admission.Inbound.Budget.Milliseconds(), v.AsInt64())
	v, _ = attrs.Value(otelbudget.AttrServerMaxBudgetMs)
	assert.Equal(t, int64(10000), v.AsInt64())
	v, _ = attrs.Value(otelbudget.AttrServerLimitedBy)
	assert.Contains(t, []string{"header", "context"}, v.AsString())
	_, ok := attrs.Value(otelbudget.AttrServerBudgetMs)
	assert.True(t, ok)
}

func hasAttr(s sdktrace.ReadOnlySpan, k attribute.Key) bool {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return true
		}
	}
	return false
}
