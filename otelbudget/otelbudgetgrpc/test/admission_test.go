package test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgrpc"
)

// TestServerSpanLearnedRefusal: an RPC below what its method very likely
// needs is refused with reason "learned", and the SERVER span carries the
// estimate it rests on.
func TestServerSpanLearnedRefusal(t *testing.T) {
	lr := &learn.Recorder{}
	live, err := lr.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 10 * time.Second, MinSamples: 20}, Every: 10})
	require.NoError(t, err)
	for range 30 { // what the method's earlier RPCs took
		lr.Record(method, deadline.EndedCompleted, 2*time.Second, time.Now())
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	sopts, err := otelbudgetgrpc.ServerOptions(otelbudget.New(otelbudget.WithTracerProvider(tp)), []deadlinegrpc.ServerOption{
		deadlinegrpc.WithLearnedAdmission(admission.Learned{Recorder: lr, Estimator: live, Threshold: 0.05})})
	require.NoError(t, err)
	cc, stop := dial(t, "bufconn", sopts, nil)

	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err = cc.Invoke(ctx, method, wrapperspb.String("x"), new(wrapperspb.StringValue), grpc.WaitForReady(true))
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	stop()

	var servers []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindServer {
			servers = append(servers, s)
		}
	}
	require.Len(t, servers, 1)
	a := attrs(servers[0])
	assert.Equal(t, "learned", a[otelbudget.AttrServerRefusal].AsString())
	assert.True(t, a[otelbudget.AttrServerRefused].AsBool())
	assert.Zero(t, a[otelbudget.AttrServerCompletionProbability].AsFloat64())
	assert.Equal(t, int64(30), a[otelbudget.AttrServerCompletionSamples].AsInt64())
	assert.NotContains(t, a, otelbudget.AttrServerQueueWaitMs)
}
