package test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// retriedCall runs one call with a failed first attempt (5ms) and a
// successful second (20ms) on obs, in a synctest bubble.
func retriedCall(t *testing.T, obs *otelbudget.Observer) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		p := deadline.Policy{Name: "fetch", MaxAttempts: 2, Floor: 20 * time.Millisecond, Backoff: fixed(10 * time.Millisecond), Hooks: obs.Hooks()}
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, failing(1, 5*time.Millisecond, deadline.Retryable(errFlaky)))
		require.NoError(t, err)
	})
}

func collectFrom(t *testing.T, r sdkmetric.Reader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name == otelbudget.ScopeName {
			for _, m := range sm.Metrics {
				out[m.Name] = m
			}
		}
	}
	return out
}

// TestDurationBuckets: every duration histogram advises the documented
// boundaries, 1 ms to 30 s.
func TestDurationBuckets(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	obs := otelbudget.New(otelbudget.WithTracerProvider(tracenoop.NewTracerProvider()),
		otelbudget.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	retriedCall(t, obs)
	m := collectFrom(t, reader)
	want := []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	names := otelbudget.DurationInstruments()
	assert.Equal(t, []string{otelbudget.MetricCallDuration, otelbudget.MetricAttemptDuration, otelbudget.MetricCallSlack}, names)
	for _, name := range names {
		require.Contains(t, m, name)
		assert.Equal(t, "s", m[name].Unit, name)
		h, ok := m[name].Data.(metricdata.Histogram[float64])
		require.True(t, ok, "%s is an explicit-bucket histogram by default", name)
		require.NotEmpty(t, h.DataPoints)
		for _, dp := range h.DataPoints {
			assert.Equal(t, want, dp.Bounds, name)
		}
	}
	names[0] = "changed"
	assert.Equal(t, otelbudget.MetricCallDuration, otelbudget.DurationInstruments()[0], "a new slice every call")
}

// TestExponentialHistogramView: the View the docs give turns the duration
// histograms into base-2 exponential histograms, attributes kept.
func TestExponentialHistogramView(t *testing.T) {
	exp := sdkmetric.Stream{Aggregation: sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}}
	for _, tt := range []struct {
		name  string
		views []sdkmetric.View
		exp   []string // instruments that must be exponential
	}{
		{
			name:  "pattern deadline.*.duration",
			views: []sdkmetric.View{sdkmetric.NewView(sdkmetric.Instrument{Name: "deadline.*.duration"}, exp)},
			exp:   []string{otelbudget.MetricCallDuration, otelbudget.MetricAttemptDuration},
		},
		{
			name: "one View per DurationInstruments name, in the observer's scope",
			views: func() []sdkmetric.View {
				var vs []sdkmetric.View
				for _, name := range otelbudget.DurationInstruments() {
					vs = append(vs, sdkmetric.NewView(sdkmetric.Instrument{Name: name, Scope: instrumentation.Scope{Name: otelbudget.ScopeName}}, exp))
				}
				return vs
			}(),
			exp: otelbudget.DurationInstruments(),
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithView(tt.views...))
			obs := otelbudget.New(otelbudget.WithTracerProvider(tracenoop.NewTracerProvider()), otelbudget.WithMeterProvider(mp))
			retriedCall(t, obs)
			m := collectFrom(t, reader)
			for _, name := range tt.exp {
				h, ok := m[name].Data.(metricdata.ExponentialHistogram[float64])
				require.True(t, ok, "%s is an exponential histogram, got %T", name, m[name].Data)
				require.NotEmpty(t, h.DataPoints)
				for _, dp := range h.DataPoints {
					step, ok := dp.Attributes.Value(otelbudget.AttrStep)
					assert.True(t, ok, "%s keeps its attributes", name)
					assert.Equal(t, "fetch", step.AsString())
				}
			}
			att := m[otelbudget.MetricAttemptDuration].Data.(metricdata.ExponentialHistogram[float64])
			require.Len(t, att.DataPoints, 2, "one series per ended_by")
			var count uint64
			var sum float64
			for _, dp := range att.DataPoints {
				count += dp.Count
				sum += dp.Sum
			}
			assert.Equal(t, uint64(2), count)
			assert.InDelta(t, 0.005, sum, 1e-9, "5ms, then an attempt that took no time")
			_, explicit := m[otelbudget.MetricCallAttempts].Data.(metricdata.Histogram[int64])
			assert.True(t, explicit, "the View leaves the attempts count alone")
		})
	}
}
