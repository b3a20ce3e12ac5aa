package budgetconnector

import (
	"math"
	"time"

	"go.uber.org/zap"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
)

// The parts of a key's delta that an export holds: both histograms and
// the window's two ends are always there (the counts only for the outcomes
// that occurred).
const (
	partCompleted = 1 << iota
	partCensored
	partFirst
	partLast
	partsAll = partCompleted | partCensored | partFirst | partLast
)

// stage is one key's points in one export (one resource's metrics): read
// whole, then validated and applied whole, or refused whole.
type stage struct {
	key    key
	h      hist
	parts  uint8  // partCompleted...
	ended  uint8  // the outcomes counted, by 1 << index in endedOrder
	bad    string // why the key's points are refused; "": none yet
	points uint64 // the points read
}

func (st *stage) refuse(why string) {
	if st.bad == "" {
		st.bad = why
	}
}

// stager collects one resource's points by step, in the order first seen.
type stager struct {
	svc    string
	order  []*stage
	byStep map[string]*stage
}

func (sg *stager) get(step string) *stage {
	st := sg.byStep[step]
	if st == nil {
		st = &stage{key: key{sg.svc, step}}
		sg.byStep[step] = st
		sg.order = append(sg.order, st)
	}
	st.points++
	return st
}

// mergeResource merges one resource's data metrics (another instance's
// export for the service svc) into the keys: each key's points are read
// into a stage, checked together (every part there once, the counts equal
// to the histograms' totals, the maxima in their top buckets, the window
// ordered, not after now + MaxClockSkew, the names within
// MaxNameLength, no counter overflow), then applied together or refused
// together, counted in the connector's telemetry. Other metrics are ignored.
func (c *budgetConnector) mergeResource(svc string, sms pmetric.ScopeMetricsSlice, t *tally) {
	sg := stager{svc: svc, byStep: map[string]*stage{}}
	for j := range sms.Len() {
		ms := sms.At(j).Metrics()
		for k := range ms.Len() {
			c.stageMetric(&sg, ms.At(k), t)
		}
	}
	for _, st := range sg.order {
		if why := c.check(st); why != "" {
			t.points[1] += int64(st.points)
			t.refused++
			c.logger.Debug("deadlinebudget: a key's points refused", zap.String("service.name", truncate(st.key.service)), zap.String("deadline.step", truncate(st.key.step)), zap.String("why", why))
			continue
		}
		c.store.get(st.key).pending.merge(&st.h)
		t.points[0] += int64(st.points)
	}
}

// truncate shortens a name for a log line.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// check validates a stage; it returns why it is refused, "" when it is
// not.
func (c *budgetConnector) check(st *stage) string {
	h := &st.h
	maxLen := c.cfg.MaxNameLength
	now := c.now()
	switch {
	case st.bad != "":
		return st.bad
	case len(st.key.service) > maxLen || len(st.key.step) > maxLen:
		return "a name longer than max_name_length"
	case st.parts != partsAll:
		return "a part missing (both histograms, first_sample and last_sample are needed)"
	case max(h.successes, h.errors, h.timeouts, h.cuts) > maxDeltaSamples:
		return "more attempts in one interval than a delta holds (2^56)" // before any sum of them can wrap
	case h.samples() == 0:
		return "no attempts"
	case h.last > now.Add(c.cfg.MaxClockSkew).UnixMilli():
		return "last_sample after now + max_clock_skew"
	}
	if err := h.histogram(&c.scratch); err != nil {
		return err.Error()
	}
	n := h.samples()
	if e := c.store.entries[st.key]; e != nil {
		n += e.pending.samples()
	}
	if n > maxDeltaSamples || n < h.samples() {
		return "more attempts in one interval than a delta holds (2^56)"
	}
	return ""
}

// maxDeltaSamples bounds the attempts of one key's delta, so that no sum
// of its counts, nor the exported count (an int64), wraps; the window's
// slots are bounded when the export adds a delta (maxWindowSamples).
const maxDeltaSamples = 1 << 56

// stageMetric reads one metric's points into their keys' stages; a point
// without a deadline.step is refused alone (it names no key).
func (c *budgetConnector) stageMetric(sg *stager, m pmetric.Metric, t *tally) {
	var wrong string
	switch m.Name() {
	case MetricCompleted, MetricCensored:
		part := uint8(partCompleted)
		if m.Name() == MetricCensored {
			part = partCensored
		}
		if m.Type() != pmetric.MetricTypeExponentialHistogram {
			wrong = m.Name() + " is not an exponential histogram"
			break
		}
		eh := m.ExponentialHistogram()
		if eh.AggregationTemporality() != pmetric.AggregationTemporalityDelta || m.Unit() != "ns" {
			wrong = m.Name() + " is not a delta in ns"
		}
		dps := eh.DataPoints()
		for i := range dps.Len() {
			dp := dps.At(i)
			st := c.stageOf(sg, dp.Attributes(), t)
			if st == nil {
				continue
			}
			var sp sparse
			switch {
			case wrong != "":
				st.refuse(wrong)
			case st.parts&part != 0:
				st.refuse("two " + m.Name() + " points")
			case !readPoint(dp, &sp):
				st.refuse(m.Name() + ": not scale 5 with learn's buckets and zero threshold, or a count that does not add up")
			default:
				st.parts |= part
				maxD := time.Duration(0)
				if dp.HasMax() {
					maxD = time.Duration(dp.Max())
				}
				if part == partCompleted {
					st.h.completed, st.h.max = sp, maxD
				} else {
					st.h.censored, st.h.maxCensored = sp, maxD
				}
			}
		}
		return
	case MetricAttempts:
		if m.Type() != pmetric.MetricTypeSum {
			wrong = m.Name() + " is not a sum"
			break
		}
		if m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityDelta {
			wrong = m.Name() + " is not a delta"
		}
		dps := m.Sum().DataPoints()
		for i := range dps.Len() {
			dp := dps.At(i)
			st := c.stageOf(sg, dp.Attributes(), t)
			if st == nil {
				continue
			}
			idx := -1
			if v, ok := dp.Attributes().Get(string(otelbudget.AttrAttemptEndedBy)); ok && v.Type() == pcommon.ValueTypeStr {
				for j, e := range endedOrder {
					if v.Str() == e.String() {
						idx = j
					}
				}
			}
			switch {
			case wrong != "":
				st.refuse(wrong)
			case idx < 0:
				st.refuse(m.Name() + ": deadline.attempt.ended_by is not completed, error, attempt_timeout or deadline")
			case st.ended&(1<<idx) != 0:
				st.refuse("two " + m.Name() + " points for one outcome")
			case dp.ValueType() != pmetric.NumberDataPointValueTypeInt || dp.IntValue() < 0:
				st.refuse(m.Name() + ": not a non-negative int")
			default:
				st.ended |= 1 << idx
				n := uint64(dp.IntValue())
				switch endedOrder[idx] {
				case deadline.EndedCompleted:
					st.h.successes = n
				case deadline.EndedError:
					st.h.errors = n
				case deadline.EndedAttemptTimeout:
					st.h.timeouts = n
				case deadline.EndedDeadline:
					st.h.cuts = n
				}
			}
		}
		return
	case MetricFirst, MetricLast:
		part := uint8(partFirst)
		if m.Name() == MetricLast {
			part = partLast
		}
		if m.Type() != pmetric.MetricTypeGauge {
			wrong = m.Name() + " is not a gauge"
			break
		}
		dps := m.Gauge().DataPoints()
		for i := range dps.Len() {
			dp := dps.At(i)
			st := c.stageOf(sg, dp.Attributes(), t)
			if st == nil {
				continue
			}
			switch {
			case st.parts&part != 0:
				st.refuse("two " + m.Name() + " points")
			case dp.ValueType() != pmetric.NumberDataPointValueTypeInt || dp.IntValue() <= 0:
				st.refuse(m.Name() + ": not a positive int (Unix ms)")
			default:
				st.parts |= part
				if part == partFirst {
					st.h.first = dp.IntValue()
				} else {
					st.h.last = dp.IntValue()
				}
			}
		}
		return
	default:
		return // not ours
	}
	// A metric of ours of another type: its points refuse their keys.
	for _, attrs := range pointAttrs(m) {
		if st := c.stageOf(sg, attrs, t); st != nil {
			st.refuse(wrong)
		}
	}
}

// stageOf returns the stage of the key a point names, nil (the point
// refused and counted) when it names none.
func (c *budgetConnector) stageOf(sg *stager, attrs pcommon.Map, t *tally) *stage {
	step, ok := stepOf(attrs)
	if !ok {
		t.points[1]++
		return nil
	}
	return sg.get(step)
}

// pointAttrs returns the attributes of each of m's points.
func pointAttrs(m pmetric.Metric) []pcommon.Map {
	var out []pcommon.Map
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		for i := range m.Gauge().DataPoints().Len() {
			out = append(out, m.Gauge().DataPoints().At(i).Attributes())
		}
	case pmetric.MetricTypeSum:
		for i := range m.Sum().DataPoints().Len() {
			out = append(out, m.Sum().DataPoints().At(i).Attributes())
		}
	case pmetric.MetricTypeHistogram:
		for i := range m.Histogram().DataPoints().Len() {
			out = append(out, m.Histogram().DataPoints().At(i).Attributes())
		}
	case pmetric.MetricTypeExponentialHistogram:
		for i := range m.ExponentialHistogram().DataPoints().Len() {
			out = append(out, m.ExponentialHistogram().DataPoints().At(i).Attributes())
		}
	case pmetric.MetricTypeSummary:
		for i := range m.Summary().DataPoints().Len() {
			out = append(out, m.Summary().DataPoints().At(i).Attributes())
		}
	}
	if len(out) == 0 {
		out = append(out, pcommon.NewMap()) // a metric without points: refused once
	}
	return out
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
