package test

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The known-truth data set of budgetadvise's tests
// (otelbudget/cmd/budgetadvise/gen_test.go, which a test of another module
// cannot import): the runs of an agent's plan (search, fetch, extract) on
// two instances, under a 1s budget, fetch's 100ms ceiling cutting about 11%
// of its attempts. The generator below draws the same runs from the same
// seeds; only what the spans need is kept.

type genAttempt struct {
	number  int
	start   time.Duration
	used    time.Duration
	granted time.Duration
	limit   string
	ended   string
	wait    time.Duration
	fits    bool
}

type genCall struct {
	step        string
	ceiling     time.Duration
	maxAttempts int
	start, end  time.Duration
	remaining   time.Duration
	attempts    []genAttempt
	reason      string
	verdict     string
}

type genRun struct {
	instance string
	start    time.Time
	budget   time.Duration
	calls    []genCall
}

const genFloor = 20 * time.Millisecond

type genStep struct {
	name        string
	ceiling     time.Duration
	maxAttempts int
	median      time.Duration
	sigma       float64
	errors      float64
}

var genPlan = []genStep{
	{"search", 250 * time.Millisecond, 2, 20 * time.Millisecond, 0.4, 0},
	{"fetch", 100 * time.Millisecond, 3, 50 * time.Millisecond, 0.565, 0.02},
	{"extract", 200 * time.Millisecond, 2, 30 * time.Millisecond, 0.3, 0},
}

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// truthRuns is the data set: 1500 runs on each of two instances.
func truthRuns() []genRun {
	return append(genRuns("agent-a", 1, 1500, 97, t0), genRuns("agent-b", 2, 1500, 0, t0.Add(time.Second))...)
}

func genRuns(instance string, seed uint64, n, down int, start time.Time) []genRun {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	runs := make([]genRun, 0, n)
	for i := range n {
		r := genRun{instance: instance, start: start.Add(time.Duration(i) * 2 * time.Second), budget: time.Second}
		now := time.Duration(0)
		for _, s := range genPlan {
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
			if c.reason == "attempts_exhausted" {
				break
			}
		}
		runs = append(runs, r)
	}
	return runs
}

// tracesOf puts runs in OTLP traces, one resource per run: service.name
// "agent" (both instances are one service), service.instance.id the
// instance; a call span per call, an attempt span per attempt, as
// otelbudget records them.
func tracesOf(runs []genRun, first uint64) ptrace.Traces {
	td := ptrace.NewTraces()
	for j, r := range runs {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "agent")
		rs.Resource().Attributes().PutStr("service.instance.id", r.instance)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("github.com/deadlinebudget/budget/otelbudget")
		writeRun(ss.Spans(), r, first+uint64(j))
	}
	return td
}

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
	for _, c := range r.calls {
		cs := span(pcommon.SpanID{}, c.step, c.start, c.end)
		at := cs.Attributes()
		at.PutStr("deadline.step", c.step)
		at.PutInt("deadline.budget_ms", r.budget.Milliseconds())
		at.PutInt("deadline.ceiling_ms", c.ceiling.Milliseconds())
		at.PutInt("deadline.floor_ms", genFloor.Milliseconds())
		at.PutInt("deadline.max_attempts", int64(c.maxAttempts))
		at.PutStr("deadline.stop_reason", c.reason)
		at.PutStr("deadline.verdict", c.verdict)
		for _, a := range c.attempts {
			as := span(cs.SpanID(), c.step+" attempt", a.start, a.start+a.used)
			aa := as.Attributes()
			aa.PutStr("deadline.step", c.step)
			aa.PutInt("deadline.attempt.number", int64(a.number))
			aa.PutInt("deadline.attempt.ceiling_ms", c.ceiling.Milliseconds())
			aa.PutInt("deadline.attempt.granted_ms", a.granted.Milliseconds())
			aa.PutStr("deadline.attempt.limited_by", a.limit)
			aa.PutStr("deadline.attempt.ended_by", a.ended)
		}
	}
}
