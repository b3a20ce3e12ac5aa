package main

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A generated data set with a known truth: the runs of an agent's plan
// (search, fetch, extract) on two instances, under a 1s budget and the
// article's policies, fetch's 100ms ceiling cutting about 11% of its
// attempts. Every duration is drawn from a seeded source, so the exact
// percentiles, the censored share and the date range are known.

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

const genFloor = 20 * time.Millisecond

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

// genPlan is the plan: fetch's σ puts ~11% of its attempts above its
// 100ms ceiling (ln 2 / 0.565 ≈ 1.23 standard deviations).
var genPlan = []genStep{
	{"search", 250 * time.Millisecond, 2, 20 * time.Millisecond, 0.4, 0},
	{"fetch", 100 * time.Millisecond, 3, 50 * time.Millisecond, 0.565, 0.02},
	{"extract", 200 * time.Millisecond, 2, 30 * time.Millisecond, 0.3, 0},
}

// genRuns plays n runs of the plan on instance, one every 2 seconds from
// start, with a budget of 1s; every down-th run (0: none) finds fetch's
// provider failing every attempt.
func genRuns(instance string, seed uint64, n, down int, start time.Time) []genRun {
	return genRunsPlan(genPlan, instance, seed, n, down, start)
}

// genRunsPlan is genRuns with plan's policies and latencies.
func genRunsPlan(plan []genStep, instance string, seed uint64, n, down int, start time.Time) []genRun {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	runs := make([]genRun, 0, n)
	for i := range n {
		r := genRun{instance: instance, start: start.Add(time.Duration(i) * 2 * time.Second), budget: time.Second, outcome: "ok"}
		now := time.Duration(0)
		for _, s := range plan {
			c := genCall{step: s.name, ceiling: s.ceiling, maxAttempts: s.maxAttempts, start: now, remaining: r.budget - now}
			for k := 1; ; k++ {
				left := r.budget - now
				if left <= genFloor {
					c.reason, c.verdict = "refused", "deadline_too_small"
					break
				}
				a := genAttempt{number: k, start: now, granted: s.ceiling, limit: "ceiling"}
				if left-genFloor < s.ceiling {
					a.granted, a.limit = left-genFloor, "deadline"
				}
				d := time.Duration(float64(s.median) * math.Exp(s.sigma*rng.NormFloat64()))
				failing := s.name == "fetch" && down > 0 && i%down == down-1
				isErr := failing || rng.Float64() < s.errors
				switch {
				case d >= a.granted && a.limit == "ceiling":
					a.used, a.ended = a.granted, "attempt_timeout"
				case d >= a.granted:
					a.used, a.ended = a.granted, "deadline"
				case isErr:
					a.used, a.ended = d/4, "error"
				default:
					a.used, a.ended = d, "completed"
				}
				now += a.used
				if a.ended == "completed" {
					c.attempts = append(c.attempts, a)
					c.reason, c.verdict = "success", "ok"
					break
				}
				if a.ended == "deadline" {
					c.attempts = append(c.attempts, a)
					c.reason, c.verdict = "deadline_exceeded", "deadline_too_small"
					break
				}
				if k == s.maxAttempts {
					c.attempts = append(c.attempts, a)
					c.reason, c.verdict = "attempts_exhausted", "operation_failed"
					if slices.ContainsFunc(c.attempts, func(a genAttempt) bool { return a.ended == "attempt_timeout" }) {
						c.verdict = "operation_too_slow"
					}
					break
				}
				a.wait = time.Duration(rng.Int64N(int64(50*time.Millisecond) << (k - 1)))
				a.fits = a.wait < r.budget-now-genFloor
				c.attempts = append(c.attempts, a)
				if !a.fits {
					c.reason, c.verdict = "backoff_exceeds_budget", "deadline_too_small"
					break
				}
				now += a.wait
			}
			c.end = now
			r.calls = append(r.calls, c)
			if c.verdict != "ok" && r.outcome == "ok" {
				r.outcome = "failed"
				if c.reason != "attempts_exhausted" {
					r.outcome = "budget_exhausted"
				}
			}
			if c.reason == "attempts_exhausted" {
				break // the plan stops on a failure other than the budget
			}
		}
		runs = append(runs, r)
	}
	return runs
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
