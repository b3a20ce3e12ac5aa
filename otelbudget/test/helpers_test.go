package test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/otelbudget"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is an observer on an SDK tracer provider whose spans a recorder
// keeps, and a meter provider read by a manual reader.
type harness struct {
	obs    *otelbudget.Observer
	tp     *sdktrace.TracerProvider
	rec    *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	return &harness{
		obs:    otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(mp)),
		tp:     tp,
		rec:    rec,
		reader: reader,
	}
}

// spans returns the ended spans with the given name, in end order.
func (h *harness) spans(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// requireAllEnded checks that every span started was ended.
func (h *harness) requireAllEnded(t *testing.T) {
	t.Helper()
	require.Equal(t, len(h.rec.Started()), len(h.rec.Ended()), "started spans == ended spans")
	for _, s := range h.rec.Started() {
		require.False(t, s.EndTime().IsZero(), "span %q ended", s.Name())
	}
}

// attrs maps a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// intAttr returns an int attribute, failing if it is absent.
func intAttr(t *testing.T, s sdktrace.ReadOnlySpan, k attribute.Key) int64 {
	t.Helper()
	v, ok := attrs(s)[k]
	require.True(t, ok, "span %q has %s", s.Name(), k)
	require.Equal(t, attribute.INT64, v.Type(), "%s is an int", k)
	return v.AsInt64()
}

// strAttr returns a string attribute, failing if it is absent.
func strAttr(t *testing.T, s sdktrace.ReadOnlySpan, k attribute.Key) string {
	t.Helper()
	v, ok := attrs(s)[k]
	require.True(t, ok, "span %q has %s", s.Name(), k)
	return v.AsString()
}

func hasAttr(s sdktrace.ReadOnlySpan, k attribute.Key) bool {
	_, ok := attrs(s)[k]
	return ok
}

// collect reads the metrics and returns them by instrument name.
func (h *harness) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelbudget.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// assertCountedOnce checks that the harness's metrics count one call and
// attempts attempts: a call observed through several attachments of the
// same observer is recorded once.
func (h *harness) assertCountedOnce(t *testing.T, attempts uint64) {
	t.Helper()
	m := h.collect(t)
	calls := m[otelbudget.MetricCallDuration].Data.(metricdata.Histogram[float64]).DataPoints
	require.Len(t, calls, 1)
	assert.Equal(t, uint64(1), calls[0].Count, "the call is counted once")
	var counted uint64
	for _, dp := range m[otelbudget.MetricAttemptDuration].Data.(metricdata.Histogram[float64]).DataPoints {
		counted += dp.Count
	}
	assert.Equal(t, attempts, counted, "each attempt is counted once")
}
