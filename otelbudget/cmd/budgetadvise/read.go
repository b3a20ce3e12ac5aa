package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	otelattr "go.opentelemetry.io/otel/attribute"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
)

// stepData is what was read about one step from one source (spans or
// metrics).
type stepData struct {
	hist     learn.Histogram      // every attempt, cut ones censored: the Kaplan–Meier estimate
	done     learn.Histogram      // the attempts no limit cut: their own percentiles
	bins     map[int32]*[2]uint64 // display bins (scale 2): completed, censored
	verdicts map[string]int
	ceilings map[time.Duration]uint64 // the attempts' configured ceilings
	maxAtt   int
	floor    time.Duration
}

func newStepData() *stepData {
	return &stepData{bins: map[int32]*[2]uint64{}, verdicts: map[string]int{}, ceilings: map[time.Duration]uint64{}}
}

// add records n attempts that ended as ended, each of duration d (the cut,
// for a censored one), the last at the wall-clock time at.
func (s *stepData) add(ended deadline.EndedBy, d time.Duration, at time.Time, n uint64) {
	if n == 0 {
		return
	}
	var one learn.Histogram
	one.Add(ended, d, at)
	if one.Samples == 0 {
		return // canceled, panic: not recorded, as learn does
	}
	addN(&s.hist, &one, n)
	if one.Censored() == 0 {
		addN(&s.done, &one, n)
	}
	b := displayBin(d)
	if s.bins[b] == nil {
		s.bins[b] = new([2]uint64)
	}
	if one.Censored() > 0 {
		s.bins[b][1] += n
	} else {
		s.bins[b][0] += n
	}
}

// addN adds n copies of one to h by doubling: O(log n) merges, so that a
// bucket count of a merged metric (billions, possibly) costs no more than a
// few dozen merges. learn.Histogram has no "add n" of its own.
func addN(h, one *learn.Histogram, n uint64) {
	pow := *one
	for n > 0 {
		if n&1 == 1 {
			h.Merge(&pow)
		}
		n >>= 1
		if n > 0 {
			c := pow
			pow.Merge(&c)
		}
	}
}

// displayBin is the terminal histogram's bin of d: the OpenTelemetry
// exponential bucket at scale 2 (4 bins per doubling).
func displayBin(d time.Duration) int32 {
	if d <= 0 {
		return math.MinInt32
	}
	return learn.BucketIndex(d) >> (learn.Scale - 2)
}

// dataset is everything read from the inputs.
type dataset struct {
	spans, metrics map[string]*stepData
	notes          []string // one line each: what could not be read, and why
	objects        int      // JSON objects read
	points         []metricPoint
	calls          []callSpan
	spansSeen      int            // spans of this project read
	pointsSeen     int            // exponential-histogram points of deadline.attempt.duration read
	older          int            // spans of an older attribute set
	unnamed        int            // attempt or call spans whose deadline.step is ""
	badDuration    int            // attempt spans of a negative or absurd duration (otelbudget.ErrBadDuration)
	wrongType      map[string]int // "deadline.step is an int": spans skipped or attributes ignored for it
	explicit       int            // explicit-bucket points of deadline.attempt.duration
	badUnit        int            // deadline.attempt.duration metrics of a unit not read
	traced         []spanView     // every span of this project, for the run report
	from, to       time.Time      // the range the data covers
}

// cover widens the data's range to [a, b]; a zero or pre-1970 time (an
// unset timestamp) is not a bound.
func (ds *dataset) cover(a, b time.Time) {
	epoch := time.Unix(0, 0)
	if a.After(epoch) && (ds.from.IsZero() || a.Before(ds.from)) {
		ds.from = a
	}
	if b.After(epoch) && b.After(ds.to) {
		ds.to = b
	}
}

func newDataset() *dataset {
	return &dataset{spans: map[string]*stepData{}, metrics: map[string]*stepData{}, wrongType: map[string]int{}}
}

func (ds *dataset) step(src map[string]*stepData, name string) *stepData {
	if src[name] == nil {
		src[name] = newStepData()
	}
	return src[name]
}

func (ds *dataset) note(format string, args ...any) {
	ds.notes = append(ds.notes, fmt.Sprintf(format, args...))
}

// callSpan is a call span's place in its trace, for the plan's order.
type callSpan struct {
	trace pcommon.TraceID
	start time.Time
	step  string
}

// metricPoint is one exponential-histogram data point of
// deadline.attempt.duration.
type metricPoint struct {
	key      string // the stream: resource, scope, attributes, start time
	delta    bool
	start    time.Time // StartTimeUnixNano: the data covers [start, at]
	at       time.Time
	step     string
	ended    deadline.EndedBy
	unit     float64 // nanoseconds per unit of the metric
	scale    int32
	zero     uint64
	offset   int32
	counts   []uint64
	negative uint64
}

// read reads one input: OTLP JSON (a Collector file exporter's lines of
// ExportTraceServiceRequest / ExportMetricsServiceRequest) or the demo's
// stdout export (stdouttrace's span objects; stdoutmetric's objects are
// recognised and skipped). name names it in messages.
func (ds *dataset) read(name string, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		ds.note("%s: empty: no telemetry to read", name)
		return nil
	}
	var stdoutMetrics, unknown, bad, objects, firstBad int
	lineOf := func(off int) int { return 1 + bytes.Count(data[:off], []byte("\n")) }
	rest := data
	for len(bytes.TrimSpace(rest)) > 0 {
		off := len(data) - len(rest)
		dec := json.NewDecoder(bytes.NewReader(rest))
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				// Name the line the incomplete object starts on.
				lead := len(rest) - len(bytes.TrimLeft(rest, " \t\r\n"))
				ds.note("%s: truncated: the object starting on line %d is incomplete (%s before it read)", name, lineOf(off+lead), plural(objects, "object"))
				break
			}
			// Skip to the next line and try again.
			bad++
			if firstBad == 0 {
				firstBad = lineOf(off + len(rest) - len(bytes.TrimLeft(rest, " \t\r\n")))
			}
			i := bytes.IndexByte(rest[1:], '\n')
			if i < 0 {
				break
			}
			rest = rest[i+2:]
			continue
		}
		rest = rest[dec.InputOffset():]
		ds.objects++
		objects++
		switch kind := objectKind(raw); kind {
		case "traces":
			td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(raw)
			if err != nil {
				bad++
				firstBad = cmp.Or(firstBad, lineOf(off))
				continue
			}
			ds.addTraces(td)
		case "metrics":
			md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(raw)
			if err != nil {
				bad++
				firstBad = cmp.Or(firstBad, lineOf(off))
				continue
			}
			ds.addMetrics(md)
		case "stdouttrace":
			if err := ds.addStdoutSpan(raw); err != nil {
				bad++
				firstBad = cmp.Or(firstBad, lineOf(off))
			}
		case "stdoutmetric":
			stdoutMetrics++
		default:
			unknown++
		}
	}
	if bad > 0 {
		ds.note("%s: %s not valid JSON telemetry, skipped (the first on line %d)", name, plural(bad, "line or object is", "lines or objects are"), firstBad)
	}
	if unknown > 0 {
		ds.note("%s: %s neither OTLP traces or metrics nor stdouttrace spans, skipped", name, plural(unknown, "JSON object is", "JSON objects are"))
	}
	if stdoutMetrics > 0 {
		ds.note("%s: %s skipped: the stdout metric exporter's JSON is not OTLP and does not say which aggregation a point is; export metrics with OTLP to read them", name, plural(stdoutMetrics, "stdoutmetric object"))
	}
	return nil
}

// plural returns "1 span", "2 spans"; with a second form, the plural is
// that: plural(n, "object is", "objects are").
func plural(n int, one string, many ...string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", one)
	}
	if len(many) > 0 {
		return fmt.Sprintf("%d %s", n, many[0])
	}
	return fmt.Sprintf("%d %ss", n, one)
}

// objectKind tells what a JSON object is by its top-level keys.
func objectKind(raw json.RawMessage) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return ""
	}
	switch {
	case top["resourceSpans"] != nil || top["resource_spans"] != nil:
		return "traces"
	case top["resourceMetrics"] != nil || top["resource_metrics"] != nil:
		return "metrics"
	case top["SpanContext"] != nil && top["Name"] != nil:
		return "stdouttrace"
	case top["ScopeMetrics"] != nil:
		return "stdoutmetric"
	}
	return ""
}

// spanView is what budgetadvise reads of a span, from OTLP or stdouttrace.
type spanView struct {
	trace      pcommon.TraceID
	id, parent pcommon.SpanID
	name       string
	start, end time.Time
	attrs      map[string]any // string, int64, float64, bool, or otherType
	// status is the HTTP response status (http.response.status_code) of a
	// CLIENT span, 0 when it has none: the report shows "HTTP 429" where
	// ended_by says only "error", as the demo's terminal does.
	status int64
}

// attrHTTPStatus is the semantic conventions' HTTP response status.
const attrHTTPStatus = "http.response.status_code"

// otherType stands for an attribute value of a type budgetadvise does not
// read (a slice, a map, bytes): its name.
type otherType string

// typeName names the type of an attribute value as OTLP does.
func typeName(v any) string {
	switch v := v.(type) {
	case string:
		return "a string"
	case int64:
		return "an int"
	case float64:
		return "a double"
	case bool:
		return "a bool"
	case otherType:
		return string(v)
	}
	return "unknown"
}

// Lookup reads an attribute for otelbudget.ReadAttemptSample.
func (sv spanView) Lookup(k otelattr.Key) (otelattr.Value, bool) {
	v, ok := sv.attrs[string(k)]
	if !ok {
		return otelattr.Value{}, false
	}
	switch v := v.(type) {
	case string:
		return otelattr.StringValue(v), true
	case int64:
		return otelattr.Int64Value(v), true
	case float64:
		return otelattr.Float64Value(v), true
	case bool:
		return otelattr.BoolValue(v), true
	}
	return otelattr.Value{}, true
}

func (sv spanView) str(k attribute) string {
	s, _ := sv.attrs[string(k)].(string)
	return s
}

func (sv spanView) int(k attribute) (int64, bool) {
	switch v := sv.attrs[string(k)].(type) {
	case int64:
		return v, true
	case float64:
		return int64(v), true
	}
	return 0, false
}

func (sv spanView) bool(k attribute) (bool, bool) {
	v, ok := sv.attrs[string(k)].(bool)
	return v, ok
}

type attribute string

var (
	attrStep        = attribute(otelbudget.AttrStep)
	attrEndedBy     = attribute(otelbudget.AttrAttemptEndedBy)
	attrGrantedMs   = attribute(otelbudget.AttrAttemptGrantedMs)
	attrCeilingMs   = attribute(otelbudget.AttrAttemptCeilingMs)
	attrVerdict     = attribute(otelbudget.AttrVerdict)
	attrMaxAttempts = attribute(otelbudget.AttrMaxAttempts)
	attrFloorMs     = attribute(otelbudget.AttrFloorMs)
	attrNumber      = attribute(otelbudget.AttrAttemptNumber)
)

// wantString and wantNumber are the types of the attributes read: a value
// of another type is diagnosed, not taken for a missing attribute.
var (
	wantString = []attribute{attrStep, attrEndedBy, attrVerdict,
		attribute(otelbudget.AttrAttemptLimitedBy), attribute(otelbudget.AttrStopReason),
		attribute(otelbudget.AttrBackoffSource), attribute(otelbudget.AttrRunOutcome)}
	wantNumber = []attribute{attrGrantedMs, attrCeilingMs, attrMaxAttempts, attrFloorMs, attrNumber,
		attribute(otelbudget.AttrBudgetMs), attribute(otelbudget.AttrRemainingAtStartMs), attribute(otelbudget.AttrRemainingMs),
		attribute(otelbudget.AttrAttempts), attribute(otelbudget.AttrBackoffDelayMs), attribute(otelbudget.AttrRetryAfterMs)}
)

func (ds *dataset) addTraces(td ptrace.Traces) {
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		sss := rss.At(i).ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				sp := spans.At(k)
				sv := spanView{trace: sp.TraceID(), id: sp.SpanID(), parent: sp.ParentSpanID(), name: sp.Name(),
					start: sp.StartTimestamp().AsTime(), end: sp.EndTimestamp().AsTime(), attrs: map[string]any{}}
				for key, v := range sp.Attributes().All() {
					if key == attrHTTPStatus && v.Type() == pcommon.ValueTypeInt {
						sv.status = v.Int()
					}
					if !strings.HasPrefix(key, "deadline.") {
						continue
					}
					switch v.Type() {
					case pcommon.ValueTypeStr:
						sv.attrs[key] = v.Str()
					case pcommon.ValueTypeInt:
						sv.attrs[key] = v.Int()
					case pcommon.ValueTypeDouble:
						sv.attrs[key] = v.Double()
					case pcommon.ValueTypeBool:
						sv.attrs[key] = v.Bool()
					case pcommon.ValueTypeSlice:
						sv.attrs[key] = otherType("an array")
					case pcommon.ValueTypeMap:
						sv.attrs[key] = otherType("a map")
					case pcommon.ValueTypeBytes:
						sv.attrs[key] = otherType("bytes")
					default:
						sv.attrs[key] = otherType("empty")
					}
				}
				ds.addSpan(sv)
			}
		}
	}
}

// olderNoted says what spans of an older attribute set are.
const olderNoted = "carry deadline.step or deadline.attempt.number but neither deadline.attempt.ended_by nor deadline.verdict: an older otelbudget attribute set? They are skipped"

// typesOK reports whether sv's attributes have the types read, counting
// each one that does not in ds.wrongType. Only a wrong step, ended_by or
// verdict makes the span unreadable; another is ignored.
func (ds *dataset) typesOK(sv spanView) bool {
	ok := true
	for _, k := range wantString {
		if v, has := sv.attrs[string(k)]; has {
			if _, isStr := v.(string); !isStr {
				what := "the attribute is ignored"
				if k == attrStep || k == attrEndedBy || k == attrVerdict {
					what, ok = "the span is skipped", false
				}
				ds.wrongType[fmt.Sprintf("%s as %s, not a string: %s", k, typeName(v), what)]++
			}
		}
	}
	for _, k := range wantNumber {
		if v, has := sv.attrs[string(k)]; has {
			switch v.(type) {
			case int64, float64:
			default:
				ds.wrongType[fmt.Sprintf("%s as %s, not an int: the attribute is ignored", k, typeName(v))]++
				delete(sv.attrs, string(k))
			}
		}
	}
	return ok
}

func (ds *dataset) addSpan(sv spanView) {
	if len(sv.attrs) == 0 {
		return // not this project's
	}
	if !ds.typesOK(sv) {
		return
	}
	ds.traced = append(ds.traced, sv)
	ds.cover(sv.start, sv.end)
	_, hasStep := sv.attrs[string(attrStep)]
	step := sv.str(attrStep)
	ended := sv.str(attrEndedBy)
	verdict := sv.str(attrVerdict)
	switch {
	case hasStep && step == "" && (ended != "" || verdict != ""):
		ds.unnamed++
	case step != "" && ended != "":
		// The one span-to-sample rule, the Collector connector's too.
		a, err := otelbudget.ReadAttemptSample(sv, sv.start, sv.end)
		if errors.Is(err, otelbudget.ErrBadDuration) {
			ds.badDuration++
			return
		}
		ds.spansSeen++
		sd := ds.step(ds.spans, step)
		if err == nil {
			sd.add(a.EndedBy, a.Duration, a.End, 1)
		}
		if c, ok := sv.int(attrCeilingMs); ok {
			sd.ceilings[time.Duration(c)*time.Millisecond]++
		}
	case step != "" && verdict != "":
		ds.spansSeen++
		sd := ds.step(ds.spans, step)
		sd.verdicts[verdict]++
		if n, ok := sv.int(attrMaxAttempts); ok {
			sd.maxAtt = int(n)
		}
		if f, ok := sv.int(attrFloorMs); ok {
			sd.floor = time.Duration(f) * time.Millisecond
		}
		ds.calls = append(ds.calls, callSpan{trace: sv.trace, start: sv.start, step: step})
	default:
		if _, numbered := sv.attrs[string(attrNumber)]; step != "" || numbered {
			ds.older++ // an attempt or call span without the attributes read here
		}
	}
}

// stdoutSpan is the part of stdouttrace's SpanStub JSON budgetadvise reads.
type stdoutSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ SpanID string }
	StartTime   time.Time
	EndTime     time.Time
	Attributes  []struct {
		Key   string
		Value struct {
			Type  string
			Value json.RawMessage
		}
	}
}

func (ds *dataset) addStdoutSpan(raw json.RawMessage) error {
	var s stdoutSpan
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	sv := spanView{name: s.Name, start: s.StartTime, end: s.EndTime, attrs: map[string]any{}}
	if id, err := hexTraceID(s.SpanContext.TraceID); err == nil {
		sv.trace = id
	}
	sv.id, sv.parent = hexSpanID(s.SpanContext.SpanID), hexSpanID(s.Parent.SpanID)
	for _, a := range s.Attributes {
		if a.Key == attrHTTPStatus && a.Value.Type == "INT64" {
			_ = json.Unmarshal(a.Value.Value, &sv.status)
		}
		if !strings.HasPrefix(a.Key, "deadline.") {
			continue
		}
		switch a.Value.Type {
		case "STRING":
			var v string
			if json.Unmarshal(a.Value.Value, &v) == nil {
				sv.attrs[a.Key] = v
			}
		case "INT64":
			var v int64
			if json.Unmarshal(a.Value.Value, &v) == nil {
				sv.attrs[a.Key] = v
			}
		case "FLOAT64":
			var v float64
			if json.Unmarshal(a.Value.Value, &v) == nil {
				sv.attrs[a.Key] = v
			}
		case "BOOL":
			var v bool
			if json.Unmarshal(a.Value.Value, &v) == nil {
				sv.attrs[a.Key] = v
			}
		default:
			sv.attrs[a.Key] = otherType("an array")
		}
	}
	ds.addSpan(sv)
	return nil
}

// hexSpanID parses a span ID in hex; the zero ID when s is not one.
func hexSpanID(s string) pcommon.SpanID {
	var id pcommon.SpanID
	if len(s) != 16 {
		return id
	}
	for i := range 8 {
		b, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return pcommon.SpanID{}
		}
		id[i] = byte(b)
	}
	return id
}

func hexTraceID(s string) (pcommon.TraceID, error) {
	var id pcommon.TraceID
	if len(s) != 32 {
		return id, errors.New("not a trace ID")
	}
	for i := range 16 {
		b, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return id, err
		}
		id[i] = byte(b)
	}
	return id, nil
}

// unitNanos returns the nanoseconds in one unit of a duration metric.
func unitNanos(unit string) (float64, bool) {
	switch unit {
	case "s":
		return 1e9, true
	case "ms":
		return 1e6, true
	case "us", "µs":
		return 1e3, true
	case "ns":
		return 1, true
	}
	return 0, false
}

func (ds *dataset) addMetrics(md pmetric.Metrics) {
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		rm := rms.At(i)
		res := attrKey(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for j := range sms.Len() {
			sm := sms.At(j)
			ms := sm.Metrics()
			for k := range ms.Len() {
				m := ms.At(k)
				if m.Name() != otelbudget.MetricAttemptDuration {
					continue
				}
				switch m.Type() {
				case pmetric.MetricTypeHistogram:
					ds.explicit += m.Histogram().DataPoints().Len()
					continue
				case pmetric.MetricTypeExponentialHistogram:
				default:
					continue
				}
				unit, ok := unitNanos(m.Unit())
				if !ok {
					ds.badUnit++
					continue
				}
				eh := m.ExponentialHistogram()
				delta := eh.AggregationTemporality() == pmetric.AggregationTemporalityDelta
				dps := eh.DataPoints()
				for p := range dps.Len() {
					dp := dps.At(p)
					step, _ := dp.Attributes().Get(string(attrStep))
					ended, _ := dp.Attributes().Get(string(attrEndedBy))
					ds.pointsSeen++
					ds.points = append(ds.points, metricPoint{
						key:   res + "|" + sm.Scope().Name() + "|" + attrKey(dp.Attributes()) + "|" + strconv.FormatInt(int64(dp.StartTimestamp()), 10),
						delta: delta, start: dp.StartTimestamp().AsTime(), at: dp.Timestamp().AsTime(), step: step.Str(), ended: parseEndedBy(ended.Str()),
						unit: unit, scale: dp.Scale(), zero: dp.ZeroCount(),
						offset: dp.Positive().Offset(), counts: dp.Positive().BucketCounts().AsRaw(),
						negative: sumCounts(dp.Negative().BucketCounts().AsRaw()),
					})
				}
			}
		}
	}
}

func sumCounts(c []uint64) uint64 {
	var n uint64
	for _, x := range c {
		n += x
	}
	return n
}

// attrKey is a canonical string of a set of attributes.
func attrKey(m pcommon.Map) string {
	var parts []string
	for k, v := range m.All() {
		parts = append(parts, k+"="+v.AsString())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// finish turns the metric points into histograms: of a cumulative stream
// only its latest point counts (each point holds everything since the
// stream's start), of a delta stream every point; streams add up (the fleet
// merge). Each bucket's count goes to the learn bucket of its
// representative value (see bucketValue).
func (ds *dataset) finish() {
	latest := map[string]metricPoint{}
	var all []metricPoint
	for _, p := range ds.points {
		if p.delta {
			all = append(all, p)
			continue
		}
		if q, ok := latest[p.key]; !ok || p.at.After(q.at) {
			latest[p.key] = p
		}
	}
	for _, p := range latest {
		all = append(all, p)
	}
	var negative uint64
	var unnamed int
	for _, p := range all {
		if p.step == "" {
			unnamed++
			continue
		}
		ds.cover(p.start, p.at)
		sd := ds.step(ds.metrics, p.step)
		sd.add(p.ended, 0, p.at, p.zero)
		negative += p.negative
		for i, c := range p.counts {
			sd.add(p.ended, bucketValue(p.scale, p.offset+int32(i), p.unit), p.at, c)
		}
		// The point covers [start, at]: the data's range starts at start
		// (a cumulative stream's first sample may be as old as that).
		if p.start.After(time.Unix(0, 0)) {
			for _, h := range []*learn.Histogram{&sd.hist, &sd.done} {
				if h.Samples > 0 && p.start.Before(h.First) {
					h.First = p.start
				}
			}
		}
	}
	if ds.explicit > 0 {
		ds.note("%s: %s skipped: export it as an exponential histogram (OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION=base2_exponential_bucket_histogram)",
			otelbudget.MetricAttemptDuration, plural(ds.explicit, "explicit-bucket histogram point"))
	}
	if ds.badUnit > 0 {
		ds.note("%s: %s with a unit other than s, ms, us or ns, skipped", otelbudget.MetricAttemptDuration, plural(ds.badUnit, "metric"))
	}
	if unnamed > 0 {
		ds.note("%s: %s with an empty deadline.step (a policy without a Name), skipped: name the policy to get advice for it", otelbudget.MetricAttemptDuration, plural(unnamed, "point"))
	}
	if ds.unnamed > 0 {
		ds.note("%s with an empty deadline.step (a policy without a Name), skipped: name the policy to get advice for it", plural(ds.unnamed, "attempt or call span"))
	}
	for _, k := range slices.Sorted(maps.Keys(ds.wrongType)) {
		ds.note("%s %s (docs/attributes.md gives each key's type)", plural(ds.wrongType[k], "span has", "spans have"), k)
	}
	if negative > 0 {
		ds.note("%s: %d negative durations ignored", otelbudget.MetricAttemptDuration, negative)
	}
	if ds.badDuration > 0 {
		ds.note("%s skipped: a duration below 0 or above %s (a clock jump?)", plural(ds.badDuration, "attempt span", "attempt spans"), otelbudget.MaxAttemptDuration)
	}
	if ds.older > 0 {
		ds.note("%s %s", plural(ds.older, "span", "spans"), olderNoted)
	}
}

// bucketValue is the duration that bucket index i of an exponential
// histogram at scale stands for, in a metric whose unit is unit
// nanoseconds: the point with the same relative distance to both bounds,
// as learn reads its own buckets. When the unit is nanoseconds and the
// scale is 5 or more, the bucket lies inside one learn bucket (the
// downscale to learn's scale is exact); otherwise (seconds, the usual
// unit, or a scale below 5) it adds at most the bucket's own relative error
// (1.08% at scale 5) to learn's.
func bucketValue(scale, i int32, unit float64) time.Duration {
	lo := math.Exp2(float64(i) / math.Exp2(float64(scale)))
	hi := math.Exp2(float64(i+1) / math.Exp2(float64(scale)))
	v := 2 * lo * hi / (lo + hi) * unit
	if !(v < float64(math.MaxInt64)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Round(v))
}

// parseEndedBy returns the deadline.EndedBy named s
// (deadline.attempt.ended_by), 0 for an unknown name (not recorded).
func parseEndedBy(s string) deadline.EndedBy {
	for e := deadline.EndedCompleted; e <= deadline.EndedPanic; e++ {
		if e.String() == s {
			return e
		}
	}
	return 0
}
