package main

import (
	"cmp"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// runView is one run rebuilt from its trace, as the demo's terminal
// waterfall draws it: its calls, each call's attempts and waits, on one
// time axis from the run's start. Times are offsets from origin.
type runView struct {
	trace     pcommon.TraceID
	origin    time.Time
	budget    time.Duration // 0: unknown (no run span nor call span said it)
	used      time.Duration // from the start to the last span's end
	outcome   string        // the run span's deadline.run.outcome, else derived
	exhausted string        // the run span's deadline.run.exhausted_by
	calls     []callView
	failed    bool // a call's verdict is not ok, or the outcome is not ok
}

// callView is one call (a step) of a run.
type callView struct {
	step       string
	start, end time.Duration
	verdict    string
	reason     string // stop reason
	remaining  time.Duration
	hasLeft    bool
	left       time.Duration // budget left at the end
	boundBy    string        // which deadline bound the call: run, context, attempt
	attempts   []attemptView
}

// attemptView is one attempt of a call, and the wait chosen after it.
type attemptView struct {
	number    int
	start     time.Duration
	used      time.Duration
	granted   time.Duration
	limitedBy string
	endedBy   string
	wait      time.Duration
	hasWait   bool
	waitFits  bool
	waitFrom  string // policy or retry_after
	status    int64  // the HTTP response status, 0: none
}

// The values of callView.boundBy.
const (
	boundRun     = "the run's deadline"
	boundContext = "the caller's context"
	boundAttempt = "an enclosing attempt"
)

// boundSlack is how much earlier than the run's deadline a call's must end
// to be told apart from it: the attributes are whole milliseconds.
const boundSlack = 2 * time.Millisecond

// buildRuns rebuilds the runs of ds's traces that hold call spans.
func buildRuns(ds *dataset) []runView {
	byTrace := map[pcommon.TraceID][]spanView{}
	for _, sv := range ds.traced {
		byTrace[sv.trace] = append(byTrace[sv.trace], sv)
	}
	var runs []runView
	for id, spans := range byTrace {
		if r, ok := buildRun(id, spans); ok {
			runs = append(runs, r)
		}
	}
	slices.SortFunc(runs, func(a, b runView) int {
		return cmp.Or(a.origin.Compare(b.origin), slices.Compare(a.trace[:], b.trace[:]))
	})
	return runs
}

func isCall(sv spanView) bool    { return sv.str(attrStep) != "" && sv.str(attrVerdict) != "" }
func isAttempt(sv spanView) bool { return sv.str(attrStep) != "" && sv.str(attrEndedBy) != "" }

func buildRun(id pcommon.TraceID, spans []spanView) (runView, bool) {
	r := runView{trace: id}
	var root *spanView
	byID := map[pcommon.SpanID]spanView{}
	var calls []spanView
	for i, sv := range spans {
		byID[sv.id] = sv
		switch {
		case isCall(sv):
			calls = append(calls, sv)
		case isAttempt(sv):
		case sv.str(attribute(otelbudget.AttrRunOutcome)) != "" || sv.attrs[string(otelbudget.AttrBudgetMs)] != nil:
			if root == nil || sv.start.Before(root.start) {
				root = &spans[i]
			}
		}
	}
	if len(calls) == 0 {
		return r, false
	}
	slices.SortStableFunc(calls, func(a, b spanView) int { return a.start.Compare(b.start) })
	r.origin = calls[0].start
	if root != nil {
		r.origin = root.start
		r.outcome = root.str(attribute(otelbudget.AttrRunOutcome))
		r.exhausted = root.str(attribute(otelbudget.AttrRunExhaustedBy))
		if b, ok := root.int(attribute(otelbudget.AttrBudgetMs)); ok {
			r.budget = time.Duration(b) * time.Millisecond
		}
	}
	if r.budget == 0 {
		if b, ok := calls[0].int(attribute(otelbudget.AttrBudgetMs)); ok {
			r.budget = time.Duration(b) * time.Millisecond
		}
	}
	attempts := map[pcommon.SpanID][]spanView{}
	for _, sv := range spans {
		if isAttempt(sv) {
			attempts[sv.parent] = append(attempts[sv.parent], sv)
		}
	}
	var last time.Time
	for _, c := range calls {
		cv := callView{step: c.str(attrStep), start: c.start.Sub(r.origin), end: c.end.Sub(r.origin),
			verdict: c.str(attrVerdict), reason: c.str(attribute(otelbudget.AttrStopReason))}
		if v, ok := c.int(attribute(otelbudget.AttrRemainingAtStartMs)); ok {
			cv.remaining = time.Duration(v) * time.Millisecond
		}
		if v, ok := c.int(attribute(otelbudget.AttrRemainingMs)); ok {
			cv.left, cv.hasLeft = time.Duration(v)*time.Millisecond, true
		}
		cv.boundBy = boundRun
		switch parent, ok := byID[c.parent]; {
		case ok && isAttempt(parent):
			cv.boundBy = boundAttempt
		case r.budget > 0 && cv.remaining > 0 && cv.start+cv.remaining < r.budget-boundSlack:
			cv.boundBy = boundContext
		}
		as := attempts[c.id]
		slices.SortStableFunc(as, func(a, b spanView) int { return a.start.Compare(b.start) })
		for _, a := range as {
			av := attemptView{start: a.start.Sub(r.origin), used: a.end.Sub(a.start),
				limitedBy: a.str(attribute(otelbudget.AttrAttemptLimitedBy)), endedBy: a.str(attrEndedBy), status: a.status}
			if n, ok := a.int(attrNumber); ok {
				av.number = int(n)
			}
			if g, ok := a.int(attrGrantedMs); ok {
				av.granted = time.Duration(g) * time.Millisecond
			}
			if w, ok := a.int(attribute(otelbudget.AttrBackoffDelayMs)); ok {
				av.wait, av.hasWait = time.Duration(w)*time.Millisecond, true
				av.waitFits, _ = a.bool(attribute(otelbudget.AttrBackoffFits))
				av.waitFrom = a.str(attribute(otelbudget.AttrBackoffSource))
			}
			cv.attempts = append(cv.attempts, av)
			if a.end.After(last) {
				last = a.end
			}
		}
		if c.end.After(last) {
			last = c.end
		}
		if cv.verdict != "ok" {
			r.failed = true
		}
		r.calls = append(r.calls, cv)
	}
	if root != nil && root.end.After(last) {
		last = root.end
	}
	r.used = last.Sub(r.origin)
	if r.outcome == "" {
		r.outcome = deriveOutcome(r.calls)
	}
	r.failed = r.failed || r.outcome != "ok"
	return r, true
}

// deriveOutcome is the run's deadline.run.outcome when no run span says it,
// by otelbudget's rule: ok when every call succeeded; canceled when one was
// canceled; budget_exhausted when the budget stopped one (refused, a wait
// that did not fit, cut by the deadline); else failed.
func deriveOutcome(calls []callView) string {
	outcome := otelbudget.RunOK
	for _, c := range calls {
		switch {
		case c.verdict == "ok":
		case c.reason == deadline.ReasonCanceled.String():
			return otelbudget.RunCanceled
		case budgetReasons[c.reason]:
			outcome = otelbudget.RunBudgetExhausted
		case outcome == otelbudget.RunOK:
			outcome = otelbudget.RunFailed
		}
	}
	return outcome
}

// budgetReasons are the stop reasons of deadline.Reason.Budget: the budget
// stopped the call.
var budgetReasons = func() map[string]bool {
	m := map[string]bool{}
	for r := range deadline.Reason(64) {
		if r.Budget() {
			m[r.String()] = true
		}
	}
	return m
}()

// chooseRuns returns up to n failed runs, then up to n of the slowest runs
// that did not fail. The failed runs are one of each kind first (their
// outcome and failed calls' verdicts: a run too slow beside one whose
// budget was too small), the slowest of each, then the slowest others.
func chooseRuns(runs []runView, n int) []runView {
	var failed, ok []runView
	for _, r := range runs {
		if r.failed {
			failed = append(failed, r)
		} else {
			ok = append(ok, r)
		}
	}
	slowest := func(a, b runView) int { return cmp.Compare(b.used, a.used) }
	slices.SortStableFunc(failed, slowest)
	slices.SortStableFunc(ok, slowest)
	chosen := diverse(failed, n, func(r runView) string {
		k := r.outcome
		for _, c := range r.calls {
			if c.verdict != "ok" {
				k += " " + c.step + "=" + c.verdict
			}
		}
		return k
	})
	return append(chosen, ok[:min(n, len(ok))]...)
}

// diverse returns up to n of rs, in their order: the first of each kind,
// then the others.
func diverse[T any](rs []T, n int, kind func(T) string) []T {
	var first, rest []T
	seen := map[string]bool{}
	for _, r := range rs {
		if k := kind(r); !seen[k] {
			seen[k] = true
			first = append(first, r)
		} else {
			rest = append(rest, r)
		}
	}
	all := append(first, rest...)
	return all[:min(n, len(all))]
}
