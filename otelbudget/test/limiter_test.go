package test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/overload"
	"github.com/deadlinebudget/budget/otelbudget"
)

// TestLimiterTelemetry: a call the limiter refuses from its queue carries
// the refusal's cause, limit, queue position and wait on its call span,
// its stop reason, verdict and error.type, and counts one limit refusal by
// step, stop reason and verdict; a breaker's refusal says open.
func TestLimiterTelemetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		l, err := overload.NewLimiter(overload.WithFixedLimit(1))
		require.NoError(t, err)
		held, ok := l.TryAcquire("fetch")
		require.True(t, ok)
		p := deadline.Policy{Name: "fetch", MaxAttempts: 1, Floor: 20 * time.Millisecond, Limiter: l, Hooks: h.obs.Hooks()}
		_, err = deadline.Do(context.Background(), deadline.New(300*time.Millisecond), p, func(context.Context, deadline.AttemptInfo) (string, error) {
			return "ok", nil
		})
		require.ErrorIs(t, err, deadline.ErrLimited)
		held.Done(overload.OutcomeSuccess)
		h.requireAllEnded(t)

		calls := h.spans("fetch")
		require.Len(t, calls, 1)
		call := calls[0]
		assert.Equal(t, "queue_timeout", strAttr(t, call, otelbudget.AttrLimitCause))
		assert.Equal(t, int64(1), intAttr(t, call, otelbudget.AttrLimitLimit))
		assert.Equal(t, int64(1), intAttr(t, call, otelbudget.AttrLimitQueuePosition))
		assert.Equal(t, int64(280), intAttr(t, call, otelbudget.AttrLimitWaitedMs), "it waited until only the floor was left")
		assert.Equal(t, "limited", strAttr(t, call, otelbudget.AttrStopReason))
		assert.Equal(t, "downstream_overloaded", strAttr(t, call, otelbudget.AttrVerdict))
		assert.Equal(t, "limited", strAttr(t, call, semconv.ErrorTypeKey))
		assert.Equal(t, codes.Error, call.Status().Code)
		assert.Empty(t, h.spans("fetch attempt"), "no attempt went out")

		bl, err := overload.NewLimiter(overload.WithBreaker(overload.WithFailureRatio(1, 1),
			overload.WithFailureWindow(time.Second), overload.WithOpenFor(time.Second), overload.WithProbes(1, 0)))
		require.NoError(t, err)
		pm, ok := bl.TryAcquire("fetch")
		require.True(t, ok)
		pm.Done(overload.OutcomeFailure)
		p.Limiter = bl
		_, err = deadline.Do(context.Background(), deadline.New(300*time.Millisecond), p, func(context.Context, deadline.AttemptInfo) (string, error) {
			return "ok", nil
		})
		require.ErrorIs(t, err, deadline.ErrDownstreamOpen)
		call = h.spans("fetch")[1]
		assert.Equal(t, "open", strAttr(t, call, otelbudget.AttrLimitCause))
		assert.Equal(t, "downstream_open", strAttr(t, call, otelbudget.AttrStopReason))
		assert.Equal(t, "downstream_open", strAttr(t, call, otelbudget.AttrVerdict))
		assert.False(t, hasAttr(call, otelbudget.AttrLimitQueuePosition))

		m := h.collect(t)
		require.Contains(t, m, otelbudget.MetricLimitRefusals)
		sum := m[otelbudget.MetricLimitRefusals].Data.(metricdata.Sum[int64])
		require.Len(t, sum.DataPoints, 2, "one series per stop reason")
		for _, dp := range sum.DataPoints {
			assert.Equal(t, int64(1), dp.Value)
			step, _ := dp.Attributes.Value(otelbudget.AttrStep)
			assert.Equal(t, "fetch", step.AsString())
		}
	})
}
