package test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
)

// A consumer's span shows the budget a queued message brought as an HTTP
// server span shows a request's (inbound, maximum, effective, limit,
// floor), plus the time it waited in the queue; an expired message's span
// shows the refusal.
func TestConsumeSpanAttributes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracer := tp.Tracer("consumer")
	t0 := time.UnixMilli(1_764_600_000_000)
	expiry := strconv.FormatInt(t0.UnixMilli()+2000, 10)

	for _, tc := range []struct {
		after   time.Duration
		refused bool
	}{{500 * time.Millisecond, false}, {3 * time.Second, true}} {
		p, err := budgetprop.New(budgetprop.WithFloor(10*time.Millisecond),
			budgetprop.WithClock(func() time.Time { return t0.Add(tc.after) }))
		require.NoError(t, err)
		// The message as a producer with 2 s left published it.
		msg := propagation.MapCarrier{budgetprop.FieldBudget: "2000", budgetprop.FieldExpiry: expiry}
		ctx, span := tracer.Start(context.Background(), "jobs process", trace.WithSpanKind(trace.SpanKindConsumer))
		err = p.Consume(ctx, msg, func(context.Context) error { return nil })
		span.End()
		assert.Equal(t, tc.refused, err != nil)

		got := rec.Ended()[len(rec.Ended())-1]
		attrs := attribute.NewSet(got.Attributes()...)
		intAttr := func(k attribute.Key) int64 {
			v, ok := attrs.Value(k)
			require.True(t, ok, "%s set", k)
			return v.AsInt64()
		}
		assert.Equal(t, tc.after.Milliseconds(), intAttr(budgetprop.AttrQueueTimeMs))
		assert.Equal(t, int64(30000), intAttr(otelbudget.AttrServerMaxBudgetMs))
		assert.Equal(t, int64(10), intAttr(otelbudget.AttrServerFloorMs))
		if !tc.refused {
			assert.Equal(t, int64(1500), intAttr(otelbudget.AttrServerInboundBudgetMs))
			assert.Equal(t, int64(1500), intAttr(otelbudget.AttrServerBudgetMs))
			v, _ := attrs.Value(otelbudget.AttrServerLimitedBy)
			assert.Equal(t, "header", v.AsString())
			assert.False(t, attrs.HasValue(otelbudget.AttrServerRefused))
			assert.Equal(t, codes.Unset, got.Status().Code)
			continue
		}
		assert.Equal(t, int64(-1000), intAttr(otelbudget.AttrServerInboundBudgetMs), "the inbound budget as the expiry gave it")
		assert.Equal(t, int64(0), intAttr(otelbudget.AttrServerBudgetMs))
		v, _ := attrs.Value(otelbudget.AttrServerRefusal)
		assert.Equal(t, "spent", v.AsString())
		v, _ = attrs.Value(semconv.ErrorTypeKey)
		assert.Equal(t, otelbudget.ErrorTypeServerRefused, v.AsString())
		assert.Equal(t, codes.Error, got.Status().Code)
		assert.Equal(t, "budgetprop: refused: budget spent (0s left after 3s queued)", got.Status().Description)
	}
}

// A server that extracts with otelhttp and the propagator annotates its
// SERVER span with budgetprop.Annotate: the same attributes as
// otelbudgethttp.NewHandler's, here clamped to the maximum.
func TestAnnotateHTTPServerSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p, err := budgetprop.New(budgetprop.WithMaxBudget(time.Second))
	require.NoError(t, err)
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, p)
	srv := httptest.NewServer(otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		budgetprop.Annotate(r.Context())
	}), "api", otelhttp.WithPropagators(prop), otelhttp.WithTracerProvider(tp)))
	defer srv.Close()

	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Deadline-Budget-Ms", "5000")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()

	var server sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		for _, s := range rec.Ended() {
			if s.SpanKind() == trace.SpanKindServer {
				server = s
			}
		}
		return server != nil
	}, 10*time.Second, time.Millisecond)
	attrs := attribute.NewSet(server.Attributes()...)
	for k, want := range map[attribute.Key]any{
		otelbudget.AttrServerInboundBudgetMs: int64(5000),
		otelbudget.AttrServerMaxBudgetMs:     int64(1000),
		otelbudget.AttrServerBudgetMs:        int64(1000),
		otelbudget.AttrServerLimitedBy:       "max",
	} {
		v, ok := attrs.Value(k)
		require.True(t, ok, "%s", k)
		assert.Equal(t, want, v.AsInterface(), "%s", k)
	}
	assert.False(t, attrs.HasValue(budgetprop.AttrQueueTimeMs), "no queue on a direct hop")
}
