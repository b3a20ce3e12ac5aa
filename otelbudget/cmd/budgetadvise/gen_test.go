package main

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/deadlinebudget/budget/otelbudget/truthtest"
)

// A generated data set with a known truth: the runs of an agent's plan
// (search, fetch, extract) on two instances, under a 1s budget and the
// article's policies, fetch's 100ms ceiling cutting about 11% of its
// attempts. The runs are otelbudget/truthtest's (the connector's tests
// draw the same ones); the types below are what this package's tests
// write as spans and metrics, with what only they need (HTTP statuses,
// Retry-After, the run span's exhausted_by or its absence).

// genAttempt is one generated attempt.
type genAttempt struct {
	number  int
	start   time.Duration // from the run's start
	used    time.Duration // the span's length
	granted time.Duration
	limit   string // ceiling or deadline
	ended   string // completed, error, attempt_timeout, deadline
	wait    time.Duration
	fits    bool
	status  int  // the HTTP status of a failed attempt, 0: none
	after   bool // the wait is a server's Retry-After
}

// genCall is one generated call.
type genCall struct {
	step        string
	ceiling     time.Duration
	maxAttempts int
	start, end  time.Duration
	remaining   time.Duration // at start
	attempts    []genAttempt
	reason      string
	verdict     string
}

// genRun is one generated run.
type genRun struct {
	instance string
	start    time.Time
	budget   time.Duration
	calls    []genCall
	outcome  string
	// exhaustedBy is the run span's deadline.run.exhausted_by, and
	// noRunSpan leaves the run span out (the outcome is then derived).
	exhaustedBy string
	noRunSpan   bool
}

const genFloor = truthtest.Floor

// genStep is a step's policy and latency: log-normal with the median and
// σ, a share of retryable errors.
type genStep struct {
	name        string
	ceiling     time.Duration
	maxAttempts int
	median      time.Duration
	sigma       float64
	errors      float64
}

// genPlan is truthtest's plan: fetch's σ puts ~11% of its attempts above
// its 100ms ceiling.
var genPlan = func() []genStep {
	var plan []genStep
	for _, s := range truthtest.Plan() {
		plan = append(plan, genStep{s.Name, s.Ceiling, s.MaxAttempts, s.Median, s.Sigma, s.Errors})
	}
	return plan
}()

// genRuns plays n runs of the plan on instance, one every 2 seconds from
// start, with a budget of 1s; every down-th run (0: none) finds fetch's
// provider failing every attempt.
func genRuns(instance string, seed uint64, n, down int, start time.Time) []genRun {
	return genRunsPlan(genPlan, instance, seed, n, down, start)
}

// genRunsPlan is genRuns with plan's policies and latencies.
func genRunsPlan(plan []genStep, instance string, seed uint64, n, down int, start time.Time) []genRun {
	steps := make([]truthtest.Step, 0, len(plan))
	for _, s := range plan {
		steps = append(steps, truthtest.Step{Name: s.name, Ceiling: s.ceiling, MaxAttempts: s.maxAttempts, Median: s.median, Sigma: s.sigma, Errors: s.errors})
	}
	return genSetRuns(truthtest.Set{Instance: instance, Seed: seed, N: n, Plan: steps, Failing: "fetch", FailEvery: down, Start: start})
}

// genSetRuns generates the runs of s. The tests' sets are constants: one
// truthtest refuses is a mistake in a test, and panics it.
func genSetRuns(s truthtest.Set) []genRun {
	runs, err := s.Runs()
	if err != nil {
		panic(err)
	}
	out := make([]genRun, 0, len(runs))
	for _, r := range runs {
		g := genRun{instance: r.Instance, start: r.Start, budget: r.Budget, outcome: r.Outcome}
		for _, c := range r.Calls {
			gc := genCall{step: c.Step, ceiling: c.Ceiling, maxAttempts: c.MaxAttempts, start: c.Start, end: c.End,
				remaining: c.Remaining, reason: c.Reason, verdict: c.Verdict}
			for _, a := range c.Attempts {
				gc.attempts = append(gc.attempts, genAttempt{number: a.Number, start: a.Start, used: a.Used, granted: a.Granted,
					limit: a.LimitedBy, ended: a.EndedBy, wait: a.Wait, fits: a.Fits})
			}
			g.calls = append(g.calls, gc)
		}
		out = append(out, g)
	}
	return out
}

// traceLines writes runs as OTLP JSON, per lines of per runs each, as a
// Collector's file exporter does (one ExportTraceServiceRequest a line).
func traceLines(t *testing.T, runs []genRun, per int) [][]byte {
	var out [][]byte
	for i := 0; i < len(runs); i += per {
		td := ptrace.NewTraces()
		for j, r := range runs[i:min(i+per, len(runs))] {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", r.instance)
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName("github.com/deadlinebudget/budget/otelbudget")
			writeRun(ss.Spans(), r, uint64(i+j))
		}
		b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		require.NoError(t, err)
		out = append(out, append(b, '\n'))
	}
	return out
}

// writeRun appends the spans of r: the run span, a call span per call,
// an attempt span per attempt, as otelbudget records them.
func writeRun(spans ptrace.SpanSlice, r genRun, id uint64) {
	trace := pcommon.TraceID{byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id), 0xad, 0x71, 0x5e}
	copy(trace[8:], r.instance)
	var n uint64
	span := func(parent pcommon.SpanID, name string, from, to time.Duration) ptrace.Span {
		n++
		sp := spans.AppendEmpty()
		sp.SetTraceID(trace)
		sp.SetSpanID(pcommon.SpanID{byte(n), byte(id), byte(id >> 8), byte(id >> 16), 1})
		sp.SetParentSpanID(parent)
		sp.SetName(name)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(r.start.Add(from)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(r.start.Add(to)))
		return sp
	}
	end := r.calls[len(r.calls)-1].end
	var rootID pcommon.SpanID
	if !r.noRunSpan {
		root := span(pcommon.SpanID{}, "agent run", 0, end)
		root.Attributes().PutInt("deadline.budget_ms", r.budget.Milliseconds())
		root.Attributes().PutStr("deadline.run.outcome", r.outcome)
		if r.exhaustedBy != "" {
			root.Attributes().PutStr("deadline.run.exhausted_by", r.exhaustedBy)
		}
		rootID = root.SpanID()
	}
	for _, c := range r.calls {
		cs := span(rootID, c.step, c.start, c.end)
		at := cs.Attributes()
		at.PutStr("deadline.step", c.step)
		at.PutInt("deadline.budget_ms", r.budget.Milliseconds())
		at.PutInt("deadline.remaining_at_start_ms", c.remaining.Milliseconds())
		at.PutInt("deadline.ceiling_ms", c.ceiling.Milliseconds())
		at.PutInt("deadline.floor_ms", genFloor.Milliseconds())
		at.PutInt("deadline.max_attempts", int64(c.maxAttempts))
		at.PutInt("deadline.remaining_ms", (r.budget - c.end).Milliseconds())
		at.PutInt("deadline.attempts", int64(len(c.attempts)))
		at.PutStr("deadline.stop_reason", c.reason)
		at.PutStr("deadline.verdict", c.verdict)
		for _, a := range c.attempts {
			as := span(cs.SpanID(), c.step+" attempt", a.start, a.start+a.used)
			aa := as.Attributes()
			aa.PutStr("deadline.step", c.step)
			aa.PutInt("deadline.attempt.number", int64(a.number))
			aa.PutInt("deadline.attempt.ceiling_ms", c.ceiling.Milliseconds())
			aa.PutInt("deadline.attempt.granted_ms", a.granted.Milliseconds())
			aa.PutInt("deadline.attempt.remaining_ms", (r.budget - a.start).Milliseconds())
			aa.PutStr("deadline.attempt.limited_by", a.limit)
			aa.PutStr("deadline.attempt.ended_by", a.ended)
			if a.status != 0 {
				aa.PutInt("http.response.status_code", int64(a.status))
				aa.PutStr("error.type", strconv.Itoa(a.status))
			}
			if a.ended != "completed" && (a.wait > 0 || a.fits) {
				src := "policy"
				if a.after {
					src = "retry_after"
					aa.PutInt("deadline.retry_after_ms", a.wait.Milliseconds())
				}
				aa.PutInt("deadline.backoff.delay_ms", a.wait.Milliseconds())
				aa.PutStr("deadline.backoff.source", src)
				aa.PutBool("deadline.backoff.fits", a.fits)
			}
		}
	}
}

// genMetricLine writes the attempt durations of runs as one OTLP JSON
// metrics line: per instance, step and ended_by, a cumulative exponential
// histogram point in seconds at scale 5, covering [start, at].
func genMetricLine(t *testing.T, runs []genRun, start, at time.Time) []byte {
	type key struct{ instance, step, ended string }
	values := map[key][]time.Duration{}
	for _, r := range runs {
		for _, c := range r.calls {
			for _, a := range c.attempts {
				k := key{r.instance, c.step, a.ended}
				values[k] = append(values[k], a.used)
			}
		}
	}
	var points []expPoint
	for _, k := range slices.SortedFunc(maps.Keys(values), func(a, b key) int {
		return strings.Compare(a.instance+a.step+a.ended, b.instance+b.step+b.ended)
	}) {
		points = append(points, expPoint{service: k.instance, step: k.step, ended: k.ended, scale: 5, unit: "s", values: values[k], at: at, start: start})
	}
	return metricLine(t, points...)
}

// truth is what the generated runs say about a step: every attempt, the
// completed ones' durations sorted, the cut ones.
type truth struct {
	attempts  int
	completed []time.Duration
	cut       int
}

func truthOf(runs []genRun, step string) truth {
	var tr truth
	for _, r := range runs {
		for _, c := range r.calls {
			if c.step != step {
				continue
			}
			for _, a := range c.attempts {
				tr.attempts++
				if a.ended == "attempt_timeout" || a.ended == "deadline" {
					tr.cut++
				} else {
					tr.completed = append(tr.completed, a.used)
				}
			}
		}
	}
	slices.Sort(tr.completed)
	return tr
}

// percentile is the exact q-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
