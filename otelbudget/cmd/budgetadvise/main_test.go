package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// attempt is one attempt span to write.
type attempt struct {
	step    string
	ended   string
	d       time.Duration
	granted time.Duration
}

// durations returns n deterministic durations spread over [10ms, 110ms).
func durations(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = 10*time.Millisecond + time.Duration(i)*100*time.Millisecond/time.Duration(n)
	}
	return out
}

// traceLine writes attempts (and one call span per step with verdict) as
// one OTLP JSON line, as a Collector's file exporter does.
func traceLine(t *testing.T, attempts []attempt, verdicts map[string]string) []byte {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	ss.Scope().SetName("github.com/deadlinebudget/budget/otelbudget")
	for i, a := range attempts {
		sp := ss.Spans().AppendEmpty()
		sp.SetName(a.step + " attempt")
		sp.SetTraceID(pcommon.TraceID{byte(i), byte(i >> 8), 1})
		start := t0.Add(time.Duration(i) * time.Second)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(a.d)))
		sp.Attributes().PutStr("deadline.step", a.step)
		sp.Attributes().PutInt("deadline.attempt.number", 1)
		sp.Attributes().PutStr("deadline.attempt.ended_by", a.ended)
		sp.Attributes().PutInt("deadline.attempt.ceiling_ms", 100)
		if a.granted > 0 {
			sp.Attributes().PutInt("deadline.attempt.granted_ms", a.granted.Milliseconds())
		}
	}
	for step, v := range verdicts {
		sp := ss.Spans().AppendEmpty()
		sp.SetName(step)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Second)))
		sp.Attributes().PutStr("deadline.step", step)
		sp.Attributes().PutStr("deadline.verdict", v)
		sp.Attributes().PutInt("deadline.max_attempts", 3)
		sp.Attributes().PutInt("deadline.floor_ms", 20)
	}
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	return append(b, '\n')
}

// expPoint is an exponential histogram point of deadline.attempt.duration.
type expPoint struct {
	service string
	step    string
	ended   string
	scale   int32
	unit    string // s or ns
	values  []time.Duration
	at      time.Time
	start   time.Time
	delta   bool
}

func metricLine(t *testing.T, points ...expPoint) []byte {
	md := pmetric.NewMetrics()
	for _, p := range points {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", p.service)
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("deadline.attempt.duration")
		m.SetUnit(p.unit)
		eh := m.SetEmptyExponentialHistogram()
		eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		if p.delta {
			eh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		}
		dp := eh.DataPoints().AppendEmpty()
		dp.Attributes().PutStr("deadline.step", p.step)
		dp.Attributes().PutStr("deadline.attempt.ended_by", p.ended)
		dp.SetScale(p.scale)
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(p.start))
		dp.SetTimestamp(pcommon.NewTimestampFromTime(p.at))
		dp.SetCount(uint64(len(p.values)))
		factor := 1.0
		if p.unit == "s" {
			factor = 1e-9
		}
		idx := map[int32]uint64{}
		lo, hi := int32(math.MaxInt32), int32(math.MinInt32)
		for _, v := range p.values {
			i := int32(math.Ceil(math.Log2(float64(v)*factor)*math.Exp2(float64(p.scale)))) - 1
			idx[i]++
			lo, hi = min(lo, i), max(hi, i)
		}
		dp.Positive().SetOffset(lo)
		for i := lo; i <= hi; i++ {
			dp.Positive().BucketCounts().Append(idx[i])
		}
	}
	b, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
	require.NoError(t, err)
	return append(b, '\n')
}

func writeFile(t *testing.T, lines ...[]byte) string {
	p := filepath.Join(t.TempDir(), "in.json")
	require.NoError(t, os.WriteFile(p, bytes.Join(lines, nil), 0o600))
	return p
}

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// The spans of a Collector file give the same suggestion as learn gives
// for the same attempts recorded in process.
func TestTracesGiveLearnsSuggestion(t *testing.T) {
	var as []attempt
	var want learn.Histogram
	for i, d := range durations(2000) {
		as = append(as, attempt{step: "fetch", ended: "completed", d: d})
		want.Add(deadline.EndedCompleted, d, t0.Add(time.Duration(i)*time.Second).Add(d))
	}
	for range 10 {
		as = append(as, attempt{step: "fetch", ended: "attempt_timeout", d: 100 * time.Millisecond, granted: 100 * time.Millisecond})
		want.Add(deadline.EndedAttemptTimeout, 100*time.Millisecond, t0)
	}
	p := writeFile(t, traceLine(t, as, map[string]string{"fetch": "ok"}))
	code, out, errOut := runCmd(t, "-format", "json", p)
	require.Equal(t, 0, code, errOut)
	var rep report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Steps, 1)
	s := rep.Steps[0]
	assert.Equal(t, "traces", s.Source)
	assert.Equal(t, uint64(2010), s.Attempts)
	assert.Equal(t, uint64(10), s.CeilingTimeouts)
	assert.InDelta(t, 2000.0/2010, s.SuccessRate, 1e-9)
	assert.Equal(t, map[string]int{"ok": 1}, s.Verdicts)
	assert.Equal(t, 100.0, s.CurrentCeilingMs)
	sug, err := learn.Suggest("fetch", &want, learn.SuggestOptions{})
	require.NoError(t, err)
	assert.InDelta(t, ms(sug.Ceiling), s.SuggestedCeilingMs, 1e-6, "the same maths as learn")
	assert.InEpsilon(t, 109.0, s.CompletedMs["p99"], 0.011, "p99 of 10..110ms within the sketch's error")
	require.NotNil(t, rep.Budget)
	assert.Empty(t, rep.Budget.Error)
	assert.Greater(t, rep.Budget.BudgetMs, 0.0)

	code, out, _ = runCmd(t, p)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "◀ current 100ms")
	assert.Contains(t, out, "◀ suggested")
	assert.Contains(t, out, "window 2026-11-30T12:00:00Z")
}

// An exponential histogram in nanoseconds at scale >= 5 is downscaled
// exactly to learn's buckets; in seconds (the SDK's unit) each bucket is
// read at its representative value, within the two sketches' errors. The
// points of two processes add up: the fleet merge.
func TestMetricsReadWithLearnsMaths(t *testing.T) {
	ds := durations(3000)
	var want learn.Histogram
	for _, d := range ds {
		want.Add(deadline.EndedCompleted, d, t0)
	}
	wantSug, err := learn.Suggest("fetch", &want, learn.SuggestOptions{})
	require.NoError(t, err)
	for _, tc := range []struct {
		unit  string
		scale int32
		eps   float64
	}{{"ns", 5, 1e-9}, {"ns", 8, 1e-9}, {"s", 5, 0.022}, {"s", 8, 0.022}, {"s", 3, 0.05}} {
		t.Run(tc.unit+"/"+string(rune('0'+tc.scale)), func(t *testing.T) {
			p := writeFile(t, metricLine(t,
				expPoint{service: "a", step: "fetch", ended: "completed", scale: tc.scale, unit: tc.unit, values: ds[:1000], at: t0, start: t0},
				expPoint{service: "b", step: "fetch", ended: "completed", scale: tc.scale, unit: tc.unit, values: ds[1000:], at: t0, start: t0},
			))
			code, out, errOut := runCmd(t, "-format", "json", p)
			require.Equal(t, 0, code, errOut)
			var rep report
			require.NoError(t, json.Unmarshal([]byte(out), &rep))
			require.Len(t, rep.Steps, 1)
			s := rep.Steps[0]
			assert.Equal(t, "metrics", s.Source)
			assert.Equal(t, uint64(3000), s.Attempts, "the two processes' counts add up")
			assert.InEpsilon(t, ms(wantSug.Ceiling), s.SuggestedCeilingMs, tc.eps)
		})
	}
}

// Of a cumulative stream only the latest point counts; delta points add.
func TestMetricsTemporality(t *testing.T) {
	ds := durations(200)
	p := writeFile(t,
		metricLine(t, expPoint{service: "a", step: "s", ended: "completed", scale: 5, unit: "s", values: ds[:100], at: t0, start: t0}),
		metricLine(t, expPoint{service: "a", step: "s", ended: "completed", scale: 5, unit: "s", values: ds, at: t0.Add(time.Minute), start: t0}),
		metricLine(t, expPoint{service: "b", step: "s", ended: "error", scale: 5, unit: "s", values: ds[:50], at: t0, start: t0, delta: true}),
		metricLine(t, expPoint{service: "b", step: "s", ended: "error", scale: 5, unit: "s", values: ds[:50], at: t0.Add(time.Minute), start: t0.Add(time.Minute), delta: true}),
	)
	code, out, errOut := runCmd(t, "-format", "json", p)
	require.Equal(t, 0, code, errOut)
	var rep report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Steps, 1)
	assert.Equal(t, uint64(300), rep.Steps[0].Attempts)
	assert.Equal(t, uint64(100), rep.Steps[0].Errors)
	assert.Contains(t, rep.Steps[0].NoSuggestion, "300 samples recorded, 1000 needed")
}

// Each kind of bad input gets one clear line; the exit code is 1 only when
// nothing could be read.
func TestBadInput(t *testing.T) {
	good := traceLine(t, []attempt{{step: "fetch", ended: "completed", d: time.Millisecond}}, nil)
	older := ptrace.NewTraces()
	sp := older.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.Attributes().PutStr("deadline.step", "fetch")
	sp.Attributes().PutInt("deadline.attempt.number", 1)
	olderLine, err := (&ptrace.JSONMarshaler{}).MarshalTraces(older)
	require.NoError(t, err)
	foreign := ptrace.NewTraces()
	foreign.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("GET")
	foreignLine, err := (&ptrace.JSONMarshaler{}).MarshalTraces(foreign)
	require.NoError(t, err)
	explicit := pmetric.NewMetrics()
	m := explicit.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("deadline.attempt.duration")
	m.SetUnit("s")
	m.SetEmptyHistogram().DataPoints().AppendEmpty().SetCount(3)
	explicitLine, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(explicit)
	require.NoError(t, err)

	wrong := ptrace.NewTraces()
	wsp := wrong.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	wsp.Attributes().PutInt("deadline.step", 7)
	wsp.Attributes().PutInt("deadline.attempt.number", 1)
	wsp.Attributes().PutStr("deadline.attempt.ended_by", "completed")
	wrongLine, err := (&ptrace.JSONMarshaler{}).MarshalTraces(wrong)
	require.NoError(t, err)
	unnamed := traceLine(t, []attempt{{step: "", ended: "completed", d: time.Millisecond}}, nil)

	for _, tc := range []struct {
		name string
		in   []byte
		code int
		want string
	}{
		{"wrong attribute types", wrongLine, 1, "1 span has deadline.step as an int, not a string: the span is skipped"},
		{"unnamed step", append(append([]byte{}, good...), unnamed...), 0, "1 attempt or call span with an empty deadline.step (a policy without a Name), skipped"},
		{"explicit buckets on two lines", append(append(append(append([]byte{}, explicitLine...), '\n'), explicitLine...), '\n'), 1, "2 explicit-bucket histogram points skipped"},
		{"empty", nil, 1, "empty: no telemetry to read"},
		{"blank", []byte("\n \n"), 1, "empty: no telemetry to read"},
		{"truncated", append(append([]byte{}, good...), good[:len(good)/2]...), 0, "truncated: the object starting on line 2 is incomplete (1 object before it read)"},
		{"truncated only", good[:len(good)/2], 1, "truncated: the object starting on line 1 is incomplete (0 objects before it read)"},
		{"not json", []byte("hello\nworld\n"), 1, "not valid JSON telemetry"},
		{"no project spans", foreignLine, 1, "nothing could be read: no attempt spans"},
		{"older attribute set", olderLine, 1, "an older otelbudget attribute set?"},
		{"explicit buckets", explicitLine, 1, "deadline.attempt.duration: 1 explicit-bucket histogram point skipped: export it as an exponential histogram"},
		{"explicit and spans", append(append(append([]byte{}, explicitLine...), '\n'), good...), 0, "explicit-bucket"},
		{"other json", []byte(`{"a":1}` + "\n[1,2]\n"), 1, "neither OTLP traces or metrics nor stdouttrace spans"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCmd(t, writeFile(t, tc.in))
			assert.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.want)
			for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
				assert.True(t, strings.HasPrefix(line, "budgetadvise: "), "one line each: %q", line)
			}
		})
	}
	code, _, errOut := runCmd(t, filepath.Join(t.TempDir(), "missing.json"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no such file")
	code, out, errOut := runCmd(t, writeFile(t, good), filepath.Join(t.TempDir(), "missing.json"))
	assert.Equal(t, 1, code, "a missing file next to a valid one fails")
	assert.Contains(t, errOut, "no such file")
	assert.Contains(t, errOut, "1 input could not be read: no advice")
	assert.Empty(t, out)
	wrongCode, _, errOut := runCmd(t, writeFile(t, wrongLine))
	assert.Equal(t, 1, wrongCode)
	assert.NotContains(t, errOut, "older otelbudget attribute set", "a wrong type is not taken for an older attribute set")
	code, _, _ = runCmd(t, "-format", "yaml")
	assert.Equal(t, 2, code)
	code, _, errOut = runCmd(t, "-target", "1")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "want a target in (0, 1)")
	code, _, errOut = runCmd(t, "-quantile", "1.5")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "want in (0, 1)")
}

// The demo's stdout export: stdouttrace spans are read (pretty-printed,
// several lines each); stdoutmetric objects are said to be skipped.
func TestStdoutExport(t *testing.T) {
	span := `{
	"Name": "GET",
	"SpanContext": {"TraceID": "004d31ca609c86dd3e60df630b3aa2c6", "SpanID": "e3e57faa055b9b9c"},
	"SpanKind": 3,
	"StartTime": "2026-12-01T04:10:37.2Z",
	"EndTime": "2026-12-01T04:10:37.3Z",
	"Attributes": [
		{"Key": "deadline.step", "Value": {"Type": "STRING", "Value": "fetch"}},
		{"Key": "deadline.attempt.ended_by", "Value": {"Type": "STRING", "Value": "attempt_timeout"}},
		{"Key": "deadline.attempt.granted_ms", "Value": {"Type": "INT64", "Value": 100}},
		{"Key": "deadline.attempt.ceiling_ms", "Value": {"Type": "INT64", "Value": 100}}
	]
}
`
	metric := `{"Resource": [], "ScopeMetrics": []}` + "\n"
	code, out, errOut := runCmd(t, "-format", "json", "-min-samples", "1", writeFile(t, []byte(span), []byte(span), []byte(metric)))
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "1 stdoutmetric object skipped:")
	var rep report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Steps, 1)
	assert.Equal(t, uint64(2), rep.Steps[0].CeilingTimeouts)
	assert.True(t, rep.Steps[0].Censored)
	assert.Equal(t, 100.0, rep.Steps[0].RaiseAboveMs)
}

func FuzzRead(f *testing.F) {
	t := &testing.T{}
	f.Add([]byte(""))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","attributes":[{"key":"deadline.step","value":{"stringValue":"a"}},{"key":"deadline.attempt.ended_by","value":{"stringValue":"completed"}}]}]}]}]}`))
	f.Add([]byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"deadline.attempt.duration","unit":"s","exponentialHistogram":{"dataPoints":[{"scale":-10,"positive":{"offset":2147483600,"bucketCounts":["18446744073709551615","1"]},"attributes":[{"key":"deadline.step","value":{"stringValue":"a"}}]}]}}]}]}]}`))
	f.Add([]byte(`{"Name":"a","SpanContext":{"TraceID":"zz"},"Attributes":[{"Key":"deadline.step","Value":{"Type":"INT64","Value":"x"}}]}`))
	_ = t
	f.Fuzz(func(t *testing.T, in []byte) {
		ds := newDataset()
		_ = ds.read("fuzz", bytes.NewReader(in))
		ds.finish()
		if nothingRead(ds) == nil {
			rep := advise(ds, options{suggest: learn.SuggestOptions{MinSamples: 1}, target: 0.99, attempts: 3})
			_ = writeText(&bytes.Buffer{}, rep)
			_ = writeJSON(&bytes.Buffer{}, rep)
			_ = writeReport(&bytes.Buffer{}, rep, ds, 3, reportMeta{})
		}
	})
}

// Zero durations draw as their own row, whatever the ceilings: the range
// drawn never spans the zero bucket's index.
func TestHistogramZeroBin(t *testing.T) {
	sd := newStepData()
	sd.add(deadline.EndedCompleted, 0, t0, 5)
	var b strings.Builder
	writeHistogram(&b, stepReport{data: sd, CurrentCeilingMs: 100, SuggestedCeilingMs: 0.5})
	assert.Contains(t, b.String(), "≤       0 │")
	assert.Contains(t, b.String(), "◀ current 100ms")
	assert.Less(t, strings.Count(b.String(), "\n"), 90)
}

// When more than 1 - q of the attempts were cut but a few completed past
// the cut (an answer racing the ceiling), the suggestion says it is
// doubtful rather than passing the late completions off as the tail.
func TestWarnsWhenCutsHideTheTail(t *testing.T) {
	var as []attempt
	for _, d := range durations(700) {
		as = append(as, attempt{step: "fetch", ended: "completed", d: d * 9 / 11})
	}
	for range 280 {
		as = append(as, attempt{step: "fetch", ended: "attempt_timeout", d: 100 * time.Millisecond, granted: 100 * time.Millisecond})
	}
	for range 20 {
		as = append(as, attempt{step: "fetch", ended: "completed", d: 104 * time.Millisecond})
	}
	code, out, errOut := runCmd(t, "-format", "json", writeFile(t, traceLine(t, as, nil)))
	require.Equal(t, 0, code, errOut)
	var rep report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Steps, 1)
	// learn refuses the quantile: more than 1 - q of the attempts were cut,
	// so p99 is above the cuts, whatever the few late answers say.
	assert.True(t, rep.Steps[0].Censored, "censored")
	assert.Equal(t, 100.0, rep.Steps[0].RaiseAboveMs)
	assert.Zero(t, rep.Steps[0].SuggestedCeilingMs, "no ceiling suggested")
	assert.Contains(t, rep.Steps[0].NoSuggestion, "raise the ceiling above 100ms")
}

// One run (the demo's): no empty tables, one line on the runs a
// suggestion needs and the command that records them.
func TestSingleRun(t *testing.T) {
	runs := genRuns("demo", 3, 1, 0, t0)
	p := writeFile(t, traceLines(t, runs, 1)...)
	code, out, errOut := runCmd(t, p)
	require.Equal(t, 0, code, errOut)
	assert.Less(t, strings.Count(out, "\n"), 30, "a few lines per step:\n%s", out)
	assert.NotContains(t, out, "│", "no histogram of one attempt")
	assert.Equal(t, 1, strings.Count(out, "need more runs"), out)
	assert.Contains(t, out, "need more runs: 1 run read")
	assert.Contains(t, out, "record about 1000 runs of the service (its spans, as your Collector exports them); for the demo's data, `make advise RUNS=1000` in a clone of github.com/deadlinebudget/budget",
		"what works outside the repository first; make advise only where it works")
	assert.NotContains(t, out, "samples recorded", "one line, not one per step")

	code, out, _ = runCmd(t, "-format", "json", p)
	require.Equal(t, 0, code)
	var rep report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.NotNil(t, rep.MoreRuns)
	assert.Equal(t, 1000, rep.MoreRuns.Runs)
	assert.Equal(t, "make advise RUNS=1000", rep.MoreRuns.Command)
}
