package test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/deadlinebudget/budget/deadline/overload"
	"github.com/deadlinebudget/budget/otelbudget"
)

// gaugeValue returns the one data point of gauge name, with its
// attributes.
func gaugeValue[N int64 | float64](t *testing.T, m map[string]metricdata.Metrics, name string) (N, attribute.Set) {
	t.Helper()
	g, ok := m[name].Data.(metricdata.Gauge[N])
	require.True(t, ok, "%s is a gauge", name)
	require.Len(t, g.DataPoints, 1, name)
	return g.DataPoints[0].Value, g.DataPoints[0].Attributes
}

// TestOverloadGauges: ObserveOverload exports the limit, the calls in
// flight and waiting, the breaker's state (0/1/2 with its name) and the
// throttle's drop probability, read at each collection, labelled with the
// downstream; Unregister stops them. BreakerTransitions counts each
// change of state.
func TestOverloadGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		l, err := overload.NewLimiter(overload.WithFixedLimit(1), overload.WithBacklog(4),
			overload.WithBreaker(overload.WithFailureRatio(1, 2), overload.WithOpenFor(time.Second),
				overload.WithOnTransition(h.obs.BreakerTransitions("search"))))
		require.NoError(t, err)
		th, err := overload.NewThrottle()
		require.NoError(t, err)
		reg, err := h.obs.ObserveOverload("search", l, th)
		require.NoError(t, err)

		held, ok := l.TryAcquire("r")
		require.True(t, ok)
		done := make(chan struct{})
		go func() {
			defer close(done)
			p, err := l.Acquire(context.Background(), "r", time.Time{}, 0)
			if err == nil {
				p.Done(overload.OutcomeFailure)
			}
		}()
		synctest.Wait() // the second call waits
		th.Charge(9)

		m := h.collect(t)
		limit, attrs := gaugeValue[int64](t, m, otelbudget.MetricLimiterLimit)
		assert.Equal(t, int64(1), limit)
		v, _ := attrs.Value(otelbudget.AttrDownstream)
		assert.Equal(t, "search", v.AsString())
		running, _ := gaugeValue[int64](t, m, otelbudget.MetricLimiterInFlight)
		assert.Equal(t, int64(1), running)
		waiting, _ := gaugeValue[int64](t, m, otelbudget.MetricLimiterQueued)
		assert.Equal(t, int64(1), waiting)
		state, attrs := gaugeValue[int64](t, m, otelbudget.MetricBreakerState)
		assert.Equal(t, int64(0), state)
		v, _ = attrs.Value(otelbudget.AttrBreakerState)
		assert.Equal(t, "closed", v.AsString())
		drop, _ := gaugeValue[float64](t, m, otelbudget.MetricThrottleDropProbability)
		assert.InDelta(t, 0.9, drop, 1e-9, "9 refused of 9, (9 − 0) / 10")

		held.Done(overload.OutcomeFailure)
		<-done
		m = h.collect(t)
		state, attrs = gaugeValue[int64](t, m, otelbudget.MetricBreakerState)
		assert.Equal(t, int64(1), state)
		v, _ = attrs.Value(otelbudget.AttrBreakerState)
		assert.Equal(t, "open", v.AsString())
		running, _ = gaugeValue[int64](t, m, otelbudget.MetricLimiterInFlight)
		assert.Zero(t, running)
		tr := m[otelbudget.MetricBreakerTransitions].Data.(metricdata.Sum[int64])
		require.Len(t, tr.DataPoints, 1)
		assert.Equal(t, int64(1), tr.DataPoints[0].Value)
		from, _ := tr.DataPoints[0].Attributes.Value(otelbudget.AttrBreakerFrom)
		to, _ := tr.DataPoints[0].Attributes.Value(otelbudget.AttrBreakerState)
		assert.Equal(t, "closed → open", from.AsString()+" → "+to.AsString())

		require.NoError(t, reg.Unregister())
		m = h.collect(t)
		_, ok = m[otelbudget.MetricLimiterLimit]
		assert.False(t, ok, "unregistered")

		reg, err = h.obs.ObserveOverload("none", nil, nil)
		require.NoError(t, err)
		require.NoError(t, reg.Unregister())
	})
}
