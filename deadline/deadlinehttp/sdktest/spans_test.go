package sdktest

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

// TestAttemptSpansAreTheSDKsRequests: with otelbudgethttp's transport as
// the SDK's HTTP client, the one call the SDK makes is one call span, and
// each physical request the provider saw is one CLIENT span under it: the
// attempt span, numbered, with http.request.resend_count on retries and
// the delay a retry-after-ms asked for.
func TestAttemptSpansAreTheSDKsRequests(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	hc := &http.Client{Transport: otelbudgethttp.NewTransport(base, obs, deadlinehttp.WithPolicy(testPolicy()))}

	p := newProvider(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			fail(w, http.StatusTooManyRequests, openAIRateLimited, "retry-after-ms", "30", "x-should-retry", "true")
		case 2:
			fail(w, deadlinehttp.StatusOverloaded, openAIServerError, "x-should-retry", "true")
		default:
			completion(w)
		}
	})
	client := openAIClient(p.URL, hc)
	res, err := client.Chat.Completions.New(budgetCtx(5*time.Second), chatParams())
	require.NoError(t, err)
	assert.Equal(t, "hello", res.Choices[0].Message.Content)
	require.Len(t, p.seen(), 3)

	require.Equal(t, len(rec.Started()), len(rec.Ended()), "every span ended")
	var calls, attempts []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch {
		case s.Name() == "chat":
			calls = append(calls, s)
		case s.SpanKind() == trace.SpanKindClient:
			attempts = append(attempts, s)
		}
	}
	require.Len(t, calls, 1, "one call span for the SDK's one request")
	require.Len(t, attempts, len(p.seen()), "one attempt span per physical request")
	slices.SortFunc(attempts, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	call := calls[0]
	assert.Equal(t, int64(3), attr(call, otelbudget.AttrAttempts).AsInt64())
	for i, s := range attempts {
		assert.Equal(t, call.SpanContext().SpanID(), s.Parent().SpanID(), "attempt %d is a child of the call span", i+1)
		assert.Equal(t, int64(i+1), attr(s, otelbudget.AttrAttemptNumber).AsInt64())
		resend, ok := find(s, semconv.HTTPRequestResendCountKey)
		if i == 0 {
			assert.False(t, ok, "the first request is not a resend")
		} else {
			require.True(t, ok, "attempt %d has http.request.resend_count", i+1)
			assert.Equal(t, int64(i), resend.AsInt64())
		}
	}
	assert.Equal(t, int64(http.StatusTooManyRequests), attr(attempts[0], semconv.HTTPResponseStatusCodeKey).AsInt64())
	assert.Equal(t, int64(deadlinehttp.StatusOverloaded), attr(attempts[1], semconv.HTTPResponseStatusCodeKey).AsInt64())
	assert.Equal(t, int64(http.StatusOK), attr(attempts[2], semconv.HTTPResponseStatusCodeKey).AsInt64())
	assert.Equal(t, int64(30), attr(attempts[0], otelbudget.AttrRetryAfterMs).AsInt64(), "the delay retry-after-ms asked")
	_, asked := find(attempts[1], otelbudget.AttrRetryAfterMs)
	assert.False(t, asked, "the 529 asked for no delay")
}

func find(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	v, _ := find(s, k)
	return v
}
