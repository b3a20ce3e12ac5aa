package test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgrpc"
)

// A server that answers UNAVAILABLE with a negative pushback refuses the
// retry: the one attempt's CLIENT span says error.type "pushback" (the
// observer's value for a deadlinegrpc.PushbackError), not the status code
// alone, which a retried UNAVAILABLE also has; the code stays in otelgrpc's
// rpc.response.status_code.
func TestPushbackErrorType(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))

	refusing := grpc.ServiceDesc{
		ServiceName: "deadlinegrpc.test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Get", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(wrapperspb.StringValue)); err != nil {
				return nil, err
			}
			_ = grpc.SetTrailer(ctx, metadata.Pairs(deadlinegrpc.PushbackTrailer, "-1"))
			return nil, status.Error(codes.Unavailable, "down, do not retry")
		}}},
	}
	dopts, err := otelbudgetgrpc.DialOptions(obs, []deadlinegrpc.ClientOption{
		deadlinegrpc.WithPolicy(policy), deadlinegrpc.WithIdempotentMethods(method)})
	require.NoError(t, err)
	cc, stop := dialService(t, "bufconn", &refusing, nil, nil, dopts)
	defer stop()

	ctx := deadline.NewContext(t.Context(), deadline.New(5*time.Second))
	err = cc.Invoke(ctx, method, wrapperspb.String("x"), new(wrapperspb.StringValue))
	var pb *deadlinegrpc.PushbackError
	require.True(t, errors.As(err, &pb), "%v", err)
	assert.Equal(t, codes.Unavailable, status.Code(err))

	var attempts []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			attempts = append(attempts, s)
		}
	}
	require.Len(t, attempts, 1, "the pushback refused the retry")
	a := attrs(attempts[0])
	assert.Equal(t, "pushback", a[semconv.ErrorTypeKey].AsString())
	assert.Equal(t, "UNAVAILABLE", a[semconv.RPCResponseStatusCodeKey].AsString(), "otelgrpc's status code stays")
}
