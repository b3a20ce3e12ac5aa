package budgetconnector

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
)

// mergeMetric merges one of the connector's data metrics, as another
// instance exported it, into svc's keys; other metrics are ignored. Each
// point is merged whole or refused whole (counted).
func (c *budgetConnector) mergeMetric(svc string, m pmetric.Metric) {
	switch m.Name() {
	case MetricCompleted, MetricCensored:
		if m.Type() != pmetric.MetricTypeExponentialHistogram {
			c.points[1] += uint64(max(1, countPoints(m)))
			return
		}
		eh := m.ExponentialHistogram()
		ok := eh.AggregationTemporality() == pmetric.AggregationTemporalityDelta && m.Unit() == "ns"
		dps := eh.DataPoints()
		for i := range dps.Len() {
			dp := dps.At(i)
			step, good := stepOf(dp.Attributes())
			var s sparse
			if !ok || !good || !readPoint(dp, &s) {
				c.points[1]++
				continue
			}
			maxD := time.Duration(0)
			if dp.HasMax() {
				maxD = time.Duration(dp.Max())
			}
			e := c.store.get(key{svc, step})
			for _, h := range []*hist{&e.total, &e.pending} {
				if m.Name() == MetricCompleted {
					h.completed.merge(&s)
					h.max = max(h.max, maxD)
				} else {
					h.censored.merge(&s)
					h.maxCensored = max(h.maxCensored, maxD)
				}
			}
			c.points[0]++
		}
	case MetricAttempts:
		if m.Type() != pmetric.MetricTypeSum || m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityDelta {
			c.points[1] += uint64(max(1, countPoints(m)))
			return
		}
		dps := m.Sum().DataPoints()
		for i := range dps.Len() {
			dp := dps.At(i)
			step, good := stepOf(dp.Attributes())
			ended := deadline.EndedBy(0)
			if v, ok := dp.Attributes().Get(string(otelbudget.AttrAttemptEndedBy)); ok {
				for _, e := range endedOrder {
					if v.Str() == e.String() {
						ended = e
					}
				}
			}
			if !good || ended == 0 || dp.ValueType() != pmetric.NumberDataPointValueTypeInt || dp.IntValue() < 0 {
				c.points[1]++
				continue
			}
			n := uint64(dp.IntValue())
			e := c.store.get(key{svc, step})
			for _, h := range []*hist{&e.total, &e.pending} {
				switch ended {
				case deadline.EndedCompleted:
					h.successes += n
				case deadline.EndedError:
					h.errors += n
				case deadline.EndedAttemptTimeout:
					h.timeouts += n
				case deadline.EndedDeadline:
					h.cuts += n
				}
			}
			c.points[0]++
		}
	case MetricFirst, MetricLast:
		if m.Type() != pmetric.MetricTypeGauge {
			c.points[1] += uint64(max(1, countPoints(m)))
			return
		}
		dps := m.Gauge().DataPoints()
		for i := range dps.Len() {
			dp := dps.At(i)
			step, good := stepOf(dp.Attributes())
			if !good || dp.ValueType() != pmetric.NumberDataPointValueTypeInt || dp.IntValue() <= 0 {
				c.points[1]++
				continue
			}
			v := dp.IntValue()
			e := c.store.get(key{svc, step})
			for _, h := range []*hist{&e.total, &e.pending} {
				if m.Name() == MetricFirst {
					if h.first == 0 || v < h.first {
						h.first = v
					}
					h.last = max(h.last, v) // a window is never empty
				} else {
					h.window(min(v, nonZero(h.first, v)), v)
				}
			}
			c.points[0]++
		}
	}
}

func nonZero(a, b int64) int64 {
	if a == 0 {
		return b
	}
	return a
}

func countPoints(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}

func stepOf(attrs pcommon.Map) (string, bool) {
	v, ok := attrs.Get(string(otelbudget.AttrStep))
	if !ok || v.Type() != pcommon.ValueTypeStr || v.Str() == "" {
		return "", false
	}
	return v.Str(), true
}

// readPoint reads an exported point into s: scale learn.Scale, zero
// threshold learn.Underflow, no negative bucket, the positive ones within
// learn's kept range or the overflow bucket, Count their sum, Max (when
// set) finite and >= 0. It reports false (s unusable) otherwise.
func readPoint(dp pmetric.ExponentialHistogramDataPoint, s *sparse) bool {
	if dp.Scale() != learn.Scale || dp.ZeroThreshold() != zeroThreshold {
		return false
	}
	if dp.Negative().BucketCounts().Len() > 0 && anyNonZero(dp.Negative().BucketCounts()) {
		return false
	}
	if dp.HasMax() && !(dp.Max() >= 0 && dp.Max() < math.MaxInt64) {
		return false
	}
	n := dp.ZeroCount()
	s.under = dp.ZeroCount()
	bc := dp.Positive().BucketCounts()
	off := int64(dp.Positive().Offset())
	for k := range bc.Len() {
		c := bc.At(k)
		if c == 0 {
			continue
		}
		i := off + int64(k)
		switch {
		case i < learn.MinIndex || i > overflowIndex:
			return false
		case i == overflowIndex:
			s.over += c
		default:
			s.addIndex(int32(i), c)
		}
		if n+c < n {
			return false
		}
		n += c
	}
	return n == dp.Count()
}

func anyNonZero(b pcommon.UInt64Slice) bool {
	for i := range b.Len() {
		if b.At(i) != 0 {
			return true
		}
	}
	return false
}
