package test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// TestRetryBudgetTelemetry: an allowed retry puts the budget's balance on
// the attempt span and the backoff event; a denied one marks the attempt
// and the call span, sets the verdict and counts a denial by step.
func TestRetryBudgetTelemetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		b, err := deadline.NewRetryBudget(deadline.WithRetryRatio(0), deadline.WithMinRetryRate(1), deadline.WithRetryWindow(time.Second))
		require.NoError(t, err)
		p := deadline.Policy{Name: "fetch", MaxAttempts: 3, RetryBudget: b, Hooks: h.obs.Hooks()}
		fail := func(context.Context, deadline.AttemptInfo) (string, error) {
			time.Sleep(10 * time.Millisecond)
			return "", deadline.Retryable(errors.New("503"))
		}
		_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, fail)
		require.ErrorIs(t, err, deadline.ErrRetryBudgetExhausted)
		h.requireAllEnded(t)

		attempts := h.spans("fetch attempt")
		require.Len(t, attempts, 2, "one retry allowed, the second denied")
		first, second := attempts[0], attempts[1]
		assert.False(t, attrs(first)[otelbudget.AttrRetryBudgetDenied].AsBool())
		assert.Equal(t, int64(0), intAttr(t, first, otelbudget.AttrRetryBudgetBalance))
		assert.True(t, attrs(second)[otelbudget.AttrRetryBudgetDenied].AsBool())
		assert.Equal(t, int64(0), intAttr(t, second, otelbudget.AttrRetryBudgetBalance))

		calls := h.spans("fetch")
		require.Len(t, calls, 1)
		call := calls[0]
		assert.True(t, attrs(call)[otelbudget.AttrRetryBudgetDenied].AsBool())
		assert.Equal(t, int64(0), intAttr(t, call, otelbudget.AttrRetryBudgetBalance))
		assert.Equal(t, "retry_budget_exhausted", strAttr(t, call, otelbudget.AttrStopReason))
		assert.Equal(t, "retries_throttled", strAttr(t, call, otelbudget.AttrVerdict))
		assert.Equal(t, "retry_budget_exhausted", strAttr(t, call, semconv.ErrorTypeKey))
		assert.Equal(t, codes.Error, call.Status().Code)
		var denied []bool
		for _, e := range call.Events() {
			for _, kv := range e.Attributes {
				if kv.Key == otelbudget.AttrRetryBudgetDenied {
					denied = append(denied, kv.Value.AsBool())
				}
			}
		}
		assert.Equal(t, []bool{false, true}, denied, "each backoff event says what the budget answered")

		// A call with no budget sets none of the keys.
		p.RetryBudget = nil
		p.MaxAttempts = 2
		_, err = deadline.Do(context.Background(), deadline.New(time.Second), p, fail)
		require.Error(t, err)
		for _, s := range h.rec.Ended()[len(h.rec.Ended())-2:] {
			assert.False(t, hasAttr(s, otelbudget.AttrRetryBudgetDenied), "span %s", s.Name())
			assert.False(t, hasAttr(s, otelbudget.AttrRetryBudgetBalance), "span %s", s.Name())
		}

		m := h.collect(t)
		require.Contains(t, m, otelbudget.MetricRetryBudgetDenials)
		assert.Equal(t, "{denial}", m[otelbudget.MetricRetryBudgetDenials].Unit)
		sum := m[otelbudget.MetricRetryBudgetDenials].Data.(metricdata.Sum[int64])
		assert.True(t, sum.IsMonotonic)
		require.Len(t, sum.DataPoints, 1)
		assert.Equal(t, int64(1), sum.DataPoints[0].Value)
		assert.Equal(t, attribute.NewSet(otelbudget.AttrStep.String("fetch")), sum.DataPoints[0].Attributes)
	})
}
