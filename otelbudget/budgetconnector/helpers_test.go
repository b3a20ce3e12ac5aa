package budgetconnector

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
)

var t0 = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

// sample is one attempt span to send.
type sample struct {
	service, step string
	ended         deadline.EndedBy
	d             time.Duration // the span's length
	granted       time.Duration // 0: no deadline.attempt.granted_ms
	end           time.Time
}

// genSamples draws n attempts over two services and three steps: a
// log-normal latency, 2% errors, a 100ms ceiling cutting the slow ones.
func genSamples(n int, seed uint64) []sample {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	steps := []struct {
		service, step string
		median        time.Duration
	}{{"checkout", "fetch", 50 * time.Millisecond}, {"checkout", "search", 20 * time.Millisecond}, {"search", "extract", 30 * time.Millisecond}}
	out := make([]sample, 0, n)
	for i := range n {
		st := steps[i%len(steps)]
		d := time.Duration(float64(st.median) * math.Exp(0.45*rng.NormFloat64()))
		s := sample{service: st.service, step: st.step, ended: deadline.EndedCompleted, d: d, end: t0.Add(time.Duration(i) * time.Millisecond)}
		switch {
		case d >= 100*time.Millisecond:
			s.ended, s.d, s.granted = deadline.EndedAttemptTimeout, 100*time.Millisecond+time.Duration(rng.IntN(3000))*time.Microsecond, 100*time.Millisecond
		case rng.Float64() < 0.02:
			s.ended = deadline.EndedError
		case rng.Float64() < 0.01:
			s.ended, s.granted = deadline.EndedDeadline, d.Truncate(time.Millisecond)
		}
		out = append(out, s)
	}
	return out
}

// tracesOf puts the samples in spans, a resource per service and per
// batch of 50.
func tracesOf(samples []sample) ptrace.Traces {
	td := ptrace.NewTraces()
	var rs ptrace.ResourceSpans
	var spans ptrace.SpanSlice
	last := ""
	for i, s := range samples {
		if s.service != last || i%50 == 0 {
			rs = td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", s.service)
			spans = rs.ScopeSpans().AppendEmpty().Spans()
			last = s.service
		}
		sp := spans.AppendEmpty()
		sp.SetName(s.step + " attempt")
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(s.end.Add(-s.d)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(s.end))
		a := sp.Attributes()
		a.PutStr(string(otelbudget.AttrStep), s.step)
		a.PutInt(string(otelbudget.AttrAttemptNumber), 1)
		a.PutStr(string(otelbudget.AttrAttemptEndedBy), s.ended.String())
		if s.granted > 0 {
			a.PutInt(string(otelbudget.AttrAttemptGrantedMs), s.granted.Milliseconds())
		}
	}
	return td
}

// learnOf records the samples with learn itself: the reference.
func learnOf(samples []sample) map[key]*learn.Histogram {
	out := map[key]*learn.Histogram{}
	for _, s := range samples {
		k := key{s.service, s.step}
		if out[k] == nil {
			out[k] = &learn.Histogram{}
		}
		d := s.d
		if s.granted > 0 && (s.ended == deadline.EndedAttemptTimeout || s.ended == deadline.EndedDeadline) {
			d = s.granted
		}
		out[k].Add(s.ended, d, s.end)
	}
	return out
}

// fakeClock is a test's clock: Now is set by hand, Tick sends a tick to
// the export loop.
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	tick chan time.Time
}

func newFakeClock(now time.Time) *fakeClock { return &fakeClock{now: now, tick: make(chan time.Time)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Add(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fakeClock) Ticker(time.Duration) (<-chan time.Time, func()) { return f.tick, func() {} }

// newTestConnector creates a started connector whose exports go to sink;
// it is shut down at the end of the test. Its clock is a fakeClock at a
// day after t0.
func newTestConnector(t *testing.T, cfg *Config, sink *consumertest.MetricsSink) *budgetConnector {
	t.Helper()
	return newTestConnectorAt(t, cfg, sink, newFakeClock(t0.Add(24*time.Hour)))
}

// newTestConnectorAt is newTestConnector with the clock clk.
func newTestConnectorAt(t *testing.T, cfg *Config, sink *consumertest.MetricsSink, clk clock) *budgetConnector {
	t.Helper()
	f := NewFactory()
	if cfg == nil {
		cfg = f.CreateDefaultConfig().(*Config)
		cfg.ExportInterval, cfg.Window = time.Hour, 4*time.Hour // exports by hand
	}
	require.NoError(t, cfg.Validate())
	set := connectortest.NewNopSettings(componentType)
	set.ID = component.NewIDWithName(componentType, t.Name())
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set.TelemetrySettings = tel.NewTelemetrySettings()
	tc, err := f.CreateTracesToMetrics(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	mc, err := f.CreateMetricsToMetrics(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.Same(t, tc.(*shared).Unwrap(), mc.(*shared).Unwrap(), "one instance for both pipelines")
	tc.(*shared).Unwrap().clock = clk
	telemetries.Store(tc.(*shared).Unwrap(), tel)
	require.NoError(t, tc.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, mc.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() {
		require.NoError(t, tc.Shutdown(context.Background()))
		require.NoError(t, mc.Shutdown(context.Background()))
	})
	return tc.(*shared).Unwrap()
}

// histograms returns the connector's histograms, by key.
func histograms(t *testing.T, c *budgetConnector) map[key]*learn.Histogram {
	t.Helper()
	c.exportMu.Lock()
	defer c.exportMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[key]*learn.Histogram{}
	for k, e := range c.store.entries {
		h := &learn.Histogram{}
		var w hist
		e.sum(&w)
		require.NoError(t, w.histogram(h), "%v", k)
		out[k] = h
	}
	return out
}

// exportTo exports c once and returns what it sent.
func exportOnce(t *testing.T, c *budgetConnector, sink *consumertest.MetricsSink) pmetric.Metrics {
	t.Helper()
	sink.Reset()
	require.NoError(t, c.export(context.Background()))
	all := sink.AllMetrics()
	require.LessOrEqual(t, len(all), 1)
	if len(all) == 0 { // nothing to export: no keys
		return pmetric.NewMetrics()
	}
	return all[0]
}

// gauges returns the values of a gauge by service and step.
func gauges(md pmetric.Metrics, name string) map[key]float64 {
	out := map[key]float64{}
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		svc := serviceName(rms.At(i).Resource())
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				m := ms.At(k)
				if m.Name() != name || m.Type() != pmetric.MetricTypeGauge {
					continue
				}
				dps := m.Gauge().DataPoints()
				for p := range dps.Len() {
					dp := dps.At(p)
					step, _ := dp.Attributes().Get(string(otelbudget.AttrStep))
					v := dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
					out[key{svc, step.Str()}] = v
				}
			}
		}
	}
	return out
}

// telemetries holds each test connector's telemetry.
var telemetries sync.Map // *budgetConnector → *componenttest.Telemetry

// counter returns one of the connector's telemetry metrics (an Int64 sum)
// by outcome ("" for none); a metric never recorded reads as empty.
func counter(t *testing.T, c *budgetConnector, name string) map[string]int64 {
	t.Helper()
	tel, _ := telemetries.Load(c)
	out := map[string]int64{}
	m, err := tel.(*componenttest.Telemetry).GetMetric(name)
	if err != nil {
		return out
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T", name, m.Data)
	for _, dp := range sum.DataPoints {
		o, _ := dp.Attributes.Value(AttrOutcome)
		out[o.AsString()] += dp.Value
	}
	return out
}

var _ connector.Traces = (*budgetConnector)(nil)

// sameHist tells whether two histograms are equal, without printing 17 KiB
// of buckets when they are not: the message says what differs.
func sameHist(a, b *learn.Histogram) (bool, string) {
	ac, ax := a.Series()
	bc, bx := b.Series()
	type view struct {
		Samples, Successes, CeilingTimeouts, DeadlineCuts uint64
		First, Last                                       time.Time
		Max, MaxCensored                                  time.Duration
		C, X                                              learn.Series
	}
	va := view{a.Samples, a.Successes, a.CeilingTimeouts, a.DeadlineCuts, a.First, a.Last, a.Max, a.MaxCensored, ac, ax}
	vb := view{b.Samples, b.Successes, b.CeilingTimeouts, b.DeadlineCuts, b.First, b.Last, b.Max, b.MaxCensored, bc, bx}
	if reflect.DeepEqual(va, vb) {
		return true, ""
	}
	return false, fmt.Sprintf("%+v\n!=\n%+v", va, vb)
}

// requireSameHists checks two sets of histograms are equal.
func requireSameHists(t *testing.T, want, got map[key]*learn.Histogram) {
	t.Helper()
	require.Len(t, got, len(want))
	for k, w := range want {
		require.NotNil(t, got[k], "%v", k)
		ok, msg := sameHist(w, got[k])
		require.True(t, ok, "%v: %s", k, msg)
	}
}

type connectorSettings = connector.Settings

func connectorSettingsFor(name string) connector.Settings {
	set := connectortest.NewNopSettings(componentType)
	set.ID = component.NewIDWithName(componentType, name)
	return set
}
