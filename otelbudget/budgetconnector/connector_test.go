package budgetconnector

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, Type, f.Type().String())
	assert.Equal(t, metadata.Type.String(), Type)
	assert.Equal(t, metadata.ExtensionType.String(), ExtensionType)
	assert.Equal(t, metadata.ScopeName, ScopeName)
	assert.Equal(t, component.StabilityLevelAlpha, f.TracesToMetricsStability())
	assert.Equal(t, component.StabilityLevelAlpha, f.MetricsToMetricsStability())
	cfg := f.CreateDefaultConfig()
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, cfg.(*Config).Validate())
	assert.Equal(t, DefaultExportInterval, cfg.(*Config).ExportInterval)

	// Another connector type is not made.
	_, err := f.CreateTracesToTraces(context.Background(), connectortest.NewNopSettings(componentType), cfg, consumertest.NewNop())
	require.Error(t, err)

	x := NewExtensionFactory()
	assert.Equal(t, ExtensionType, x.Type().String())
	require.NoError(t, componenttest.CheckConfigStruct(x.CreateDefaultConfig()))
	require.NoError(t, x.CreateDefaultConfig().(*ExtensionConfig).Validate())
}

// The configuration as a Collector's YAML gives it.
func TestConfigUnmarshal(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	conf := confmap.NewFromStringMap(map[string]any{
		"export_interval": "10s",
		"max_keys":        500,
		"suggest":         map[string]any{"quantile": 0.95, "margin": 1.5, "max_ceiling": "2s", "min_samples": 200},
		"opamp":           "deadlinebudget_opamp",
		"plans": []any{map[string]any{"name": "agent", "service": "checkout", "target": 0.95, "steps": []any{
			map[string]any{"step": "search", "max_attempts": 2, "floor": "20ms"},
			map[string]any{"step": "fetch", "max_attempts": 3, "backoff_base": "10ms", "backoff_max": "100ms"},
		}}},
	})
	require.NoError(t, conf.Unmarshal(cfg))
	require.NoError(t, cfg.Validate())
	assert.Equal(t, 10*time.Second, cfg.ExportInterval)
	assert.Equal(t, 500, cfg.MaxKeys)
	assert.Equal(t, 2*time.Second, cfg.Suggest.MaxCeiling)
	assert.Equal(t, "deadlinebudget_opamp", cfg.OpAMP.String())
	assert.Equal(t, 20*time.Millisecond, cfg.Plans[0].Steps[0].Floor)
	assert.Equal(t, 100*time.Millisecond, cfg.Plans[0].Steps[1].BackoffMax)

	// A key the connector does not know is refused, as the Collector does.
	require.Error(t, confmap.NewFromStringMap(map[string]any{"export_intervl": "10s"}).Unmarshal(cfg))
}

func TestConfigValidate(t *testing.T) {
	base := func() *Config {
		c := NewFactory().CreateDefaultConfig().(*Config)
		c.Plans = []PlanConfig{{Name: "p", Service: "s", Steps: []PlanStep{{Step: "a", MaxAttempts: 1}}}}
		return c
	}
	for _, tc := range []struct {
		field string
		mod   func(*Config)
	}{
		{"export_interval", func(c *Config) { c.ExportInterval = 0 }},
		{"max_keys", func(c *Config) { c.MaxKeys = 0 }},
		{"suggest", func(c *Config) { c.Suggest.Quantile = 1 }},
		{"suggest", func(c *Config) { c.Suggest.Margin = 0.5 }},
		{"suggest", func(c *Config) { c.Suggest.MinCeiling, c.Suggest.MaxCeiling = time.Second, time.Millisecond }},
		{"plans[0].name", func(c *Config) { c.Plans[0].Name = "" }},
		{"plans[1].name", func(c *Config) { c.Plans = append(c.Plans, c.Plans[0]) }},
		{"plans[0].service", func(c *Config) { c.Plans[0].Service = "" }},
		{"plans[0].target", func(c *Config) { c.Plans[0].Target = 1.5 }},
		{"plans[0].steps", func(c *Config) { c.Plans[0].Steps = nil }},
		{"plans[0].steps[0].step", func(c *Config) { c.Plans[0].Steps[0].Step = "" }},
		{"plans[0].steps[0]", func(c *Config) { c.Plans[0].Steps[0].MaxAttempts = 0 }},
		{"plans[0].steps[0]", func(c *Config) { c.Plans[0].Steps[0].BackoffBase = time.Second }},
	} {
		c := base()
		require.NoError(t, c.Validate())
		tc.mod(c)
		err := c.Validate()
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, tc.field)
		assert.Equal(t, tc.field, ce.Field)
		assert.ErrorIs(t, err, ErrInvalidConfig)
	}
	// Every error is reported, each with its path.
	c := base()
	c.ExportInterval, c.MaxNameLength = 0, 0
	c.Plans[0].Steps[0].Step = ""
	c.Plans = append(c.Plans, PlanConfig{Name: "q", Service: "s", Steps: []PlanStep{{Step: "b", MaxAttempts: 0}}})
	err := c.Validate()
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *ConfigError
		require.ErrorAs(t, e, &ce)
		fields = append(fields, ce.Field)
	}
	assert.Equal(t, []string{"export_interval", "max_name_length", "plans[0].steps[0].step", "plans[1].steps[0]"}, fields)
}

// The connector's histograms are learn's, bucket for bucket: what learn
// records from the same attempts, read by the same span rule.
func TestHistogramsBucketExact(t *testing.T) {
	samples := genSamples(6000, 1)
	c := newTestConnector(t, nil, new(consumertest.MetricsSink))
	require.NoError(t, c.ConsumeTraces(context.Background(), tracesOf(samples)))
	want := learnOf(samples)
	requireSameHists(t, want, histograms(t, c))
	for k, w := range want {
		assert.NotZero(t, w.Censored(), "%v: some attempts cut", k)
	}
}

// Two instances with half the spans each, merged through their exported
// metrics by a third (the gateway tier), give exactly the histograms and
// the suggestions of one instance with all the spans; a fourth tier above
// the gateway too.
func TestMergeExact(t *testing.T) {
	samples := genSamples(9000, 2)
	var a, b []sample
	for i, s := range samples {
		if i%3 == 0 {
			a = append(a, s)
		} else {
			b = append(b, s)
		}
	}
	plan := []PlanConfig{{Name: "checkout", Service: "checkout", Steps: []PlanStep{{Step: "search", MaxAttempts: 2}, {Step: "fetch", MaxAttempts: 3, Floor: 20 * time.Millisecond}}}}
	cfg := func() *Config {
		c := NewFactory().CreateDefaultConfig().(*Config)
		c.ExportInterval, c.Window, c.Plans = time.Hour, 4*time.Hour, plan
		c.Suggest.Quantile = 0.9 // fetch's p99 is hidden by its ceiling
		return c
	}
	sinks := make([]*consumertest.MetricsSink, 5)
	for i := range sinks {
		sinks[i] = new(consumertest.MetricsSink)
	}
	one := newTestConnector(t, cfg(), sinks[0])
	agentA := newTestConnector(t, cfg(), sinks[1])
	agentB := newTestConnector(t, cfg(), sinks[2])
	gateway := newTestConnector(t, cfg(), sinks[3])
	top := newTestConnector(t, cfg(), sinks[4])
	ctx := context.Background()

	// The agents export twice: the deltas add up.
	half := len(a) / 2
	require.NoError(t, agentA.ConsumeTraces(ctx, tracesOf(a[:half])))
	require.NoError(t, agentB.ConsumeTraces(ctx, tracesOf(b)))
	require.NoError(t, gateway.ConsumeMetrics(ctx, exportOnce(t, agentA, sinks[1])))
	require.NoError(t, agentA.ConsumeTraces(ctx, tracesOf(a[half:])))
	require.NoError(t, gateway.ConsumeMetrics(ctx, exportOnce(t, agentA, sinks[1])))
	require.NoError(t, gateway.ConsumeMetrics(ctx, exportOnce(t, agentB, sinks[2])))
	require.NoError(t, gateway.ConsumeMetrics(ctx, exportOnce(t, agentB, sinks[2])), "an export with nothing new adds nothing")
	require.NoError(t, one.ConsumeTraces(ctx, tracesOf(samples)))

	want := histograms(t, one)
	requireSameHists(t, want, histograms(t, gateway))
	gw := exportOnce(t, gateway, sinks[3])
	require.NoError(t, top.ConsumeMetrics(ctx, gw))
	requireSameHists(t, want, histograms(t, top)) // the gateway's own export merges again
	assert.Zero(t, counter(t, gateway, MetricPoints)["rejected"])
	assert.Positive(t, counter(t, top, MetricPoints)["accepted"])
	assert.Zero(t, counter(t, top, MetricPoints)["rejected"])

	ref := exportOnce(t, one, sinks[0])
	for _, name := range []string{MetricCeiling, MetricEstimate, MetricCensoredShare, MetricSamples, MetricWindowStart, MetricWindowEnd} {
		w := gauges(ref, name)
		require.NotEmpty(t, w, name)
		assert.Equal(t, w, gauges(gw, name), name)
	}
	for _, name := range []string{MetricPlanBudget, MetricPlanSuccess} {
		w := planGauge(ref, name)
		require.NotZero(t, w, name)
		assert.Equal(t, w, planGauge(gw, name), name)
	}
	// The suggestions are learn's, from the histograms learn records.
	ceil := gauges(ref, MetricCeiling)
	for k, h := range learnOf(samples) {
		s, err := learn.Suggest(k.step, h, cfg().Suggest.options())
		require.NoError(t, err)
		assert.Equal(t, s.Ceiling.Seconds(), ceil[k], "%v", k)
	}
}

func planGauge(md pmetric.Metrics, name string) float64 {
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for k := range ms.Len() {
			if m := ms.At(k); m.Name() == name {
				return m.Gauge().DataPoints().At(0).DoubleValue()
			}
		}
	}
	return 0
}

// Spans that are not attempt spans are ignored, absurd durations dropped,
// each counted by outcome; the keys are bounded, evictions counted.
func TestBadInput(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.ExportInterval, cfg.Window, cfg.MaxKeys = time.Hour, 4*time.Hour, 3
	c := newTestConnector(t, cfg, sink)
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	add := func(d time.Duration, attrs map[string]any) {
		sp := spans.AppendEmpty()
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(d)))
		require.NoError(t, sp.Attributes().FromRaw(attrs))
	}
	step, ended := string(otelbudget.AttrStep), string(otelbudget.AttrAttemptEndedBy)
	add(time.Millisecond, map[string]any{"http.request.method": "GET"})                                                                       // not ours
	add(time.Millisecond, map[string]any{step: "fetch", "deadline.verdict": "ok"})                                                            // a call span
	add(time.Millisecond, map[string]any{step: "", ended: "completed"})                                                                       // unnamed
	add(time.Millisecond, map[string]any{step: 7, ended: "completed"})                                                                        // wrong type
	add(time.Millisecond, map[string]any{step: "fetch", ended: "canceled"})                                                                   // not recorded
	add(-time.Millisecond, map[string]any{step: "fetch", ended: "completed"})                                                                 // negative
	add(25*time.Hour, map[string]any{step: "fetch", ended: "completed"})                                                                      // absurd
	add(time.Millisecond, map[string]any{step: "fetch", ended: "completed"})                                                                  // accepted
	add(time.Millisecond, map[string]any{step: "fetch", ended: "attempt_timeout", string(otelbudget.AttrAttemptGrantedMs): int64(1<<58 + 1)}) // a wrapping grant
	add(time.Millisecond, map[string]any{step: strings.Repeat("s", 1<<20), ended: "completed"})                                               // a 1 MiB step
	future := spans.AppendEmpty()                                                                                                             // ends after now + max_clock_skew
	future.SetStartTimestamp(pcommon.NewTimestampFromTime(t0.Add(48 * time.Hour)))
	future.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(48*time.Hour + time.Millisecond)))
	require.NoError(t, future.Attributes().FromRaw(map[string]any{step: "fetch", ended: "completed"}))
	wrapped := spans.AppendEmpty() // timestamps past 2^63 ns: before 1970 once read
	wrapped.SetStartTimestamp(pcommon.Timestamp(1<<63 + 1))
	wrapped.SetEndTimestamp(pcommon.Timestamp(1<<63 + 1e6))
	require.NoError(t, wrapped.Attributes().FromRaw(map[string]any{step: "fetch", ended: "completed"}))
	for i := range 5 { // a step per request
		add(time.Millisecond, map[string]any{step: "minted-" + string(rune('a'+i)), ended: "completed"})
	}
	long := td.ResourceSpans().AppendEmpty() // a 1 MiB service.name: its spans dropped
	long.Resource().Attributes().PutStr("service.name", strings.Repeat("x", 1<<20))
	require.NoError(t, long.ScopeSpans().AppendEmpty().Spans().AppendEmpty().Attributes().FromRaw(map[string]any{step: "fetch", ended: "completed"}))
	require.NoError(t, c.ConsumeTraces(context.Background(), td))

	// Metrics of ours that are not what the connector exports are refused.
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	cum := ms.AppendEmpty()
	cum.SetName(MetricCompleted)
	cum.SetUnit("ns")
	cum.SetEmptyExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	cum.ExponentialHistogram().DataPoints().AppendEmpty().Attributes().PutStr(step, "x")
	scale := ms.AppendEmpty()
	scale.SetName(MetricCensored)
	scale.SetUnit("ns")
	scale.SetEmptyExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := scale.ExponentialHistogram().DataPoints().AppendEmpty()
	dp.Attributes().PutStr(step, "x")
	dp.SetScale(3)
	count := ms.AppendEmpty()
	count.SetName(MetricAttempts)
	count.SetEmptySum().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	cp := count.Sum().DataPoints().AppendEmpty()
	cp.Attributes().PutStr(step, "x")
	cp.Attributes().PutStr(ended, "exploded")
	cp.SetIntValue(3)
	other := ms.AppendEmpty()
	other.SetName("http.server.request.duration") // not ours: ignored, not counted
	other.SetEmptyGauge().DataPoints().AppendEmpty()
	require.NoError(t, c.ConsumeMetrics(context.Background(), md))

	out := exportOnce(t, c, sink)
	assert.Equal(t, map[string]int64{"accepted": 6, "not_attempt": 2, "unnamed_step": 1, "attribute_type": 1, "not_recorded": 1, "bad_duration": 3,
		"name_too_long": 2, "bad_time": 2}, counter(t, c, MetricSpans))
	assert.Equal(t, map[string]int64{"rejected": 3}, counter(t, c, MetricPoints))
	assert.Equal(t, map[string]int64{"": 3}, counter(t, c, MetricEvicted), "fetch and 5 minted steps in 3 keys")
	assert.Equal(t, map[string]int64{"": 3}, counter(t, c, MetricKeys))
	for _, name := range []string{MetricSpans, MetricPoints, MetricKeys} {
		assert.NotContains(t, names(out), name, "the connector's own counters are not in the data it exports")
	}
	got := histograms(t, c)
	assert.Len(t, got, 3)
	assert.Contains(t, got, key{"svc", "minted-e"}, "the most recent stay")
	assert.NotContains(t, got, key{"svc", "fetch"}, "the least recently updated went first")
}

// Start fails when the extension named is not there or is not ours.
func TestStartNeedsTheExtension(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	id := component.MustNewID(ExtensionType)
	cfg.OpAMP = &id
	set := connectortest.NewNopSettings(componentType)
	c, err := f.CreateTracesToMetrics(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	err = c.Start(context.Background(), componenttest.NewNopHost())
	require.ErrorIs(t, err, ErrNoPublisher)
	assert.Contains(t, err.Error(), "deadlinebudget_opamp")
	require.NoError(t, c.Shutdown(context.Background()))

	c, err = f.CreateTracesToMetrics(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	err = c.Start(context.Background(), hostWith{id: id, ext: componenttest.NewNopHost()})
	require.ErrorIs(t, err, ErrNoPublisher)
	require.NoError(t, c.Shutdown(context.Background()))
}

// hostWith is a host with one extension.
type hostWith struct {
	id  component.ID
	ext any
}

func (h hostWith) GetExtensions() map[component.ID]component.Component {
	c, _ := h.ext.(component.Component)
	if c == nil {
		c = nopComponent{}
	}
	return map[component.ID]component.Component{h.id: c}
}

type nopComponent struct{}

func (nopComponent) Start(context.Context, component.Host) error { return nil }
func (nopComponent) Shutdown(context.Context) error              { return nil }

// The export loop exports at each tick of the connector's clock (injected:
// no real time passes in the test).
func TestExportLoop(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	clk := newFakeClock(t0.Add(time.Hour))
	c := newTestConnectorAt(t, cfg, sink, clk)
	require.NoError(t, c.ConsumeTraces(context.Background(), tracesOf(genSamples(300, 3))))
	clk.Add(cfg.ExportInterval)
	clk.tick <- clk.Now()
	clk.tick <- clk.Now() // received once the first export is done
	all := sink.AllMetrics()
	require.NotEmpty(t, all, "the first tick's export is in")
	assert.Len(t, gauges(all[0], MetricSamples), 3)
	assert.Len(t, gauges(all[0], MetricFirst), 3, "with the deltas")
}

// A key's points in one export are applied together or refused together:
// a stray count without its histograms, a histogram at another scale, an
// export that lacks one of its metrics, a last_sample of MaxInt64 ms, a
// 1 MiB name, a duplicate point: each refuses the key's points of that
// export (counted), changes nothing, and is not exported again; the key
// takes the next consistent export as if the bad ones never came.
func TestMergeRefusesPartialKeys(t *testing.T) {
	ctx := context.Background()
	var samples []sample // one key, checkout's fetch, whose points the hostile exports break
	for _, s := range genSamples(9000, 4) {
		if s.step == "fetch" {
			samples = append(samples, s)
		}
	}
	agentSink, gwSink, refSink := new(consumertest.MetricsSink), new(consumertest.MetricsSink), new(consumertest.MetricsSink)
	cfg := func() *Config {
		c := NewFactory().CreateDefaultConfig().(*Config)
		c.ExportInterval, c.Window = time.Hour, 4*time.Hour
		c.Suggest.Quantile = 0.9 // fetch's p99 is hidden by its ceiling
		return c
	}
	agent := newTestConnector(t, cfg(), agentSink)
	require.NoError(t, agent.ConsumeTraces(ctx, tracesOf(samples)))
	good := exportOnce(t, agent, agentSink)
	gateway := newTestConnector(t, cfg(), gwSink)

	stepAttr := string(otelbudget.AttrStep)
	// mutate returns a copy of good with f applied to each of checkout's
	// metrics of the given name.
	mutate := func(name string, f func(ms pmetric.MetricSlice, i int)) pmetric.Metrics {
		md := pmetric.NewMetrics()
		good.CopyTo(md)
		rms := md.ResourceMetrics()
		for i := range rms.Len() {
			if serviceName(rms.At(i).Resource()) != "checkout" {
				continue
			}
			ms := rms.At(i).ScopeMetrics().At(0).Metrics()
			for k := ms.Len() - 1; k >= 0; k-- {
				if ms.At(k).Name() == name {
					f(ms, k)
				}
			}
		}
		return md
	}
	stray := pmetric.NewMetrics()
	rm := stray.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "checkout")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(MetricAttempts)
	m.SetEmptySum().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := m.Sum().DataPoints().AppendEmpty()
	dp.Attributes().PutStr(stepAttr, "fetch")
	dp.Attributes().PutStr(string(otelbudget.AttrAttemptEndedBy), "completed")
	dp.SetIntValue(1)

	longName := pmetric.NewMetrics()
	good.CopyTo(longName)
	longName.ResourceMetrics().At(0).Resource().Attributes().PutStr("service.name", strings.Repeat("x", 1<<20))

	hostile := []struct {
		name string
		md   pmetric.Metrics
	}{
		{"a stray attempts point", stray},
		{"a histogram at scale 3", mutate(MetricCensored, func(ms pmetric.MetricSlice, i int) {
			dps := ms.At(i).ExponentialHistogram().DataPoints()
			for p := range dps.Len() {
				dps.At(p).SetScale(3)
			}
		})},
		{"an export without last_sample", mutate(MetricLast, func(ms pmetric.MetricSlice, i int) {
			ms.RemoveIf(func(m pmetric.Metric) bool { return m.Name() == MetricLast })
		})},
		{"last_sample MaxInt64 ms", mutate(MetricLast, func(ms pmetric.MetricSlice, i int) {
			dps := ms.At(i).Gauge().DataPoints()
			for p := range dps.Len() {
				dps.At(p).SetIntValue(math.MaxInt64)
			}
		})},
		{"counts that do not add up", mutate(MetricAttempts, func(ms pmetric.MetricSlice, i int) {
			dps := ms.At(i).Sum().DataPoints()
			dps.At(0).SetIntValue(dps.At(0).IntValue() + 1)
		})},
		{"a histogram twice", mutate(MetricCompleted, func(ms pmetric.MetricSlice, i int) {
			ms.At(i).ExponentialHistogram().DataPoints().At(0).CopyTo(ms.At(i).ExponentialHistogram().DataPoints().AppendEmpty())
		})},
		{"a 1 MiB service.name", longName},
	}
	for _, h := range hostile {
		before := counter(t, gateway, MetricPoints)["rejected"]
		require.NoError(t, gateway.ConsumeMetrics(ctx, h.md), h.name)
		assert.Empty(t, histograms(t, gateway), h.name)
		t.Logf("%s: %d points rejected, its key refused", h.name, counter(t, gateway, MetricPoints)["rejected"]-before)
	}
	out := exportOnce(t, gateway, gwSink)
	assert.Empty(t, gauges(out, MetricFirst), "nothing refused is exported again")
	assert.Positive(t, counter(t, gateway, MetricPoints)["rejected"])
	assert.Zero(t, counter(t, gateway, MetricPoints)["accepted"])
	refused := counter(t, gateway, MetricRefusedKeys)[""]
	assert.Equal(t, int64(len(hostile)), refused, "each hostile export refused its key")

	// The next consistent export is taken whole: the gateway holds what one
	// connector with the spans holds, and publishes its ceilings.
	require.NoError(t, gateway.ConsumeMetrics(ctx, good))
	ref := newTestConnector(t, cfg(), refSink)
	require.NoError(t, ref.ConsumeTraces(ctx, tracesOf(samples)))
	got, want := histograms(t, gateway), histograms(t, ref)
	requireSameHists(t, want, got)
	gw, r := exportOnce(t, gateway, gwSink), exportOnce(t, ref, refSink)
	require.NotEmpty(t, gauges(r, MetricCeiling))
	assert.Equal(t, gauges(r, MetricCeiling), gauges(gw, MetricCeiling))
	assert.Equal(t, gauges(r, MetricWindowEnd), gauges(gw, MetricWindowEnd))
}

// The window slides: each export's suggestions rest on the last slots
// (here one export interval each), the oldest dropped whole, on one
// connector and on a gateway merging two agents alike, bit for bit; a key
// with nothing left in its window is forgotten.
func TestWindowSlidesExactly(t *testing.T) {
	ctx := context.Background()
	cfg := func() *Config {
		c := NewFactory().CreateDefaultConfig().(*Config)
		c.ExportInterval, c.Window = time.Hour, 4*time.Hour
		c.Suggest.Quantile = 0.9
		return c
	}
	sinks := make([]*consumertest.MetricsSink, 4)
	clocks := make([]*fakeClock, 4)
	conns := make([]*budgetConnector, 4)
	for i := range conns {
		sinks[i], clocks[i] = new(consumertest.MetricsSink), newFakeClock(t0.Add(24*time.Hour))
		conns[i] = newTestConnectorAt(t, cfg(), sinks[i], clocks[i])
	}
	one, agentA, agentB, gateway := conns[0], conns[1], conns[2], conns[3]
	var phases [][]sample
	for k := range 7 {
		samples := genSamples(1500, uint64(10+k))
		phases = append(phases, samples)
		require.NoError(t, one.ConsumeTraces(ctx, tracesOf(samples)))
		require.NoError(t, agentA.ConsumeTraces(ctx, tracesOf(samples[:700])))
		require.NoError(t, agentB.ConsumeTraces(ctx, tracesOf(samples[700:])))
		for _, clk := range clocks {
			clk.Add(time.Hour)
		}
		require.NoError(t, gateway.ConsumeMetrics(ctx, exportOnce(t, agentA, sinks[1])))
		require.NoError(t, gateway.ConsumeMetrics(ctx, exportOnce(t, agentB, sinks[2])))

		requireSameHists(t, histograms(t, one), histograms(t, gateway))
		ref, gw := exportOnce(t, one, sinks[0]), exportOnce(t, gateway, sinks[3])
		// Each export starts a slot (its interval is the slot's length),
		// dropping the oldest, and adds its delta to it: the last 4
		// intervals remain.
		var inWindow []sample
		for _, p := range phases[max(0, k-3):] {
			inWindow = append(inWindow, p...)
		}
		ceil := gauges(ref, MetricCeiling)
		for kk, h := range learnOf(inWindow) {
			s, err := learn.Suggest(kk.step, h, cfg().Suggest.options())
			require.NoError(t, err)
			assert.Equal(t, s.Ceiling.Seconds(), ceil[kk], "phase %d: %v", k, kk)
		}
		for _, name := range []string{MetricCeiling, MetricEstimate, MetricCensoredShare, MetricSamples, MetricWindowStart, MetricWindowEnd} {
			assert.Equal(t, gauges(ref, name), gauges(gw, name), "phase %d: %s", k, name)
		}
		assert.Equal(t, float64(len(inWindow)), sumValues(gauges(ref, MetricSamples)), "phase %d", k)
	}
	// Nothing new for a whole window: every key is forgotten.
	for range windowSlots {
		for _, clk := range clocks {
			clk.Add(time.Hour)
		}
		exportOnce(t, one, sinks[0])
	}
	assert.Empty(t, histograms(t, one))
}

func sumValues(m map[key]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// A key's memory, its window and its pending delta included, stays within
// the stated bound (docs/fleet.md, "Bounds") in the worst case: durations
// over learn's whole range in every slot and in the delta.
func TestBytesPerKeyBound(t *testing.T) {
	got := bytesPerKey(true)
	// 5 series pairs (4 slots and the delta) of at most keptBuckets
	// buckets, the entry, its map slot and its two names.
	bound := float64(maxEntryBytes + 2*len("step-00000"))
	t.Logf("worst case: %.0f B per key (bound %.0f B); log-normal: %.0f B", got, bound, bytesPerKey(false))
	assert.LessOrEqual(t, got, bound)
	assert.Greater(t, got, 0.8*bound, "the worst case is near the bound: the bound is not loose")
}

// names lists the metrics of an export.
func names(md pmetric.Metrics) []string {
	var out []string
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				out = append(out, ms.At(k).Name())
			}
		}
	}
	return out
}

// FuzzConsumeMetrics: whatever a sender changes in an export (a point's
// scale, offset, a bucket, a count, a time, a removed metric), the merge
// tier never panics, and every key it keeps is consistent: its parts add
// up (learn.Histogram.SetSeries accepts them) and its window does not end
// after now + max_clock_skew.
func FuzzConsumeMetrics(f *testing.F) {
	f.Add(uint8(0), int32(0), int64(0), uint8(0))
	f.Add(uint8(1), int32(3), int64(1), uint8(2))
	f.Add(uint8(2), int32(-1), int64(math.MaxInt64), uint8(4))
	f.Add(uint8(5), int32(1400), int64(-7), uint8(1))
	samples := genSamples(600, 9)
	f.Fuzz(func(t *testing.T, which uint8, i32 int32, i64 int64, drop uint8) {
		agentSink, gwSink := new(consumertest.MetricsSink), new(consumertest.MetricsSink)
		agent := newTestConnector(t, nil, agentSink)
		require.NoError(t, agent.ConsumeTraces(context.Background(), tracesOf(samples)))
		md := exportOnce(t, agent, agentSink)
		ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
		for k := range ms.Len() {
			m := ms.At(k)
			switch {
			case m.Name() == MetricCompleted && which%6 == 0:
				m.ExponentialHistogram().DataPoints().At(0).SetScale(i32)
			case m.Name() == MetricCensored && which%6 == 1:
				m.ExponentialHistogram().DataPoints().At(0).Positive().SetOffset(i32)
			case m.Name() == MetricCompleted && which%6 == 2:
				bc := m.ExponentialHistogram().DataPoints().At(0).Positive().BucketCounts()
				if bc.Len() > 0 {
					bc.SetAt(int(uint32(i32))%bc.Len(), uint64(i64))
				}
			case m.Name() == MetricAttempts && which%6 == 3:
				m.Sum().DataPoints().At(0).SetIntValue(i64)
			case m.Name() == MetricLast && which%6 == 4:
				m.Gauge().DataPoints().At(0).SetIntValue(i64)
			case m.Name() == MetricFirst && which%6 == 5:
				m.Gauge().DataPoints().At(0).SetIntValue(i64)
			}
		}
		if drop%3 == 0 && int(drop%8) < ms.Len() {
			gone := ms.At(int(drop % 8)).Name()
			ms.RemoveIf(func(m pmetric.Metric) bool { return m.Name() == gone })
		}
		gateway := newTestConnector(t, nil, gwSink)
		require.NoError(t, gateway.ConsumeMetrics(context.Background(), md))
		latest := gateway.now().Add(gateway.cfg.MaxClockSkew)
		for k, h := range histograms(t, gateway) { // histograms fails on a key whose parts do not add up
			assert.False(t, h.Last.After(latest), "%v: window ends at %v", k, h.Last)
		}
		exportOnce(t, gateway, gwSink)
	})
}

// A panic in the export loop ends the loop and is reported to the host as
// a fatal error (the Collector then shuts down), not raised in a goroutine
// nobody recovers; Shutdown still returns.
func TestExportLoopPanicIsReported(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	c, err := f.CreateTracesToMetrics(context.Background(), connectorSettingsFor(t.Name()), cfg, consumertest.NewNop())
	require.NoError(t, err)
	c.(*shared).Unwrap().clock = panicClock{}
	host := &reportingHost{events: make(chan *componentstatus.Event, 1)}
	require.NoError(t, c.Start(context.Background(), host))
	ev := <-host.events
	assert.Equal(t, componentstatus.StatusFatalError, ev.Status())
	assert.ErrorContains(t, ev.Err(), "the export loop panicked: ticker broke")
	require.NoError(t, c.Shutdown(context.Background()))
}

type panicClock struct{}

func (panicClock) Now() time.Time                                  { return t0 }
func (panicClock) Ticker(time.Duration) (<-chan time.Time, func()) { panic("ticker broke") }

// reportingHost is a host that receives status events.
type reportingHost struct {
	events chan *componentstatus.Event
}

func (*reportingHost) GetExtensions() map[component.ID]component.Component { return nil }
func (h *reportingHost) Report(ev *componentstatus.Event)                  { h.events <- ev }

// A connector in a traces and a metrics pipeline is one instance: the
// first pipeline's Start starts it, the first Shutdown leaves it taking
// spans, the last exports what it holds and stops it; the same ID made
// again afterwards (a reloaded configuration) is a new instance.
func TestSharedAcrossPipelines(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.ExportInterval = time.Hour // only Shutdown's last export
	set := connectorSettingsFor(t.Name())
	sink := new(consumertest.MetricsSink)
	ctx, host := context.Background(), componenttest.NewNopHost()
	tc, err := f.CreateTracesToMetrics(ctx, set, cfg, sink)
	require.NoError(t, err)
	mc, err := f.CreateMetricsToMetrics(ctx, set, cfg, sink)
	require.NoError(t, err)
	require.Same(t, tc.(*shared).Unwrap(), mc.(*shared).Unwrap())
	require.NoError(t, tc.Start(ctx, host))
	require.NoError(t, mc.Start(ctx, host))

	require.NoError(t, tc.Shutdown(ctx))
	assert.Zero(t, sink.DataPointCount(), "one pipeline still runs: no last export yet")
	require.NoError(t, tc.ConsumeTraces(ctx, tracesOf(genSamples(100, 1))))
	require.NoError(t, mc.Shutdown(ctx))
	require.NotEmpty(t, sink.AllMetrics(), "the last Shutdown exports")
	got := int64(0)
	for _, md := range sink.AllMetrics() {
		rms := md.ResourceMetrics()
		for i := range rms.Len() {
			sms := rms.At(i).ScopeMetrics()
			for j := range sms.Len() {
				ms := sms.At(j).Metrics()
				for k := range ms.Len() {
					if ms.At(k).Name() == MetricAttempts {
						dps := ms.At(k).Sum().DataPoints()
						for p := range dps.Len() {
							got += dps.At(p).IntValue()
						}
					}
				}
			}
		}
	}
	assert.Equal(t, int64(100), got, "the spans taken after the first Shutdown are in the last export")

	again, err := f.CreateTracesToMetrics(ctx, set, cfg, sink)
	require.NoError(t, err)
	assert.NotSame(t, tc.(*shared).Unwrap(), again.(*shared).Unwrap(), "a new instance once the last pipeline shut down")
	require.NoError(t, again.Shutdown(ctx))
}
