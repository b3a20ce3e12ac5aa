package test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/deadlinebudget/budget/otelbudget/truthtest"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// truthRuns is the known-truth data set of budgetadvise's tests,
// otelbudget/truthtest's: the runs of an agent's plan (search, fetch,
// extract), 1500 on each of two instances, under a 1s budget, fetch's
// 100ms ceiling cutting about 11% of its attempts.
func truthRuns(t *testing.T) []truthtest.Run {
	t.Helper()
	var runs []truthtest.Run
	for _, s := range truthtest.KnownTruth(t0) {
		rs, err := s.Runs()
		require.NoError(t, err)
		runs = append(runs, rs...)
	}
	return runs
}

// tracesOf puts runs in OTLP traces, one resource per run: service.name
// "agent" (both instances are one service), service.instance.id the
// instance; a call span per call, an attempt span per attempt, as
// otelbudget records them.
func tracesOf(runs []truthtest.Run, first uint64) ptrace.Traces {
	td := ptrace.NewTraces()
	for j, r := range runs {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "agent")
		rs.Resource().Attributes().PutStr("service.instance.id", r.Instance)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("github.com/deadlinebudget/budget/otelbudget")
		writeRun(ss.Spans(), r, first+uint64(j))
	}
	return td
}

func writeRun(spans ptrace.SpanSlice, r truthtest.Run, id uint64) {
	trace := pcommon.TraceID{byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id), 0xad, 0x71, 0x5e}
	copy(trace[8:], r.Instance)
	var n uint64
	span := func(parent pcommon.SpanID, name string, from, to time.Duration) ptrace.Span {
		n++
		sp := spans.AppendEmpty()
		sp.SetTraceID(trace)
		sp.SetSpanID(pcommon.SpanID{byte(n), byte(id), byte(id >> 8), byte(id >> 16), 1})
		sp.SetParentSpanID(parent)
		sp.SetName(name)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(r.Start.Add(from)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(r.Start.Add(to)))
		return sp
	}
	for _, c := range r.Calls {
		cs := span(pcommon.SpanID{}, c.Step, c.Start, c.End)
		at := cs.Attributes()
		at.PutStr("deadline.step", c.Step)
		at.PutInt("deadline.budget_ms", r.Budget.Milliseconds())
		at.PutInt("deadline.ceiling_ms", c.Ceiling.Milliseconds())
		at.PutInt("deadline.floor_ms", truthtest.Floor.Milliseconds())
		at.PutInt("deadline.max_attempts", int64(c.MaxAttempts))
		at.PutStr("deadline.stop_reason", c.Reason)
		at.PutStr("deadline.verdict", c.Verdict)
		for _, a := range c.Attempts {
			as := span(cs.SpanID(), c.Step+" attempt", a.Start, a.Start+a.Used)
			aa := as.Attributes()
			aa.PutStr("deadline.step", c.Step)
			aa.PutInt("deadline.attempt.number", int64(a.Number))
			aa.PutInt("deadline.attempt.ceiling_ms", c.Ceiling.Milliseconds())
			aa.PutInt("deadline.attempt.granted_ms", a.Granted.Milliseconds())
			aa.PutStr("deadline.attempt.limited_by", a.LimitedBy)
			aa.PutStr("deadline.attempt.ended_by", a.EndedBy)
		}
	}
}
