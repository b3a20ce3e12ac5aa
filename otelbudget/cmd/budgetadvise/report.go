package main

import (
	"errors"
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/deadline/learn"
)

// The run report: one self-contained HTML page (inline CSS and SVG, no
// script, nothing fetched) with, per step, the attempts' latency
// distribution against the current and the suggested ceiling, the
// censored share and the verdicts; the data's date range; and the
// waterfall of the slowest and the failed runs, drawn as the demo's
// terminal waterfall is.

// reportCSS styles the page in light and dark mode (prefers-color-scheme);
// every colour is a variable, named by what it shows. Below 640px the
// waterfall's rows wrap: the text columns on one line, the bar under them
// at the full width.
const reportCSS = `
:root{--bg:#fff;--fg:#1b1f24;--muted:#57606a;--rule:#d0d7de;--panel:#f6f8fa;
--ok:#1a7f37;--bad:#cf222e;--lease:#b6c2cf;--wait:#bf8700;--cut:#e5838a;--done:#4f8fd6;
--ceiling:#0550ae;--suggested:#8250df}
@media (prefers-color-scheme: dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--rule:#30363d;--panel:#161b22;
--ok:#3fb950;--bad:#f85149;--lease:#3d4752;--wait:#d29922;--cut:#a4434b;--done:#388bfd;
--ceiling:#79c0ff;--suggested:#d2a8ff}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1240px;padding:20px;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;overflow-wrap:break-word}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid var(--rule);padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
p{margin:6px 0}
.muted{color:var(--muted)}
.ts{white-space:nowrap}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,monospace}
.trace-id{user-select:all;-webkit-user-select:all;background:var(--panel);border:1px solid var(--rule);border-radius:4px;padding:0 4px;font-weight:400;word-break:break-all}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;background:var(--panel);border:1px solid var(--rule);border-radius:6px;padding:8px 12px;margin:12px 0}
.legend span{display:inline-flex;align-items:center;gap:6px}
.sw{display:inline-block;width:18px;height:10px;border-radius:2px}
.plan{background:var(--panel);border:1px solid var(--rule);border-left:4px solid var(--suggested);border-radius:6px;padding:8px 12px;margin:12px 0}
.steps{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(390px,100%),1fr));gap:12px}
.step{background:var(--panel);border:1px solid var(--rule);border-radius:6px;padding:10px 12px;min-width:0}
.step h3{margin-top:0}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
td,th{padding:2px 8px;text-align:left;vertical-align:middle}
th{color:var(--muted);font-weight:600}
.stats td:first-child{color:var(--muted);white-space:nowrap;padding-left:0;vertical-align:top}
.ok{color:var(--ok)}.bad{color:var(--bad)}
.verdict,.outcome{font-weight:600}
.wf{width:100%;margin:6px 0 4px;font-size:13px}
.wf td{border-top:1px solid var(--rule);white-space:nowrap}
.wf td.bar,.wf th.bar{width:46%;padding:0 4px}
.wf .track{position:relative;height:16px}
.wf .track svg{display:block;width:100%;height:16px}
.wf svg.mark{position:absolute;top:2px;width:12px;height:12px;overflow:visible}
.run{margin-bottom:18px}
.run h3{display:flex;flex-wrap:wrap;gap:4px 10px;align-items:baseline}
.axis{position:relative;height:1.4em;font-weight:400;font-size:12px}
.axis span{position:absolute;top:0;transform:translateX(-50%);white-space:nowrap}
.axis span:first-child{transform:none}.axis span:last-child{transform:translateX(-100%)}
.verdicts{margin:2px 0 0}
svg text{fill:var(--muted);font-size:11px}
.terms{display:grid;grid-template-columns:max-content 1fr;gap:4px 14px;margin:8px 0}
.terms dl{display:contents}
.terms dt{font-weight:600;white-space:nowrap}.terms dd{margin:0}
@media (max-width:640px){
body{padding:12px}
.terms{grid-template-columns:1fr}.terms dd{margin:0 0 6px 12px}
.wf,.wf tbody{display:block}
.wf tr{display:flex;flex-wrap:wrap;gap:0 10px;border-top:1px solid var(--rule);padding:2px 0}
.wf td{border-top:0;padding:0}
.wf th:not(.bar){display:none}
.wf td.bar,.wf th.bar{flex:0 0 100%;width:100%;padding:0}
}
`

// Colours by role, as CSS variables (the SVG uses them too).
const (
	colOK        = "var(--ok)"
	colBad       = "var(--bad)"
	colLease     = "var(--lease)"
	colWait      = "var(--wait)"
	colCut       = "var(--cut)"
	colDone      = "var(--done)"
	colCeiling   = "var(--ceiling)"
	colSuggested = "var(--suggested)"
)

// reportMeta is the report's provenance: when it was generated, from
// which inputs, by which build of budgetadvise.
type reportMeta struct {
	generated time.Time
	inputs    []string
	version   string
}

// toolVersion is budgetadvise's version as its build records it: the
// module version (a release tag, or "(devel)" for a build from a clone)
// and, when the build stamped it, the commit.
func toolVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+modified"
			}
		}
	}
	if rev != "" {
		v += " " + rev[:min(12, len(rev))] + dirty
	}
	return v + ", " + bi.GoVersion
}

// ts formats t as a timestamp that never wraps: UTC, with its zone.
func ts(t time.Time, layout string) string {
	return "<span class=\"ts\">" + html.EscapeString(t.UTC().Format(layout)) + "</span>"
}

// reportTime is the page's one time format: RFC 3339 in UTC with
// milliseconds and Z, for the page's generation, the data's range, a
// step's window and a run's start alike.
const reportTime = "2006-01-02T15:04:05.000Z"

// writeReport writes the HTML run report of rep and the runs of ds,
// drawing up to maxRuns failed and maxRuns of the slowest runs.
func writeReport(w io.Writer, rep report, ds *dataset, maxRuns int, meta reportMeta) error {
	var b strings.Builder
	e := html.EscapeString
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<meta name=\"color-scheme\" content=\"light dark\">\n<title>budgetadvise: run report</title>\n<style>")
	b.WriteString(reportCSS)
	b.WriteString("</style></head><body>\n<h1>Deadline budget: run report</h1>\n")
	runs := buildRuns(ds)
	var names []string
	for _, in := range meta.inputs {
		names = append(names, fmt.Sprintf("<code title=\"%s\">%s</code>", e(in), e(filepath.Base(in))))
	}
	fmt.Fprintf(&b, "<p id=\"provenance\" class=\"muted\">Generated <time class=\"ts\">%s</time> by budgetadvise %s from %s.</p>\n",
		e(meta.generated.UTC().Format(reportTime)), e(meta.version), strings.Join(names, ", "))
	fmt.Fprintf(&b, "<p class=\"muted\" id=\"range\">Data from %s to %s · %s · %s, %s.</p>\n",
		ts(rep.From, reportTime), ts(rep.To, reportTime), plural(len(runs), "run"),
		plural(rep.Inputs["spans"], "attempt or call span"), plural(rep.Inputs["metric_points"], "attempt-duration point"))
	if rep.OpenedRuns > 0 {
		fmt.Fprintf(&b, "<p id=\"opened\">%d of %d runs are from a learning run: their ceilings were opened to the run's budget (%s), so that no attempt is cut and the tail can be measured; the configured ceilings below are the other runs'.</p>\n",
			rep.OpenedRuns, len(runs), e(openedList(rep)))
	}
	writePlan(&b, rep, runs)
	writeLegend(&b)

	b.WriteString("<h2>Steps</h2>\n")
	if m := rep.MoreRuns; m != nil {
		fmt.Fprintf(&b, "<p id=\"more-runs\">Too few attempts to suggest a ceiling: %s has %d of the %d needed. Record about %d runs of the service (its spans, as your Collector exports them); for the demo's data, <code>%s</code> %s.</p>\n",
			e(m.Step), m.Have, m.Needed, m.Runs, e(m.Command), demoWhere)
	}
	b.WriteString("<p class=\"muted\">Each card: the step's attempt durations on one time axis shared by every card (so that steps compare), " +
		"its vertical scale its own (the steps' attempt counts differ); the configured ceiling solid, the suggested one dashed.</p>\n")
	b.WriteString("<div class=\"steps\">\n")
	axis := histAxisOf(rep.Steps)
	for _, s := range rep.Steps {
		writeStepPanel(&b, s, axis)
	}
	b.WriteString("</div>\n")

	chosen := chooseRuns(runs, maxRuns)
	nFailed := 0
	for _, r := range runs {
		if r.failed {
			nFailed++
		}
	}
	b.WriteString("<h2>Runs</h2>\n")
	switch {
	case len(runs) == 0:
	case nFailed == 0:
		fmt.Fprintf(&b, "<p id=\"no-failed\">No run failed: all %s read ended <span class=\"outcome ok\">ok</span>. The %d slowest are drawn.</p>\n",
			plural(len(runs), "run"), min(maxRuns, len(runs)))
	default:
		fmt.Fprintf(&b, "<p class=\"muted\">%d of %s failed: up to %d of them are drawn (the slowest of each kind of failure first), then the %d slowest of the others. "+
			"Each row is an attempt, a backoff wait or a refusal, on one time axis spanning the run's budget. "+
			"Every call is bound by the run's deadline unless its verdict says otherwise.</p>\n",
			nFailed, plural(len(runs), "run"), maxRuns, maxRuns)
	}
	order := planOrder(ds)
	for _, r := range chosen {
		writeRunWaterfall(&b, r, order)
	}
	if len(chosen) == 0 {
		b.WriteString("<p>No run: the input holds no call spans (metrics alone do not tell runs apart).</p>\n")
	}
	writeTerms(&b)
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// openedList names the opened ceilings: "1s for search, fetch, extract".
func openedList(rep report) string {
	by := map[float64][]string{}
	for _, s := range rep.Steps {
		if s.OpenedCeilingMs > 0 && s.Source == "traces" {
			by[s.OpenedCeilingMs] = append(by[s.OpenedCeilingMs], s.Step)
		}
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmtMs(c)+" for "+strings.Join(by[c], ", "))
	}
	return strings.Join(parts, "; ")
}

// writePlan writes the plan's budget: the runs' configured budget beside
// the suggested one, or what blocks a suggestion, in words.
func writePlan(b *strings.Builder, rep report, runs []runView) {
	br := rep.Budget
	if br == nil {
		return
	}
	e := html.EscapeString
	budgets := map[time.Duration]uint64{}
	for _, r := range runs {
		if r.budget > 0 {
			budgets[r.budget]++
		}
	}
	cur := "not in the data"
	if c := mostCommon(budgets); c > 0 {
		cur = fmtDur(c)
		if len(budgets) > 1 {
			cur += fmt.Sprintf(" (%d of %d runs)", budgets[c], len(runs))
		}
	}
	fmt.Fprintf(b, "<div id=\"plan\" class=\"plan\">Budget of the plan %s: configured <b class=\"budget-current\">%s</b> → ",
		e(strings.Join(br.Steps, " → ")), e(cur))
	if br.Error == "" {
		fmt.Fprintf(b, "suggested <b class=\"budget-suggested\">%s</b> <span class=\"muted\">(P(success) %.4f for a target of %g, from the %s)</span></div>\n",
			e(fmtDur(br.budget)), br.Success, br.Target, e(br.Source))
		return
	}
	fmt.Fprintf(b, "no suggestion: %s.</div>\n", e(blockedBudget(rep)))
}

// blockedBudget says in words what keeps the plan from a suggested budget.
func blockedBudget(rep report) string {
	br := rep.Budget
	for _, s := range rep.Steps {
		if s.Source != br.Source || s.err == nil || !slices.Contains(br.Steps, s.Step) {
			continue
		}
		var ne *learn.NotEnoughSamplesError
		switch {
		case errors.As(s.err, &ne):
			return fmt.Sprintf("%s has %d of the %d attempts a suggestion needs; record more runs", s.Step, ne.Samples, ne.Min)
		case s.Censored && s.DeadlineCuts > s.CeilingTimeouts:
			return fmt.Sprintf("%s's attempts were cut by the run's deadline too often (%.1f%%, more than %.3g%%) to know its p%g: "+
				"its tail is above those cuts (up to %s); runs with a larger budget would show it", s.Step, 100*s.CensoredShare,
				100*(1-s.sug.Quantile), 100*s.sug.Quantile, fmtMs(s.RaiseAboveMs))
		case s.Censored:
			return fmt.Sprintf("%s's attempts were cut at its %s ceiling too often (%.1f%%) to know its p%g: raise its ceiling above %s "+
				"(or record a learning run with the ceilings opened to the budget)", s.Step, fmtMs(s.CurrentCeilingMs), 100*s.CensoredShare, 100*s.sug.Quantile, fmtMs(s.RaiseAboveMs))
		}
	}
	switch {
	case errors.Is(br.err, learn.ErrNoSuccesses):
		return "a step of the plan has no successful attempt in the data"
	case errors.Is(br.err, learn.ErrNoSamples):
		return "a step of the plan has no attempt in the data"
	}
	return fmt.Sprintf("no budget reaches P(success) %g with these attempts", br.Target)
}

func writeLegend(b *strings.Builder) {
	b.WriteString("<div class=\"legend\" id=\"legend\"><b>Colours</b>\n")
	for _, l := range []struct{ col, what string }{
		{colDone, "completed attempts (histogram)"},
		{colCut, "attempts cut by a limit (histogram)"},
		{colCeiling, "configured ceiling (solid line)"},
		{colSuggested, "suggested ceiling (dashed line)"},
		{colOK, "attempt time used, completed"},
		{colBad, "attempt time used, failed or cut; ✕ a refusal or a wait that did not fit"},
		{colLease, "lease granted, not used"},
		{colWait, "backoff wait"},
	} {
		fmt.Fprintf(b, "<span><i class=\"sw\" style=\"background:%s\"></i>%s</span>\n", l.col, html.EscapeString(l.what))
	}
	b.WriteString("<span><a href=\"#terms\">The words used, explained</a></span>\n</div>\n")
}

// The words the page uses, explained once, at its end: the run outcomes
// (deadline.run.outcome) and the call verdicts (deadline.verdict), the
// words of the span attributes and of the demo's terminal, then the
// statistics' terms.
var (
	outcomeTerms = []struct{ word, what string }{
		{"ok", "the run (deadline.run.outcome) or the call (deadline.verdict) succeeded."},
		{"budget_exhausted", "a run outcome: the budget stopped one of its steps (refused below the floor, a wait that did not fit, an attempt cut by the deadline); the run header names that step and what happened."},
		{"failed", "a run outcome: a step failed for a reason other than the budget (its attempts were exhausted, an error that is not retried)."},
		{"canceled", "the caller canceled the run or the call: not an error of the budget nor of the operation."},
		{"operation_too_slow", "a call verdict: at least one attempt ran its whole ceiling and was cut by it. The operation was too slow for its ceiling: raise the ceiling (see the suggested one) or make the operation faster; a larger budget would not help."},
		{"deadline_too_small", "a call verdict: the run's deadline stopped the call (refused, a backoff that did not fit, an attempt cut by the deadline) while no attempt had reached its ceiling. The budget was too small for the plan."},
		{"throttled", "a call verdict: the server's Retry-After asked for a wait longer than what was left of the budget."},
		{"retries_throttled", "a call verdict: the shared retry budget denied a retry (many callers failing at once)."},
		{"downstream_overloaded", "a call verdict: the downstream was at its capacity and the call was not sent: the policy's Limiter refused it (its queue full, or the call could not finish from its place in it) or client-side throttling dropped it. Neither the deadline nor the operation ended it, but the downstream's capacity."},
		{"downstream_open", "a call verdict: the Limiter's breaker was open (the downstream has been failing), and nothing was sent."},
		{notRun, "a step of the plan that did not start: a step before it stopped the run."},
		{"operation_failed", "a call verdict: the operation failed on errors (not retryable, or its attempts exhausted on errors)."},
	}
	statTerms = []struct{ term, what string }{
		{"completed, own", "the percentiles of the attempts that no limit cut, on their own: what a dashboard of their durations shows. It leaves out the cut attempts, so it understates a tail that a ceiling cuts."},
		{"censored", "an attempt cut by a limit (its ceiling or the deadline): how long it would have taken is unknown, only that it is longer than its cut. The share cut is the censored share."},
		{"Kaplan–Meier", "the estimate of the whole duration distribution that counts each censored attempt as longer than its cut, as deadline/learn does. A percentile above the cuts is unknown, and said so; the suggested ceiling is its p99 times the margin."},
	}
)

func writeTerms(b *strings.Builder) {
	b.WriteString("<h2 id=\"terms\">How to read this page</h2>\n<p>The outcomes and verdicts are the span attributes' words (docs/attributes.md), as the demo's terminal prints them.</p>\n<div class=\"terms\">\n<dl id=\"outcomes\">\n")
	for _, t := range outcomeTerms {
		fmt.Fprintf(b, "<dt>%s</dt><dd>%s</dd>\n", t.word, html.EscapeString(t.what))
	}
	b.WriteString("</dl>\n<dl id=\"stat-terms\">\n")
	for _, t := range statTerms {
		fmt.Fprintf(b, "<dt><dfn id=\"term-%s\">%s</dfn></dt>\n<dd>%s</dd>\n", strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
				return r
			}
			return -1
		}, t.term), html.EscapeString(t.term), html.EscapeString(t.what))
	}
	b.WriteString("</dl>\n</div>\n")
}

// share is n of total as a percentage with one decimal that never rounds
// to a whole it is not: 2 003 of 2 004 is ">99.9%", not "100.0%", and 1
// of 2 004 "<0.1%", not "0.0%".
func share(n, total uint64) string {
	switch {
	case total == 0:
		return "–"
	case n == total:
		return "100%"
	case n == 0:
		return "0%"
	}
	p := fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
	switch p {
	case "100.0%":
		return ">99.9%"
	case "0.0%":
		return "<0.1%"
	}
	return p
}

// writeStepPanel writes a step's numbers and its latency histogram.
func writeStepPanel(b *strings.Builder, s stepReport, axis histAxis) {
	e := html.EscapeString
	fmt.Fprintf(b, "<section class=\"step\" data-step=\"%s\" data-source=\"%s\"><h3>%s <span class=\"muted\">from %s</span></h3>\n",
		e(s.Step), e(s.Source), e(s.Step), e(s.Source))
	if s.Attempts == 0 {
		fmt.Fprintf(b, "<p>Verdicts %s; %s</p></section>\n", e(fmtCounts(s.Verdicts)), e(s.NoSuggestion))
		return
	}
	if s.data != nil && len(s.data.bins) > 0 {
		b.WriteString(histogramSVG(s, axis))
	}
	b.WriteString("<table class=\"stats\">\n")
	row := func(k, v string) { fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td></tr>\n", e(k), v) }
	row("attempts", fmt.Sprintf("%d · %d succeeded (%s) · %s", s.Attempts, s.Successes, share(s.Successes, s.Attempts), plural(int(s.Errors), "error")))
	row("cut by a limit", fmt.Sprintf("<b class=\"censored\">%.1f%%</b> censored (ceiling timeouts %d, deadline cuts %d)", 100*s.CensoredShare, s.CeilingTimeouts, s.DeadlineCuts))
	row("completed, own", fmt.Sprintf("%s <span class=\"muted\">(%d attempts)</span>", e(fmtQuantiles(s.CompletedMs, "none")), s.Completed))
	if s.Completed == s.Attempts {
		row("Kaplan–Meier", "the same: no attempt was cut")
	} else {
		row("Kaplan–Meier", e(fmtQuantiles(s.KaplanMeierMs, "unknown (above the cuts)")))
	}
	cur := "none seen"
	switch {
	case s.CurrentCeilingMs > 0 && s.CurrentCeilingMs == s.OpenedCeilingMs:
		cur = "not in the data (every run opened it to " + fmtMs(s.OpenedCeilingMs) + ")"
	case s.CurrentCeilingMs > 0:
		cur = fmtMs(s.CurrentCeilingMs)
	}
	sug := "no suggestion: " + e(shortNoSuggestion(s))
	if s.SuggestedCeilingMs > 0 {
		sug = fmt.Sprintf("suggested <b class=\"ceiling-suggested\">%s</b> <span class=\"muted\">(Kaplan–Meier p%g %s × %g)</span>", e(fmtMs(s.SuggestedCeilingMs)),
			100*s.sug.Quantile, e(fmtMs(ms(s.sug.Estimate))), s.sug.Margin)
	}
	fmt.Fprintf(b, "<tr class=\"ceiling\"><td>ceiling</td><td>configured <b class=\"ceiling-current\">%s</b> → %s</td></tr>\n", e(cur), sug)
	if len(s.Verdicts) > 0 {
		var vs []string
		for _, k := range slices.Sorted(maps.Keys(s.Verdicts)) {
			vs = append(vs, fmt.Sprintf("<span class=\"verdict %s\">%s</span> %d", okClass(k), e(k), s.Verdicts[k]))
		}
		row("verdicts", strings.Join(vs, " · "))
	}
	row("window", ts(s.First, reportTime)+" … "+ts(s.Last, reportTime))
	b.WriteString("</table></section>\n")
}

// shortNoSuggestion says in a few words why s has no suggested ceiling.
func shortNoSuggestion(s stepReport) string {
	var ne *learn.NotEnoughSamplesError
	switch {
	case errors.As(s.err, &ne):
		return fmt.Sprintf("%d of the %d attempts needed", ne.Samples, ne.Min)
	case s.Censored && s.DeadlineCuts > s.CeilingTimeouts:
		return fmt.Sprintf("%.1f%% of the attempts were cut by the run's deadline, more than 1 − %g, so p%g is above the cuts (up to %s): runs with a larger budget would show it",
			100*s.CensoredShare, s.sug.Quantile, 100*s.sug.Quantile, fmtMs(s.RaiseAboveMs))
	case s.Censored:
		return fmt.Sprintf("%.1f%% of the attempts were cut, more than 1 − %g, so p%g is above the cut: raise the ceiling above %s",
			100*s.CensoredShare, s.sug.Quantile, 100*s.sug.Quantile, fmtMs(s.RaiseAboveMs))
	}
	return s.NoSuggestion
}

func okClass(v string) string {
	if v == "ok" {
		return "ok"
	}
	return "bad"
}

// histAxis is the time axis every histogram card shares: a log scale in
// ms from lo to hi, both round (1, 2 or 5 times a power of ten).
type histAxis struct{ lo, hi float64 }

// histAxisOf spans every step's attempts and ceilings.
func histAxisOf(steps []stepReport) histAxis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range steps {
		if s.data == nil {
			continue
		}
		for k := range s.data.bins {
			if k == math.MinInt32 {
				continue
			}
			lo = min(lo, math.Exp2(float64(k)/4)/1e6)
			hi = max(hi, math.Exp2(float64(k+1)/4)/1e6)
		}
		for _, c := range []float64{s.CurrentCeilingMs, s.SuggestedCeilingMs} {
			if c > 0 {
				lo, hi = min(lo, c), max(hi, c)
			}
		}
	}
	if math.IsInf(lo, 0) {
		return histAxis{1, 1000}
	}
	a := histAxis{lo: roundDown(lo), hi: roundUp(hi * 1.05)}
	if a.hi <= a.lo {
		a.hi = roundUp(a.lo * 1.01)
	}
	return a
}

// niceSteps are the mantissas of round numbers.
var niceSteps = []float64{1, 2, 5}

// roundDown is the largest 1, 2 or 5 times a power of ten at or below v > 0.
func roundDown(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	best := e
	for _, m := range niceSteps {
		if m*e <= v*(1+1e-9) {
			best = m * e
		}
	}
	return best
}

// roundUp is the smallest 1, 2 or 5 times a power of ten at or above v > 0.
func roundUp(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range append(niceSteps, 10) {
		if m*e >= v*(1-1e-9) {
			return m * e
		}
	}
	return 10 * e
}

// ticks are the round values in [a.lo, a.hi]: 1, 2 and 5 times each power
// of ten, only the powers of ten when that would crowd the axis.
func (a histAxis) ticks() []float64 {
	var all, decades []float64
	for e := math.Floor(math.Log10(a.lo)); math.Pow(10, e) <= a.hi*(1+1e-9); e++ {
		for _, m := range niceSteps {
			v := m * math.Pow(10, e)
			if v >= a.lo*(1-1e-9) && v <= a.hi*(1+1e-9) {
				all = append(all, v)
				if m == 1 {
					decades = append(decades, v)
				}
			}
		}
	}
	if len(all) > 7 && len(decades) >= 3 {
		return decades
	}
	return all
}

// fmtTick formats a round duration in ms: "500µs", "20ms", "1s".
func fmtTick(v float64) string {
	return time.Duration(math.Round(v * 1e6)).String()
}

// histogramSVG draws s's attempt durations on the shared log axis (4 bins
// per doubling): completed and cut stacked, the configured ceiling a solid
// line, the suggested one dashed; both axes titled, ticks at round values.
func histogramSVG(s stepReport, axis histAxis) string {
	bins := s.data.bins
	var top uint64
	for k, c := range bins {
		if k != math.MinInt32 {
			top = max(top, c[0]+c[1])
		}
	}
	if top == 0 {
		return ""
	}
	const W, H, left, right, bottom, topPad = 400.0, 178.0, 44.0, 10.0, 36.0, 30.0
	plotH := H - bottom - topPad
	x := func(msv float64) float64 {
		return left + (W-left-right)*(math.Log(msv)-math.Log(axis.lo))/(math.Log(axis.hi)-math.Log(axis.lo))
	}
	ystep := roundDown(float64(top) / 3)
	if ystep < 1 {
		ystep = 1
	}
	ymax := max(float64(top), ystep*3)
	y := func(v float64) float64 { return plotH * v / ymax }
	// No viewBox: the SVG is as wide as its card and H px high, its
	// horizontal positions are percentages of its width and its vertical
	// ones CSS pixels, so that its text keeps the page's 11 px font at any
	// card width instead of scaling with the drawing.
	pc := func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v/W) }
	var b strings.Builder
	fmt.Fprintf(&b, "<svg class=\"hist\" width=\"100%%\" height=\"%g\" role=\"img\" aria-label=\"attempt durations of %s\">\n", H, html.EscapeString(s.Step))
	base := H - bottom
	fmt.Fprintf(&b, "<line x1=\"%s\" y1=\"%g\" x2=\"%s\" y2=\"%g\" stroke=\"var(--rule)\"/>", pc(left), base, pc(W-right), base)
	fmt.Fprintf(&b, "<line x1=\"%s\" y1=\"%g\" x2=\"%s\" y2=\"%g\" stroke=\"var(--rule)\"/>\n", pc(left), topPad, pc(left), base)
	for v := 0.0; v <= ymax+1e-9; v += ystep {
		yy := base - y(v)
		fmt.Fprintf(&b, "<text class=\"ytick\" x=\"%s\" y=\"%.1f\" text-anchor=\"end\">%g</text>", pc(left-4), yy+4, v)
		if v > 0 {
			fmt.Fprintf(&b, "<line x1=\"%s\" y1=\"%.1f\" x2=\"%s\" y2=\"%.1f\" stroke=\"var(--rule)\" stroke-dasharray=\"2 3\"/>", pc(left), yy, pc(W-right), yy)
		}
	}
	fmt.Fprintf(&b, "<text class=\"ytitle\" transform=\"translate(10 %g) rotate(-90)\" text-anchor=\"middle\">attempts</text>\n", topPad+plotH/2)
	for _, k := range slices.Sorted(maps.Keys(bins)) {
		if k == math.MinInt32 {
			continue
		}
		c := bins[k]
		x0, x1 := x(math.Exp2(float64(k)/4)/1e6), x(math.Exp2(float64(k+1)/4)/1e6)
		if x1 < left || x0 > W-right {
			continue
		}
		w := max(0.5, x1-x0-0.5)
		h0, h1 := y(float64(c[0])), y(float64(c[1]))
		if c[0] > 0 {
			fmt.Fprintf(&b, "<rect x=\"%s\" y=\"%.1f\" width=\"%s\" height=\"%.1f\" fill=\"%s\"/>", pc(x0), base-h0, pc(w), h0, colDone)
		}
		if c[1] > 0 {
			fmt.Fprintf(&b, "<rect x=\"%s\" y=\"%.1f\" width=\"%s\" height=\"%.1f\" fill=\"%s\"/>", pc(x0), base-h0-h1, pc(w), h1, colCut)
		}
	}
	b.WriteString("\n")
	for _, v := range axis.ticks() {
		fmt.Fprintf(&b, "<line x1=\"%s\" y1=\"%g\" x2=\"%s\" y2=\"%g\" stroke=\"var(--rule)\"/><text class=\"xtick\" x=\"%s\" y=\"%g\" text-anchor=\"middle\">%s</text>",
			pc(x(v)), base, pc(x(v)), base+4, pc(x(v)), base+15, fmtTick(v))
	}
	fmt.Fprintf(&b, "\n<text class=\"xtitle\" x=\"%s\" y=\"%g\" text-anchor=\"middle\">attempt duration (ms, log scale)</text>\n", pc(left+(W-left-right)/2), H-4)
	mark := func(c float64, col, dash, label string, row int) {
		if c <= 0 {
			return
		}
		px := x(c)
		fmt.Fprintf(&b, "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%g\" stroke=\"%s\" stroke-width=\"2\"%s/>", pc(px), 14*row+2, pc(px), base, col, dash)
		anchor, tx := "start", px+4
		if px > W-120 {
			anchor, tx = "end", px-4
		}
		fmt.Fprintf(&b, "<text x=\"%s\" y=\"%d\" text-anchor=\"%s\" style=\"fill:%s\">%s %s</text>\n", pc(tx), 12+14*row, anchor, col, label, fmtMs(c))
	}
	if s.CurrentCeilingMs != s.OpenedCeilingMs {
		mark(s.CurrentCeilingMs, colCeiling, "", "configured", 0)
	}
	mark(s.SuggestedCeilingMs, colSuggested, " stroke-dasharray=\"5 3\"", "suggested", 1)
	b.WriteString("</svg>\n")
	return b.String()
}

// endedText says how an attempt ended, as the demo's terminal does: its
// HTTP status when it has one, else its ended_by.
func endedText(a attemptView) string {
	if a.status != 0 && a.endedBy != "completed" {
		return fmt.Sprintf("HTTP %d", a.status)
	}
	return a.endedBy
}

// whatHappened says, for a failed run, which call ended it and how: the
// answer to "too small or too slow?" in words.
func whatHappened(r runView) string {
	for _, c := range r.calls {
		if c.verdict == "ok" {
			continue
		}
		what := c.step + ": " + c.verdict + ", "
		var cut int
		for _, a := range c.attempts {
			if a.endedBy == "attempt_timeout" {
				cut++
			}
		}
		switch {
		case c.reason == "retry_after_exceeds_budget" || c.reason == "backoff_exceeds_budget":
			src := "a backoff of "
			if c.reason == "retry_after_exceeds_budget" {
				src = "the server's Retry-After "
			}
			if n := len(c.attempts); n > 0 && c.attempts[n-1].hasWait {
				what += src + fmtDur(c.attempts[n-1].wait) + " did not fit"
				if c.hasLeft {
					what += " in the " + fmtDur(c.left) + " left"
				}
			} else {
				what += strings.ReplaceAll(c.reason, "_", " ")
			}
		case c.reason == "refused" || c.reason == "refused_learned":
			what += "refused before dialing"
			if c.hasLeft {
				what += ": " + fmtDur(c.left) + " left, not above the floor"
			}
		case cut > 0:
			what += fmt.Sprintf("%s ran the whole ceiling and were cut by it: the operation was too slow for its ceiling", plural(cut, "attempt"))
		case c.reason == "deadline_exceeded":
			what += "the run's deadline cut its attempt inside its ceiling: the budget was too small"
		default:
			what += c.reason + " after " + plural(len(c.attempts), "attempt")
		}
		return what + "."
	}
	return ""
}

// writeRunWaterfall writes one run as the terminal waterfall draws it: a
// row per attempt (its lease, the time it used, how it ended, which limit
// set the lease), a row per backoff wait, a row per refusal, then the
// calls' verdicts on one line.
//
// A failed run's steps of the plan (order) that it did not start are
// listed as not_run, as the terminal lists them.
func writeRunWaterfall(b *strings.Builder, r runView, order []string) {
	e := html.EscapeString
	budget := r.budget
	if budget <= 0 {
		budget = r.used
	}
	label := runLabel(r)
	fmt.Fprintf(b, "<section class=\"run\" data-trace=\"%x\"><h3><span>Run <code class=\"trace-id\">%x</code></span> <span class=\"outcome %s\" title=\"deadline.run.outcome: %s\">%s</span></h3>\n",
		r.trace[:], r.trace[:], okClass(label), e(r.outcome), e(label))
	fmt.Fprintf(b, "<p class=\"muted\">started <span class=\"run-start ts\">%s</span> · budget %s · used %s</p>\n",
		e(r.origin.UTC().Format(reportTime)), e(fmtDur(r.budget)), e(fmtDur(r.used)))
	if w := whatHappened(r); w != "" {
		fmt.Fprintf(b, "<p class=\"what\">%s</p>\n", e(w))
	}
	b.WriteString("<table class=\"wf\"><tr><th>step</th><th>try</th><th>lease, set by</th><th>used</th><th>ended</th><th class=\"bar\">")
	b.WriteString(axisLabels(budget))
	b.WriteString("</th></tr>\n")
	for _, c := range r.calls {
		name := c.step
		for _, a := range c.attempts {
			col := colBad
			if a.endedBy == "completed" {
				col = colOK
			}
			bar := newSVGBar(budget)
			if a.granted > a.used {
				bar.rect(a.start, a.granted, colLease)
			}
			bar.rect(a.start, a.used, col)
			lease := fmtDur(a.granted)
			if a.limitedBy != "" {
				lease += ", " + a.limitedBy
			}
			fmt.Fprintf(b, "<tr class=\"attempt\" data-step=\"%s\"><td>%s</td><td>#%d</td><td>%s</td><td>%s</td><td>%s</td><td class=\"bar\">%s</td></tr>\n",
				e(c.step), e(name), a.number, e(lease), e(fmtDur(a.used)), e(endedText(a)), bar.html())
			name = ""
			if a.hasWait {
				wb := newSVGBar(budget)
				ended := ""
				from := a.start + a.used
				if a.waitFits {
					wb.rect(from, a.wait, colWait)
				} else {
					wb.cross(from, colBad)
					ended = "did not fit"
				}
				src := "backoff"
				if a.waitFrom == "retry_after" {
					src = "Retry-After"
				}
				fmt.Fprintf(b, "<tr class=\"wait\"><td></td><td>wait</td><td>%s %s</td><td></td><td>%s</td><td class=\"bar\">%s</td></tr>\n",
					e(fmtDur(a.wait)), src, ended, wb.html())
			}
		}
		if c.reason == "refused" {
			rb := newSVGBar(budget)
			rb.cross(c.end, colBad)
			left := ""
			if c.hasLeft {
				left = fmtDur(c.left) + " left"
			}
			fmt.Fprintf(b, "<tr class=\"refusal\"><td>%s</td><td>–</td><td>refused</td><td></td><td>%s</td><td class=\"bar\">%s</td></tr>\n",
				e(name), e(left), rb.html())
		}
	}
	ran := map[string]bool{}
	for _, c := range r.calls {
		ran[c.step] = true
	}
	var skipped []string
	for _, step := range order {
		if r.failed && !ran[step] {
			skipped = append(skipped, step)
			fmt.Fprintf(b, "<tr class=\"notrun\" data-step=\"%s\"><td>%s</td><td>–</td><td>%s</td><td></td><td></td><td class=\"bar\"></td></tr>\n", e(step), e(step), notRun)
		}
	}
	b.WriteString("</table>\n<p class=\"verdicts\">")
	for i, c := range r.calls {
		if i > 0 {
			b.WriteString(" · ")
		}
		fmt.Fprintf(b, "<span class=\"call\">%s <span class=\"verdict %s\">%s</span> <span class=\"muted\">%s after %s",
			e(c.step), okClass(c.verdict), e(c.verdict), e(c.reason), plural(len(c.attempts), "attempt"))
		if c.boundBy != boundRun {
			fmt.Fprintf(b, ", bound by %s", e(c.boundBy))
		}
		b.WriteString("</span></span>")
	}
	for _, step := range skipped {
		fmt.Fprintf(b, " · <span class=\"call\">%s <span class=\"verdict bad\">%s</span></span>", e(step), notRun)
	}
	b.WriteString("</p></section>\n")
}

// notRun is the word for a step of the plan that a run did not start, the
// demo terminal's.
const notRun = "not_run"

// runLabel is the word a run's header gives it: for a failed run, the
// verdict of the first call that did not end ok, which says why (the
// terminal's word: throttled, operation_too_slow, deadline_too_small), where
// the run's outcome (budget_exhausted, failed) would only say that it
// failed: a run whose server asked for a longer Retry-After than was left
// is throttled, not out of budget; else the run's outcome.
func runLabel(r runView) string {
	for _, c := range r.calls {
		if c.verdict != "" && c.verdict != "ok" {
			return c.verdict
		}
	}
	return r.outcome
}

// tickStep is the round step (1, 2 or 5 times a power of ten) that cuts
// [0, budget] into at most 5 parts.
func tickStep(budget time.Duration) time.Duration {
	if budget <= 0 {
		return 0
	}
	return time.Duration(roundUp(float64(budget) / 5))
}

// axisLabels labels the waterfall's time axis at round values, each at
// its place on the bar, from 0 to the budget.
func axisLabels(budget time.Duration) string {
	var b strings.Builder
	b.WriteString("<div class=\"axis\">")
	step := tickStep(budget)
	if step <= 0 {
		b.WriteString("<span style=\"left:0%\">0</span></div>")
		return b.String()
	}
	for t := time.Duration(0); t <= budget; t += step {
		label := "0"
		if t > 0 {
			label = fmtDur(t)
		}
		fmt.Fprintf(&b, "<span style=\"left:%.2f%%\">%s</span>", 100*float64(t)/float64(budget), html.EscapeString(label))
	}
	b.WriteString("</div>")
	return b.String()
}

// svgBar is one waterfall row's time axis, spanning [0, budget].
type svgBar struct {
	budget time.Duration
	parts  strings.Builder
	marks  []string
}

func newSVGBar(budget time.Duration) *svgBar { return &svgBar{budget: budget} }

// pos is t's place on a 1000-wide axis, clamped to it.
func (s *svgBar) pos(t time.Duration) float64 {
	if s.budget <= 0 {
		return 0
	}
	return math.Max(0, math.Min(1000, 1000*float64(t)/float64(s.budget)))
}

// rect marks [from, from+d), at least one unit wide.
func (s *svgBar) rect(from, d time.Duration, col string) {
	x0, x1 := s.pos(from), s.pos(from+d)
	fmt.Fprintf(&s.parts, "<rect x=\"%.1f\" y=\"2\" width=\"%.1f\" height=\"12\" rx=\"1\" fill=\"%s\"/>", x0, math.Max(1.5, x1-x0), col)
}

// cross marks the instant at with ✕, drawn in its own square SVG over
// the bar (the bar's SVG is stretched to the row: a cross in it would be
// squashed).
func (s *svgBar) cross(at time.Duration, col string) {
	s.marks = append(s.marks, fmt.Sprintf("<svg class=\"mark\" viewBox=\"0 0 12 12\" style=\"left:calc(%.2f%% - 6px)\" aria-label=\"✕\">"+
		"<path d=\"M2 2 L10 10 M10 2 L2 10\" stroke=\"%s\" stroke-width=\"2.2\" stroke-linecap=\"round\" fill=\"none\"/></svg>", s.pos(at)/10, col))
}

// html is the row's bar: the stretched SVG of the rectangles, and the
// marks over it.
func (s *svgBar) html() string {
	return "<div class=\"track\"><svg viewBox=\"0 0 1000 16\" preserveAspectRatio=\"none\"><rect x=\"0\" y=\"7.5\" width=\"1000\" height=\"1\" fill=\"var(--rule)\"/>" +
		s.parts.String() + "</svg>" + strings.Join(s.marks, "") + "</div>"
}

// fmtDur formats d rounded to the millisecond, as the demo's waterfall.
func fmtDur(d time.Duration) string {
	r := d.Round(time.Millisecond)
	switch {
	case r == 0 && d > 0:
		return "<1ms"
	case r == 0:
		return "0ms"
	}
	return r.String()
}
