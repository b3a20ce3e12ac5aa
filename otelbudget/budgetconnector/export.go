package budgetconnector

import (
	"context"
	"errors"
	"math"
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

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

// export builds the metrics (the delta of every key with new attempts and
// the suggestions of every key; the connector's own counts go to its
// telemetry, not in them), resets the deltas, publishes each service's ceilings and then sends the metrics on.
// Exports run one at a time.
func (c *budgetConnector) export(ctx context.Context) error {
	c.exportMu.Lock()
	defer c.exportMu.Unlock()
	md, ceilings, t := c.collect()
	c.record(ctx, &t)
	// The ceilings first: whoever sees this export's suggestions downstream
	// and then asks the extension gets these ceilings, not the previous
	// export's (PublishCeilings does not block on the network).
	if c.publisher != nil {
		for _, cl := range ceilings {
			c.publisher.PublishCeilings(cl)
		}
	}
	if md.DataPointCount() > 0 {
		return c.next.ConsumeMetrics(ctx, md)
	}
	return nil
}

// keySnap is one key as an export reads it: its delta (moved out of the
// entry under the ingestion lock) and the entry, whose window only the
// export writes.
type keySnap struct {
	e     *entry // its key does not change
	delta hist
}

// maxWindowSamples bounds the attempts of a key's window: a delta that
// would take it past is not added to the window (it is still exported).
const maxWindowSamples = 1 << 62

// snapshot is export's part under the ingestion lock: it starts the
// window's next slot when the current one's time is up (dropping the
// oldest; a key with nothing left is forgotten), then moves each key's
// delta out. Adding the deltas to the windows, the suggestions and the
// metrics happen without the ingestion lock, so that ingestion waits only
// for these moves.
func (c *budgetConnector) snapshot() (snaps []keySnap, counts tally, start, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer counts.since(c.store, c.store.mark())
	now = c.now()
	start, c.lastExport = c.lastExport, now
	slot := c.cfg.Window / windowSlots
	for n := 0; n < windowSlots && now.Sub(c.lastRotate) >= slot; n++ {
		c.store.rotate()
		c.lastRotate = c.lastRotate.Add(slot)
	}
	if now.Sub(c.lastRotate) >= slot {
		c.lastRotate = now
	}
	snaps = c.snaps[:0]
	if e := c.store.head; e != nil {
		for {
			snaps = append(snaps, keySnap{e: e, delta: e.pending})
			e.pending = hist{}
			if e = e.next; e == c.store.head {
				break
			}
		}
	}
	c.snaps = snaps
	return snaps, counts, start, now
}

// collect builds an export's metrics and ceilings from a snapshot.
func (c *budgetConnector) collect() (pmetric.Metrics, []fleetceilings.Ceilings, tally) {
	snaps, counts, startT, now := c.snapshot()
	cur := c.store.cur // only snapshot changes it, under exportMu
	var window hist
	start, ts := pcommon.NewTimestampFromTime(startT), pcommon.NewTimestampFromTime(now)
	opts := c.cfg.Suggest.options()

	// Keys by service, services and steps sorted: a stable output.
	sort.Slice(snaps, func(i, j int) bool {
		a, b := &snaps[i].e.key, &snaps[j].e.key
		if a.service != b.service {
			return a.service < b.service
		}
		return a.step < b.step
	})

	md := pmetric.NewMetrics()
	var ceilings []fleetceilings.Ceilings
	for lo := 0; lo < len(snaps); {
		svc := snaps[lo].e.key.service
		hi := lo
		for hi < len(snaps) && snaps[hi].e.key.service == svc {
			hi++
		}
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
		for i := lo; i < hi; i++ {
			ks := &snaps[i]
			step := ks.e.key.step
			if ks.delta.samples() > 0 {
				m.delta(step, &ks.delta)
			}
			if n := ks.delta.samples(); n > 0 {
				if ks.e.windowSamples()+n <= maxWindowSamples {
					ks.e.ring[cur].merge(&ks.delta)
				} else {
					c.windowFull++
				}
			}
			window.reset()
			for j := range ks.e.ring {
				window.merge(&ks.e.ring[j])
			}
			if window.samples() == 0 {
				continue
			}
			h := &c.exportScratch
			if err := window.histogram(h); err != nil {
				// Never: every part of a key is applied validated.
				c.logger.Error("deadlinebudget: a key's window does not add up", zap.String("deadline.step", truncate(step)), zap.Error(err))
				continue
			}
			if inPlan[step] {
				cp := *h
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
		lo = hi
	}
	counts.refused += c.windowFull
	c.windowFull = 0
	clear(snaps) // the slice is kept for the next export, not what it points to
	return md, ceilings, counts
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

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
