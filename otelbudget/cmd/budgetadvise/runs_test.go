package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Which deadline bound each call: the run's; the caller's context, when
// the call's time left ends before the run's deadline; an enclosing
// attempt, when the call span is an attempt's child. A refused call and
// the waits are kept for the waterfall.
func TestBuildRunBoundBy(t *testing.T) {
	tr := pcommon.TraceID{1}
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	span := func(id, parent byte, from, to int, attrs map[string]any) spanView {
		return spanView{trace: tr, id: pcommon.SpanID{id}, parent: pcommon.SpanID{parent}, start: at(from), end: at(to), attrs: attrs}
	}
	spans := []spanView{
		span(1, 0, 0, 900, map[string]any{"deadline.budget_ms": int64(1000), "deadline.run.outcome": "budget_exhausted", "deadline.run.exhausted_by": "extract"}),
		span(2, 1, 0, 400, map[string]any{"deadline.step": "fetch", "deadline.verdict": "ok", "deadline.remaining_at_start_ms": int64(1000), "deadline.stop_reason": "success"}),
		span(3, 2, 0, 100, map[string]any{"deadline.step": "fetch", "deadline.attempt.ended_by": "attempt_timeout", "deadline.attempt.number": int64(1),
			"deadline.attempt.granted_ms": int64(100), "deadline.attempt.limited_by": "ceiling", "deadline.backoff.delay_ms": int64(50), "deadline.backoff.fits": true}),
		span(4, 2, 150, 400, map[string]any{"deadline.step": "fetch", "deadline.attempt.ended_by": "completed", "deadline.attempt.number": int64(2)}),
		span(5, 4, 160, 200, map[string]any{"deadline.step": "lookup", "deadline.verdict": "ok", "deadline.remaining_at_start_ms": int64(240)}),
		span(6, 1, 400, 600, map[string]any{"deadline.step": "rank", "deadline.verdict": "ok", "deadline.remaining_at_start_ms": int64(300)}),
		span(7, 1, 880, 880, map[string]any{"deadline.step": "extract", "deadline.verdict": "deadline_too_small", "deadline.remaining_at_start_ms": int64(120),
			"deadline.stop_reason": "refused", "deadline.remaining_ms": int64(20)}),
	}
	r, ok := buildRun(tr, spans)
	require.True(t, ok)
	assert.Equal(t, time.Second, r.budget)
	assert.Equal(t, 900*time.Millisecond, r.used)
	assert.True(t, r.failed)
	assert.Equal(t, "extract", r.exhausted)
	require.Len(t, r.calls, 4)
	bound := map[string]string{}
	for _, c := range r.calls {
		bound[c.step] = c.boundBy
	}
	assert.Equal(t, map[string]string{"fetch": boundRun, "lookup": boundAttempt, "rank": boundContext, "extract": boundRun}, bound)
	fetch := r.calls[0]
	require.Len(t, fetch.attempts, 2)
	assert.Equal(t, attemptView{number: 1, used: 100 * time.Millisecond, granted: 100 * time.Millisecond, limitedBy: "ceiling",
		endedBy: "attempt_timeout", wait: 50 * time.Millisecond, hasWait: true, waitFits: true}, fetch.attempts[0])
	assert.Equal(t, "refused", r.calls[3].reason)

	chosen := chooseRuns([]runView{{used: 1}, {used: 3}, {used: 2, failed: true}, {used: 5, failed: true}, {used: 4}}, 1)
	require.Len(t, chosen, 2)
	assert.Equal(t, []time.Duration{5, 4}, []time.Duration{chosen[0].used, chosen[1].used}, "the slowest failed run, then the slowest other")
}

// The failed runs drawn are one of each kind first: a run too slow is shown
// beside the many, slower, whose budget was too small.
func TestChooseRunsOneOfEachKind(t *testing.T) {
	small := func(used time.Duration) runView {
		return runView{used: used, failed: true, outcome: "budget_exhausted", calls: []callView{{step: "extract", verdict: "deadline_too_small"}}}
	}
	slow := runView{used: 100, failed: true, outcome: "failed", calls: []callView{{step: "fetch", verdict: "operation_too_slow"}}}
	chosen := chooseRuns([]runView{small(900), small(800), small(700), slow}, 2)
	require.Len(t, chosen, 2)
	assert.Equal(t, []time.Duration{900, 100}, []time.Duration{chosen[0].used, chosen[1].used}, "the slowest too small, then the too slow")
}
