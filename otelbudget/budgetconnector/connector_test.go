package budgetconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
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
		c.ExportInterval, c.Plans = time.Hour, plan
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
	assert.Equal(t, int64(0), counter(gw, MetricPoints)["rejected"])
	assert.Positive(t, counter(gw, MetricPoints)["accepted"])

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
	cfg.ExportInterval, cfg.MaxKeys = time.Hour, 3
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
	add(time.Millisecond, map[string]any{"http.request.method": "GET"})            // not ours
	add(time.Millisecond, map[string]any{step: "fetch", "deadline.verdict": "ok"}) // a call span
	add(time.Millisecond, map[string]any{step: "", ended: "completed"})            // unnamed
	add(time.Millisecond, map[string]any{step: 7, ended: "completed"})             // wrong type
	add(time.Millisecond, map[string]any{step: "fetch", ended: "canceled"})        // not recorded
	add(-time.Millisecond, map[string]any{step: "fetch", ended: "completed"})      // negative
	add(25*time.Hour, map[string]any{step: "fetch", ended: "completed"})           // absurd
	add(time.Millisecond, map[string]any{step: "fetch", ended: "completed"})       // accepted
	for i := range 5 {                                                             // a step per request
		add(time.Millisecond, map[string]any{step: "minted-" + string(rune('a'+i)), ended: "completed"})
	}
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
	assert.Equal(t, map[string]int64{"accepted": 6, "not_attempt": 2, "unnamed_step": 1, "attribute_type": 1, "not_recorded": 1, "bad_duration": 2}, counter(out, MetricSpans))
	assert.Equal(t, map[string]int64{"accepted": 0, "rejected": 3}, counter(out, MetricPoints))
	assert.Equal(t, map[string]int64{"": 3}, counter(out, MetricEvicted), "fetch and 5 minted steps in 3 keys")
	assert.Equal(t, map[string]int64{"": 3}, counter(out, MetricKeys))
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

// The export loop runs on its own at the configured interval.
func TestExportLoop(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.ExportInterval = 20 * time.Millisecond
	c := newTestConnector(t, cfg, sink)
	require.NoError(t, c.ConsumeTraces(context.Background(), tracesOf(genSamples(300, 3))))
	require.Eventually(t, func() bool {
		for _, md := range sink.AllMetrics() {
			if len(gauges(md, MetricSamples)) == 3 {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
}
