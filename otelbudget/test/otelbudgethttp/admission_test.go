package otelbudgethttp_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
)

// TestServerSpanLearnedRefusal: a request below what its route very
// likely needs is refused with reason "learned"; the SERVER span carries
// the estimate it rests on and says so in its description; the refusal is
// counted under its reason.
func TestServerSpanLearnedRefusal(t *testing.T) {
	rec := &learn.Recorder{}
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 10 * time.Second, MinSamples: 20}, Every: 10})
	require.NoError(t, err)
	for range 30 { // what the route's earlier requests took
		rec.Record("api", deadline.EndedCompleted, 100*time.Millisecond, time.Now())
	}
	h := newHarness(t)
	s := newSite(t, h, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") },
		deadlinehttp.WithLearnedAdmission(admission.Learned{Recorder: rec, Estimator: live, Threshold: 0.05}),
		deadlinehttp.WithRoute(func(*http.Request) string { return "api" }))
	assert.Equal(t, http.StatusGatewayTimeout, s.get(t, h, context.Background(), "50"))
	s.wait(t)
	h.requireAllEnded(t)

	span := h.serverSpan(t)
	a := attrs(span)
	assert.Equal(t, attribute.StringValue("learned"), a[otelbudget.AttrServerRefusal])
	assert.Equal(t, attribute.BoolValue(true), a[otelbudget.AttrServerRefused])
	assert.Equal(t, attribute.Float64Value(0), a[otelbudget.AttrServerCompletionProbability])
	assert.Equal(t, attribute.Int64Value(30), a[otelbudget.AttrServerCompletionSamples])
	assert.Equal(t, attribute.StringValue(otelbudget.ErrorTypeServerRefused), a[semconv.ErrorTypeKey])
	assert.NotContains(t, a, otelbudget.AttrServerQueueWaitMs)
	assert.NotContains(t, a, otelbudget.AttrServerProbe)
	assert.Equal(t, sdktrace.Status{Code: codes.Error,
		Description: "budget 50ms below what the route very likely needs: it completes within it 0.0% of the time (30 recent samples)"}, span.Status())
	assert.Zero(t, s.called.Load())
	assert.Equal(t, map[string]int64{"learned": 1}, h.serverMetrics(t).refusals)
}

// TestServerSpanQueueRefusals: with one slot taken, a request that finds
// the backlog full is refused "queue_full" (503, error.type queue_full),
// and one that waits until only the floor is left is refused
// "queue_timeout" with how long it waited.
func TestServerSpanQueueRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backlog int
		status  int
		refusal string
		errType string
		waited  bool
	}{
		{"backlog full", 0, http.StatusServiceUnavailable, "queue_full", otelbudget.ErrorTypeServerQueueFull, false},
		{"waited until it could not finish", 1, http.StatusGatewayTimeout, "queue_timeout", otelbudget.ErrorTypeServerRefused, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			started, release := make(chan struct{}), make(chan struct{})
			s := newSite(t, h, func(w http.ResponseWriter, r *http.Request) {
				close(started)
				<-release
			}, deadlinehttp.WithAdmissionQueue(1, tc.backlog), deadlinehttp.WithFloor(20*time.Millisecond))
			holder := make(chan int, 1)
			go func() { holder <- s.get(t, h, context.Background(), "10000") }()
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the first request did not start")
			}

			assert.Equal(t, tc.status, s.get(t, h, context.Background(), "100"))
			s.wait(t)
			span := h.serverSpan(t) // the refused one: the holder's is still open
			a := attrs(span)
			assert.Equal(t, attribute.StringValue(tc.refusal), a[otelbudget.AttrServerRefusal])
			assert.Equal(t, attribute.StringValue(tc.errType), a[semconv.ErrorTypeKey])
			if tc.waited {
				assert.Positive(t, a[otelbudget.AttrServerQueueWaitMs].AsInt64())
			} else {
				assert.NotContains(t, a, otelbudget.AttrServerQueueWaitMs)
			}
			assert.Equal(t, codes.Error, span.Status().Code)
			assert.Equal(t, map[string]int64{tc.refusal: 1}, h.serverMetrics(t).refusals)

			close(release)
			assert.Equal(t, http.StatusOK, <-holder)
			s.wait(t)
			h.requireAllEnded(t)
			assert.Equal(t, int32(1), s.called.Load())
		})
	}
}
