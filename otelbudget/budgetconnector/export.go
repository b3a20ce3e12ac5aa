package budgetconnector

import (
	"context"
	"errors"
	"math"
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/fleetceilings"
)

// Version is the connector's version, the scope version of its metrics.
var Version = otelbudget.Version()

// zeroThreshold is the exported histograms' zero threshold: learn's
// underflow bucket, in ns.
const zeroThreshold = float64(learn.Underflow)

// overflowIndex is the bucket learn's overflow bucket is exported as.
const overflowIndex = learn.MaxIndex + 1

var endedOrder = [...]deadline.EndedBy{deadline.EndedCompleted, deadline.EndedError, deadline.EndedAttemptTimeout, deadline.EndedDeadline}

// export builds the metrics (the delta of every key with new attempts,
// the suggestions of every key, the connector's own counts), resets the
// deltas, sends the metrics on and publishes each service's ceilings.
func (c *budgetConnector) export(ctx context.Context) error {
	md, ceilings := c.collect()
	var err error
	if md.DataPointCount() > 0 {
		err = c.next.ConsumeMetrics(ctx, md)
	}
	if c.publisher != nil {
		for _, cl := range ceilings {
			c.publisher.PublishCeilings(cl)
		}
	}
	return err
}

// collect is export's part under the lock.
func (c *budgetConnector) collect() (pmetric.Metrics, []fleetceilings.Ceilings) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	start, ts := pcommon.NewTimestampFromTime(c.lastExport), pcommon.NewTimestampFromTime(now)
	c.lastExport = now
	opts := c.cfg.Suggest.options()

	// Keys by service, services and steps sorted: a stable output.
	bySvc := map[string][]*entry{}
	for k, e := range c.store.entries {
		bySvc[k.service] = append(bySvc[k.service], e)
	}
	services := make([]string, 0, len(bySvc))
	for s := range bySvc {
		services = append(services, s)
	}
	sort.Strings(services)

	md := pmetric.NewMetrics()
	var ceilings []fleetceilings.Ceilings
	for _, svc := range services {
		entries := bySvc[svc]
		sort.Slice(entries, func(i, j int) bool { return entries[i].key.step < entries[j].key.step })
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", svc)
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(ScopeName)
		sm.Scope().SetVersion(Version)
		m := newMetricSet(sm.Metrics(), start, ts)
		cl := fleetceilings.Ceilings{Schema: fleetceilings.Schema, Service: svc, ComputedAt: now.UTC().Truncate(time.Millisecond), Steps: map[string]fleetceilings.StepCeiling{}}
		sugs := map[string]*learn.Histogram{}
		inPlan := map[string]bool{}
		for _, p := range c.cfg.Plans {
			if p.Service == svc {
				for _, st := range p.Steps {
					inPlan[st.Step] = true
				}
			}
		}
		for _, e := range entries {
			step := e.key.step
			if e.pending.samples() > 0 {
				m.delta(step, &e.pending)
				e.pending.reset()
			}
			if err := e.total.histogram(&c.scratch); err != nil {
				c.inconsist++
				continue
			}
			h := &c.scratch
			if inPlan[step] {
				cp := c.scratch
				sugs[step] = &cp
			}
			s, err := learn.Suggest(step, h, opts)
			m.suggestion(step, s, err, h)
			if err == nil {
				cl.Steps[step] = fleetceilings.StepCeiling{CeilingMS: ms(s.Ceiling), EstimateMS: ms(s.Estimate), Quantile: s.Quantile, Margin: s.Margin,
					Samples: s.Samples, Censored: s.CeilingTimeouts + s.DeadlineCuts}
			}
			if !h.First.IsZero() && (cl.WindowStart.IsZero() || h.First.Before(cl.WindowStart)) {
				cl.WindowStart = h.First
			}
			if h.Last.After(cl.WindowEnd) {
				cl.WindowEnd = h.Last
			}
		}
		for _, p := range c.cfg.Plans {
			if p.Service == svc {
				m.plan(p, sugs, opts)
			}
		}
		ceilings = append(ceilings, cl)
	}
	c.self(md, ts)
	return md, ceilings
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// self appends the connector's own counters, under a resource without
// service.name.
func (c *budgetConnector) self(md pmetric.Metrics, ts pcommon.Timestamp) {
	rm := md.ResourceMetrics().AppendEmpty()
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(ScopeName)
	sm.Scope().SetVersion(Version)
	start := pcommon.NewTimestampFromTime(c.started)
	counter := func(name, unit string) pmetric.NumberDataPointSlice {
		m := sm.Metrics().AppendEmpty()
		m.SetName(name)
		m.SetUnit(unit)
		s := m.SetEmptySum()
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		s.SetIsMonotonic(true)
		return s.DataPoints()
	}
	point := func(dps pmetric.NumberDataPointSlice, v uint64, outcome string) {
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		dp.SetIntValue(int64(min(v, math.MaxInt64)))
		if outcome != "" {
			dp.Attributes().PutStr(AttrOutcome, outcome)
		}
	}
	spans := counter(MetricSpans, "{span}")
	for o := range outRejected {
		point(spans, c.spans[o], outcomeNames[o])
	}
	pts := counter(MetricPoints, "{point}")
	point(pts, c.points[0], outcomeNames[outAccepted])
	point(pts, c.points[1], outcomeNames[outRejected])
	point(counter(MetricEvicted, "{key}"), c.store.evicted, "")
	point(counter(MetricInconsistent, "{key}"), c.inconsist, "")
	g := sm.Metrics().AppendEmpty()
	g.SetName(MetricKeys)
	g.SetUnit("{key}")
	dp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts)
	dp.SetIntValue(int64(len(c.store.entries)))
}

// metricSet appends one service's metrics, each created at first use.
type metricSet struct {
	ms        pmetric.MetricSlice
	start, ts pcommon.Timestamp
	byName    map[string]pmetric.Metric
}

func newMetricSet(ms pmetric.MetricSlice, start, ts pcommon.Timestamp) *metricSet {
	return &metricSet{ms: ms, start: start, ts: ts, byName: map[string]pmetric.Metric{}}
}

func (m *metricSet) metric(name, unit string, init func(pmetric.Metric)) pmetric.Metric {
	if mm, ok := m.byName[name]; ok {
		return mm
	}
	mm := m.ms.AppendEmpty()
	mm.SetName(name)
	mm.SetUnit(unit)
	init(mm)
	m.byName[name] = mm
	return mm
}

func (m *metricSet) expHist(name string) pmetric.ExponentialHistogramDataPointSlice {
	return m.metric(name, "ns", func(mm pmetric.Metric) {
		mm.SetEmptyExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	}).ExponentialHistogram().DataPoints()
}

func (m *metricSet) gauge(name, unit, step string) pmetric.NumberDataPoint {
	dp := m.metric(name, unit, func(mm pmetric.Metric) { mm.SetEmptyGauge() }).Gauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(m.ts)
	dp.Attributes().PutStr(string(otelbudget.AttrStep), step)
	return dp
}

// delta appends a key's delta: its two histograms, its counts, its window.
func (m *metricSet) delta(step string, h *hist) {
	for _, s := range []struct {
		name string
		sp   *sparse
		max  time.Duration
	}{{MetricCompleted, &h.completed, h.max}, {MetricCensored, &h.censored, h.maxCensored}} {
		dp := m.expHist(s.name).AppendEmpty()
		dp.SetStartTimestamp(m.start)
		dp.SetTimestamp(m.ts)
		dp.Attributes().PutStr(string(otelbudget.AttrStep), step)
		dp.SetScale(learn.Scale)
		dp.SetZeroThreshold(zeroThreshold)
		ser := s.sp.series()
		dp.SetZeroCount(ser.Underflow)
		n := ser.Underflow + ser.Overflow
		for _, c := range ser.Counts {
			n += c
		}
		dp.SetCount(n)
		if n > 0 {
			dp.SetMax(float64(s.max))
		}
		pos := dp.Positive()
		switch {
		case ser.Overflow > 0 && len(ser.Counts) == 0:
			pos.SetOffset(overflowIndex)
			pos.BucketCounts().FromRaw([]uint64{ser.Overflow})
		case len(ser.Counts) > 0:
			pos.SetOffset(ser.Offset)
			counts := ser.Counts
			if ser.Overflow > 0 {
				counts = make([]uint64, overflowIndex-ser.Offset+1)
				copy(counts, ser.Counts)
				counts[len(counts)-1] = ser.Overflow
			}
			pos.BucketCounts().FromRaw(counts)
		}
	}
	sum := m.metric(MetricAttempts, "{attempt}", func(mm pmetric.Metric) {
		s := mm.SetEmptySum()
		s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		s.SetIsMonotonic(true)
	}).Sum().DataPoints()
	for i, n := range []uint64{h.successes, h.errors, h.timeouts, h.cuts} {
		if n == 0 {
			continue
		}
		dp := sum.AppendEmpty()
		dp.SetStartTimestamp(m.start)
		dp.SetTimestamp(m.ts)
		dp.Attributes().PutStr(string(otelbudget.AttrStep), step)
		dp.Attributes().PutStr(string(otelbudget.AttrAttemptEndedBy), endedOrder[i].String())
		dp.SetIntValue(int64(min(n, math.MaxInt64)))
	}
	if h.first != 0 {
		m.gauge(MetricFirst, "ms", step).SetIntValue(h.first)
		m.gauge(MetricLast, "ms", step).SetIntValue(h.last)
	}
}

// suggestion appends a key's suggestion: its ceiling (when there is one)
// and its evidence.
func (m *metricSet) suggestion(step string, s learn.Suggestion, err error, h *learn.Histogram) {
	if err == nil {
		m.gauge(MetricCeiling, "s", step).SetDoubleValue(s.Ceiling.Seconds())
		dp := m.gauge(MetricEstimate, "s", step)
		dp.SetDoubleValue(s.Estimate.Seconds())
		dp.Attributes().PutDouble(AttrQuantile, s.Quantile)
	}
	if s.Censored {
		m.gauge(MetricRaiseAbove, "s", step).SetDoubleValue(s.RaiseAbove.Seconds())
	}
	if h.Samples > 0 {
		m.gauge(MetricCensoredShare, "1", step).SetDoubleValue(float64(h.Censored()) / float64(h.Samples))
		m.gauge(MetricWindowStart, "ms", step).SetIntValue(h.First.UnixMilli())
		m.gauge(MetricWindowEnd, "ms", step).SetIntValue(h.Last.UnixMilli())
	}
	m.gauge(MetricSamples, "{attempt}", step).SetIntValue(int64(min(h.Samples, math.MaxInt64)))
}

// plan appends a plan's budget, when every step has attempts and a
// suggestion.
func (m *metricSet) plan(p PlanConfig, hs map[string]*learn.Histogram, opts learn.SuggestOptions) {
	b, err := planBudget(p, hs, opts)
	if err != nil {
		return
	}
	for _, x := range []struct {
		name, unit string
		v          float64
	}{{MetricPlanBudget, "s", b.Budget.Seconds()}, {MetricPlanSuccess, "1", b.Success}} {
		dp := m.metric(x.name, x.unit, func(mm pmetric.Metric) { mm.SetEmptyGauge() }).Gauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(m.ts)
		dp.Attributes().PutStr(AttrPlan, p.Name)
		dp.SetDoubleValue(x.v)
	}
}

// errNoData says a plan step has no attempts yet.
var errNoData = errors.New("deadlinebudget: a plan step has no attempts")

// planBudget suggests p's budget from the steps' histograms, as
// budgetadvise does: learn's Recorder.SuggestBudget over the merged
// histograms.
func planBudget(p PlanConfig, hs map[string]*learn.Histogram, opts learn.SuggestOptions) (learn.BudgetSuggestion, error) {
	snap := &learn.Snapshot{Steps: map[string]*learn.Histogram{}}
	plan := make([]deadline.Policy, 0, len(p.Steps))
	for _, s := range p.Steps {
		h := hs[s.Step]
		if h == nil {
			return learn.BudgetSuggestion{}, errNoData
		}
		snap.Steps[s.Step] = h
		plan = append(plan, s.policy())
	}
	var rec learn.Recorder
	rec.Merge(snap)
	return rec.SuggestBudget(plan, learn.PlanOptions{SuggestOptions: opts, Target: p.Target})
}
