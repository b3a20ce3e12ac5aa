package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// slowRun is the demo's slow scenario: fetch's attempts all cut by their
// ceiling, the plan stopped, extract never started.
func slowRun(start time.Time) genRun {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	return genRun{instance: "agent-s", start: start, budget: time.Second, outcome: "failed",
		calls: []genCall{
			{step: "search", ceiling: ms(250), maxAttempts: 2, start: 0, end: ms(12), remaining: time.Second, reason: "success", verdict: "ok",
				attempts: []genAttempt{{number: 1, used: ms(12), granted: ms(250), limit: "ceiling", ended: "completed"}}},
			{step: "fetch", ceiling: ms(100), maxAttempts: 2, start: ms(12), end: ms(260), remaining: ms(988), reason: "attempts_exhausted", verdict: "operation_too_slow",
				attempts: []genAttempt{
					{number: 1, start: ms(12), used: ms(100), granted: ms(100), limit: "ceiling", ended: "attempt_timeout"},
					{number: 2, start: ms(160), used: ms(100), granted: ms(100), limit: "ceiling", ended: "attempt_timeout"},
				}},
		}}
}

// A card's success share never rounds to what it is not: 2 003 of 2 004
// attempts is not "success 100.0%" beside "errors 1".
func TestReportSuccessShareNeverRoundsToAll(t *testing.T) {
	var b strings.Builder
	writeStepPanel(&b, stepReport{Step: "extract", Source: "traces", Attempts: 2004, Successes: 2003, Errors: 1, SuccessRate: 2003.0 / 2004, Completed: 2004}, histAxis{})
	card := text(b.String())
	assert.Contains(t, card, "2004 · 2003 succeeded (>99.9%) · 1 error")
	assert.NotContains(t, card, "100.0%")
	assert.Equal(t, "<0.1%", share(1, 2004))
	assert.Equal(t, "50.0%", share(1, 2))
	assert.Equal(t, "100%", share(3, 3))
}

// Every verdict the deadline package can give, every run outcome and
// not_run are explained on the page (downstream_overloaded and
// downstream_open were missing).
func TestReportGlossaryHasEveryWord(t *testing.T) {
	page, _ := reportOf(t, fewRuns())
	gl := regexp.MustCompile(`(?s)<dl id="outcomes".*?</dl>`).FindString(page)
	require.NotEmpty(t, gl)
	words := []string{otelbudget.RunOK, otelbudget.RunBudgetExhausted, otelbudget.RunFailed, otelbudget.RunCanceled, notRun}
	for _, v := range []deadline.Verdict{deadline.VerdictOK, deadline.VerdictCanceled, deadline.VerdictThrottled, deadline.VerdictRetriesThrottled,
		deadline.VerdictOverloaded, deadline.VerdictOpen, deadline.VerdictTooSlow, deadline.VerdictDeadlineTooSmall, deadline.VerdictFailed} {
		words = append(words, string(v))
	}
	for _, w := range words {
		assert.Equal(t, 1, strings.Count(gl, "<dt>"+w+"</dt>"), "%q explained once", w)
	}
}

// The rate-limited run, which used 1.2 s of its 3 s, is labelled by what
// stopped it (throttled: a Retry-After longer than what was left), not
// budget_exhausted; the refused run by its verdict, deadline_too_small.
func TestReportLabelsARunByWhatStoppedIt(t *testing.T) {
	runs := fewRuns()
	page, _ := reportOf(t, runs)
	thr := runSection(t, page, traceHex(runs[len(runs)-2], uint64(len(runs)-2)))
	assert.Regexp(t, `class="outcome bad"[^>]*>throttled<`, thr)
	assert.NotRegexp(t, `class="outcome[^"]*"[^>]*>budget_exhausted<`, thr)
	assert.Contains(t, thr, `title="deadline.run.outcome: budget_exhausted"`, "the span's outcome is kept, as a tooltip")
	ref := runSection(t, page, traceHex(runs[len(runs)-1], uint64(len(runs)-1)))
	assert.Regexp(t, `class="outcome bad"[^>]*>deadline_too_small<`, ref)
}

// The slow run lists extract as not_run, as the terminal does, where the
// page left it out.
func TestReportSlowRunListsNotRun(t *testing.T) {
	runs := append(genRuns("agent-a", 1, 20, 0, t0), slowRun(t0.Add(time.Hour)))
	page, _ := reportOf(t, runs)
	sec := runSection(t, page, traceHex(runs[len(runs)-1], uint64(len(runs)-1)))
	assert.Contains(t, sec, `<tr class="notrun" data-step="extract">`)
	assert.Contains(t, text(sec), "extract not_run")
	assert.Regexp(t, `class="outcome bad"[^>]*>operation_too_slow<`, sec)
	drawn := 0
	for i := range 20 {
		if hex := traceHex(runs[i], uint64(i)); strings.Contains(page, `data-trace="`+hex+`"`) {
			drawn++
			assert.NotContains(t, runSection(t, page, hex), "not_run", "a run that ran every step")
		}
	}
	assert.Positive(t, drawn)
}

// The page writes every time one way: RFC 3339, UTC, milliseconds (it had
// "…T22:15:58Z" in its header and "… 22:15:38.309Z" in its runs).
func TestReportOneTimeFormat(t *testing.T) {
	page, _ := reportOf(t, fewRuns())
	body := page[strings.Index(page, "<body"):]
	stamps := regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d)?(\.\d+)?Z?`).FindAllString(body, -1)
	require.GreaterOrEqual(t, len(stamps), 4, "the generation, the range and the runs' starts")
	for _, s := range stamps {
		assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, s)
	}
}
